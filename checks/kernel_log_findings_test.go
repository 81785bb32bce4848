package checks_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// withLog is the healthy kernel.log host with lines added to its log.
func withLog(lines ...string) *sysfstest.Tree {
	tr := sysfstest.KernelLogHealthy()
	tr.Files["/"+sysfs.KernelLogFile] += strings.Join(lines, "\n") + "\n"
	return tr
}

// withReporters is the healthy host with mlx5_0's tx reporter at errs
// errors (healthy).
func withReporters(errs uint64) *sysfstest.Tree {
	tr := sysfstest.KernelLogHealthy()
	tr.Facts.DevlinkHealth.Reporters[2].ErrorCount, tr.Facts.DevlinkHealth.Reporters[2].RecoverCount = errs, errs
	return tr
}

const noted = "kernel.log/other-device"

// TestKernelLogFindings: each host's log (or reporters) gives the findings
// named, about the unit named; the generator's hosts state their verdicts.
func TestKernelLogFindings(t *testing.T) {
	other := findingRef{noted, "eno1"}
	for _, tc := range []struct {
		name   string
		tree   *sysfstest.Tree
		status report.Status
		want   []findingRef
	}{
		{"healthy", sysfstest.KernelLogHealthy(), report.Pass, []findingRef{{"kernel.log/clean", ""}, other}},
		{"mlx5 TX timeout", sysfstest.KernelLogTxTimeout(), report.Fail, []findingRef{other, {"kernel.log/tx-timeout", "ens1f0np0"}}},
		{"slot power", sysfstest.KernelLogSlotPower(), report.Warn, []findingRef{other, {"kernel.log/insufficient-power", "0000:3b:00.0"}}},
		{"module high temperature", sysfstest.KernelLogModuleHot(), report.Fail,
			[]findingRef{other, {"kernel.log/module-high-temperature", "0000:3b:00.0"}, {"kernel.log/link-down", "ens1f0np0"}}},
		{"devlink reporter in error", sysfstest.KernelLogDevlinkError(), report.Fail,
			[]findingRef{other, {"kernel.log/devlink-error", "pci/0000:3b:00.0/fw_fatal"}}},
		{"watchdog, 6.9 format", withLog("[  100.000001] mlx5_core 0000:3b:00.0 ens1f0np0: NETDEV WATCHDOG: CPU: 12: transmit queue 3 timed out 5120 ms"),
			report.Fail, []findingRef{other, {"kernel.log/tx-timeout", "ens1f0np0"}}},
		{"watchdog on a netdev without a parent (Debian 6.1)", withLog("[  101.5] ens1f0np0: NETDEV WATCHDOG: CPU: 0: transmit queue 0 timed out 5120 ms"),
			report.Fail, []findingRef{other, {"kernel.log/tx-timeout", "ens1f0np0"}}},
		{"health poll", withLog("[  200.1] mlx5_core 0000:3b:00.0: poll_health:852:(pid 0): device's health compromised - reached miss count"),
			report.Fail, []findingRef{other, {"kernel.log/fw-fatal", "0000:3b:00.0"}}},
		{"power budget", withLog("[  300.2] mlx5_core 0000:3b:00.0: Port module event[error]: module 0, Cable error, Power budget exceeded"),
			report.Fail, []findingRef{other, {"kernel.log/module-error", "0000:3b:00.0"}}},
		{"bandwidth limited by the root port", withLog("[    4.2] mlx5_core 0000:3b:00.0: 63.008 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x8 link at 0000:3a:00.0 (capable of 126.016 Gb/s with 8.0 GT/s PCIe x16 link)"),
			report.Warn, []findingRef{other, {"kernel.log/pcie-bandwidth-limited", "0000:3a:00.0"}}},
		{"AER fatal from the NIC, logged by its root port", withLog(
			"[  400.3] pcieport 0000:3a:00.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0",
			"[  400.4] mlx5_core 0000:3b:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)"),
			report.Fail, []findingRef{other, {"kernel.log/aer-fatal", "0000:3b:00.0"}}},
		{"AER non-fatal, newer wording", withLog("[  500.5] pcieport 0000:3a:00.0: AER: Uncorrectable (Non-Fatal) error message received from 0000:3b:00.0"),
			report.Warn, []findingRef{other, {"kernel.log/aer-nonfatal", "0000:3b:00.0"}}},
		{"AER corrected: noted", withLog("[  600.6] pcieport 0000:3a:00.0: AER: Corrected error received: 0000:3a:00.0",
			"[  600.7] pcieport 0000:3a:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)"),
			report.Pass, []findingRef{{"kernel.log/clean", ""}, other, {"kernel.log/aer-corrected", "0000:3a:00.0"}}},
		{"AER on another device's port: noted", withLog("[  700.8] pcieport 0000:00:1c.0: AER: Uncorrected (Fatal) error received: 0000:05:00.0"),
			report.Pass, []findingRef{{"kernel.log/clean", ""}, other, {noted, "0000:05:00.0"}}},
		{"three carrier losses: flaps", withLog("[ 800.1] mlx5_core 0000:3b:00.0 ens1f0np0: Link down",
			"[ 810.1] mlx5_core 0000:3b:00.0 ens1f0np0: Link down", "[ 820.1] mlx5_core 0000:3b:00.0 ens1f0np0: Link down"),
			report.Warn, []findingRef{other, {"kernel.log/link-flaps", "ens1f0np0"}}},
		{"devlink errors since the driver loaded", withReporters(2), report.Warn,
			[]findingRef{other, {"kernel.log/devlink-errors-since-boot", "pci/0000:3b:00.0/tx"}}},
		{"no kernel log in the root", sysfstest.Build(sysfstest.CX5RoCE()), report.Skip, []findingRef{{"kernel.log/no-log", ""}}},
		{"kernel log unreadable", func() *sysfstest.Tree {
			tr := sysfstest.KernelLogHealthy()
			tr.Remove("/" + sysfs.KernelLogFile)
			tr.File("/"+sysfs.KernelLogFile+"/x", "a directory, not a file\n")
			return tr
		}(), report.Error, []findingRef{{"kernel.log/unreadable", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRunOne(t, hwWrite(t, tc.tree), "kernel.log", checks.Options{})
			if diff := cmp.Diff(tc.want, refs(r.Findings)); diff != "" || r.Status != tc.status {
				t.Errorf("status %s, want %s; findings (-want +got):\n%s\n%s", r.Status, tc.status, diff, r.Summary)
			}
		})
	}
}

// A finding quotes the line, names the device and says from when the
// lines are: a snapshot's lines carry no sequence numbers.
func TestKernelLogFindingText(t *testing.T) {
	r := hwRunOne(t, hwWrite(t, sysfstest.KernelLogTxTimeout()), "kernel.log", checks.Options{})
	for _, want := range []string{
		"ens1f0np0 (netdev of mlx5_0): 2 line(s) since boot (no mark",
		`"mlx5_core 0000:3b:00.0 ens1f0np0: TX timeout on queue: 5, SQ: 0x10c`,
		"at 86012.553 s after boot",
	} {
		if !strings.Contains(r.Summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, r.Summary)
		}
	}
	if d := strings.Join(r.Details, "\n"); !strings.Contains(d, "net/sched/sch_generic.c") || !strings.Contains(d, "en_main.c") {
		t.Errorf("details do not cite the kernel sources:\n%s", d)
	}
}

