package checks

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
)

const (
	boot1      = "11111111-1111-4111-8111-111111111111"
	boot2      = "22222222-2222-4222-8222-222222222222"
	symMeaning = "minor link errors"
)

var t0 = time.Date(2026, 2, 1, 8, 0, 0, 0, time.UTC)

// symLimits are symbol_error's defaults.
var symLimits = counterLimits{ratePerHour: 120, rateFrom: "BER", absolute: 10, absFrom: "rdma-core"}

type run struct {
	at     time.Time
	v      uint64
	boot   string
	status report.Status
	id     string // the finding's slug; "" for a pass
	text   string
	note   string
}

// symSlots are symbol_error's slots on one port.
var symSlots = Slots{"counter": "symbol_error", "meaning": symMeaning, "unit": "mlx5_0/1"}

// verdictOf is a reading's finding after hysteresis: its slug and message,
// rendered as the check renders it.
func verdictOf(r reading) (id, text string) {
	if r.finding == nil {
		return "", ""
	}
	f := r.finding.At("mlx5_0/1", r.slots)
	return strings.TrimPrefix(f.ID, "counters.errors/"), f.Message
}

// playRuns judges a counter over runs, each with hysteresis, as the check
// does, and compares every run's whole verdict.
func playRuns(t *testing.T, cs *state.CounterSeries, lim counterLimits, max uint64, uptime time.Duration, runs []run) {
	t.Helper()
	for i, want := range runs {
		r := judgeReading(cs, symSlots, want.v, max, lim, want.at, want.boot, uptime)
		hysteresis(cs, &r, "symbol_error", want.at, DefaultCleanRuns)
		id, text := verdictOf(r)
		got := run{at: want.at, v: want.v, boot: want.boot, status: r.status(), id: id, text: text, note: r.note}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d:\n got status %s %s\n text %q\n note %q\nwant status %s %s\n text %q\n note %q", i+1,
				got.status, got.id, got.text, got.note, want.status, want.id, want.text, want.note)
		}
	}
}

func TestHistoryRisingSteadyResetNewBoot(t *testing.T) {
	cs := &state.CounterSeries{Key: "mlx5_0/1/symbol_error"}
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	playRuns(t, cs, symLimits, 65535, 240*time.Hour, []run{
		{at: h(0), v: 0, boot: boot1, status: report.Pass},
		{at: h(1), v: 500, boot: boot1, status: report.Fail,
			id: "rate-exceeded", text: "symbol_error rose by 500 since 2026-02-01T08:00:00Z (500/h, above 120/h: BER): minor link errors; rising since 2026-02-01T09:00:00Z, in 1 of the last 2 runs"},
		{at: h(2), v: 500, boot: boot1, status: report.Fail,
			id: "still-failing", text: "symbol_error = 500, 500 since boot, beyond the absolute 10 (rdma-core), but not rising since 2026-02-01T09:00:00Z: minor link errors; " +
				"still failing: rising since 2026-02-01T09:00:00Z, in 1 of the last 3 runs; passes again after 3 clean runs (1 so far)"},
		{at: h(3), v: 3, boot: boot1, status: report.Fail,
			id: "still-failing", text: "symbol_error: new baseline: counter reset (driver reload?): 3 now, 500 at 2026-02-01T10:00:00Z; " +
				"still failing: rising since 2026-02-01T09:00:00Z, in 1 of the last 4 runs; passes again after 3 clean runs (2 so far)",
			note: "symbol_error: new baseline: counter reset (driver reload?): 3 now, 500 at 2026-02-01T10:00:00Z"},
		{at: h(4), v: 0, boot: boot2, status: report.Pass,
			note: "symbol_error: new baseline: new boot (boot_id 22222222, was 11111111); 0 now, 3 before; " +
				"symbol_error: clean for 3 runs after failing since 2026-02-01T09:00:00Z: passes again"},
		{at: h(5), v: 0, boot: boot2, status: report.Pass},
		// Slow growth within the rate, until the count since the new
		// baseline passes the absolute: then a rise fails.
		{at: h(6), v: 4, boot: boot2, status: report.Warn,
			id: "rising-within-rate", text: "symbol_error rose by 4 since 2026-02-01T13:00:00Z (4.0/h, within 120/h): 4 since the new baseline (new boot) at 2026-02-01T12:00:00Z (absolute 10): minor link errors"},
		{at: h(7), v: 12, boot: boot2, status: report.Fail,
			id: "beyond-absolute", text: "symbol_error rose by 8 since 2026-02-01T14:00:00Z (8.0/h): 12 since the new baseline (new boot) at 2026-02-01T12:00:00Z, beyond the absolute 10 (rdma-core): minor link errors; " +
				"rising since 2026-02-01T15:00:00Z, in 3 of the last 8 runs"},
	})
	if cs.BaselineWhy != "new boot" || cs.Baseline.Value != 0 || len(cs.Samples) != 8 || !cs.FailingSince.Equal(h(7)) {
		t.Errorf("series after the runs: %+v", cs)
	}
}

