package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/adapter"
	"github.com/rdmadoctor/rdmadoctor/report/state"
)

// `rdmadoctor slurm healthcheck|prolog` runs the checks and acts on the
// verdict through scontrol, because Slurm does not: a HealthCheckProgram's
// exit code is only logged, so the program drains the node itself. A prolog
// that exits non-zero makes Slurm requeue the job held and drain the node —
// with the reason "Prolog error" unless the node is drained already
// (validate_node_specs in src/slurmctld/node_mgr.c), so the prolog drains
// first, with its own reason, and then exits 1.
//
// Decisions, after NHC's node-mark-offline / node-mark-online:
//   - a check that failed drains the node with "rdmadoctor: <check>(<code>) <summary>";
//   - a healthy run resumes the node only when its reason starts with "rdmadoctor:";
//   - a node drained for another reason, or DOWN, in MAINTENANCE, rebooting,
//     powered down, FAIL, FUTURE or in a state this version does not know, is
//     left alone;
//   - a run that could not finish (a check in error, the deadline, an internal
//     error) neither drains nor resumes: that is rdmadoctor's failure, not the
//     node's, and it is said on stderr (slurmd logs a health check's output
//     when it exits non-zero). --drain-on-error drains on it instead.

const (
	slurmHealthcheck = "healthcheck"
	slurmProlog      = "prolog"
)

// Default budgets: slurmd kills a health check at HealthCheckTimeout (60 s);
// a prolog is expected to end within MessageTimeout (10 s).
var slurmBudgets = map[string]time.Duration{slurmHealthcheck: 50 * time.Second, slurmProlog: 8 * time.Second}

type slurmOpts struct {
	mode              string
	dryRun            bool
	scontrol          string
	node              string
	budget            time.Duration
	drainOnError      bool
	unknownDrainAfter int
	maxAge            time.Duration
	failOnWarn        bool
	lockFile          string
	start             time.Time     // when the run started: its verdict's age
	timeout           time.Duration // the user's --timeout, 0 when not given
	runArgs           []string      // the run's flags, passed on to the checks
	state             string        // the run's --state FILE: its lock makes an overlapping run exit at once
	getenv            func(string) string
}

