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

func init() {
	register(Check{
		ID: "counters.errors", Code: 22, Level: 1,
		Title: "error counters are below their thresholds and not rising",
		Needs: []string{"rdma.devices"},
		Explain: Explanation{
			Judges: "The error counters each driver really has (a table per driver, taken from the kernel sources): the IB PortCounters under " +
				"ports/N/counters/ (symbol_error, link_downed, link_error_recovery, port_rcv_errors, port_rcv_remote_physical_errors, port_xmit_discards, " +
				"local_link_integrity_errors, excessive_buffer_overrun_errors, VL15_dropped, …), which the kernel creates only for drivers with a " +
				"management agent (mlx4, mlx5, hfi1, …), and the driver's own hw_counters/, per port or for the whole device (mlx5 out_of_buffer, " +
				"rx_icrc_encapsulated; EFA rx_drops; irdma ip4InDiscards, ip4InTruncatedPkts; bnxt_re rx_roce_errors, rx_roce_discards; rxe send_err, …). " +
				"An error counter beyond its threshold fails (PortCounters: rdma-core's error_thresholds, e.g. symbol_error 10, port_xmit_discards 100; " +
				"driver counters: the thresholds documented in the table); nonzero below it warns; a legacy counter at its maximum (link_downed 255, " +
				"16-bit 65535, 32-bit 4294967295) is said to be saturated and warns: pinned at its maximum it cannot show a fault of today. With --interval " +
				"the counters are read twice and one that rises in the window fails; one beyond its threshold that did not rise is history and warns. With --state the counters are judged across runs " +
				"(docs/history.md): the rise since the previous run as a rate per hour (symbol_error 120/h; link_downed, local_link_integrity_errors and " +
				"excessive_buffer_overrun_errors any rise; others their threshold per hour) and the count since a baseline (boot, a lower value, a new boot_id, " +
				"`rdmadoctor ack`) against the threshold; a count that does not rise warns, never fails; a failed counter passes again after 3 clean runs; " +
				"[class] keys counters.<name> = { rate_per_hour = N, absolute = N } and counters.clean_runs tune them. Protocol statistics — retransmissions, out-of-sequence, duplicate requests, sequence and RNR NAKs, ACK timeouts, CNPs, ECN " +
				"marks, completions in error — are reported when nonzero, not judged. Files reading \"N/A (no PMA)\" or refusing the read (EINVAL) " +
				"are unknown; a port none of whose error counters can be read is an error (could not be determined), unless the port is not ACTIVE " +
				"(nothing to count; port.state judges it). A driver without error " +
				"counters in sysfs (siw; cxgb4, whose only counters are TCP statistics) is skipped with that reason. A count beyond its threshold is a " +
				"finding named by the counter's family (counters.errors/symbol-errors, counters.errors/link-downed, …), which an expectations file may " +
				"waive for a class of hosts; a rise — during --interval or across runs — has IDs of its own, so a waived count still fails when it rises.",
			Why: "Error counters show a bad cable, corrupt or dropped packets or starving receivers long before an application reports a timeout. " +
				"They count since boot, the driver's load or the last reset: a count beyond the threshold says the link or the NIC has been faulty; " +
				"a rising one is a fault now.",
		},
		Run: runCountersErrors,
	})
}

// countersByHand says how to read the same errors without these files.
const countersByHand = "Look by hand: `grep . /sys/class/infiniband/*/ports/*/{counters,hw_counters}/* /sys/class/infiniband/*/hw_counters/*`, " +
	"`perfquery -C <dev> -P <port>` (InfiniBand PMA), `ethtool -S <netdev>` (Ethernet), or the switch port's counters for the same link."

const judgeByMeaning = "Judge each counter by the meaning printed with it. Link errors (symbol_error, link_downed, link_error_recovery, port_rcv_errors, " +
	"ICRC or truncated packets): reseat or replace the cable/transceiver and check the peer port. Receive-queue drops (out_of_buffer, rx_drops, " +
	"rx_out_of_buffer): the receiving application does not post receive buffers fast enough. Discards: check the port's state and the switch. " +
	"Measure again with --interval 10s to see whether it still rises."

const risingFix = "The fault is happening now: fix the link or the fabric named by the counter's meaning (link counters: cable, transceiver, " +
	"peer port; drops and discards: the receiver or the switch), then measure again with --interval."

// counterUnit is one set of counters judged together: a port (its
// counters/ and hw_counters/), or a device's own hw_counters/ (port 0).
type counterUnit struct {
	dev  sysfs.RDMADevice
	drv  *driverCounters
	port int
	ib   bool   // InfiniBand link layer: the PMA answers perfquery
	down string // the port's state when it is not ACTIVE ("1: DOWN"), "" else
	pf   string // the PF when the device's PCI function is an SR-IOV VF
	dir  string // the device's sysfs directory
}

// counterSample is one read of one unit.
type counterSample struct {
	counters []sysfs.Counter
	groups   []string // the counter directories that exist
	probs    []error
}

