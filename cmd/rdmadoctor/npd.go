package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// node-problem-detector's custom-plugin protocol: exit 0 is OK, 1 a
// problem, anything else (or a killed plugin) Unknown; the message is
// stdout, cut by NPD at max_output_length (80 bytes by default).
const (
	npdOK      = 0
	npdProblem = 1
	npdUnknown = 2
	// npdMaxMessage is NPD's default max_output_length.
	npdMaxMessage = 80
	// maxStateBytes bounds what npd reads: NPD's container is small, and
	// a state larger than this is not one rdmadoctor wrote.
	maxStateBytes = 16 << 20
	// futureSkew is how far a state's start may lie ahead of this clock
	// before it is called "from the future".
	futureSkew = time.Minute
)

// npdVerdict is what the plugin prints and exits with.
type npdVerdict struct {
	exit int
	msg  string
}

// stateDoc is the part of an rdmadoctor.report/v1 document the adapter
// judges; the inventory is not read, so its shape cannot make a valid
// verdict unknown.
type stateDoc struct {
	Schema     string       `json:"schema"`
	Level      int          `json:"level"`
	Started    time.Time    `json:"started"`
	DurationMS float64      `json:"duration_ms"`
	ExitCode   *int         `json:"exit_code"`
	RootCause  *string      `json:"root_cause"`
	Checks     []stateCheck `json:"checks"`
}

type stateCheck struct {
	ID      string `json:"id"`
	Code    int    `json:"code"`
	Status  string `json:"status"`
	Summary string `json:"summary"`
}

const npdHelp = `usage: rdmadoctor npd [--state FILE] [--max-age DURATION]
       rdmadoctor npd --run [run flags: --root, --expect, --min-memlock, …]

A node-problem-detector custom plugin. It prints one ASCII line of at most
80 bytes and exits 0 (healthy), 1 (problem: the root cause, e.g.
"port.state(19) mlx5_1/1 DOWN …") or 2 (unknown: the state is missing,
unreadable, corrupt, older than --max-age or from the future).

  --state FILE         the JSON report a run kept with --state (default ` + DefaultStatePath + `)
  --max-age DURATION   a state older than this is unknown (default 15m)
  --run                judge a level-1 run made now instead of the state file
`

// cmdNPD is `rdmadoctor npd`.
func cmdNPD(args []string, stdout, stderr io.Writer) int {
	var rf flags
	fs := newFlagSet(&rf)
	maxAge := fs.Duration("max-age", 15*time.Minute, "")
	runNow := fs.Bool("run", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stdout, npdHelp)
			return 0
		}
		return npdUsage(stdout, stderr, err.Error())
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
	return v.exit
}

// npdUsage reports a bad command line on stdout too, so NPD's condition
// message says what is wrong with the rule's args; the exit is unknown.
func npdUsage(stdout, stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "rdmadoctor npd: %s\n", msg)
	fmt.Fprintln(stdout, asciiLine("unknown: usage: "+msg, npdMaxMessage))
	return npdUnknown
}

// npdRunFixed are run flags npd sets itself: a level-1 JSON report.
var npdRunFixed = []string{"level", "format", "output", "repeat", "periodic"}

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
			if f.Name != "state" && f.Name != "max-age" && extra == "" {
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
		if f.Name == "run" || f.Name == "max-age" {
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
	doc, derr := decodeState(out.Bytes())
	if derr != nil {
		return npdVerdict{npdUnknown, fmt.Sprintf("unknown: run exit %d: %v", code, firstNonNil(err, derr))}
	}
	return judgeReport(doc)
}

func firstNonNil(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// npdFromFile reads and judges the state file at path as of now.
func npdFromFile(path string, now time.Time, maxAge time.Duration) npdVerdict {
	data, err := readState(path)
	if err != nil {
		return npdVerdict{npdUnknown, "unknown: " + err.Error()}
	}
	doc, err := decodeState(data)
	if err != nil {
		return npdVerdict{npdUnknown, "unknown: state " + err.Error() + ": " + path}
	}
	if v, stale := judgeAge(doc, now, maxAge); stale {
		return v
	}
	return judgeReport(doc)
}

// readState reads a regular file of at most maxStateBytes. It opens
// without blocking, so a FIFO planted at the path cannot hang the plugin.
func readState(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no state file (no run has kept one): %s", path)
	}
	if err != nil {
		return nil, fmt.Errorf("state unreadable: %v: %s", errnoText(err), path)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("state unreadable: %v: %s", errnoText(err), path)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("state is not a regular file (%v): %s", st.Mode().Type(), path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return nil, fmt.Errorf("state unreadable: %v: %s", errnoText(err), path)
	}
	if len(data) > maxStateBytes {
		return nil, fmt.Errorf("state larger than %d MiB: %s", maxStateBytes>>20, path)
	}
	return data, nil
}

// errnoText is the bare errno of a path error (the caller names the path).
func errnoText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// decodeState parses a report document and refuses one that is not a
// complete rdmadoctor.report/v1 run: truncated or invalid JSON, another
// schema, no start time, no exit code, no checks.
func decodeState(data []byte) (*stateDoc, error) {
	var doc stateDoc
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty")
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not a JSON report (%v)", jsonErrText(err))
	}
	switch {
	case doc.Schema != report.Schema:
		return nil, fmt.Errorf("schema %q, want %q", doc.Schema, report.Schema)
	case doc.Started.IsZero():
		return nil, errors.New("no start time")
	case doc.ExitCode == nil:
		return nil, errors.New("no exit_code")
	case len(doc.Checks) == 0:
		return nil, errors.New("no checks")
	}
	return &doc, nil
}

// jsonErrText keeps a decoder's message short: the offset says where.
func jsonErrText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) && strings.Contains(se.Error(), "unexpected end") {
		return "truncated"
	}
	if errors.As(err, &se) {
		return fmt.Sprintf("%v at byte %d", se, se.Offset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "truncated"
	}
	return err.Error()
}

