package checks

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// With --state, counters.errors judges each error counter across runs
// (docs/history.md): its rise since the previous run as a rate per hour,
// and its count since a baseline (boot, a reset, a new boot, or an
// operator's ack) as an absolute. A count that does not rise is history and
// never fails; a counter that failed passes again only after clean runs.

// countersErrorsID is the check the history and acks belong to.
const countersErrorsID = "counters.errors"

// countersNow is the clock the history reads; tests replace it.
var countersNow = time.Now

// DefaultCleanRuns is how many clean runs a failed counter needs before it
// passes again, unless the expectations set counters.clean_runs.
const DefaultCleanRuns = 3

// counterLimits are one error counter's thresholds across runs.
type counterLimits struct {
	// ratePerHour: a rise faster than this since the previous run fails;
	// 0 means any rise fails.
	ratePerHour float64
	// absolute: a rise that takes the count since the baseline beyond this
	// fails.
	absolute          uint64
	rateFrom, absFrom string // where each comes from, said in messages
}

// Sources of the default rates (docs/history.md).
const (
	srcAnyRise = "any rise is fatal (NVSentinel's NIC health monitor: the link went down, or the lossless contract broke)"
	srcBER     = "a bit error rate of 1e-12, the InfiniBand specification's limit (NVSentinel's NIC health monitor)"
	srcPerHour = "rdmadoctor: the absolute threshold, per hour"
	srcAbs     = "rdma-core's error_thresholds"
	srcAbsHW   = "rdmadoctor's table"
)

// pmaRates are the PortCounters whose rate has a public source; every
// other counter's rate is its absolute threshold per hour.
var pmaRates = map[string]struct {
	rate float64
	from string
}{
	"link_downed":                     {0, srcAnyRise},
	"excessive_buffer_overrun_errors": {0, srcAnyRise},
	"local_link_integrity_errors":     {0, srcAnyRise},
	"symbol_error":                    {120, srcBER},
}

// limitsOf is a counter's thresholds: the defaults, then what the node's
// class in the expectations file sets.
func limitsOf(c sysfs.Counter, spec counterSpec, class *expect.Class) counterLimits {
	l := counterLimits{ratePerHour: float64(spec.threshold), rateFrom: srcPerHour, absolute: spec.threshold, absFrom: srcAbsHW}
	if c.Group == "counters" {
		l.absFrom = srcAbs
		if r, ok := pmaRates[c.Name]; ok {
			l.ratePerHour, l.rateFrom = r.rate, r.from
		}
	}
	if x := class.CounterLimit(c.Name); x != nil {
		if x.RatePerHour != nil {
			l.ratePerHour, l.rateFrom = x.RatePerHour.V, x.RatePerHour.Cite()
		}
		if x.Absolute != nil {
			l.absolute, l.absFrom = x.Absolute.V, x.Absolute.Cite()
		}
	}
	return l
}

// cleanRunsOf is how many clean runs a failed counter needs, and why.
func cleanRunsOf(class *expect.Class) (int, string) {
	if v := class.CounterCleanRuns(); v != nil {
		return v.V, v.Cite()
	}
	return DefaultCleanRuns, "the default"
}

// seriesKey names a counter in the state: PortCounters by their name,
// driver counters under hw_counters/ (rxe has a link_downed in both).
func seriesKey(u *counterUnit, c sysfs.Counter) string {
	if c.Group == "counters" {
		return u.key() + "/" + c.Name
	}
	return u.key() + "/" + c.Group + "/" + c.Name
}

// historyRun is what one run knows for judging against the history.
type historyRun struct {
	st        *state.State
	now       time.Time
	bootID    string        // "" when unreadable
	uptime    time.Duration // 0 when unreadable
	cleanRuns int
	cleanFrom string
	class     *expect.Class
	notes     []string // what the whole check should say (unreadable boot_id, uptime)
	index     map[string]int
	// mu guards the state: checks run concurrently, and every check that
	// keeps a history appends to the one state's series (nil outside a run).
	mu *sync.Mutex
}

