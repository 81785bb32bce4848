// Package adapter maps the one verdict (report.Judge, over a run or a kept
// state) onto what each fleet program understands: node-problem-detector's
// exit codes and message, the Slurm node's drain and resume, systemd's
// success statuses. The commands (cmd/rdmadoctor) parse flags, read files
// and call programs; what a verdict means to each program is decided here,
// once, and tested against one table (docs/verdict.md).
package adapter

import "strings"

// transliterations for the characters the reports use; any other
// non-ASCII character becomes '?'.
var transliterations = map[rune]string{
	'—': "-", '–': "-", '→': "->", '←': "<-", '…': "...", '×': "x", 'µ': "u", 'μ': "u",
	'≠': "!=", '≤': "<=", '≥': ">=", '±': "+-", '‘': "'", '’': "'", '“': `"`, '”': `"`, '°': "deg",
	'↔': "<->", '−': "-", '≈': "~",
}

// ASCIILine makes s one line of printable ASCII of at most max bytes:
// known characters transliterated, others '?', control characters and
// runs of blanks one space, cut at a word boundary with "..." when long.
// Being ASCII, the cut can never fall inside a character.
func ASCIILine(s string, max int) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if b.Len() > 4*max {
			break // far past the cut: the rest cannot show
		}
		switch {
		case r == ' ' || (r < 0x20) || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u00a0':
			space = b.Len() > 0
			continue
		case r < 0x7f:
			if space {
				b.WriteByte(' ')
				space = false
			}
			b.WriteRune(r)
		default:
			if space {
				b.WriteByte(' ')
				space = false
			}
			b.WriteString(asciiRune(r))
		}
	}
	return cutASCII(b.String(), max)
}

// cutASCII shortens s to max bytes, at the last space when one is near.
func cutASCII(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const ell = "..."
	keep := s[:max-len(ell)]
	if i := strings.LastIndexByte(keep, ' '); i > max/2 {
		keep = keep[:i]
	}
	return keep + ell
}

// ASCIIText is s for a terminal whose locale is not UTF-8 (LANG=C): the
// characters the reports use transliterated, any other non-ASCII rune
// '?', lines and their layout kept.
func ASCIIText(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 {
			b.WriteRune(r)
		} else {
			b.WriteString(asciiRune(r))
		}
	}
	return b.String()
}

// asciiRune spells a non-ASCII rune in ASCII: its transliteration, a
// space for a no-break space, else '?'.
func asciiRune(r rune) string {
	if t, ok := transliterations[r]; ok {
		return t
	}
	if r == '\u00a0' {
		return " "
	}
	return "?"
}

// UTF8Locale tells from the locale variables (LC_ALL, then LC_CTYPE, then
// LANG, as setlocale reads them; get is os.Getenv) whether the terminal
// takes UTF-8. No locale at all is the C locale: ASCII.
func UTF8Locale(get func(string) string) bool {
	for _, k := range []string{"LC_ALL", "LC_CTYPE", "LANG"} {
		if v := get(k); v != "" {
			v = strings.ToLower(v)
			return strings.Contains(v, "utf-8") || strings.Contains(v, "utf8")
		}
	}
	return false
}
