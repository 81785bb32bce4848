package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
)

// Every subcommand (and each word below it) answers --help, -h and
// `help COMMAND` with exit 0, the same text on stdout, nothing on stderr.
func TestEveryCommandHelp(t *testing.T) {
	var cmds [][]string
	for _, s := range subcommands {
		cmds = append(cmds, []string{s.name})
		if s.name == "completion" {
			continue // its words are shells, not commands
		}
		for _, w := range s.words {
			cmds = append(cmds, []string{s.name, w})
		}
	}
	for _, c := range cmds {
		name := strings.Join(c, " ")
		code, long, errOut := runCLI(t, append(c, "--help")...)
		if code != 0 || long == "" || errOut != "" {
			t.Errorf("%s --help: exit %d, stdout %d bytes, stderr %q", name, code, len(long), errOut)
			continue
		}
		for _, alt := range [][]string{append(c, "-h"), append([]string{"help"}, c...)} {
			code, out, errOut := runCLI(t, alt...)
			if code != 0 || out != long || errOut != "" {
				t.Errorf("%s: exit %d, stderr %q, stdout differs from %s --help:\n%s", strings.Join(alt, " "), code, errOut, name, out)
			}
		}
	}
}

func TestHelpUnknownCommand(t *testing.T) {
	code, out, errOut := runCLI(t, "help", "lsit")
	want := `rdmadoctor: help: unknown command "lsit"; did you mean list?; valid: list, explain, inventory, snapshot, expect, slurm, npd, ack, summarize, peer, help, version, completion, exit-codes` + "\n"
	if code != report.ExitUsage || out != "" || errOut != want {
		t.Errorf("exit %d, stdout %q, stderr\n%q\nwant\n%q", code, out, errOut, want)
	}
}

const exitCodesTable = `exit codes:
  0       healthy: every check that ran passed (warnings count only with --fail-on warn)
  1       internal error, or the run did not finish (--timeout passed, a report or state could not be written)
  2       usage: a bad subcommand, flag, argument, or file named on the command line
  3       another run holds the --state lock; nothing was checked
  4       unknown: a check could not look; root_cause names it
  10-125  a problem: the root cause's own code (rdmadoctor list; rdmadoctor explain CODE)
  128+N   stopped by signal N (130: SIGINT, 143: SIGTERM); the report is partial
`

// One table: `help exit-codes` prints it, and --help ends with it.
func TestExitCodesTable(t *testing.T) {
	code, out, _ := runCLI(t, "help", "exit-codes")
	want := exitCodesTable + "\nthe verdicts behind them, and what each adapter does with them: docs/verdict.md\n"
	if code != 0 || out != want {
		t.Errorf("help exit-codes: exit %d\n%s", code, out)
	}
	_, usage, _ := runCLI(t, "--help")
	tail := exitCodesTable + "\nrdmadoctor help COMMAND: a command's flags; rdmadoctor help exit-codes: the table above\n"
	if !strings.HasSuffix(usage, tail) {
		t.Errorf("--help does not end with the exit code table:\n%s", usage)
	}
	// The codes a check can have fall in the table's range.
	for _, c := range append(checks.Catalog(), checks.PeerCatalog()...) {
		if c.Code < 10 || c.Code > 125 {
			t.Errorf("%s: code %d outside 10-125", c.ID, c.Code)
		}
	}
}

func TestSuggest(t *testing.T) {
	ids := allCheckIDs()
	for _, c := range []struct {
		word string
		want []string
	}{
		{"port.stat", []string{"port.state"}},
		{"memlock", []string{"limits.memlock"}},
		{"PCI.LINK", []string{"pci.link"}},
		{"probe.ud", []string{"probe.ud"}},
		{"zzzzzz", nil},
		{"", nil},
	} {
		if got := suggest(c.word, ids); !reflect.DeepEqual(got, c.want) {
			t.Errorf("suggest(%q) = %q, want %q", c.word, got, c.want)
		}
	}
	if got, want := suggest("lst", subcommandNames()), []string{"list"}; !reflect.DeepEqual(got, want) {
		t.Errorf("suggest(lst) = %q, want %q", got, want)
	}
}

