package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rdmadoctor/rdmadoctor/checks"
)

// Under the C locale the text report is ASCII: the arrows, dashes and
// multiplication signs the report uses are spelled out, nothing reaches a
// terminal that cannot show it. JSON stays UTF-8 (it is for machines).
func TestASCIIUnderCLocale(t *testing.T) {
	t.Setenv("LC_ALL", "")
	t.Setenv("LC_CTYPE", "")
	t.Setenv("LANG", "C")
	_, text, _ := runCLI(t, "--root", "../../testdata/hosts/port-down", "--level", "1", "--no-color")
	for i, r := range text {
		if r >= 0x80 || r == utf8.RuneError {
			t.Fatalf("non-ASCII %q at byte %d under LANG=C:\n%s", r, i, text)
		}
	}
	if !strings.Contains(text, "ConnectX-5 (mlx5_core) x2") {
		t.Errorf("× not spelled x:\n%s", text)
	}
	t.Setenv("LANG", "en_US.UTF-8")
	if _, text, _ := runCLI(t, "--root", "../../testdata/hosts/port-down", "--level", "1", "--no-color"); !strings.Contains(text, "×2") {
		t.Errorf("a UTF-8 locale lost the ×:\n%s", text)
	}
	_, js, _ := runCLI(t, "--root", "../../testdata/hosts/port-down", "--level", "1", "--format", "json")
	t.Setenv("LANG", "C")
	if _, js2, _ := runCLI(t, "--root", "../../testdata/hosts/port-down", "--level", "1", "--format", "json"); len(js2) == 0 || strings.Count(js, "×") != strings.Count(js2, "×") {
		t.Errorf("JSON changed with the locale")
	}
}

// nonASCII is the first byte above 0x7e or control character (but newline
// and tab) in s, and where it is; -1 when there is none.
func nonASCII(s string) (int, byte) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c > 0x7e || (c < 0x20 && c != '\n' && c != '\t') {
			return i, c
		}
	}
	return -1, 0
}

// On every bundled host, under LANG=C nothing a person reads is above
// 0x7f — the text report, the inventory, explain and list — and the
// adapters' one-line messages (the NPD line, the Slurm log lines and drain
// reason) are ASCII whatever the locale: node-problem-detector once turned
// "↔" into "?".
func TestNoByteAbove7FUnderCLocale(t *testing.T) {
	hosts, err := os.ReadDir(hostsDir)
	if err != nil || len(hosts) == 0 {
		t.Fatalf("no fixtures in %s: %v", hostsDir, err)
	}
	t.Setenv("LC_ALL", "")
	t.Setenv("LC_CTYPE", "")
	check := func(what, out string) {
		t.Helper()
		if i, c := nonASCII(out); i >= 0 {
			t.Errorf("%s: byte %#x at %d: %q", what, c, i, out[max(0, i-40):min(len(out), i+40)])
		}
	}
	runs := func(args ...string) string {
		_, out, errOut := runCLI(t, args...)
		return out + errOut
	}
	for _, locale := range []string{"C", "C.UTF-8"} {
		t.Setenv("LANG", locale)
		for _, h := range hosts {
			root := filepath.Join(hostsDir, h.Name())
			if locale == "C" {
				check("LANG=C rdmadoctor --root "+h.Name(), runs("--root", root, "--level", "1", "--no-color", "-v"))
				check("LANG=C inventory --root "+h.Name(), runs("inventory", "--root", root))
			}
			check("LANG="+locale+" npd --run --root "+h.Name(), runs("npd", "--run", "--root", root))
			check("LANG="+locale+" slurm healthcheck --dry-run --root "+h.Name(), runs("slurm", "healthcheck", "--dry-run",
				"--scontrol", "/nonexistent/scontrol", "--node", "node17", "--lock-file", "", "--root", root))
		}
	}
	t.Setenv("LANG", "C")
	check("LANG=C list", runs("list"))
	for _, id := range append(allCheckIDs(), checks.FindingIDs()...) {
		check("LANG=C explain "+id, runs("explain", id))
	}
}
