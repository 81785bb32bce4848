package report

import "strings"

// Widths here are counted in bytes. For UTF-8 a character never takes more
// terminal columns than it has bytes (wide glyphs are 3–4 bytes, 2
// columns), so a line that fits in bytes fits on the screen, and tools that
// count bytes (mawk's length, cut -b) agree that it fits.

// DefaultWidth is the width of the text report when neither the terminal
// nor COLUMNS says otherwise.
const DefaultWidth = 100

// minWidth keeps a tiny COLUMNS from folding every word onto its own line.
const minWidth = 40

// normWidth is the width a renderer uses for the width asked for.
func normWidth(w int) int {
	if w <= 0 {
		return DefaultWidth
	}
	return max(w, minWidth)
}

// units splits text into what a line may break between: words, where a
// `backtick-quoted` span (a command, or a path) together with the
// punctuation glued to it — "(`ip link show eth0`," — is one word, so no
// line ever breaks inside a command.
func units(s string) []string {
	var out []string
	i := 0
	for i < len(s) {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) {
			break
		}
		start := i
		for i < len(s) && !isSpace(s[i]) {
			if s[i] == '`' {
				if k := strings.IndexByte(s[i+1:], '`'); k >= 0 {
					i += k + 2
					continue
				}
			}
			i++
		}
		out = append(out, s[start:i])
	}
	return out
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }

// wline is one output line: its indentation and its text.
type wline struct {
	indent int
	text   string
}

// wrapLines folds s into lines of at most width bytes. The first line
// starts at column first (the caller has written what comes before it);
// the others are indented to rest — a hanging indent. Lines break only
// between units. A command too long for any line is put on lines of its
// own and broken between its words with shell line continuations (" \"),
// which a shell reads back as one command; a single word longer than a
// line (a long path) is never broken and overflows.
func wrapLines(s string, width, first, rest int) []wline {
	var lines []wline
	cur, start := "", first
	flush := func() {
		lines = append(lines, wline{start, cur})
		cur, start = "", rest
	}
	for _, u := range units(s) {
		switch {
		case cur != "" && start+len(cur)+1+len(u) <= width:
			cur += " " + u
			continue
		case cur != "":
			flush()
		}
		// A first line too short for its first word (a narrow terminal,
		// a long check ID) is left empty rather than overflowing.
		if len(lines) == 0 && start > rest && start+len(u) > width && rest+len(u) <= width {
			flush()
		}
		if start+len(u) <= width || !strings.Contains(u, "`") {
			cur = u
			continue
		}
		for i, piece := range continuedCommand(u, width-start, width-start-2) {
			if i > 0 {
				start = rest + 2
			}
			cur = piece
			flush()
		}
	}
	if cur != "" || len(lines) == 0 {
		flush()
	}
	return lines
}

// continuedCommand breaks one over-long command unit into pieces: the first
// at most firstW bytes, the others at most restW, every piece but the last
// ending in " \". It breaks only at spaces outside quotes (a backslash and
// newline inside '…' would change the command), and after a shell operator
// (&&, ||, |, ;) when the pieces still fit, so each line reads as a step.
func continuedCommand(u string, firstW, restW int) []string {
	var out []string
	cur, w := "", firstW
	add := func(s string) {
		if cur != "" && len(cur)+1+len(s)+2 > w {
			out = append(out, cur+" \\")
			cur, w = "", restW
		}
		if cur == "" {
			cur = s
		} else {
			cur += " " + s
		}
	}
	for _, step := range shellSteps(shellWords(u)) {
		if len(step)+2 <= restW {
			add(step)
			continue
		}
		for _, wd := range shellWords(step) {
			add(wd)
		}
	}
	return append(out, cur)
}

// shellSteps joins words into the steps of a command line, each ending
// after a shell operator.
func shellSteps(words []string) []string {
	var steps []string
	cur := ""
	for _, wd := range words {
		if cur != "" {
			cur += " "
		}
		cur += wd
		if wd == "&&" || wd == "||" || wd == "|" || strings.HasSuffix(wd, ";") {
			steps = append(steps, cur)
			cur = ""
		}
	}
	if cur != "" {
		steps = append(steps, cur)
	}
	return steps
}

// shellWords splits at the spaces a shell would split at: not inside
// single or double quotes. Runs of spaces stay inside the words they
// follow, so joining the words with single spaces gives the text back.
func shellWords(s string) []string {
	var out []string
	var quote byte
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == ' ' && i > start:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// Wrap folds s as the text report and explain do (see wrapLines) and
// returns the lines: the first without indentation (it follows what the
// caller printed at column first), the others indented. A line break in s
// starts a new line indented to rest.
func Wrap(s string, width, first, rest int) []string {
	width = normWidth(width)
	var out []string
	for i, para := range strings.Split(s, "\n") {
		f := first
		if i > 0 {
			f = rest
		}
		for j, l := range wrapLines(para, width, f, rest) {
			if i == 0 && j == 0 {
				out = append(out, l.text)
				continue
			}
			out = append(out, strings.Repeat(" ", l.indent)+l.text)
		}
	}
	return out
}

// fitLine shortens s to one line of at most width bytes, cut between units
// and marked " …" when something was left out.
func fitLine(s string, width int) string {
	if len(s) <= width {
		return s
	}
	const more = " …"
	cur := ""
	for _, u := range units(s) {
		next := u
		if cur != "" {
			next = cur + " " + u
		}
		if len(next)+len(more) > width {
			break
		}
		cur = next
	}
	if cur == "" { // the first word alone is too long: cut it at a character
		cur = cutBytes(s, width-len(more))
	}
	return cur + more
}

// cutBytes is the longest prefix of s of at most n bytes that ends on a
// character boundary.
func cutBytes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
