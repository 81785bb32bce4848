package checks_test

import (
	"fmt"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// Platforms built around RDMA (EFA instances, cloud RoCE, DPUs, vendor
// NICs): every fixture gets the verdict and exit code its comment states
// (sysfstest.PlatformVerdicts), with the finding named, and the healthy
// ones warn about nothing.
func TestPlatformFixtureVerdicts(t *testing.T) {
	for i, v := range sysfstest.PlatformVerdicts {
		name := fmt.Sprintf("%s/%d-%s", v.Fixture, i, v.Check)
		if v.ExpectLossless {
			name += "/expect-lossless"
		}
		t.Run(name, func(t *testing.T) {
			r := hwRun(t, netFixture(v.Fixture), checks.Options{ExpectLossless: v.ExpectLossless})
			statedVerdict(t, r, v.Check, v.Status, v.Finding, v.Exit)
			if !v.Healthy {
				return
			}
			for _, c := range r.Checks {
				if c.Status == report.Fail || c.Status == report.Error || c.Status == report.Warn {
					t.Errorf("healthy %s: %s %s: %s\n%s", v.Fixture, c.ID, c.Status, c.Summary, c.Remedy)
				}
			}
		})
	}
}
