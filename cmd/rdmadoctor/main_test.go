package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"bytes"
	"encoding/json"
	"flag"
	"github.com/rdmadoctor/rdmadoctor/checks"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/rdmadoctor/rdmadoctor/report"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata/golden")

const (
	hostsDir  = "../../testdata/hosts"
	goldenDir = "../../testdata/golden"
)

func runCLI(t testing.TB, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func compileSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(report.JSONSchema))
	if err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("report.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("report.schema.json")
	if err != nil {
		t.Fatalf("compile schema: %v", err)
	}
	return s
}

// normalizeJSON fixes the fields that differ between runs (time, durations,
// the path the fixture was read from) so a golden report is stable.
func normalizeJSON(t testing.TB, raw, root string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, raw)
	}
	m["started"] = "2026-01-01T00:00:00Z"
	m["duration_ms"] = 0
	m["version"] = "golden"
	if h, ok := m["host"].(map[string]any); ok {
		h["root"] = root
	}
	if cs, ok := m["checks"].([]any); ok {
		for _, c := range cs {
			c.(map[string]any)["duration_ms"] = 0
		}
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s missing: run `go test ./cmd/rdmadoctor -update` (%v)", name, err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
			i++
		}
		line := func(ls []string) string {
			if i < len(ls) {
				return ls[i]
			}
			return "<end>"
		}
		t.Errorf("%s differs from the golden report at line %d:\n  got:  %s\n  want: %s\nif the change is intended run `go test ./cmd/rdmadoctor -update` and review the diff", name, i+1, line(gl), line(wl))
	}
}

// TestGoldenReports renders every fixture at level 1 as JSON and text,
// validates the JSON against the published schema and compares both with
// the golden files.
func TestGoldenReports(t *testing.T) {
	t.Setenv("COLUMNS", "100") // the report's default width, whatever the shell exports
	schema := compileSchema(t)
	for _, name := range allFixtures(t) {
		t.Run(name, func(t *testing.T) {
			root := filepath.Join(hostsDir, name)
			code, out, errOut := runCLI(t, "--root", root, "--level", "1", "--format", "json")
			if code == report.ExitUsage || code == report.ExitInternal {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			norm := normalizeJSON(t, out, "testdata/hosts/"+name)
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(norm))
			if err != nil {
				t.Fatal(err)
			}
			if err := schema.Validate(inst); err != nil {
				t.Fatalf("report does not match the schema: %v", err)
			}
			var rep report.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			if rep.ExitCode != code {
				t.Errorf("JSON exit_code %d, process exit %d", rep.ExitCode, code)
			}
			checkGolden(t, name+".json", norm)

			code2, text, _ := runAtRepoRoot(t, "--root", "testdata/hosts/"+name, "--level", "1", "--no-color")
			if code2 != code {
				t.Errorf("text exit %d, json exit %d", code2, code)
			}
			text = strings.Replace(text, "rdmadoctor "+version, "rdmadoctor golden", 1)
			checkGolden(t, name+".txt", []byte(text))
		})
	}
}

// TestFoundationFixtures pins the exit code and root cause of the named
// foundation fixtures.
func TestFoundationFixtures(t *testing.T) {
	cases := []struct {
		fixture   string
		args      []string
		code      int
		rootCause string
		contains  string
	}{
		{"cx5-roce-healthy", nil, 0, "", ""},
		{"cx6-ib-healthy", nil, 0, "", ""},
		{"rxe-softroce", nil, 0, "", "only software RDMA"},
		{"rxe-softroce", []string{"--fail-on", "warn"}, 10, "pci.device", "only software RDMA"},
		{"no-rdma-nic", nil, 10, "pci.device", "blocked by pci.device"},
		{"mlx5-ib-module-missing", nil, 13, "kernel.modules", "modprobe -a mlx5_ib"},
		{"kernel-too-old", nil, 12, "kernel.version", "4.15.0-213-generic is older than 4.18"},
	}
	for _, c := range cases {
		t.Run(c.fixture+strings.Join(c.args, ""), func(t *testing.T) {
			args := append([]string{"--root", filepath.Join(hostsDir, c.fixture), "--level", "1", "--format", "json"}, c.args...)
			code, out, errOut := runCLI(t, args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, c.code, errOut)
			}
			var rep report.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			got := ""
			if rep.RootCause != nil {
				got = *rep.RootCause
			}
			if got != c.rootCause {
				t.Errorf("root_cause %q, want %q", got, c.rootCause)
			}
			if c.contains != "" && !strings.Contains(out, c.contains) {
				t.Errorf("report does not say %q", c.contains)
			}
			for _, ch := range rep.Checks {
				if ch.Status == "" || ch.Summary == "" {
					t.Errorf("check %s has no status or summary", ch.ID)
				}
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		says string
	}{
		{[]string{"--bogus-flag"}, "--bogus-flag"},
		{[]string{"--level", "3"}, "valid levels: 1, 2"},
		{[]string{"--level", "x"}, "--level"},
		{[]string{"--format", "xml"}, "valid formats: text, json, prometheus"},
		{[]string{"--check", "no.such.check"}, "valid checks: pci.device"},
		{[]string{"--fail-on", "maybe"}, "valid: fail, warn"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"explain", "nope"}, "unknown check"},
		{[]string{"--min-memlock", "lots"}, "--min-memlock"},
		{[]string{"--level", "1", "--check", "verbs.resources"}, "add --level 2"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, c.args...)
			if code != report.ExitUsage {
				t.Fatalf("exit %d, want 2", code)
			}
			if out != "" {
				t.Errorf("printed on stdout: %q", out)
			}
			if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.says) {
				t.Errorf("stderr %q: want one line that says %q", errOut, c.says)
			}
		})
	}
}

