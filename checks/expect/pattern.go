package expect

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report/editdist"
)

// Pattern is the value of a string key: one or more alternatives, each a
// literal or a path.Match glob; an observed value matches when any
// alternative does. A fleet in a rolling upgrade runs two firmware
// versions at once, so a class must be able to accept both:
//
//	mlx5_*.fw = 16.35.2000
//	mlx5_*.fw = "16.35.*"
//	mlx5_*.fw = ["16.35.*", "16.36.2000"]
type Pattern []string

// hasMeta reports whether an alternative is a glob rather than a literal.
func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// valueMatch is path.Match for values, which are not paths: '/' is an
// ordinary character ("16* " matches "16.0 GT/s PCIe"), so it is swapped
// for one no value holds on both sides.
func valueMatch(glob, s string) bool {
	return globMatch(strings.ReplaceAll(glob, "/", "\x00"), strings.ReplaceAll(s, "/", "\x00"))
}

// Match reports whether s matches one of the alternatives.
func (p Pattern) Match(s string) bool {
	for _, a := range p {
		if a == s || hasMeta(a) && valueMatch(a, s) {
			return true
		}
	}
	return false
}

// String spells the pattern as the file does: one alternative bare (or
// quoted when it would read as a list or a quote), several as a list.
func (p Pattern) String() string {
	if len(p) == 1 && readsBare(p[0]) {
		return p[0]
	}
	if len(p) == 1 {
		return `"` + p[0] + `"`
	}
	return p.list()
}

