package checks_test

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// The probe table and the catalog agree: every level-2 check is one probe's
// row, in the order the child runs them, each with what a pass shows.
func TestProbeTableMatchesCatalog(t *testing.T) {
	var level2 []string
	for _, c := range checks.Catalog() {
		if c.Level == 2 {
			level2 = append(level2, c.ID)
		}
	}
	if len(level2) != len(probe.Kinds) {
		t.Fatalf("level-2 checks %v, probes %v", level2, probe.AllProbes)
	}
	for i, k := range probe.Kinds {
		if k.Name != level2[i] || k.Expected == "" {
			t.Errorf("probe %d is %q (expected %q), the catalog's level-2 check %d is %q", i, k.Name, k.Expected, i, level2[i])
		}
	}
}
