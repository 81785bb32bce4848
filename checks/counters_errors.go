package checks

import (
	"context"
	"fmt"
	"path"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// counterMeaning is what a nonzero error counter says, and the width of the
// legacy PMA counter (PortCounters) that saturates at 2^bits-1; 0 = 64-bit.
type counterMeaning struct {
	meaning string
	bits    int
}

// errorCounters are the counters with a documented error meaning: the IB
// PortCounters under counters/, and the driver counters under hw_counters/
// (mlx5 and rxe names). Congestion and traffic counters are not errors.
var errorCounters = map[string]counterMeaning{
	// counters/ (IBA PortCounters)
	"symbol_error":                    {"minor link errors on the physical lanes: a marginal cable, dirty or loose optics", 16},
	"link_error_recovery":             {"the link retrained after errors: a marginal cable or transceiver", 8},
	"link_downed":                     {"the link went down: cable pulled, peer reset or training failed", 8},
	"port_rcv_errors":                 {"packets received with errors (CRC, length, malformed): usually a bad link", 16},
	"port_rcv_remote_physical_errors": {"packets received marked bad by an upstream device: a fault elsewhere in the fabric", 16},
	"port_rcv_switch_relay_errors":    {"packets the port could not relay", 16},
	"port_xmit_discards":              {"outbound packets discarded: the port was down or congested", 16},
	"port_xmit_constraint_errors":     {"outbound packets dropped by partition or raw-packet constraints", 8},
	"port_rcv_constraint_errors":      {"inbound packets dropped by partition (P_Key) or raw-packet constraints", 8},
	"local_link_integrity_errors":     {"the local link passed its physical error threshold", 4},
	"excessive_buffer_overrun_errors": {"receive buffer overruns: flow control on the link is not working", 4},
	// hw_counters/ (mlx5)
	"out_of_buffer":              {"packets dropped because no receive WQE was posted: an application's receive queue ran dry", 0},
	"out_of_sequence":            {"packets received out of sequence: packets were lost on the way", 0},
	"packet_seq_err":             {"sequence-error NAKs received: the peer saw packet loss", 0},
	"local_ack_timeout_err":      {"ACK timeouts: lost packets or a peer that stopped answering; each one is a retransmission", 0},
	"rnr_nak_retry_err":          {"RNR NAK retries exhausted: the receiver had no receive buffer posted in time", 0},
	"implied_nak_seq_err":        {"read/atomic responses implied a lost request", 0},
	"duplicate_request":          {"retransmitted requests seen by the responder: the sender timed out (loss or delay)", 0},
	"req_cqe_error":              {"requester completions with an error status", 0},
	"resp_cqe_error":             {"responder completions with an error status", 0},
	"req_remote_access_errors":   {"remote access errors on requests (bad rkey or permissions): an application bug or a stale registration", 0},
	"req_remote_invalid_request": {"the remote side rejected requests as invalid", 0},
	"resp_local_length_error":    {"incoming messages longer than the posted receive buffer", 0},
	"resp_remote_access_errors":  {"incoming requests with a bad rkey or permissions", 0},
	"rx_icrc_encapsulated":       {"RoCE packets with a bad ICRC: corruption on the way", 0},
	// hw_counters/ (rxe)
	"completer_retry_err":    {"retries by the completer: lost packets or a slow peer", 0},
	"retry_exceeded_err":     {"retry count exceeded: the peer stopped answering", 0},
	"retry_rnr_exceeded_err": {"RNR retries exceeded: the receiver had no receive buffer posted", 0},
	"rcvd_seq_err":           {"sequence errors received: packet loss", 0},
	"out_of_seq_request":     {"requests received out of sequence: packet loss", 0},
	"send_err":               {"packets the device failed to send", 0},
}

// legacySaturation is where a PMA counter of unknown width stops: 32 bits.
const legacySaturation = 1<<32 - 1

// saturated tells whether a counter stopped at its maximum, which hides
// how many more errors happened.
func saturated(c sysfs.Counter) bool {
	if !c.Known {
		return false
	}
	if c.Group != "counters" {
		return false // driver counters are 64-bit
	}
	if m, ok := errorCounters[c.Name]; ok && m.bits > 0 {
		return c.Value == 1<<m.bits-1
	}
	return c.Value == legacySaturation
}

func init() {
	register(Check{
		ID: "counters.errors", Code: 22, Level: 1,
		Title: "port error counters are zero and not rising",
		Needs: []string{"rdma.devices"},
		Explain: Explanation{
			Judges: "Every port's counters/ (IB PortCounters) and hw_counters/ (driver) files with a documented error meaning — symbol_error, " +
				"link_downed, link_error_recovery, port_rcv_errors, local_link_integrity_errors, excessive_buffer_overrun_errors, port_xmit_discards, " +
				"out_of_buffer, out_of_sequence, packet_seq_err, local_ack_timeout_err, rnr_nak_retry_err, … . A nonzero counter warns with its value " +
				"and meaning; a legacy counter at its maximum (link_downed 255, 16-bit 65535, 32-bit 4294967295) is said to be saturated. With " +
				"--interval the counters are read twice and one that rises in the window fails. Files reading \"N/A (no PMA)\" or refusing the read " +
				"(EINVAL) are unknown, never fatal.",
			Why: "Error counters show a bad cable, lost packets or starving receivers long before an application reports a timeout. Counters " +
				"count since boot or the last reset: an old count is history, a rising one is a fault now.",
			Failures: []Failure{
				{report.Warn, "an error counter is nonzero (or saturated)",
					"Read the meaning printed with it. Link errors (symbol_error, link_downed, port_rcv_errors): reseat or replace the cable/transceiver and check the peer port. " +
						"Loss counters (out_of_sequence, packet_seq_err, local_ack_timeout_err): check PFC/ECN (roce.lossless) and the switches. " +
						"out_of_buffer / rnr_nak_retry_err: the application does not post receives fast enough. Measure again with --interval to see whether it still rises."},
				{report.Fail, "an error counter rose during --interval", "The fault is happening now: fix the link or the fabric named by the counter's meaning, then measure again."},
				{report.Error, "no RDMA device to read counters from, or the counters could not be listed", "Run where /sys/class/infiniband is readable."},
			},
		},
		Run: runCountersErrors,
	})
}

func isErrorCounter(name string) bool { _, ok := errorCounters[name]; return ok }

// portSample is one read of one port's counters.
type portSample struct {
	dev      string
	port     int
	dir      string // the device's sysfs directory
	counters []sysfs.Counter
	probs    []error
}

// sampleCounters reads every port's error counters. Ports are read by a few
// goroutines at once: on a host with a thousand VFs the reads are many small
// system calls, and waiting for them one by one dominates level 1.
func sampleCounters(h *sysfs.Host, devs []sysfs.RDMADevice) []portSample {
	var out []portSample
	for _, d := range devs {
		for _, p := range d.Ports {
			dir := d.SysPath
			if dir == "" {
				dir = path.Join(sysfs.InfinibandClass, d.Name)
			}
			out = append(out, portSample{dev: d.Name, port: p.Num, dir: dir})
		}
	}
	workers := min(max(2*runtime.GOMAXPROCS(0), 2), 8, len(out))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i].counters, out[i].probs = h.PortCounters(out[i].dir, out[i].port, isErrorCounter)
			}
		}()
	}
	for i := range out {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

func runCountersErrors(ctx context.Context, env *Env) Result {
	s := env.Survey()
	if s.DevicesErr != nil && !sysfs.IsNotExist(s.DevicesErr) {
		return errorf("could not list RDMA devices: %v", s.DevicesErr)
	}
	if len(s.Devices) == 0 {
		return errorf("no RDMA device to read counters from")
	}
	first := sampleCounters(env.Host, s.Devices)
	var second []portSample
	window := env.Opts.Interval
	var windowNote string
	if window > 0 {
		if dl, ok := ctx.Deadline(); ok {
			if left := time.Until(dl) - 250*time.Millisecond; left < window {
				if left < 0 {
					left = 0
				}
				windowNote = fmt.Sprintf("--interval %v is longer than the check's deadline: sampled over %v", window, left.Round(time.Millisecond))
				window = left
			}
		}
		t := time.NewTimer(window)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errorf("stopped while waiting %v between the two counter samples: %v", window, ctx.Err())
		}
		second = sampleCounters(env.Host, s.Devices)
	}

	var details, nonzero, rising, satList []string
	portsEv := map[string]any{}
	judgedPorts, blindPorts := 0, 0
	for i, ps := range first {
		label := portLabel(ps.dev, ps.port)
		key := fmt.Sprintf("%s/%d", ps.dev, ps.port)
		later := map[string]sysfs.Counter{}
		if second != nil && i < len(second) && second[i].dev == ps.dev && second[i].port == ps.port {
			for _, c := range second[i].counters {
				later[c.Group+"/"+c.Name] = c
			}
		}
		values := map[string]any{}
		unknownBy := map[string][]string{}
		readable := 0
		var portFindings []string
		for _, c := range ps.counters {
			m, isErr := errorCounters[c.Name]
			if !isErr {
				continue
			}
			if !c.Known {
				unknownBy[c.Unknown] = append(unknownBy[c.Unknown], c.Name)
				values[c.Name] = "unknown: " + c.Unknown
				continue
			}
			readable++
			if l, ok := later[c.Group+"/"+c.Name]; ok && l.Known && l.Value > c.Value {
				f := fmt.Sprintf("%s %s rose by %d in %v (%d → %d): %s", label, c.Name, l.Value-c.Value, window.Round(time.Millisecond), c.Value, l.Value, m.meaning)
				rising = append(rising, f)
				portFindings = append(portFindings, fmt.Sprintf("%s rising (+%d)", c.Name, l.Value-c.Value))
				values[c.Name] = map[string]any{"first": c.Value, "second": l.Value}
				continue
			}
			if c.Value == 0 {
				continue
			}
			values[c.Name] = c.Value
			if saturated(c) {
				f := fmt.Sprintf("%s %s = %d, saturated (the real count is higher): %s", label, c.Name, c.Value, m.meaning)
				satList = append(satList, f)
				nonzero = append(nonzero, f)
				portFindings = append(portFindings, fmt.Sprintf("%s %d (saturated)", c.Name, c.Value))
				continue
			}
			nonzero = append(nonzero, fmt.Sprintf("%s %s = %d: %s", label, c.Name, c.Value, m.meaning))
			portFindings = append(portFindings, fmt.Sprintf("%s %d", c.Name, c.Value))
		}
		// Evidence keeps what is not zero (a thousand VFs of zeros say nothing).
		portsEv[key] = map[string]any{"readable": readable, "nonzero_or_unknown": values}
		line := fmt.Sprintf("%s: %d error counters read", label, readable)
		if len(portFindings) > 0 {
			line += ", " + strings.Join(portFindings, ", ")
		} else if readable > 0 {
			line += ", all zero"
		}
		reasons := make([]string, 0, len(unknownBy))
		for r := range unknownBy {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		for _, r := range reasons {
			line += fmt.Sprintf("; unknown (%s): %s", r, strings.Join(unknownBy[r], ", "))
		}
		for _, p := range ps.probs {
			line += "; " + p.Error()
		}
		details = append(details, line)
		if readable > 0 {
			judgedPorts++
		} else {
			blindPorts++
		}
	}
	if windowNote != "" {
		details = append(details, windowNote)
	}
	ev := map[string]any{"ports": portsEv, "interval_ms": window.Milliseconds(), "saturated": nonNil(satList)}
	var r Result
	switch {
	case len(rising) > 0:
		r = fail(fmt.Sprintf("%d error counter(s) rising now: %s", len(rising), strings.Join(rising, "; ")))
		r.Observed = rising[0]
		r.Remedy = "The fault is happening now. Link counters (symbol_error, link_downed, port_rcv_errors, link_error_recovery): reseat or replace the cable/transceiver and check the peer port. " +
			"Loss counters (out_of_sequence, packet_seq_err, local_ack_timeout_err, duplicate_request): check PFC/ECN (roce.lossless) and the switches' drop counters. " +
			"out_of_buffer / rnr_nak_retry_err: the receiving application does not post receive buffers fast enough."
	case len(nonzero) > 0:
		msg := fmt.Sprintf("%d nonzero error counter(s): %s", len(nonzero), strings.Join(nonzero, "; "))
		if window == 0 {
			msg += " — counts since boot or the last reset; run with --interval 10s to see whether they still rise"
		} else {
			msg += " — none rose during the window: past events"
		}
		r = warn(msg)
		r.Observed = nonzero[0]
		r.Remedy = "Judge each counter by the meaning printed with it; if it keeps rising (--interval) fix the link or fabric it names. " +
			"To start from zero after a repair: `perfquery -x -R` (InfiniBand PMA counters); hw_counters reset when the driver reloads."
	case judgedPorts == 0:
		r = warn(fmt.Sprintf("no error counter could be read on any of %d port(s): unknown", blindPorts))
		r.Observed = "unknown"
		r.Remedy = "The driver cannot read these counters (\"N/A (no PMA)\": typically a VF, or a port whose management agent does not answer). " +
			"Read the same link's errors on the switch port, or `ethtool -S <netdev>` on Ethernet."
	default:
		r = pass(fmt.Sprintf("error counters zero on %d port(s)", judgedPorts))
		if window > 0 {
			r.Summary += fmt.Sprintf(", none rose in %v", window.Round(time.Millisecond))
		}
		if blindPorts > 0 {
			r.Summary += fmt.Sprintf("; %d port(s) with no readable error counter", blindPorts)
		}
		r.Observed = "all zero"
	}
	r.Expected = "error counters zero, none rising"
	r.Details, r.Evidence = details, ev
	return r
}
