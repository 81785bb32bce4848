package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report/adapter"
	"github.com/rdmadoctor/rdmadoctor/report/state"
)

// slurmActor carries a verdict out through scontrol: it reads the node's
// state when the verdict needs it, then drains, resumes or leaves the node,
// and says which on stdout (slurmd logs the output of a health check that
// exits non-zero; the node's Reason is the lasting record).
type slurmActor struct {
	o              *slurmOpts
	ctx            context.Context
	sc             scontrol
	scErr          error // scontrol was not found
	stdout, stderr io.Writer
	failed         bool // an scontrol call failed
	// st is the state the verdict came from: a resume is checked against
	// it, and a drain or resume recorded in it when it is kept (--state).
	st *state.State
}

// actLocked acts under the node's lock, unless a run that started later has
// acted already. Without the lock file (a run by hand, not as root) it acts
// anyway and says so: the lock guards against overlapping runs, it is no
// precondition of one.
func (a *slurmActor) actLocked(v verdict) int {
	l, err := lockAct(a.ctx, a.o.lockFile)
	if err != nil && a.ctx.Err() != nil {
		a.fail(err) // held by another run until the deadline: too late to act
		return a.exitCode(v)
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "rdmadoctor slurm %s %s: %v; acting without it\n", a.o.mode, a.o.node, err)
		return a.act(v)
	}
	defer l.release()
	if l.note != "" {
		fmt.Fprintf(a.stderr, "rdmadoctor slurm %s %s: %s\n", a.o.mode, a.o.node, l.note)
	}
	if last := l.lastStart(); last.After(a.o.start) {
		a.say("%s; not acted on: a run that started later (%s) has acted already", v.what, last.UTC().Format(time.RFC3339Nano))
		return a.exitCode(verdict{kind: v.kind})
	}
	code := a.act(v)
	if err := l.record(a.o.start); err != nil {
		fmt.Fprintf(a.stderr, "rdmadoctor slurm %s %s: %v\n", a.o.mode, a.o.node, err)
	}
	return code
}

func (a *slurmActor) act(v verdict) int {
	switch v.kind {
	case verdictHealthy:
		a.healthy(v)
	case verdictFault:
		a.fault(v)
	default:
		fmt.Fprintf(a.stderr, "rdmadoctor slurm %s %s: could not judge: %s; the node is neither drained nor resumed\n", a.o.mode, a.o.node, v.what)
	}
	return a.exitCode(v)
}

// exitCode: a health check's code is only logged, so it is 0 once the node
// is dealt with and 1 when it could not be (scontrol failed, or the checks
// could not finish). A prolog exits 1 on a fault, so that Slurm requeues the
// job, and 0 otherwise: rdmadoctor's own failure does not hold a user's job.
func (a *slurmActor) exitCode(v verdict) int {
	drains := v.kind == verdictFault
	if a.o.mode == slurmProlog {
		if drains {
			return 1
		}
		return 0
	}
	if a.failed || v.kind == verdictUnsure {
		return 1
	}
	return 0
}

func (a *slurmActor) say(format string, args ...any) {
	fmt.Fprintf(a.stdout, "rdmadoctor slurm %s %s: %s\n", a.o.mode, a.o.node, fmt.Sprintf(format, args...))
}

func (a *slurmActor) fail(err error) {
	a.failed = true
	fmt.Fprintf(a.stderr, "rdmadoctor slurm %s %s: %v\n", a.o.mode, a.o.node, err)
}

// show reads the node's state. ok is false when it could not be read; in a
// dry run without scontrol, or with one that cannot read the node, the node
// is taken as usable and without a reason, and the output says so.
func (a *slurmActor) show() (nodeInfo, bool) {
	if a.scErr != nil {
		if a.o.dryRun {
			a.say("scontrol not found (%v): the node's state was not read; as if it were IDLE with no reason", a.scErr)
			return nodeInfo{State: "IDLE", Tokens: []string{"IDLE"}}, true
		}
		return nodeInfo{}, false // said when the run began
	}
	n, err := a.sc.show(a.ctx, a.o.node)
	if err != nil && a.o.dryRun {
		// A dry run changes nothing: on a machine where scontrol cannot
		// reach slurmctld (no slurm.conf, a login node) it still shows
		// what it would run, and says on what assumption.
		a.say("the node's state could not be read (%v); as if it were IDLE with no reason", err)
		return nodeInfo{State: "IDLE", Tokens: []string{"IDLE"}}, true
	}
	if err != nil {
		a.fail(err)
		return nodeInfo{}, false
	}
	if a.o.dryRun {
		a.say("read: %s: State=%s Reason=%q", shellLine(a.sc.path, showArgs(a.o.node)), n.State, clip(n.Reason, 160))
	}
	return n, true
}

