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
	// Verbose prints the details and the expected value of passing checks
	// too, and never shortens a line.
	Verbose bool
	// Width is the terminal's width in columns (0: DefaultWidth). Every
	// line fits in it, but for a single word — a path — longer than a line.
	Width int
	// NotRun is how many checks of the catalog a --check selection left
	// out: a healthy verdict is then only the selected checks'.
	NotRun int
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
// with its mark and what was observed; for a check that is not ok, what was
// expected, its details and the fix; and a last line with the counts, the
// root cause and the exit code. Every line fits opt.Width: an ok line is
// shortened to one line (-v shows all of it), the rest wrap with a hanging
// indent, and never inside a command.
func WriteText(w io.Writer, r *Report, opt TextOptions) error {
	r = printable(r)
	t := textWriter{p: newPalette(opt.Color), width: normWidth(opt.Width), verbose: opt.Verbose}
	t.header(r)
	idw := 0
	for _, c := range r.Checks {
		idw = max(idw, len(c.ID))
	}
	// The summary starts after "mark code id  "; it wraps to the same
	// column, unless that leaves too narrow a column to read.
	t.col = len(marks[Pass]) + 1 + 3 + 1 + idw + 2
	t.rest = t.col
	if t.width-t.col < 40 {
		t.rest = detailIndent
	}
	for i := 0; i < len(r.Checks); i++ {
		// A run of checks skipped for the same reason (blocked by the same
		// failure, a level not asked for, a snapshot) is one line: the cause
		// is already on the screen, its echoes need not be.
		if n := skipRun(r.Checks[i:]); n >= 3 {
			t.skipRun(r.Checks[i:i+n], idw)
			i += n - 1
			continue
		}
		t.check(r.Checks[i], idw)
	}
	t.footer(r, opt.NotRun)
	_, err := io.WriteString(w, t.b.String())
	return err
}

// detailIndent is where details, the expected value and the fix start.
const detailIndent = 9

type textWriter struct {
	b         strings.Builder
	p         palette
	width     int
	col, rest int // the summary's column and its continuation indent
	verbose   bool
	shortened bool // an ok line was cut to fit: the footer says how to see it whole
}

// lines writes wrapped lines, colouring each one's text (c nil: none) but
// not its indent.
func (t *textWriter) lines(ls []string, c *color.Color) {
	for _, l := range ls {
		text := strings.TrimLeft(l, " ")
		indent := l[:len(l)-len(text)]
		if c != nil {
			text = c.Sprint(text)
		}
		t.b.WriteString(indent + text + "\n")
	}
}

// header is "rdmadoctor VERSION  host H  kernel K  level L  root R", its
// fields moved to a second line rather than cut when the line is too long.
func (t *textWriter) header(r *Report) {
	host := r.Host.Hostname
	if host == "" {
		host = "?"
	}
	fields := []string{"rdmadoctor " + r.Version, "host " + host, "kernel " + orQ(r.Host.Kernel), fmt.Sprintf("level %d", r.Level)}
	if r.Host.Root != "/" && r.Host.Root != "" {
		fields = append(fields, "root "+r.Host.Root)
	}
	if e := r.Host.Expect; e != nil {
		fields = append(fields, "expect "+expectText(e))
	}
	for _, l := range headerLines(fields, t.width) {
		t.b.WriteString(t.boldName(l) + "\n")
	}
	t.b.WriteString("\n")
}

// headerLines joins header fields with two spaces, a field that would pass
// the width moving whole to the next line, indented.
func headerLines(fields []string, width int) []string {
	var lines []string
	line := ""
	for _, f := range fields {
		if line != "" && len(line)+2+len(f) > width {
			lines = append(lines, line)
			line = "  " + f
			continue
		}
		if line != "" && line != "  " {
			line += "  "
		}
		line += f
	}
	return append(lines, line)
}

func (t *textWriter) boldName(line string) string {
	if rest, ok := strings.CutPrefix(line, "rdmadoctor "); ok {
		return t.p.bold.Sprint("rdmadoctor") + " " + rest
	}
	return line
}

// check writes one check: its line, and unless it is ok (or -v), what was
// expected, the details and the fix.
func (t *textWriter) check(c CheckResult, idw int) {
	col := t.p.status(c.Status)
	fmt.Fprintf(&t.b, "%s %3d %-*s  ", col.Sprint(marks[c.Status]), c.Code, idw, c.ID)
	full := c.Status != Pass || t.verbose
	if !full {
		line := fitLine(c.Summary, t.width-t.col)
		t.shortened = t.shortened || line != c.Summary
		t.b.WriteString(line + "\n")
		return
	}
	t.lines(Wrap(c.Summary, t.width, t.col, t.rest), nil)
	if c.Expected != "" && c.Status != Skip {
		lead := strings.Repeat(" ", detailIndent) + "expected: "
		t.b.WriteString(strings.Repeat(" ", detailIndent))
		t.lines(Wrap("expected: "+c.Expected, t.width, detailIndent, len(lead)), t.p.dim)
	}
	for _, d := range c.Details {
		t.b.WriteString(strings.Repeat(" ", detailIndent))
		t.lines(Wrap(d, t.width, detailIndent, detailIndent+2), nil)
	}
	if c.Remedy == "" || c.Status == Pass || c.Status == Skip {
		return
	}
	const fixIndent = detailIndent + len("fix: ")
	t.b.WriteString(strings.Repeat(" ", detailIndent) + t.p.bold.Sprint("fix:") + " ")
	for i, para := range strings.Split(strings.TrimRight(c.Remedy, "\n"), "\n") {
		if i > 0 {
			t.b.WriteString(strings.Repeat(" ", fixIndent))
		}
		// A list item ("- systemd services: …") hangs under its text.
		rest := fixIndent
		if strings.HasPrefix(para, "- ") {
			rest += 2
		}
		t.lines(Wrap(para, t.width, fixIndent, rest), nil)
	}
}

