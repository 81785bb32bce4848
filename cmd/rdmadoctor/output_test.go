package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
	rdstate "github.com/rdmadoctor/rdmadoctor/report/state"
)

// tempFiles lists what a failed atomic write might have left in dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			left = append(left, e.Name())
		}
	}
	return left
}

func TestWriteFileAtomicReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.prom")
	for _, content := range []string{"first\n", "second\n"} {
		if err := writeFileAtomic(path, func(w io.Writer) error { _, err := io.WriteString(w, content); return err }); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		if string(got) != content {
			t.Fatalf("file holds %q, want %q", got, content)
		}
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != outputMode {
		t.Errorf("mode %v, want %v (node_exporter and NPD read it as other users)", st.Mode().Perm(), os.FileMode(outputMode))
	}
	if left := tempFiles(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A render that fails half-way (a full disk: ENOSPC) leaves the old file
// as it was and no temporary file, and the error names the path.
func TestWriteFileAtomicKeepsOldOnFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := writeFileAtomic(path, func(w io.Writer) error {
		io.WriteString(w, "half of a new rep")
		return &os.PathError{Op: "write", Path: "tmp", Err: syscall.ENOSPC}
	})
	if err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("err = %v, want ENOSPC naming %s", err, path)
	}
	if got, _ := os.ReadFile(path); string(got) != "old\n" {
		t.Errorf("old file now holds %q", got)
	}
	if left := tempFiles(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A directory that cannot take the temporary file: missing, or read-only
// (which root ignores, so that case runs only for other users).
func TestWriteFileAtomicUnwritableDir(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope", "r.json")
	err := writeFileAtomic(missing, func(w io.Writer) error { return nil })
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing directory: err = %v, want one naming %s", err, missing)
	}
	// A rename onto a non-empty directory fails for root too.
	blocked := filepath.Join(dir, "blocked")
	os.MkdirAll(filepath.Join(blocked, "x"), 0o755)
	err = writeFileAtomic(blocked, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err })
	if err == nil || !strings.Contains(err.Error(), blocked) {
		t.Errorf("rename onto a directory: err = %v", err)
	}
	if left := tempFiles(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if os.Geteuid() == 0 {
		t.Log("running as root: a read-only directory does not stop root; not tested here")
		return
	}
	ro := filepath.Join(dir, "ro")
	os.Mkdir(ro, 0o755)
	path := filepath.Join(ro, "r.json")
	os.WriteFile(path, []byte("old"), 0o644)
	os.Chmod(ro, 0o555)
	defer os.Chmod(ro, 0o755)
	err = writeFileAtomic(path, func(w io.Writer) error { return nil })
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("read-only directory: err = %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("old file now holds %q", got)
	}
}

// --output writes every format to the file (stdout stays empty), and
// --state keeps the JSON report beside it, whatever the format.
func TestOutputAndStateFlags(t *testing.T) {
	root := filepath.Join(hostsDir, "port-down")
	for _, format := range []string{"text", "json", "prometheus"} {
		dir := t.TempDir()
		out, state := filepath.Join(dir, "report"), filepath.Join(dir, "sub", "state.json")
		code, stdout, stderr := runCLI(t, "--root", root, "--level", "1", "--format", format, "--output", out, "--state", state)
		if code != 19 || stdout != "" {
			t.Fatalf("%s: exit %d, stdout %q, stderr %s", format, code, stdout, stderr)
		}
		data, err := os.ReadFile(out)
		if err != nil || len(data) == 0 {
			t.Fatalf("%s: --output file: %v", format, err)
		}
		if format == "text" && (!strings.Contains(string(data), "port.state") || bytes.Contains(data, []byte("\x1b["))) {
			t.Errorf("text --output: no port.state, or colour codes:\n%s", data)
		}
		kept, err := rdstate.Load(state)
		if err != nil || kept.Last == nil || kept.Last.ExitCode != 19 || kept.Record("port.state").Status != report.Fail {
			t.Fatalf("%s: --state: %v, %+v", format, err, kept)
		}
		if _, err := os.Stat(state + ".lock"); err != nil {
			t.Errorf("no lock file beside the state: %v", err)
		}
	}
}

// A failing --output write is exit 1 with the path named, and the old
// file stays.
func TestOutputFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "report.json")
	os.WriteFile(out, []byte("old"), 0o644)
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	os.WriteFile(filepath.Join(dir, "d", "x"), nil, 0o644)
	code, _, stderr := runCLI(t, "--root", filepath.Join(hostsDir, "port-down"), "--level", "1", "--format", "json", "--output", filepath.Join(dir, "d"))
	if code != report.ExitInternal || !strings.Contains(stderr, filepath.Join(dir, "d")) {
		t.Errorf("exit %d, stderr %q: want 1 naming the path", code, stderr)
	}
	if got, _ := os.ReadFile(out); string(got) != "old" {
		t.Errorf("unrelated file changed: %q", got)
	}
}

func TestFleetFlagUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--repeat", "10ms"},
		{"--repeat", "-5m"},
		{"--output", "x.json", "--state", "x.json"},
	} {
		code, stdout, stderr := runCLI(t, append([]string{"--root", filepath.Join(hostsDir, "port-down")}, args...)...)
		if code != report.ExitUsage || stdout != "" || stderr == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a usage error", args, code, stdout, stderr)
		}
	}
}

func TestJitteredStaysWithinTenPercent(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := jittered(time.Minute)
		if d < 54*time.Second || d > 66*time.Second {
			t.Fatalf("jittered(1m) = %v, outside ±10%%", d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Errorf("only %d distinct waits in 1000: no jitter", len(seen))
	}
}

// A state whose directory cannot be made is exit 1, naming the directory.
func TestStateDirUnusable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	state := filepath.Join(file, "sub", "state.json")
	code, stdout, stderr := runCLI(t, "--root", filepath.Join(hostsDir, "port-down"), "--level", "1", "--state", state)
	if code != report.ExitInternal || stdout != "" || !strings.Contains(stderr, filepath.Join(file, "sub")) {
		t.Errorf("exit %d, stdout %q, stderr %q: want 1 naming the directory", code, stdout, stderr)
	}
}
