package checks_test

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// countersCase is one host judged by counters.errors in a whole level-1
// run: the findings, unit by unit, the check's status, the run's exit code
// and root cause; texts only where the words matter.
type countersCase struct {
	name      string
	dir       string
	opts      checks.Options
	status    report.Status
	exit      int
	rootCause string
	want      []findingRef
	contains  []string // in the summary, details or remedy
	lacks     []string
}

func runCountersCases(t *testing.T, cases []countersCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRun(t, tc.dir, tc.opts)
			c := hwResult(t, r, "counters.errors")
			text := c.Summary + "\n" + c.Observed + "\n" + strings.Join(c.Details, "\n") + "\n" + c.Remedy
			if c.Status != tc.status || r.ExitCode != tc.exit || deref(r.RootCause) != tc.rootCause {
				t.Errorf("%s, exit %d, root cause %q; want %s, %d, %q\n%s", c.Status, r.ExitCode, deref(r.RootCause), tc.status, tc.exit, tc.rootCause, text)
			}
			if diff := cmp.Diff(tc.want, refs(c.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, text)
			}
			checkTexts(t, text, tc.contains, tc.lacks)
		})
	}
}

// ce is a counters.errors finding about a unit.
func ce(slug, unit string) findingRef { return findingRef{"counters.errors/" + slug, unit} }

// cx5With is CX5RoCE with its tree edited.
func cx5With(t *testing.T, tree func(tr *sysfstest.Tree)) string {
	tr := sysfstest.Build(sysfstest.CX5RoCE())
	tree(tr)
	return hwWrite(t, tr)
}

