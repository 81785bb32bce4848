package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/adapter"
	"github.com/rdmadoctor/rdmadoctor/report/state"
)

// keptState runs a fixture at level 1 with --state and returns the state's
// path and bytes.
func keptState(t *testing.T, fixture string) (string, []byte) {
	t.Helper()
	state := filepath.Join(t.TempDir(), "state.json")
	code, _, stderr := runCLI(t, "--root", filepath.Join(hostsDir, fixture), "--level", "1", "--format", "json", "--state", state)
	if code == 1 || code == 2 {
		t.Fatalf("%s: exit %d: %s", fixture, code, stderr)
	}
	data, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	return state, data
}

// checkNPDLine asserts NPD's output contract: one line, printable ASCII,
// at most 80 bytes before the newline.
func checkNPDLine(t *testing.T, out string) {
	t.Helper()
	if !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("not one line: %q", out)
	}
	line := strings.TrimSuffix(out, "\n")
	if len(line) > npdMaxMessage || line == "" {
		t.Errorf("%d bytes, want 1..%d: %q", len(line), npdMaxMessage, line)
	}
	for i := 0; i < len(line); i++ {
		if line[i] < 0x20 || line[i] > 0x7e {
			t.Errorf("byte %d of %q is not printable ASCII", i, line)
			break
		}
	}
}

func npdCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	code, out, _ := runCLI(t, append([]string{"npd"}, args...)...)
	checkNPDLine(t, out)
	return code, out
}

func TestNPDHealthyAndPortDown(t *testing.T) {
	ok, _ := keptState(t, "cx5-roce-healthy")
	if code, out := npdCLI(t, "--state", ok); code != npdOK || !strings.HasPrefix(out, "ok: level 1, 13 pass") {
		t.Errorf("healthy: exit %d %q", code, out)
	}
	bad, _ := keptState(t, "port-down")
	code, out := npdCLI(t, "--state", bad)
	if code != npdProblem || !strings.HasPrefix(out, "port.state/admin-down(19) mlx5_1/1 DOWN") {
		t.Errorf("port-down: exit %d %q, want 1 and port.state/admin-down(19) mlx5_1/1 DOWN", code, out)
	}
	// The message is the same on every poll: NPD writes each change.
	if _, again := npdCLI(t, "--state", bad); again != out {
		t.Errorf("message changed between two reads: %q, %q", out, again)
	}
}

func TestNPDRunJudgesALevel1Run(t *testing.T) {
	code, out := npdCLI(t, "--run", "--root", filepath.Join(hostsDir, "port-down"))
	if code != npdProblem || !strings.HasPrefix(out, "port.state/admin-down(19) ") {
		t.Errorf("--run port-down: exit %d %q", code, out)
	}
	code, out = npdCLI(t, "--run", "--root", filepath.Join(hostsDir, "cx5-roce-healthy"), "--check", "port.state", "--check", "roce.config")
	if code != npdOK {
		t.Errorf("--run healthy with --check: exit %d %q", code, out)
	}
}

