package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
)

// joinedSentence is a sentence glued to the next without a space, as
// "forever).iWARP" or "came.Then": what two string literals joined by +
// without a trailing space produce.
var joinedSentence = regexp.MustCompile(`[a-z)]\.(iWARP|[A-Z][a-z])`)

// TestExplainFitsAndCopies: every check's explanation fits 80 and 100
// columns (but for a single unbreakable word), no command is broken across
// lines except by a shell continuation, and no sentences are glued.
func TestExplainFitsAndCopies(t *testing.T) {
	for _, c := range checks.Catalog() {
		for _, s := range explainSources(c) {
			if m := joinedSentence.FindString(s); m != "" {
				t.Errorf("%s: sentences joined without a space at %q", c.ID, m)
			}
		}
		for _, w := range []int{80, 100} {
			lines := strings.Split(explainText(c, w), "\n")
			continued := false
			for _, l := range lines[1:] { // the first line is the title, wrapped as prose
				if len(l) > w && len(strings.Fields(l)) > 1 {
					t.Errorf("%s at %d: a line of %d bytes: %q", c.ID, w, len(l), l)
				}
				cont := strings.HasSuffix(l, " \\")
				if strings.Count(l, "`")%2 != 0 && !cont && !continued {
					t.Errorf("%s at %d: a command broken across lines: %q", c.ID, w, l)
				}
				continued = cont
			}
		}
	}
}

func explainSources(c *checks.Check) []string {
	out := []string{c.Title, c.Explain.Judges, c.Explain.Why}
	for _, f := range c.Explain.Failures {
		out = append(out, f.Finding, f.Fix)
	}
	return out
}

// explain FINDING prints that finding — its status, when, message and fix
// as templates — and names its check; a mistyped finding ID gets the
// nearest IDs, and an unknown slug of a known check that check's findings.
func TestExplainFinding(t *testing.T) {
	f, ok := checks.LookupFinding("port.state/no-link")
	if !ok {
		t.Fatal("port.state/no-link is not declared")
	}
	code, out, errOut := runCLI(t, "explain", f.ID)
	if code != 0 || errOut != "" {
		t.Fatalf("explain %s: exit %d, stderr %q", f.ID, code, errOut)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		f.ID + " FAIL", "When " + f.When, "Message " + f.Template(f.Message),
		"Fix " + strings.Join(strings.Fields(f.Template(f.Fix)), " "),
		"Check port.state (exit code 19, level 1):", "rdmadoctor explain port.state",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("explain %s does not say %q:\n%s", f.ID, want, out)
		}
	}
	for _, c := range []struct{ arg, want string }{
		{"port.state/no-lnk", `rdmadoctor: explain: unknown finding "port.state/no-lnk"; did you mean port.state/no-link?` + "\n"},
		{"port.stat/no-link", `rdmadoctor: explain: unknown finding "port.stat/no-link"; did you mean port.state/no-link?` + "\n"},
		{"port.state/qqqqqqqqqqqq", `rdmadoctor: explain: unknown finding "port.state/qqqqqqqqqqqq"; port.state's findings: port.state/active, `},
		{"nosuch/qqqqqqqqqqqq", `rdmadoctor: explain: unknown finding "nosuch/qqqqqqqqqqqq"; a finding ID is a check's ID, "/", and a slug`},
	} {
		code, out, errOut := runCLI(t, "explain", c.arg)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, c.want) {
			t.Errorf("explain %s: exit %d, stdout %q, stderr\n%q\nwant it to start\n%q", c.arg, code, out, errOut, c.want)
		}
	}
}

// A fix shared by several findings of a check is printed once; the later
// findings point to the first.
func TestExplainPrintsEachFixOnce(t *testing.T) {
	for _, c := range append(checks.Catalog(), checks.PeerCatalog()...) {
		seen := map[string]bool{}
		for _, fix := range explainedFixes(explainText(c, 10000)) {
			if strings.HasPrefix(fix, "the same as ") {
				continue
			}
			if seen[fix] {
				t.Errorf("%s: fix printed twice: %.100s", c.ID, fix)
			}
			seen[fix] = true
		}
	}
	text := explainText(mustCheck(t, "port.state"), 10000)
	if !strings.Contains(text, "fix: the same as port.state/unreadable above") {
		t.Errorf("port.state/devices-unreadable shares port.state/unreadable's fix, and does not point to it:\n%s", text)
	}
}

// explainedFixes are the fixes an explanation prints, each whole: its
// "fix: " line and the paragraphs under it.
func explainedFixes(text string) []string {
	var fixes []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		if fix, ok := strings.CutPrefix(strings.TrimSpace(l), "fix: "); ok {
			fixes, in = append(fixes, fix), true
			continue
		}
		if in && strings.HasPrefix(l, strings.Repeat(" ", 13)) {
			fixes[len(fixes)-1] += "\n" + strings.TrimSpace(l)
			continue
		}
		in = false
	}
	return fixes
}

func mustCheck(t *testing.T, id string) *checks.Check {
	t.Helper()
	c, ok := checks.Lookup(id)
	if !ok {
		t.Fatalf("no check %s", id)
	}
	return c
}