// skipRun writes a run of checks skipped for one reason as one entry.
func (t *textWriter) skipRun(run []CheckResult, idw int) {
	ids := make([]string, len(run))
	for i, c := range run {
		ids[i] = c.ID
	}
	span := fmt.Sprintf("… %d", run[len(run)-1].Code)
	fmt.Fprintf(&t.b, "%s %3d %-*s  ", t.p.skip.Sprint(marks[Skip]), run[0].Code, idw, span)
	// The padding lines the summary up on the screen, where "…" is one
	// column; in bytes the summary starts two later.
	first := t.col + len(span) - utf8.RuneCountInString(span)
	text := fmt.Sprintf("%s — %d checks: %s", run[0].Summary, len(run), strings.Join(ids, ", "))
	t.lines(Wrap(text, t.width, first, t.rest), t.p.skip)
}

// footer is the counts, the verdict and the exit code. A run restricted
// with --check says its verdict is the selected checks' and how many
// checks it did not run: "healthy" must never be read as the host's.
func (t *textWriter) footer(r *Report, notRun int) {
	s := r.Summary
	counts := fmt.Sprintf("%d pass, %d warn, %d fail, %d skip, %d error", s.Pass, s.Warn, s.Fail, s.Skip, s.Error)
	selected := ""
	if notRun > 0 {
		selected = " in the selected checks"
	}
	var verdict string
	var c *color.Color
	switch {
	case r.RootCause != nil && r.Verdict == Unknown:
		// Nothing failed: the root cause is a check that could not look,
		// which is no fault of the host and must not read as one.
		verdict, c = "could not judge: "+*r.RootCause+" could not look", t.p.errc
	case r.RootCause != nil:
		verdict, c = "root cause: "+*r.RootCause, t.p.fail
	case r.ExitCode != ExitOK:
		verdict, c = "partial report: the run ended before every check finished", t.p.errc
	case s.Warn > 0:
		verdict, c = fmt.Sprintf("no failures%s, %d warning(s) to read", selected, s.Warn), t.p.warn
	case notRun > 0:
		verdict, c = "selected checks healthy", t.p.pass
	default:
		verdict, c = "healthy", t.p.pass
	}
	tail := fmt.Sprintf(" — exit %d", r.ExitCode)
	// The verdict is one unit on the screen: it moves to its own line
	// rather than breaking.
	switch {
	case len(counts)+len(" — ")+len(verdict)+len(tail) <= t.width:
		t.b.WriteString("\n" + counts + " — " + c.Sprint(verdict) + tail + "\n")
	case 2+len(verdict)+len(tail) <= t.width:
		t.b.WriteString("\n" + counts + "\n  " + c.Sprint(verdict) + tail + "\n")
	default:
		t.b.WriteString("\n" + counts + "\n  ")
		t.lines(Wrap(verdict+tail, t.width, 2, 2), c)
	}
	if notRun > 0 {
		total := len(r.Checks) + notRun
		t.lines(Wrap(fmt.Sprintf("%d of %d checks not run (--check): run without --check for the host's verdict", notRun, total), t.width, 0, 2), nil)
	}
	if t.shortened {
		t.lines(Wrap("lines ending in … are shortened; -v prints them whole", t.width, 0, 2), t.p.dim)
	}
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
		return Escape(e.File) + " (no class for this host)"
	}
	return fmt.Sprintf("class %s (%s)", Escape(e.Class), Escape(e.File))
}

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// printable returns a copy of the report whose strings cannot drive the
// terminal nor forge a line of it: a snapshot comes from another host, and
// a hostname or an attribute holding ESC sequences, a newline or a bidi
// override must not reach the screen as such (Escape). A remedy's own line
// breaks are its steps and are kept; each step is escaped.
func printable(r *Report) *Report {
	c := *r
	c.Host.Hostname, c.Host.Kernel, c.Host.Root = Escape(r.Host.Hostname), Escape(r.Host.Kernel), Escape(r.Host.Root)
	if r.RootCause != nil {
		root := Escape(*r.RootCause)
		c.RootCause = &root
	}
	c.Checks = make([]CheckResult, len(r.Checks))
	for i, ch := range r.Checks {
		ch.ID, ch.Summary, ch.Expected = Escape(ch.ID), Escape(ch.Summary), Escape(ch.Expected)
		ch.Remedy = EscapeParagraphs(ch.Remedy)
		det := make([]string, len(ch.Details))
		for j, d := range ch.Details {
			det[j] = Escape(d)
		}
		ch.Details = det
		c.Checks[i] = ch
	}
	return &c
}
