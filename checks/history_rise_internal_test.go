package checks

import (
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
