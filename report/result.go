// Package report holds rdmadoctor's result model — the status of a check, the
// whole run's report and its inventory — the exit-code rule, and the
// renderers (text for people, JSON for machines).
package report

import "time"

// Schema names the JSON report format; the JSON Schema for it is
// report/rdmadoctor.report.v1.schema.json.
const Schema = "rdmadoctor.report/v1"

// Status is the outcome of one check.
type Status string

const (
	Pass  Status = "pass"  // looked, and the host is right
	Warn  Status = "warn"  // looked, works, but something is off
	Fail  Status = "fail"  // looked, and found a fault
	Skip  Status = "skip"  // not applicable, or blocked by a failed prerequisite
	Error Status = "error" // could not look: the reason says why
)

// Exit codes that are not a check's own code.
const (
	ExitOK       = 0
	ExitInternal = 1
	ExitUsage    = 2
)

// CheckResult is one check's entry in the report.
type CheckResult struct {
	ID       string `json:"id"`
	Code     int    `json:"code"`
	Title    string `json:"title"`
	Level    int    `json:"level"`
	Status   Status `json:"status"`
	Summary  string `json:"summary"`
	Observed string `json:"observed"`
	Expected string `json:"expected"`
	// Details are the supporting lines: one per device, port, file.
	Details []string `json:"details"`
	// Remedy is the fix, empty when there is nothing to fix.
	Remedy string `json:"remedy"`
	// Evidence holds the values judged, for machines.
	Evidence map[string]any `json:"evidence"`
	// Deviation marks a fail that is only a deviation from the
	// expectations file (firmware, device count): the hardware works, so
	// it blocks no other check and, as a root cause, ranks after a fault.
	Deviation bool `json:"deviation,omitempty"`
	// Findings are the declared verdicts behind the summary, one for
	// each unit judged (a port, a device, a netdev): machines key on
	// their IDs, not on the sentences. Absent for a check that reported
	// none (a check not yet written in findings).
	Findings   []Finding `json:"findings,omitempty"`
	DurationMS float64   `json:"duration_ms"`
}

// The runner's own findings: why a check did not judge. They belong to no
// check; the state and the adapters key on them, never on the sentences.
const (
	FindingBlocked        = "rdmadoctor.run/blocked"           // a check it needs failed or could not look
	FindingBelowLevel     = "rdmadoctor.run/below-level"       // a level-2 check in a level-1 run
	FindingSkippedByClass = "rdmadoctor.run/skipped-by-class"  // the expectations class skips it
	FindingCut            = "rdmadoctor.run/cut"               // the run ended before it finished
	FindingTimeout        = "rdmadoctor.run/timeout"           // it did not finish within --check-timeout
	FindingInternal       = "rdmadoctor.run/internal"          // it panicked: a bug
	FindingLeftOutSkip    = "rdmadoctor.run/left-out-skip"     // --skip named it
	FindingLeftOutPeriod  = "rdmadoctor.run/left-out-periodic" // a periodic run leaves its noisy probe out

	// A kept state's record judged now: too old to stand for the host,
	// or judged ahead of this clock.
	FindingStale     = "rdmadoctor.state/stale"
	FindingClockBack = "rdmadoctor.state/clock-back"
)

// FindingID is the ID of the finding the check's summary speaks of: its
// first finding of the check's own status that no waiver set aside; the
// check's ID when it has none (a check not written in findings). The
// adapters lead with it: a drain reason, an NPD message.
func (c *CheckResult) FindingID() string {
	for _, f := range c.Findings {
		if f.Status == c.Status && f.Waived == "" {
			return f.ID
		}
	}
	return c.ID
}

// HasFinding reports whether one of the check's findings is one of ids.
func (c *CheckResult) HasFinding(ids ...string) bool {
	for _, f := range c.Findings {
		for _, id := range ids {
			if f.ID == id {
				return true
			}
		}
	}
	return false
}