func newSlurmFlagSet(o *slurmOpts) *pflag.FlagSet {
	fs := pflag.NewFlagSet("rdmadoctor slurm", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the scontrol update it would run instead of running it (scontrol show node, which changes nothing, still runs when scontrol is found)")
	fs.StringVar(&o.scontrol, "scontrol", "", "absolute path of scontrol (default: the first of "+strings.Join(scontrolDirs, ", ")+")")
	fs.StringVar(&o.node, "node", "", "the Slurm node name (default: $SLURMD_NODENAME, which slurmd sets)")
	fs.DurationVar(&o.budget, "budget", 0, "deadline of the whole command, checks and scontrol calls (default 50s for healthcheck, 8s for prolog)")
	fs.StringVar(&o.lockFile, "lock-file", defaultSlurmLock, "runs on one node take turns to act through this file, and an older verdict never undoes a newer one (\"\": no lock)")
	fs.IntVar(&o.unknownDrainAfter, "unknown-drain-after", 0, "drain after this many consecutive runs whose verdict is unknown (a check could not look); needs --state; 0: never — an unknown verdict alone neither drains nor resumes")
	fs.BoolVar(&o.drainOnError, "drain-on-error", false, "the same as --unknown-drain-after 1")
	fs.DurationVar(&o.maxAge, "max-age", 0, "with --state: a check's last result older than this is unknown (0: results do not age)")
	return fs
}

func printSlurmUsage(w io.Writer) {
	fmt.Fprintf(w, `usage:
  rdmadoctor slurm healthcheck [flags]   for HealthCheckProgram: drain on a fault, resume a node rdmadoctor drained once healthy; exit 0 after acting
  rdmadoctor slurm prolog [flags]        for Prolog: on a fault drain the node and exit 1 (Slurm requeues the job held)

Checks run at --level 1 unless told otherwise; the run's flags (--level, --check, --root,
--expect, --timeout, --state, …; see rdmadoctor --help) apply. Exit: 0 done; 1 the checks could
not finish or scontrol failed (prolog: 1 on a fault); 2 usage; 3 another run holds the --state
lock (prolog: 0).

flags:
%s`, newSlurmFlagSet(&slurmOpts{}).FlagUsages())
}

// notForSlurm are the run's flags that would take the report away from the
// slurm command (it reads it from the run's output) or run it more than once.
var notForSlurm = map[string]bool{"format": true, "version": true, "output": true, "repeat": true}

// parseSlurmArgs splits the command line into the slurm flags and the run's
// flags, which it passes on untouched but for --timeout (bounded by the
// budget) and --format (the report is read, never printed).
func parseSlurmArgs(args []string, getenv func(string) string) (*slurmOpts, error) {
	if len(args) == 0 {
		return nil, usageError{"slurm needs a command: healthcheck or prolog (slurm --help)"}
	}
	if args[0] == "--help" || args[0] == "-h" {
		return nil, pflag.ErrHelp
	}
	o := &slurmOpts{mode: args[0], getenv: getenv, start: time.Now()}
	if o.mode != slurmHealthcheck && o.mode != slurmProlog {
		return nil, usageError{fmt.Sprintf("unknown slurm command %q%s; valid: healthcheck, prolog", o.mode, didYouMean(o.mode, []string{"healthcheck", "prolog"}))}
	}
	fs := newSlurmFlagSet(o)
	run := newFlagSet(&flags{})
	fs.AddFlagSet(run)
	err := fs.ParseAll(args[1:], func(f *pflag.Flag, value string) error {
		if err := fs.Set(f.Name, value); err != nil {
			return err
		}
		switch {
		case run.Lookup(f.Name) == nil:
		case notForSlurm[f.Name]:
			return usageError{fmt.Sprintf("--%s does not apply to rdmadoctor slurm: it reads the report and acts on it once; run rdmadoctor --%s for that", f.Name, f.Name)}
		case f.Name == "fail-on":
			o.failOnWarn = value == "warn"
			o.runArgs = append(o.runArgs, "--"+f.Name+"="+value)
		case f.Name == "timeout":
			o.timeout, _ = time.ParseDuration(value)
		case f.Name == "state":
			o.state = value
			o.runArgs = append(o.runArgs, "--"+f.Name+"="+value)
		default:
			o.runArgs = append(o.runArgs, "--"+f.Name+"="+value)
		}
		return nil
	})
	if err != nil {
		var ue usageError
		if errors.Is(err, pflag.ErrHelp) || errors.As(err, &ue) {
			return nil, err
		}
		return nil, usageError{flagError(err, fs)}
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Sprintf("rdmadoctor slurm %s takes flags only, got %q", o.mode, fs.Arg(0))}
	}
	return o, o.finish(fs)
}

// finish fills the defaults and checks what the flags say.
func (o *slurmOpts) finish(fs *pflag.FlagSet) error {
	if !fs.Changed("budget") {
		o.budget = slurmBudgets[o.mode]
	}
	if !fs.Changed("periodic") {
		// slurmd runs both on every interval or job: with --level 2 they
		// must not make the driver log a line each time (--periodic=false
		// or --check probe.cq_overflow asks for it by name).
		o.runArgs = append(o.runArgs, "--periodic")
	}
	if o.drainOnError && o.unknownDrainAfter == 0 {
		o.unknownDrainAfter = 1
	}
	if o.unknownDrainAfter < 0 || o.maxAge < 0 {
		return usageError{"--unknown-drain-after and --max-age must not be negative"}
	}
	if o.unknownDrainAfter > 0 && o.state == "" {
		return usageError{"--unknown-drain-after (and --drain-on-error) count unknown runs in the kept state: add --state FILE"}
	}
	if o.budget < 2*time.Second {
		return usageError{fmt.Sprintf("--budget %v: give at least 2s", o.budget)}
	}
	if fs.Changed("timeout") && o.timeout <= 0 {
		return usageError{"--timeout must be positive"}
	}
	if o.scontrol != "" && !filepath.IsAbs(o.scontrol) {
		return usageError{fmt.Sprintf("--scontrol %q: give an absolute path (slurmd runs its programs with no PATH)", o.scontrol)}
	}
	if o.node == "" {
		o.node = o.getenv("SLURMD_NODENAME")
	}
	if o.node == "" {
		return usageError{"no node name: SLURMD_NODENAME is not set (slurmd sets it for HealthCheckProgram and Prolog); give --node NAME to run by hand"}
	}
	if !validNodeName().MatchString(o.node) {
		return usageError{fmt.Sprintf("node name %q: want one host name (letters, digits, '.', '_', '-')", clip(o.node, 80))}
	}
	return nil
}