// Clean, unreadable and unjudged counters.
func TestCountersErrors(t *testing.T) {
	cx5 := func(tree func(tr *sysfstest.Tree)) string { return cx5With(t, tree) }
	clean := []findingRef{ce("zero", "mlx5_0/1"), ce("zero", "mlx5_1/1")}
	runCountersCases(t, []countersCase{
		{name: "cx5-roce-healthy", dir: netFixture("cx5-roce-healthy"), status: report.Pass, want: clean,
			contains: []string{"mlx5_0 port 1: 13 error counters read"}},
		{name: "cx6-ib-healthy", dir: netFixture("cx6-ib-healthy"), status: report.Pass, want: []findingRef{ce("zero", "mlx5_0/1")}},
		{name: "rxe-softroce", dir: netFixture("rxe-softroce"), status: report.Pass, want: []findingRef{ce("zero", "rxe0/1")}},
		// A saturated counter is said, not failed: pinned at its maximum it
		// cannot show a fault of today, and a node must not be drained for
		// what a counter collected over years.
		{name: "counters-saturated", dir: netFixture("counters-saturated"), status: report.Warn,
			want:     []findingRef{ce("saturated", "mlx5_0/1"), ce("nonzero", "mlx5_0/1"), ce("saturated", "mlx5_0/1")},
			contains: []string{"link_downed = 255", "`perfquery -C mlx5_0 -P 1 -R`"},
			lacks:    []string{"perfquery -x", "SR-IOV"}},
		{name: "counters-na-no-pma", dir: netFixture("counters-na-no-pma"), status: report.Pass, want: clean,
			contains: []string{"12 counters unreadable (N/A (no PMA)) on mlx5_1 port 1"}},
		{name: "every counter unknown", dir: cx5(func(tr *sysfstest.Tree) {
			for _, d := range []string{"mlx5_0", "mlx5_1"} {
				sysfstest.SetAllCounters(tr, d, 1, "counters", "N/A (no PMA)")
				sysfstest.SetAllCounters(tr, d, 1, "hw_counters", "N/A (no PMA)")
			}
		}), status: report.Error, exit: report.ExitUnknown, rootCause: "counters.errors",
			want:     []findingRef{ce("unreadable-no-pma", "mlx5_0/1"), ce("unreadable-no-pma", "mlx5_1/1")},
			contains: []string{"none of its 13 error counters could be read (N/A (no PMA))"},
			lacks:    []string{"SR-IOV"}},
		{name: "a down port's unreadable counters are not judged", dir: func() string {
			h := sysfstest.CX5RoCE()
			h.NICs[1].Ports[0].State, h.NICs[1].Ports[0].PhysState = "1: DOWN", "3: Disabled"
			tr := sysfstest.Build(h)
			sysfstest.SetAllCounters(tr, "mlx5_1", 1, "counters", "N/A (no PMA)")
			sysfstest.SetAllCounters(tr, "mlx5_1", 1, "hw_counters", "N/A (no PMA)")
			return hwWrite(t, tr)
		}(), status: report.Pass, exit: 19, rootCause: "port.state",
			want: []findingRef{ce("zero", "mlx5_0/1"), ce("port-down-unreadable", "mlx5_1/1")}},
		{name: "counters nobody may read are an error without PMA advice", dir: cx5(func(tr *sysfstest.Tree) {
			dir := sysfstest.PortDir(tr, "mlx5_1", 1) + "/"
			tr.Facts.ReadErrors = map[string]string{}
			for p := range tr.Files {
				if strings.HasPrefix(p, dir+"counters/") || strings.HasPrefix(p, dir+"hw_counters/") {
					tr.Facts.ReadErrors[p] = "EACCES"
				}
			}
		}), status: report.Error, exit: report.ExitUnknown, rootCause: "counters.errors",
			want:  []findingRef{ce("zero", "mlx5_0/1"), ce("unreadable", "mlx5_1/1")},
			lacks: []string{"management agent", "SR-IOV"}},
		{name: "counter directories that cannot be listed are an error", dir: cx5(func(tr *sysfstest.Tree) {
			for _, g := range []string{"counters", "hw_counters"} {
				dir := sysfstest.PortDir(tr, "mlx5_1", 1) + "/" + g
				tr.Remove(dir)
				tr.File(dir, "not a directory\n")
			}
		}), status: report.Error, exit: report.ExitUnknown, rootCause: "counters.errors",
			want: []findingRef{ce("zero", "mlx5_0/1"), ce("read-failed", "mlx5_1/1")}, contains: []string{"mlx5_1 port 1: list ", "not a directory"}},
		{name: "unreadable for two reasons", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", "symbol_error", "N/A (no PMA)")
			sysfstest.SetCounter(tr, "mlx5_1", 1, "counters", "symbol_error", "N/A (no PMA)")
			sysfstest.SetCounter(tr, "mlx5_1", 1, "counters", "link_downed", "x")
		}), status: report.Pass, want: clean,
			contains: []string{"; 1 counters unreadable (\"x\": not a counter value) on mlx5_1 port 1; 2 counters unreadable (N/A (no PMA)) on mlx5_0 port 1, mlx5_1 port 1"}},
		{name: "malformed and binary counters are unknown", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", "symbol_error", "lots")
			sysfstest.SetCounter(tr, "mlx5_0", 1, "hw_counters", "out_of_buffer", "\x00\xff\x01")
		}), status: report.Pass, want: clean, contains: []string{`"lots": not a counter value`, "out_of_buffer"}},
		{name: "a protocol statistic is reported, not judged", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mlx5_1", 1, "hw_counters", "out_of_sequence", "42")
			sysfstest.SetCounter(tr, "mlx5_1", 1, "hw_counters", "np_cnp_sent", "7")
		}), status: report.Pass, want: clean, contains: []string{"2 protocol statistic(s) nonzero, reported, not judged",
			"out_of_sequence = 42: packets received out of sequence: packets were lost on the way (reported, not judged)"}},
		{name: "a VF's unreadable PMA names its PF", dir: cx5(func(tr *sysfstest.Tree) {
			tr.RelLink("/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1/physfn", "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0")
			sysfstest.SetAllCounters(tr, "mlx5_1", 1, "counters", "N/A (no PMA)")
			sysfstest.SetAllCounters(tr, "mlx5_1", 1, "hw_counters", "N/A (no PMA)")
		}), status: report.Error, exit: report.ExitUnknown, rootCause: "counters.errors",
			want:     []findingRef{ce("zero", "mlx5_0/1"), ce("vf-unreadable", "mlx5_1/1")},
			contains: []string{"mlx5_1 is an SR-IOV VF of 0000:3b:00.0: the physical link's errors are counted on the PF's port"}},
	})
}

