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
	fails, warns []string
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
	return verdict{status: report.Skip,
		line: fmt.Sprintf("%s: %s exposes no error counters in sysfs (no counters/ or hw_counters/ on its ports or the device)", u.dev.Name, u.drv.name(u.dev))}
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
		j.fails = append(j.fails, fmt.Sprintf("%s rose by %d in %v (%d → %d): %s", c.Name, l.Value-c.Value,
			window.Round(time.Millisecond), c.Value, l.Value, spec.meaning))
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
	text := describeCount(u, c, spec, sat, hasLater, window)
	// A saturated counter is pinned at its maximum: it says "at least this
	// many since the last reset", possibly years ago, and can no longer
	// show a fault of today — said, not failed. A count beyond the
	// threshold that did not rise during --interval is history too.
	stale := sat || (hasLater && l.Known)
	if c.Value > spec.threshold && !stale {
		j.fails = append(j.fails, text)
	} else {
		j.warns = append(j.warns, text)
	}
}

// describeCount says one nonzero error counter with its threshold and
// meaning, and what --interval showed of it.
func describeCount(u *counterUnit, c sysfs.Counter, spec counterSpec, sat, sampled bool, window time.Duration) string {
	var s string
	switch {
	case sat:
		s = fmt.Sprintf("%s = %d, saturated (the real count is higher; threshold %d): %s", c.Name, c.Value, spec.threshold, spec.meaning)
		if sampled {
			s += "; whether it still rises cannot be told: " + resetHint(u)
		}
		return s
	case c.Value > spec.threshold:
		s = fmt.Sprintf("%s = %d, beyond the threshold %d: %s", c.Name, c.Value, spec.threshold, spec.meaning)
	default:
		s = fmt.Sprintf("%s = %d (threshold %d): %s", c.Name, c.Value, spec.threshold, spec.meaning)
	}
	if sampled {
		s += fmt.Sprintf("; it did not rise in %v", window.Round(time.Millisecond))
	}
	return s
}

// resetHint is how a unit's counters start from zero: perfquery on an
// InfiniBand port's PMA; nothing else has a reset.
func resetHint(u *counterUnit) string {
	if u.ib && u.port > 0 {
		return fmt.Sprintf("reset it (`perfquery -C %s -P %d -R`) and measure again", u.dev.Name, u.port)
	}
	return "it resets only when the driver reloads: judge it by the other counters, or on the switch"
}

// verdict turns the findings into the unit's status: a fault fails, a
// count below its threshold warns, clean counters pass; a unit whose error
// counters all failed to read is an error, one without error counters a skip.
func (j *unitJudgement) verdict(u *counterUnit, s counterSample) verdict {
	label := u.label()
	v := verdict{details: j.detailLines(s)}
	findings := append(append([]string(nil), j.fails...), j.warns...)
	switch {
	case len(j.fails) > 0:
		v.status, v.line, v.remedy = report.Fail, label+": "+strings.Join(findings, "; "), judgeByMeaning
		if j.rose() {
			v.remedy = risingFix
		}
	case len(j.warns) > 0:
		v.status, v.line, v.remedy = report.Warn, label+": "+strings.Join(findings, "; "), judgeByMeaning
	case j.readable > 0 && j.hist != nil:
		v.status, v.line = report.Pass, fmt.Sprintf("%s: %d error counters read, none rising or beyond its threshold since its baseline", label, j.readable)
	case j.readable > 0:
		v.status, v.line = report.Pass, fmt.Sprintf("%s: %d error counters read, all zero", label, j.readable)
	case len(j.unknown) > 0 && u.down != "":
		// A port whose link is down has nothing to count, and its management
		// agent often cannot answer: port.state judges the port itself.
		v.status = report.Skip
		v.line = fmt.Sprintf("%s: none of its %d error counters could be read (%s) and the port is not ACTIVE (%s): nothing to judge",
			label, j.unknownCount(), strings.Join(j.reasonKeys(), "; "), u.down)
	case len(j.unknown) > 0:
		v.status = report.Error
		v.line = fmt.Sprintf("%s: none of its %d error counters could be read (%s): whether it is clean could not be determined",
			label, j.unknownCount(), strings.Join(j.reasonKeys(), "; "))
		v.remedy = unreadableRemedy(u, j.unknown)
	case len(s.probs) > 0:
		v.status, v.line, v.remedy = report.Error, fmt.Sprintf("%s: %v", label, s.probs[0]), countersByHand
	default:
		v.status, v.line = report.Skip, fmt.Sprintf("%s: %s exposes no error counters here (%s)", label, u.drv.name(u.dev), u.drv.noErrorsWhy(s.groups))
	}
	if len(j.stats) > 0 && v.status == report.Pass {
		v.line += fmt.Sprintf("; %d protocol statistic(s) nonzero, reported, not judged", len(j.stats))
	}
	return v
}

func (j *unitJudgement) rose() bool {
	for _, f := range j.fails {
		if strings.Contains(f, " rose by ") {
			return true
		}
	}
	return false
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

// unreadableRemedy explains counters that could not be read. "N/A (no
// PMA)" and EINVAL come from the driver's management agent (process_mad),
// which did not answer; only a VF gets the advice to look at its PF,
// because only a VF has one.
func unreadableRemedy(u *counterUnit, unknown map[string][]string) string {
	agent := false
	for r := range unknown {
		agent = agent || strings.HasPrefix(r, "N/A") || strings.HasPrefix(r, "EINVAL")
	}
	if !agent {
		return "The files exist but could not be read as counters (see the reasons above): run as a user who may read them, or look at the driver. " + countersByHand
	}
	s := "The driver did not answer these reads (\"N/A (no PMA)\" or EINVAL: its management agent did not answer the PerfMgt query, " +
		"e.g. when the firmware does not serve PortCounters). "
	if u.pf != "" {
		s += fmt.Sprintf("%s is an SR-IOV VF of %s: the physical link's errors are counted on the PF's port — read them there. ", u.dev.Name, u.pf)
	}
	return s + countersByHand
}
