package checks

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/mad"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
)

// runFarEndAt runs ib.far_end against f at now with the kept state st
// (nil: a run without --state), as runCheckAt runs a sysfs check: the MADs
// need a live host, which a host directory is not.
func runFarEndAt(t *testing.T, f *fakeFabric, st *state.State, now time.Time) Result {
	t.Helper()
	countersNow = func() time.Time { return now }
	defer func() { countersNow = time.Now }()
	return runIBWith(t, "ib.far_end", f, nil, "", Options{CheckTimeout: 5 * time.Second, State: st})
}

func farEndFabric() *fakeFabric {
	return &fakeFabric{ports: []mad.Port{ibPort(1, 5)}, smActs: []uint32{1}, nState: 4, nWidth: 2, nPort: 17}
}

// The neighbour's counters run after run with a state: the first reading
// is the count since they were last cleared (warn), later ones the rise
// since the previous run; a fatal rise or a symbol-error rate above 120/h
// fails and holds through clean runs; an ack ends the hold.
func TestIBFarEndCountersAcrossRuns(t *testing.T) {
	f := farEndFabric()
	st := state.New("ib")
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	steps := []struct {
		edit   func(c *mad.PortCounters)
		status report.Status
		want   []string // findings about mlx5_0/1, without the check's prefix
		has    string   // in the summary, remedy or details
	}{
		{func(c *mad.PortCounters) { c.SymbolErrors = 5 }, report.Warn, []string{"neighbour-errors"},
			`mlx5_0/1: "leaf-03 SX6036" (GUID 0x0002c90300beef00) port 17 counts SymbolErrorCounter 5 on this link since its counters were last cleared`},
		{func(c *mad.PortCounters) { c.SymbolErrors += 30 }, report.Warn, []string{"errors-rising"},
			"port 17: SymbolErrorCounter +30 since the last run at 2026-02-01T08:00:00Z (1.0 h)"},
		{func(c *mad.PortCounters) { c.SymbolErrors += 200 }, report.Fail, []string{"symbol-error-rate"},
			"200 symbol errors since the last run at 2026-02-01T09:00:00Z (1.0 h) (200/h, above 120/h): the cable is degrading"},
		{nil, report.Fail, []string{"still-failing"},
			"SymbolErrorCounter rising at \"leaf-03 SX6036\" (GUID 0x0002c90300beef00) port 17 since 2026-02-01T10:00:00Z, not this run; " +
				"still failing: passes again after 3 clean runs (1 so far)"},
		{func(c *mad.PortCounters) { c.LinkDowned++ }, report.Fail, []string{"link-errors-rising", "still-failing"},
			"LinkDownedCounter +1 since the last run at 2026-02-01T11:00:00Z (1.0 h): the link went down or lost integrity"},
		{func(c *mad.PortCounters) { c.XmitDiscards += 3 }, report.Fail, []string{"errors-rising", "still-failing"},
			"SymbolErrorCounter rising: clean for 3 runs after failing since 2026-02-01T10:00:00Z: passes again"},
	}
	for i, s := range steps {
		if s.edit != nil {
			s.edit(&f.nCounters)
		}
		r := runFarEndAt(t, f, st, at(i))
		text := r.Summary + "\n" + r.Remedy + "\n" + strings.Join(r.Details, "\n")
		var want []ibRef
		for _, id := range s.want {
			want = append(want, ibRef{"ib.far_end/" + id, "mlx5_0/1"})
		}
		if diff := cmp.Diff(want, ibRefs(r.Findings)); diff != "" || r.Status != s.status {
			t.Fatalf("run %d: %s, want %s; findings (-want +got):\n%s\n%s", i+1, r.Status, s.status, diff, text)
		}
		if !strings.Contains(text, s.has) {
			t.Errorf("run %d lacks %q:\n%s", i+1, s.has, text)
		}
		if i == 3 && !strings.Contains(r.Remedy, "`rdmadoctor ack ib.far_end --unit 0x0002c90300beef00:17 --reason TEXT`") {
			t.Errorf("run 4: the held failure's remedy lacks the ack: %s", r.Remedy)
		}
	}
	if cs := st.Series("ib.far_end/0x0002c90300beef00:17/SymbolErrorCounter"); cs == nil || len(cs.Samples) != len(steps) ||
		cs.Samples[2].Value != 235 || cs.Samples[0].BootID != "" {
		t.Errorf("state series: %+v", cs)
	}
	// The link-down failure is held; an ack of the neighbour's port ends it.
	if _, err := AckRises(st, "ib.far_end", "0x0002c90300beef00:17", "cable replaced", at(6)); err != nil {
		t.Fatal(err)
	}
	r := runFarEndAt(t, f, st, at(7))
	if diff := cmp.Diff([]ibRef{{"ib.far_end/ok", "mlx5_0/1"}}, ibRefs(r.Findings)); diff != "" {
		t.Errorf("after the ack (-want +got):\n%s\n%s", diff, r.Summary)
	}
	if d := strings.Join(r.Details, "\n"); !strings.Contains(d, "acknowledged at 2026-02-01T14:00:00Z: cable replaced") {
		t.Errorf("the ack is not in the details:\n%s", d)
	}
	// perfquery -R on the switch: lower values start a new series, said so.
	f.nCounters = mad.PortCounters{SymbolErrors: 1}
	r = runFarEndAt(t, f, st, at(8))
	if r.Status != report.Pass || !strings.Contains(strings.Join(r.Details, "\n"),
		"SymbolErrorCounter: cleared (perfquery -R, or the node restarted): 1 now, 235 at 2026-02-01T15:00:00Z: a new series") {
		t.Errorf("a clear: %s %s\n%s", r.Status, r.Summary, r.Details)
	}
}

