package checks

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// aerLinkKinds are the correctable errors that say how well a link
// carries bits (PCIe Base Specification, "Error Listing and Rules"): a
// receiver error in the physical layer, a TLP or DLLP that failed its
// LCRC or sequence check, a replay timer that ran out, and a replay number
// that rolled over — after which the link retrains.
var aerLinkKinds = []string{"RxErr", "BadTLP", "BadDLLP", "Timeout", "Rollover"}

// aerTotalLine is the total line of each uncorrectable file.
var aerTotalLine = map[string]string{sysfs.AERNonFatal: "TOTAL_ERR_NONFATAL", sysfs.AERFatal: "TOTAL_ERR_FATAL"}

// What to do about errors on a link, by the link they point at.
const (
	aerActionNICLink = "reseat the NIC with the host powered off, check or replace its riser, cable or retimer, or move it to another slot; " +
		"if the errors follow the card to another slot, replace the NIC."
	aerActionUpperLink = "this link is between a PCIe switch and the CPU, not the NIC's own: reseat or replace the switch board's cable or riser, " +
		"check the board's retimer and BIOS PCIe settings with the server vendor; reseating the NIC will not help."
)

// aerRun is one run's judging: the history and every hop judged so far,
// by address (a hop above two NICs is read and observed once).
type aerRun struct {
	hr   *historyRun
	hops map[string]*aerHopJudgement
}

// aerHopRole is a hop's place on the path.
type aerHopRole int

const (
	aerHopNIC        aerHopRole = iota
	aerHopDownstream            // a switch's downstream port
	aerHopUpstream              // a switch's upstream port
	aerHopRoot                  // the root port
)

// aerRoleNames say what a bridge is, before its address.
var aerRoleNames = map[aerHopRole]string{aerHopDownstream: "the switch's downstream port", aerHopUpstream: "the switch's upstream port",
	aerHopRoot: "the root port"}

// aerHop is one PCI function on a NIC's path: the NIC itself or a bridge.
type aerHop struct {
	addr, dir string
	role      aerHopRole
	// name says what it is: "mlx5_0 (0000:18:00.0)", "the switch's
	// downstream port 0000:17:00.0", "the root port 0000:15:01.0".
	name string
	// link is the link its receiver's errors are on, and action what to do
	// about errors there.
	link, action string
}

// aerChain is the NIC and every bridge above it up to the root port, the
// path pci.link reads (PCIPathOf), each named by its place: the last is the
// root port, and between the NIC and it a PCIe switch is a downstream port
// above an upstream port.
func aerChain(h *sysfs.Host, n NIC) []aerHop {
	p := h.PCIPathOf(n.Fn)
	chain := []aerHop{{addr: n.Fn.Address, dir: path.Join(sysfs.PCIDevicesDir, n.Fn.Address),
		name: fmt.Sprintf("%s (%s)", nicName(n), n.Fn.Address)}}
	for i, b := range p.Upstream {
		role := aerHopDownstream
		switch {
		case i == len(p.Upstream)-1:
			role = aerHopRoot
		case i%2 == 1:
			role = aerHopUpstream
		}
		chain = append(chain, aerHop{addr: b.Address, dir: b.SysPath, role: role, name: aerRoleNames[role] + " " + b.Address})
	}
	for i := range chain {
		chain[i].link, chain[i].action = aerLinkOf(chain, i)
	}
	return chain
}

// aerLinkOf is the link hop i's receiver sees: a NIC's and an upstream
// port's is the one above it, a downstream or root port's the one below.
func aerLinkOf(chain []aerHop, i int) (string, string) {
	below := chain[i].role == aerHopDownstream || chain[i].role == aerHopRoot
	j := i + 1
	if below {
		j = i - 1
	}
	if j < 0 || j >= len(chain) {
		return chain[i].name + "'s own link", aerActionNICLink
	}
	lo, hi := min(i, j), max(i, j)
	action := aerActionUpperLink
	if lo == 0 {
		action = aerActionNICLink
	}
	return fmt.Sprintf("the link between %s and %s", chain[hi].name, chain[lo].name), action
}

// aerHopJudgement is one hop's reading against its history: the findings
// it calls for (none on a clean hop), with their slots, and what to say
// of it.
type aerHopJudgement struct {
	exposed  bool // AER statistics files are there (readable or not)
	found    []aerHopFinding
	problems []string
	line     string // for the details
	evidence map[string]any
}

