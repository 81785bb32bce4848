package checks

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// Select returns the checks to run: all of the catalog when ids is empty,
// else the named checks and, transitively, the checks they need, in catalog
// order. Unknown IDs are an error naming them.
func Select(ids []string) ([]*Check, error) {
	if len(ids) == 0 {
		return Catalog(), nil
	}
	want := map[string]bool{}
	var add func(id string) error
	add = func(id string) error {
		c, ok := Lookup(id)
		if !ok {
			return fmt.Errorf("unknown check %q", id)
		}
		if want[c.ID] {
			return nil
		}
		want[c.ID] = true
		for _, n := range c.Needs {
			if _, ok := registry[n]; ok {
				if err := add(n); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, id := range ids {
		if err := add(id); err != nil {
			return nil, err
		}
	}
	var out []*Check
	for _, c := range Catalog() {
		if want[c.ID] {
			out = append(out, c)
		}
	}
	return out, nil
}

// Run runs the selected checks and returns their results in the order of
// sel (catalog order), whatever order they finish in. A check starts once
// every prerequisite before it in sel has finished; checks that do not
// need each other run concurrently, at most runWorkers at a time, the
// earliest in sel first. A check whose prerequisite failed, errored or was
// itself blocked is skipped as "blocked by <id>" (naming the check that
// actually failed), so the first red line is the cause and not one of
// twenty echoes. Level-2 checks are skipped below level 2. A panic or an
// overrun deadline inside one check becomes that check's error; the run
// goes on. A check the expectations class skips is skipped, naming the
// line. A fail marked BlocksNothing (a deviation from the expectations
// file only) blocks nothing: its dependants still judge.
func Run(ctx context.Context, env *Env, sel []*Check) []report.CheckResult {
	verbsOf(env).selectProbes(sel)
	turns := planTurns(sel)
	dispatch(ctx, env, sel, turns, runWorkers())
	results := make([]report.CheckResult, len(sel))
	for i, c := range sel {
		r := turns[i].result
		results[i] = report.CheckResult{
			ID: c.ID, Code: c.Code, Title: c.Title, Level: c.Level,
			Status: r.Status, Summary: r.Summary, Observed: r.Observed, Expected: r.Expected,
			Details: r.Details, Remedy: r.Remedy, Evidence: r.Evidence, Deviation: r.BlocksNothing && r.Status == report.Fail,
			Findings:   r.Findings,
			DurationMS: float64(turns[i].took.Microseconds()) / 1000,
		}
	}
	return results
}

// checkTurn is one selected check's place in a run: the checks before it
// that it needs and those that need it, and, once it is done, its result
// and the failed check that blocks its dependants ("" when it blocks
// nothing).
type checkTurn struct {
	needs      []int // indices in sel
	dependants []int
	result     Result
	took       time.Duration
	blocks     string
}

// planTurns links each check to the checks before it in sel that it needs.
func planTurns(sel []*Check) []checkTurn {
	turns := make([]checkTurn, len(sel))
	seen := map[string]int{} // check id → its index in sel, for the checks before the current one
	for i, c := range sel {
		for _, n := range c.Needs {
			if j, ok := seen[n]; ok {
				turns[i].needs = append(turns[i].needs, j)
				turns[j].dependants = append(turns[j].dependants, i)
			}
		}
		seen[c.ID] = i
	}
	return turns
}

// dispatch starts each check once the checks it needs are done, the
// lowest ready index first (an early check is the prerequisite of many
// later ones), at most workers running at once. A check that is decided
// without running (skipped, blocked, below the run's level) is decided
// here and takes no worker.
func dispatch(ctx context.Context, env *Env, sel []*Check, turns []checkTurn, workers int) {
	waiting := make([]int, len(sel)) // unfinished prerequisites per check
	var ready []int                  // kept sorted
	for i := range turns {
		if waiting[i] = len(turns[i].needs); waiting[i] == 0 {
			ready = append(ready, i)
		}
	}
	finished := make(chan int)
	running, done := 0, 0
	finish := func(i int) {
		done++
		for _, d := range turns[i].dependants {
			if waiting[d]--; waiting[d] == 0 {
				at := sort.SearchInts(ready, d)
				ready = slices.Insert(ready, at, d)
			}
		}
	}
	for done < len(sel) {
		for len(ready) > 0 && running < max(workers, 1) {
			i := ready[0]
			ready = ready[1:]
			if turns[i].decide(env, sel[i], turns) {
				finish(i)
				continue
			}
			running++
			go func() {
				turns[i].run(ctx, env, sel[i])
				finished <- i
			}()
		}
		if running == 0 {
			continue // every ready check was decided; their dependants may be ready now
		}
		i := <-finished
		running--
		finish(i)
	}
}

// decide settles a check that does not run: skipped by the class, blocked
// by a failed prerequisite, or below the run's level. It reports whether
// it did.
func (t *checkTurn) decide(env *Env, c *Check, turns []checkTurn) bool {
	by := ""
	for _, j := range t.needs {
		if turns[j].blocks != "" {
			by = turns[j].blocks
			break
		}
	}
	switch sk := env.Expect.Skipped(c.ID); {
	case sk != nil:
		// The operator's file says this check does not apply to
		// the class: a skip, which blocks nothing that needs it.
		t.result = runSkippedByClass.result("", Slots{"cite": sk.Cite()})
	case by != "":
		t.result, t.blocks = runBlocked.result("", Slots{"check": by}), by
	case c.Level > env.Opts.Level:
		t.result = runBelowLevel.result("", Slots{"level": fmt.Sprint(c.Level)})
	default:
		return false
	}
	return true
}

// run runs the check under its deadline, or cuts it when the run has ended.
func (t *checkTurn) run(ctx context.Context, env *Env, c *Check) {
	start := time.Now()
	if err := ctx.Err(); err != nil {
		t.result = runCutResult(err)
	} else {
		t.result = ownFindings(c, runOne(ctx, env, c))
		waive(env.Expect, &t.result)
	}
	t.took = time.Since(start)
	if (t.result.Status == report.Fail || t.result.Status == report.Error) && !t.result.BlocksNothing ||
		t.result.Status == report.Skip && t.result.NothingBeyond {
		t.blocks = c.ID
	}
}

// runWorkers is how many checks run at once: one per CPU the runtime
// uses (at most 8). Checks mostly read small files; in a 2-vCPU SoftRoCE
// guest under qemu, twice the CPUs was slower than one check per CPU
// (hand-offs between threads are dear there), and one CPU is the verbs
// child's while the checks read.
func runWorkers() int { return min(runtime.GOMAXPROCS(0), 8) }

// runOne runs one check under its deadline, turning a panic into an error.
func runOne(runCtx context.Context, env *Env, c *Check) Result {
	ctx, cancel := context.WithTimeout(runCtx, env.Opts.CheckTimeout)
	defer cancel()
	done := make(chan Result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- runInternal.result("", Slots{"check": c.ID, "cause": fmt.Sprint(p)})
			}
		}()
		r := c.Run(ctx, env)
		recordResult(c.ID, r)
		if r.Status == "" {
			r = runInternal.result("", Slots{"check": c.ID, "cause": "it returned no status"})
		}
		done <- r
	}()
	select {
	case r := <-done:
		return r
	case <-ctx.Done():
		if err := runCtx.Err(); err != nil {
			// The run ended (its --timeout, or a signal), not this check's
			// own deadline: the check is not to blame.
			return runCutResult(err)
		}
		return runTimeout.result("", Slots{"timeout": env.Opts.CheckTimeout.String(), "cause": ctx.Err().Error()})
	}
}

// runCutResult is the result of a check the end of the whole run cut off.
// Such a check is skipped, never the root cause: the caller reports the run
// as partial instead (RunCut).
func runCutResult(err error) Result {
	return runCut.result("", Slots{"cause": err.Error()})
}

// RunCutPrefix starts the summary of every check cut off by the end of the run.
const RunCutPrefix = "not run"

// The runner's own findings: why a check did not judge. They belong to no
// check; the state and the adapters key on them (a check blocked, cut or
// below the run's level proved nothing, and keeps its older record).
var (
	runBlocked = declare(Finding{ID: report.FindingBlocked, Status: report.Skip,
		When:    "a check it needs failed or could not look (the first red line is the cause, not this one), or found nothing for it to judge",
		Message: "blocked by {check}"})
	runBelowLevel = declare(Finding{ID: report.FindingBelowLevel, Status: report.Skip,
		When:    "the check creates verbs resources (level 2) and the run was level 1",
		Message: "level {level} check; run with --level {level}"})
	runSkippedByClass = declare(Finding{ID: report.FindingSkippedByClass, Status: report.Skip,
		When:    "the expectations file's class for this host skips the check",
		Message: "skipped by {cite}"})
	runCut = declare(Finding{ID: report.FindingCut, Status: report.Skip,
		When:    "the run's --timeout or a signal ended the run before the check finished",
		Message: RunCutPrefix + ": the run ended before this check finished ({cause})"})
	runTimeout = declare(Finding{ID: report.FindingTimeout, Status: report.Error,
		When:    "the check did not finish within --check-timeout",
		Message: "did not finish within {timeout}: {cause}",
		Fix:     ""})
	runInternal = declare(Finding{ID: report.FindingInternal, Status: report.Error,
		When:    "the check panicked or returned no status: a bug in rdmadoctor",
		Message: "internal error in check {check}: {cause} (please report this)"})
	runLeftOutSkip = declare(Finding{ID: report.FindingLeftOutSkip, Status: report.Skip,
		When:    "--skip names the check: the run leaves it out and its older record stays",
		Message: "left out by --skip"})
	runLeftOutPeriodic = declare(Finding{ID: report.FindingLeftOutPeriod, Status: report.Skip,
		When:    "a periodic run (--periodic) leaves out a probe that is noisy on the fabric or the kernel log",
		Message: "left out of periodic runs: {why}; run it by name (--check {check}) or with --periodic=false"})
)

// LeftOut is the finding about a check a full run leaves out: by --skip
// (why empty), or from a periodic run for the reason given; and one above
// the run's level is below-level whatever else leaves it out.
func LeftOut(c *Check, level int, periodicWhy string) report.Finding {
	switch {
	case c.Level > level:
		return runBelowLevel.At("", Slots{"level": fmt.Sprint(c.Level)})
	case periodicWhy != "":
		return runLeftOutPeriodic.At("", Slots{"why": periodicWhy, "check": c.ID})
	}
	return runLeftOutSkip.At("", nil)
}

// ownFindings refuses a result carrying a finding that is neither the
// check's own nor the runner's: every finding a check returns is declared
// under its ID, so the catalog and the docs list all it can say.
func ownFindings(c *Check, r Result) Result {
	for _, f := range r.Findings {
		if d, ok := findings[f.ID]; !ok || d.CheckID() != c.ID && d.CheckID() != "rdmadoctor.run" {
			return runInternal.result("", Slots{"check": c.ID, "cause": fmt.Sprintf("it returned finding %q, not one it declares", f.ID)})
		}
	}
	return r
}
