package checks

import (
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// verdict is the judgement of one unit a check looks at — a port, a device,
// a netdev — before the units are combined into the check's result. Every
// check that judges several units builds one verdict per unit and hands
// them to combine; the precedence between statuses lives only here.
type verdict struct {
	status   report.Status
	line     string // "mlx5_0 port 1: ..." for Details and the summary
	details  []string
	remedy   string
	evidence any
	// severity ranks units of the same status: a unit that does not work
	// (sevBroken: a port DOWN) outranks one that works other than asked
	// (a rate or width below the expectation), so the summary — the drain
	// reason, the NPD message — names the worse.
	severity int
	// findings are the declared findings the line was rendered from
	// (none in a check not yet written in findings); combine lists them.
	findings []report.Finding
}

// Severities within a status (verdict.severity).
const (
	sevDeviation = 0 // works, but not as expected
	sevBroken    = 1 // does not work
)

// statusRank orders statuses for combining units: a fault outranks a unit
// that could not be judged, which outranks a warning; a skipped unit (not
// applicable) ranks below a pass.
func statusRank(s report.Status) int {
	switch s {
	case report.Fail:
		return 3
	case report.Error:
		return 2
	case report.Warn:
		return 1
	case report.Pass:
		return 0
	}
	return -1
}

// worse reports whether a outranks b.
func worse(a, b report.Status) bool { return statusRank(a) > statusRank(b) }

// combine folds per-port verdicts into one result: the worst status
// decides; its first port's line is the summary.
func combine(vs []verdict) Result { return combineUnits(vs, "port", "ports") }

// combineUnits folds verdicts of units of one kind (noun, plural) into one
// result: the worst status decides and the line of its first unit of the
// highest severity is the summary; the observed value tallies the units by status; every unit's
// line goes to Details, and the remedies of the units that did not pass,
// once each, to the remedy.
func combineUnits(vs []verdict, noun, plural string) Result {
	worst := 0
	for i, v := range vs {
		w := vs[worst]
		if worse(v.status, w.status) || v.status == w.status && v.severity > w.severity {
			worst = i
		}
	}
	w := vs[worst]
	var r Result
	r.Status = w.status
	bad := 0
	for _, v := range vs {
		// "all N ports: <line>" only when the line says what every unit
		// has; a worse unit among failing ones is named with the tally.
		if v.status == w.status && v.severity == w.severity {
			bad++
		}
	}
	r.Summary = w.line
	r.Observed = tallyUnits(vs, noun, plural)
	switch {
	case len(vs) > 1 && bad == len(vs):
		r.Summary = fmt.Sprintf("all %d %s: %s", len(vs), plural, w.line)
	case len(vs) > 1:
		r.Summary = fmt.Sprintf("%s — %s", w.line, r.Observed)
	}
	var remedies []string
	for _, v := range vs {
		if len(vs) == 1 {
			// The summary already is the unit's line.
			r.Details = append(r.Details, v.details...)
		} else {
			r.Details = append(r.Details, v.line)
			for _, d := range v.details {
				r.Details = append(r.Details, "  "+d)
			}
		}
		if v.remedy != "" && v.status != report.Pass {
			remedies = appendUnique(remedies, v.remedy)
		}
		r.Findings = append(r.Findings, v.findings...)
	}
	r.Remedy = strings.Join(remedies, "\n")
	return r
}

// notJudgedEnd ends a summary whose units were not all judged.
const notJudgedEnd headline = "; {count} not judged (see details)"

// tally counts the ports by status, worst first: "2 ports: 1 fail, 1 pass".
func tally(vs []verdict) string { return tallyUnits(vs, "port", "ports") }

func tallyUnits(vs []verdict, noun, plural string) string {
	n := map[report.Status]int{}
	for _, v := range vs {
		n[v.status]++
	}
	var parts []string
	for _, st := range []report.Status{report.Fail, report.Error, report.Warn, report.Pass, report.Skip} {
		if n[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[st], st))
		}
	}
	if len(vs) == 1 {
		plural = noun
	}
	return fmt.Sprintf("%d %s: %s", len(vs), plural, strings.Join(parts, ", "))
}