// list spells the pattern as a list, however many items it has.
func (p Pattern) list() string {
	q := make([]string, len(p))
	for i, a := range p {
		q[i] = `"` + a + `"`
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// MatchFW matches a firmware string against the pattern by its version
// part: mlx5 reports fw_ver as "16.35.2000 (MT_0000000008)" (the board's
// PSID in parentheses), and a class says the version, "16.35.2000". An
// alternative that spells the whole string (PSID included) matches it
// too, so a class can pin the board as well.
func (p Pattern) MatchFW(fwVer string) bool {
	fw := strings.TrimSpace(fwVer)
	return p.Match(fw) || p.Match(FWVersion(fw))
}

// FWVersion is the version part of a fw_ver string: the text before the
// first blank or '(' ("16.35.2000 (MT_0000000008)" → "16.35.2000").
func FWVersion(fwVer string) string {
	s := strings.TrimSpace(fwVer)
	if i := strings.IndexAny(s, " \t("); i >= 0 {
		s = s[:i]
	}
	return s
}

// readsBare reports whether an item written without quotes reads back as
// itself. Only such an item can hold a '"' (quoted and list items cannot),
// so quoting the others is always possible.
func readsBare(s string) bool {
	return s != "" && !isList(s) && !strings.HasPrefix(s, `"`) && strings.TrimSpace(s) == s
}

// isList reports whether a value is written as a list: [ "a", "b" ]. A
// glob may start with '[' too ([0-9]*), so only brackets around quotes, a
// comma or nothing make a list.
func isList(v string) bool {
	if !strings.HasPrefix(v, "[") || !strings.HasSuffix(v, "]") || len(v) < 2 {
		return false
	}
	inner := strings.TrimSpace(v[1 : len(v)-1])
	return inner == "" || strings.HasPrefix(inner, `"`) || strings.Contains(inner, ",")
}

// splitItems reads a value as its items: a list's elements (quoted or
// bare, separated by commas, a trailing comma allowed), one quoted string,
// or the bare value. Quotes have no escapes: an item cannot hold '"' (nor
// '#', which starts a comment).
func splitItems(v string) ([]string, error) {
	switch {
	case isList(v):
		return splitList(v[1 : len(v)-1])
	case strings.HasPrefix(v, `"`):
		s, rest, err := quoted(v)
		if err == nil && rest != "" {
			err = fmt.Errorf("text after the closing quote: %q (a list is written [\"a\", \"b\"])", clip(rest))
		}
		return []string{s}, err
	}
	return []string{v}, nil
}

func splitList(inner string) ([]string, error) {
	var items []string
	rest := strings.TrimSpace(inner)
	for rest != "" {
		var item string
		if strings.HasPrefix(rest, `"`) {
			var err error
			if item, rest, err = quoted(rest); err != nil {
				return nil, err
			}
		} else {
			item, rest, _ = strings.Cut(rest, ",")
			item, rest = strings.TrimSpace(item), ","+rest
			if strings.Contains(item, `"`) {
				return nil, fmt.Errorf("list item %q: a quote inside an item", clip(item))
			}
		}
		if item == "" {
			return nil, fmt.Errorf("empty item in the list")
		}
		items = append(items, item)
		rest = strings.TrimSpace(rest)
		if rest != "" && !strings.HasPrefix(rest, ",") {
			return nil, fmt.Errorf("want ',' between list items, got %q", clip(rest))
		}
		rest = strings.TrimSpace(strings.TrimPrefix(rest, ","))
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("empty list: give at least one value")
	}
	return items, nil
}

// quoted reads a "..." string at the start of s and returns it and what
// follows, trimmed.
func quoted(s string) (string, string, error) {
	end := strings.IndexByte(s[1:], '"')
	if end < 0 {
		return "", "", fmt.Errorf("unterminated quote in %q", clip(s))
	}
	return s[1 : end+1], strings.TrimSpace(s[end+2:]), nil
}

// parsePattern reads a string key's value; check validates each item
// (a literal or a glob) and may return its canonical spelling.
func parsePattern(v string, check func(item string) (string, error)) (Pattern, error) {
	items, err := splitItems(v)
	if err != nil {
		return nil, err
	}
	p := make(Pattern, 0, len(items))
	for _, it := range items {
		if it == "" {
			return nil, fmt.Errorf("an empty value")
		}
		if hasMeta(it) {
			if _, err := path.Match(it, ""); err != nil {
				return nil, fmt.Errorf("%q: bad glob (path.Match syntax: * ? [a-z])", clip(it))
			}
		}
		c, err := check(it)
		if err != nil {
			return nil, err
		}
		p = append(p, c)
	}
	return p, nil
}

// enumItem accepts a canonical value (any case) or a glob that matches at
// least one of them.
func enumItem(valid ...string) func(string) (string, error) {
	return func(it string) (string, error) {
		if !hasMeta(it) {
			return oneOf(it, valid...)
		}
		if !Pattern([]string{it}).matchesAny(valid) {
			return "", fmt.Errorf("%q matches none of %s", clip(it), strings.Join(valid, ", "))
		}
		return it, nil
	}
}

func (p Pattern) matchesAny(names []string) bool {
	for _, n := range names {
		if p.Match(n) {
			return true
		}
	}
	return false
}

// MatchPCIeSpeed matches a trained link speed: a literal alternative
// ("16.0 GT/s PCIe", "16 GT/s") by its GT/s number, a glob by the text
// sysfs shows (raw) or its short form ("16.0 GT/s").
func (p Pattern) MatchPCIeSpeed(gts float64, raw, short string) bool {
	for _, a := range p {
		if hasMeta(a) {
			if valueMatch(a, raw) || valueMatch(a, short) {
				return true
			}
		} else if math.Abs(PCIeGTs(a)-gts) <= 0.01 {
			return true
		}
	}
	return false
}

// Nearest is the candidate closest to name by edit distance, for a
// "did you mean" — "" when none is close enough to be a likely typo (at
// most a third of the longer name's length, and at least 1 … 3 edits).
func Nearest(name string, candidates []string) string {
	best, bestD := "", math.MaxInt
	for _, c := range candidates {
		// Beyond 3 edits nothing is close enough to suggest.
		if d := editdist.Distance(name, c, 3); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" || bestD > max(1, min(3, max(len(name), len(best))/3)) {
		return ""
	}
	return best
}

// DidYouMean is Nearest as a message suffix: " (did you mean mlx5_0?)".
func DidYouMean(name string, candidates []string) string {
	if n := Nearest(name, candidates); n != "" {
		return " (did you mean " + n + "?)"
	}
	return ""
}

// portName names a port rule's unit: "mlx5_0/1", "mlx5_*/*".
func portName(glob string, port int) string {
	if port == 0 {
		return glob + "/*"
	}
	return glob + "/" + strconv.Itoa(port)
}
