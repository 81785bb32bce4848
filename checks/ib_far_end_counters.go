package checks

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/mad"
	"github.com/rdmadoctor/rdmadoctor/report"
)

// ib.far_end judges the neighbour's PMA PortCounters for the link as rises
// across runs, with the history link.phy and pcie.aer keep
// (history_rise.go). The series are keyed by the neighbour's node GUID and
// port ("ib.far_end/0x0002c90300beef00:17/SymbolErrorCounter"): a cable
// moved to another switch port starts a new series, and this host's reboot
// does not reset the neighbour's counters (observeRemote).

// farCounterKind is how a rise of one counter is judged.
type farCounterKind int

const (
	farRiseWarns farCounterKind = iota // a rise warns (receive errors, discards, link error recovery)
	farRiseFails                       // any rise fails: the link went down or broke its contract
	farRiseRate                        // symbol errors: a rise warns, above symbolErrorsPerHour fails
)

// farCounters are the PortCounters error counters judged, by the names
// perfquery prints, with their saturation value (IBTA vol 1 16.1.3.5: they
// stop at their maximum) and their kind. The fatal three are NVSentinel's
// (its NIC health monitor treats a rise of link_downed,
// local_link_integrity_errors or excessive_buffer_overrun_errors as
// fatal, as counters.errors does for this host's own ports).
var farCounters = []struct {
	name string
	max  uint64
	kind farCounterKind
	get  func(mad.PortCounters) uint64
}{
	{"SymbolErrorCounter", 0xffff, farRiseRate, func(c mad.PortCounters) uint64 { return uint64(c.SymbolErrors) }},
	{"LinkErrorRecoveryCounter", 0xff, farRiseWarns, func(c mad.PortCounters) uint64 { return uint64(c.LinkErrorRecovery) }},
	{"LinkDownedCounter", 0xff, farRiseFails, func(c mad.PortCounters) uint64 { return uint64(c.LinkDowned) }},
	{"PortRcvErrors", 0xffff, farRiseWarns, func(c mad.PortCounters) uint64 { return uint64(c.RcvErrors) }},
	{"PortXmitDiscards", 0xffff, farRiseWarns, func(c mad.PortCounters) uint64 { return uint64(c.XmitDiscards) }},
	{"LocalLinkIntegrityErrors", 0xf, farRiseFails, func(c mad.PortCounters) uint64 { return uint64(c.LocalLinkIntegrityErrors) }},
	{"ExcessiveBufferOverrunErrors", 0xf, farRiseFails, func(c mad.PortCounters) uint64 { return uint64(c.ExcessiveBufferOverrunErrors) }},
}

const farCableFix = "Errors counted by {neighbour} port {nport} on the cable from {port}: reseat the cable at both ends; if they go on, " +
	"replace the cable or transceiver and compare the switch port's counters after the swap (errors that stay with the port point at " +
	"the switch port or this HCA). `perfquery {nlid} {nport}` shows them; clearing them (`perfquery -R`) is the fabric team's call."

// The findings of the neighbour's counters (ib_far_end.go declares the
// link's).
var (
	farCounters0 = declare(Finding{ID: "ib.far_end/neighbour-errors", Status: report.Warn,
		When: "no earlier reading (a first run, or no --state): the neighbour's PortCounters for this link are above zero since they " +
			"were last cleared — when they grew cannot be told",
		Message: "{port}: {neighbour} (GUID {nguid}) port {nport} counts {errors} on this link since its counters were last cleared; " +
			"whether they still rise needs a second run with --state",
		Fix: farCableFix})
	farFatalRise = declare(Finding{ID: "ib.far_end/link-errors-rising", Status: report.Fail,
		When: "LinkDownedCounter, LocalLinkIntegrityErrors or ExcessiveBufferOverrunErrors of the neighbour's port rose since the " +
			"previous run (--state): the link went down, or broke its integrity or buffer contract (NVSentinel's NIC health monitor " +
			"treats any rise of these as fatal)",
		Message: "{port}: {neighbour} (GUID {nguid}) port {nport}: {errors} {over}: the link went down or lost integrity",
		Fix:     "Drain the node if the link keeps going down: every connection over the cable fails when it does. " + farCableFix})
	farSymbolRate = declare(Finding{ID: "ib.far_end/symbol-error-rate", Status: report.Fail,
		When: "the neighbour's SymbolErrorCounter rose faster than 120/h since the previous run (a bit error rate of 1e-12, the " +
			"InfiniBand specification's limit; NVSentinel's degraded-cable threshold): the cable is degrading",
		Message: "{port}: {neighbour} (GUID {nguid}) port {nport}: {count} symbol errors {over} ({rate}/h, above 120/h): the cable is degrading",
		Fix:     farCableFix})
	farErrorsRising = declare(Finding{ID: "ib.far_end/errors-rising", Status: report.Warn,
		When: "SymbolErrorCounter (within 120/h), LinkErrorRecoveryCounter, PortRcvErrors or PortXmitDiscards of the neighbour's " +
			"port rose since the previous run (--state)",
		Message: "{port}: {neighbour} (GUID {nguid}) port {nport}: {errors} {over}",
		Fix:     farCableFix})
	farStillFailing = declare(Finding{ID: "ib.far_end/still-failing", Status: report.Fail,
		When: "with --state, a counter of the neighbour's port whose rise failed has not failed since but has had fewer clean runs " +
			"than it needs to pass again (3, or counters.clean_runs in the expectations file), and `rdmadoctor ack ib.far_end` has not cleared it",
		Message: "{port}: {what} at {neighbour} (GUID {nguid}) port {nport} since {failing_since}, not this run; still failing: " +
			"passes again after {clean_runs} clean runs ({clean_so_far} so far)",
		Fix: "As for the failure held: {fix} After a repair, `rdmadoctor ack ib.far_end --unit {nkey} --reason TEXT` ends the wait for clean runs."})
)

