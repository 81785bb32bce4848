package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
)

// cmdExplain is `rdmadoctor explain ID|CODE`: what a check judges, why it
// matters, what runs before it, and every finding it can report with its
// fix — folded to the terminal's width like the report, never inside a
// command, so a fix can be copied as printed.
func cmdExplain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
		fmt.Fprintf(stdout, "usage: rdmadoctor explain ID|CODE\n  what a check judges, why it matters, what runs before it, every finding it can report and its fix\n  (rdmadoctor list: every ID and code)\n")
		return 0
	}
	if len(args) != 1 {
		fmt.Fprintf(stderr, "rdmadoctor: explain takes one check ID or code; valid checks: %s\n", strings.Join(checks.IDs(), ", "))
		return report.ExitUsage
	}
	c, ok := checks.Lookup(args[0])
	if !ok {
		c, ok = checks.LookupPeer(args[0])
	}
	if !ok {
		fmt.Fprintf(stderr, "rdmadoctor: explain: %s\n", unknownCheck("", args[0], allCheckIDs()))
		return report.ExitUsage
	}
	io.WriteString(stdout, explainText(c, textWidth(stdout)))
	return 0
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
	if fs := checks.Findings(c.ID); len(fs) > 0 {
		for _, f := range fs {
			fmt.Fprintf(&b, "  %-5s %s\n        ", f.Status, f.ID)
			para(f.When, 8, 8)
			if f.Fix != "" {
				b.WriteString("        fix: ")
				para(f.Template(f.Fix), 13, 13)
			}
		}
		return b.String()
	}
	for _, fl := range c.Explain.Failures {
		fmt.Fprintf(&b, "  %-5s ", fl.Status)
		para(fl.Finding, 8, 8)
		b.WriteString("        fix: ")
		para(fl.Fix, 13, 13)
	}
	return b.String()
}
