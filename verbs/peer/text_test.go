package peer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestInert(t *testing.T) {
	for in, want := range map[string]string{
		"plain — text × 2 µs":              "plain — text × 2 µs",
		"a\nb":                             `a\nb`,
		"\x1b[31mred\x1b]8;;http://x/\x07": `\x1b[31mred\x1b]8;;http://x/\x07`,
		"exe\u202etxt.sh":                  `exe\u202etxt.sh`,
		"zero\u200bwidth\u2028line":        `zero\u200bwidth\u2028line`,
		"c1\u0085\u009b\t":                 `c1\u0085\u009b\t`,
		"bad \xff byte":                    `bad \xff byte`,
		"tag \U000E0041":                   `tag \U000e0041`,
		"kept \uFFFD":                      "kept \uFFFD",
	} {
		if got := Inert(in); got != want {
			t.Errorf("Inert(%q) = %q, want %q", in, got, want)
		}
	}
}

// Whatever a peer sends, the result is one line of valid UTF-8 without a
// character a terminal acts on, and a clean string is kept as it is.
func FuzzInert(f *testing.F) {
	for _, s := range []string{"", "ok", "a\nb", "\x1b]0;title\x07", "\u202e\u2066", "\xff\xfe", "é\u0301"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Inert(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Inert(%q) = %q: not UTF-8", s, out)
		}
		for _, r := range out {
			if hostileRune(r) {
				t.Fatalf("Inert(%q) = %q keeps %U", s, out, r)
			}
		}
		if !hasHostile(s) && out != s {
			t.Fatalf("Inert(%q) = %q changed a clean string", s, out)
		}
		if strings.Contains(out, "\n") {
			t.Fatalf("Inert(%q) has a newline", s)
		}
	})
}