func TestListAndExplain(t *testing.T) {
	code, out, _ := runCLI(t, "list")
	if code != 0 || !strings.Contains(out, "pci.device") || !strings.Contains(out, "kernel.modules") {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	for _, arg := range []string{"13", "kernel.modules"} {
		code, out, _ = runCLI(t, "explain", arg)
		if code != 0 || !strings.Contains(out, "mlx5_ib") || !strings.Contains(out, "fix:") {
			t.Fatalf("explain %s: exit %d\n%s", arg, code, out)
		}
	}
	code, out, _ = runCLI(t, "--help")
	if code != 0 || !strings.Contains(out, "rdmadoctor explain") || !strings.Contains(out, "--probe-timeout") {
		t.Fatalf("--help: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "rdmadoctor ") {
		t.Fatalf("--version: exit %d %q", code, out)
	}
}

// TestCheckSelection: --check runs the named check and its prerequisites only.
func TestCheckSelection(t *testing.T) {
	code, out, _ := runCLI(t, "--root", filepath.Join(hostsDir, "mlx5-ib-module-missing"), "--level", "1", "--format", "json", "--check", "kernel.modules")
	if code != 13 {
		t.Fatalf("exit %d", code)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range rep.Checks {
		ids = append(ids, c.ID)
	}
	if strings.Join(ids, ",") != "pci.device,kernel.modules" {
		t.Errorf("ran %v, want pci.device,kernel.modules", ids)
	}
}

// TestBadRoots: a root that is missing, a file, garbage or hostile gives a
// clear message with the path or per-check errors — never a panic, never 0.
func TestBadRoots(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "afile")
	os.WriteFile(file, nil, 0o644)
	garbage := filepath.Join(tmp, "garbage")
	os.MkdirAll(filepath.Join(garbage, "sys/class/infiniband/x"), 0o755)
	os.MkdirAll(filepath.Join(garbage, "proc"), 0o755)
	os.WriteFile(filepath.Join(garbage, "proc/modules"), bytes.Repeat([]byte{0xff, 0x00, '\n', 'x'}, 1024), 0o644)
	os.WriteFile(filepath.Join(garbage, "sys/class/infiniband/x/node_type"), []byte("junk\n"), 0o644)
	hostile := filepath.Join(tmp, "hostile")
	os.MkdirAll(filepath.Join(hostile, "proc/sys/kernel"), 0o755)
	os.Symlink("/etc/hostname", filepath.Join(hostile, "proc/sys/kernel/osrelease"))
	os.Symlink("../../../../etc", filepath.Join(hostile, "proc/modules"))
	badFacts := filepath.Join(tmp, "badfacts")
	os.MkdirAll(badFacts, 0o755)
	os.WriteFile(filepath.Join(badFacts, "rdmadoctor.facts.json"), []byte("{not json"), 0o644)

	cases := []struct {
		root string
		says string
	}{
		{filepath.Join(tmp, "missing"), "no such file"},
		{file, "not a snapshot archive"},
		{garbage, "could not list PCI functions"},
		{hostile, "symlink leads outside the root"},
		{badFacts, "rdmadoctor.facts.json"},
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.root), func(t *testing.T) {
			code, out, errOut := runCLI(t, "--root", c.root, "--level", "1")
			if code == 0 {
				t.Fatalf("exit 0 on a bad root\n%s", out)
			}
			if !strings.Contains(out+errOut, c.says) {
				t.Errorf("output does not say %q:\n%s%s", c.says, out, errOut)
			}
			if strings.Contains(out+errOut, "goroutine ") {
				t.Errorf("stack trace printed")
			}
		})
	}
}

