package checks

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// judgedUnit is a unit's verdict with what the check's summary tallies.
type judgedUnit struct {
	u       *counterUnit // nil for a device with no counters at all
	v       verdict
	stats   int            // protocol statistics nonzero
	unknown map[string]int // unreadable error counters by reason
}

// unitJudgement collects the findings on one unit's counters.
type unitJudgement struct {
	fails, warns []report.Finding
	stats        []string
	unknown      map[string][]string // reason → counter names
	readable     int
	values       map[string]any // error counters not zero, or unknown
	statValues   map[string]uint64
	saturated    []string
	// With --state (counters_history.go): the run's history, and what it
	// says that is no finding (new baselines, acks, hysteresis ended).
	hist  *historyRun
	notes []string
}

// add files a counter's finding with the unit's faults or its warnings.
func (j *unitJudgement) add(f report.Finding) {
	if f.Status == report.Fail {
		j.fails = append(j.fails, f)
	} else {
		j.warns = append(j.warns, f)
	}
}

// judgeCounterUnits judges every unit that has counters. A device none of
// whose units has a counter directory is one skip: its driver exposes none.
func judgeCounterUnits(units []counterUnit, first, second []counterSample, window time.Duration, hr *historyRun) ([]judgedUnit, map[string]any) {
	has := map[string]bool{}
	for i := range units {
		if len(first[i].groups) > 0 || len(first[i].probs) > 0 {
			has[units[i].dev.Name] = true
		}
	}
	var out []judgedUnit
	ev := map[string]any{}
	for i := range units {
		u := &units[i]
		if !has[u.dev.Name] {
			if u.port == 0 { // once per device
				out = append(out, judgedUnit{v: noCountersVerdict(u)})
				ev[u.key()] = map[string]any{"driver": u.drv.name(u.dev), "counter_dirs": []string{}}
			}
			continue
		}
		if len(first[i].groups) == 0 && len(first[i].probs) == 0 {
			continue // this port (or the device) has none; its siblings do
		}
		var later *counterSample
		if i < len(second) {
			later = &second[i]
		}
		ju, e := judgeUnit(u, first[i], later, window, hr)
		out = append(out, ju)
		ev[u.key()] = e
	}
	return out, ev
}

func noCountersVerdict(u *counterUnit) verdict {
	f := ctrNoCounters.At(u.dev.Name, Slots{"device": u.dev.Name, "driver": u.drv.name(u.dev)})
	return verdict{status: f.Status, line: f.Message, findings: []report.Finding{f}}
}

// judgeUnit judges one unit's counters against the table, with the second
// sample of --interval when there is one.
func judgeUnit(u *counterUnit, first counterSample, later *counterSample, window time.Duration, hr *historyRun) (judgedUnit, map[string]any) {
	j := &unitJudgement{unknown: map[string][]string{}, values: map[string]any{}, statValues: map[string]uint64{}, hist: hr}
	again := map[string]sysfs.Counter{}
	if later != nil {
		for _, c := range later.counters {
			again[c.Group+"/"+c.Name] = c
		}
	}
	for _, c := range first.counters {
		spec, ok := u.drv.lookup(c.Group, c.Name)
		switch {
		case !ok:
		case spec.class == protocolStat:
			j.noteStat(c, spec)
		default:
			l, hasLater := again[c.Group+"/"+c.Name]
			j.judgeError(u, c, spec, l, hasLater, window)
		}
	}
	ack := j.noteAck(u)
	ju := judgedUnit{u: u, v: j.verdict(u, first), stats: len(j.stats), unknown: map[string]int{}}
	for r, names := range j.unknown {
		ju.unknown[r] = len(names)
	}
	ev := map[string]any{"driver": u.drv.name(u.dev), "counter_dirs": nonNil(first.groups), "readable": j.readable,
		"nonzero_or_unknown": j.values, "statistics_nonzero": j.statValues}
	if len(j.saturated) > 0 {
		ev["saturated"] = j.saturated
	}
	if ack != nil {
		ev["acknowledged"] = ack
	}
	return ju, ev
}

// noteStat reports a protocol statistic that is not zero.
func (j *unitJudgement) noteStat(c sysfs.Counter, spec counterSpec) {
	if !c.Known || c.Value == 0 {
		return
	}
	j.statValues[c.Name] = c.Value
	j.stats = append(j.stats, fmt.Sprintf("%s = %d: %s", c.Name, c.Value, spec.meaning))
}