func TestNPDUnknown(t *testing.T) {
	bad, data := keptState(t, "port-down")
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// An earlier version's state: the last run's report, as it was kept.
	var kept struct {
		Last map[string]any `json:"last_run"`
	}
	json.Unmarshal(data, &kept)
	doc := kept.Last
	withStarted := func(ts time.Time) []byte {
		doc["started"] = ts.UTC().Format(time.RFC3339Nano)
		b, _ := json.Marshal(doc)
		return b
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	huge := make([]byte, state.MaxBytes+10)
	for i := range huge {
		huge[i] = ' '
	}
	cases := []struct {
		name, path, want string
		args             []string
	}{
		{"missing", filepath.Join(dir, "missing.json"), "no state", nil},
		{"truncated", write("trunc.json", data[:300]), "truncated", nil},
		{"empty", write("empty.json", nil), "empty", nil},
		{"not json", write("junk.json", []byte("\x00\xff<html>")), "not JSON", nil},
		{"newer schema", write("v9.json", []byte(`{"schema":"rdmadoctor.state/v9"}`)), "not one this version reads", nil},
		{"other schema", write("other.json", []byte(`{"schema":"x/v1","started":"2026-01-01T00:00:00Z","exit_code":0,"checks":[{}]}`)), "schema", nil},
		{"no checks", write("nochecks.json", []byte(`{"schema":"rdmadoctor.report/v1","started":"2026-01-01T00:00:00Z","exit_code":0,"checks":[]}`)), "no check has been recorded", nil},
		{"stale", write("stale.json", withStarted(time.Now().Add(-2*time.Hour))), "rdmadoctor.state/stale(10) older than the max age 15m0s", nil},
		{"stale by --max-age", bad, "rdmadoctor.state/stale(10) older than the max age 1ns", []string{"--max-age", "1ns"}},
		{"future", write("future.json", withStarted(time.Now().Add(time.Hour))), "rdmadoctor.state/clock-back(10) judged at", nil},
		{"a directory", dir, "not a regular file", nil},
		{"a FIFO", fifo, "not a regular file", nil},
		{"huge", write("huge.json", huge), "larger than", nil},
	}
	for _, tc := range cases {
		start := time.Now()
		code, out := npdCLI(t, append([]string{"--state", tc.path}, tc.args...)...)
		if code != npdUnknown || !strings.HasPrefix(out, "unknown: ") || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d %q, want 2 and %q", tc.name, code, out, tc.want)
		}
		if time.Since(start) > 3*time.Second {
			t.Errorf("%s took %v", tc.name, time.Since(start))
		}
	}
}

// Hostile strings in a state: non-ASCII, control characters, escapes,
// a megabyte of summary — the line stays one printable 80-byte line.
func TestNPDHostileState(t *testing.T) {
	now := time.Now().UTC().Format(time.RFC3339)
	for name, summary := range map[string]string{
		"non-ASCII": "mlx5_1 port 1 DOWN — ✗ 端口 µs × → ≠ \u202e\u200b",
		"control":   "a\nb\rc\x1b[31mred\x00\x07 tab\there",
		"huge":      strings.Repeat("x", 1<<20),
		"invalid":   "bad \xff\xfe utf-8",
	} {
		doc := map[string]any{
			"schema": "rdmadoctor.report/v1", "started": now, "level": 1, "exit_code": 19, "root_cause": "port.state",
			"checks": []map[string]any{{"id": "port.state", "code": 19, "status": "fail", "summary": summary}},
		}
		b, _ := json.Marshal(doc)
		p := filepath.Join(t.TempDir(), "s.json")
		os.WriteFile(p, b, 0o644)
		code, out := npdCLI(t, "--state", p)
		if code != npdProblem || !strings.HasPrefix(out, "port.state(19) ") {
			t.Errorf("%s: exit %d %q", name, code, out)
		}
	}
}

func TestNPDUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--level", "2"},
		{"--root", "/"},
		{"--run", "--state", "x"},
		{"--run", "--version"}, // once judged the version line as a state: "not JSON"
		{"--max-age", "0s"},
		{"--bogus"},
		{"extra"},
	} {
		code, out := npdCLI(t, args...)
		if code != npdUnknown || !strings.HasPrefix(out, "unknown: usage: ") {
			t.Errorf("%v: exit %d %q, want 2 and a usage message", args, code, out)
		}
	}
	code, out, _ := runCLI(t, "npd", "--help")
	if code != 0 || !strings.Contains(out, "--max-age") {
		t.Errorf("--help: exit %d %q", code, out)
	}
}