func (u *counterUnit) label() string {
	if u.port == 0 {
		return u.dev.Name + " device counters"
	}
	return fmt.Sprintf("%s port %d", u.dev.Name, u.port)
}

func (u *counterUnit) key() string {
	if u.port == 0 {
		return u.dev.Name + "/device"
	}
	return fmt.Sprintf("%s/%d", u.dev.Name, u.port)
}

// want reads only the counters the table lists: a mlx5 port has dozens of
// traffic counters that say nothing about errors.
func (u *counterUnit) want(group, name string) bool { _, ok := u.drv.lookup(group, name); return ok }

// counterUnits lists every port of every device, and each device's own
// counters, with the driver table that reads them.
func counterUnits(s *Survey) []counterUnit {
	pfOf := map[string]string{} // VF address → its PF
	for _, fn := range s.PCI {
		if fn.PhysFn != "" {
			pfOf[fn.Address] = fn.PhysFn
		}
	}
	var out []counterUnit
	for _, d := range s.Devices {
		dir := d.SysPath
		if dir == "" {
			dir = path.Join(sysfs.InfinibandClass, d.Name)
		}
		base := counterUnit{dev: d, drv: counterDriverOf(d), dir: dir}
		if d.PCIAddr != "" {
			base.pf = pfOf[d.PCIAddr]
		}
		for _, p := range d.Ports {
			u := base
			u.port, u.ib = p.Num, p.LinkLayer == "InfiniBand"
			if p.State.Code != 4 { // 4: ACTIVE
				u.down = p.State.Raw
			}
			out = append(out, u)
		}
		out = append(out, base)
	}
	return out
}

// sampleCounters reads every unit's counters. Units are read by a few
// goroutines at once: on a host with a thousand VFs the reads are many small
// system calls, and waiting for them one by one dominates level 1.
func sampleCounters(h *sysfs.Host, units []counterUnit) []counterSample {
	out := make([]counterSample, len(units))
	if len(units) == 0 {
		return out
	}
	workers := min(max(2*runtime.GOMAXPROCS(0), 2), 8, len(units))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = readUnit(h, &units[i])
			}
		}()
	}
	for i := range units {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

func readUnit(h *sysfs.Host, u *counterUnit) counterSample {
	var s counterSample
	if u.port == 0 {
		s.counters, s.groups, s.probs = h.DeviceCounters(u.dir, u.want)
	} else {
		s.counters, s.groups, s.probs = h.PortCounters(u.dir, u.port, u.want)
	}
	return s
}

// secondSample waits --interval (shortened to the check's deadline) and
// reads again; nil when no interval was asked. note says a shortened window.
func secondSample(ctx context.Context, env *Env, units []counterUnit) (second []counterSample, window time.Duration, note string, err error) {
	window = env.Opts.Interval
	if window <= 0 {
		return nil, 0, "", nil
	}
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) - 250*time.Millisecond; left < window {
			left = max(left, 0)
			note = fmt.Sprintf("--interval %v is longer than the check's deadline: sampled over %v", window, left.Round(time.Millisecond))
			window = left
		}
	}
	t := time.NewTimer(window)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, window, note, ctx.Err()
	}
	return sampleCounters(env.Host, units), window, note, nil
}

func runCountersErrors(ctx context.Context, env *Env) Result {
	s := env.Survey()
	if r, stop := countersPrerequisites(s); stop {
		return r
	}
	units := counterUnits(s)
	first := sampleCounters(env.Host, units)
	second, window, note, err := secondSample(ctx, env, units)
	if err != nil {
		return couldNotCount(ctrIntervalStopped.result("", Slots{"window": window.String(), "cause": err.Error()}), "second sample not taken")
	}
	hr := newHistoryRun(env)
	judged, ev := judgeCounterUnits(units, first, second, window, hr)
	noun, plural := unitNouns(judged)
	r := combineUnits(verdictsOf(judged), noun, plural)
	finishCountersResult(&r, judged, window, note, hr)
	r.Evidence = map[string]any{"units": ev, "interval_ms": window.Milliseconds()}
	if hr != nil {
		r.Evidence["history"] = hr.evidence()
	}
	return r
}

// unitNouns names the units in tallies: ports, unless a device's own
// counters are among them.
func unitNouns(js []judgedUnit) (string, string) {
	for _, j := range js {
		if j.u == nil || j.u.port == 0 {
			return "counter set", "counter sets"
		}
	}
	return "port", "ports"
}

func verdictsOf(js []judgedUnit) []verdict {
	vs := make([]verdict, len(js))
	for i, j := range js {
		vs[i] = j.v
	}
	return vs
}

// couldNotCount fills a result that could not judge the counters.
func couldNotCount(r Result, observed string) Result {
	r.Observed, r.Expected = observed, "error counters below their thresholds, none rising"
	return r
}

