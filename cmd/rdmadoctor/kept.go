package main

import (
	"fmt"
	"time"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
)

// loadState reads the kept state a run with --state merges into (a new one
// when there is none yet). A state this version cannot read — corrupt, or
// of a schema it does not know — is not replaced: the run goes on without
// history, its report is printed, the file is left as it was and the run
// exits 1 saying why. The state holds what a drain waits for; resetting it
// silently would resume a node on no evidence.
func loadState(path, host string) (*state.State, error) {
	if path == "" {
		return nil, nil
	}
	s, err := state.LoadOrNew(path, host)
	if err != nil {
		return nil, fmt.Errorf("--state: %v; the state was left as it was (move it aside to start a new history)", err)
	}
	return s, nil
}

// historyFinished reports whether the check that writes the counter history
// returned: one abandoned at its deadline (rdmadoctor.run/timeout) may
// still be writing into its copy, which is then not taken.
func historyFinished(rep *report.Report) bool {
	for i := range rep.Checks {
		if c := &rep.Checks[i]; c.ID == "counters.errors" {
			return !c.HasFinding(report.FindingTimeout)
		}
	}
	return true
}

// keptRun is what the state learns from a run: its results for the checks
// it selected, under its policy.
type keptRun struct {
	state  *state.State
	sel    []*checks.Check
	policy state.Policy
}

// save merges the run into the state and writes it: only the selected
// checks' records change; the verdict of the merged records is counted for
// the unknown-run streak.
func (k keptRun) save(path string, rep *report.Report) error {
	ran := map[string]bool{}
	for _, c := range k.sel {
		ran[c.ID] = true
	}
	k.state.Merge(rep, func(id string) bool { return ran[id] })
	k.state.Policy = k.policy
	v := k.state.Judge(time.Now(), 0, k.policy.Report()).Verdict
	if rep.ExitCode == report.ExitInternal && v != report.Problem {
		v = report.Unknown // the run did not finish: it proved nothing of what it missed
	}
	k.state.NoteVerdict(v)
	return k.state.Save(path)
}

// runPolicy is which warnings count as problems in this run: --fail-on warn
// for every check, and the expectations class's fail_on_warn checks.
func runPolicy(f *flags, class *expect.Class) state.Policy {
	return state.Policy{FailOnWarn: f.failOn == "warn", FailOnWarnChecks: failOnWarnChecks(class)}
}

// skipSelection drops the checks --skip names.
func skipSelection(f *flags, sel []*checks.Check) []*checks.Check {
	if len(f.skipIDs) == 0 {
		return sel
	}
	skipped := namedChecks(f.skipIDs)
	out := make([]*checks.Check, 0, len(sel))
	for _, c := range sel {
		if !skipped[c.ID] {
			out = append(out, c)
		}
	}
	return out
}

// failOnWarnChecks are the class's fail_on_warn checks (none without a class).
func failOnWarnChecks(class *expect.Class) []string { return class.FailOnWarnChecks() }
