package checks_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestCountersErrors(t *testing.T) {
	cx5 := func(tree func(tr *sysfstest.Tree)) string {
		tr := sysfstest.Build(sysfstest.CX5RoCE())
		tree(tr)
		return hwWrite(t, tr)
	}
	runNetCases(t, "counters.errors", []netCase{
		{name: "cx5-roce-healthy", dir: netFixture("cx5-roce-healthy"), status: report.Pass, contains: []string{"zero on 2 port(s)", "24 error counters read, all zero"}},
		{name: "cx6-ib-healthy", dir: netFixture("cx6-ib-healthy"), status: report.Pass},
		{name: "rxe-softroce", dir: netFixture("rxe-softroce"), status: report.Pass},
		{name: "counters-saturated", dir: netFixture("counters-saturated"), status: report.Warn,
			contains: []string{"link_downed = 255, saturated", "symbol_error = 65535, saturated", "port_rcv_errors = 12: packets received with errors", "--interval",
				"a saturated counter cannot show a rise: reset it first",
				"To start from zero after a repair: `perfquery -C mlx5_0 -P 1 -R` (IB PortCounters; -a for all ports). RoCE ports have no PMA reset: " +
					"compare with --interval instead. hw_counters reset only when the driver reloads."},
			lacks: []string{"perfquery -x"}},
		{name: "counters-na-no-pma", dir: netFixture("counters-na-no-pma"), status: report.Pass,
			contains: []string{"unknown (N/A (no PMA)): excessive_buffer_overrun_errors", "mlx5_1 port 1: 13 error counters read",
				"error counters zero on 2 port(s); 11 counters unreadable (N/A (no PMA)) on mlx5_1 port 1", "all readable ones zero"}},
		{name: "every counter unknown", dir: cx5(func(tr *sysfstest.Tree) {
			for _, d := range []string{"mlx5_0", "mlx5_1"} {
				sysfstest.SetAllCounters(tr, d, 1, "counters", "N/A (no PMA)")
				sysfstest.SetAllCounters(tr, d, 1, "hw_counters", "N/A (no PMA)")
			}
		}), status: report.Error, exit: 22, rootCause: "counters.errors",
			contains: []string{"no error counter could be read on any of 2 port(s)", "could not be determined", "48 counters unreadable (N/A (no PMA)) on mlx5_0 port 1, mlx5_1 port 1",
				"ethtool -S"}},
		{name: "unreadable for two reasons", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", "symbol_error", "N/A (no PMA)")
			sysfstest.SetCounter(tr, "mlx5_1", 1, "counters", "symbol_error", "N/A (no PMA)")
			sysfstest.SetCounter(tr, "mlx5_1", 1, "counters", "link_downed", "x")
		}), status: report.Pass, contains: []string{"; 1 counters unreadable (\"x\": not a counter value) on mlx5_1 port 1; 2 counters unreadable (N/A (no PMA)) on mlx5_0 port 1, mlx5_1 port 1"}},
		{name: "malformed and binary counters are unknown", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", "symbol_error", "lots")
			sysfstest.SetCounter(tr, "mlx5_0", 1, "hw_counters", "out_of_buffer", "\x00\xff\x01")
		}), status: report.Pass, contains: []string{`"lots": not a counter value`, "out_of_buffer"}},
		{name: "hw counter nonzero", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mlx5_1", 1, "hw_counters", "out_of_sequence", "42")
		}), status: report.Warn, contains: []string{"mlx5_1 port 1 out_of_sequence = 42: packets received out of sequence",
			"To start from zero after a repair: RoCE ports have no PMA reset: compare with --interval instead."},
			lacks: []string{"perfquery -C"}},
		{name: "a 32-bit legacy counter at its maximum", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", "port_rcv_errors", "65535")
		}), status: report.Warn, contains: []string{"port_rcv_errors = 65535, saturated"}},
	})
}

// A counter that rises between the two samples of --interval fails; one
// that stays put does not.
func TestCountersErrorsInterval(t *testing.T) {
	dir := hwWrite(t, sysfstest.Build(sysfstest.CX6IB()))
	still := hwRun(t, dir, checks.Options{Interval: 100 * time.Millisecond}, "counters.errors")
	if c := hwResult(t, still, "counters.errors"); c.Status != report.Pass || !strings.Contains(c.Summary, "none rose in 100ms") {
		t.Fatalf("steady counters: %s %q", c.Status, c.Summary)
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
		os.WriteFile(f, []byte("19\n"), 0o644)
	}()
	r := hwRun(t, dir, checks.Options{Interval: 3 * time.Second}, "counters.errors")
	<-done
	c := hwResult(t, r, "counters.errors")
	if c.Status != report.Fail || r.ExitCode != 22 || !strings.Contains(c.Summary, "symbol_error rose by 12") {
		t.Fatalf("rising counter: %s exit %d %q", c.Status, r.ExitCode, c.Summary)
	}

	// A saturated counter cannot rise: --interval does not call it a past event.
	sat := hwRun(t, netFixture("counters-saturated"), checks.Options{Interval: 100 * time.Millisecond}, "counters.errors")
	c = hwResult(t, sat, "counters.errors")
	if c.Status != report.Warn || sat.ExitCode != 0 ||
		!strings.Contains(c.Summary, "link_downed = 255 (the link went down: cable pulled, peer reset or training failed), saturated: whether it still rises cannot be told; reset it (`perfquery -C mlx5_0 -P 1 -R`) and measure again") ||
		!strings.Contains(c.Summary, "none of the others rose in 100ms: past events") || strings.Contains(c.Summary, "none rose") {
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
	if c.Status != report.Warn || strings.Contains(c.Summary, "saturated") || !strings.Contains(c.Summary, "link_downed = 255") {
		t.Fatalf("%s %q", c.Status, c.Summary)
	}
}
