package checks

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report/state"
)

// The link-health checks (link.phy, pcie.aer, kernel.log's devlink
// reporters) judge monotonic counters as rates, as counters.errors does,
// but with findings of their own. riseReading is the shared part: one
// reading set against its series in the state, with the same baselines
// (boot, reset, new boot, clock). The judging — which rise fails — stays
// with each check.

// Where a riseReading is measured from.
const (
	riseSinceBoot     = "boot"     // no earlier reading: the count since boot
	riseSincePrevious = "previous" // the last run's reading, same boot
	riseNewBaseline   = "baseline" // not comparable: a new baseline starts here
	riseSinceCleared  = "cleared"  // another node's counter, no earlier reading: the count since it was last cleared
)

// riseReading is one counter reading against its history.
type riseReading struct {
	// Since is riseSinceBoot, riseSincePrevious or riseNewBaseline.
	Since string
	// Delta is the rise: the count since boot for a first reading, the
	// rise since the previous reading, 0 at a new baseline.
	Delta uint64
	// Over is the time the rise took: the uptime for a first reading (0
	// when unreadable), the time since the previous reading.
	Over time.Duration
	// Previous is when the previous reading was taken (zero for a first).
	Previous time.Time
	// Note says why a new baseline starts ("" otherwise), for the details.
	Note string
}

// PerHour is the rise's rate per hour; ok is false when the time it took is
// unknown or zero.
func (r riseReading) PerHour() (rate float64, ok bool) {
	if r.Over <= 0 {
		return 0, false
	}
	return float64(r.Delta) / r.Over.Hours(), true
}

// Words says over what the rise was measured, for a message:
// "since boot (3.2 days)", "since the last run at T (1.0 h)".
func (r riseReading) Words() string {
	switch r.Since {
	case riseSinceBoot:
		if r.Over > 0 {
			return fmt.Sprintf("since boot (%s)", fmtDur(r.Over))
		}
		return "since boot"
	case riseSincePrevious:
		return fmt.Sprintf("since the last run at %s (%s)", stamp(r.Previous), fmtDur(r.Over))
	case riseSinceCleared:
		return "since they were last cleared"
	}
	return "at a new baseline (" + r.Note + ")"
}

// newRiseRun is the history for a check that judges rises: with --state,
// the state's series; without, every reading is a first (since boot). It
// reads boot_id and uptime either way.
func newRiseRun(env *Env) *historyRun {
	if hr := newHistoryRun(env); hr != nil {
		return hr
	}
	hr := &historyRun{now: countersNow().UTC()}
	hr.cleanRuns, hr.cleanFrom = cleanRunsOf(env.Expect)
	if id, err := env.Host.BootID(); err == nil {
		hr.bootID = id
	}
	if up, err := env.Host.Uptime(); err == nil {
		hr.uptime = up
	}
	return hr
}

// observe sets the reading v of the counter key (prefixed by the check's
// ID, e.g. "pcie.aer/0000:3b:00.0/aer_dev_correctable") against its series,
// and appends it to the series when there is a state.
func (hr *historyRun) observe(key string, v uint64) riseReading {
	cur := state.CounterSample{Value: v, At: hr.now, BootID: hr.bootID}
	first := riseReading{Since: riseSinceBoot, Delta: v, Over: hr.uptime}
	boot := &state.CounterSample{BootID: hr.bootID, At: hr.now.Add(-hr.uptime)}
	return hr.record(key, cur, first, newBaseline, boot, "boot")
}

// observeRemote is observe for a counter kept by another node (the
// neighbour's PMA PortCounters, ib.far_end): this host's reboot does not
// reset it, so the boot_id is neither recorded nor compared, and a first
// reading is the count since the counter was last cleared, over a time
// nobody here knows (no rate). A value lower than the last is a clear
// (perfquery -R, or the neighbour's own reboot): a new series starts.
func (hr *historyRun) observeRemote(key string, v uint64) riseReading {
	cur := state.CounterSample{Value: v, At: hr.now}
	first := riseReading{Since: riseSinceCleared, Delta: v}
	return hr.record(key, cur, first, remoteBaseline, &state.CounterSample{}, "cleared")
}

// remoteBaseline says why a remote counter's series starts again: it was
// cleared, or the clock went back.
func remoteBaseline(prev, cur state.CounterSample) (why, note string) {
	switch {
	case cur.Value < prev.Value:
		return "cleared", fmt.Sprintf("cleared (perfquery -R, or the node restarted): %d now, %d at %s: a new series", cur.Value, prev.Value, stamp(prev.At))
	case cur.At.Before(prev.At):
		return "clock", fmt.Sprintf("the clock went back (the last reading is dated %s, after now, %s)", stamp(prev.At), stamp(cur.At))
	}
	return "", ""
}

// record is observe's and observeRemote's one way to set a reading
// against its series: first without a state; the rise since the previous
// sample, or a new baseline where restart says why the series starts
// again; a series' first sample gets the baseline start (why: startWhy).
func (hr *historyRun) record(key string, cur state.CounterSample, first riseReading,
	restart func(prev, cur state.CounterSample) (why, note string), start *state.CounterSample, startWhy string) riseReading {
	if hr.st == nil {
		return first
	}
	defer hr.lock()()
	cs := hr.series(key)
	r := first
	if n := len(cs.Samples); n > 0 {
		prev := cs.Samples[n-1]
		if why, note := restart(prev, cur); why != "" {
			cs.Baseline, cs.BaselineWhy = &cur, why
			r = riseReading{Since: riseNewBaseline, Note: note}
		} else {
			r = riseReading{Since: riseSincePrevious, Delta: cur.Value - prev.Value, Over: cur.At.Sub(prev.At), Previous: prev.At}
		}
	} else {
		cs.Baseline, cs.BaselineWhy = start, startWhy
	}
	cur.Rose = r.Delta > 0
	appendSample(cs, cur)
	return r
}