func TestASCIILine(t *testing.T) {
	for in, want := range map[string]string{
		"a — b":                   "a - b",
		"  lead\n\ttrail  ":       "lead trail",
		"x\x00y":                  "x y",
		"é":                       "?",
		strings.Repeat("ab ", 40): strings.TrimSpace(strings.Repeat("ab ", 25)) + "...",
	} {
		if got := asciiLine(in, 80); got != want {
			t.Errorf("asciiLine(%q) = %q, want %q", in, got, want)
		}
	}
	if got := asciiLine(strings.Repeat("y", 200), 80); len(got) != 80 || !strings.HasSuffix(got, "...") {
		t.Errorf("a long word: %q", got)
	}
}

// FuzzNPDState: whatever the state holds, the adapter neither panics nor
// prints anything but one printable line of at most 80 bytes, and exits
// 0, 1 or 2 — 0 only for a report that says healthy.
func FuzzNPDState(f *testing.F) {
	for _, fx := range []string{"cx5-roce-healthy", "port-down"} {
		data, err := os.ReadFile(filepath.Join(goldenDir, fx+".json"))
		if err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"schema":"rdmadoctor.report/v1","started":"2026-01-01T00:00:00Z","exit_code":19,"root_cause":"port.state","checks":[{"id":"port.state","code":19,"status":"fail","summary":"\u00e9\n"}]}`))
	f.Add([]byte(`{"schema":"rdmadoctor.report/v1","started":"2026-01-01T00:00:00Z","exit_code":0,"root_cause":null,"checks":[{"id":"a","status":"pass"}]}`))
	f.Add([]byte(`[`))
	now, _ := time.Parse(time.RFC3339, "2026-01-01T00:05:00Z")
	f.Fuzz(func(t *testing.T, data []byte) {
		var v npdVerdict
		if st, err := state.Decode(data); err != nil {
			v = npdVerdict{npdUnknown, "unknown: " + err.Error()}
		} else {
			j := st.Judge(now, 15*time.Minute, st.Policy.Report())
			v.exit, v.msg = adapter.NPD(j)
			if v.exit == npdOK && j.Verdict != report.Healthy {
				t.Errorf("healthy exit for verdict %s", j.Verdict)
			}
		}
		if v.exit < 0 || v.exit > 2 {
			t.Errorf("exit %d", v.exit)
		}
		line := asciiLine(v.msg, npdMaxMessage)
		if len(line) > npdMaxMessage || !utf8.ValidString(line) {
			t.Errorf("line %q", line)
		}
		for i := 0; i < len(line); i++ {
			if line[i] < 0x20 || line[i] > 0x7e {
				t.Fatalf("non-printable byte in %q", line)
			}
		}
	})
}

// withCheckStatus returns a kept state with one check's record set to
// status: a check in error in an otherwise healthy state is the unknown
// verdict and nothing else. The record's findings and lead spoke of the
// status it had, so they go: it reads as a record without findings.
func withCheckStatus(t *testing.T, data []byte, id, status string) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	checks, _ := doc["checks"].([]any)
	var found bool
	for _, c := range checks {
		if rec, _ := c.(map[string]any); rec["id"] == id {
			rec["status"], found = status, true
			delete(rec, "findings")
			delete(rec, "lead")
		}
	}
	if !found {
		t.Fatalf("the state keeps no record of %s", id)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The shipped NPD rules' arguments are ones the adapter accepts, and give
// NPD's exit codes on real states: RDMAProblem healthy 0, problem 1,
// unknown 2 (Unknown, which keeps a new node's rdma-proven taint);
// RDMAFault 0, 1, 0 (the rdma-fault taint is never put on for unknown).
func TestShippedNPDRuleArgs(t *testing.T) {
	data, err := os.ReadFile("../../deploy/kubernetes/npd/rdmadoctor-monitor.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Rules []struct {
			Condition string   `json:"condition"`
			Args      []string `json:"args"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("monitor config: %v", err)
	}
	want := map[string][3]int{ // healthy, problem, unknown
		"RDMAProblem": {npdOK, npdProblem, npdUnknown},
		"RDMAFault":   {npdOK, npdProblem, npdOK},
	}
	if len(cfg.Rules) != len(want) {
		t.Fatalf("%d rules in the monitor config, want one for each of RDMAProblem and RDMAFault", len(cfg.Rules))
	}
	healthy, healthyData := keptState(t, "cx5-roce-healthy")
	problem, _ := keptState(t, "port-down")
	// Only errors: the healthy state with kernel.version's record in error.
	unknown := filepath.Join(t.TempDir(), "error.json")
	if err := os.WriteFile(unknown, withCheckStatus(t, healthyData, "kernel.version", "error"), 0o600); err != nil {
		t.Fatal(err)
	}
	states := [3]string{healthy, problem, unknown}
	names := [3]string{"healthy", "port down", "only errors"}
	prefixes := [3]string{"ok: ", "port.state/admin-down(19) ", "unknown: kernel.version(12) "}
	seen := map[string]bool{}
	for _, rule := range cfg.Rules {
		codes, ok := want[rule.Condition]
		if !ok || seen[rule.Condition] || len(rule.Args) == 0 {
			t.Fatalf("rule for %q (args %q): want one rule each for RDMAProblem and RDMAFault", rule.Condition, rule.Args)
		}
		seen[rule.Condition] = true
		for i, st := range states {
			var args []string
			for _, a := range rule.Args {
				if strings.HasPrefix(a, "--state=") {
					a = "--state=" + st
				}
				args = append(args, a)
			}
			if slices.Equal(args, rule.Args) {
				t.Fatalf("%s: rule args %q name no --state=", rule.Condition, rule.Args)
			}
			code, out, errOut := runCLI(t, args...)
			checkNPDLine(t, out)
			// The message says what was judged, whatever the exit.
			if code != codes[i] || !strings.HasPrefix(out, prefixes[i]) {
				t.Errorf("%s on %s: rule args %q: exit %d %q %s, want %d %q", rule.Condition, names[i], args, code, out, errOut, codes[i], prefixes[i])
			}
		}
	}
}