// lock holds the state for one judgement; the series pointers taken under
// it must not outlive it (another check's append may move them).
func (hr *historyRun) lock() func() {
	if hr.mu == nil {
		return func() {}
	}
	hr.mu.Lock()
	return hr.mu.Unlock
}

// newHistoryRun reads boot_id and uptime; nil without a state.
func newHistoryRun(env *Env) *historyRun {
	if env.Opts.State == nil {
		return nil
	}
	hr := &historyRun{st: env.Opts.State, now: countersNow().UTC(), class: env.Expect, mu: &env.stateMu}
	hr.cleanRuns, hr.cleanFrom = cleanRunsOf(env.Expect)
	id, err := env.Host.BootID()
	if err != nil {
		hr.notes = append(hr.notes, fmt.Sprintf("boot_id unreadable (%v): a reboot shows only as counters lower than before", err))
	} else {
		hr.bootID = id
	}
	up, err := env.Host.Uptime()
	if err != nil {
		hr.notes = append(hr.notes, fmt.Sprintf("uptime unreadable (%v): a counter without an earlier reading is judged without a rate", err))
	} else {
		hr.uptime = up
	}
	if hr.bootID != "" {
		defer hr.lock()()
		hr.st.BootID = hr.bootID
	}
	return hr
}

// reading is the verdict on one counter against its history, before
// hysteresis: the finding (nil for a pass) and its slots.
type reading struct {
	finding *Finding
	slots   Slots
	note    string // a new baseline, said in the details
	rose    bool
	ev      map[string]any
}

// status is the reading's status: its finding's, or a pass.
func (r *reading) status() report.Status {
	if r.finding == nil {
		return report.Pass
	}
	return r.finding.Status
}

// message is the reading's finding as a person reads it ("" for a pass).
func (r *reading) message() string {
	if r.finding == nil {
		return ""
	}
	return render(r.finding.Message, r.slots)
}

// judgeReading judges the value v of a counter read at now against its
// series, and moves the series on: the reading is appended, and the
// baseline set where a new one starts. base are the counter's slots
// (counter, meaning, unit); max is its saturation value (0: it never
// saturates).
func judgeReading(cs *state.CounterSeries, base Slots, v uint64, max uint64, lim counterLimits, now time.Time, bootID string, uptime time.Duration) reading {
	cur := state.CounterSample{Value: v, At: now, BootID: bootID}
	base = base.with("value", fmt.Sprint(v))
	var r reading
	if n := len(cs.Samples); n == 0 {
		r = firstReading(cs, base, v, max, lim, now, bootID, uptime)
	} else if why, note := newBaseline(cs.Samples[n-1], cur); why != "" {
		cs.Baseline, cs.BaselineWhy = &cur, why
		r = reading{note: base["counter"] + ": " + note}
	} else {
		r = laterReading(cs, base, v, max, lim, now)
	}
	if r.slots == nil {
		r.slots = base
	}
	cur.Rose = r.rose
	appendSample(cs, cur)
	if r.ev == nil {
		r.ev = map[string]any{}
	}
	r.ev["value"] = v
	if cs.Baseline != nil {
		r.ev["baseline"] = map[string]any{"value": cs.Baseline.Value, "at": cs.Baseline.At, "why": cs.BaselineWhy}
	}
	return r
}

// appendSample keeps at most state.MaxSamples readings.
func appendSample(cs *state.CounterSeries, s state.CounterSample) {
	cs.Samples = append(cs.Samples, s)
	if n := len(cs.Samples); n > state.MaxSamples {
		cs.Samples = append([]state.CounterSample(nil), cs.Samples[n-state.MaxSamples:]...)
	}
}