// TestLiveWithoutRDMA runs against this machine when it has no RDMA device:
// the answer must be exit 10 and one clear sentence.
func TestLiveWithoutRDMA(t *testing.T) {
	if names, _ := os.ReadDir("/sys/class/infiniband"); len(names) > 0 {
		t.Skip("this machine has RDMA devices")
	}
	code, out, errOut := runCLI(t, "--level", "1", "--no-color")
	if code != 10 {
		t.Fatalf("exit %d, want 10\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "no RDMA-capable PCI function") {
		t.Errorf("report does not say why:\n%s", out)
	}
}

func BenchmarkLevel1Healthy(b *testing.B) {
	root := filepath.Join(hostsDir, "cx5-roce-healthy")
	b.ReportAllocs()
	for b.Loop() {
		var o, e bytes.Buffer
		if code := run([]string{"--root", root, "--level", "1", "--format", "json"}, &o, &e); code != 0 {
			b.Fatalf("exit %d: %s", code, e.String())
		}
	}
}

// TestDocsCatalog keeps the catalog table and the flag table of
// docs/commands.md, and the two-host catalog of docs/peer.md, true to the
// code.
func TestDocsCatalog(t *testing.T) {
	commands := readDoc(t, "docs/commands.md")
	for _, cat := range []struct {
		file, text string
		marker     string
		checks     []*checks.Check
		level      func(*checks.Check) string
	}{
		{"docs/commands.md", commands, "catalog", checks.Catalog(), func(c *checks.Check) string { return fmt.Sprint(c.Level) }},
		{"docs/peer.md", readDoc(t, "docs/peer.md"), "peer-catalog", checks.PeerCatalog(), func(*checks.Check) string { return "peer" }},
	} {
		start, end := strings.Index(cat.text, "<!-- "+cat.marker+":start"), strings.Index(cat.text, "<!-- "+cat.marker+":end")
		if start < 0 || end < start {
			t.Fatalf("%s has no %s markers", cat.file, cat.marker)
		}
		var rows []string
		for _, l := range strings.Split(cat.text[start:end], "\n") {
			if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| code") {
				f := strings.Split(l, "|")
				rows = append(rows, strings.TrimSpace(f[1])+" "+strings.Trim(strings.TrimSpace(f[2]), "`")+" "+strings.TrimSpace(f[3]))
			}
		}
		var want []string
		for _, c := range cat.checks {
			want = append(want, fmt.Sprintf("%d %s %s", c.Code, c.ID, cat.level(c)))
		}
		if strings.Join(rows, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s %s:\n%s\nwant (rdmadoctor list):\n%s", cat.file, cat.marker, strings.Join(rows, "\n"), strings.Join(want, "\n"))
		}
	}
	fs := newFlagSet(&flags{})
	fs.VisitAll(func(f *pflag.Flag) {
		if !strings.Contains(commands, "`--"+f.Name) {
			t.Errorf("docs/commands.md does not document --%s", f.Name)
		}
	})
}

// TestRunDeadline: checks the run's --timeout cut off are skipped, not
// blamed, and the partial report exits 1 — never 0, never a check's code.
func TestRunDeadline(t *testing.T) {
	code, out, errOut := runCLI(t, "--root", filepath.Join(hostsDir, "cx5-roce-healthy"), "--level", "1", "--timeout", "1ns", "--format", "json")
	if code != report.ExitInternal || !strings.Contains(errOut, "partial") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ExitCode != code || rep.RootCause != nil || rep.Summary.Skip != len(rep.Checks) {
		t.Errorf("exit_code %d root %v summary %+v", rep.ExitCode, rep.RootCause, rep.Summary)
	}
}

// TestReadmeSampleReport keeps README's sample report equal to the golden
// text report of the same fixture.
func TestReadmeSampleReport(t *testing.T) {
	readme := readDoc(t, "README.md")
	gold, err := os.ReadFile(filepath.Join(goldenDir, "port-down.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := "$ rdmadoctor --root testdata/hosts/port-down --level 1\n" +
		strings.Replace(strings.TrimRight(string(gold), "\n"), "rdmadoctor golden", "rdmadoctor "+version, 1) + "\n```"
	if !strings.Contains(readme, want) {
		t.Errorf("README's sample report differs from testdata/golden/port-down.txt; paste it again")
	}
}
