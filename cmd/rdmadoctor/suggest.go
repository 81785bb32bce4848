package main

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report/editdist"
)

// suggest returns the candidates closest to word, best first: within a
// third of the word's length (at least 2 edits), or the one that has word
// as a dot-separated part ("memlock" → limits.memlock). None when nothing
// is close.
func suggest(word string, candidates []string) []string {
	w := strings.ToLower(word)
	limit := max(2, len(w)/3)
	best, bestD := []string(nil), limit+1
	for _, c := range candidates {
		d := editdist.Distance(w, strings.ToLower(c), limit)
		if d > limit && !hasPart(c, w) {
			continue
		}
		if d > limit {
			d = limit
		}
		switch {
		case d < bestD:
			best, bestD = []string{c}, d
		case d == bestD:
			best = append(best, c)
		}
	}
	return best
}

// hasPart reports whether a dot-separated ID has w as one of its parts.
func hasPart(id, w string) bool {
	for _, p := range strings.Split(strings.ToLower(id), ".") {
		if p == w {
			return true
		}
	}
	return false
}

// didYouMean is "; did you mean X?" or "; did you mean X or Y?", or "".
func didYouMean(word string, candidates []string) string {
	s := suggest(word, candidates)
	if len(s) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(s, " or ") + "?"
}

// allCheckIDs are the catalog's IDs, then the two-host checks'.
func allCheckIDs() []string {
	ids := checks.IDs()
	for _, c := range checks.PeerCatalog() {
		ids = append(ids, c.ID)
	}
	return ids
}

// unknownCheck is the message for a check ID that is not in the catalog:
// what was given, the nearest IDs, and where the list is.
func unknownCheck(what, id string, candidates []string) string {
	if hint := didYouMean(id, candidates); hint != "" {
		return fmt.Sprintf("%sunknown check %q%s (rdmadoctor list shows them all)", what, id, hint)
	}
	return fmt.Sprintf("%sunknown check %q; valid checks: %s", what, id, strings.Join(candidates, ", "))
}

// flagError is a flag parser's error in the words of this CLI: an unknown
// flag names the nearest flag (or every valid one), a flag without its
// value says what the value is; a bad value already names the flag and
// what it wants (pflag's own message).
func flagError(err error, fs *pflag.FlagSet) string {
	var missing *pflag.NotExistError
	var noValue *pflag.ValueRequiredError
	switch {
	case errors.As(err, &missing):
		typed := "--" + missing.GetSpecifiedName()
		if missing.GetSpecifiedShortnames() != "" {
			typed = "-" + missing.GetSpecifiedName()[:1]
		}
		var names []string
		fs.VisitAll(func(f *pflag.Flag) {
			names = append(names, "--"+f.Name)
			if f.Shorthand != "" {
				names = append(names, "-"+f.Shorthand)
			}
		})
		if hint := didYouMean(typed, names); hint != "" {
			return fmt.Sprintf("unknown flag %s%s", typed, hint)
		}
		return fmt.Sprintf("unknown flag %s; valid flags: %s", typed, flagNames(fs))
	case errors.As(err, &noValue) && noValue.GetFlag() != nil:
		f := noValue.GetFlag()
		name := "--" + f.Name
		if noValue.GetSpecifiedShortnames() != "" {
			name = fmt.Sprintf("-%s (--%s)", f.Shorthand, f.Name)
		}
		typ, usage := pflag.UnquoteUsage(f)
		typ = strings.TrimSuffix(typ, "Array") // stringArray: one string a time
		return fmt.Sprintf("%s needs a value (%s): %s", name, cmp.Or(typ, "text"), usage)
	}
	return err.Error()
}

// notPositive names the first of the flags whose value is zero or
// negative, with its value and what it wants; "" when all are positive.
// The flags are numbers or durations.
func notPositive(fs *pflag.FlagSet, names ...string) string {
	for _, n := range names {
		f := fs.Lookup(n)
		if f == nil {
			continue
		}
		v := f.Value.String()
		if d, err := time.ParseDuration(v); err == nil && d > 0 || err != nil && !strings.HasPrefix(v, "-") && strings.Trim(v, "0") != "" {
			continue
		}
		return fmt.Sprintf("--%s %s: want a value above 0 (%s)", n, v, firstSentence(f.Usage))
	}
	return ""
}
