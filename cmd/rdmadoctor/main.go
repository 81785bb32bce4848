// Command rdmadoctor checks whether a host's RDMA stack works, says what is
// broken first and how to fix it: a short report for a person, a JSON health
// report and a per-check exit code for machines.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/mad"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func main() {
	// The same binary, re-executed, is the verbs child: every call into
	// libibverbs runs there, under a deadline, so a provider that hangs or
	// crashes costs one check an error, never the whole run.
	if len(os.Args) > 1 && os.Args[1] == probe.ChildArg {
		os.Exit(probe.ChildMain(os.Args[2:]))
	}
	// mad.Exit is os.Exit, except under the ibsim simulator, where it
	// lets libumad2sim.so give back the simulator's client slot.
	mad.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a bad word on the command line: exit 2 with one line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "inventory":
			return cmdInventory(args[1:], stdout, stderr)
		case "list":
			return cmdList(args[1:], stdout, stderr)
		case "explain":
			return cmdExplain(args[1:], stdout, stderr)
		case "snapshot":
			return cmdSnapshot(args[1:], stdout, stderr)
		case "expect":
			return cmdExpect(args[1:], stdout, stderr)
		case "slurm":
			return cmdSlurm(args[1:], stdout, stderr)
		case "npd":
			return cmdNPD(args[1:], stdout, stderr)
		case "ack":
			return cmdAck(args[1:], stdout, stderr)
		case "summarize":
			return cmdSummarize(args[1:], stdout, stderr)
		case "peer":
			return cmdPeer(args[1:], stdout, stderr)
		case "help":
			return cmdHelp(args[1:], stdout, stderr)
		case "version":
			return cmdVersion(args[1:], stdout, stderr)
		case "completion":
			return cmdCompletion(args[1:], stdout, stderr)
		}
	}
	for _, a := range args {
		if a == "--help" || a == "-h" {
			printUsage(stdout)
			return 0
		}
		if a == "--" {
			break
		}
	}
	return diagnose(args, stdout, stderr)
}

type flags struct {
	level       int
	format      string
	root        string
	checkIDs    []string
	skipIDs     []string
	failOn      string
	noColor     bool
	verbose     bool
	timeout     time.Duration
	showVersion bool
	expect      string
	fleet       fleetFlags
	// checkOpts are the checks' own flags (checks.BindFlags): each check
	// declares its knobs beside its judgement.
	checkOpts checks.Options
}

func newFlagSet(f *flags) *pflag.FlagSet {
	fs := pflag.NewFlagSet("rdmadoctor", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	fs.IntVar(&f.level, "level", 2, "1: read-only checks; 2: also drive the verbs API (creates and destroys its own resources)")
	fs.StringVar(&f.format, "format", "text", "report format: text, json, or prometheus (node_exporter textfile)")
	fs.StringVar(&f.root, "root", "/", "read this host directory or snapshot .tar.gz instead of the live host")
	fs.StringSliceVar(&f.checkIDs, "check", nil, "run only these checks (IDs or codes, comma-separated) and their prerequisites; repeatable")
	fs.StringSliceVar(&f.skipIDs, "skip", nil, "leave out these checks (IDs or codes, comma-separated; repeatable): the report says so, and a kept --state keeps their last result")
	fs.StringVar(&f.failOn, "fail-on", "fail", "what makes the exit code non-zero: fail, or warn (warnings count too)")
	fs.BoolVar(&f.noColor, "no-color", false, "never colour the text report (NO_COLOR does the same)")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "print the details of passing checks too")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "deadline for the whole run")
	fs.BoolVar(&f.showVersion, "version", false, "print the version and exit")
	checks.BindFlags(fs, &f.checkOpts)
	fs.StringVar(&f.expect, "expect", "", expectFlagHelp)
	addFleetFlags(fs, &f.fleet)
	return fs
}

func flagNames(fs *pflag.FlagSet) string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, "--"+f.Name) })
	return strings.Join(names, ", ")
}

