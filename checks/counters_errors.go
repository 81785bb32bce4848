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
				"--interval the counters are read twice and one that rises in the window fails; a saturated counter cannot rise, so whether it still " +
				"counts is said to be unknown. Files reading \"N/A (no PMA)\" or refusing the read (EINVAL) are unknown and named in the summary, " +
				"never fatal for the other counters; when no error counter at all can be read the result is error (could not be determined).",
			Why: "Error counters show a bad cable, lost packets or starving receivers long before an application reports a timeout. Counters " +
				"count since boot or the last reset: an old count is history, a rising one is a fault now.",
			Failures: []Failure{
				{report.Warn, "an error counter is nonzero (or saturated)",
					"Read the meaning printed with it. Link errors (symbol_error, link_downed, port_rcv_errors): reseat or replace the cable/transceiver and check the peer port. " +
						"Loss counters (out_of_sequence, packet_seq_err, local_ack_timeout_err): check PFC/ECN (roce.lossless) and the switches. " +
						"out_of_buffer / rnr_nak_retry_err: the application does not post receives fast enough. Measure again with --interval to see whether it still rises; " +
						"a saturated counter cannot show that: reset it first (`perfquery -C <dev> -P <port> -R` on InfiniBand)."},
				{report.Fail, "an error counter rose during --interval", "The fault is happening now: fix the link or the fabric named by the counter's meaning, then measure again."},
				{report.Error, "no RDMA device to read counters from, the counters could not be listed, or no error counter could be read on any port (all \"N/A (no PMA)\" or EINVAL)",
					countersByHand},
			},
		},
		Run: runCountersErrors,
	})
}

// countersByHand says how to read the same errors without these files.
const countersByHand = "Look by hand: `grep . /sys/class/infiniband/*/ports/*/{counters,hw_counters}/*`, `perfquery -C <dev> -P <port>` (InfiniBand PMA), " +
	"`ethtool -S <netdev>` (Ethernet), or the switch port's counters for the same link."

// resetHint is how a port's PMA counters are reset: perfquery on
// InfiniBand; RoCE ports have no PMA reset.
func resetHint(dev string, port int, ib bool) string {
	if ib {
		return fmt.Sprintf("reset it (`perfquery -C %s -P %d -R`) and measure again", dev, port)
	}
	return "it resets only when the driver reloads: judge it by the other counters, or on the switch"
}

// resetFix is the remedy sentence on starting the counters from zero,
// filled in for the InfiniBand ports that have findings.
func resetFix(ib []portRef) string {
	s := "To start from zero after a repair: "
	if len(ib) > 0 {
		var cmds []string
		for _, p := range ib {
			cmds = append(cmds, fmt.Sprintf("`perfquery -C %s -P %d -R`", p.dev, p.port))
		}
		s += strings.Join(cmds, ", ") + " (IB PortCounters; -a for all ports). "
	}
	return s + "RoCE ports have no PMA reset: compare with --interval instead. hw_counters reset only when the driver reloads."
}

func isErrorCounter(name string) bool { _, ok := errorCounters[name]; return ok }

// portSample is one read of one port's counters.
type portSample struct {
	dev      string
	port     int
	ib       bool   // InfiniBand link layer: the PMA answers perfquery
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
			out = append(out, portSample{dev: d.Name, port: p.Num, ib: p.LinkLayer == "InfiniBand", dir: dir})
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

// unreadableCounters counts the counters that one reason left unknown and
// the ports they are on.
type unreadableCounters struct {
	count int
	ports []string
}

// listSome joins up to n items and says how many more there are.
func listSome(items []string, n int, what string) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s (and %d more %s)", strings.Join(items[:n], ", "), len(items)-n, what)
}

