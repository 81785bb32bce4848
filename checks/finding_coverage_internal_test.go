package checks

import (
	"fmt"
	"sort"
	"strings"
)

// LogFindings starts recording which declared findings the tests produce
// and which slots they left unfilled (TestMain, before the tests run).
func LogFindings() {
	findingsMu.Lock()
	defer findingsMu.Unlock()
	produced = &producedLog{ids: map[string]int{}, missing: map[string][]string{}, results: map[string][]string{}}
}

// RecordResult judges a result a test got from a check's Run directly, as
// the runner's results are judged: only the check's declared findings.
func RecordResult(checkID string, r Result) { recordResult(checkID, r) }

// FindingCoverage is the catalog's promise, checked after a whole run of
// the package's tests: every declared finding was produced by a fixture
// or a test, every one produced had every slot its templates name, and
// every result a check's Run returned was only its declared findings (at
// least one, each its own, the result's status their worst).
// It returns what breaks the promise, "" when nothing.
func FindingCoverage() string {
	findingsMu.Lock()
	defer findingsMu.Unlock()
	var faults []string
	for _, id := range FindingIDs() {
		if produced.ids[id] == 0 {
			faults = append(faults, id+": declared, but no fixture or test produces it")
		}
	}
	for id, slots := range produced.missing {
		sort.Strings(slots)
		faults = append(faults, fmt.Sprintf("%s: produced without slot(s) %s", id, strings.Join(slots, ", ")))
	}
	for id, rf := range produced.results {
		for _, f := range rf {
			faults = append(faults, fmt.Sprintf("%s: %s", id, f))
		}
	}
	sort.Strings(faults)
	return strings.Join(faults, "\n")
}