// parseFlags parses and validates; every error is a usageError.
func parseFlags(args []string) (*flags, error) {
	f := &flags{}
	fs := newFlagSet(f)
	if err := fs.Parse(args); err != nil {
		return nil, usageError{flagError(err, fs)}
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Sprintf("unknown command %q%s; valid: %s, or flags only (rdmadoctor help)",
			fs.Arg(0), didYouMean(fs.Arg(0), subcommandNames()), strings.Join(subcommandNames(), ", "))}
	}
	if f.level != 1 && f.level != 2 {
		return nil, usageError{fmt.Sprintf("--level %d: unknown level; valid levels: 1, 2 (1: read-only checks; 2: also the verbs probes)", f.level)}
	}
	if f.format != "text" && f.format != "json" && f.format != "prometheus" {
		return nil, usageError{fmt.Sprintf("--format %q: unknown format; valid formats: text, json, prometheus%s", f.format, didYouMean(f.format, []string{"text", "json", "prometheus"}))}
	}
	if f.failOn != "fail" && f.failOn != "warn" {
		return nil, usageError{fmt.Sprintf("--fail-on %q: unknown policy; valid: fail, warn", f.failOn)}
	}
	if err := checks.CheckFlags(fs, &f.checkOpts); err != nil {
		return nil, usageError{err.Error()}
	}
	if f.timeout <= 0 {
		return nil, usageError{fmt.Sprintf("--timeout %v must be positive", f.timeout)}
	}
	if err := f.fleet.validate(fs); err != nil {
		return nil, err
	}
	for _, id := range f.skipIDs {
		if _, ok := checks.Lookup(id); !ok {
			return nil, usageError{unknownCheck("--skip: ", id, checks.IDs())}
		}
	}
	for _, id := range f.checkIDs {
		c, ok := checks.Lookup(id)
		if !ok {
			return nil, usageError{unknownCheck("--check: ", id, checks.IDs())}
		}
		if c.Level > f.level {
			return nil, usageError{fmt.Sprintf("%s is a level-%d check and would only be skipped at --level %d; add --level %d", c.ID, c.Level, f.level, c.Level)}
		}
	}
	return f, nil
}

func cmdDiagnose(args []string, stdout io.Writer) (int, error) {
	f, err := parseFlags(args)
	if err != nil {
		return report.ExitUsage, err
	}
	if f.showVersion {
		writeVersion(stdout, buildVersion())
		return 0, nil
	}
	sel, err := checks.Select(f.checkIDs)
	if err != nil {
		return report.ExitUsage, usageError{err.Error()}
	}
	sel = skipSelection(f, periodicSelection(f, sel))
	// Signals are caught before --root is opened, and stay caught until its
	// temporary directory (an unpacked snapshot) is removed: the deferred
	// calls run in reverse, so cleanup runs before the signals are let go.
	ctx, stop, caught := catchSignals(f.timeout)
	defer stop()

	host, cleanup, err := openRootCtx(ctx, f.root)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if sig, ok := caught.Load().(syscall.Signal); ok {
			return 128 + int(sig), fmt.Errorf("--root: interrupted by %v while unpacking", sig)
		}
		return report.ExitInternal, fmt.Errorf("--root: the run's deadline (--timeout %v) passed while unpacking", f.timeout)
	}
	if err != nil {
		return report.ExitUsage, fmt.Errorf("--root: %w", err)
	}
	defer cleanup()

	hostname := host.Hostname()
	if host.Live() && hostname == "" {
		hostname, _ = os.Hostname()
	}
	class, expectInfo, err := expectFor(f.expect, host.Live(), hostname)
	if err != nil {
		return report.ExitUsage, err
	}
	kept, stateErr := loadState(f.fleet.state, hostname)
	// The checks write their history into a copy: one abandoned at its
	// deadline may still be writing when the state is saved.
	work := kept.Clone()
	env := newRunEnv(ctx, f, host, class, work)
	rep, cut := runChecks(ctx, f, env, sel)
	rep.Host.Root = f.root
	rep.Host.Hostname, rep.Host.Expect = hostname, expectInfo

	interrupted := caught.Load() != nil
	kept.TakeHistory(work, historyFinished(rep))
	err = writeOutputs(stdout, f, host, rep, interrupted, keptRun{state: kept, sel: sel, policy: runPolicy(f, class)})
	if errors.Is(err, syscall.EPIPE) {
		return rep.ExitCode, nil // the reader went away; the verdict stands
	}
	if err != nil {
		return report.ExitInternal, fmt.Errorf("write report: %w", err)
	}
	if sig, ok := caught.Load().(syscall.Signal); ok {
		if !interrupted {
			// The checks had finished: the report is whole, and so are the
			// files written while the signal waited.
			return 128 + int(sig), fmt.Errorf("%v arrived while the report was being written; it was written whole", sig)
		}
		return 128 + int(sig), fmt.Errorf("interrupted by %v; the report above is partial", sig)
	}
	if stateErr != nil {
		return report.ExitInternal, stateErr
	}
	if cut {
		return rep.ExitCode, fmt.Errorf("the run's deadline (--timeout %v) passed before every check finished; the report above is partial", f.timeout)
	}
	return rep.ExitCode, nil
}

