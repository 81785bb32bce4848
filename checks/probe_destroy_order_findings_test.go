package checks_test

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func TestProbeDestroyOrderFindings(t *testing.T) {
	do := func(edit func(r *probe.DestroyOrderResult)) func(pr *probe.PortResult) {
		return func(pr *probe.PortResult) { edit(pr.DestroyOrder) }
	}
	const p = "probe.destroy_order/"
	for _, tc := range []struct {
		name string
		edit func(pr *probe.PortResult)
		want []string
	}{
		{"healthy, device-wide counts", nil, []string{"freed-counts-back"}},
		{"healthy, its own counts", do(func(r *probe.DestroyOrderResult) { r.CountsMethod, r.CountsPID = probe.CountsProcess, 42 }),
			[]string{"freed-own-counts-back"}},
		{"healthy, no counts", do(func(r *probe.DestroyOrderResult) { r.CountsBefore, r.CountsDuring, r.CountsAfter = nil, nil, nil }),
			[]string{"freed"}},
		{"PD freed under a live QP", do(func(r *probe.DestroyOrderResult) { r.DeallocPDLiveQP = 0 }), []string{"freed-under-live-qp"}},
		{"CQ refused with EPERM", do(func(r *probe.DestroyOrderResult) { r.DestroyCQLiveQP = 1 }), []string{"refused-other-errno"}},
		{"stale key accepted", do(func(r *probe.DestroyOrderResult) {
			failWith(t, &r.Probe, "stale-lkey SEND completes in error", 0, "", "completed with IBV_WC_SUCCESS")
		}), []string{"stale-key-accepted"}},
		{"a destroy fails", do(func(r *probe.DestroyOrderResult) {
			failWith(t, &r.Probe, "ibv_destroy_qp A", 16, "EBUSY", "ibv_destroy_qp: EBUSY")
		}), []string{"teardown-failed"}},
		{"counts unreadable", do(func(r *probe.DestroyOrderResult) { r.CountsError = "netlink: EPERM" }), []string{"counts-unreadable"}},
		{"counts drifted", do(func(r *probe.DestroyOrderResult) { r.CountsDrift = "qp 1 → 2" }), []string{"counts-drift"}},
		{"a failure and a warning on one port", do(func(r *probe.DestroyOrderResult) {
			r.DeallocPDLiveQP, r.CountsError = 0, "netlink: EPERM"
		}), []string{"freed-under-live-qp", "counts-unreadable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []findingRef
			for _, slug := range tc.want {
				want = append(want, findingRef{p + slug, "mlx5_0/1"})
			}
			level2Findings(t, "probe.destroy_order", "rxe0-level2.json", tc.edit, want)
		})
	}
}
