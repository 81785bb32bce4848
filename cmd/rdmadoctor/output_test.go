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

// specialTarget is one thing that can sit where --output or --state points
// and is not a regular file rdmadoctor may replace.
type specialTarget struct {
	name string
	make func(t *testing.T, path string) // creates it at path
	same func(t *testing.T, path string) // fails the test if it changed
}

// specialTargets: a FIFO, a symbolic link (to a file, and to
// /proc/self/fd/1), a character device (a copy of /dev/null made with mknod
// as root; the real /dev/null otherwise — the old code renamed over it).
func specialTargets(t *testing.T) []specialTarget {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("precious\n"), 0o644)
	isMode := func(want os.FileMode) func(*testing.T, string) {
		return func(t *testing.T, p string) {
			if st, err := os.Lstat(p); err != nil || st.Mode().Type() != want {
				t.Errorf("%s is now %v (%v), want %v", p, st.Mode().Type(), err, want)
			}
		}
	}
	link := func(to string) func(*testing.T, string) {
		return func(t *testing.T, p string) {
			if err := os.Symlink(to, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	linkSame := func(to string) func(*testing.T, string) {
		return func(t *testing.T, p string) {
			isMode(os.ModeSymlink)(t, p)
			if got, _ := os.Readlink(p); got != to {
				t.Errorf("link now points at %q", got)
			}
			if got, _ := os.ReadFile(victim); string(got) != "precious\n" {
				t.Errorf("the link's target now holds %q", got)
			}
		}
	}
	dev := specialTarget{name: "device",
		make: func(t *testing.T, p string) {
			if os.Geteuid() != 0 {
				t.Skip("mknod needs root")
			}
			if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, 1<<8|3); err != nil { // 1:3, /dev/null
				t.Fatal(err)
			}
		},
		same: isMode(os.ModeDevice | os.ModeCharDevice)}
	return []specialTarget{
		{"FIFO", func(t *testing.T, p string) { syscall.Mkfifo(p, 0o644) }, isMode(os.ModeNamedPipe)},
		// -o DIR once printed the rename's error ("file exists").
		{"directory", func(t *testing.T, p string) { os.Mkdir(p, 0o755) }, isMode(os.ModeDir)},
		{"symlink to a file", link(victim), linkSame(victim)},
		{"symlink to stdout", link("/proc/self/fd/1"), linkSame("/proc/self/fd/1")},
		dev,
	}
}

// Issue 22, finding 3: --output and --state renamed over whatever was
// there. Each is refused, the run exits 1 with the path and what is there
// named, and the target is untouched; no temporary file is left.
func TestOutputAndStateRefuseSpecialTargets(t *testing.T) {
	for _, flag := range []string{"--output", "--state"} {
		for _, tg := range specialTargets(t) {
			t.Run(strings.TrimPrefix(flag, "--")+"/"+tg.name, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, "target")
				tg.make(t, path)
				done := make(chan struct{})
				var code int
				var stdout, stderr string
				go func() { // a FIFO opened by mistake would hang: bound it
					defer close(done)
					code, stdout, stderr = runCLI(t, "--root", portDown, "--level", "1", "--format", "json", flag, path)
				}()
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					t.Fatal("the run hung on the target")
				}
				// --state reads the state first, and that read already
				// refuses what is not a regular file; the write's own
				// refusal is report/state's TestSaveRefusesSpecialTargets.
				refused := strings.Contains(stderr, "refused") || flag == "--state" &&
					(strings.Contains(stderr, "not a regular file") || strings.Contains(stderr, "symbolic link"))
				if code != report.ExitInternal || !strings.Contains(stderr, path) || !refused {
					t.Errorf("exit %d, stderr %q; want 1, the path and the refusal", code, stderr)
				}
				if flag == "--output" && stdout != "" {
					t.Errorf("stdout %q: the report went elsewhere", stdout)
				}
				tg.same(t, path)
				if left := tempFiles(t, dir); len(left) > 0 {
					t.Errorf("temporary files left: %v", left)
				}
			})
		}
	}
}

// The real /dev/null as --output: refused, and still a device. (Before the
// fix, root turned it into a 0644 regular file.)
func TestOutputDevNullRefused(t *testing.T) {
	code, _, stderr := runCLI(t, "--root", portDown, "--level", "1", "--output", "/dev/null")
	if code != report.ExitInternal || !strings.Contains(stderr, "/dev/null") || !strings.Contains(stderr, "character device") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if st, err := os.Lstat("/dev/null"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is now %v (%v)", st.Mode(), err)
	}
}

// --output - is stdout, whatever a file named "-" would be.
func TestOutputDashIsStdout(t *testing.T) {
	code, stdout, _ := runCLI(t, "--root", portDown, "--level", "1", "--format", "json", "--output", "-")
	if code != 19 || !strings.Contains(stdout, `"schema"`) {
		t.Errorf("exit %d, stdout %.80q", code, stdout)
	}
}

// The modes are the documented ones, whatever the umask: the textfile
// 0644 (node_exporter reads it as its own user), the state 0600.
func TestOutputAndStateModes(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	out, state := filepath.Join(dir, "r.prom"), filepath.Join(dir, "state.json")
	os.WriteFile(state, nil, 0o666) // an earlier, wider file is replaced, not kept
	os.Remove(state)
	if code, _, stderr := runCLI(t, "--root", portDown, "--level", "1", "--format", "prometheus", "--output", out, "--state", state); code != 19 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for p, want := range map[string]os.FileMode{out: outputMode, state: rdstate.Mode, state + ".lock": lockMode} {
		if st, err := os.Lstat(p); err != nil || st.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, st.Mode(), err, want)
		}
	}
}

// --output in a directory that does not exist names --output and the
// directory, not the temporary file the writer could not create.
func TestOutputDirMissing(t *testing.T) {
	out := filepath.Join(t.TempDir(), "missing", "r.txt")
	code, stdout, stderr := runCLI(t, "--root", portDown, "--level", "1", "--output", out)
	want := "--output " + out + ": the directory " + filepath.Dir(out) + " does not exist"
	if code != report.ExitInternal || stdout != "" || !strings.Contains(stderr, want) || strings.Contains(stderr, ".tmp") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q", code, stdout, stderr, want)
	}
}