func TestHistoryFirstReadingIsSinceBoot(t *testing.T) {
	cases := []struct {
		name   string
		v      uint64
		uptime time.Duration
		lim    counterLimits
		status report.Status
		id     string
		text   string
	}{
		{"fast since boot fails", 4800, 24 * time.Hour, symLimits, report.Fail, "since-boot-rate",
			"symbol_error = 4800 since boot (no earlier reading): 200/h over 24.0 h, above 120/h (BER): minor link errors; rising since 2026-02-01T08:00:00Z, in 1 of the last 1 runs"},
		// An old burst: many since boot, at a low average rate, drains
		// nothing; the next run tells whether it still rises.
		{"old burst warns", 1000, 90 * 24 * time.Hour, symLimits, report.Warn, "since-boot-beyond-absolute",
			"symbol_error = 1000 since boot (no earlier reading), beyond the absolute 10 (rdma-core), 0.46/h over 90.0 days: whether it still rises shows on the next run: minor link errors"},
		{"any-rise counter warns on its first reading", 1, time.Hour, counterLimits{ratePerHour: 0, absolute: 10, rateFrom: "any", absFrom: "rdma-core"}, report.Warn, "since-boot",
			"symbol_error = 1 since boot (no earlier reading; absolute 10), 1.0/h over 1.0 h: minor link errors"},
		{"no uptime", 50, 0, symLimits, report.Warn, "since-boot-beyond-absolute",
			"symbol_error = 50 since boot (no earlier reading), beyond the absolute 10 (rdma-core), rate since boot unknown (uptime unreadable): whether it still rises shows on the next run: minor link errors"},
		{"saturated", 65535, time.Hour, counterLimits{ratePerHour: 1e9, absolute: 10, absFrom: "rdma-core"}, report.Warn, "since-boot-saturated",
			"symbol_error = 65535 since boot (no earlier reading), saturated (the real count is higher): whether it still rises cannot be told: minor link errors"},
		{"zero", 0, time.Hour, symLimits, report.Pass, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := &state.CounterSeries{}
			r := judgeReading(cs, symSlots, tc.v, 65535, tc.lim, t0, boot1, tc.uptime)
			hysteresis(cs, &r, "symbol_error", t0, DefaultCleanRuns)
			id, text := verdictOf(r)
			if r.status() != tc.status || id != tc.id || text != tc.text || r.note != "" {
				t.Errorf("got %s %s %q (note %q)\nwant %s %s %q", r.status(), id, text, r.note, tc.status, tc.id, tc.text)
			}
			wantBase := state.CounterSample{BootID: boot1}
			if tc.uptime > 0 {
				wantBase.At = t0.Add(-tc.uptime)
			}
			if cs.BaselineWhy != "boot" || !reflect.DeepEqual(*cs.Baseline, wantBase) {
				t.Errorf("baseline %s %+v, want boot %+v", cs.BaselineWhy, cs.Baseline, wantBase)
			}
		})
	}
}

