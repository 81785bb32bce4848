package main

import (
	"archive/tar"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
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