// counterSlots are the slots every finding about one error counter may use.
func counterSlots(u *counterUnit, c sysfs.Counter, spec counterSpec) Slots {
	return Slots{"unit": u.key(), "counter": c.Name, "value": fmt.Sprint(c.Value), "threshold": fmt.Sprint(spec.threshold),
		"meaning": spec.meaning}
}

// judgeError judges one error counter: risen in the window, beyond its
// threshold (or saturated), or nonzero.
func (j *unitJudgement) judgeError(u *counterUnit, c sysfs.Counter, spec counterSpec, l sysfs.Counter, hasLater bool, window time.Duration) {
	if !c.Known {
		j.unknown[c.Unknown] = append(j.unknown[c.Unknown], c.Name)
		j.values[c.Name] = "unknown: " + c.Unknown
		return
	}
	j.readable++
	if j.hist != nil {
		j.judgeWithHistory(u, c, spec, l, hasLater, window)
		return
	}
	if hasLater && l.Known && l.Value > c.Value {
		j.add(ctrRising.At(u.key(), risingSlots(u, c, spec, l, window)))
		j.values[c.Name] = map[string]any{"first": c.Value, "second": l.Value}
		return
	}
	if c.Value == 0 {
		return
	}
	j.values[c.Name] = c.Value
	sat := c.Group == "counters" && spec.bits > 0 && c.Value == 1<<spec.bits-1
	if sat {
		j.saturated = append(j.saturated, c.Name)
	}
	j.add(countFinding(u, c, spec, sat, hasLater && l.Known, window))
}

// risingSlots are the slots of a counter that rose between the two samples
// of --interval (ctrRising); "history" is filled across runs (--state).
func risingSlots(u *counterUnit, c sysfs.Counter, spec counterSpec, l sysfs.Counter, window time.Duration) Slots {
	return counterSlots(u, c, spec).with("delta", fmt.Sprint(l.Value-c.Value), "window", window.Round(time.Millisecond).String(),
		"first", fmt.Sprint(c.Value), "second", fmt.Sprint(l.Value), "history", "")
}

// countFinding judges one nonzero error counter that did not rise. A
// saturated counter is pinned at its maximum: it says "at least this many
// since the last reset", possibly years ago, and can no longer show a
// fault of today — said, not failed. A count beyond the threshold that did
// not rise during --interval (sampled) is history too.
func countFinding(u *counterUnit, c sysfs.Counter, spec counterSpec, sat, sampled bool, window time.Duration) report.Finding {
	slots := counterSlots(u, c, spec)
	win := window.Round(time.Millisecond).String()
	switch {
	case sat:
		still := ""
		if sampled {
			still = "; whether it still rises cannot be told: " + resetHint(u)
		}
		return ctrSaturated.At(u.key(), slots.with("sampled", still))
	case c.Value > spec.threshold && sampled:
		return ctrNotRising.At(u.key(), slots.with("window", win))
	case c.Value > spec.threshold:
		return spec.family.At(u.key(), slots)
	}
	tail := ""
	if sampled {
		tail = "; it did not rise in " + win
	}
	return ctrNonzero.At(u.key(), slots.with("sampled", tail))
}

// resetHint is how a unit's counters start from zero: perfquery on an
// InfiniBand port's PMA; nothing else has a reset.
func resetHint(u *counterUnit) string {
	if u.ib && u.port > 0 {
		return countersResetHint.render(Slots{"perfquery": countersPerfqueryReset.render(Slots{"device": u.dev.Name, "port": fmt.Sprint(u.port)})})
	}
	return string(countersNoResetHint)
}

// How a unit's counters start from zero (resetHint).
const (
	countersResetHint   headline = "reset it ({perfquery}) and measure again"
	countersNoResetHint headline = "it resets only when the driver reloads: judge it by the other counters, or on the switch"
)

