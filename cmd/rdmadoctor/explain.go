package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
)

const explainUsage = `usage: rdmadoctor explain ID|CODE|FINDING
  ID or CODE: what a check judges, why it matters, what runs before it, every finding it can report and its fix
  FINDING (check.id/slug, as a report's findings and the expectations file's waive name them):
    that finding's status, when the check returns it, its message and fix, and its check
  (rdmadoctor list: every ID and code; rdmadoctor explain ID: a check's findings)
`

// cmdExplain is `rdmadoctor explain ID|CODE|FINDING`: what a check judges,
// why it matters, what runs before it, and every finding it can report with
// its fix — or one finding — folded to the terminal's width like the
// report, never inside a command, so a fix can be copied as printed.
func cmdExplain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
		io.WriteString(stdout, explainUsage)
		return 0
	}
	if len(args) != 1 {
		fmt.Fprintf(stderr, "rdmadoctor: explain takes one check ID, code or finding ID; got %d arguments (rdmadoctor list shows the checks)\n", len(args))
		return report.ExitUsage
	}
	if strings.Contains(args[0], "/") {
		return explainFinding(args[0], stdout, stderr)
	}
	c, ok := lookupAnyCheck(args[0])
	if !ok {
		fmt.Fprintf(stderr, "rdmadoctor: explain: %s\n", unknownCheck("", args[0], allCheckIDs()))
		return report.ExitUsage
	}
	writeText(stdout, func(w io.Writer) error { _, err := io.WriteString(w, explainText(c, textWidth(stdout))); return err })
	return 0
}

// lookupAnyCheck finds a check of the catalog or a two-host check by ID
// or code.
func lookupAnyCheck(id string) (*checks.Check, bool) {
	if c, ok := checks.Lookup(id); ok {
		return c, true
	}
	return checks.LookupPeer(id)
}

// explainFinding is `explain check.id/slug`. A finding that is not
// declared is a usage error naming the nearest finding IDs, or, when its
// check exists, that check's findings.
func explainFinding(id string, stdout, stderr io.Writer) int {
	f, ok := checks.LookupFinding(id)
	if !ok {
		fmt.Fprintf(stderr, "rdmadoctor: explain: %s\n", unknownFinding(id))
		return report.ExitUsage
	}
	// Findings outside the catalog (the runner's own: rdmadoctor.run/…)
	// have no check.
	c, _ := lookupAnyCheck(f.CheckID())
	writeText(stdout, func(w io.Writer) error { _, err := io.WriteString(w, findingText(f, c, textWidth(stdout))); return err })
	return 0
}

// unknownFinding is the message for a finding ID that is not declared.
func unknownFinding(id string) string {
	msg := fmt.Sprintf("unknown finding %q", id)
	if hint := didYouMean(id, checks.FindingIDs()); hint != "" {
		return msg + hint
	}
	check, _, _ := strings.Cut(id, "/")
	var ids []string
	for _, f := range checks.Findings(check) {
		ids = append(ids, f.ID)
	}
	if len(ids) > 0 {
		return fmt.Sprintf("%s; %s's findings: %s", msg, check, strings.Join(ids, ", "))
	}
	if _, ok := lookupAnyCheck(check); ok {
		return fmt.Sprintf("%s; %s declares no finding IDs (rdmadoctor explain %s says what it reports)", msg, check, check)
	}
	return msg + "; a finding ID is a check's ID, \"/\", and a slug (rdmadoctor explain CHECK lists a check's findings)"
}

// findingText renders one finding: its status and ID, when the check
// returns it, its message and fix as templates (<slot> where a report has
// the unit's value), and the check it belongs to.
func findingText(f *checks.Finding, c *checks.Check, width int) string {
	var b strings.Builder
	para := func(s string, first, rest int) {
		b.WriteString(strings.Join(report.Wrap(s, width, first, rest), "\n") + "\n")
	}
	fmt.Fprintf(&b, "%s  %s\n", f.ID, strings.ToUpper(string(f.Status)))
	b.WriteString("\nWhen\n  ")
	para(f.When, 2, 2)
	b.WriteString("\nMessage\n  ")
	para(f.Template(f.Message), 2, 2)
	if f.Fix != "" {
		b.WriteString("\nFix\n  ")
		para(f.Template(f.Fix), 2, 2)
	}
	b.WriteString("\nCheck\n  ")
	if c == nil {
		para(f.CheckID()+": the run's own finding, not a check's", 2, 2)
		return b.String()
	}
	para(fmt.Sprintf("%s (exit code %d, level %s): %s", c.ID, c.Code, levelName(c), c.Title), 2, 4)
	b.WriteString("  ")
	para(fmt.Sprintf("rdmadoctor explain %s: what it judges, why, and its other findings", c.ID), 2, 4)
	return b.String()
}

// levelName is a check's level as list shows it: 1, 2, or peer.
func levelName(c *checks.Check) string {
	if _, two := checks.LookupPeer(c.ID); two {
		return "peer"
	}
	return fmt.Sprint(c.Level)
}

// explainText renders one check's explanation at the given width.
func explainText(c *checks.Check, width int) string {
	var b strings.Builder
	para := func(s string, first, rest int) {
		b.WriteString(strings.Join(report.Wrap(s, width, first, rest), "\n") + "\n")
	}
	para(fmt.Sprintf("%s (exit code %d, level %d): %s", c.ID, c.Code, c.Level, c.Title), 0, 2)
	b.WriteString("\nWhat it judges\n  ")
	para(c.Explain.Judges, 2, 2)
	b.WriteString("\nWhy it matters\n  ")
	para(c.Explain.Why, 2, 2)
	if len(c.Needs) > 0 {
		needs := append([]string(nil), c.Needs...)
		sort.Strings(needs)
		b.WriteString("\nRuns after\n  ")
		para(strings.Join(needs, ", ")+" (skipped as blocked when one of them fails)", 2, 2)
	}
	if len(c.Privileges) > 0 {
		// What a live run must be granted; with --root nothing is live.
		b.WriteString("\nNeeds on a live host (the shipped deployments grant the required ones)\n")
		for _, n := range c.Privileges {
			b.WriteString("  - ")
			para(n.String(), 4, 4)
		}
	}
	b.WriteString("\nWhat it can report, and the fix\n")
	// A fix shared by several findings is printed once, where it first
	// appears; the later ones point to it.
	firstWith := map[string]string{}
	fix := func(text, name string) {
		b.WriteString("        fix: ")
		if first, seen := firstWith[text]; seen {
			para("the same as "+first+" above", 13, 13)
			return
		}
		firstWith[text] = name
		para(text, 13, 13)
	}
	if fs := checks.Findings(c.ID); len(fs) > 0 {
		for _, f := range fs {
			fmt.Fprintf(&b, "  %-5s %s\n        ", f.Status, f.ID)
			para(f.When, 8, 8)
			if f.Fix != "" {
				fix(f.Template(f.Fix), f.ID)
			}
		}
		return b.String()
	}
	for _, fl := range c.Explain.Failures {
		fmt.Fprintf(&b, "  %-5s ", fl.Status)
		para(fl.Finding, 8, 8)
		fix(fl.Fix, fmt.Sprintf("%q", firstWords(fl.Finding, 6)))
	}
	return b.String()
}

// firstWords is the first n words of s, "…" when there are more: how a
// later finding names an earlier one that has no ID.
func firstWords(s string, n int) string {
	w := strings.Fields(s)
	if len(w) <= n {
		return s
	}
	return strings.Join(w[:n], " ") + " …"
}