// judgeNIC judges every hop of the NIC's path: the findings of every hop
// are the NIC's, worst first; without any, an unreadable file is an
// error, no statistics at all a skip, and otherwise the NIC passes. Each
// hop's line goes to the details.
func (r *aerRun) judgeNIC(h *sysfs.Host, n NIC) aerUnit {
	chain := aerChain(h, n)
	u := aerUnit{hops: len(chain)}
	on := fmt.Sprintf("on %s's path, ", nicName(n))
	var hopsEv []map[string]any
	var unreadable []string
	for _, hop := range chain {
		j, seen := r.hops[hop.addr]
		if !seen {
			j = r.judgeHop(h, hop)
			r.hops[hop.addr] = j
		}
		if j.exposed {
			u.judged++
		}
		u.details = append(u.details, on+j.line)
		u.details = append(u.details, indent(j.problems)...)
		hopsEv = append(hopsEv, j.evidence)
		if len(j.problems) > 0 {
			unreadable = append(unreadable, hop.name)
		}
		for _, f := range j.found {
			u.findings = append(u.findings, f.finding.At(n.Fn.Address, aerUnitSlots(n).with(slotPairs(f.slots)...)))
		}
	}
	u.evidence = map[string]any{"address": n.Fn.Address, "nic": nicName(n), "hops": hopsEv}
	slots := aerUnitSlots(n).with("hops", fmt.Sprint(u.hops), "judged", fmt.Sprint(u.judged), "not_judged", "")
	switch {
	case len(u.findings) > 0:
		sortFindingsWorstFirst(u.findings)
	case len(unreadable) > 0:
		u.findings = []report.Finding{aerUnreadable.At(n.Fn.Address, slots.with("hops", strings.Join(unreadable, ", ")))}
	case u.judged == 0:
		u.findings = []report.Finding{aerNoStatsOnPath.At(n.Fn.Address, slots)}
	default:
		if u.judged < u.hops {
			slots["not_judged"] = fmt.Sprintf(" (%d without AER statistics, not judged)", u.hops-u.judged)
		}
		u.findings = []report.Finding{aerClean.At(n.Fn.Address, slots)}
	}
	return u
}

// judgeHop reads one hop's statistics and sets them against the history:
// a fatal rise first, then a non-fatal one, then the correctable rate.
func (r *aerRun) judgeHop(h *sysfs.Host, hop aerHop) *aerHopJudgement {
	d := h.ReadAER(hop.addr, hop.dir)
	j := &aerHopJudgement{exposed: d.Exposed(), problems: d.Problems,
		evidence: map[string]any{"address": hop.addr, "hop": hop.name}}
	if !d.Exposed() {
		j.line = hop.name + ": no AER statistics (no AER capability, AER off or no CONFIG_PCIEAER): not judged"
		j.evidence["aer"] = false
		return j
	}
	j.evidence["aer"] = true
	base := Slots{"hop": hop.addr, "hop_name": hop.name, "link": hop.link, "action": hop.action}
	var notes []string
	for _, file := range []string{sysfs.AERFatal, sysfs.AERNonFatal} {
		st, ok := d.Stats[file]
		if !ok {
			continue
		}
		rd := r.hr.observe(aerKey(hop.addr, file, aerTotalLine[file]), st.Total)
		j.evidence[file] = st.Total
		notes = append(notes, fmt.Sprintf("%s %d", aerTotalLine[file], st.Total))
		if rd.Delta > 0 {
			j.found = append(j.found, aerUncorrectableFinding(file, rd, base.with("count", fmt.Sprint(rd.Delta),
				"since", rd.Words(), "kinds", aerKindsSinceBoot(st))))
		}
		if rd.Since == riseNewBaseline {
			notes = append(notes, rd.Note)
		}
	}
	if st, ok := d.Stats[sysfs.AERCorrectable]; ok {
		c := r.observeCorrectable(hop.addr, st)
		j.evidence[sysfs.AERCorrectable] = c.evidence
		notes = append(notes, c.note)
		if f := c.finding(); f != nil {
			j.found = append(j.found, aerHopFinding{f, base.with(c.slots()...)})
		}
	}
	for _, note := range []string{r.holdHop(hop.addr, j, base), r.hr.ackNote("pcie.aer", hop.addr)} {
		if note != "" {
			notes = append(notes, note)
		}
	}
	if len(d.RootPort) > 0 {
		j.evidence["rootport_totals"] = d.RootPort
	}
	j.line = hop.name + ": " + strings.Join(notes, "; ")
	return j
}

// holdHop is the hop's hysteresis: a hop with a failing finding this run
// is marked; a hop marked before that fails no more is still failing until
// it has had its clean runs. The note says when it passes again.
func (r *aerRun) holdHop(addr string, j *aerHopJudgement, base Slots) string {
	failing := false
	for _, f := range j.found {
		failing = failing || f.finding.Status == report.Fail
	}
	held, since, clean := r.hr.hold(aerHoldKey(addr), failing)
	switch {
	case failing && held:
		j.evidence["failing_since"] = since
	case failing:
	case held:
		j.found = append(j.found, aerHopFinding{aerStillFailing, base.with("failing_since", stamp(since),
			"clean_runs", fmt.Sprint(r.hr.cleanRuns), "clean_so_far", fmt.Sprint(clean))})
		j.evidence["failing_since"] = since
	case !since.IsZero():
		return fmt.Sprintf("clean for %d runs after failing since %s: passes again", clean, stamp(since))
	}
	return ""
}

// aerHoldKey is the series that holds a hop's hysteresis: the hop, above
// its counters' series (pcie.aer/<address>/<file>/<name>).
func aerHoldKey(addr string) string { return "pcie.aer/" + addr }