// verdict turns the findings into the unit's verdict: its counters'
// findings, worst first, when there are any; else one finding about the
// unit — clean, unreadable (an error, or a skip on a port that is down), or
// without error counters (a skip).
func (j *unitJudgement) verdict(u *counterUnit, s counterSample) verdict {
	v := verdict{details: j.detailLines(s)}
	if fs := append(append([]report.Finding(nil), j.fails...), j.warns...); len(fs) > 0 {
		return countersVerdict(u, fs, v)
	}
	slots := Slots{"label": u.label(), "unit": u.key(), "device": u.dev.Name, "driver": u.drv.name(u.dev)}
	var f report.Finding
	switch {
	case j.readable > 0:
		stats := ""
		if len(j.stats) > 0 {
			stats = countersStatsEnd.render(Slots{"stats": fmt.Sprint(len(j.stats))})
		}
		clean := ctrZero
		if j.hist != nil {
			clean = ctrNoneRising
		}
		f = clean.At(u.key(), slots.with("readable", fmt.Sprint(j.readable), "statistics", stats))
	case len(j.unknown) > 0:
		f = j.unreadableFinding(u, slots)
	case len(s.probs) > 0:
		f = ctrReadFailed.At(u.key(), slots.with("cause", s.probs[0].Error()))
	default:
		f = noErrorCountersFinding(u, s.groups, slots)
	}
	v.status, v.line, v.findings = f.Status, f.Message, []report.Finding{f}
	if f.Status != report.Skip {
		// A skip's advice is in the catalog; a skipped unit asks nothing.
		v.remedy = f.Fix
	}
	return v
}

// countersVerdict is a unit with findings about its counters: the worst
// decides, the line names the unit and joins every counter's message, the
// fixes of the worst findings are the remedy.
func countersVerdict(u *counterUnit, fs []report.Finding, v verdict) verdict {
	v.status, v.findings = report.Pass, fs
	var texts, fixes []string
	for _, f := range fs {
		if worse(f.Status, v.status) {
			v.status = f.Status
		}
		texts = append(texts, f.Message)
	}
	for _, f := range fs {
		if f.Status == v.status && f.Fix != "" {
			fixes = appendUnique(fixes, f.Fix)
		}
	}
	v.line, v.remedy = u.label()+": "+strings.Join(texts, "; "), strings.Join(fixes, "\n")
	return v
}

// unreadableFinding is a unit none of whose error counters could be read.
// "N/A (no PMA)" and EINVAL come from the driver's management agent
// (process_mad), which did not answer; only a VF gets the advice to look
// at its PF, because only a VF has one. A port whose link is down has
// nothing to count, and its management agent often cannot answer:
// port.state judges the port itself.
func (j *unitJudgement) unreadableFinding(u *counterUnit, slots Slots) report.Finding {
	slots = slots.with("count", fmt.Sprint(j.unknownCount()), "reasons", strings.Join(j.reasonKeys(), "; "))
	agent := false
	for r := range j.unknown {
		agent = agent || strings.HasPrefix(r, "N/A") || strings.HasPrefix(r, "EINVAL")
	}
	switch {
	case u.down != "":
		return ctrDownUnreadable.At(u.key(), slots.with("state", u.down))
	case !agent:
		return ctrUnreadable.At(u.key(), slots)
	case u.pf != "":
		return ctrVFUnreadable.At(u.key(), slots.with("pf", u.pf))
	}
	return ctrUnreadableNoPMA.At(u.key(), slots)
}

// noErrorCountersFinding is a unit with counter directories but no error
// counter: the driver's counters are statistics only (from its source), or
// the table does not know them.
func noErrorCountersFinding(u *counterUnit, groups []string, slots Slots) report.Finding {
	slots = slots.with("dirs", strings.Join(groups, "/ and ")+"/")
	if u.drv != nil && len(u.drv.hw) > 0 {
		return ctrStatisticsOnly.At(u.key(), slots)
	}
	return ctrNotInTable.At(u.key(), slots.with("source", u.drv.sourceOrUnknown()))
}

func (j *unitJudgement) unknownCount() int {
	n := 0
	for _, names := range j.unknown {
		n += len(names)
	}
	return n
}

// reasonKeys are the reasons counters are unknown, sorted.
func (j *unitJudgement) reasonKeys() []string {
	out := make([]string, 0, len(j.unknown))
	for r := range j.unknown {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// reasons lists the unknown counters by reason, sorted.
func (j *unitJudgement) reasons() []string {
	var out []string
	for r, names := range j.unknown {
		out = append(out, r+": "+strings.Join(names, ", "))
	}
	sort.Strings(out)
	return out
}

// detailLines are the unit's details: unknown counters, protocol
// statistics, directories that could not be read.
func (j *unitJudgement) detailLines(s counterSample) []string {
	var out []string
	for _, r := range j.reasons() {
		out = append(out, "unknown ("+r+")")
	}
	for _, st := range j.stats {
		out = append(out, st+" (reported, not judged)")
	}
	for _, p := range s.probs {
		out = append(out, p.Error())
	}
	return append(out, j.notes...)
}