func runCountersErrors(ctx context.Context, env *Env) Result {
	s := env.Survey()
	couldNot := func(r Result, observed string) Result {
		r.Observed, r.Expected, r.Remedy = observed, "error counters zero, none rising", countersByHand
		return r
	}
	if s.DevicesErr != nil && !sysfs.IsNotExist(s.DevicesErr) {
		return couldNot(errorf("could not list RDMA devices: %v", s.DevicesErr), "device list unreadable")
	}
	if len(s.Devices) == 0 {
		return couldNot(errorf("no RDMA device to read counters from"), "no RDMA device")
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
			return couldNot(errorf("stopped while waiting %v between the two counter samples: %v", window, ctx.Err()), "second sample not taken")
		}
		second = sampleCounters(env.Host, s.Devices)
	}

	var details, nonzero, rising, satList []string
	var satUnknown []string // saturated counters whose rise --interval cannot show
	var findingIB []portRef // InfiniBand ports with a nonzero counter, for the reset hint
	unreadable := map[string]*unreadableCounters{}
	var unreadableOrder []string
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
				if second != nil {
					// A counter at its maximum cannot rise: "none rose" would be a guess.
					satUnknown = append(satUnknown, fmt.Sprintf("%s %s", label, c.Name))
					f = fmt.Sprintf("%s %s = %d (%s), saturated: whether it still rises cannot be told; %s", label, c.Name, c.Value, m.meaning, resetHint(ps.dev, ps.port, ps.ib))
				}
				nonzero = append(nonzero, f)
				portFindings = append(portFindings, fmt.Sprintf("%s %d (saturated)", c.Name, c.Value))
				continue
			}
			nonzero = append(nonzero, fmt.Sprintf("%s %s = %d: %s", label, c.Name, c.Value, m.meaning))
			portFindings = append(portFindings, fmt.Sprintf("%s %d", c.Name, c.Value))
		}
		if len(portFindings) > 0 && ps.ib {
			findingIB = append(findingIB, portRef{dev: ps.dev, port: ps.port, label: label})
		}
		for r, names := range unknownBy {
			u, ok := unreadable[r]
			if !ok {
				u = &unreadableCounters{}
				unreadable[r] = u
				unreadableOrder = append(unreadableOrder, r)
			}
			u.count += len(names)
			u.ports = append(u.ports, label)
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
	if len(satUnknown) > 0 {
		ev["saturated_rise_unknown"] = satUnknown
	}
	sort.Strings(unreadableOrder)
	unreadableNote := ""
	for _, reason := range unreadableOrder {
		u := unreadable[reason]
		unreadableNote += fmt.Sprintf("; %d counters unreadable (%s) on %s", u.count, reason, listSome(u.ports, 3, "ports"))
	}
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
		switch {
		case window == 0:
			msg += " — counts since boot or the last reset; run with --interval 10s to see whether they still rise"
			if len(satList) > 0 {
				msg += " (a saturated counter cannot show a rise: reset it first)"
			}
		case len(satUnknown) < len(nonzero):
			msg += fmt.Sprintf(" — none of the others rose in %v: past events", window.Round(time.Millisecond))
			if len(satUnknown) == 0 {
				msg = strings.Replace(msg, "none of the others rose", "none rose", 1)
			}
		}
		r = warn(msg + unreadableNote)
		r.Observed = nonzero[0]
		r.Remedy = "Judge each counter by the meaning printed with it; if it keeps rising (--interval) fix the link or fabric it names.\n" + resetFix(findingIB)
	case judgedPorts == 0:
		r = errorf("no error counter could be read on any of %d port(s): whether the links are clean could not be determined%s", blindPorts, unreadableNote)
		r.Observed = "every error counter unknown"
		r.Remedy = "The driver cannot read these counters (\"N/A (no PMA)\": typically a VF, or a port whose management agent does not answer; EINVAL: the driver refuses the read). " +
			countersByHand
	default:
		r = pass(fmt.Sprintf("error counters zero on %d port(s)", judgedPorts))
		if window > 0 {
			r.Summary += fmt.Sprintf(", none rose in %v", window.Round(time.Millisecond))
		}
		if blindPorts > 0 {
			r.Summary += fmt.Sprintf("; %d port(s) with no readable error counter", blindPorts)
		}
		r.Summary += unreadableNote
		r.Observed = "all zero"
		if unreadableNote != "" {
			r.Observed = "all readable ones zero"
		}
	}
	r.Expected = "error counters zero, none rising"
	r.Details, r.Evidence = details, ev
	return r
}