// hold is the hysteresis of a rise that failed, as counters.errors has it:
// a series marked failing (its FailingSince) stays held until it has had
// hr.cleanRuns clean runs in a row, so a node drained for a burst is not
// resumed on the first quiet run. Call it once a run for each key a check
// judges, with failing true when that run's rise fails: that marks the
// series (from now, or from when it first failed) and restarts its count
// of clean runs. With failing false, a marked series counts one clean run
// and is held (since: when it first failed, clean: the clean runs so
// far) until the count reaches hr.cleanRuns; then the mark is cleared and
// it returns held false with since and clean still set, for a note that
// it passes again. A key never marked returns nothing and adds no series.
// Without a state nothing is held.
func (hr *historyRun) hold(key string, failing bool) (held bool, since time.Time, clean int) {
	if hr.st == nil {
		return false, time.Time{}, 0
	}
	defer hr.lock()()
	if failing {
		cs := hr.series(key)
		if cs.FailingSince.IsZero() || cs.FailingSince.After(hr.now) {
			cs.FailingSince = hr.now
		}
		cs.CleanRuns = 0
		return true, cs.FailingSince, 0
	}
	cs := hr.st.Series(key)
	if cs == nil || cs.FailingSince.IsZero() {
		return false, time.Time{}, 0
	}
	cs.CleanRuns++
	since, clean = cs.FailingSince, cs.CleanRuns
	if clean >= hr.cleanRuns {
		cs.FailingSince, cs.CleanRuns = time.Time{}, 0
		return false, since, clean
	}
	return true, since, clean
}

// riseAckChecks are the checks that judge rises with hold: an ack of one
// clears its held failures (AckRises).
var riseAckChecks = []string{"pcie.aer", "link.phy", "ib.far_end"}

// AcksByHold says whether an ack of check clears held failures (AckRises)
// rather than accepting a level (AckCounters).
func AcksByHold(check string) bool {
	for _, id := range riseAckChecks {
		if id == check {
			return true
		}
	}
	return false
}

// AckRises ends the wait for clean runs of check's held failures: the
// hold (failing since, clean runs) of every series of the check is
// cleared, on unit when given — a hop's PCI address for pcie.aer, a
// netdev for link.phy, a neighbour's port (GUID:port) for ib.far_end, the
// second part of the series' keys — and the ack
// is recorded with its time and reason. No level moves: these checks judge
// the rise since the previous run, which a repair does not change; a rise
// after the ack fails again. Units counts the units named, Counters the
// series whose hold was cleared (none is no error: a hold may have ended
// on its own).
func AckRises(st *state.State, check, unit, reason string, now time.Time) (AckResult, error) {
	if !AcksByHold(check) {
		return AckResult{}, fmt.Errorf("%s takes no ack that clears held failures (those that do: %s)", check, strings.Join(riseAckChecks, ", "))
	}
	prefix := check + "/"
	units := map[string]bool{}
	var valid []string
	for _, cs := range st.Counters {
		u, ok := riseUnit(cs.Key, prefix)
		if ok && !units[u] {
			units[u] = true
			valid = append(valid, u)
		}
	}
	sort.Strings(valid)
	if len(valid) == 0 {
		return AckResult{}, fmt.Errorf("the state holds no history of %s: nothing to acknowledge (a run with --state keeps one)", check)
	}
	if unit != "" && !units[unit] {
		return AckResult{}, &UnknownUnitError{Unit: unit, Valid: valid, Where: "in the state's history of " + check}
	}
	res := AckResult{Units: valid}
	if unit != "" {
		res.Units = []string{unit}
	}
	for i := range st.Counters {
		cs := &st.Counters[i]
		if u, ok := riseUnit(cs.Key, prefix); !ok || (unit != "" && u != unit) {
			continue
		}
		if !cs.FailingSince.IsZero() {
			res.Counters++
		}
		cs.FailingSince, cs.CleanRuns = time.Time{}, 0
	}
	st.Acks = append(st.Acks, state.Ack{Check: check, Unit: unit, At: now.UTC(), Reason: reason})
	return res, nil
}

// ackNote says the newest ack of check that covers unit (one of the unit,
// or of every unit), for the unit's details as counters.errors shows its
// acks; "" when there is none or no state.
func (hr *historyRun) ackNote(check, unit string) string {
	if hr.st == nil {
		return ""
	}
	defer hr.lock()()
	var newest *state.Ack
	for i := range hr.st.Acks {
		a := &hr.st.Acks[i]
		if a.Check != check || (a.Unit != "" && a.Unit != unit) {
			continue
		}
		if newest == nil || !a.At.Before(newest.At) {
			newest = a
		}
	}
	if newest == nil {
		return ""
	}
	return fmt.Sprintf("acknowledged at %s: %s", stamp(newest.At), newest.Reason)
}

// riseUnit is the unit of a series key of the check whose keys start
// with prefix: "pcie.aer/0000:17:00.0/aer_dev_correctable/RxErr" and the
// hop's own "pcie.aer/0000:17:00.0" are 0000:17:00.0's.
func riseUnit(key, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return "", false
	}
	u, _, _ := strings.Cut(rest, "/")
	return u, u != ""
}
