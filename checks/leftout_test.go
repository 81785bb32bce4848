package checks_test

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
)

// A check a full run leaves out says why, by ID: --skip, a periodic run's
// noisy probe, or a level below the check's.
func TestLeftOut(t *testing.T) {
	c, _ := checks.Lookup("probe.cq_overflow")
	for _, tc := range []struct {
		level int
		why   string
		want  string
	}{{2, "", report.FindingLeftOutSkip}, {2, "it makes the kernel log a line", report.FindingLeftOutPeriod}, {1, "", report.FindingBelowLevel}} {
		if f := checks.LeftOut(c, tc.level, tc.why); f.ID != tc.want || f.Status != report.Skip || f.Message == "" {
			t.Errorf("level %d why %q: %+v, want %s", tc.level, tc.why, f, tc.want)
		}
	}
}