// Unknown check IDs and subcommands name the nearest ones.
func TestDidYouMeanMessages(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--check", "memlock"}, `rdmadoctor: --check: unknown check "memlock"; did you mean limits.memlock? (rdmadoctor list shows them all)`},
		{[]string{"--skip", "pci.lnk"}, `rdmadoctor: --skip: unknown check "pci.lnk"; did you mean pci.link? (rdmadoctor list shows them all)`},
		{[]string{"explain", "port.stat"}, `rdmadoctor: explain: unknown check "port.stat"; did you mean port.state? (rdmadoctor list shows them all)`},
		{[]string{"explain", "peer.rdma_c"}, `rdmadoctor: explain: unknown check "peer.rdma_c"; did you mean peer.rdma_cm? (rdmadoctor list shows them all)`},
		{[]string{"lisst"}, `rdmadoctor: unknown command "lisst"; did you mean list?; valid: list, explain, inventory, snapshot, expect, slurm, npd, ack, summarize, peer, help, version, completion, or flags only (rdmadoctor help)`},
	} {
		code, out, errOut := runCLI(t, c.args...)
		if code != report.ExitUsage || out != "" || errOut != c.want+"\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr\n%q\nwant\n%q", c.args, code, out, errOut, c.want)
		}
	}
}

func TestListJSON(t *testing.T) {
	code, out, errOut := runCLI(t, "list", "--format", "json")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got []map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	cat, peers := checks.Catalog(), checks.PeerCatalog()
	if len(got) != len(cat)+len(peers) {
		t.Fatalf("%d entries, want %d", len(got), len(cat)+len(peers))
	}
	// Each entry publishes its check's declared findings, in order; the
	// rest of the entry is compared whole below.
	for i, e := range got {
		var ids []string
		for _, f := range e["findings"].([]any) {
			fm := f.(map[string]any)
			ids = append(ids, fm["id"].(string))
			if fm["status"] == "" || fm["when"] == "" || fm["message"] == "" || fm["slots"] == nil {
				t.Errorf("entry %d: finding %v lacks a field", i, fm)
			}
		}
		var want []string
		for _, f := range checks.Findings(e["id"].(string)) {
			want = append(want, f.ID)
		}
		if !reflect.DeepEqual(ids, want) {
			t.Errorf("entry %d findings %v, want %v", i, ids, want)
		}
		delete(e, "findings")
	}
	first := map[string]any{"id": "pci.device", "code": 10.0, "level": 1.0,
		"title": "an RDMA-capable PCI function is present with its driver bound", "needs": []any{}}
	if !reflect.DeepEqual(got[0], first) {
		t.Errorf("first entry %v, want %v", got[0], first)
	}
	for i, c := range append(cat, peers...) {
		level := any(float64(c.Level))
		if i >= len(cat) {
			level = "peer"
		}
		needs := []any{}
		for _, n := range c.Needs {
			needs = append(needs, n)
		}
		want := map[string]any{"id": c.ID, "code": float64(c.Code), "level": level, "title": c.Title, "needs": needs}
		if !reflect.DeepEqual(got[i], want) {
			t.Errorf("entry %d: %v, want %v", i, got[i], want)
		}
	}
	if code, _, errOut := runCLI(t, "list", "--format", "yaml"); code != report.ExitUsage ||
		errOut != "rdmadoctor list: --format \"yaml\": unknown format; valid: text, json\n" {
		t.Errorf("list --format yaml: exit %d, %q", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99.1", Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "f62c69c0123456789abcdef0123456789abcdef0"}, {Key: "vcs.modified", Value: "true"},
	}}
	v := withBuildSettings(versionInfo{Version: "1.2.3", Go: "go0"}, bi)
	want := versionInfo{Version: "1.2.3", Commit: "f62c69c0123456789abcdef0123456789abcdef0", Modified: true, Go: "go1.99.1"}
	if v != want {
		t.Fatalf("got %+v, want %+v", v, want)
	}
	for _, c := range []struct {
		lib, file, says string
	}{
		{"/usr/lib64/libibverbs.so.1", "/usr/lib64/libibverbs.so.1.14.56.0", "/usr/lib64/libibverbs.so.1 -> /usr/lib64/libibverbs.so.1.14.56.0"},
		{"", "", "not found (libibverbs.install says why: rdmadoctor --check libibverbs.install)"},
	} {
		v.LibPath, v.LibFile = c.lib, c.file
		var b strings.Builder
		writeVersion(&b, v)
		text := "rdmadoctor 1.2.3\ncommit      f62c69c0123456789abcdef0123456789abcdef0 (modified: built with uncommitted changes)\ngo          go1.99.1\nlibibverbs  " + c.says + "\n"
		if b.String() != text {
			t.Errorf("got\n%s\nwant\n%s", b.String(), text)
		}
	}
	code, out, _ := runCLI(t, "version")
	_, flagOut, _ := runCLI(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "rdmadoctor "+version+"\n") || flagOut != out {
		t.Errorf("version: exit %d\n%s\n--version:\n%s", code, out, flagOut)
	}
}

