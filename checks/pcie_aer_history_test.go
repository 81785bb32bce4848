package checks

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// aerRuns writes base once; each run then rewrites only the AER files of
// the tree it is given (sysfstest.RewriteAER) and runs pcie.aer at now
// with the kept state st (nil: a run without --state).
func aerRuns(t *testing.T, base *sysfstest.Tree) func(tr *sysfstest.Tree, st *state.State, now time.Time) report.CheckResult {
	dir := filepath.Join(t.TempDir(), "host")
	if err := base.Write(dir); err != nil {
		t.Fatal(err)
	}
	return func(tr *sysfstest.Tree, st *state.State, now time.Time) report.CheckResult {
		t.Helper()
		if err := sysfstest.RewriteAER(dir, tr); err != nil {
			t.Fatal(err)
		}
		return runAER(t, dir, st, now)
	}
}

// runAER runs pcie.aer on dir at now with the kept state st.
func runAER(t *testing.T, dir string, st *state.State, now time.Time) report.CheckResult {
	t.Helper()
	return runCheckAt(t, "pcie.aer", dir, st, now)
}

// Correctable errors rising on the switch's downstream port above mlx5_0,
// run after run with a state: the first run judges the count since boot,
// later ones the rise since the previous run, at its rate.
func TestPCIeAERAcrossRuns(t *testing.T) {
	st := state.New("hgx")
	run := aerRuns(t, sysfstest.AERHealthy())
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	steps := []struct {
		status  report.Status
		finding string
		has     string
	}{
		{report.Pass, "pcie.aer/clean", "correctable link errors 8 since boot (10.0 days) (0.0/h)"},
		{report.Warn, "pcie.aer/correctable-rising", "mlx5_0 0000:18:00.0: 30 correctable link errors since the last run at 2026-02-01T08:00:00Z (1.0 h) " +
			"on the switch's downstream port 0000:17:00.0 (RxErr 24, BadTLP 6) — 30.0/h, above 10/h"},
		{report.Fail, "pcie.aer/correctable-storm", "900 correctable link errors since the last run at 2026-02-01T09:00:00Z (1.0 h) " +
			"on the switch's downstream port 0000:17:00.0 (RxErr 800, BadTLP 100) — 900.0/h, above 480/h"},
		{report.Fail, "pcie.aer/still-failing", "mlx5_0 0000:18:00.0: AER errors on the switch's downstream port 0000:17:00.0 failing since " +
			"2026-02-01T10:00:00Z, none failing this run; still failing on the link between the switch's downstream port 0000:17:00.0 and " +
			"mlx5_0 (0000:18:00.0): passes again after 3 clean runs (1 so far)"},
		{report.Fail, "pcie.aer/still-failing", "passes again after 3 clean runs (2 so far)"},
		{report.Pass, "pcie.aer/clean", "correctable link errors 0 since the last run at 2026-02-01T12:00:00Z (1.0 h) (0.0/h); " +
			"clean for 3 runs after failing since 2026-02-01T10:00:00Z: passes again"},
	}
	for i, s := range steps {
		r := run(sysfstest.AERCorrectableRising(min(i, 3)), st, at(i))
		if r.Status != s.status || !r.HasFinding(s.finding) {
			t.Errorf("step %d: %s %v, want %s %s: %s", i, r.Status, findingsAbout(r, "0000:18:00.0"), s.status, s.finding, r.Summary)
		}
		if text := r.Summary + "\n" + strings.Join(r.Details, "\n"); !strings.Contains(text, s.has) {
			t.Errorf("step %d lacks %q:\n%s", i, s.has, text)
		}
	}
	key := "pcie.aer/0000:17:00.0/aer_dev_correctable/RxErr"
	if cs := st.Series(key); cs == nil || len(cs.Samples) != len(steps) {
		t.Fatalf("series %s: %+v", key, cs)
	}
	if cs := st.Series("pcie.aer/0000:18:00.0/aer_dev_nonfatal/TOTAL_ERR_NONFATAL"); cs == nil || len(cs.Samples) != len(steps) {
		t.Errorf("the NIC's non-fatal total is kept too: %+v", cs)
	}
}

// An uncorrectable error since boot warns on the first run; with the
// state, a new one fails the next run (non-fatal on the NIC, fatal on the
// root port), and a run without a new one passes. Without --state every
// run is a first.
func TestPCIeAERUncorrectableAcrossRuns(t *testing.T) {
	st := state.New("hgx")
	run := aerRuns(t, sysfstest.AERHealthy())
	errs := func(nonfatal, fatal uint64) *sysfstest.Tree {
		return sysfstest.AERHGX(map[string]sysfstest.AERCounts{
			sysfstest.AERNIC:      {NonFatal: map[string]uint64{"CmpltTO": nonfatal}},
			sysfstest.AERRootPort: {Fatal: map[string]uint64{"SDES": fatal}},
		})
	}
	steps := []struct {
		tree  *sysfstest.Tree
		st    *state.State
		want  []string
		words string
	}{
		{sysfstest.AERNonFatalOnNIC(), st, []string{"pcie.aer/uncorrectable-since-boot"}, "1 non-fatal uncorrectable AER error message(s) since boot (10.0 days)"},
		{errs(2, 0), st, []string{"pcie.aer/nonfatal"}, "1 non-fatal uncorrectable AER error message(s) since the last run at 2026-02-01T08:00:00Z (1.0 h) on mlx5_0 (0000:18:00.0) (CmpltTO 2 since boot)"},
		{errs(2, 1), st, []string{"pcie.aer/fatal", "pcie.aer/still-failing"}, "1 fatal AER error message(s) since the last run at 2026-02-01T09:00:00Z (1.0 h) on the root port 0000:15:01.0 (SDES 1 since boot), " +
			"on the link between the root port 0000:15:01.0 and the switch's upstream port 0000:16:00.0"},
		{errs(2, 1), st, []string{"pcie.aer/still-failing", "pcie.aer/still-failing"}, "AER errors on mlx5_0 (0000:18:00.0) failing since 2026-02-01T09:00:00Z"},
		{errs(2, 1), nil, []string{"pcie.aer/uncorrectable-since-boot", "pcie.aer/uncorrectable-since-boot"}, "2 non-fatal uncorrectable AER error message(s) since boot"},
	}
	for i, s := range steps {
		r := run(s.tree, s.st, t0.Add(time.Duration(i)*time.Hour))
		if got := findingsAbout(r, sysfstest.AERNIC); strings.Join(got, " ") != strings.Join(s.want, " ") {
			t.Errorf("step %d: %v, want %v: %s", i, got, s.want, r.Summary)
		}
		if !strings.Contains(r.Summary, s.words) {
			t.Errorf("step %d: summary lacks %q:\n%s", i, s.words, r.Summary)
		}
	}
}