// update runs (or, in a dry run, prints) one scontrol update; it reports
// whether the update was made.
func (a *slurmActor) update(args []string, done string) bool {
	if a.o.dryRun {
		a.say("would run: %s", shellLine(a.sc.path, args))
		return false
	}
	if a.scErr != nil {
		return false // said when the run began
	}
	if _, err := a.sc.run(a.ctx, args...); err != nil {
		a.fail(err)
		return false
	}
	a.say("%s", done)
	return true
}

// fault drains the node unless it is out of our reach or already drained:
// by rdmadoctor for this very reason, or by anyone else for theirs.
func (a *slurmActor) fault(v verdict) {
	n, ok := a.show()
	if !ok {
		return
	}
	switch {
	case n.handsOff() != "":
		a.say("%s; not drained: the node is %s (State=%s), left to whoever set it", v.what, n.handsOff(), n.State)
	case n.drained() && !n.ours():
		a.say("%s; not drained again: already drained (State=%s) for another reason, kept: %q", v.what, n.State, clip(n.Reason, 160))
	case n.drained() && n.Reason == v.reason:
		a.say("%s; already drained for it", v.what)
		a.recordDrain(v, true)
	default:
		if a.update(drainArgs(a.o.node, v.reason), fmt.Sprintf("%s; drained: %s", v.what, v.reason)) {
			a.recordDrain(v, n.drained() && n.ours())
		}
	}
}

// recordDrain keeps in the state what the node is drained for, so that a
// resume waits for every one of those checks to pass. A node drained by us
// already keeps its drain's time and adds the checks failing now.
func (a *slurmActor) recordDrain(v verdict, already bool) {
	if a.st == nil || a.o.state == "" || a.o.dryRun {
		return
	}
	d := &state.Drain{At: a.o.start, Checks: v.drainFor, Reason: v.reason}
	if already && a.st.Drain != nil {
		d.At = a.st.Drain.At
		for _, id := range a.st.Drain.Checks {
			if !slices.Contains(d.Checks, id) {
				d.Checks = append(d.Checks, id)
			}
		}
	}
	a.st.Drain = d
	a.saveState()
}

func (a *slurmActor) saveState() {
	if err := a.st.Save(a.o.state); err != nil {
		a.fail(err)
	}
}

// healthy resumes the node when rdmadoctor drained it and nothing else holds
// it. Under a health check, SLURM_NODE_IS_HEALTHY=yes (slurmctld's view:
// not down, drained, failing or in maintenance) means there is nothing to
// resume, and spares slurmctld one query from every node at once.
func (a *slurmActor) healthy(v verdict) {
	if a.o.getenv("SLURM_NODE_IS_HEALTHY") == "yes" {
		a.say("%s; slurmctld sees the node healthy: nothing to resume", v.what)
		return
	}
	n, ok := a.show()
	if !ok {
		return
	}
	switch {
	case !n.drained() || !n.ours():
		a.say("%s; not drained by rdmadoctor (State=%s): nothing to resume", v.what, n.State)
	case n.handsOff() != "":
		a.say("%s; drained by rdmadoctor but %s (State=%s): left to whoever set it", v.what, n.handsOff(), n.State)
	default:
		a.resume(v, n)
	}
}

// resume resumes the node only when every check it was drained for has
// passed since the drain: a partial run (--check, a lower level) that is
// healthy in what it ran is no proof for a check it did not run.
func (a *slurmActor) resume(v verdict, n nodeInfo) {
	if a.st == nil {
		a.say("%s; not resumed: no state to check the drain against", v.what)
		return
	}
	missing, since := adapter.ResumeWaitsFor(a.st, n.Reason, a.st.Policy.Report())
	if len(missing) > 0 {
		when := ""
		if !since.IsZero() {
			when = " since the drain (" + since.UTC().Format(time.RFC3339) + ")"
		}
		a.say("%s; not resumed: drained for %s, which has not passed%s; run it (--check %s, at its level)",
			v.what, strings.Join(missing, ", "), when, missing[0])
		return
	}
	if a.update(resumeArgs(a.o.node), fmt.Sprintf("%s; resumed (drained by rdmadoctor: %q)", v.what, n.Reason)) && a.st.Drain != nil && a.o.state != "" && !a.o.dryRun {
		a.st.Drain = nil
		a.saveState()
	}
}