// farCounterJudge judges one neighbour's counters against their history.
type farCounterJudge struct {
	hr    *historyRun
	unit  string
	slots Slots
	key   string // "ib.far_end/<neighbour GUID>:<port>"
	notes []string
	// By kind: the counters that rose ("LinkDownedCounter +1"), and the
	// counters above zero at a first reading.
	fatal, rising, sinceCleared []string
	out, held                   []report.Finding // this run's failures first, then the held ones
}

// farCounterFindings judges the neighbour's error counters for the link;
// notes are for the port's details.
func farCounterFindings(hr *historyRun, unit string, slots Slots, fe farEnd) ([]report.Finding, []string) {
	if fe.counters == nil {
		return []report.Finding{farCountersUnread.At(unit, slots.with("cause", fmt.Sprint(fe.pmaErr)))}, nil
	}
	nkey := fmt.Sprintf("%s:%d", slots["nguid"], fe.node.LocalPortNum)
	j := &farCounterJudge{hr: hr, unit: unit, key: "ib.far_end/" + nkey,
		slots: slots.with("nkey", nkey, "nlid", fmt.Sprint(fe.pmaLID))}
	var over riseReading
	for _, c := range farCounters {
		if r := j.judge(c.name, c.get(*fe.counters), c.max, c.kind); r.Since == riseSincePrevious {
			over = r
		}
	}
	if len(j.fatal) > 0 {
		j.add(farFatalRise, "errors", strings.Join(j.fatal, ", "), "over", over.Words())
	}
	if len(j.rising) > 0 {
		j.add(farErrorsRising, "errors", strings.Join(j.rising, ", "), "over", over.Words())
	}
	if len(j.sinceCleared) > 0 {
		j.add(farCounters0, "errors", strings.Join(j.sinceCleared, ", "))
	}
	if ack := hr.ackNote("ib.far_end", nkey); ack != "" {
		j.notes = append(j.notes, ack)
	}
	return append(j.out, j.held...), j.notes
}

func (j *farCounterJudge) add(f *Finding, kv ...string) {
	j.out = append(j.out, f.At(j.unit, j.slots.with(kv...)))
}

// judge sets one counter's reading against its series and sorts its rise.
func (j *farCounterJudge) judge(name string, v, max uint64, kind farCounterKind) riseReading {
	key := j.key + "/" + name
	r := j.hr.observeRemote(key, v)
	if v >= max {
		j.notes = append(j.notes, fmt.Sprintf("%s saturated at %d: a rise no longer shows until it is cleared", name, v))
	}
	failing := false
	switch {
	case r.Since == riseNewBaseline:
		j.notes = append(j.notes, name+": "+r.Note)
	case r.Since == riseSinceCleared && v > 0:
		j.sinceCleared = append(j.sinceCleared, fmt.Sprintf("%s %d", name, v))
	case r.Since == riseSincePrevious && r.Delta > 0:
		failing = j.rose(name, r, kind)
	}
	if kind != farRiseWarns {
		j.hold(key, name+" rising", failing, kind)
	}
	return r
}

// rose sorts a rise since the previous run; true when it fails.
func (j *farCounterJudge) rose(name string, r riseReading, kind farCounterKind) bool {
	j.notes = append(j.notes, fmt.Sprintf("%s +%d %s", name, r.Delta, r.Words()))
	rise := fmt.Sprintf("%s +%d", name, r.Delta)
	switch kind {
	case farRiseFails:
		j.fatal = append(j.fatal, rise)
		return true
	case farRiseRate:
		if rate, ok := r.PerHour(); ok && rate > symbolErrorsPerHour {
			j.add(farSymbolRate, "count", strconv.FormatUint(r.Delta, 10), "over", r.Words(), "rate", fmtRate(rate))
			return true
		}
	}
	j.rising = append(j.rising, rise)
	return false
}

// hold is the hysteresis of a counter whose rise fails: while it is held
// and no longer fails it is still failing, with the failure's fix.
func (j *farCounterJudge) hold(key, what string, failing bool, kind farCounterKind) {
	held, since, clean := j.hr.hold(key, failing)
	switch {
	case failing:
	case held:
		f := farFatalRise
		if kind == farRiseRate {
			f = farSymbolRate
		}
		j.held = append(j.held, farStillFailing.At(j.unit, j.slots.with("what", what, "failing_since", stamp(since), "clean_runs", fmt.Sprint(j.hr.cleanRuns),
			"clean_so_far", fmt.Sprint(clean), "fix", render(f.Fix, j.slots))))
	case !since.IsZero():
		j.notes = append(j.notes, fmt.Sprintf("%s: clean for %d runs after failing since %s: passes again", what, clean, stamp(since)))
	}
}
