package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
)

// maxReportBytes bounds one file: a report of the largest host is a few MB.
const maxReportBytes = 64 << 20

// summarizeNow is summarize's clock, the reference time of staleness; the
// tests set it. A node's clock is never the reference.
var summarizeNow = time.Now

const summarizeUsage = `usage: rdmadoctor summarize [--format text|json] [--stale-after DURATION] [--future-skew DURATION] [--max-age DURATION] DIR|FILE...

Reads the JSON reports (--format json) or state files (--state) of many nodes
— every *.json in each DIR, and each FILE named — and prints one view: the
nodes by verdict (healthy; problem: a check found a fault; unknown: a check
could not look or the run did not finish), each check not passing with its
nodes, and the outliers: firmware, PCIe links, port rates, MTUs, kernels,
rdmadoctor versions and error-counter levels that differ from the fleet's
majority. A state file gives its merged verdict: each check's last result,
whichever run judged it. Times are judged against this host's clock: reports
that started more than --stale-after ago are listed as stale, and those that
start more than --future-skew ahead of it as from the future (the node's clock
is wrong). A missing, corrupt or foreign file is named and the rest still
summarised. Exit 0 when every file was read, 1 when any could not be (or none
was a report), 2 for a usage error; the fleet's health is in the output.

flags:
`

// summarizeFlags are summarize's settings, as parsed.
type summarizeFlags struct {
	format                    string
	stale, futureSkew, maxAge time.Duration
	help                      bool
}

func parseSummarize(args []string) (*summarizeFlags, *pflag.FlagSet, error) {
	f := &summarizeFlags{}
	fs := pflag.NewFlagSet("summarize", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.format, "format", "text", "text, or json (schema "+report.SummarySchema+")")
	fs.DurationVar(&f.stale, "stale-after", time.Hour, "list the nodes whose report started this long before now (0: none)")
	fs.DurationVar(&f.stale, "stale", time.Hour, "the former name of --stale-after")
	fs.MarkHidden("stale")
	fs.DurationVar(&f.futureSkew, "future-skew", report.DefaultFutureSkew, "list the reports that start this far ahead of this host's clock as from the future")
	fs.DurationVar(&f.maxAge, "max-age", 0, "in a state file, a check last judged longer ago than this is unknown (0: records do not age)")
	fs.BoolVarP(&f.help, "help", "h", false, "print this help")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, fs, err
		}
		return nil, fs, errors.New(flagError(err, fs))
	}
	switch {
	case f.format != "text" && f.format != "json":
		return nil, fs, fmt.Errorf("--format %q: unknown format; valid formats: text, json", f.format)
	case f.stale < 0:
		return nil, fs, fmt.Errorf("--stale-after %v: want a duration of 0 or more, such as 1h", f.stale)
	case f.futureSkew < 0:
		return nil, fs, fmt.Errorf("--future-skew %v: want a duration of 0 or more, such as 5m", f.futureSkew)
	case f.maxAge < 0:
		return nil, fs, fmt.Errorf("--max-age %v: want a duration of 0 or more, such as 30m", f.maxAge)
	case !f.help && fs.NArg() == 0:
		return nil, fs, errors.New("name a directory of reports or report files (summarize --help)")
	}
	return f, fs, nil
}

func cmdSummarize(args []string, stdout, stderr io.Writer) int {
	f, fs, err := parseSummarize(args)
	if err != nil {
		fmt.Fprintf(stderr, "rdmadoctor summarize: %v\n", err)
		return report.ExitUsage
	}
	if f.help {
		fmt.Fprint(stdout, summarizeUsage+fs.FlagUsages())
		return 0
	}
	now := summarizeNow()
	reports, problems := readFleet(fs.Args(), fleetClock{now: now, maxAge: f.maxAge})
	sum := report.Summarize(reports, problems, report.SummaryOptions{Now: now, StaleAfter: f.stale, FutureSkew: f.futureSkew})
	if f.format == "json" {
		err = report.WriteSummaryJSON(stdout, sum)
	} else {
		err = writeText(stdout, func(w io.Writer) error { return report.WriteSummaryText(w, sum) })
	}
	if err != nil {
		fmt.Fprintf(stderr, "rdmadoctor summarize: write: %v\n", err)
		return report.ExitInternal
	}
	if len(problems) > 0 || len(reports) == 0 {
		fmt.Fprintf(stderr, "rdmadoctor summarize: %d file(s) unreadable, %d report(s) read\n", len(problems), len(reports))
		return report.ExitInternal
	}
	return 0
}

// fleetClock is what a state file is judged with: summarize's now, and the
// age past which a check's record no longer counts.
type fleetClock struct {
	now    time.Time
	maxAge time.Duration
}