// At the shipped path, the messages that name the state keep it whole:
// node-problem-detector cuts at 80 bytes, and the path says which file the
// plugin looked at (seen against the real NPD in fleettest).
func TestNPDMessagesKeepTheDefaultPath(t *testing.T) {
	dir := t.TempDir()
	_, data := keptState(t, "cx5-roce-healthy")
	for name, content := range map[string][]byte{"missing": nil, "truncated": data[:300], "empty": {}} {
		p := filepath.Join(dir, name+".json")
		if content != nil {
			if err := os.WriteFile(p, content, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		v := npdFromFile(p, time.Now(), 15*time.Minute)
		msg := strings.ReplaceAll(v.msg, p, DefaultStatePath)
		if line := asciiLine(msg, npdMaxMessage); line != msg || !strings.HasSuffix(msg, DefaultStatePath) {
			t.Errorf("%s at %s: %q is cut to %q", name, DefaultStatePath, msg, line)
		}
	}
}

// --problem-only: a condition a controller taints on continuously is True
// only for a problem; unknown (a check in error, a missing state) is False
// with its message still saying "unknown".
func TestNPDProblemOnly(t *testing.T) {
	bad, _ := keptState(t, "port-down")
	ok, _ := keptState(t, "cx5-roce-healthy")
	missing := filepath.Join(t.TempDir(), "none.json")
	for _, c := range []struct {
		state string
		exit  int
		msg   string
	}{{bad, npdProblem, "port.state/admin-down(19) "}, {ok, npdOK, "ok: "}, {missing, npdOK, "unknown: no state file"}} {
		code, out := npdCLI(t, "--state", c.state, "--problem-only")
		if code != c.exit || !strings.HasPrefix(out, c.msg) {
			t.Errorf("%s: exit %d %q, want %d %q", c.state, code, out, c.exit, c.msg)
		}
	}
	if code, out := npdCLI(t, "--problem-only", "--bogus"); code != npdUnknown || !strings.HasPrefix(out, "unknown: usage") {
		t.Errorf("usage under --problem-only: exit %d %q", code, out)
	}
}
