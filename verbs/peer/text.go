package peer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Inert makes a string that came from the other host (a Reject's or an
// Error's message, its host name, its step errors) safe to print on a
// terminal or in a one-line message: control characters (ESC, which
// starts colour and OSC sequences, and the newline that forges a second
// line among them), bytes that are not UTF-8 and the bidirectional
// overrides and isolates that reorder what follows them on screen are
// written as Go escapes (\x1b, \n, \u202e). A string without any is
// returned as it is. JSON keeps the raw value: the encoder escapes it.
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
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r < 0x100 && hostileRune(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		case hostileRune(r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
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

// hostileRune: C0 and C1 controls, DEL, the bidi embeddings and overrides
// (U+202A–U+202E), the isolates (U+2066–U+2069), and the marks and
// separators that break or reorder a line (U+200E, U+200F, U+2028,
// U+2029, U+061C).
func hostileRune(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r < 0xa0:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x200e, r == 0x200f, r == 0x2028, r == 0x2029, r == 0x061c:
		return true
	}
	return false
}