// newBaseline says why the reading cur cannot be compared with prev: a new
// boot, a counter lower than before, or a clock that went back. "" when it
// can.
func newBaseline(prev, cur state.CounterSample) (why, note string) {
	switch {
	case cur.BootID != "" && prev.BootID != "" && cur.BootID != prev.BootID:
		return "new boot", fmt.Sprintf("new baseline: new boot (boot_id %s, was %s); %d now, %d before", short(cur.BootID), short(prev.BootID), cur.Value, prev.Value)
	case cur.Value < prev.Value:
		return "reset", fmt.Sprintf("new baseline: counter reset (driver reload?): %d now, %d at %s", cur.Value, prev.Value, stamp(prev.At))
	case cur.At.Before(prev.At):
		return "clock", fmt.Sprintf("new baseline: the clock went back (the last reading is dated %s, after now, %s)", stamp(prev.At), stamp(cur.At))
	}
	return "", ""
}

// firstReading judges a counter with no earlier reading: its count since
// boot, at the average rate since boot. Only a rate beyond the limit
// fails — a count since boot says nothing of when it grew.
func firstReading(cs *state.CounterSeries, base Slots, v, max uint64, lim counterLimits, now time.Time, bootID string, uptime time.Duration) reading {
	baseline := state.CounterSample{Value: 0, BootID: bootID}
	if uptime > 0 {
		baseline.At = now.Add(-uptime)
	}
	cs.Baseline, cs.BaselineWhy = &baseline, "boot"
	r := reading{rose: v > 0, ev: map[string]any{"since": "boot"}}
	if v == 0 {
		return r
	}
	rate := "rate since boot unknown (uptime unreadable)"
	if uptime > 0 {
		perHour := float64(v) / uptime.Hours()
		r.ev["rate_per_hour"] = perHour
		rate = fmt.Sprintf("%s/h over %s", fmtRate(perHour), fmtDur(uptime))
		if lim.ratePerHour > 0 && perHour > lim.ratePerHour {
			r.finding = ctrSinceBootRate
			r.slots = base.with("rate", fmtRate(perHour), "uptime", fmtDur(uptime), "limit", fmtRate(lim.ratePerHour), "limit_from", lim.rateFrom)
			return r
		}
	}
	r.slots = base.with("absolute", fmt.Sprint(lim.absolute), "absolute_from", lim.absFrom, "rate_since_boot", rate)
	switch {
	case max > 0 && v == max:
		r.finding = ctrSinceBootSaturated
	case v > lim.absolute:
		r.finding = ctrSinceBootBeyond
	default:
		r.finding = ctrSinceBoot
	}
	return r
}

// laterReading judges a counter against its previous reading (same boot,
// not lower, not earlier): a rise faster than the rate limit fails, and so
// does one that takes the count since the baseline beyond the absolute; a
// count that did not rise is history and warns.
func laterReading(cs *state.CounterSeries, base Slots, v, max uint64, lim counterLimits, now time.Time) reading {
	prev := cs.Samples[len(cs.Samples)-1]
	from := state.CounterSample{}
	if cs.Baseline != nil && cs.Baseline.Value <= v {
		from = *cs.Baseline
	}
	since := v - from.Value
	r := reading{ev: map[string]any{"previous": prev.Value, "previous_at": prev.At, "since_baseline": since},
		slots: base.with("since", fmt.Sprint(since), "baseline", baselineText(cs.BaselineWhy, from), "absolute", fmt.Sprint(lim.absolute),
			"absolute_from", lim.absFrom, "previous_at", stamp(prev.At))}
	if v == prev.Value {
		switch {
		case since == 0:
		case max > 0 && v == max:
			r.finding = ctrSteadySaturated
		case since > lim.absolute:
			r.finding = ctrSteadyBeyond
		default:
			r.finding = ctrSteady
		}
		return r
	}
	delta, dt := v-prev.Value, now.Sub(prev.At)
	perHour := math.Inf(1)
	if dt > 0 {
		perHour = float64(delta) / dt.Hours()
	}
	r.rose, r.ev["rate_per_hour"] = true, jsonRate(perHour)
	sat := ""
	if max > 0 && v == max {
		sat = ", at least: now saturated"
	}
	r.slots = r.slots.with("delta", fmt.Sprint(delta), "rate", fmtRate(perHour), "saturated", sat, "limit", fmtRate(lim.ratePerHour), "limit_from", lim.rateFrom)
	switch {
	case perHour > lim.ratePerHour:
		r.finding = ctrRateExceeded
	case since > lim.absolute:
		r.finding = ctrBeyondAbsolute
	default:
		r.finding = ctrRisingWithin
	}
	return r
}

