package checks

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/report"
)

func fakeCheck(id string, code int, needs []string, run func(context.Context, *Env) Result) *Check {
	return &Check{ID: id, Code: code, Level: 1, Title: id, Needs: needs, Run: run}
}

func TestRunBlocksDependantsAndNamesTheCause(t *testing.T) {
	var mu sync.Mutex // independent checks run concurrently
	calls := map[string]int{}
	mk := func(id string, code int, st report.Status, needs ...string) *Check {
		return fakeCheck(id, code, needs, func(context.Context, *Env) Result {
			mu.Lock()
			defer mu.Unlock()
			calls[id]++
			return Result{Status: st, Summary: id + " ran"}
		})
	}
	sel := []*Check{
		mk("a.root", 10, report.Fail),
		mk("b.ok", 11, report.Pass),
		mk("c.child", 12, report.Pass, "a.root"),
		mk("d.grandchild", 13, report.Pass, "c.child"),
		mk("e.warnchild", 14, report.Warn, "b.ok"),
		mk("f.afterwarn", 15, report.Pass, "e.warnchild"),
	}
	env := NewEnv(nil, Options{Level: 1})
	res := Run(context.Background(), env, sel)
	want := map[string]report.Status{"a.root": report.Fail, "b.ok": report.Pass, "c.child": report.Skip,
		"d.grandchild": report.Skip, "e.warnchild": report.Warn, "f.afterwarn": report.Pass}
	for _, r := range res {
		if r.Status != want[r.ID] {
			t.Errorf("%s: %s, want %s", r.ID, r.Status, want[r.ID])
		}
	}
	if res[3].Summary != "blocked by a.root" {
		t.Errorf("grandchild summary %q, want the failed root named", res[3].Summary)
	}
	if calls["c.child"] != 0 || calls["d.grandchild"] != 0 {
		t.Errorf("blocked checks ran: %v", calls)
	}
	rep := report.Report{Checks: res}
	rep.Finish(false)
	if rep.ExitCode != 10 || *rep.RootCause != "a.root" {
		t.Errorf("exit %d root %v, want 10 a.root", rep.ExitCode, *rep.RootCause)
	}
}

// TestRunKeepsCatalogOrderWhateverFinishesFirst: the later check finishes
// first, the report still lists them in the order given.
func TestRunKeepsCatalogOrderWhateverFinishesFirst(t *testing.T) {
	firstMayEnd := make(chan struct{})
	sel := []*Check{
		fakeCheck("a.slow", 10, nil, func(context.Context, *Env) Result {
			<-firstMayEnd
			return pass("a done")
		}),
		fakeCheck("b.quick", 11, nil, func(context.Context, *Env) Result {
			close(firstMayEnd) // a.slow ends only after b.quick has run
			return pass("b done")
		}),
	}
	res := Run(context.Background(), NewEnv(nil, Options{Level: 1, CheckTimeout: 5 * time.Second}), sel)
	if len(res) != 2 || res[0].ID != "a.slow" || res[1].ID != "b.quick" ||
		res[0].Status != report.Pass || res[1].Status != report.Pass {
		t.Fatalf("results %+v, want a.slow then b.quick, both passed", res)
	}
}

// TestRunStartsADependantOnlyAfterItsNeeds: a dependant never overlaps the
// check it needs, and sees its result; independent checks do overlap.
func TestRunStartsADependantOnlyAfterItsNeeds(t *testing.T) {
	var rootDone, running, most atomic.Int32
	track := func(run func()) func(context.Context, *Env) Result {
		return func(context.Context, *Env) Result {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			run()
			running.Add(-1)
			return pass("ran")
		}
	}
	var sawRoot atomic.Bool
	sel := []*Check{
		fakeCheck("a.root", 10, nil, track(func() { time.Sleep(20 * time.Millisecond); rootDone.Store(1) })),
		fakeCheck("b.free", 11, nil, track(func() { time.Sleep(20 * time.Millisecond) })),
		fakeCheck("c.child", 12, []string{"a.root"}, track(func() { sawRoot.Store(rootDone.Load() == 1) })),
	}
	Run(context.Background(), NewEnv(nil, Options{Level: 1, CheckTimeout: 5 * time.Second}), sel)
	if !sawRoot.Load() {
		t.Error("c.child started before a.root finished")
	}
	if runWorkers() >= 2 && most.Load() < 2 {
		t.Errorf("independent checks ran one at a time (at most %d at once)", most.Load())
	}
}

// TestDispatchStartsTheLowestReadyIndexFirst: with one worker the checks
// start in catalog order, a dependant as soon as its need is done, and no
// two run at once.
func TestDispatchStartsTheLowestReadyIndexFirst(t *testing.T) {
	var (
		mu      sync.Mutex
		order   []string
		running atomic.Int32
		overlap atomic.Bool
	)
	mk := func(id string, code int, needs ...string) *Check {
		return fakeCheck(id, code, needs, func(context.Context, *Env) Result {
			if running.Add(1) > 1 {
				overlap.Store(true)
			}
			mu.Lock()
			order = append(order, id)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			running.Add(-1)
			return pass("ran")
		})
	}
	sel := []*Check{mk("a.root", 10), mk("b.free", 11), mk("c.child", 12, "a.root"), mk("d.free", 13)}
	env := NewEnv(nil, Options{Level: 1, CheckTimeout: 5 * time.Second})
	turns := planTurns(sel)
	dispatch(context.Background(), env, sel, turns, 1)
	if got := fmt.Sprint(order); got != "[a.root b.free c.child d.free]" {
		t.Errorf("started %s, want [a.root b.free c.child d.free]", got)
	}
	if overlap.Load() {
		t.Error("two checks ran at once with one worker")
	}
}

