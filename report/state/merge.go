package state

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// FutureSkew is how far a record's time may lie ahead of the reader's clock
// before it is called "from the future" (clocks of a fleet disagree a little;
// a clock set back by hours is another matter).
const FutureSkew = 5 * time.Minute

// Merge takes a run's results into the records. Only the checks that ran
// are updated — ran(id) says which the run selected; a check above the run's
// level, or left out of it, keeps its older record, which ages. The last
// report is kept whole.
func (s *State) Merge(rep *report.Report, ran func(id string) bool) {
	byID := map[string]int{}
	for i, c := range s.Checks {
		byID[c.ID] = i
	}
	for _, c := range rep.Checks {
		if c.Level > rep.Level || !ran(c.ID) || notRun(c) {
			continue
		}
		rec := CheckRecord{
			ID: c.ID, Code: c.Code, Title: c.Title, Level: c.Level, Status: c.Status,
			Summary: c.Summary, Remedy: c.Remedy, Deviation: c.Deviation, Findings: findingIDs(c.Findings),
			Lead: c.FindingID(),
			Ran:  rep.Started, RunLevel: rep.Level, Expect: rep.Host.Expect, Since: rep.Started,
		}
		if i, ok := byID[c.ID]; ok {
			if old := s.Checks[i]; old.Status == c.Status && !old.Since.IsZero() && !old.Since.After(rep.Started) {
				rec.Since = old.Since
			}
			s.Checks[i] = rec
			continue
		}
		byID[c.ID] = len(s.Checks)
		s.Checks = append(s.Checks, rec)
	}
	s.sortChecks()
	s.Last = rep
	if rep.Host.Hostname != "" {
		s.Host = rep.Host.Hostname
	}
	if rep.Started.After(s.Updated) {
		s.Updated = rep.Started
	}
}

// notRun is a result that says the check did not run in this run at all:
// the end of the run cut it off, or the run left it out (--skip, a periodic
// run's noisy probes). Such a result proves nothing, so the older record
// stays.
func notRun(c report.CheckResult) bool {
	return c.Status == report.Skip && c.HasFinding(report.FindingCut, report.FindingLeftOutSkip, report.FindingLeftOutPeriod)
}

// Judged is the state's verdict: each record as of now (one that has aged
// past the maximum age, or comes from the future, is an error — unknown),
// and report.Judge's verdict of them.
type Judged struct {
	Verdict report.Verdict
	// Root is the root cause's index in Checks; -1 when healthy.
	Root   int
	Checks []report.CheckResult
	// Level is the highest --level among the runs that judged the records.
	Level int
}

// Tally counts the records that pass and warn, and names the first that
// warns ("" when none does): what a one-line healthy message says.
func (j *Judged) Tally() (pass, warn int, firstWarn string) {
	for _, c := range j.Checks {
		switch c.Status {
		case report.Pass:
			pass++
		case report.Warn:
			if warn == 0 {
				firstWarn = c.ID
			}
			warn++
		}
	}
	return pass, warn, firstWarn
}

// RootCheck is the root cause's result, nil when healthy.
func (j *Judged) RootCheck() *report.CheckResult {
	if j.Root < 0 {
		return nil
	}
	return &j.Checks[j.Root]
}

// Judge judges the records as of now. maxAge 0 lets records age without
// bound. A state with no record at all is unknown: nothing was ever looked at.
func (s *State) Judge(now time.Time, maxAge time.Duration, p report.Policy) *Judged {
	j := &Judged{Root: -1}
	for _, c := range s.Checks {
		j.Checks = append(j.Checks, c.asOf(now, maxAge))
		j.Level = max(j.Level, c.RunLevel)
	}
	if len(j.Checks) == 0 {
		j.Checks = append(j.Checks, report.CheckResult{ID: "state", Status: report.Error, Summary: "no check has been recorded in the state yet"})
	}
	j.Verdict, j.Root = report.Judge(j.Checks, p)
	return j
}

// asOf is the record as a result judged now.
func (c CheckRecord) asOf(now time.Time, maxAge time.Duration) report.CheckResult {
	r := report.CheckResult{ID: c.ID, Code: c.Code, Title: c.Title, Level: c.Level, Status: c.Status,
		Summary: c.Summary, Remedy: c.Remedy, Deviation: c.Deviation, Details: []string{}, Evidence: map[string]any{
			"ran": c.Ran, "run_level": c.RunLevel, "since": c.Since}}
	if c.Lead != "" && c.Lead != c.ID {
		r.Findings = []report.Finding{{ID: c.Lead, Status: c.Status, Message: c.Summary}}
	}
	ran := c.Ran.UTC().Format(time.RFC3339)
	switch {
	case c.Ran.After(now.Add(FutureSkew)):
		r.Findings = []report.Finding{{ID: report.FindingClockBack, Status: report.Error, Message: "judged ahead of this clock"}}
		r.Status = report.Error
		r.Summary = fmt.Sprintf("judged at %s, ahead of this clock (%s): the clock went back; run the check again — was: %s %s",
			ran, now.UTC().Format(time.RFC3339), c.Status, c.Summary)
	case maxAge > 0 && now.Sub(c.Ran) > maxAge:
		r.Findings = []report.Finding{{ID: report.FindingStale, Status: report.Error, Message: "older than the maximum age"}}
		r.Status = report.Error
		// The age limit first: a one-line adapter message (NPD's 80 bytes)
		// must still say why the check is unknown.
		r.Summary = fmt.Sprintf("older than the max age %v, judged %s; run it again — was: %s %s", maxAge, ran, c.Status, c.Summary)
	}
	return r
}

// Record returns the record of check id, nil when it never ran.
func (s *State) Record(id string) *CheckRecord {
	for i := range s.Checks {
		if s.Checks[i].ID == id {
			return &s.Checks[i]
		}
	}
	return nil
}

// NoteVerdict counts consecutive unknown verdicts (for a drain after N).
func (s *State) NoteVerdict(v report.Verdict) {
	if v == report.Unknown {
		s.UnknownRuns++
		return
	}
	s.UnknownRuns = 0
}

// PassedSince says whether every check in ids has a record judged after t
// that shows it working: pass, a warning (not counted by p), or a skip that
// is not "blocked by" another check. missing lists those that have not.
func (s *State) PassedSince(ids []string, t time.Time, p report.Policy) (missing []string) {
	for _, id := range ids {
		rec := s.Record(id)
		if rec == nil || !rec.Ran.After(t) || !works(rec, p) {
			missing = append(missing, id)
		}
	}
	return missing
}

func works(rec *CheckRecord, p report.Policy) bool {
	switch rec.Status {
	case report.Pass:
		return true
	case report.Warn:
		return !p.FailOnWarn && !p.FailOnWarnChecks[rec.ID]
	case report.Skip:
		return !rec.blocked()
	}
	return false
}

// blocked reports whether the record is of a check that a failed
// prerequisite kept from judging. A record without finding IDs (written by
// a version before findings) says it in its summary.
func (rec *CheckRecord) blocked() bool {
	if len(rec.Findings) == 0 {
		return strings.HasPrefix(rec.Summary, "blocked by ")
	}
	return slices.Contains(rec.Findings, report.FindingBlocked)
}

// findingIDs are the IDs a record keeps of a result's findings, once each,
// in order.
func findingIDs(fs []report.Finding) []string {
	var ids []string
	for _, f := range fs {
		if !slices.Contains(ids, f.ID) {
			ids = append(ids, f.ID)
		}
	}
	return ids
}