// baselineText says where a count is measured from.
func baselineText(why string, base state.CounterSample) string {
	switch why {
	case "ack":
		return fmt.Sprintf("since the level acknowledged at %s (%d)", stamp(base.At), base.Value)
	case "boot", "":
		return "since boot"
	}
	return fmt.Sprintf("since the new baseline (%s) at %s", why, stamp(base.At))
}

// hysteresis holds a failed counter failing until it has had cleanRuns
// clean runs, and says for how long it has been failing.
func hysteresis(cs *state.CounterSeries, r *reading, name string, now time.Time, cleanRuns int) {
	if r.status() == report.Fail {
		if cs.FailingSince.IsZero() || cs.FailingSince.After(now) {
			cs.FailingSince = now
		}
		cs.CleanRuns = 0
		r.slots = r.slots.with("failing", risingSince(cs), "history", "; "+risingSince(cs))
		return
	}
	if cs.FailingSince.IsZero() {
		return
	}
	cs.CleanRuns++
	if cs.CleanRuns >= cleanRuns {
		r.note = joinNote(r.note, fmt.Sprintf("%s: clean for %d runs after failing since %s: passes again", name, cs.CleanRuns, stamp(cs.FailingSince)))
		cs.FailingSince, cs.CleanRuns = time.Time{}, 0
		return
	}
	now1 := r.message()
	if now1 == "" {
		now1 = name + " did not rise"
		if r.note != "" {
			now1 = r.note
		}
	}
	r.finding = ctrStillFailing
	r.slots = r.slots.with("now", now1, "failing", risingSince(cs), "clean_runs", fmt.Sprint(cleanRuns), "clean_so_far", fmt.Sprint(cs.CleanRuns))
}

// risingSince is "rising since T, in k of the last n runs".
func risingSince(cs *state.CounterSeries) string {
	k, n := 0, 0
	for _, s := range cs.Samples {
		if s.Ack {
			continue
		}
		n++
		if s.Rose {
			k++
		}
	}
	return fmt.Sprintf("rising since %s, in %d of the last %d runs", stamp(cs.FailingSince), k, n)
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// stamp is how the history prints a time: UTC, to the second.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// short is the head of a boot_id, enough to tell two apart.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// fmtRate prints a rate per hour with the precision it deserves.
func fmtRate(r float64) string {
	switch {
	case math.IsInf(r, 1):
		return "∞"
	case r >= 100:
		return strconv.FormatFloat(r, 'f', 0, 64)
	case r >= 1:
		return strconv.FormatFloat(r, 'f', 1, 64)
	}
	return strconv.FormatFloat(r, 'g', 2, 64)
}

// jsonRate keeps an infinite rate (two readings at the same instant) out
// of JSON, which has no infinity.
func jsonRate(r float64) any {
	if math.IsInf(r, 0) {
		return "unbounded"
	}
	return r
}

// fmtDur prints an uptime in the largest unit that says it.
func fmtDur(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%.1f days", d.Hours()/24)
	case d >= time.Hour:
		return fmt.Sprintf("%.1f h", d.Hours())
	}
	return d.Round(time.Second).String()
}

