package expect

import (
	"regexp"
	"testing"
)

// The IDs' shapes as patterns: the hand-written tests must agree with them.
var (
	checkIDPattern   = regexp.MustCompile(`^[a-z0-9_]+\.[a-z0-9_]+$`)
	findingIDPattern = regexp.MustCompile(`^[a-z0-9_]+\.[a-z0-9_]+/[a-z0-9]+(-[a-z0-9]+)*$`)
)

func FuzzIDShapes(f *testing.F) {
	for _, s := range []string{"counters.errors", "counters.errors/symbol-errors", "ib.far_end/link-errors-rising", "a.b/c",
		"a.b/-c", "a.b/c-", "a.b/c--d", "a.b.c/d", "a/b", ".b/c", "a./c", "A.b/c", "a.b/C", "a.b/c_d", "a.b//c", "", "/", "a.b/", "a.b/1-2-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := IsCheckID(s), checkIDPattern.MatchString(s); got != want {
			t.Errorf("IsCheckID(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := IsFindingID(s), findingIDPattern.MatchString(s); got != want {
			t.Errorf("IsFindingID(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}
