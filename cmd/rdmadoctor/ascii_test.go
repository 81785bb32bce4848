package main

import (
	"strings"
	"testing"
	"unicode/utf8"
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