// callTimeout is each scontrol call's deadline; checkTimeout what is left for
// the checks once two calls (show node, then update) are paid for.
func (o *slurmOpts) callTimeout() time.Duration { return min(5*time.Second, o.budget/5) }

func (o *slurmOpts) checkTimeout() time.Duration {
	t := o.budget - 2*o.callTimeout() - 500*time.Millisecond
	if o.timeout > 0 {
		t = min(t, o.timeout)
	}
	return t
}

func cmdSlurm(args []string, stdout, stderr io.Writer) int {
	o, err := parseSlurmArgs(args, os.Getenv)
	if errors.Is(err, pflag.ErrHelp) {
		printSlurmUsage(stdout)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "rdmadoctor slurm: %v\n", err)
		return report.ExitUsage
	}
	ctx, cancel := context.WithDeadline(context.Background(), o.start.Add(o.budget))
	defer cancel()
	// What slurm prints goes to slurmd's log, one line at a time: ASCII,
	// whatever the node's locale, like the drain reason.
	return runSlurm(ctx, o, asciiWriter{stdout}, asciiWriter{stderr})
}

// runSlurm runs the checks, reads the node's state when the verdict needs it,
// and drains, resumes or leaves the node.
func runSlurm(ctx context.Context, o *slurmOpts, stdout, stderr io.Writer) int {
	if o.state != "" {
		// The lock a plain run with --state holds: slurmd starts a health
		// check while the last one still runs, and the second must not
		// check and act beside the first.
		l, code, ok := lockSlurmRun(o, stderr)
		if !ok {
			return code
		}
		defer l.release()
	}
	sc, scErr := findScontrol(o.scontrol)
	code, rep, runErr := slurmChecks(o)
	if code == report.ExitUsage {
		fmt.Fprintf(stderr, "rdmadoctor slurm: %v\n", runErr)
		return report.ExitUsage
	}
	st, v := o.judge(code, rep, runErr, stderr)
	a := &slurmActor{o: o, ctx: ctx, sc: scontrol{path: sc, timeout: o.callTimeout()}, scErr: scErr, stdout: stdout, stderr: stderr, st: st}
	if scErr != nil && o.dryRun {
		a.sc.path = "scontrol"
	}
	if scErr != nil && !o.dryRun {
		// Said whatever the verdict: a health check that cannot drain is
		// broken even while the node is healthy.
		a.fail(scErr)
	}
	if v.kind == verdictUnsure || o.dryRun || o.lockFile == "" {
		return a.act(v)
	}
	return a.actLocked(v)
}

// slurmChecks runs the pipeline as `rdmadoctor --format json` does and reads
// its report back. rep is nil when no report was written.
func slurmChecks(o *slurmOpts) (int, *report.Report, error) {
	args := append([]string{"--level=1"}, o.runArgs...)
	args = append(args, "--format=json", "--timeout="+o.checkTimeout().String())
	var buf bytes.Buffer
	code, err := cmdDiagnose(args, &buf)
	if code == report.ExitUsage || buf.Len() == 0 {
		return code, nil, err
	}
	var rep report.Report
	if jerr := json.Unmarshal(buf.Bytes(), &rep); jerr != nil {
		return report.ExitInternal, nil, fmt.Errorf("read the run's report: %w", jerr)
	}
	return code, &rep, err
}

type verdictKind int

const (
	verdictHealthy verdictKind = iota
	verdictFault
	verdictUnsure // unknown: neither drain nor resume
)

type verdict struct {
	kind     verdictKind
	what     string   // one line for the log: the check and its summary, or why the run is unsure
	reason   string   // the drain reason
	drainFor []string // the checks a drain is for
}