// Counts: below the threshold, beyond it, saturated, and what --interval
// makes of them.
func TestCountersErrorsCounts(t *testing.T) {
	cx5 := func(tree func(tr *sysfstest.Tree)) string { return cx5With(t, tree) }
	runCountersCases(t, []countersCase{
		{name: "symbol_error below its threshold warns", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", "symbol_error", "3")
		}), status: report.Warn, want: []findingRef{ce("nonzero", "mlx5_0/1"), ce("zero", "mlx5_1/1")},
			contains: []string{"symbol_error = 3 (threshold 10)", "RoCE ports have no PMA reset"},
			lacks:    []string{"perfquery -C"}},
		{name: "symbol_error beyond its threshold fails", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", "symbol_error", "50")
		}), status: report.Fail, exit: 22, rootCause: "counters.errors", want: []findingRef{ce("symbol-errors", "mlx5_0/1"), ce("zero", "mlx5_1/1")},
			contains: []string{"symbol_error = 50, beyond the threshold 10"}},
		{name: "a 16-bit legacy counter at its maximum is saturated", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", "port_rcv_errors", "65535")
		}), status: report.Warn, want: []findingRef{ce("saturated", "mlx5_0/1"), ce("zero", "mlx5_1/1")}},
		{name: "beyond the threshold but not rising in --interval: history, said", dir: netFixture("counters-above-threshold"),
			opts: checks.Options{Interval: 50 * time.Millisecond}, status: report.Warn, want: []findingRef{ce("not-rising", "mlx5_0/1")},
			contains: []string{"port_rcv_errors = 12, beyond the threshold 10", "it did not rise in 50ms"}},
		{name: "counters-above-threshold", dir: netFixture("counters-above-threshold"), status: report.Fail, exit: 22, rootCause: "counters.errors",
			want: []findingRef{ce("rcv-errors", "mlx5_0/1")}, contains: []string{"perfquery -C mlx5_0 -P 1 -R"}},
	})
}

// driverHost is CX5RoCE with its two functions given to another driver, as
// that driver's device names and counters.
func driverHost(t *testing.T, driver string, vendor, device uint16, ibdevs [2]string, tree func(tr *sysfstest.Tree)) string {
	t.Helper()
	h := sysfstest.CX5RoCE()
	for i := range h.NICs {
		h.NICs[i].Driver, h.NICs[i].Vendor, h.NICs[i].Device, h.NICs[i].IBDev = driver, vendor, device, ibdevs[i]
	}
	tr := sysfstest.Build(h)
	if tree != nil {
		tree(tr)
	}
	return hwWrite(t, tr)
}

// deviceCounter writes one of a device's own hw_counters.
func deviceCounter(tr *sysfstest.Tree, dev, name, value string) {
	tr.Attr(path.Join(path.Dir(path.Dir(sysfstest.PortDir(tr, dev, 1))), "hw_counters", name), value)
}