// series returns the history of key in the state, adding an empty one.
func (hr *historyRun) series(key string) *state.CounterSeries {
	if hr.index == nil {
		hr.index = make(map[string]int, len(hr.st.Counters))
		for i, cs := range hr.st.Counters {
			hr.index[cs.Key] = i
		}
	}
	if i, ok := hr.index[key]; ok {
		return &hr.st.Counters[i]
	}
	hr.index[key] = len(hr.st.Counters)
	hr.st.Counters = append(hr.st.Counters, state.CounterSeries{Key: key})
	return &hr.st.Counters[len(hr.st.Counters)-1]
}

// evidence is what the run knew of the history.
func (hr *historyRun) evidence() map[string]any {
	ev := map[string]any{"now": hr.now, "clean_runs": hr.cleanRuns}
	if hr.bootID != "" {
		ev["boot_id"] = hr.bootID
	}
	if hr.uptime > 0 {
		ev["uptime_s"] = int64(hr.uptime.Seconds())
	}
	return ev
}

// judgeWithHistory judges one readable error counter against its history
// (the later sample of --interval, when there is one, is the reading; a
// rise within the window fails as it does without a state).
func (j *unitJudgement) judgeWithHistory(u *counterUnit, c sysfs.Counter, spec counterSpec, l sysfs.Counter, hasLater bool, window time.Duration) {
	hr := j.hist
	v := c.Value
	if hasLater && l.Known {
		v = l.Value
	}
	var max uint64
	if c.Group == "counters" && spec.bits > 0 {
		max = 1<<spec.bits - 1
	}
	defer hr.lock()()
	cs := hr.series(seriesKey(u, c))
	base := counterSlots(u, c, spec)
	r := judgeReading(cs, base, v, max, limitsOf(c, spec, hr.class), hr.now, hr.bootID, hr.uptime)
	if hasLater && l.Known && l.Value > c.Value {
		r.finding, r.slots, r.rose = ctrRising, risingSlots(u, c, spec, l, window), true
		cs.Samples[len(cs.Samples)-1].Rose = true
	}
	hysteresis(cs, &r, c.Name, hr.now, hr.cleanRuns)
	if r.note != "" {
		j.notes = append(j.notes, r.note)
	}
	if r.finding != nil {
		j.add(r.finding.At(u.key(), r.slots))
	}
	if r.status() != report.Pass || v != 0 || r.note != "" {
		j.values[c.Name] = r.ev
	}
	if max > 0 && v == max {
		j.saturated = append(j.saturated, c.Name)
	}
}

// ackFor is the newest acknowledgement of counters.errors that covers the
// unit: one for the unit, its device, or every unit.
func ackFor(st *state.State, u *counterUnit) *state.Ack {
	var best *state.Ack
	for i := range st.Acks {
		a := &st.Acks[i]
		if a.Check != countersErrorsID || (a.Unit != "" && a.Unit != u.key() && a.Unit != u.dev.Name) {
			continue
		}
		if best == nil || !a.At.Before(best.At) {
			best = a
		}
	}
	return best
}

// noteAck says the unit's acknowledgement in its details; the evidence
// returned is nil when there is none.
func (j *unitJudgement) noteAck(u *counterUnit) map[string]any {
	if j.hist == nil {
		return nil
	}
	a := ackFor(j.hist.st, u)
	if a == nil {
		return nil
	}
	j.notes = append(j.notes, fmt.Sprintf("acknowledged at %s: %s", stamp(a.At), a.Reason))
	return map[string]any{"at": a.At, "reason": a.Reason, "unit": a.Unit}
}

// AckableChecks are the checks `rdmadoctor ack` accepts a level for:
// counters.errors' (AckCounters), and those whose held failures an ack
// clears (AckRises).
var AckableChecks = append([]string{countersErrorsID}, riseAckChecks...)

