package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// needFaultTool finds a program a fault test drives: skipped on a developer
// machine without it, a failure under CI=true, where .ci/deps installs it.
func needFaultTool(t *testing.T, name, pkg string) string {
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

// sharedDir is a temporary directory other users may enter (t.TempDir's
// parent is private to its owner), removed when the test ends.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "rdmadoctor-fault-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { os.Chmod(p, 0o755); return nil })
		os.RemoveAll(dir)
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// faultBinary builds the command (CGO_ENABLED=0, as shipped) where other
// users can run it.
func faultBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary: not in -short")
	}
	bin := filepath.Join(sharedDir(t), "rdmadoctor")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// leftovers lists what in dir is not one of the names kept.
func leftovers(t *testing.T, dir string, keep ...string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var extra []string
	for _, e := range entries {
		kept := false
		for _, k := range keep {
			kept = kept || e.Name() == k
		}
		if !kept {
			extra = append(extra, e.Name())
		}
	}
	return extra
}

// tracee is the process strace runs bin in: the child of strace whose
// command line starts with bin (strace may fork a short-lived helper first).
func tracee(t *testing.T, stracePid int, bin string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		data, _ := os.ReadFile("/proc/" + strconv.Itoa(stracePid) + "/task/" + strconv.Itoa(stracePid) + "/children")
		for _, f := range strings.Fields(string(data)) {
			cmdline, _ := os.ReadFile("/proc/" + f + "/cmdline")
			if argv0, _, _ := strings.Cut(string(cmdline), "\x00"); argv0 == bin {
				pid, _ := strconv.Atoi(f)
				return pid
			}
		}
	}
	t.Fatal("strace started no child running the binary within 10 s")
	return 0
}

// TestSIGTERMDuringWrite sends a real SIGTERM to the real binary while it
// writes --state and --output: strace holds its first fsync for two
// seconds, so the signal lands while a temporary file exists. The write
// finishes (a signal is caught, never fatal), nothing temporary is left, and
// each file is either the old one or a complete new report.
func TestSIGTERMDuringWrite(t *testing.T) {
	straceExe := needFaultTool(t, "strace", "strace")
	bin := faultBinary(t)
	for _, tc := range []struct {
		name   string
		extra  []string
		exit   int
		stderr string
	}{
		{"single run", nil, 128 + int(syscall.SIGTERM), "arrived while the report was being written; it was written whole"},
		{"--repeat", []string{"--repeat", "1h"}, 0, "stopping the repeated runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out, state := filepath.Join(dir, "rdmadoctor.prom"), filepath.Join(dir, "state.json")
			os.WriteFile(out, []byte("old textfile\n"), 0o644)
			os.WriteFile(state, []byte("old state\n"), 0o644)
			args := append([]string{"-f", "-qq", "-o", "/dev/null", "-e", "trace=fsync",
				"-e", "inject=fsync:delay_enter=2000000:when=1", bin,
				"--root", filepath.Join(hostsDir, "port-down"), "--level", "1", "--format", "prometheus",
				"--output", out, "--state", state}, tc.extra...)
			cmd := exec.Command(straceExe, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			pid, exited := 0, false
			// On any failure, end both: a killed strace lets its tracee run on.
			defer func() {
				if !exited {
					if pid > 0 {
						syscall.Kill(pid, syscall.SIGKILL)
					}
					cmd.Process.Kill()
					<-done
				}
			}()
			pid = tracee(t, cmd.Process.Pid, bin)
			var temp []string
			for deadline := time.Now().Add(20 * time.Second); len(temp) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				temp, _ = filepath.Glob(filepath.Join(dir, ".*.tmp-*"))
			}
			if len(temp) == 0 {
				t.Fatalf("no temporary file appeared in 20 s; stderr:\n%s", stderr.String())
			}
			if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
				t.Fatalf("SIGTERM to %d: %v; stderr:\n%s", pid, err, stderr.String())
			}
			select {
			case <-done:
				exited = true
			case <-time.After(30 * time.Second):
				t.Fatalf("not ended 30 s after SIGTERM; stderr:\n%s", stderr.String())
			}
			if code := cmd.ProcessState.ExitCode(); code != tc.exit || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("exit %d, want %d and %q on stderr; stderr:\n%s", code, tc.exit, tc.stderr, stderr.String())
			}
			if extra := leftovers(t, dir, "rdmadoctor.prom", "state.json", "state.json.lock"); len(extra) > 0 {
				t.Errorf("left behind after SIGTERM during the write of %v: %v", temp, extra)
			}
			wholeOrOld(t, out, "old textfile\n", func(b []byte) bool {
				return bytes.HasSuffix(b, []byte("\n")) && bytes.Contains(b, []byte("rdmadoctor_last_run_timestamp_seconds{"))
			})
			wholeOrOld(t, state, "old state\n", func(b []byte) bool {
				var r report.Report
				return json.Unmarshal(b, &r) == nil && r.ExitCode == 19
			})
		})
	}
}

