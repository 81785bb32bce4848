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