// readFleet reads every argument: a directory gives its *.json files (not
// its subdirectories), anything else is read as a file. The files are
// decoded on every CPU; the order of the results is the order of the files.
func readFleet(args []string, clock fleetClock) ([]report.FleetReport, []report.FileProblem) {
	var problems []report.FileProblem
	files := fleetFiles(args, &problems)
	decoded := make([]report.FleetReport, len(files))
	errs := make([]error, len(files))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(files), 1)) {
		wg.Go(func() {
			for i := range next {
				decoded[i], errs[i] = readReportFile(files[i], clock)
			}
		})
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()
	var reports []report.FleetReport
	for i, path := range files {
		if errs[i] != nil {
			problems = append(problems, report.FileProblem{Path: path, Error: errs[i].Error()})
			continue
		}
		decoded[i].Path = path
		reports = append(reports, decoded[i])
	}
	return reports, problems
}

func fleetFiles(args []string, problems *[]report.FileProblem) []string {
	var files []string
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil || !fi.IsDir() {
			files = append(files, a) // its error, if any, is reported when it is read
			continue
		}
		entries, err := os.ReadDir(a)
		if err != nil {
			*problems = append(*problems, report.FileProblem{Path: a, Error: err.Error()})
			continue
		}
		var names []string
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
				names = append(names, filepath.Join(a, e.Name()))
			}
		}
		sort.Strings(names)
		if len(names) == 0 {
			*problems = append(*problems, report.FileProblem{Path: a, Error: "directory holds no *.json file"})
		}
		files = append(files, names...)
	}
	return files
}

// readReportFile reads one node's file: a report, or a kept state judged
// as of clock.
func readReportFile(path string, clock fleetClock) (report.FleetReport, error) {
	data, err := readBounded(path)
	if err != nil {
		return report.FleetReport{}, err
	}
	if topSchema(data) == state.Schema {
		s, err := state.Decode(data)
		if err != nil {
			return report.FleetReport{}, err
		}
		return keptReport(s, clock), nil
	}
	r, err := report.DecodeReportForSummary(data)
	return report.FleetReport{Report: r}, err
}

// topSchema is the top-level "schema" of a JSON object, "" when there is
// none or data is not an object. rdmadoctor writes it first, so the rest of
// a large report is not scanned twice.
func topSchema(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return ""
		}
		if key != "schema" {
			if dec.Decode(&json.RawMessage{}) != nil {
				return ""
			}
			continue
		}
		var v string
		if dec.Decode(&v) != nil {
			return ""
		}
		return v
	}
	return ""
}

// keptReport is a state as summarize shows it: its last run for the host,
// time and inventory; its records' merged verdict as of clock for the
// verdict and the checks. A warning the last run counted (--fail-on warn,
// the class's fail_on_warn) is counted again: the state does not keep the
// policy, but the root cause it produced shows it.
func keptReport(s *state.State, clock fleetClock) report.FleetReport {
	last := s.Last
	if last == nil {
		last = &report.Report{Schema: report.Schema, Started: s.Updated}
		last.Host.Hostname = s.Host
	}
	p := report.Policy{FailOnWarnChecks: map[string]bool{}}
	if last.RootCause != nil {
		for _, c := range last.Checks {
			if c.ID == *last.RootCause && c.Status == report.Warn {
				p.FailOnWarnChecks[c.ID] = true
			}
		}
	}
	j := s.Judge(clock.now, clock.maxAge, p)
	kept := &report.KeptVerdict{Verdict: j.Verdict, Checks: j.Checks}
	if root := j.RootCheck(); root != nil {
		kept.RootCause, kept.ExitCode = root.ID, report.ExitCodeFor(j.Verdict, root)
	}
	return report.FleetReport{Report: last, Kept: kept}
}

// readBounded reads at most maxReportBytes of path, which must be a regular
// file. Reports are collected from many nodes into shared directories: a
// FIFO or a device planted under a report's name must not stall summarize
// (open(2) of a FIFO without a writer blocks; O_NONBLOCK returns at once)
// nor make it read without end (/dev/zero); the type is judged on the
// opened descriptor, so a file swapped after a stat cannot pass.
func readBounded(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, unwrapPath(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (a %s): not read", state.FileKind(fi.Mode()))
	}
	if fi.Size() > maxReportBytes {
		return nil, fmt.Errorf("larger than %d MiB: not a report", maxReportBytes>>20)
	}
	var buf bytes.Buffer
	buf.Grow(int(fi.Size()) + bytes.MinRead)
	// A file that grows while it is read (or a procfs-like file whose size
	// says 0) is still cut at the bound.
	if _, err := buf.ReadFrom(io.LimitReader(f, maxReportBytes+1)); err != nil {
		return nil, fmt.Errorf("read: %w", unwrapPath(err))
	}
	data := buf.Bytes()
	if len(data) > maxReportBytes {
		return nil, fmt.Errorf("larger than %d MiB: not a report", maxReportBytes>>20)
	}
	return data, nil
}

// unwrapPath drops the path from an *os.PathError: the path is printed
// beside the error already.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
