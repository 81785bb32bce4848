package checks

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/report/state"
)

func TestObserveSetsReadingsAgainstTheSeries(t *testing.T) {
	st := state.New("h")
	at := func(d time.Duration, boot string) *historyRun {
		return &historyRun{st: st, now: t0.Add(d), bootID: boot, uptime: 10*time.Hour + d, mu: &sync.Mutex{}}
	}
	key := "pcie.aer/0000:3b:00.0/aer_dev_correctable"
	steps := []struct {
		hr   *historyRun
		v    uint64
		want riseReading
	}{
		{at(0, boot1), 50, riseReading{Since: riseSinceBoot, Delta: 50, Over: 10 * time.Hour}},
		{at(time.Hour, boot1), 80, riseReading{Since: riseSincePrevious, Delta: 30, Over: time.Hour, Previous: t0}},
		{at(2*time.Hour, boot1), 80, riseReading{Since: riseSincePrevious, Delta: 0, Over: time.Hour, Previous: t0.Add(time.Hour)}},
		{at(3*time.Hour, boot1), 5, riseReading{Since: riseNewBaseline, Note: "new baseline: counter reset (driver reload?): 5 now, 80 at 2026-02-01T10:00:00Z"}},
		{at(4*time.Hour, boot2), 7, riseReading{Since: riseNewBaseline, Note: "new baseline: new boot (boot_id 22222222, was 11111111); 7 now, 5 before"}},
		{at(5*time.Hour, boot2), 9, riseReading{Since: riseSincePrevious, Delta: 2, Over: time.Hour, Previous: t0.Add(4 * time.Hour)}},
	}
	for i, s := range steps {
		got := s.hr.observe(key, s.v)
		if d := cmp.Diff(s.want, got); d != "" {
			t.Errorf("step %d (%d): -want +got\n%s", i, s.v, d)
		}
	}
	cs := st.Series(key)
	if cs == nil || len(cs.Samples) != len(steps) || cs.BaselineWhy != "new boot" {
		t.Fatalf("series after the steps: %+v", cs)
	}
	if r, ok := steps[1].want.PerHour(); !ok || r != 30 {
		t.Errorf("rate of 30 in an hour: %v %v", r, ok)
	}
}

func TestObserveWithoutStateIsSinceBoot(t *testing.T) {
	hr := &historyRun{now: t0, uptime: 0}
	got := hr.observe("link.phy/eth0/fec_uncorrectable", 12)
	if got.Since != riseSinceBoot || got.Delta != 12 || got.Words() != "since boot" {
		t.Errorf("no state: %+v (%s)", got, got.Words())
	}
	if _, ok := got.PerHour(); ok {
		t.Error("a rate without an uptime")
	}
}

// A series that failed stays held until it has had cleanRuns clean runs in
// a row; a new failure on the way restarts the count and keeps the first
// failure's time. A key never marked adds no series.
func TestHoldKeepsAFailureForCleanRuns(t *testing.T) {
	st := state.New("h")
	key := "link.phy/eth0/fec_uncorrectable"
	at := func(h int) *historyRun {
		return &historyRun{st: st, now: t0.Add(time.Duration(h) * time.Hour), cleanRuns: 3, mu: &sync.Mutex{}}
	}
	type verdict struct {
		Held  bool
		Since time.Time
		Clean int
	}
	steps := []struct {
		failing bool
		want    verdict
	}{
		{false, verdict{}}, // never failed
		{true, verdict{true, t0.Add(time.Hour), 0}},
		{false, verdict{true, t0.Add(time.Hour), 1}},
		{true, verdict{true, t0.Add(time.Hour), 0}}, // fails again: the count restarts
		{false, verdict{true, t0.Add(time.Hour), 1}},
		{false, verdict{true, t0.Add(time.Hour), 2}},
		{false, verdict{false, t0.Add(time.Hour), 3}}, // the third clean run: passes again
		{false, verdict{}},
	}
	for i, s := range steps {
		held, since, clean := at(i).hold(key, s.failing)
		if d := cmp.Diff(s.want, verdict{held, since, clean}); d != "" {
			t.Errorf("run %d (failing %v): -want +got\n%s", i, s.failing, d)
		}
		if i == 0 && st.Series(key) != nil {
			t.Errorf("a clean key never marked added a series: %+v", st.Series(key))
		}
	}
	if cs := st.Series(key); cs == nil || !cs.FailingSince.IsZero() || cs.CleanRuns != 0 {
		t.Errorf("the mark after it passed again: %+v", cs)
	}
	noState := &historyRun{now: t0, cleanRuns: 3}
	if held, _, _ := noState.hold(key, true); held {
		t.Error("held without a state")
	}
}

