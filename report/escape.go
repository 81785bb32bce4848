package report

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Terminal safety. rdmadoctor prints strings it did not write: a hostname,
// a firmware version or a product name read from sysfs (of this host, or of
// a snapshot sent in by someone else), the fields of the reports summarize
// reads, a peer's reply. Any of them may hold ESC (CSI, OSC: recolour the
// screen, set the window title, write a hyperlink), C1 controls (0x9b is a
// one-byte CSI on some terminals), a newline that starts a forged line of
// the report, bidirectional overrides that make "pass" read as "liaf", or
// invisible characters that hide text. Every renderer for people passes
// such strings through Escape; the JSON report keeps them raw, as read.

// Escape returns s as text that cannot drive a terminal nor start a line of
// its own: each character that is not plain printable text is written as a
// visible escape, in the spelling of a Go string literal —
//
//	\n \r \t        newline, carriage return, tab
//	\xNN            any other C0 control, DEL, and each byte that is not
//	                valid UTF-8 (the byte itself)
//	\uNNNN          C1 controls (U+0080–U+009F), format characters (Unicode
//	                Cf: the bidi embeddings and overrides U+202A–U+202E and
//	                isolates U+2066–U+2069, LRM, RLM, the zero-width space
//	                and joiners, U+FEFF), and the line and paragraph
//	                separators U+2028, U+2029
//	\UNNNNNNNN      a format character beyond U+FFFF (the tag characters)
//
// Everything else — ASCII text, "—", "×", "µ", CJK in a product name — is
// kept as it is. A backslash is not doubled: the output is for a person's
// eyes, not to be parsed back, and commands in remedies (grep patterns)
// must read as they are typed.
func Escape(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i]) // a byte that is not UTF-8
			i++
			continue
		}
		writeEscaped(&b, r)
		i += n
	}
	return b.String()
}

// EscapeParagraphs is Escape for a text whose own line breaks are meant —
// a remedy of several steps: each line is escaped, the breaks kept.
func EscapeParagraphs(s string) string {
	if clean(s) {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Escape(l)
	}
	return strings.Join(lines, "\n")
}

// clean reports whether s needs no escaping; the common case, ASCII text,
// costs one pass over the bytes.
func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return false
		} else if c >= 0x80 {
			return cleanRunes(s[i:])
		}
	}
	return true
}

func cleanRunes(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n <= 1) || hostile(r) {
			return false
		}
		i += n
	}
	return true
}

// hostile is a character a terminal acts on or does not show: controls
// (C0, DEL, C1), format characters and the line and paragraph separators.
func hostile(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r < 0xa0) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Cf, r)
}

func writeEscaped(b *strings.Builder, r rune) {
	switch {
	case !hostile(r):
		b.WriteRune(r)
	case r == '\n':
		b.WriteString(`\n`)
	case r == '\r':
		b.WriteString(`\r`)
	case r == '\t':
		b.WriteString(`\t`)
	case r < 0x80:
		fmt.Fprintf(b, `\x%02x`, r)
	case r <= 0xffff:
		fmt.Fprintf(b, `\u%04x`, r)
	default:
		fmt.Fprintf(b, `\U%08x`, r)
	}
}