// A reading dated before the last one (a clock set back) cannot give a
// rate: a new baseline, said, not a fault; the runs after it are judged
// from it.
func TestHistoryClockGoesBackwards(t *testing.T) {
	cs := &state.CounterSeries{}
	playRuns(t, cs, symLimits, 65535, time.Hour, []run{
		{at: t0, v: 5, boot: boot1, status: report.Warn,
			id: "since-boot", text: "symbol_error = 5 since boot (no earlier reading; absolute 10), 5.0/h over 1.0 h: minor link errors"},
		{at: t0.Add(-48 * time.Hour), v: 9, boot: boot1, status: report.Pass,
			note: "symbol_error: new baseline: the clock went back (the last reading is dated 2026-02-01T08:00:00Z, after now, 2026-01-30T08:00:00Z)"},
		{at: t0.Add(-47 * time.Hour), v: 9, boot: boot1, status: report.Pass},
	})
}

// An ack moves the baseline to the level read and clears the failing mark;
// the next run judges from it.
func TestHistoryAfterAnAck(t *testing.T) {
	cs := &state.CounterSeries{}
	playRuns(t, cs, symLimits, 65535, time.Hour, []run{
		{at: t0, v: 0, boot: boot1, status: report.Pass},
		{at: t0.Add(time.Hour), v: 400, boot: boot1, status: report.Fail,
			id: "rate-exceeded", text: "symbol_error rose by 400 since 2026-02-01T08:00:00Z (400/h, above 120/h: BER): minor link errors; rising since 2026-02-01T09:00:00Z, in 1 of the last 2 runs"},
	})
	acceptLevel(cs, 400, t0.Add(90*time.Minute), boot1)
	if !cs.FailingSince.IsZero() || cs.BaselineWhy != "ack" || cs.Baseline.Value != 400 || !cs.Samples[2].Ack {
		t.Fatalf("after the ack: %+v", cs)
	}
	playRuns(t, cs, symLimits, 65535, time.Hour, []run{
		{at: t0.Add(2 * time.Hour), v: 400, boot: boot1, status: report.Pass},
		{at: t0.Add(3 * time.Hour), v: 403, boot: boot1, status: report.Warn,
			id: "rising-within-rate", text: "symbol_error rose by 3 since 2026-02-01T10:00:00Z (3.0/h, within 120/h): 3 since the level acknowledged at 2026-02-01T09:30:00Z (400) (absolute 10): minor link errors"},
	})
}

// A count that reads as the run before is history: it warns, by how it
// stands against the absolute threshold, and never fails.
func TestHistorySteadyCounts(t *testing.T) {
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	playRuns(t, &state.CounterSeries{}, symLimits, 65535, 90*24*time.Hour, []run{
		{at: h(0), v: 1000, boot: boot1, status: report.Warn, id: "since-boot-beyond-absolute",
			text: "symbol_error = 1000 since boot (no earlier reading), beyond the absolute 10 (rdma-core), 0.46/h over 90.0 days: whether it still rises shows on the next run: minor link errors"},
		{at: h(1), v: 1000, boot: boot1, status: report.Warn, id: "steady-beyond-absolute",
			text: "symbol_error = 1000, 1000 since boot, beyond the absolute 10 (rdma-core), but not rising since 2026-02-01T08:00:00Z: minor link errors"},
	})
	playRuns(t, &state.CounterSeries{}, symLimits, 65535, 90*24*time.Hour, []run{
		{at: h(0), v: 5, boot: boot1, status: report.Warn, id: "since-boot",
			text: "symbol_error = 5 since boot (no earlier reading; absolute 10), 0.0023/h over 90.0 days: minor link errors"},
		{at: h(1), v: 5, boot: boot1, status: report.Warn, id: "steady",
			text: "symbol_error = 5, 5 since boot (absolute 10), not rising since 2026-02-01T08:00:00Z: minor link errors"},
	})
	playRuns(t, &state.CounterSeries{}, symLimits, 65535, 9000*time.Hour, []run{
		{at: h(0), v: 65535, boot: boot1, status: report.Warn, id: "since-boot-saturated",
			text: "symbol_error = 65535 since boot (no earlier reading), saturated (the real count is higher): whether it still rises cannot be told: minor link errors"},
		{at: h(1), v: 65535, boot: boot1, status: report.Warn, id: "steady-saturated",
			text: "symbol_error = 65535, saturated (the real count is higher): whether it still rises cannot be told: minor link errors"},
	})
}