// Finding is one declared verdict about one unit: ID names it for ever
// ("port.state/no-link"), Slots are the values its message and fix were
// rendered from. The catalog of every finding a check can return is in
// `rdmadoctor list --format json` and docs/checks.md.
type Finding struct {
	ID      string            `json:"id"`
	Unit    string            `json:"unit,omitempty"`
	Status  Status            `json:"status"`
	Slots   map[string]string `json:"slots,omitempty"`
	Message string            `json:"message"`
	Fix     string            `json:"fix,omitempty"`
	// Waived is the reason the expectations file gives for not counting
	// this finding (waive = ["ID"] with reason = "…"); the check's status
	// is then judged without it.
	Waived string `json:"waived,omitempty"`
}

// HostInfo names the host the report is about.
type HostInfo struct {
	Hostname string `json:"hostname"`
	Kernel   string `json:"kernel"`
	Root     string `json:"root"`
	// Expect names the expectations that judged the host; absent when no
	// file was read.
	Expect *ExpectInfo `json:"expect,omitempty"`
}

// ExpectInfo is the expectations file read and the class that judged the
// host; Class is "" when the default file has no class for this host name
// (the host is then judged on its hardware alone).
type ExpectInfo struct {
	File  string `json:"file"`
	Class string `json:"class"`
}

// Summary counts the checks by status.
type Summary struct {
	Pass  int `json:"pass"`
	Warn  int `json:"warn"`
	Fail  int `json:"fail"`
	Skip  int `json:"skip"`
	Error int `json:"error"`
}

// Report is one run of rdmadoctor.
type Report struct {
	Schema     string    `json:"schema"`
	Version    string    `json:"version"`
	Host       HostInfo  `json:"host"`
	Level      int       `json:"level"`
	Started    time.Time `json:"started"`
	DurationMS float64   `json:"duration_ms"`
	ExitCode   int       `json:"exit_code"`
	RootCause  *string   `json:"root_cause"`
	// Verdict is Judge's word on the checks: healthy, problem or unknown.
	Verdict   Verdict       `json:"verdict"`
	Summary   Summary       `json:"summary"`
	Inventory Inventory     `json:"inventory"`
	Checks    []CheckResult `json:"checks"`
}

// Finish counts the statuses and applies the verdict (Judge) and the
// exit-code rule: 0 when healthy; for a problem, the code of the first check,
// in catalog order, that failed (with failOnWarn, or warned); for an unknown
// verdict (a check could not look and none found a fault), ExitUnknown with
// the first check in error as root_cause.
func (r *Report) Finish(failOnWarn bool) { r.FinishPolicy(Policy{FailOnWarn: failOnWarn}) }

// FinishAsked is Finish for a run of selected checks (--check): asked tells
// which checks the user named; the others ran only as prerequisites. A
// prerequisite that fails is still the root cause (it blocked the rest), but
// its warning does not count under failOnWarn: the user asked whether the
// named checks warn. asked == nil means every check was asked.
func (r *Report) FinishAsked(failOnWarn bool, asked func(id string) bool) {
	r.FinishPolicy(Policy{FailOnWarn: failOnWarn, Asked: asked})
}

// FinishPolicy counts the statuses and sets the verdict, root cause and
// exit code under p.
func (r *Report) FinishPolicy(p Policy) {
	r.Summary = Summary{}
	for i := range r.Checks {
		switch r.Checks[i].Status {
		case Pass:
			r.Summary.Pass++
		case Warn:
			r.Summary.Warn++
		case Fail:
			r.Summary.Fail++
		case Skip:
			r.Summary.Skip++
		case Error:
			r.Summary.Error++
		}
	}
	v, root := Judge(r.Checks, p)
	r.Verdict, r.RootCause, r.ExitCode = v, nil, ExitOK
	if root >= 0 {
		id := r.Checks[root].ID
		r.RootCause = &id
		r.ExitCode = ExitCodeFor(v, &r.Checks[root])
	}
}
