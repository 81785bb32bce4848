package checks

import (
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// combineFindings is the result of a check whose findings are its whole
// say, several of them about the host or one unit each: the worst status
// decides (the shared precedence, worse); the messages of the findings of
// that status, joined, are the summary, in the order the check returned
// them; the fixes of every finding that is neither a pass nor a skip are
// the remedy, each text once. With onePerID only the first fix of each
// finding ID is kept: a check whose fix names its unit (an address) then
// gives the first unit's, as its summary leads with that unit.
func combineFindings(fs []report.Finding, onePerID bool) Result {
	var r Result
	if len(fs) == 0 {
		return r
	}
	r.Status = worstStatus(fs)
	var lines, fixes []string
	fixed := map[string]bool{}
	for _, f := range fs {
		if f.Status == r.Status {
			lines = append(lines, f.Message)
		}
		if f.Fix == "" || f.Status == report.Pass || f.Status == report.Skip || onePerID && fixed[f.ID] {
			continue
		}
		fixed[f.ID] = true
		fixes = appendUnique(fixes, f.Fix)
	}
	r.Summary, r.Remedy, r.Findings = strings.Join(lines, "; "), strings.Join(fixes, "\n"), fs
	return r
}

// worstStatus is the status of findings by the shared precedence: the
// worst of them ("" when there are none).
func worstStatus(fs []report.Finding) report.Status {
	var st report.Status
	for i, f := range fs {
		if i == 0 || worse(f.Status, st) {
			st = f.Status
		}
	}
	return st
}
