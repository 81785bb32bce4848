package report

// Verdict is what a run, or a kept state, says of the host as a whole — the
// one meaning of "healthy" every adapter (npd, Slurm, Prometheus, systemd,
// summarize) maps from. It is made from the checks' statuses by Judge and
// nowhere else.
type Verdict string

const (
	// Healthy: every check that ran passed, warned (where the policy lets
	// a warning pass) or did not apply.
	Healthy Verdict = "healthy"
	// Problem: a check looked and found a fault (fail, or a warning the
	// policy counts). The root cause is the first such check.
	Problem Verdict = "problem"
	// Unknown: nothing found a fault, but a check could not look (error),
	// or the run did not finish. It never drains, taints or resumes a node
	// by itself: it is the doctor's blind spot, not the host's fault.
	Unknown Verdict = "unknown"
)

// Verdicts lists the verdicts, best first.
var Verdicts = []Verdict{Healthy, Problem, Unknown}

// ExitUnknown is the exit code of a run whose verdict is unknown because a
// check could not look (error) and none found a fault: root_cause names the
// first check in error. A run that could not finish exits ExitInternal.
// Neither is a finding, so a scheduler or a systemd unit can tell "could not
// judge" from "judged and found a fault" by the code alone.
const ExitUnknown = 4

// Policy says which warnings count as problems.
type Policy struct {
	// FailOnWarn counts every check's warnings (--fail-on warn).
	FailOnWarn bool
	// FailOnWarnChecks counts the warnings of these checks (the
	// expectations file's fail_on_warn for the host's class).
	FailOnWarnChecks map[string]bool
	// Asked, when not nil, limits FailOnWarn to the checks the user named
	// (--check): a prerequisite that only warns did not answer the
	// question asked. FailOnWarnChecks applies to every check.
	Asked func(id string) bool
}

// counts reports whether c's status makes it a problem under p.
func (p Policy) counts(c *CheckResult) bool {
	switch c.Status {
	case Fail:
		return true
	case Warn:
		return p.FailOnWarnChecks[c.ID] || (p.FailOnWarn && (p.Asked == nil || p.Asked(c.ID)))
	}
	return false
}

// Judge turns the checks' statuses into the verdict. Any fail (or counted
// warning) is a problem, and the first, in catalog order, is the root cause
// — even when an earlier check is in error: a fault that was seen outranks
// one that could not be looked for; and a fault of the hardware outranks a
// deviation from the expectations file (a DOWN port is named before a
// firmware version that differs from the file's). Otherwise any error makes the verdict
// unknown, with the first check in error as the root cause. Otherwise the
// host is healthy and root is -1.
func Judge(checks []CheckResult, p Policy) (v Verdict, root int) {
	firstErr, firstDeviation := -1, -1
	for i := range checks {
		if p.counts(&checks[i]) {
			if !checks[i].Deviation {
				return Problem, i
			}
			if firstDeviation < 0 {
				firstDeviation = i
			}
		}
		if checks[i].Status == Error && firstErr < 0 {
			firstErr = i
		}
	}
	if firstDeviation >= 0 {
		return Problem, firstDeviation
	}
	if firstErr >= 0 {
		return Unknown, firstErr
	}
	return Healthy, -1
}

// ExitCodeFor is the exit code of a verdict whose root cause is root: 0
// healthy, the root cause's own code for a problem, ExitUnknown for a check
// that could not look.
func ExitCodeFor(v Verdict, root *CheckResult) int {
	switch v {
	case Problem:
		return root.Code
	case Unknown:
		return ExitUnknown
	}
	return ExitOK
}

// VerdictOfExit reads a verdict back from a run's exit code (for adapters
// that see only the code): 0 healthy, 10–125 a problem, anything else —
// ExitInternal, ExitUnknown, the lock's 3, a signal — unknown.
func VerdictOfExit(code int) Verdict {
	switch {
	case code == ExitOK:
		return Healthy
	case code >= 10 && code <= 125:
		return Problem
	}
	return Unknown
}