// judgeAge is unknown for a state from the future or older than maxAge.
// The message names the run's start, not its age, so it stays the same
// from one NPD poll to the next (each change is a write to the API server).
func judgeAge(doc *stateDoc, now time.Time, maxAge time.Duration) (npdVerdict, bool) {
	started := doc.Started.UTC().Format("2006-01-02T15:04:05Z")
	if doc.Started.After(now.Add(futureSkew)) {
		return npdVerdict{npdUnknown, "unknown: state from the future: run started " + started}, true
	}
	if now.Sub(doc.Started) > maxAge {
		return npdVerdict{npdUnknown, fmt.Sprintf("unknown: state stale: run started %s, max age %v", started, maxAge)}, true
	}
	return npdVerdict{}, false
}

// judgeReport maps a report's verdict onto NPD's: healthy, the root cause
// as a problem, or unknown for an incomplete run or a report that does not
// agree with itself.
func judgeReport(doc *stateDoc) npdVerdict {
	code := *doc.ExitCode
	switch {
	case code == report.ExitOK && doc.RootCause == nil:
		return npdVerdict{npdOK, healthyMessage(doc)}
	case code == report.ExitInternal:
		return npdVerdict{npdUnknown, "unknown: the last run was incomplete (exit 1): " + firstUnfinished(doc)}
	case doc.RootCause != nil && code >= 10 && code <= 125:
		for _, c := range doc.Checks {
			if c.ID == *doc.RootCause && c.Code == code && (c.Status == "fail" || c.Status == "error" || c.Status == "warn") {
				return npdVerdict{npdProblem, fmt.Sprintf("%s(%d) %s", c.ID, c.Code, compactSummary(c.Summary))}
			}
		}
	}
	rc := "null"
	if doc.RootCause != nil {
		rc = *doc.RootCause
	}
	return npdVerdict{npdUnknown, fmt.Sprintf("unknown: state inconsistent: exit_code %d, root_cause %s", code, rc)}
}

// healthyMessage is stable while the host stays as it is: no times or
// durations, only the level, the counts and the first warning.
func healthyMessage(doc *stateDoc) string {
	var pass, warn int
	firstWarn := ""
	for _, c := range doc.Checks {
		switch c.Status {
		case "pass":
			pass++
		case "warn":
			warn++
			if firstWarn == "" {
				firstWarn = fmt.Sprintf(" (%s)", c.ID)
			}
		}
	}
	return fmt.Sprintf("ok: level %d, %d pass, %d warn%s", doc.Level, pass, warn, firstWarn)
}

// firstUnfinished names the first check that errored or was cut off.
func firstUnfinished(doc *stateDoc) string {
	for _, c := range doc.Checks {
		if c.Status == "error" || (c.Status == "skip" && strings.Contains(c.Summary, "deadline")) {
			return c.ID + " " + c.Summary
		}
	}
	return "no check says why"
}

var portWords = regexp.MustCompile(`\b(\S+) port (\d+)\b`)

// compactSummary says "mlx5_1/1" for "mlx5_1 port 1": the line is short.
func compactSummary(s string) string { return portWords.ReplaceAllString(s, "$1/$2") }

// transliterations for the characters the reports use; any other
// non-ASCII character becomes '?'.
var transliterations = map[rune]string{
	'—': "-", '–': "-", '→': "->", '←': "<-", '…': "...", '×': "x", 'µ': "u", 'μ': "u",
	'≠': "!=", '≤': "<=", '≥': ">=", '±': "+-", '‘': "'", '’': "'", '“': `"`, '”': `"`, '°': "deg",
}

// asciiLine makes s one line of printable ASCII of at most max bytes:
// known characters transliterated, others '?', control characters and
// runs of blanks one space, cut at a word boundary with "..." when long.
// Being ASCII, the cut can never fall inside a character.
func asciiLine(s string, max int) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if b.Len() > 4*max {
			break // far past the cut: the rest cannot show
		}
		switch {
		case r == ' ' || (r < 0x20) || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u00a0':
			space = b.Len() > 0
			continue
		case r < 0x7f:
			if space {
				b.WriteByte(' ')
				space = false
			}
			b.WriteRune(r)
		default:
			if space {
				b.WriteByte(' ')
				space = false
			}
			if t, ok := transliterations[r]; ok {
				b.WriteString(t)
			} else {
				b.WriteByte('?')
			}
		}
	}
	return cutASCII(b.String(), max)
}

// cutASCII shortens s to max bytes, at the last space when one is near.
func cutASCII(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const ell = "..."
	keep := s[:max-len(ell)]
	if i := strings.LastIndexByte(keep, ' '); i > max/2 {
		keep = keep[:i]
	}
	return keep + ell
}