// A hop shared by two NICs (the CX-5's two functions below one root port)
// is read and observed once per run: the second NIC's judgement of it is
// not a second sample taken zero seconds later; both NICs carry the
// finding, as both sit behind that link.
func TestPCIeAERSharedHopObservedOnce(t *testing.T) {
	st := state.New("cx5")
	build := func(rx uint64) *sysfstest.Tree {
		tr := sysfstest.Build(sysfstest.CX5RoCE())
		root := "/sys/devices/pci0000:3a/0000:3a:00.0"
		sysfstest.WriteAER(tr, root, sysfstest.AERCounts{Correctable: map[string]uint64{"RxErr": rx}}, true)
		for _, fn := range []string{"0000:3b:00.0", "0000:3b:00.1"} {
			sysfstest.WriteAER(tr, root+"/"+fn, sysfstest.AERCounts{}, false)
		}
		return tr
	}
	run := aerRuns(t, build(0))
	run(build(10), st, t0)
	r := run(build(110), st, t0.Add(time.Hour))
	for _, fn := range []string{"0000:3b:00.0", "0000:3b:00.1"} {
		if got := findingsAbout(r, fn); len(got) != 1 || got[0] != "pcie.aer/correctable-rising" {
			t.Errorf("%s: %v (%s)", fn, got, r.Summary)
		}
	}
	if !strings.Contains(r.Summary, "100 correctable link errors since the last run") || !strings.Contains(r.Remedy, "the root port 0000:3a:00.0 and") {
		t.Errorf("summary %q\nremedy %q", r.Summary, r.Remedy)
	}
	if cs := st.Series("pcie.aer/0000:3a:00.0/aer_dev_correctable/RxErr"); cs == nil || len(cs.Samples) != 2 {
		t.Errorf("the root port's series after two runs: %+v", cs)
	}
}

// Each hop's errors are placed on the link its receiver sees.
func TestAERChainNamesEachHop(t *testing.T) {
	chain := []aerHop{{name: "mlx5_0 (0000:18:00.0)"}, {role: aerHopDownstream, name: "the switch's downstream port 0000:17:00.0"},
		{role: aerHopUpstream, name: "the switch's upstream port 0000:16:00.0"}, {role: aerHopRoot, name: "the root port 0000:15:01.0"}}
	want := []string{
		"the link between the switch's downstream port 0000:17:00.0 and mlx5_0 (0000:18:00.0)",
		"the link between the switch's downstream port 0000:17:00.0 and mlx5_0 (0000:18:00.0)",
		"the link between the root port 0000:15:01.0 and the switch's upstream port 0000:16:00.0",
		"the link between the root port 0000:15:01.0 and the switch's upstream port 0000:16:00.0",
	}
	for i := range chain {
		link, action := aerLinkOf(chain, i)
		if link != want[i] {
			t.Errorf("hop %d: %q, want %q", i, link, want[i])
		}
		if (i < 2) != (action == aerActionNICLink) {
			t.Errorf("hop %d: action %q", i, action)
		}
	}
	if link, _ := aerLinkOf(chain[:1], 0); link != "mlx5_0 (0000:18:00.0)'s own link" {
		t.Errorf("a NIC without a bridge above it: %q", link)
	}
}

// An ack of the hop ends the wait for clean runs: the next run without a
// rise passes, and the hop's line says the ack.
func TestPCIeAERAckEndsTheHold(t *testing.T) {
	st := state.New("hgx")
	run := aerRuns(t, sysfstest.AERHealthy())
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	for i := range 3 {
		run(sysfstest.AERCorrectableRising(i), st, at(i))
	}
	if _, err := AckRises(st, "pcie.aer", sysfstest.AERSwitchDownstreamPort, "retimer replaced", at(3)); err != nil {
		t.Fatal(err)
	}
	r := run(sysfstest.AERCorrectableRising(3), st, at(4))
	if got := findingsAbout(r, sysfstest.AERNIC); r.Status != report.Pass || len(got) != 1 || got[0] != "pcie.aer/clean" {
		t.Errorf("the run after the ack: %s %v: %s", r.Status, got, r.Summary)
	}
	if text := strings.Join(r.Details, "\n"); !strings.Contains(text, "acknowledged at 2026-02-01T11:00:00Z: retimer replaced") {
		t.Errorf("the hop's line lacks the ack:\n%s", text)
	}
}