// judge reads the verdict the adapter acts on. With --state it is the kept
// state's — every check's last result, this run's merged in — so a partial
// run (--check, a lower level) proves only what it ran; without, this run's
// alone. A run that wrote no report, or did not finish, is unknown. st is
// the state a resume is checked against (this run alone without --state).
func (o *slurmOpts) judge(code int, rep *report.Report, runErr error, stderr io.Writer) (*state.State, verdict) {
	if rep == nil || code == report.ExitInternal {
		return nil, o.unfinished(code, rep, runErr)
	}
	st := state.New(rep.Host.Hostname)
	if o.state != "" {
		kept, err := state.Load(o.state)
		if err != nil {
			return nil, unsure(fmt.Sprintf("--state: %v", err))
		}
		st = kept
	} else {
		st.Merge(rep, func(string) bool { return true })
		st.Policy = state.Policy{FailOnWarn: o.failOnWarn}
	}
	sv := adapter.Slurm(st.Judge(time.Now(), o.maxAge, st.Policy.Report()), st.UnknownRuns, adapter.SlurmOptions{UnknownDrainAfter: o.unknownDrainAfter, RunStarted: rep.Started})
	v := verdict{what: sv.What, reason: sv.Reason, drainFor: sv.For}
	switch sv.Intent {
	case adapter.SlurmDrain:
		v.kind = verdictFault
	case adapter.SlurmLeave:
		v.kind = verdictUnsure
	}
	return st, v
}

func unsure(why string) verdict { return verdict{kind: verdictUnsure, what: why} }

// unfinished is the verdict of a run that wrote no report or did not finish:
// unknown — drained for only when the kept state counts enough such runs in
// a row (--unknown-drain-after).
func (o *slurmOpts) unfinished(code int, rep *report.Report, runErr error) verdict {
	why := fmt.Sprintf("the run exited %d", code)
	if runErr != nil {
		why = runErr.Error()
	} else if rep == nil {
		why = "the checks wrote no report"
	}
	v := unsure(fmt.Sprintf("exit %d: %s", code, why))
	if o.unknownDrainAfter == 0 || rep == nil {
		return v
	}
	kept, err := state.Load(o.state)
	if err != nil || kept.UnknownRuns < o.unknownDrainAfter {
		return v
	}
	return verdict{kind: verdictFault, what: fmt.Sprintf("%s; unknown for %d runs in a row (--unknown-drain-after %d)", v.what, kept.UnknownRuns, o.unknownDrainAfter),
		reason: adapter.SlurmReason("run", report.ExitInternal, fmt.Sprintf("could not check (%d runs): %s", kept.UnknownRuns, why))}
}

// lockSlurmRun takes the lock beside --state, as a plain run does. A run
// that finds it held checked nothing and acts on nothing: a health check
// exits ExitBusy (3), which slurmd logs with the message; a prolog exits 0,
// since rdmadoctor's "not now" must not hold a user's job — the run in
// progress drains the node if it is broken.
func lockSlurmRun(o *slurmOpts, stderr io.Writer) (*runLock, int, bool) {
	notNow := ExitBusy
	if o.mode == slurmProlog {
		notNow = report.ExitOK
	}
	err := ensureDir(o.state)
	var l *runLock
	if err == nil {
		l, err = acquireLock(lockPathFor(o.state))
	}
	var busy errBusy
	switch {
	case errors.As(err, &busy) && !busy.holder.foreign():
		holder := ""
		if h := busy.holder.String(); h != "" {
			holder = " (" + h + ")"
		}
		fmt.Fprintf(stderr, "rdmadoctor slurm %s %s: another rdmadoctor run holds %s%s: this run checked nothing and acted on nothing (exit %d)\n",
			o.mode, o.node, busy.path, holder, notNow)
		return nil, notNow, false
	case err != nil:
		// An unsafe directory, a planted file, a foreign holder: this run
		// could not run, which is no "not now" — a health check exits 1.
		// As a run that could not finish: neither drain nor resume.
		fmt.Fprintf(stderr, "rdmadoctor slurm %s %s: --state: %v; the node is neither drained nor resumed\n", o.mode, o.node, err)
		if o.mode == slurmProlog {
			return nil, report.ExitOK, false
		}
		return nil, report.ExitInternal, false
	}
	if l.note != "" {
		fmt.Fprintf(stderr, "rdmadoctor slurm %s %s: --state: %s\n", o.mode, o.node, l.note)
	}
	return l, 0, true
}