// An ack of a check that judges rises clears the held failures of its
// series on the unit named (or every unit), records the ack, and moves no
// level; a unit the history does not hold is refused with the ones it does.
func TestAckRisesClearsTheHold(t *testing.T) {
	st := state.New("h")
	hr := &historyRun{st: st, now: t0, cleanRuns: 3, mu: &sync.Mutex{}}
	hr.observe("link.phy/eth0/fec_uncorrectable", 5)
	hr.observe("link.phy/eth1/fec_uncorrectable", 5)
	hr.observe("pcie.aer/0000:17:00.0/aer_dev_correctable/RxErr", 5)
	for _, k := range []string{"link.phy/eth0/fec_uncorrectable", "link.phy/eth1/fec_uncorrectable", "pcie.aer/0000:17:00.0"} {
		hr.hold(k, true)
	}
	res, err := AckRises(st, "link.phy", "eth0", "cable replaced", t0.Add(time.Hour))
	if err != nil || !cmp.Equal(res, AckResult{Units: []string{"eth0"}, Counters: 1}) {
		t.Fatalf("ack of eth0: %+v %v", res, err)
	}
	if cs := st.Series("link.phy/eth0/fec_uncorrectable"); !cs.FailingSince.IsZero() || len(cs.Samples) != 1 || cs.Samples[0].Value != 5 {
		t.Errorf("eth0 after its ack: %+v", cs)
	}
	for _, k := range []string{"link.phy/eth1/fec_uncorrectable", "pcie.aer/0000:17:00.0"} {
		if cs := st.Series(k); cs.FailingSince.IsZero() {
			t.Errorf("%s lost its hold to another unit's ack", k)
		}
	}
	want := []state.Ack{{Check: "link.phy", Unit: "eth0", At: t0.Add(time.Hour), Reason: "cable replaced"}}
	if d := cmp.Diff(want, st.Acks); d != "" {
		t.Errorf("acks: -want +got\n%s", d)
	}
	res, err = AckRises(st, "pcie.aer", "", "switch board replaced", t0.Add(2*time.Hour))
	if err != nil || !cmp.Equal(res, AckResult{Units: []string{"0000:17:00.0"}, Counters: 1}) || !st.Series("pcie.aer/0000:17:00.0").FailingSince.IsZero() {
		t.Errorf("ack of every pcie.aer unit: %+v %v", res, err)
	}
	_, err = AckRises(st, "link.phy", "eth7", "x", t0)
	if err == nil || err.Error() != `no counter unit "eth7" in the state's history of link.phy; units: eth0, eth1` {
		t.Errorf("unknown unit: %v", err)
	}
	if _, err = AckRises(state.New("h"), "pcie.aer", "", "x", t0); err == nil || !strings.Contains(err.Error(), "no history of pcie.aer") {
		t.Errorf("no history: %v", err)
	}
	if _, err = AckRises(st, "port.state", "", "x", t0); err == nil {
		t.Error("port.state took an ack that clears holds")
	}
	if len(st.Acks) != 2 {
		t.Errorf("a refused ack was recorded: %+v", st.Acks)
	}
}