// Each driver is judged by the counters it has: EFA and irdma have no
// PortCounters, only hw_counters; siw and cxgb4 have no error counters.
func TestCountersErrorsByDriver(t *testing.T) {
	efa := [2]string{"rdmap59s0", "rdmap59s1"}
	cases := []struct {
		name     string
		dir      string
		status   report.Status
		want     []findingRef
		contains []string
		lacks    []string
	}{
		{"efa clean", driverHost(t, "efa", 0x1d0f, 0xefa1, efa, nil), report.Pass,
			[]findingRef{ce("zero", "rdmap59s0/1"), ce("zero", "rdmap59s0/device"), ce("zero", "rdmap59s1/1"), ce("zero", "rdmap59s1/device")},
			[]string{"rdmap59s0 device counters: 1 error counters read"},
			[]string{"unknown", "N/A"}},
		{"efa rx_drops beyond the threshold", driverHost(t, "efa", 0x1d0f, 0xefa1, efa, func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "rdmap59s1", 1, "hw_counters", "rx_drops", "25000")
			sysfstest.SetCounter(tr, "rdmap59s1", 1, "hw_counters", "retrans_pkts", "17852")
		}), report.Fail,
			[]findingRef{ce("zero", "rdmap59s0/1"), ce("zero", "rdmap59s0/device"), ce("rx-queue-drops", "rdmap59s1/1"), ce("zero", "rdmap59s1/device")},
			[]string{"retrans_pkts = 17852", "hw_counters reset only when the driver reloads"},
			[]string{"perfquery -C"}},
		{"efa device fault", driverHost(t, "efa", 0x1d0f, 0xefa1, efa, func(tr *sysfstest.Tree) {
			deviceCounter(tr, "rdmap59s0", "no_completion_cmds", "11")
			deviceCounter(tr, "rdmap59s1", "no_completion_cmds", "2")
			deviceCounter(tr, "rdmap59s1", "cmds_err", "40")
		}), report.Fail,
			[]findingRef{ce("zero", "rdmap59s0/1"), ce("device-faults", "rdmap59s0/device"), ce("zero", "rdmap59s1/1"), ce("nonzero", "rdmap59s1/device")},
			[]string{"no_completion_cmds = 2 (threshold 10)", "cmds_err = 40"}, nil},
		{"irdma without PMA is judged by hw_counters", driverHost(t, "ice", 0x8086, 0x159b, [2]string{"irdma0", "irdma1"}, func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "irdma0", 1, "hw_counters", "ip4InTruncatedPkts", "40")
			sysfstest.SetCounter(tr, "irdma0", 1, "hw_counters", "tcpInOptErrors", "400")
			sysfstest.SetCounter(tr, "irdma1", 1, "hw_counters", "ip6InDiscards", "400")
			sysfstest.SetCounter(tr, "irdma1", 1, "hw_counters", "tcpRetransSegs", "9")
		}), report.Fail,
			[]findingRef{ce("corrupt-packets", "irdma0/1"), ce("tcp-errors", "irdma0/1"), ce("discards", "irdma1/1")},
			[]string{"tcpRetransSegs = 9", "hw_counters reset only when the driver reloads"},
			[]string{"N/A", "could not be determined", "perfquery -C"}},
		{"erdma's counters are not in the table", driverHost(t, "erdma", 0x1ded, 0x107f, [2]string{"erdma_0", "erdma_1"}, func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "erdma_0", 1, "hw_counters", "listen_failed_cnt", "3")
		}), report.Skip, []findingRef{ce("not-in-table", "erdma_0/1"), ce("no-counters", "erdma_1")},
			nil, nil},
		{"bnxt_re recoverable_errors is broadcast traffic, not errors", driverHost(t, "bnxt_en", 0x14e4, 0x1750, [2]string{"bnxt_re0", "bnxt_re1"}, func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "bnxt_re0", 1, "hw_counters", "recoverable_errors", "123456")
		}), report.Pass, []findingRef{ce("zero", "bnxt_re0/1"), ce("zero", "bnxt_re1/1")}, nil, []string{"recoverable_errors"}},
		{"bnxt_re faults", driverHost(t, "bnxt_en", 0x14e4, 0x1750, [2]string{"bnxt_re0", "bnxt_re1"}, func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "bnxt_re0", 1, "hw_counters", "res_rx_pci_err", "11")
			sysfstest.SetCounter(tr, "bnxt_re1", 1, "hw_counters", "rx_roce_discards", "101")
			sysfstest.SetCounter(tr, "bnxt_re1", 1, "hw_counters", "rx_out_of_buffer", "20000")
		}), report.Fail, []findingRef{ce("device-faults", "bnxt_re0/1"), ce("rx-queue-drops", "bnxt_re1/1"), ce("discards", "bnxt_re1/1")}, nil, nil},
		{"cxgb4 has TCP statistics only", driverHost(t, "cxgb4", 0x1425, 0x6410, [2]string{"cxgb4_0", "cxgb4_1"}, func(tr *sysfstest.Tree) {
			deviceCounter(tr, "cxgb4_0", "ip4RetransSegs", "5")
		}), report.Skip, []findingRef{ce("statistics-only", "cxgb4_0/device"), ce("statistics-only", "cxgb4_1/device")},
			[]string{"ip4RetransSegs = 5"}, nil},
		{"mana hardware error", driverHost(t, "mana", 0x1414, 0x00ba, [2]string{"mana_0", "mana_1"}, func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mana_0", 1, "hw_counters", "general_hw_error", "11")
			sysfstest.SetCounter(tr, "mana_0", 1, "hw_counters", "requester_timeout", "4")
			deviceCounter(tr, "mana_1", "received_ecns", "8")
		}), report.Fail,
			[]findingRef{ce("device-faults", "mana_0/1"), ce("statistics-only", "mana_0/device"), ce("zero", "mana_1/1"), ce("statistics-only", "mana_1/device")},
			[]string{"general_hw_error = 11, beyond the threshold 10", "received_ecns = 8"}, nil},
		{"qedr has no counters", driverHost(t, "qede", 0x1077, 0x8070, [2]string{"qedr0", "qedr1"}, nil), report.Skip,
			[]findingRef{ce("no-counters", "qedr0"), ce("no-counters", "qedr1")},
			nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := hwRunOne(t, tc.dir, "counters.errors", checks.Options{})
			text := c.Summary + "\n" + strings.Join(c.Details, "\n") + "\n" + c.Remedy
			if c.Status != tc.status {
				t.Errorf("status %s, want %s\n%s", c.Status, tc.status, text)
			}
			if diff := cmp.Diff(tc.want, refs(c.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, text)
			}
			checkTexts(t, text, tc.contains, tc.lacks)
		})
	}
}