// catchSignals makes the run's context: its deadline, ended early by
// SIGINT, SIGTERM or SIGHUP, the signal kept in caught (the verbs children
// get it from probe.Run and are reaped). A closed stdout (`rdmadoctor |
// head -1`) gives EPIPE on write instead of killing the process before its
// cleanup. stop cancels the context and lets the signals go.
func catchSignals(timeout time.Duration) (ctx context.Context, stop func(), caught *atomic.Value) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	signal.Ignore(syscall.SIGPIPE)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	caught = &atomic.Value{} // os.Signal
	go func() {
		if s, ok := <-sigs; ok {
			caught.Store(s)
			cancel()
		}
	}()
	return ctx, func() { cancel(); signal.Stop(sigs) }, caught
}

// newRunEnv is the run's environment: the flags' options, and a check
// deadline that covers one check's work — the counter sampling window and,
// for the verbs checks, one probe child per device whose ports are probed
// one after another.
func newRunEnv(ctx context.Context, f *flags, host *sysfs.Host, class *expect.Class, kept *state.State) *checks.Env {
	opts := f.checkOpts
	opts.Level, opts.Expect, opts.State = f.level, class, kept
	opts.Executable, _ = os.Executable()
	env := checks.NewEnv(host, opts)
	maxPorts := 1
	if f.level >= 2 {
		if s, ok := within(ctx, env.Survey); ok {
			for _, d := range s.Devices {
				maxPorts = max(maxPorts, len(d.Ports))
			}
		}
	}
	env.Opts.CheckTimeout = 10*time.Second + opts.Interval + time.Duration(maxPorts)*opts.ProbeTimeout
	return env
}

// runChecks runs the selected checks and finishes the report; cut is true
// when the run's deadline ended some checks. Checks cut off are skipped,
// never blamed; a partial report that found nothing wrong exits 1, never
// "healthy".
func runChecks(ctx context.Context, f *flags, env *checks.Env, sel []*checks.Check) (rep *report.Report, cut bool) {
	checks.StartEarly(ctx, env, sel)
	started := time.Now()
	rep = &report.Report{Schema: report.Schema, Version: version, Level: f.level, Started: started.UTC()}
	rep.Host.Kernel, _ = env.Host.KernelRelease()
	rep.Checks = withLeftOut(f, checks.Run(ctx, env, sel))
	rep.Inventory = inventoryWithin(ctx, env)
	rep.DurationMS = float64(time.Since(started).Microseconds()) / 1000
	p := runPolicy(f, env.Expect).Report()
	if len(f.checkIDs) > 0 {
		named := namedChecks(f.checkIDs)
		p.Asked = func(id string) bool { return named[id] }
	}
	rep.FinishPolicy(p)
	for i := range rep.Checks {
		cut = cut || rep.Checks[i].HasFinding(report.FindingCut)
	}
	if cut && rep.Verdict != report.Problem {
		// What the run did not reach is unknown, whatever the rest says.
		rep.Verdict = report.Unknown
		if rep.ExitCode == report.ExitOK {
			rep.ExitCode = report.ExitInternal
		}
	}
	return rep, cut
}