// With a state, a reporter's error count is judged against the last run's:
// a rise warns, the same count passes, a new boot starts again from zero.
func TestKernelLogDevlinkHistory(t *testing.T) {
	st := state.New("cx5-node01")
	run := func(errs uint64) []findingRef {
		r := hwRunOne(t, hwWrite(t, withReporters(errs)), "kernel.log", checks.Options{State: st})
		var out []findingRef
		for _, f := range refs(r.Findings) {
			if strings.HasPrefix(f.ID, "kernel.log/devlink") {
				out = append(out, f)
			}
		}
		return out
	}
	tx := "pci/0000:3b:00.0/tx"
	steps := []struct {
		errs uint64
		want []findingRef
	}{
		{1, []findingRef{{"kernel.log/devlink-errors-since-boot", tx}}},
		{1, nil},
		{4, []findingRef{{"kernel.log/devlink-errors-rising", tx}}},
		{4, nil},
	}
	for i, s := range steps {
		if diff := cmp.Diff(s.want, run(s.errs)); diff != "" {
			t.Fatalf("run %d (%d errors): findings (-want +got):\n%s", i+1, s.errs, diff)
		}
	}
	if len(st.Counters) != 0 {
		t.Errorf("kernel.log wrote into counters.errors' history: %+v", st.Counters)
	}
	cs := st.KernelLog.Series("kernel.log/devlink/" + tx + "/error_count")
	if cs == nil || len(cs.Samples) != len(steps) || cs.Samples[0].BootID != sysfstest.FixtureBootID || !cs.Samples[2].Rose {
		t.Fatalf("history: %+v", cs)
	}
	// Another boot: the count restarted with the driver.
	cs.Samples[len(cs.Samples)-1].BootID = "00000000-0000-4000-8000-000000000000"
	cs.Samples[len(cs.Samples)-1].At = time.Now().Add(-time.Hour)
	if diff := cmp.Diff([]findingRef{{"kernel.log/devlink-errors-since-boot", tx}}, run(4)); diff != "" {
		t.Errorf("after a reboot: (-want +got):\n%s", diff)
	}
}

// In a whole run with a state, counters.errors and kernel.log each keep
// their own history: they run at once, and neither writes the other's.
func TestKernelLogBesideCounterHistory(t *testing.T) {
	st := state.New("cx5-node01")
	dir := hwWrite(t, withReporters(1))
	for range 2 {
		r := hwRun(t, dir, checks.Options{State: st})
		if c := hwResult(t, r, "kernel.log"); c.Status != report.Warn && c.Status != report.Pass {
			t.Fatalf("kernel.log %s: %s", c.Status, c.Summary)
		}
	}
	if len(st.Counters) == 0 || st.KernelLog == nil || len(st.KernelLog.Devlink) != 4 || len(st.KernelLog.Devlink[0].Samples) != 2 {
		t.Fatalf("histories: %d counter series, kernel log %+v", len(st.Counters), st.KernelLog)
	}
	for _, cs := range st.Counters {
		if strings.HasPrefix(cs.Key, "kernel.log/") {
			t.Errorf("a kernel.log series among the counters: %s", cs.Key)
		}
	}
}