// UnknownUnitError is an ack for a unit the host (or, for a check whose
// ack clears a hold, the state's history of it) does not have.
type UnknownUnitError struct {
	Unit  string
	Valid []string
	// Where says where the units were looked for ("" for this host).
	Where string
}

func (e *UnknownUnitError) Error() string {
	where := e.Where
	if where == "" {
		where = "on this host"
	}
	return fmt.Sprintf("no counter unit %q %s; units: %s", e.Unit, where, listSome(e.Valid, 12, "units"))
}

// AckResult is what an ack recorded.
type AckResult struct {
	Units    []string // the unit keys acknowledged
	Counters int      // error counters whose level was accepted
}

// AckCounters accepts the present level of counters.errors' error counters
// on unit (a unit key such as "mlx5_0/1" or "mlx5_0/device", a device name
// for all of its units, "" for every unit) as their new baseline: each
// counter gets a reading marked as an ack, its baseline moves to it and its
// failing mark is cleared; the acknowledgement is recorded with its time,
// reason and the values. The counters are read as the check reads them.
func AckCounters(h *sysfs.Host, st *state.State, unit, reason string, now time.Time) (AckResult, error) {
	s := takeSurvey(h)
	if s.DevicesErr != nil && !sysfs.IsNotExist(s.DevicesErr) {
		return AckResult{}, fmt.Errorf("could not list RDMA devices: %w", s.DevicesErr)
	}
	var units []counterUnit
	var valid []string
	for _, u := range counterUnits(s) {
		valid = append(valid, u.key())
		if unit == "" || unit == u.key() || unit == u.dev.Name {
			units = append(units, u)
		}
	}
	if len(units) == 0 {
		if unit == "" {
			return AckResult{}, fmt.Errorf("no RDMA device to read counters from")
		}
		return AckResult{}, &UnknownUnitError{Unit: unit, Valid: valid}
	}
	bootID, _ := h.BootID() // unreadable: the baseline has none, as the runs' readings
	hr := &historyRun{st: st, now: now.UTC(), bootID: bootID}
	if bootID != "" {
		st.BootID = bootID
	}
	values := map[string]uint64{}
	var res AckResult
	for i, smp := range sampleCounters(h, units) {
		u := &units[i]
		n := ackUnit(hr, u, smp, values)
		if n > 0 {
			res.Units = append(res.Units, u.key())
			res.Counters += n
		}
	}
	if res.Counters == 0 {
		return res, fmt.Errorf("no readable error counter on %s: nothing to acknowledge", orEvery(unit))
	}
	st.Acks = append(st.Acks, state.Ack{Check: countersErrorsID, Unit: unit, At: hr.now, Reason: reason, Values: values})
	return res, nil
}

// ackUnit moves the baseline of every readable error counter of one unit
// to its present value; it returns how many it moved.
func ackUnit(hr *historyRun, u *counterUnit, smp counterSample, values map[string]uint64) int {
	n := 0
	for _, c := range smp.counters {
		spec, ok := u.drv.lookup(c.Group, c.Name)
		if !ok || spec.class != errorCounter || !c.Known {
			continue
		}
		key := seriesKey(u, c)
		acceptLevel(hr.series(key), c.Value, hr.now, hr.bootID)
		values[key] = c.Value
		n++
	}
	return n
}

// acceptLevel makes v, read at now, a counter's baseline: a reading marked
// as an ack (the next run's rise is measured from it), and no failing mark.
func acceptLevel(cs *state.CounterSeries, v uint64, now time.Time, bootID string) {
	appendSample(cs, state.CounterSample{Value: v, At: now, BootID: bootID, Ack: true})
	cs.Baseline, cs.BaselineWhy = &state.CounterSample{Value: v, At: now, BootID: bootID}, "ack"
	cs.FailingSince, cs.CleanRuns = time.Time{}, 0
}

func orEvery(unit string) string {
	if unit == "" {
		return "any unit"
	}
	return unit
}
