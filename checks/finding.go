package checks

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/report"
)

// Finding is one verdict a check can return, declared once as a value
// beside the check: a stable ID, a status, a message and a fix written as
// templates with named slots ({port}, {netdev}). A check's Run never
// writes the prose; it returns Finding.At(unit, slots), and `explain`,
// docs/checks.md and `list --format json` are made from the same
// declarations, so the words a person reads and the ID a machine keys on
// cannot drift apart.
type Finding struct {
	ID     string        // "port.state/no-link": the check's ID, "/", a slug
	Status report.Status // what the finding makes of its unit
	// When says, for explain and the docs, when the check returns it.
	When string
	// Message and Fix are templates: {name} is a slot filled by At. A
	// brace that does not enclose a bare lower-case name is literal text
	// ("{state,phys_state,rate}" in a shell command stays as written).
	Message string
	Fix     string
}

// headline is a check's summary over several units, declared as a template
// beside the check's findings ("RoCE is not lossless on {count} netdev(s):
// {issues}"): the findings are the verdicts, the headline only says them
// together. It is no finding of its own, so a waiver of the findings it
// sums up leaves nothing of it behind.
type headline string

// render fills the headline's slots.
func (h headline) render(slots Slots) string { return render(string(h), slots) }

// Slots are the named values a finding's templates are rendered from.
type Slots map[string]string