// countersPrerequisites stops the check when there is no device to read.
func countersPrerequisites(s *Survey) (Result, bool) {
	if s.DevicesErr != nil && !sysfs.IsNotExist(s.DevicesErr) {
		return couldNotCount(ctrDevicesUnreadable.result("", Slots{"cause": s.DevicesErr.Error()}), "device list unreadable"), true
	}
	if len(s.Devices) == 0 {
		return couldNotCount(ctrNoDevice.result("", nil), "no RDMA device"), true
	}
	return Result{}, false
}

// finishCountersResult adds what concerns the whole check: the shortened
// window, the summary of a clean host, the hint that old counts may be
// history, how to reset.
func finishCountersResult(r *Result, js []judgedUnit, window time.Duration, note string, hr *historyRun) {
	r.Expected = "error counters below their thresholds, none rising"
	if note != "" {
		r.Details = append(r.Details, note)
	}
	if hr != nil {
		r.Expected = "no error counter rising faster than its rate or beyond its absolute threshold since its baseline"
		r.Details = append(r.Details, hr.notes...)
	}
	if len(js) == 1 { // combineUnits made the unit's line the summary only
		r.Details = append([]string{js[0].v.line}, r.Details...)
	}
	switch r.Status {
	case report.Pass:
		r.Summary, r.Observed = passSummary(js, window, hr != nil)
	case report.Warn, report.Fail:
		if window == 0 && hr == nil {
			r.Summary += string(countersSinceBootEnd)
		}
		r.Remedy += "\n" + resetFix(js)
	}
}

// counters.errors's headlines: the summary of a clean host, and the note
// a one-sample run adds to a problem.
const (
	countersZeroHead      headline = "error counters zero on {ports} port(s)"
	countersNotRisingHead headline = "no error counter rising or beyond its threshold since its baseline on {ports} port(s)"
	countersDevicesEnd    headline = " and {devices} device(s)"
	countersWindowEnd     headline = ", none rose in {window}"
	countersStatsEnd      headline = "; {stats} protocol statistic(s) nonzero, reported, not judged"
	countersUnreadableEnd headline = "; {count} counters unreadable ({reason}) on {units}"
	countersSinceBootEnd  headline = " — counts since boot or the last reset; run with --interval 10s to see whether they still rise"
)

// passSummary tallies a clean host: the units judged, the statistics
// reported, the counters that could not be read.
func passSummary(js []judgedUnit, window time.Duration, hist bool) (summary, observed string) {
	ports, devices, stats := 0, 0, 0
	unknown := map[string]int{}
	unknownAt := map[string][]string{}
	for _, j := range js {
		switch {
		case j.v.status != report.Pass:
		case j.u.port == 0:
			devices++
		default:
			ports++
		}
		stats += j.stats
		for r, n := range j.unknown {
			unknown[r] += n
			unknownAt[r] = append(unknownAt[r], j.u.label())
		}
	}
	head := countersZeroHead
	if hist {
		head = countersNotRisingHead
	}
	summary = head.render(Slots{"ports": fmt.Sprint(ports)})
	if devices > 0 {
		summary += countersDevicesEnd.render(Slots{"devices": fmt.Sprint(devices)})
	}
	if window > 0 {
		summary += countersWindowEnd.render(Slots{"window": window.Round(time.Millisecond).String()})
	}
	if stats > 0 {
		summary += countersStatsEnd.render(Slots{"stats": fmt.Sprint(stats)})
	}
	observed = "all zero"
	if hist {
		observed = "none rising"
	}
	reasons := make([]string, 0, len(unknown))
	for r := range unknown {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		summary += countersUnreadableEnd.render(Slots{"count": fmt.Sprint(unknown[r]), "reason": r, "units": listSome(unknownAt[r], 3, "counter sets")})
		observed = "all readable ones zero"
		if hist {
			observed = "no readable one rising"
		}
	}
	return summary, observed
}

// listSome joins up to n items and says how many more there are.
func listSome(items []string, n int, what string) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s (and %d more %s)", strings.Join(items[:n], ", "), len(items)-n, what)
}

// resetFix is the remedy sentence on starting the counters from zero,
// filled in for the InfiniBand ports that have findings.
func resetFix(js []judgedUnit) string {
	var cmds []string
	for _, j := range js {
		if j.u != nil && j.u.ib && j.u.port > 0 && (j.v.status == report.Warn || j.v.status == report.Fail) {
			cmds = append(cmds, countersPerfqueryReset.render(Slots{"device": j.u.dev.Name, "port": fmt.Sprint(j.u.port)}))
		}
	}
	ib := ""
	if len(cmds) > 0 {
		ib = countersIBReset.render(Slots{"commands": strings.Join(cmds, ", ")})
	}
	return countersResetFix.render(Slots{"ib": ib})
}

// The remedy on starting the counters from zero (resetFix).
const (
	countersResetFix       headline = "To start from zero after a repair: {ib}RoCE ports have no PMA reset: compare with --interval instead. hw_counters reset only when the driver reloads."
	countersIBReset        headline = "{commands} (IB PortCounters; -a for all ports). "
	countersPerfqueryReset headline = "`perfquery -C {device} -P {port} -R`"
)
