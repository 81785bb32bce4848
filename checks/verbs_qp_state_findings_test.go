package checks_test

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func TestVerbsQPStateFindings(t *testing.T) {
	qp := func(edit func(r *probe.QPStateResult)) func(pr *probe.PortResult) {
		return func(pr *probe.PortResult) { edit(pr.QPState) }
	}
	fail := func(name string, errno int, errnoName, msg string) func(pr *probe.PortResult) {
		return qp(func(r *probe.QPStateResult) { failWith(t, &r.Probe, name, errno, errnoName, msg) })
	}
	for _, tc := range []struct {
		name string
		edit func(pr *probe.PortResult)
		slug string
	}{
		{"healthy", nil, "walked"},
		{"LID 0", fail("resolve loopback address", 0, "", "port 1 has LID 0"), "no-lid"},
		{"no GID", fail("resolve loopback address", 0, "", "port 1 has no GID of type RoCE v2"), "no-gid"},
		{"INIT→RTR refused", fail("ibv_modify_qp A INIT→RTR", 22, "EINVAL", "ibv_modify_qp: EINVAL"), "rtr-refused"},
		{"state read back wrong", fail("A is INIT", 0, "", "A is RESET"), "state-wrong"},
		{"open refused", fail("ibv_open_device", 13, "EACCES", "ibv_open_device: EACCES"), "step-failed"},
		{"RESET→RTS accepted", qp(func(r *probe.QPStateResult) { r.ResetToRTSErrno = 0 }), "reset-to-rts-accepted"},
		{"RESET→RTS refused with EPERM", qp(func(r *probe.QPStateResult) { r.ResetToRTSErrno = 1 }), "reset-to-rts-errno"},
		{"the refusal left the QP INIT", qp(func(r *probe.QPStateResult) { r.StateAfterRefusal = "INIT" }), "refusal-left-reset"},
		{"no recovery", qp(func(r *probe.QPStateResult) { r.Recovered = false }), "not-recovered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			level2Findings(t, "verbs.qp_state", "rxe0-level2.json", tc.edit, []findingRef{{"verbs.qp_state/" + tc.slug, "mlx5_0/1"}})
		})
	}
}