// with returns a copy of s with more slots (name, value pairs): a unit's
// common slots and one finding's own.
func (s Slots) with(kv ...string) Slots {
	out := make(Slots, len(s)+len(kv)/2)
	for k, v := range s {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// slotRE is a template slot: {name}. Like the package's other patterns it is
// compiled on first use: every process (the verbs child too) pays for what
// its packages initialise.
var slotRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{([a-z][a-z0-9_]*)\}`) })

// declaredFindings sizes the registry of findings for the catalog (about
// 700) once, rather than growing it 700 times in every process's start.
const declaredFindings = 1024

// findings is the registry of every declared finding, by ID.
var (
	findings     = make(map[string]*Finding, declaredFindings)
	findingOrder = make(map[string]int, declaredFindings) // declaration order, for explain and the docs
)

// declare registers a finding and returns it; it is called from package
// variables beside the check that returns it. A malformed or duplicate ID
// is a programming error and panics at start.
func declare(f Finding) *Finding {
	if !expect.IsFindingID(f.ID) {
		panic(fmt.Sprintf("checks: bad finding ID %q (want check.id/slug)", f.ID))
	}
	if _, dup := findings[f.ID]; dup {
		panic("checks: duplicate finding " + f.ID)
	}
	switch f.Status {
	case report.Pass, report.Warn, report.Fail, report.Skip, report.Error:
	default:
		panic(fmt.Sprintf("checks: finding %s has no status", f.ID))
	}
	if f.Message == "" || f.When == "" {
		panic("checks: finding " + f.ID + " lacks a message or a when")
	}
	ff := f
	findings[f.ID] = &ff
	findingOrder[f.ID] = len(findingOrder)
	return &ff
}

// CheckID is the check a finding belongs to: the part of its ID before "/".
func (f *Finding) CheckID() string { return f.ID[:strings.IndexByte(f.ID, '/')] }

// SlotNames lists the slots of the finding's templates, in order of first
// use, message before fix.
func (f *Finding) SlotNames() []string {
	var names []string
	seen := map[string]bool{}
	for _, t := range []string{f.Message, f.Fix} {
		for _, m := range slotRE().FindAllStringSubmatch(t, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				names = append(names, m[1])
			}
		}
	}
	return names
}

// At is the finding about one unit (a port "mlx5_0/1", a device, a netdev;
// "" for the host as a whole), its templates rendered from slots. A slot
// the templates name but slots lack is rendered as "?" and counted by
// the catalog test as a fault of the check.
func (f *Finding) At(unit string, slots Slots) report.Finding {
	out := report.Finding{ID: f.ID, Unit: unit, Status: f.Status,
		Message: render(f.Message, slots), Fix: render(f.Fix, slots)}
	names := f.SlotNames()
	for _, n := range names {
		// Only the slots the templates use: a shared set of a unit's
		// values (portSlots) does not travel with every finding.
		if v, ok := slots[n]; ok {
			if out.Slots == nil {
				out.Slots = map[string]string{}
			}
			out.Slots[n] = v
		}
	}
	recordProduced(f.ID, slots, names)
	return out
}

// Template shows a template as a reader of the docs sees it: each slot as
// <name>.
func (f *Finding) Template(tmpl string) string {
	return slotRE().ReplaceAllString(tmpl, "<$1>")
}

// render fills a template's slots.
func render(tmpl string, slots Slots) string {
	if tmpl == "" {
		return ""
	}
	return slotRE().ReplaceAllStringFunc(tmpl, func(m string) string {
		if v, ok := slots[m[1:len(m)-1]]; ok {
			return v
		}
		return "?"
	})
}

// Findings returns every declared finding of check id in the order they
// are declared, for explain and the docs.
func Findings(id string) []*Finding {
	var out []*Finding
	for _, f := range findings {
		if f.CheckID() == id {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return findingOrder[out[i].ID] < findingOrder[out[j].ID] })
	return out
}

// FindingIDs lists every declared finding ID, sorted: the names the
// expectations file may waive.
func FindingIDs() []string {
	ids := make([]string, 0, len(findings))
	for id := range findings {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// LookupFinding finds a declared finding by ID.
func LookupFinding(id string) (*Finding, bool) {
	f, ok := findings[id]
	return f, ok
}

// produced records, when a test asks for it, which findings were returned
// and which slots they lacked: the catalog test fails on a declared
// finding nothing produces and on a slot left unfilled. It is off in the
// product (nil).
var (
	produced   *producedLog
	findingsMu sync.Mutex
)

type producedLog struct {
	ids     map[string]int
	missing map[string][]string // finding ID → slots its templates name that At lacked
	// results are the faults of the results checks' Run returned: a
	// result that is not made of its own declared findings, by check ID.
	results map[string][]string
}

// recordResult notes, when a test asks for it, what is wrong with a
// result a check's Run returned: every result is its declared findings, so
// it has at least one, each declared under the check's ID (or the
// runner's), and its status is its worst finding's.
func recordResult(checkID string, r Result) {
	p := produced
	if _, catalogued := registry[checkID]; p == nil || !catalogued {
		// A check a test builds to drive the runner is no catalog
		// check: it declares nothing.
		return
	}
	faults := resultFaults(checkID, r)
	if len(faults) == 0 {
		return
	}
	findingsMu.Lock()
	defer findingsMu.Unlock()
	for _, f := range faults {
		p.results[checkID] = appendUnique(p.results[checkID], f)
	}
}

// runCheckID owns the runner's findings, which any check's result may carry.
const runCheckID = "rdmadoctor.run"

// resultFaults says how a check's result breaks the promise that it is
// only its declared findings; nil when it keeps it.
func resultFaults(checkID string, r Result) []string {
	if len(r.Findings) == 0 {
		return []string{fmt.Sprintf("returned a %s result without findings (%q)", r.Status, r.Summary)}
	}
	var faults []string
	var worst report.Status
	for _, f := range r.Findings {
		d, ok := findings[f.ID]
		switch {
		case !ok:
			faults = append(faults, fmt.Sprintf("returned finding %q, which is not declared", f.ID))
		case d.CheckID() != checkID && d.CheckID() != runCheckID:
			faults = append(faults, fmt.Sprintf("returned finding %q, which another check declares", f.ID))
		}
		if f.Waived == "" && (worst == "" || worse(f.Status, worst)) {
			worst = f.Status
		}
	}
	if worst != "" && worst != r.Status {
		faults = append(faults, fmt.Sprintf("returned status %s, but its worst finding is %s", r.Status, worst))
	}
	return faults
}

func recordProduced(id string, slots Slots, names []string) {
	p := produced
	if p == nil {
		return
	}
	findingsMu.Lock()
	defer findingsMu.Unlock()
	p.ids[id]++
	for _, n := range names {
		if _, ok := slots[n]; !ok {
			p.missing[id] = appendUnique(p.missing[id], n)
		}
	}
}

// unit is the verdict of one unit from its declared finding: the rendered
// message is the unit's line, the rendered fix its remedy.
func (f *Finding) unit(unit string, slots Slots) verdict {
	rf := f.At(unit, slots)
	return verdict{status: rf.Status, line: rf.Message, remedy: rf.Fix, findings: []report.Finding{rf}}
}

// result is a check's whole result from one finding about the host (or
// its only unit): the message is the summary, the fix the remedy.
func (f *Finding) result(unit string, slots Slots) Result {
	rf := f.At(unit, slots)
	return Result{Status: rf.Status, Summary: rf.Message, Remedy: rf.Fix, Findings: []report.Finding{rf}}
}

// waive applies the class's waivers (waive = [ID], waive_reason): each
// finding it names is marked with the reason and no longer counts, and the
// check is judged again on the findings left — its status their worst, its
// summary and remedy theirs, a line in Details for each waived one. A
// check whose findings are all waived or passing passes. Waivers never
// touch a check's error (a finding that could not look is not waived away
// unless named itself).
func waive(class *expect.Class, r *Result) {
	var waived []string
	for i := range r.Findings {
		f := &r.Findings[i]
		if w, reason := class.Waived(f.ID); w != nil && f.Status != report.Pass && f.Status != report.Skip {
			f.Waived = fmt.Sprintf("%s (%s)", reason, w.Cite())
			waived = append(waived, fmt.Sprintf("waived: %s %s — %s", f.ID, f.Unit, f.Waived))
		}
	}
	if len(waived) == 0 {
		return
	}
	worst := -1
	var remedies []string
	for i, f := range r.Findings {
		if f.Waived != "" {
			continue
		}
		if worst < 0 || worse(f.Status, r.Findings[worst].Status) {
			worst = i
		}
		if f.Status != report.Pass && f.Status != report.Skip && f.Fix != "" {
			remedies = appendUnique(remedies, f.Fix)
		}
	}
	r.Details = append(r.Details, waived...)
	r.Remedy = strings.Join(remedies, "\n")
	if worst < 0 || r.Findings[worst].Status == report.Pass || r.Findings[worst].Status == report.Skip {
		r.Status, r.BlocksNothing = report.Pass, false
		r.Summary = fmt.Sprintf("%d finding(s) waived by the expectations file; nothing else to report", len(waived))
		return
	}
	r.Status, r.Summary = r.Findings[worst].Status, r.Findings[worst].Message
}
