package checks_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func TestProbeUDFindings(t *testing.T) {
	ud := func(edit func(r *probe.UDResult)) func(pr *probe.PortResult) {
		return func(pr *probe.PortResult) { edit(pr.UD) }
	}
	fail := func(name string, errno int, errnoName, msg string) func(pr *probe.PortResult) {
		return ud(func(r *probe.UDResult) { failWith(t, &r.Probe, name, errno, errnoName, msg) })
	}
	noDelivery := fail("ibv_poll_cq B (receive completion)", 0, "", "no completion within 2s")
	for _, tc := range []struct {
		name     string
		software bool
		edit     func(pr *probe.PortResult)
		slug     string
	}{
		{"healthy", true, nil, "arrived-grh"},
		{"healthy without the GRH flag", false, ud(func(r *probe.UDResult) { r.GRHFlag = false }), "arrived"},
		{"address handle refused", false, fail("ibv_create_ah", 22, "EINVAL", "ibv_create_ah: EINVAL"), "ah-refused"},
		{"nothing arrives", false, noDelivery, "no-delivery"},
		{"nothing arrives on rxe", true, noDelivery, "no-delivery-rxe"},
		{"send completes in error", false, fail("send completion IBV_WC_SUCCESS", 0, "", "send completed with IBV_WC_LOC_QP_OP_ERR"), "completion-error"},
		{"payload at offset 0", false, fail("payload at offset 40", 0, "", "the payload starts at offset 0"), "layout-wrong"},
		{"INIT→RTR refused", false, fail("ibv_modify_qp A INIT→RTR", 22, "EINVAL", "ibv_modify_qp: EINVAL"), "modify-qp-refused"},
		{"memlock", false, fail("ibv_reg_mr", 12, "ENOMEM", "ibv_reg_mr: ENOMEM"), "step-failed"},
		{"wrong Q_Key delivered", false, fail("SEND with the wrong Q_Key dropped", 0, "", "B completed a receive for qkey 0x22222222"),
			"wrong-qkey-delivered"},
		{"no GRH flag on RoCE", false, fail("IBV_WC_GRH set (RoCE always carries a GRH)", 0, "", "wc_flags 0 lack IBV_WC_GRH"), "no-grh-flag"},
		{"byte_len without the GRH area", false, ud(func(r *probe.UDResult) {
			failWith(t, &r.Probe, "receive byte_len = payload + 40 (GRH area)", 0, "", "byte_len 1024 counts the payload alone")
			r.Steps[len(r.Steps)-1].Want = "byte_len = payload + 40"
		}), "byte-len-short"},
		{"no GRH room, no error", false, fail("receive without room for the GRH completes in error", 0, "", "no completion within 500ms"),
			"no-grh-room-accepted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := checks.RecordedPort(t, "rxe0-level2.json")
			if tc.edit != nil {
				tc.edit(pr)
			}
			c := level2One(pr, nil)
			c.Software = map[string]bool{"mlx5_0": tc.software}
			r := checks.RunLevel2Case(t, "probe.ud", c)
			want := []findingRef{{"probe.ud/" + tc.slug, "mlx5_0/1"}}
			if diff := cmp.Diff(want, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
			}
		})
	}
}
