package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/fatih/color"
)

// TextOptions shape the person-facing report.
type TextOptions struct {
	// Color turns on ANSI colour. The caller decides once (terminal,
	// NO_COLOR, --no-color); the renderer never looks at the environment.
	Color bool
	// Verbose prints the details of passing checks too.
	Verbose bool
}

type palette struct {
	pass, warn, fail, skip, errc, dim, bold *color.Color
}

func newPalette(on bool) palette {
	mk := func(a ...color.Attribute) *color.Color {
		c := color.New(a...)
		if on {
			c.EnableColor()
		} else {
			c.DisableColor()
		}
		return c
	}
	return palette{
		pass: mk(color.FgGreen), warn: mk(color.FgYellow), fail: mk(color.FgRed, color.Bold),
		skip: mk(color.FgHiBlack), errc: mk(color.FgMagenta, color.Bold), dim: mk(color.Faint),
		bold: mk(color.Bold),
	}
}

// marks are fixed-width, so the columns line up with or without colour.
var marks = map[Status]string{Pass: "ok  ", Warn: "WARN", Fail: "FAIL", Skip: "skip", Error: "ERR "}

func (p palette) status(s Status) *color.Color {
	switch s {
	case Pass:
		return p.pass
	case Warn:
		return p.warn
	case Fail:
		return p.fail
	case Error:
		return p.errc
	}
	return p.skip
}

// WriteText renders the report for a person: a header, one line per check
// with its mark, what was observed and what was expected, indented details
// and the fix, and a last line with the counts, the root cause and the exit
// code.
func WriteText(w io.Writer, r *Report, opt TextOptions) error {
	r = printable(r)
	p := newPalette(opt.Color)
	var b strings.Builder
	host := r.Host.Hostname
	if host == "" {
		host = "?"
	}
	fmt.Fprintf(&b, "%s %s  host %s  kernel %s  level %d", p.bold.Sprint("rdmadoctor"), r.Version, host, orQ(r.Host.Kernel), r.Level)
	if r.Host.Root != "/" && r.Host.Root != "" {
		fmt.Fprintf(&b, "  root %s", r.Host.Root)
	}
	if e := r.Host.Expect; e != nil {
		fmt.Fprintf(&b, "  expect %s", expectText(e))
	}
	b.WriteString("\n\n")
	width := 0
	for _, c := range r.Checks {
		width = max(width, len(c.ID))
	}
	for i := 0; i < len(r.Checks); i++ {
		c := r.Checks[i]
		// A run of checks skipped for the same reason (blocked by the same
		// failure, a level not asked for, a snapshot) is one line: the cause
		// is already on the screen, its echoes need not be.
		if n := skipRun(r.Checks[i:]); n >= 3 {
			var ids []string
			for _, b := range r.Checks[i : i+n] {
				ids = append(ids, b.ID)
			}
			fmt.Fprintf(&b, "%s %3d %-*s  %s\n", p.skip.Sprint(marks[Skip]), c.Code, width, fmt.Sprintf("… %d", r.Checks[i+n-1].Code),
				p.skip.Sprintf("%s — %d checks: %s", c.Summary, n, strings.Join(ids, ", ")))
			i += n - 1
			continue
		}
		col := p.status(c.Status)
		line := c.Summary
		if c.Expected != "" && c.Status != Skip {
			line += p.dim.Sprintf("  (expected: %s)", c.Expected)
		}
		fmt.Fprintf(&b, "%s %3d %-*s  %s\n", col.Sprint(marks[c.Status]), c.Code, width, c.ID, line)
		if c.Status != Pass || opt.Verbose {
			for _, d := range c.Details {
				fmt.Fprintf(&b, "         %s\n", d)
			}
		}
		if c.Remedy != "" && c.Status != Pass && c.Status != Skip {
			for i, l := range strings.Split(strings.TrimRight(c.Remedy, "\n"), "\n") {
				lead := "    "
				if i == 0 {
					lead = "fix:"
				}
				fmt.Fprintf(&b, "         %s %s\n", p.bold.Sprint(lead), l)
			}
		}
	}
	s := r.Summary
	fmt.Fprintf(&b, "\n%d pass, %d warn, %d fail, %d skip, %d error", s.Pass, s.Warn, s.Fail, s.Skip, s.Error)
	if r.RootCause != nil {
		fmt.Fprintf(&b, " — root cause: %s — exit %d\n", p.fail.Sprint(*r.RootCause), r.ExitCode)
	} else if r.ExitCode != ExitOK {
		fmt.Fprintf(&b, " — %s — exit %d\n", p.errc.Sprint("partial report: the run ended before every check finished"), r.ExitCode)
	} else if s.Warn > 0 {
		fmt.Fprintf(&b, " — %s — exit %d\n", p.warn.Sprintf("no failures, %d warning(s) to read", s.Warn), r.ExitCode)
	} else {
		fmt.Fprintf(&b, " — %s — exit %d\n", p.pass.Sprint("healthy"), r.ExitCode)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// skipRun counts the leading checks skipped for the same reason.
func skipRun(cs []CheckResult) int {
	if len(cs) == 0 || cs[0].Status != Skip {
		return 0
	}
	n := 1
	for n < len(cs) && cs[n].Status == Skip && cs[n].Summary == cs[0].Summary {
		n++
	}
	return n
}

// expectText names the expectations that judged the host.
func expectText(e *ExpectInfo) string {
	if e.Class == "" {
		return safe(e.File) + " (no class for this host)"
	}
	return fmt.Sprintf("class %s (%s)", safe(e.Class), safe(e.File))
}

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// printable returns a copy of the report whose strings cannot drive the
// terminal: a snapshot comes from another host, and a hostname or an
// attribute holding ESC sequences must not reach the screen as such. Control
// characters other than newline become visible \xNN text; invalid UTF-8
// becomes U+FFFD.
func printable(r *Report) *Report {
	c := *r
	c.Host.Hostname, c.Host.Kernel, c.Host.Root = safe(r.Host.Hostname), safe(r.Host.Kernel), safe(r.Host.Root)
	c.Checks = make([]CheckResult, len(r.Checks))
	for i, ch := range r.Checks {
		ch.Summary, ch.Expected, ch.Remedy = safe(ch.Summary), safe(ch.Expected), safe(ch.Remedy)
		det := make([]string, len(ch.Details))
		for j, d := range ch.Details {
			det[j] = safe(d)
		}
		ch.Details = det
		c.Checks[i] = ch
	}
	return &c
}

func safe(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || (r < 0x20 && r != '\n') || (r >= 0x7f && r < 0xa0) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if (r < 0x20 && r != '\n') || (r >= 0x7f && r < 0xa0) {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
