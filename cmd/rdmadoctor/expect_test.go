package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeHealthyExpect runs `expect --from-host` on the healthy RoCE fixture
// and returns the file it wrote.
func writeHealthyExpect(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "expect.conf")
	code, stdout, stderr := runCLI(t, "expect", "--from-host", "--root", filepath.Join(hostsDir, "cx5-roce-healthy"), "-o", out)
	if code != 0 || stdout != "" || !strings.Contains(stderr, "wrote class cx5-node (hosts cx5-node*) to "+out) {
		t.Fatalf("expect --from-host: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	return out
}

func TestExpectCommandHelp(t *testing.T) {
	code, stdout, _ := runCLI(t, "expect", "--help")
	for _, s := range []string{"--from-host", "--check", "[class cx5-roce]", "/etc/rdmadoctor/expect.conf", "mlx5_1/1.unused = true"} {
		if code != 0 || !strings.Contains(stdout, s) {
			t.Errorf("expect --help (exit %d) does not say %q", code, s)
		}
	}
	code, stdout, _ = runCLI(t, "--help")
	if code != 0 || !strings.Contains(stdout, "--expect") || !strings.Contains(stdout, "/etc/rdmadoctor/expect.conf") || !strings.Contains(stdout, "rdmadoctor expect --from-host") {
		t.Errorf("--help does not document --expect and the expect command:\n%s", stdout)
	}
}

func TestExpectFromHostThenJudge(t *testing.T) {
	file := writeHealthyExpect(t)
	code, stdout, stderr := runCLI(t, "--root", filepath.Join(hostsDir, "cx5-roce-healthy"), "--level", "1", "--expect", file)
	if code != 0 {
		t.Fatalf("the healthy host fails its own expectations: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "expect class cx5-node ("+file+")") {
		t.Errorf("the text report does not name the class and file:\n%s", stdout)
	}
	code, stdout, _ = runCLI(t, "--root", filepath.Join(hostsDir, "port-down"), "--level", "1", "--expect", file)
	if code == 0 {
		t.Errorf("port-down passes the healthy host's expectations:\n%s", stdout)
	}
	// The JSON report names the file and class, and is valid.
	code, stdout, _ = runCLI(t, "--root", filepath.Join(hostsDir, "cx5-roce-healthy"), "--level", "1", "--expect", file, "--format", "json")
	var doc any
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != 0 {
		t.Fatalf("json report: exit %d, %v", code, err)
	}
	if err := compileSchema(t).Validate(doc); err != nil {
		t.Errorf("the report with host.expect does not validate: %v", err)
	}
	host := doc.(map[string]any)["host"].(map[string]any)
	e, ok := host["expect"].(map[string]any)
	if !ok || e["file"] != file || e["class"] != "cx5-node" {
		t.Fatalf("host.expect = %v", host["expect"])
	}
	// The schema holds host.expect to its two fields.
	e["line"] = 2
	if err := compileSchema(t).Validate(doc); err == nil {
		t.Error("the schema accepts an unknown field in host.expect")
	}
	delete(e, "line")
	delete(e, "class")
	if err := compileSchema(t).Validate(doc); err == nil {
		t.Error("the schema accepts host.expect without its class")
	}
}

func TestExpectPCIeMismatchFailsPCILink(t *testing.T) {
	file := writeHealthyExpect(t)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), "mlx5_1.pcie_width = 16", "mlx5_1.pcie_width = 8", 1)
	text = strings.Replace(text, "[class cx5-node]\n", "[class cx5-node]\nskip = counters.errors\n", 1)
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := runCLI(t, "--root", filepath.Join(hostsDir, "cx5-roce-healthy"), "--level", "1", "--expect", file, "--no-color")
	if code != 11 || !strings.Contains(stdout, "expected x8 by expect.conf:") || !strings.Contains(stdout, "mlx5_1.pcie_width = 8") {
		t.Errorf("exit %d, want 11 naming the key:\n%s", code, stdout)
	}
	if !strings.Contains(stdout, "skip  22 counters.errors      skipped by expect.conf:3 skip = counters.errors") {
		t.Errorf("counters.errors not skipped by the class:\n%s", stdout)
	}
}

func TestExpectUsageErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.conf", "[class a]\nhosts = cx5-*\ndevices = many\n")
	other := write("other.conf", "[class gpu]\nhosts = gpu-*\n")
	typo := write("typo.conf", "[class a]\nhosts = cx5-*\nskip = counters.eror\n")
	root := filepath.Join(hostsDir, "cx5-roce-healthy")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{"--expect", filepath.Join(dir, "none.conf")}, "rdmadoctor: --expect: read expectations: open " + filepath.Join(dir, "none.conf")},
		{"does not parse", []string{"--expect", bad}, "rdmadoctor: --expect: " + bad + `:3: devices: "many" is not a whole number`},
		{"no class", []string{"--expect", other}, `rdmadoctor: --expect: ` + other + `: no class matches host "cx5-node01"; classes: gpu [gpu-*]`},
		{"unknown skip", []string{"--expect", typo}, `rdmadoctor: --expect: ` + typo + `:3: skip: "counters.eror" is not a check ID`},
		{"a directory", []string{"--expect", dir}, "rdmadoctor: --expect: " + dir + ": is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"--root", root, "--level", "1"}, tc.args...)...)
			if code != 2 || stdout != "" || !strings.HasPrefix(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want exit 2 and one line starting %q", code, stderr, tc.want)
			}
		})
	}
	for _, args := range [][]string{
		{"expect"},
		{"expect", "--root", root},
		{"expect", "--from-host", "--check", other},
		{"expect", "--from-host", "--class", "a/b", "--root", root},
		{"expect", "--from-host", "--hosts", "[", "--root", root},
		{"expect", "--check", other, "--class", "x"},
		{"expect", "--bogus"},
		{"expect", "--check", bad, "--host", "cx5-1"},
	} {
		code, _, stderr := runCLI(t, args...)
		if code == 0 || !strings.HasPrefix(stderr, "rdmadoctor expect: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

func TestExpectDefaultFile(t *testing.T) {
	dir := t.TempDir()
	def := filepath.Join(dir, "expect.conf")
	// No default file: no expectations, no error.
	if c, info, err := expectFrom("", def, true, "cx5-node01"); c != nil || info != nil || err != nil {
		t.Errorf("without a default file: %v %v %v", c, info, err)
	}
	if err := os.WriteFile(def, []byte("[class gpu]\nhosts = gpu-*\n[class cx5]\nhosts = cx5-*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, info, err := expectFrom("", def, true, "cx5-node01"); err != nil || c.Name != "cx5" || info.Class != "cx5" || info.File != def {
		t.Errorf("default file: %v %+v %v", c, info, err)
	}
	// A host the fleet file does not cover is judged on its hardware, and the report says so.
	if c, info, err := expectFrom("", def, true, "login1"); err != nil || c != nil || info == nil || info.Class != "" {
		t.Errorf("default file without a class for the host: %v %+v %v", c, info, err)
	}
	// With --root only an explicit --expect applies.
	if c, info, err := expectFrom("", def, false, "cx5-node01"); c != nil || info != nil || err != nil {
		t.Errorf("--root read the default file: %v %v %v", c, info, err)
	}
	// A default file that does not parse is an error, not silently ignored.
	if err := os.WriteFile(def, []byte("hosts = x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := expectFrom("", def, true, "cx5-node01"); err == nil || !strings.Contains(err.Error(), def+":1: hosts: key before the first [class NAME] section") {
		t.Errorf("broken default file: %v", err)
	}
}

func TestExpectCheckCommand(t *testing.T) {
	file := writeHealthyExpect(t)
	code, stdout, stderr := runCLI(t, "expect", "--check", file, "--root", filepath.Join(hostsDir, "port-down"))
	if code != 0 || !strings.Contains(stdout, "host cx5-node01 is class cx5-node (line 2)") {
		t.Errorf("expect --check: exit %d\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = runCLI(t, "expect", "--check", file, "--host", "gpu-01")
	if code != 1 || !strings.Contains(stderr, `no class matches host "gpu-01"`) {
		t.Errorf("expect --check --host gpu-01: exit %d, %s", code, stderr)
	}
	// --from-host writes to standard output without -o, and the output parses.
	code, stdout, _ = runCLI(t, "expect", "--from-host", "--root", filepath.Join(hostsDir, "cx6-ib-healthy"), "--class", "ib", "--hosts", "cx6-ib-*,spare-ib-?")
	if code != 0 || !strings.HasPrefix(stdout, "# rdmadoctor expectations, format 1\n[class ib]\nhosts = cx6-ib-* spare-ib-?\n") {
		t.Errorf("expect --from-host to stdout: exit %d\n%s", code, stdout)
	}
}

// expect --check says every fault of a file with its line, and refuses a
// rule of the host's class that matches no device or port of the host.
func TestExpectCheckEveryErrorAndUnmatchedRules(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	root := filepath.Join(hostsDir, "cx5-roce-healthy")
	bad := write("bad.conf", "[class a]\nhosts = cx5-*\ndevices = many\nfail_on_warn = [\"port.stat\"]\nmlx5_0/1.width = 3X\n")
	typo := write("typo.conf", "[class a]\nhosts = cx5-*\nmlx5-*.fw = 16.35.2000\nmlx5_0/2.unused = true\nmlx5_*/1.rate = 100\n")
	good := write("good.conf", "[class a]\nhosts = cx5-*\nmlx5_*.fw = [\"16.35.*\", \"16.36.2000\"]\nfail_on_warn = port.state\n")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		// The unknown check ID of line 4 is reported with the lines that
		// do not parse, in line order (it once waited for them to be fixed).
		{"every parse error", []string{"--check", bad, "--root", root}, 2, "",
			"rdmadoctor expect: " + bad + ":3: devices: \"many\" is not a whole number\n" +
				"rdmadoctor expect: " + bad + ":4: fail_on_warn: \"port.stat\" is not a check ID (did you mean port.state?) (rdmadoctor list shows them)\n" +
				"rdmadoctor expect: " + bad + ":5: mlx5_0/1.width: \"3X\": want one of 1X, 2X, 4X, 8X, 12X\n"},
		{"an unknown fail_on_warn check", []string{"--check", write("fow.conf", "[class a]\nhosts = cx5-*\nfail_on_warn = [\"port.stat\"]\n"), "--host", "cx5-1"}, 2, "",
			"rdmadoctor expect: " + filepath.Join(dir, "fow.conf") + ":3: fail_on_warn: \"port.stat\" is not a check ID (did you mean port.state?) (rdmadoctor list shows them)\n"},
		{"rules that match nothing", []string{"--check", typo, "--root", root}, 1,
			typo + ": 1 class(es); host cx5-node01 is class a (line 1): 1 device rule(s), 2 port rule(s)\n",
			"rdmadoctor expect: typo.conf:3 mlx5-*.fw: mlx5-* matches no RDMA device on this host (did you mean mlx5_0?)\n" +
				"rdmadoctor expect: typo.conf:4 mlx5_0/2.unused: mlx5_0/2 matches no port: no device mlx5_0 matches has a port 2 (did you mean mlx5_0/1?)\n"},
		{"every rule matches", []string{"--check", good, "--root", root}, 0,
			good + ": 1 class(es); host cx5-node01 is class a (line 1): 1 device rule(s), 0 port rule(s)\n", ""},
		{"another host's name: rules not matched", []string{"--check", typo, "--host", "cx5-9"}, 0,
			typo + ": 1 class(es); host cx5-9 is class a (line 1): 1 device rule(s), 2 port rule(s)\n" +
				"rules not matched against devices: give --root with a snapshot of cx5-9 to check them\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"expect"}, tc.args...)...)
			if code != tc.code || stdout != tc.stdout || stderr != tc.stderr {
				t.Errorf("exit %d\nstdout %q\nstderr %q\nwant exit %d\nstdout %q\nstderr %q", code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
	// --from-host writes the version part of fw_ver and the PSID as a comment.
	file := writeHealthyExpect(t)
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), "\nmlx5_0.fw = 16.35.2000 ") || !strings.Contains(string(b), "# fw_ver 16.35.2000 (MT_0000000008)\n") {
		t.Errorf("from-host fw: %v\n%s", err, b)
	}
}