// A cable moved to another switch port is a new series: its counts are
// judged as a first reading, not as a rise of the old port's.
func TestIBFarEndRecabledIsNewSeries(t *testing.T) {
	f := farEndFabric()
	st := state.New("ib")
	runFarEndAt(t, f, st, t0)
	f.nPort, f.nCounters.LinkDowned = 18, 4
	r := runFarEndAt(t, f, st, t0.Add(time.Hour))
	if diff := cmp.Diff([]ibRef{{"ib.far_end/neighbour-errors", "mlx5_0/1"}}, ibRefs(r.Findings)); diff != "" {
		t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
	}
	if st.Series("ib.far_end/0x0002c90300beef00:18/LinkDownedCounter") == nil {
		t.Errorf("no series for the new port")
	}
}

// Without --state every reading is a first: counts above zero warn as
// errors since the counters were last cleared, and nothing is held.
func TestIBFarEndCountersWithoutState(t *testing.T) {
	f := farEndFabric()
	f.nCounters = mad.PortCounters{LinkDowned: 2, LocalLinkIntegrityErrors: 15}
	r := runFarEndAt(t, f, nil, t0)
	if diff := cmp.Diff([]ibRef{{"ib.far_end/neighbour-errors", "mlx5_0/1"}}, ibRefs(r.Findings)); diff != "" {
		t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
	}
	if !strings.Contains(r.Summary, "LinkDownedCounter 2, LocalLinkIntegrityErrors 15 on this link since its counters were last cleared") ||
		!strings.Contains(strings.Join(r.Details, "\n"), "LocalLinkIntegrityErrors saturated at 15") {
		t.Errorf("%s\n%s", r.Summary, r.Details)
	}
}

// The neighbour's counters do not restart with this host: a reading after
// a reboot (another boot_id in the state) is a rise, not a new baseline.
func TestObserveRemoteIgnoresThisHostsBoot(t *testing.T) {
	st := state.New("ib")
	hr := &historyRun{st: st, now: t0, bootID: "boot-a", cleanRuns: DefaultCleanRuns}
	hr.observeRemote("ib.far_end/0x1:1/LinkDownedCounter", 3)
	hr.now, hr.bootID = t0.Add(time.Hour), "boot-b"
	r := hr.observeRemote("ib.far_end/0x1:1/LinkDownedCounter", 4)
	if r.Since != riseSincePrevious || r.Delta != 1 || r.Over != time.Hour {
		t.Errorf("after this host's reboot: %+v", r)
	}
	hr.now = t0
	if r := hr.observeRemote("ib.far_end/0x1:1/LinkDownedCounter", 5); r.Since != riseNewBaseline || !strings.Contains(r.Note, "clock went back") {
		t.Errorf("a clock gone back: %+v", r)
	}
}