// checkTexts wants every one of contains in text and none of lacks.
func checkTexts(t *testing.T, text string, contains, lacks []string) {
	t.Helper()
	for _, s := range contains {
		if !strings.Contains(text, s) {
			t.Errorf("lacks %q:\n%s", s, text)
		}
	}
	for _, s := range lacks {
		if strings.Contains(text, s) {
			t.Errorf("holds %q:\n%s", s, text)
		}
	}
}

// siw registers no counters at all: skipped with the reason, never error.
func TestCountersErrorsSoftIWARP(t *testing.T) {
	h := sysfstest.RXE()
	h.Soft[0].Name = "siw0"
	c := hwRunOne(t, hwWrite(t, sysfstest.Build(h)), "counters.errors", checks.Options{})
	if diff := cmp.Diff([]findingRef{ce("no-counters", "siw0")}, refs(c.Findings)); c.Status != report.Skip || diff != "" {
		t.Fatalf("%s %q\n%s", c.Status, c.Summary, diff)
	}
}

// A counter that rises between the two samples of --interval fails; one
// that stays put does not.
func TestCountersErrorsInterval(t *testing.T) {
	dir := hwWrite(t, sysfstest.Build(sysfstest.CX6IB()))
	still := hwRun(t, dir, checks.Options{Interval: 100 * time.Millisecond}, "counters.errors")
	if c := hwResult(t, still, "counters.errors"); c.Status != report.Pass || !strings.Contains(c.Summary, "none rose in 100ms") ||
		cmp.Diff([]findingRef{ce("zero", "mlx5_0/1")}, refs(c.Findings)) != "" {
		t.Fatalf("steady counters: %s %q %v", c.Status, c.Summary, refs(c.Findings))
	}

	f := filepath.Join(dir, "sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error")
	if err := os.WriteFile(f, []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Well after the first sample and well before the second, even on
		// a loaded machine where building the run takes a while.
		time.Sleep(1500 * time.Millisecond)
		os.WriteFile(f, []byte("9\n"), 0o644)
	}()
	r := hwRun(t, dir, checks.Options{Interval: 3 * time.Second}, "counters.errors")
	<-done
	c := hwResult(t, r, "counters.errors")
	if c.Status != report.Fail || r.ExitCode != 22 || cmp.Diff([]findingRef{ce("rising", "mlx5_0/1")}, refs(c.Findings)) != "" ||
		!strings.Contains(c.Summary, "symbol_error rose by 2") {
		t.Fatalf("rising counter below its threshold: %s exit %d %q %v", c.Status, r.ExitCode, c.Summary, refs(c.Findings))
	}

	// A steady count below the threshold warns and says it did not rise.
	r = hwRun(t, dir, checks.Options{Interval: 100 * time.Millisecond}, "counters.errors")
	c = hwResult(t, r, "counters.errors")
	if c.Status != report.Warn || cmp.Diff([]findingRef{ce("nonzero", "mlx5_0/1")}, refs(c.Findings)) != "" ||
		!strings.Contains(c.Summary, "symbol_error = 9 (threshold 10)") || !strings.Contains(c.Summary, "it did not rise in 100ms") ||
		strings.Contains(c.Summary, "counts since boot") {
		t.Fatalf("steady count: %s %q", c.Status, c.Summary)
	}

	// A saturated counter cannot rise: --interval says so instead of "did not rise".
	sat := hwRun(t, netFixture("counters-saturated"), checks.Options{Interval: 100 * time.Millisecond}, "counters.errors")
	c = hwResult(t, sat, "counters.errors")
	satRefs := []findingRef{ce("saturated", "mlx5_0/1"), ce("nonzero", "mlx5_0/1"), ce("saturated", "mlx5_0/1")}
	if c.Status != report.Warn || cmp.Diff(satRefs, refs(c.Findings)) != "" ||
		!strings.Contains(c.Summary, "whether it still rises cannot be told: reset it (`perfquery -C mlx5_0 -P 1 -R`)") {
		t.Fatalf("saturated with --interval: %s exit %d %q", c.Status, sat.ExitCode, c.Summary)
	}

	// An interval longer than the check's deadline is shortened, not an error.
	r = hwRun(t, dir, checks.Options{Interval: time.Minute, CheckTimeout: 500 * time.Millisecond}, "counters.errors")
	c = hwResult(t, r, "counters.errors")
	if c.Status == report.Error || !strings.Contains(strings.Join(c.Details, "\n"), "longer than the check's deadline") {
		t.Fatalf("long interval: %s %q %v", c.Status, c.Summary, c.Details)
	}
}