// aerHopFinding is a finding a hop calls for, with the hop's slots.
type aerHopFinding struct {
	finding *Finding
	slots   Slots
}

// aerUncorrectableFinding is the finding of a rise of an uncorrectable
// total: since the previous run it fails; a count since boot (a first run,
// or no --state) warns, as counters.errors does with a count since boot —
// it does not say when the errors happened, and a months-old one should
// not drain the node run after run.
func aerUncorrectableFinding(file string, rd riseReading, slots Slots) aerHopFinding {
	severity := "non-fatal"
	f := aerNonFatal
	if file == sysfs.AERFatal {
		severity, f = "fatal", aerFatal
	}
	if rd.Since == riseSinceBoot {
		f = aerUncorrectableSinceBoot
	}
	return aerHopFinding{f, slots.with("severity", severity)}
}

// aerKey is a counter's series in the state.
func aerKey(addr, file, name string) string { return "pcie.aer/" + addr + "/" + file + "/" + name }

// aerKindsSinceBoot lists an uncorrectable file's kinds with a count, as
// the kernel keeps them since boot ("CmpltTO 2, MalfTLP 1").
func aerKindsSinceBoot(st sysfs.AERStats) string {
	var out []string
	for _, c := range st.Counts {
		if c.Value > 0 {
			out = append(out, fmt.Sprintf("%s %d", c.Name, c.Value))
		}
	}
	if len(out) == 0 {
		return "no kind named"
	}
	return strings.Join(out, ", ") + " since boot"
}

// aerCorrectableRise is the rise of a hop's link errors: their sum, the
// kinds that rose, the rate (the sum of each kind's), over what.
type aerCorrectableRise struct {
	count    uint64
	kinds    []string
	rate     float64
	rated    bool
	since    string
	note     string
	evidence map[string]uint64
}

// observeCorrectable sets each link kind's count against its series.
// Kinds that are no link matter (NonFatalErr, CorrIntErr, HeaderOF) are
// only listed, with their counts since boot.
func (r *aerRun) observeCorrectable(addr string, st sysfs.AERStats) aerCorrectableRise {
	c := aerCorrectableRise{evidence: map[string]uint64{"TOTAL_ERR_COR": st.Total}}
	var baseline string
	for _, k := range aerLinkKinds {
		rd := r.hr.observe(aerKey(addr, sysfs.AERCorrectable, k), st.Count(k))
		c.evidence[k] = st.Count(k)
		if rd.Since == riseNewBaseline {
			baseline = rd.Note
			continue
		}
		c.since = rd.Words()
		if rd.Delta > 0 {
			c.count += rd.Delta
			c.kinds = append(c.kinds, fmt.Sprintf("%s %d", k, rd.Delta))
		}
		if ph, ok := rd.PerHour(); ok {
			c.rate, c.rated = c.rate+ph, true
		}
	}
	c.note = fmt.Sprintf("correctable link errors %d %s", c.count, c.since)
	if c.rated {
		c.note += fmt.Sprintf(" (%.1f/h)", c.rate)
	}
	if baseline != "" {
		c.note += "; " + baseline
	}
	var other []string
	for _, cnt := range st.Counts {
		if !slices.Contains(aerLinkKinds, cnt.Name) && cnt.Value > 0 {
			other = append(other, fmt.Sprintf("%s %d", cnt.Name, cnt.Value))
			c.evidence[cnt.Name] = cnt.Value
		}
	}
	if len(other) > 0 {
		c.note += "; not link errors, not judged: " + strings.Join(other, ", ")
	}
	return c
}

// finding is the correctable rise's finding: fail above the fail rate,
// warn above the warn rate, none otherwise or when the rate is unknown.
func (c aerCorrectableRise) finding() *Finding {
	switch {
	case !c.rated || c.count == 0:
		return nil
	case c.rate > aerFailPerHour:
		return aerCorrectableStorm
	case c.rate > aerWarnPerHour:
		return aerCorrectableRising
	}
	return nil
}

// slots are the correctable finding's own slots.
func (c aerCorrectableRise) slots() []string {
	limit := aerWarnRateText
	if c.rate > aerFailPerHour {
		limit = aerFailRateText
	}
	return []string{"count", fmt.Sprint(c.count), "since", c.since, "kinds", strings.Join(c.kinds, ", "),
		"rate", fmt.Sprintf("%.1f", c.rate), "limit", limit}
}

// sortFindingsWorstFirst orders one unit's findings by status, worst
// first, a failure of this run before one still held from an earlier run,
// keeping the path's order among equals.
func sortFindingsWorstFirst(fs []report.Finding) {
	held := func(f report.Finding) bool { return f.ID == aerStillFailing.ID }
	sort.SliceStable(fs, func(a, b int) bool {
		if fs[a].Status != fs[b].Status {
			return worse(fs[a].Status, fs[b].Status)
		}
		return !held(fs[a]) && held(fs[b])
	})
}

// indent indents detail lines under a hop's line.
func indent(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = "    " + l
	}
	return out
}