func TestRunTurnsPanicAndOverrunIntoErrors(t *testing.T) {
	sel := []*Check{
		fakeCheck("p.panics", 20, nil, func(context.Context, *Env) Result { panic("boom") }),
		fakeCheck("h.hangs", 21, nil, func(ctx context.Context, _ *Env) Result { time.Sleep(time.Hour); return Result{} }),
		fakeCheck("n.nostatus", 22, nil, func(context.Context, *Env) Result { return Result{} }),
		fakeCheck("z.after", 23, nil, func(context.Context, *Env) Result { return Result{Status: report.Pass, Summary: "still ran"} }),
	}
	env := NewEnv(nil, Options{Level: 1, CheckTimeout: 50 * time.Millisecond})
	res := Run(context.Background(), env, sel)
	// The panic's value and the deadline are named.
	if res[0].Status != report.Error || !cmp.Equal(onlyFinding(report.FindingInternal, ""), unitFindings(res[0].Findings)) ||
		!strings.Contains(res[0].Summary, "boom") {
		t.Errorf("panic: %+v", res[0])
	}
	if res[1].Status != report.Error || !cmp.Equal(onlyFinding(report.FindingTimeout, ""), unitFindings(res[1].Findings)) ||
		!strings.Contains(res[1].Summary, "50ms") {
		t.Errorf("overrun: %+v", res[1])
	}
	if res[2].Status != report.Error {
		t.Errorf("no status: %+v", res[2])
	}
	if res[3].Status != report.Pass {
		t.Errorf("the run did not go on: %+v", res[3])
	}
}

func TestRunSkipsHigherLevelsAndHonoursTheRunDeadline(t *testing.T) {
	l2 := fakeCheck("v.probe", 30, nil, func(context.Context, *Env) Result { return Result{Status: report.Pass, Summary: "ran"} })
	l2.Level = 2
	res := Run(context.Background(), NewEnv(nil, Options{Level: 1}), []*Check{l2})
	if res[0].Status != report.Skip || !cmp.Equal(onlyFinding(report.FindingBelowLevel, ""), unitFindings(res[0].Findings)) {
		t.Errorf("level 2 at level 1: %+v", res[0])
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res = Run(ctx, NewEnv(nil, Options{Level: 2}), []*Check{l2})
	if res[0].Status != report.Skip || !cmp.Equal(onlyFinding(report.FindingCut, ""), unitFindings(res[0].Findings)) {
		t.Errorf("after the run deadline: %+v", res[0])
	}
	// A check running when the run ends is cut off, not blamed.
	slow := fakeCheck("s.slow", 40, nil, func(ctx context.Context, _ *Env) Result { time.Sleep(time.Hour); return Result{} })
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	res = Run(ctx, NewEnv(nil, Options{Level: 1, CheckTimeout: time.Hour}), []*Check{slow})
	if res[0].Status != report.Skip || !cmp.Equal(onlyFinding(report.FindingCut, ""), unitFindings(res[0].Findings)) {
		t.Errorf("cut by the run deadline: %+v", res[0])
	}
}

func TestCatalogIsConsistent(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Catalog() {
		for _, n := range c.Needs {
			dep, ok := registry[n]
			if !ok {
				t.Errorf("%s needs unknown check %s", c.ID, n)
				continue
			}
			if !seen[n] || dep.Code >= c.Code {
				t.Errorf("%s needs %s, which does not come before it in catalog order", c.ID, n)
			}
		}
		seen[c.ID] = true
		if c.Explain.Judges == "" || c.Explain.Why == "" || len(c.Explain.Failures)+len(Findings(c.ID)) == 0 {
			t.Errorf("%s: explain text incomplete", c.ID)
		}
		for _, f := range c.Explain.Failures {
			if f.Finding == "" || f.Fix == "" {
				t.Errorf("%s: a failure without finding or fix: %+v", c.ID, f)
			}
		}
	}
}

func TestSelectAddsPrerequisites(t *testing.T) {
	sel, err := Select([]string{"13"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range sel {
		ids = append(ids, c.ID)
	}
	if strings.Join(ids, ",") != "pci.device,kernel.modules" {
		t.Errorf("selected %v", ids)
	}
	if _, err := Select([]string{"nope"}); err == nil {
		t.Error("unknown id accepted")
	}
}

// pass is a fake check's passing result: these checks are not in the
// catalog, so they carry no declared finding.
func pass(summary string) Result { return Result{Status: report.Pass, Summary: summary} }