// Driver counters are 64-bit: a rxe link_downed of 255 is a count, not a
// saturated 8-bit PMA counter.
func TestCountersSaturationIsPerWidth(t *testing.T) {
	tr := sysfstest.Build(sysfstest.RXE())
	sysfstest.SetCounter(tr, "rxe0", 1, "hw_counters", "link_downed", "255")
	r := hwRun(t, hwWrite(t, tr), checks.Options{}, "counters.errors")
	c := hwResult(t, r, "counters.errors")
	if diff := cmp.Diff([]findingRef{ce("link-downed", "rxe0/1")}, refs(c.Findings)); c.Status != report.Fail || diff != "" {
		t.Fatalf("%s %q\n%s", c.Status, c.Summary, diff)
	}
}

// A stop while waiting between the two samples of --interval is an error
// that says so, not a verdict on the counters.
func TestCountersErrorsIntervalStopped(t *testing.T) {
	h, err := sysfs.Open(netFixture("cx6-ib-healthy"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, _ := checks.Lookup("counters.errors")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := c.Run(ctx, checks.NewEnv(h, checks.Options{Level: 1, Interval: time.Minute}))
	if diff := cmp.Diff([]findingRef{ce("interval-stopped", "")}, refs(r.Findings)); r.Status != report.Error || diff != "" {
		t.Fatalf("%s %q\n%s", r.Status, r.Summary, diff)
	}
	if r.Summary != "stopped while waiting 1m0s between the two counter samples: context canceled" {
		t.Errorf("summary %q", r.Summary)
	}
}

// Without a device to read, or with the device list unreadable, the check
// says so about the host.
func TestCountersErrorsDeviceFindings(t *testing.T) {
	notADir := cx5FileForDir(t, "/sys/class/infiniband")
	for _, tc := range []struct {
		name, dir string
		want      []findingRef
	}{
		{"no device", netFixture("no-rdma-nic"), []findingRef{ce("no-device", "")}},
		{"device list unreadable", notADir, []findingRef{ce("devices-unreadable", "")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRunOne(t, tc.dir, "counters.errors", checks.Options{})
			if diff := cmp.Diff(tc.want, refs(r.Findings)); r.Status != report.Error || r.Remedy == "" || diff != "" {
				t.Errorf("%s %q, remedy %q\n%s", r.Status, r.Summary, r.Remedy, diff)
			}
		})
	}
}

// Every family of error counters is named by its own finding when a
// counter of it is beyond its threshold: the ID an expectations file
// waives. Each case sets one counter of the family on a host whose driver
// has it.
func TestCountersErrorsFamilies(t *testing.T) {
	pma := func(name, value string) string {
		tr := sysfstest.Build(sysfstest.CX6IB())
		sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", name, value)
		return hwWrite(t, tr)
	}
	hw := func(name, value string) string {
		tr := sysfstest.Build(sysfstest.CX6IB())
		sysfstest.SetCounter(tr, "mlx5_0", 1, "hw_counters", name, value)
		return hwWrite(t, tr)
	}
	for _, tc := range []struct{ family, dir string }{
		{"symbol-errors", pma("symbol_error", "11")},
		{"link-downed", pma("link_downed", "11")},
		{"link-recovery", pma("link_error_recovery", "11")},
		{"rcv-errors", pma("port_rcv_errors", "11")},
		{"remote-errors", pma("port_rcv_remote_physical_errors", "101")},
		{"remote-errors", pma("port_rcv_switch_relay_errors", "101")},
		{"xmit-discards", pma("port_xmit_discards", "101")},
		{"constraint-errors", pma("port_rcv_constraint_errors", "101")},
		{"link-integrity", pma("local_link_integrity_errors", "11")},
		{"buffer-overrun", pma("excessive_buffer_overrun_errors", "11")},
		{"vl15-dropped", pma("VL15_dropped", "101")},
		{"corrupt-packets", hw("rx_icrc_encapsulated", "11")},
		{"rx-queue-drops", hw("out_of_buffer", "10001")},
	} {
		t.Run(tc.family, func(t *testing.T) {
			r := hwRunOne(t, tc.dir, "counters.errors", checks.Options{})
			if diff := cmp.Diff([]findingRef{ce(tc.family, "mlx5_0/1")}, refs(r.Findings)); r.Status != report.Fail || diff != "" {
				t.Errorf("%s %q\n%s", r.Status, r.Summary, diff)
			}
		})
	}
}

// A class waives one family by ID, with a reason: that finding stays in
// the report, marked, and no longer counts; a finding of another family on
// the same host still fails the check, and a waiver of another ID changes
// nothing.
func TestCountersErrorsWaiveSymbolErrors(t *testing.T) {
	const waiver = "waive = [\"counters.errors/symbol-errors\"]\nwaive_reason = \"marginal cable batch, replacement ordered\"\n"
	host := func(rcvErrors string) string {
		tr := sysfstest.Build(sysfstest.CX5RoCE())
		sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", "symbol_error", "50")
		sysfstest.SetCounter(tr, "mlx5_1", 1, "counters", "port_rcv_errors", rcvErrors)
		return hwWrite(t, tr)
	}
	waived := func(c report.CheckResult) []string {
		var out []string
		for _, f := range c.Findings {
			out = append(out, f.ID+" "+f.Unit+" "+f.Waived)
		}
		return out
	}

	// Only symbol errors: waived, the check passes and the run is healthy.
	r := hwRun(t, host("0"), classOf(t, waiver))
	c := hwResult(t, r, "counters.errors")
	if c.Status != report.Pass || r.ExitCode != 0 {
		t.Fatalf("counters.errors %s, exit %d, want pass and 0: %s", c.Status, r.ExitCode, c.Summary)
	}
	want := []string{"counters.errors/symbol-errors mlx5_0/1 marginal cable batch, replacement ordered (expect.conf:3 waive = counters.errors/symbol-errors)",
		"counters.errors/zero mlx5_1/1 "}
	if diff := cmp.Diff(want, waived(c)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}

	// Symbol errors and receive errors: only the first is waived; the
	// receive errors fail the check and lead the drain reason.
	r = hwRun(t, host("50"), classOf(t, waiver))
	c = hwResult(t, r, "counters.errors")
	if c.Status != report.Fail || r.ExitCode != 22 || c.FindingID() != "counters.errors/rcv-errors" || !strings.HasPrefix(c.Summary, "port_rcv_errors = 50") {
		t.Fatalf("counters.errors %s (%s), exit %d: %s", c.Status, c.FindingID(), r.ExitCode, c.Summary)
	}
	want = []string{"counters.errors/symbol-errors mlx5_0/1 marginal cable batch, replacement ordered (expect.conf:3 waive = counters.errors/symbol-errors)",
		"counters.errors/rcv-errors mlx5_1/1 "}
	if diff := cmp.Diff(want, waived(c)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}

	// A waiver of another finding leaves the symbol errors failing.
	other := classOf(t, "waive = counters.errors/link-downed\nwaive_reason = \"x\"\n")
	if c := hwResult(t, hwRun(t, host("0"), other), "counters.errors"); c.Status != report.Fail || c.FindingID() != "counters.errors/symbol-errors" {
		t.Errorf("an unrelated waiver made counters.errors %s (%s)", c.Status, c.FindingID())
	}
}
