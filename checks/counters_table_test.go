package checks

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// The counter table's invariants: every counter says what it means; every
// error counter has a threshold, below a legacy counter's maximum (so that
// a saturated counter is always beyond it), and a family (the finding of a
// count beyond it); a statistic has none; one row per driver.
func TestCounterTable(t *testing.T) {
	check := func(where, name string, s counterSpec) {
		if s.meaning == "" || (s.class != errorCounter && s.class != protocolStat) {
			t.Errorf("%s %s: %+v", where, name, s)
		}
		if s.class == errorCounter && s.threshold == 0 {
			t.Errorf("%s %s: an error counter without a threshold", where, name)
		}
		if (s.class == errorCounter) != (s.family != nil) {
			t.Errorf("%s %s: an error counter has a family, a statistic none: %+v", where, name, s)
		}
		if s.family != nil && (s.family.CheckID() != "counters.errors" || s.family.Status != report.Fail || s.family.Message != familyMessage) {
			t.Errorf("%s %s: family %s is not a counters.errors family finding", where, name, s.family.ID)
		}
		if s.bits > 0 && s.class == errorCounter && s.threshold >= 1<<s.bits-1 {
			t.Errorf("%s %s: threshold %d not below the %d-bit maximum", where, name, s.threshold, s.bits)
		}
	}
	for n, s := range pmaCounters {
		check("counters/", n, s)
	}
	seen := map[string]bool{}
	for _, dc := range counterDrivers {
		if seen[dc.driver] || dc.rdma == "" || dc.source == "" {
			t.Errorf("driver row %+v: duplicate or incomplete", dc)
		}
		seen[dc.driver] = true
		for n, s := range dc.hw {
			if s.bits != 0 {
				t.Errorf("%s %s: hw_counters are 64-bit", dc.driver, n)
			}
			check(dc.driver, n, s)
		}
	}
	for _, d := range []string{"mlx5_core", "efa", "ice", "bnxt_en", "rdma_rxe", "siw", "cxgb4"} {
		if !seen[d] {
			t.Errorf("no row for %s", d)
		}
	}
}
