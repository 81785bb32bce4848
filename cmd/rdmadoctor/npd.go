package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/adapter"
	"github.com/rdmadoctor/rdmadoctor/report/state"
)

// node-problem-detector's custom-plugin protocol: exit 0 is OK, 1 a
// problem, anything else (or a killed plugin) Unknown; the message is
// stdout, cut by NPD at max_output_length (80 bytes by default).
const (
	npdOK         = adapter.NPDOK
	npdProblem    = adapter.NPDProblem
	npdUnknown    = adapter.NPDUnknown
	npdMaxMessage = adapter.NPDMaxMessage
)

// npdVerdict is what the plugin prints and exits with.
type npdVerdict struct {
	exit int
	msg  string
}

const npdHelp = `usage: rdmadoctor npd [--state FILE] [--max-age DURATION]
       rdmadoctor npd --run [run flags: --root, --expect, --min-memlock, …]

A node-problem-detector custom plugin. It judges the state's records — each
check's last result — and prints one ASCII line of at most 80 bytes: exit 0
(healthy), 1 (problem: a check failed, e.g. "port.state(19) mlx5_1/1 DOWN …")
or 2 (unknown: a check could not look, a record is older than --max-age or
from the future, or the state is missing, unreadable or corrupt). A check in
error is never a problem: the node is not tainted for what could not be seen.

  --state FILE         the state a run kept with --state (default ` + DefaultStatePath + `)
  --max-age DURATION   a check's record older than this is unknown (default 15m)
  --problem-only       exit 1 for a problem and 0 otherwise, unknown included
                       (the message still says "unknown: …"): for a condition
                       a controller taints on continuously, which must not
                       taint a node for what could not be seen
  --run                judge a level-1 run made now instead of the state file
`

// cmdNPD is `rdmadoctor npd`.
func cmdNPD(args []string, stdout, stderr io.Writer) int {
	var rf flags
	fs := newFlagSet(&rf)
	maxAge := fs.Duration("max-age", 15*time.Minute, "")
	runNow := fs.Bool("run", false, "")
	problemOnly := fs.Bool("problem-only", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stdout, npdHelp)
			return 0
		}
		return npdUsage(stdout, stderr, flagError(err, fs))
	}
	if err := npdCheckFlags(fs, *runNow, *maxAge); err != nil {
		return npdUsage(stdout, stderr, err.Error())
	}
	var v npdVerdict
	if *runNow {
		v = npdRun(fs, stderr)
	} else {
		path := rf.fleet.state
		if path == "" {
			path = DefaultStatePath
		}
		v = npdFromFile(path, time.Now(), *maxAge)
	}
	fmt.Fprintln(stdout, asciiLine(v.msg, npdMaxMessage))
	if *problemOnly {
		return adapter.NPDProblemOnly(v.exit)
	}
	return v.exit
}

// npdUsage reports a bad command line on stdout too, so NPD's condition
// message says what is wrong with the rule's args; the exit is unknown.
func npdUsage(stdout, stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "rdmadoctor npd: %s\n", msg)
	fmt.Fprintln(stdout, asciiLine("unknown: usage: "+msg, npdMaxMessage))
	return npdUnknown
}

// npdRunFixed are run flags npd sets itself (a level-1 JSON report), and
// --version, which is no run.
var npdRunFixed = []string{"level", "format", "output", "repeat", "periodic", "version"}

func npdCheckFlags(fs *pflag.FlagSet, runNow bool, maxAge time.Duration) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if maxAge <= 0 {
		return fmt.Errorf("--max-age %v must be positive", maxAge)
	}
	for _, name := range npdRunFixed {
		if fs.Changed(name) {
			return fmt.Errorf("--%s is not an npd flag: npd --run is a level-1 run judged here", name)
		}
	}
	if runNow && fs.Changed("state") {
		return errors.New("--run judges a run made now, --state a kept one: give one of them")
	}
	if !runNow {
		var extra string
		fs.Visit(func(f *pflag.Flag) {
			if f.Name != "state" && f.Name != "max-age" && f.Name != "problem-only" && extra == "" {
				extra = f.Name
			}
		})
		if extra != "" {
			return fmt.Errorf("--%s applies to a run: add --run", extra)
		}
	}
	return nil
}

// npdRun makes a level-1 run with the run flags given and judges its report.
// Its deadline is 4 s unless --timeout says otherwise: NPD kills a plugin
// after its timeout (5 s by default), which would leave no message at all.
func npdRun(fs *pflag.FlagSet, stderr io.Writer) npdVerdict {
	args := []string{"--level=1", "--format=json"}
	fs.Visit(func(f *pflag.Flag) {
		if f.Name == "run" || f.Name == "max-age" || f.Name == "problem-only" {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				args = append(args, "--"+f.Name+"="+v)
			}
			return
		}
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	if !fs.Changed("timeout") {
		args = append(args, "--timeout=4s")
	}
	var out bytes.Buffer
	code, err := cmdDiagnose(args, &out)
	if err != nil {
		fmt.Fprintf(stderr, "rdmadoctor npd: %v\n", err)
	}
	if code == report.ExitUsage {
		return npdVerdict{npdUnknown, fmt.Sprintf("unknown: usage: %v", err)}
	}
	if code == report.ExitInternal && err != nil && out.Len() == 0 {
		return npdVerdict{npdUnknown, fmt.Sprintf("unknown: run exit %d: %v", code, err)}
	}
	v, derr := judgeRunReport(out.Bytes())
	if derr != nil {
		return npdVerdict{npdUnknown, fmt.Sprintf("unknown: run exit %d: %v", code, firstNonNil(err, derr))}
	}
	if code == report.ExitInternal && v.exit != npdProblem {
		// The run did not finish (its deadline): what it did not reach is
		// unknown, whatever the rest says.
		return npdVerdict{npdUnknown, "unknown: the last run was incomplete (exit 1): " + errText(err)}
	}
	return v
}

func errText(err error) string {
	if err == nil {
		return "no check says why"
	}
	return err.Error()
}

func firstNonNil(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// npdFromFile reads and judges the state file at path as of now: every
// check's last result, one older than maxAge (or from the future) unknown.
func npdFromFile(path string, now time.Time, maxAge time.Duration) npdVerdict {
	st, err := state.Load(path)
	if err != nil {
		// Uncut: the caller cuts the line once, as it prints it.
		return npdVerdict{npdUnknown, "unknown: " + err.Error()}
	}
	exit, msg := adapter.NPD(st.Judge(now, maxAge, st.Policy.Report()))
	return npdVerdict{exit, msg}
}

// judgeRunReport judges a report made now, as a state of one run.
func judgeRunReport(data []byte) (npdVerdict, error) {
	st, err := state.Decode(data)
	if err != nil {
		return npdVerdict{}, err
	}
	exit, msg := adapter.NPD(st.Judge(time.Now(), 0, report.Policy{}))
	return npdVerdict{exit, msg}, nil
}

// asciiLine is the adapters' one-line form (kept for the lock's holder line).
func asciiLine(s string, max int) string { return adapter.ASCIILine(s, max) }
