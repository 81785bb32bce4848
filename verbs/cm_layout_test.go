package verbs

import "testing"

// TestCMLayoutMatchesHeader compares the rdma_cm mirrors with the real
// <rdma/rdma_cma.h> (librdmacm-dev); like the verbs layout test it skips
// without gcc or the header, except in CI, where it must run.
func TestCMLayoutMatchesHeader(t *testing.T) {
	n := compareWithHeader(t, "rdma/rdma_cma.h", "librdmacm-dev", CMLayout())
	t.Logf("compared %d sizes, offsets and enum values with <rdma/rdma_cma.h>", n)
}

func TestCMLayoutEntriesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range CMLayout() {
		if seen[e.C] {
			t.Errorf("duplicate layout entry %s", e.C)
		}
		seen[e.C] = true
	}
}

func TestCMEventTypeString(t *testing.T) {
	if s := CMEventRejected.String(); s != "RDMA_CM_EVENT_REJECTED" {
		t.Errorf("CMEventRejected = %q", s)
	}
	if s := CMEventType(99).String(); s != "RDMA_CM_EVENT_99" {
		t.Errorf("unknown event = %q", s)
	}
}
