package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// maxReportBytes bounds one file: a report of the largest host is a few MB.
const maxReportBytes = 64 << 20

const summarizeUsage = `usage: rdmadoctor summarize [--format text|json] [--stale DURATION] DIR|FILE...

Reads the JSON reports (--format json) or state files (--state) of many nodes
— every *.json in each DIR, and each FILE named — and prints one view: nodes by
verdict, each check not passing with its nodes, and the outliers: firmware,
PCIe links, port rates, MTUs, kernels, rdmadoctor versions and error-counter
levels that differ from the fleet's majority, and the nodes whose report is
stale beside the newest. A missing, corrupt or foreign file is named and the rest
still summarised. Exit 0 when every file was read, 1 when any could not be
(or none was a report), 2 for a usage error; the fleet's health is in the output.

flags:
`

func cmdSummarize(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("summarize", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	format := fs.String("format", "text", "text, or json (schema "+report.SummarySchema+")")
	stale := fs.Duration("stale", time.Hour, "list the nodes whose report started this long before the newest one (0: none)")
	help := fs.BoolP("help", "h", false, "print this help")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "rdmadoctor summarize: %v\n", err)
		return report.ExitUsage
	}
	if *help {
		fmt.Fprint(stdout, summarizeUsage+fs.FlagUsages())
		return 0
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(stderr, "rdmadoctor summarize: unknown format %q; valid formats: text, json\n", *format)
		return report.ExitUsage
	}
	if *stale < 0 {
		fmt.Fprintf(stderr, "rdmadoctor summarize: --stale %v: want a duration of 0 or more, such as 1h\n", *stale)
		return report.ExitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "rdmadoctor summarize: name a directory of reports or report files (summarize --help)")
		return report.ExitUsage
	}
	reports, problems := readFleet(fs.Args())
	sum := report.Summarize(reports, problems, report.SummaryOptions{StaleAfter: *stale})
	var err error
	if *format == "json" {
		err = report.WriteSummaryJSON(stdout, sum)
	} else {
		err = report.WriteSummaryText(stdout, sum)
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

// readFleet reads every argument: a directory gives its *.json files (not
// its subdirectories), anything else is read as a file. The files are
// decoded on every CPU; the order of the results is the order of the files.
func readFleet(args []string) ([]report.FleetReport, []report.FileProblem) {
	var problems []report.FileProblem
	files := fleetFiles(args, &problems)
	decoded := make([]*report.Report, len(files))
	errs := make([]error, len(files))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(files), 1)) {
		wg.Go(func() {
			for i := range next {
				decoded[i], errs[i] = readReportFile(files[i])
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
		reports = append(reports, report.FleetReport{Path: path, Report: decoded[i]})
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

func readReportFile(path string) (*report.Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() <= maxReportBytes {
		buf.Grow(int(fi.Size()) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(io.LimitReader(f, maxReportBytes+1)); err != nil {
		return nil, fmt.Errorf("read: %w", unwrapPath(err))
	}
	data := buf.Bytes()
	if len(data) > maxReportBytes {
		return nil, fmt.Errorf("larger than %d MiB: not a report", maxReportBytes>>20)
	}
	return report.DecodeReportForSummary(data)
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
