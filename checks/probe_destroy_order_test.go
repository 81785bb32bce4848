package checks

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func TestJudgeDestroyOrder(t *testing.T) {
	do := func(slugs ...string) []unitFinding {
		var out []unitFinding
		for _, s := range slugs {
			out = append(out, unitFinding{"probe.destroy_order/" + s, "rxe0/1"})
		}
		return out
	}
	runVerdictCases(t, judgeDestroyOrder, []verdictCase{
		{name: "healthy rxe", status: report.Pass, findings: do("freed-counts-back"),
			contains: []string{"before cq 1, ctx 0, mr 0, pd 1, qp 1; during cq 3, ctx 1, mr 2, pd 2, qp 3"}},
		{name: "PD freed under a live QP", status: report.Fail, remedy: "qp_state_table",
			edit: func(pr *probe.PortResult) {
				r := pr.DestroyOrder
				r.DeallocPDLiveQP = 0
				st := step(t, &r.Probe, "ibv_dealloc_pd while QPs use it")
				st.OK, st.Errno, st.ErrnoName, st.Error = false, 0, "", "ibv_dealloc_pd while QPs use it succeeded; a correct stack refuses it with EBUSY"
			},
			findings: do("freed-under-live-qp")},
		{name: "CQ refused with another errno", status: report.Warn, remedy: "qp_state_table",
			edit: func(pr *probe.PortResult) {
				pr.DestroyOrder.DestroyCQLiveQP = 22
				failStep(step(t, &pr.DestroyOrder.Probe, "ibv_destroy_cq while QP A uses it"), 22, "EINVAL", "ibv_destroy_cq: EINVAL", "")
			},
			findings: do("refused-other-errno"), contains: []string{"errno 22"}},
		{name: "stale key succeeds", status: report.Fail, remedy: "did not check the memory key",
			edit: func(pr *probe.PortResult) {
				r := pr.DestroyOrder
				r.StaleStatus, r.StaleStatusCode = "IBV_WC_SUCCESS", 0
				failStep(step(t, &r.Probe, "stale-lkey SEND completes in error"), 0, "",
					"a SEND through a deregistered MR's lkey completed successfully: the device did not check the key", "")
			},
			findings: do("stale-key-accepted")},
		{name: "stale key succeeds and counts unreadable", status: report.Fail, remedy: "did not check the memory key",
			edit: func(pr *probe.PortResult) {
				r := pr.DestroyOrder
				r.StaleStatus, r.StaleStatusCode = "IBV_WC_SUCCESS", 0
				failStep(step(t, &r.Probe, "stale-lkey SEND completes in error"), 0, "",
					"a SEND through a deregistered MR's lkey completed successfully: the device did not check the key", "")
				r.CountsError, r.CountsAfter = "RDMA netlink resource dump: operation not permitted", nil
				r.Steps = r.Steps[:len(r.Steps)-1]
			},
			findings: do("stale-key-accepted", "counts-unreadable")},
		{name: "leak", status: report.Fail, remedy: "rdma resource show",
			edit: func(pr *probe.PortResult) {
				r := pr.DestroyOrder
				r.CountsAfter = map[string]uint64{"cq": 1, "ctx": 0, "mr": 1, "pd": 1, "qp": 2}
				failStep(step(t, &r.Probe, "resource counts back to baseline"), 0, "", "resource counts after teardown differ from before: mr 0→1, qp 1→2", "")
			},
			findings: do("teardown-failed"), contains: []string{"mr 0→1, qp 1→2"}},
		{name: "counts unreadable", status: report.Warn, remedy: "`rdma resource show` before and after",
			edit: func(pr *probe.PortResult) {
				r := pr.DestroyOrder
				r.CountsError, r.CountsAfter = "RDMA netlink resource dump: operation not permitted", nil
				r.Steps = r.Steps[:len(r.Steps)-1]
			},
			findings: do("counts-unreadable")},
		{name: "device-wide counts moved: not a leak of the probe", status: report.Warn, remedy: "lists each object with its owner's pid",
			edit: func(pr *probe.PortResult) {
				r := pr.DestroyOrder
				r.CountsMethod, r.CountsFallback = probe.CountsDevice, "RDMA netlink qp dump of rxe0: operation not supported"
				r.CountsAfter = map[string]uint64{"cq": 1, "ctx": 0, "mr": 0, "pd": 1, "qp": 2}
				r.CountsDrift = "device-wide resource counts after teardown differ from before: qp 1→2"
				r.Steps = r.Steps[:len(r.Steps)-1]
			},
			findings: do("counts-drift"), contains: []string{"qp 1→2"}},
		{name: "own objects counted and back", status: report.Pass,
			edit: func(pr *probe.PortResult) {
				r := pr.DestroyOrder
				r.CountsMethod, r.CountsPID = probe.CountsProcess, 4242
				r.CountsBefore = map[string]uint64{"cq": 0, "ctx": 0, "mr": 0, "pd": 0, "qp": 0}
				r.CountsDuring = map[string]uint64{"cq": 2, "ctx": 1, "mr": 2, "pd": 1, "qp": 2}
				r.CountsAfter = r.CountsBefore
			},
			findings: do("freed-own-counts-back"), contains: []string{"own objects (pid 4242): before cq 0"}},
		{name: "own objects leak", status: report.Fail, remedy: "the kernel driver leaks",
			edit: func(pr *probe.PortResult) {
				r := pr.DestroyOrder
				r.CountsMethod, r.CountsPID = probe.CountsProcess, 4242
				r.CountsAfter = map[string]uint64{"cq": 1, "ctx": 0, "mr": 0, "pd": 1, "qp": 2}
				failStep(step(t, &r.Probe, "resource counts back to baseline"), 0, "", "this process's RDMA objects after teardown differ from before: qp 1→2", "")
			},
			findings: do("teardown-failed"), contains: []string{"qp 1→2"}},
		{name: "out of the port's time", status: report.Error, remedy: "--probe-timeout",
			edit: func(pr *probe.PortResult) {
				*pr.DestroyOrder = probe.DestroyOrderResult{Probe: probe.Probe{Name: probe.DestroyOrder, OutOfTime: true,
					Skipped: "not run: port 1's deadline (5s for all its probes, --probe-timeout) passed in the probes before it"}}
			},
			findings: []unitFinding{{"probe.destroy_order/out-of-time", "rxe0/1"}}, contains: []string{"deadline (5s"}},
		{name: "iWARP", status: report.Skip,
			edit: func(pr *probe.PortResult) {
				*pr.DestroyOrder = probe.DestroyOrderResult{Probe: probe.Probe{Name: probe.DestroyOrder,
					Skipped: "iWARP RC QPs connect only through rdma_cm; this probe connects QPs with ibv_modify_qp"}}
			},
			// the skip's reason is the probe's own words
			findings: []unitFinding{{"probe.destroy_order/skipped", "rxe0/1"}}, contains: []string{"only through rdma_cm"}},
		{name: "teardown fails", status: report.Fail,
			edit: func(pr *probe.PortResult) {
				pr.DestroyOrder.TeardownOK = false
				failStep(step(t, &pr.DestroyOrder.Probe, "ibv_dealloc_pd"), 16, "EBUSY", "ibv_dealloc_pd: EBUSY (device or resource busy)", "")
			},
			findings: do("teardown-failed"), contains: []string{"ibv_dealloc_pd: EBUSY"}},
	})
}