// peer --help names the range of the two-host checks' codes as the catalog
// has them (it once said 40-47 when 48 existed).
func TestPeerHelpNamesEveryTwoHostCheck(t *testing.T) {
	_, out, _ := runCLI(t, "peer", "--help")
	m := regexp.MustCompile(`checks (\d+)-(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("peer --help names no range of checks:\n%s", out)
	}
	lo, hi := 1000, 0
	for _, c := range checks.PeerCatalog() {
		lo, hi = min(lo, c.Code), max(hi, c.Code)
	}
	if m[1] != fmt.Sprint(lo) || m[2] != fmt.Sprint(hi) {
		t.Errorf("peer --help says checks %s-%s; the two-host checks are %d-%d", m[1], m[2], lo, hi)
	}
}

// A mistyped flag names the nearest one, in every command; a flag given
// without its value says what the value is.
func TestFlagErrorsNameTheFlagAndWhatItWants(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--levle", "2"}, "rdmadoctor: unknown flag --levle; did you mean --level?\n"},
		{[]string{"--check"}, "rdmadoctor: --check needs a value (strings): run only these checks (IDs or codes, comma-separated) and their prerequisites; repeatable\n"},
		{[]string{"-o"}, "rdmadoctor: -o (--output) needs a value (string): write the report to this file"},
		{[]string{"--format", "jsno"}, "rdmadoctor: --format \"jsno\": unknown format; valid formats: text, json, prometheus; did you mean json?\n"},
		{[]string{"list", "--fromat", "json"}, "rdmadoctor list: unknown flag --fromat; did you mean --format? (list --help)\n"},
		{[]string{"inventory", "--format"}, "rdmadoctor inventory: --format needs a value (string): text, or json"},
		{[]string{"snapshot", "-O", "x"}, "rdmadoctor snapshot: unknown flag -O; did you mean -o?\n"},
		{[]string{"expect", "--from-hosts"}, "rdmadoctor expect: unknown flag --from-hosts; did you mean --from-host?\n"},
		{[]string{"slurm", "healthcheck", "--dryrun"}, "rdmadoctor slurm: unknown flag --dryrun; did you mean --dry-run?\n"},
		{[]string{"peer", "test", "--iteratons", "5", "h"}, "rdmadoctor peer test: unknown flag --iteratons; did you mean --iterations?\n"},
		{[]string{"summarize", "--stale-aftr", "1h", "x"}, "rdmadoctor summarize: unknown flag --stale-aftr; did you mean --stale-after?"},
		{[]string{"ack", "counters.errors", "--reson", "x"}, "rdmadoctor ack: unknown flag --reson; did you mean --reason?\n"},
		{[]string{"peer", "test", "h", "--concurrency", "0"}, "rdmadoctor peer test: --concurrency 0: want a value above 0 (pairs tested at once)\n"},
		{[]string{"peer", "serve", "--listen", "127.0.0.1:18516", "--insecure-no-token", "--io-timeout", "-1s"}, "rdmadoctor peer serve: --io-timeout -1s: want a value above 0"},
		{[]string{"expect", "--from-host", "--timeout", "0s"}, "rdmadoctor expect: --timeout 0s: want a deadline above 0, such as 1m\n"},
		{[]string{"peer"}, "rdmadoctor peer: name serve or test\nusage:\n"}, // on stderr, not stdout
		{[]string{"peer", "tset"}, "rdmadoctor peer: unknown command \"tset\"; did you mean test?; valid: serve, test\n"},
		{[]string{"slurm", "healtcheck"}, "rdmadoctor slurm: unknown slurm command \"healtcheck\"; did you mean healthcheck?; valid: healthcheck, prolog\n"},
	} {
		code, out, errOut := runCLI(t, c.args...)
		if code != report.ExitUsage || out != "" && c.args[0] != "ack" || !strings.HasPrefix(errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr\n%q\nwant it to start\n%q", c.args, code, out, errOut, c.want)
		}
	}
}
