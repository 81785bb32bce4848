package checks_test

import (
	"github.com/rdmadoctor/rdmadoctor/checks"
	"strings"
	"testing"
)

// Root under a `*` line that cannot reach it: the remedy leads with root's
// own lines and does not repeat them in the list of places to raise it.
func TestLimitsMemlockRootAdviceOnce(t *testing.T) {
	c := hwResult(t, hwRun(t, netFixture("memlock-64k"), checks.Options{}), "limits.memlock")
	if n := strings.Count(c.Remedy, "root soft memlock unlimited"); n != 1 {
		t.Fatalf("the remedy names root's limits.conf lines %d times, want once:\n%s", n, c.Remedy)
	}
	if !strings.Contains(c.Remedy, "put `* soft memlock unlimited` and `* hard memlock unlimited`, then log in again;") {
		t.Errorf("the logins line lost its own advice:\n%s", c.Remedy)
	}
}
