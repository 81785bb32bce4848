package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
)

var units = []string{"systemd/rdmadoctor.service", "systemd/rdmadoctor.timer"}

// needTool finds a program the test drives; without it the test skips on a
// developer machine and fails under CI=true, where .ci/deps installs it.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not on PATH under CI=true (.ci/deps installs Debian's %s): %v", name, pkg, err)
	}
	t.Skipf("%s is not on PATH (Debian package %s): %v", name, pkg, err)
	return ""
}

// unitCopies writes the units to a temporary directory with ExecStart's
// binary replaced by one that exists, so that verify has nothing to excuse.
func unitCopies(t *testing.T) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var paths []string
	for _, u := range units {
		data, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Base(u))
		if err := os.WriteFile(p, bytes.ReplaceAll(data, []byte("/usr/bin/rdmadoctor"), []byte(exe)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// TestSystemdVerify: systemd-analyze verify accepts both units with nothing
// on stderr.
func TestSystemdVerify(t *testing.T) {
	tool := needTool(t, "systemd-analyze", "systemd")
	cmd := exec.Command(tool, append([]string{"verify"}, unitCopies(t)...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, stderr.String())
	}
}

var exposure = regexp.MustCompile(`Overall exposure level for \S+: (\d+\.\d+)`)

// TestSystemdSecurity: the service's offline exposure score stays at or
// below the one docs/systemd.md states (2.6: CAP_SYS_ADMIN, which gpu.acs needs,
// costs 0.3 over the 2.3 the unit scored without it); a weakened sandbox
// fails here.
func TestSystemdSecurity(t *testing.T) {
	tool := needTool(t, "systemd-analyze", "systemd")
	svc := unitCopies(t)[0]
	out, err := exec.Command(tool, "security", "--offline=yes", "--no-pager", svc).CombinedOutput()
	m := exposure.FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: %v, no overall exposure level in:\n%s", err, out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security --offline=yes: exposure %.1f", score)
	if score > 2.6 {
		t.Errorf("exposure %.1f, want ≤ 2.6 (docs/systemd.md's figure):\n%s", score, out)
	}
}

// directives reads a unit file's Key=Value lines, continuation lines joined.
func directives(t *testing.T, path string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	d := map[string][]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not Key=Value: %q", path, line)
		}
		d[k] = append(d[k], strings.Join(strings.Fields(v), " "))
	}
	return d
}

// TestServiceContract: the settings the rest of the fleet relies on.
func TestServiceContract(t *testing.T) {
	d := directives(t, units[0])
	want := map[string]string{
		"Type": "oneshot", "LimitMEMLOCK": "infinity", "AmbientCapabilities": "CAP_IPC_LOCK CAP_SYS_ADMIN",
		"CapabilityBoundingSet": "CAP_IPC_LOCK CAP_SYS_ADMIN", "NoNewPrivileges": "yes", "ProtectSystem": "strict",
		"StateDirectory": "rdmadoctor", "ReadWritePaths": "-/var/lib/node_exporter/textfile_collector",
	}
	for k, v := range want {
		if got := d[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s=%q, want %q", k, got, v)
		}
	}
	exec := strings.Join(d["ExecStart"], " ")
	for _, arg := range []string{"--periodic", "--format prometheus", "--output /var/lib/node_exporter/textfile_collector/rdmadoctor.prom", "--state /var/lib/rdmadoctor/state.json"} {
		if !strings.Contains(exec, arg) {
			t.Errorf("ExecStart %q lacks %q", exec, arg)
		}
	}
	if !strings.Contains(strings.Join(d["After"], " "), "rdma-hw.target") {
		t.Errorf("After=%q lacks rdma-hw.target", d["After"])
	}
	codes := map[int]bool{}
	for _, v := range d["SuccessExitStatus"] {
		for _, f := range strings.Fields(v) {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("SuccessExitStatus: %q is not a number", f)
			}
			codes[n] = true
		}
	}
	// The unit succeeds where the verdict was made (a problem is reported
	// through the files) or the lock was held, and fails where the doctor
	// could not judge (unknown: 1, 4) or was misused (2). 0 always succeeds.
	for n := 1; n < 126; n++ {
		if ok := n == 3 || report.VerdictOfExit(n) == report.Problem; codes[n] != ok {
			t.Errorf("SuccessExitStatus has %d: %v, want %v (verdict %s; a held lock 3 succeeds)", n, codes[n], ok, report.VerdictOfExit(n))
		}
	}
}

// TestTimerContract: periodic, spread, installable; its interval is the one
// the stale alert is built on.
func TestTimerContract(t *testing.T) {
	d := directives(t, units[1])
	for _, k := range []string{"OnBootSec", "OnUnitActiveSec", "RandomizedDelaySec"} {
		if len(d[k]) != 1 {
			t.Errorf("%s=%q, want one value", k, d[k])
		}
	}
	if got := d["OnUnitActiveSec"]; len(got) != 1 || got[0] != "10min" {
		t.Errorf("OnUnitActiveSec=%q: the stale alert in prometheus/ assumes 10min", got)
	}
	if got := d["WantedBy"]; len(got) != 1 || got[0] != "timers.target" {
		t.Errorf("WantedBy=%q, want timers.target", got)
	}
}
