package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// writeTarGz writes an archive holding the given directories (names ending
// in "/") and empty files.
func writeTarGz(t *testing.T, path string, names ...string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, n := range names {
		h := &tar.Header{Name: n, Mode: 0o644, Typeflag: tar.TypeReg}
		if strings.HasSuffix(n, "/") {
			h.Mode, h.Typeflag = 0o755, tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRootThatIsNotAHost: a --root with none of sys/, proc/, the facts file
// or the manifest is a usage error that names what was looked for; a typo
// names the near miss; the parent of the fixtures names the hosts in it.
func TestRootThatIsNotAHost(t *testing.T) {
	tmp := t.TempDir()
	empty := filepath.Join(tmp, "empty")
	os.Mkdir(empty, 0o755)
	files := filepath.Join(tmp, "files")
	os.MkdirAll(filepath.Join(files, "etc"), 0o755)
	os.WriteFile(filepath.Join(files, "sys"), []byte("a file, not a directory"), 0o644)
	notHost := filepath.Join(tmp, "nothost.tar.gz")
	writeTarGz(t, notHost, "etc/", "etc/hostname")
	// The message names the first host roots in name order: the first
	// fixture directory is one of them, whatever fixtures are added.
	entries, err := os.ReadDir(hostsDir) // sorted by name
	if err != nil || len(entries) == 0 {
		t.Fatalf("no fixtures in %s: %v", hostsDir, err)
	}
	firstHost := filepath.Join(hostsDir, entries[0].Name())

	cases := []struct {
		name, root string
		says       []string
	}{
		{"empty directory", empty, []string{"is not a host root", "sys/, proc/, rdmadoctor.facts.json, rdmadoctor.manifest.json"}},
		{"sys is a file", files, []string{"is not a host root"}},
		// The first host roots in name order are named: any fixture may be first.
		{"parent of the fixtures", hostsDir, []string{"is not a host root", "host roots inside it: " + firstHost, "more"}},
		{"typo", filepath.Join(hostsDir, "cx5-roce-helthy"), []string{"does not exist", "did you mean " + filepath.Join(hostsDir, "cx5-roce-healthy")}},
		{"archive without a host", notHost, []string{"the archive " + notHost + " is not a host root"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, "--root", c.root, "--level", "1")
			if code != report.ExitUsage {
				t.Fatalf("exit %d, want 2\n%s%s", code, out, errOut)
			}
			if out != "" || strings.Count(errOut, "\n") != 1 {
				t.Errorf("want one line on stderr and nothing on stdout; got %q / %q", out, errOut)
			}
			for _, s := range c.says {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr does not say %q: %s", s, errOut)
				}
			}
		})
	}
}

// TestRootThatIsAPartialHost: one marker is enough; what is missing is
// judged check by check, never a usage error.
func TestRootThatIsAPartialHost(t *testing.T) {
	tmp := t.TempDir()
	onlyProc := filepath.Join(tmp, "onlyproc")
	os.MkdirAll(filepath.Join(onlyProc, "proc"), 0o755)
	onlyFacts := filepath.Join(tmp, "onlyfacts")
	os.Mkdir(onlyFacts, 0o755)
	os.WriteFile(filepath.Join(onlyFacts, "rdmadoctor.facts.json"), []byte(`{"schema":"rdmadoctor.facts/v1"}`), 0o644)
	archive := filepath.Join(tmp, "host.tar.gz")
	writeTarGz(t, archive, "node/", "node/sys/", "node/proc/")
	for _, root := range []string{onlyProc, onlyFacts, archive} {
		t.Run(filepath.Base(root), func(t *testing.T) {
			code, out, errOut := runCLI(t, "--root", root, "--level", "1", "--no-color")
			if code == report.ExitUsage || code == report.ExitOK {
				t.Fatalf("exit %d, want a check's code\n%s%s", code, out, errOut)
			}
			// A root that lacks what a check reads leaves the check in
			// error: the last line names it as a root cause or, when
			// nothing failed, as the check that could not look.
			if !strings.Contains(out, "root cause:") && !strings.Contains(out, "could not judge:") {
				t.Errorf("no report:\n%s", out)
			}
		})
	}
}

// A --root this user may not read is not "not a host root": the error says
// permission denied and names the path that refused, whether the root
// itself or the directory above it is closed. Root ignores permissions, so
// the binary runs as uid 65534; a test not run as root runs it as itself.
func TestRootUnreadableSaysPermissionDenied(t *testing.T) {
	bin := faultBinary(t)
	dir := sharedDir(t)
	above := filepath.Join(dir, "closed")
	root := filepath.Join(above, "host")
	if err := os.Mkdir(above, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(hostsDir, "port-down"), root).CombinedOutput(); err != nil {
		t.Fatalf("copy the fixture: %v\n%s", err, out)
	}
	for _, c := range []struct{ name, closed, refused string }{
		{"the root", root, filepath.Join(root, "sys")},
		{"the directory above it", above, root},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Chmod(c.closed, 0)
			defer os.Chmod(c.closed, 0o755)
			cmd := exec.Command(bin, "--root", root, "--level", "1")
			if os.Geteuid() == 0 {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != report.ExitUsage {
				t.Fatalf("run: %v, want exit 2 (stderr %s)", err, stderr.String())
			}
			want := "permission denied reading " + c.refused + " "
			if msg := stderr.String(); !strings.Contains(msg, want) || strings.Contains(msg, "not a host root") || stdout.Len() > 0 {
				t.Errorf("stdout %q, stderr %q: want it to say %q", stdout.String(), msg, want)
			}
		})
	}
}