// wholeOrOld: path holds its old content or a complete new one.
func wholeOrOld(t *testing.T, path, old string, complete func([]byte) bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if string(b) != old && !complete(b) {
		t.Errorf("%s is neither the old file nor a complete report (%d bytes):\n%.300s", path, len(b), b)
	}
}

// An --output directory on a read-only file system (ProtectSystem=strict
// without ReadWritePaths, a readOnlyRootFilesystem) stops root too: exit 1,
// the file named, the old file intact, nothing left. It needs the right to
// mount a tmpfs; without it the case is skipped, saying so.
func TestOutputReadOnlyFileSystem(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs to make read-only (%v): the read-only file system case needs CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	out := filepath.Join(dir, "rdmadoctor.prom")
	if err := os.WriteFile(out, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", dir, err)
	}
	code, stdout, stderr := runCLI(t, "--root", filepath.Join(hostsDir, "port-down"), "--level", "1",
		"--format", "prometheus", "--output", out)
	if code != report.ExitInternal || stdout != "" || !strings.Contains(stderr, out) || !strings.Contains(stderr, "read-only file system") {
		t.Errorf("exit %d, stdout %q, stderr %q: want 1, naming %s and the read-only file system", code, stdout, stderr, out)
	}
	if b, _ := os.ReadFile(out); string(b) != "old\n" {
		t.Errorf("old file now holds %q", b)
	}
	if extra := leftovers(t, dir, "rdmadoctor.prom"); len(extra) > 0 {
		t.Errorf("left behind: %v", extra)
	}
}

// A directory its user may not write (a service run as another user than
// the directory's owner): run as nobody, the real binary exits 1 naming the
// file and keeps the old one. Root ignores permissions, so the binary is run
// as uid 65534; a test not run as root runs it as itself.
func TestOutputUnwritableDirAsOtherUser(t *testing.T) {
	bin := faultBinary(t)
	dir := sharedDir(t)
	ro := filepath.Join(dir, "textfile")
	os.Mkdir(ro, 0o755)
	out := filepath.Join(ro, "rdmadoctor.prom")
	os.WriteFile(out, []byte("old\n"), 0o644)
	// The fixture is copied where uid 65534 can read it: a checkout may sit
	// under a directory private to its owner.
	root := filepath.Join(dir, "host")
	if out, err := exec.Command("cp", "-a", filepath.Join(hostsDir, "port-down"), root).CombinedOutput(); err != nil {
		t.Fatalf("copy the fixture: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--root", root, "--level", "1", "--format", "prometheus", "--output", out)
	if os.Geteuid() == 0 {
		const nobody = 65534
		if err := os.Chown(ro, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
	if err := os.Chmod(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("run: %v (stderr %s): the fixture %s must be readable by the user the binary runs as", err, stderr.String(), root)
	}
	if exit.ExitCode() != report.ExitInternal || stdout.Len() > 0 || !strings.Contains(stderr.String(), out) ||
		!strings.Contains(stderr.String(), "permission denied") {
		t.Errorf("exit %d, stdout %q, stderr %q: want 1, naming %s and the permission", exit.ExitCode(), stdout.String(), stderr.String(), out)
	}
	if b, _ := os.ReadFile(out); string(b) != "old\n" {
		t.Errorf("old file now holds %q", b)
	}
	if extra := leftovers(t, ro, "rdmadoctor.prom"); len(extra) > 0 {
		t.Errorf("left behind: %v", extra)
	}
}
