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
	'↔': "<->",
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
			if t, ok := transliterations[r]; ok {
				b.WriteString(t)
			} else {
				b.WriteByte('?')
			}
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
