package peer

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Inert makes a string that came from the other host (a client's
// handshake error, its session child's last words, a peer's message)
// safe for the server's log, which a person reads on a terminal or in
// the journal: control characters (ESC, which starts colour and OSC
// sequences, and the newline that forges a second log line among
// them), bytes that are not UTF-8, format characters (the bidi
// overrides that reorder what follows on screen) and the line
// separators are written as escapes (\x1b, \n, \u202e). A string
// without any is returned as it is. The same characters as the text
// report's report.Escape, which this package cannot import.
func Inert(s string) string {
	if !hasHostile(s) {
		return s
	}
	var b strings.Builder
	for i, w := 0, 0; i < len(s); i += w {
		r, n := utf8.DecodeRuneInString(s[i:])
		w = n
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i]) // a byte that is not UTF-8
		case !hostileRune(r):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	return b.String()
}

func hasHostile(s string) bool {
	for i, w := 0, 0; i < len(s); i += w {
		r, n := utf8.DecodeRuneInString(s[i:])
		w = n
		if (r == utf8.RuneError && n <= 1) || hostileRune(r) {
			return true
		}
	}
	return false
}

// hostileRune is a character a terminal acts on or does not show, as
// the text report judges them: C0 and C1 controls and DEL, the format
// characters (the bidi embeddings, overrides, isolates and marks, the
// zero-width joiners) and the line and paragraph separators.
func hostileRune(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r < 0xa0) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Cf, r)
}