// namedChecks are the catalog IDs --check named (its words as Lookup
// reads them).
func namedChecks(ids []string) map[string]bool {
	named := map[string]bool{}
	for _, id := range ids {
		if c, ok := checks.Lookup(id); ok {
			named[c.ID] = true
		}
	}
	return named
}

// useColor decides colour once: a terminal, NO_COLOR unset, no --no-color.
func useColor(w io.Writer, noColor bool) bool {
	if noColor || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// listEntry is one check as `list --format json` prints it, with the
// catalog of its findings.
type listEntry struct {
	ID       string         `json:"id"`
	Code     int            `json:"code"`
	Level    any            `json:"level"` // 1 or 2; "peer" for the two-host checks
	Title    string         `json:"title"`
	Needs    []string       `json:"needs"`
	Findings []findingEntry `json:"findings"`
}

// findingEntry is one declared finding as `list --format json` prints it:
// the templates with their slots as {name}.
type findingEntry struct {
	ID      string        `json:"id"`
	Status  report.Status `json:"status"`
	When    string        `json:"when"`
	Message string        `json:"message"`
	Fix     string        `json:"fix,omitempty"`
	Slots   []string      `json:"slots"`
}

// listEntries are the catalog, then the two-host checks, which `peer test`
// runs and no level does: their level is "peer".
func listEntries() []listEntry {
	var out []listEntry
	for _, c := range checks.Catalog() {
		out = append(out, listEntry{c.ID, c.Code, c.Level, c.Title, append([]string{}, c.Needs...), findingEntries(c.ID)})
	}
	for _, c := range checks.PeerCatalog() {
		out = append(out, listEntry{c.ID, c.Code, "peer", c.Title, append([]string{}, c.Needs...), findingEntries(c.ID)})
	}
	return out
}

func findingEntries(checkID string) []findingEntry {
	out := []findingEntry{}
	for _, f := range checks.Findings(checkID) {
		out = append(out, findingEntry{f.ID, f.Status, f.When, f.Message, f.Fix, append([]string{}, f.SlotNames()...)})
	}
	return out
}

const listUsage = `usage: rdmadoctor list [--format text|json]
  the checks: exit code, ID, level, title; the two-host checks (peer test) last

`

func cmdList(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("list", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	format := fs.String("format", "text", "text, or json: [{id, code, level, title, needs}]")
	err := fs.Parse(args)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		fmt.Fprint(stdout, listUsage+fs.FlagUsages())
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "rdmadoctor list: %s (list --help)\n", flagError(err, fs))
		return report.ExitUsage
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "rdmadoctor list: takes no arguments, got %q (rdmadoctor explain %s shows one check)\n", fs.Arg(0), fs.Arg(0))
		return report.ExitUsage
	}
	switch *format {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(listEntries()); err != nil {
			fmt.Fprintf(stderr, "rdmadoctor list: write: %v\n", err)
			return report.ExitInternal
		}
	case "text":
		writeText(stdout, func(w io.Writer) error { writeListText(w); return nil })
	default:
		fmt.Fprintf(stderr, "rdmadoctor list: --format %q: unknown format; valid: text, json\n", *format)
		return report.ExitUsage
	}
	return 0
}

func writeListText(stdout io.Writer) {
	fmt.Fprintf(stdout, "%-4s  %-20s  %-5s  %s\n", "CODE", "ID", "LEVEL", "TITLE")
	for _, c := range checks.Catalog() {
		fmt.Fprintf(stdout, "%-4d  %-20s  %-5d  %s\n", c.Code, c.ID, c.Level, c.Title)
	}
	// The two-host checks are run by `peer test`, never by a level: their
	// level column says so (and readers of the list that take a number
	// there as a level do not count them in).
	fmt.Fprintln(stdout, "\ntwo hosts (rdmadoctor peer test HOST...):")
	for _, c := range checks.PeerCatalog() {
		fmt.Fprintf(stdout, "%-4d  %-20s  %-5s  %s\n", c.Code, c.ID, "peer", c.Title)
	}
}
