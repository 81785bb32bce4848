package checks_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func TestProbeSendPollFindings(t *testing.T) {
	sp := func(edit func(r *probe.SendPollResult)) func(pr *probe.PortResult) {
		return func(pr *probe.PortResult) { edit(pr.SendPoll) }
	}
	fail := func(name string, errno int, errnoName, msg string) func(pr *probe.PortResult) {
		return sp(func(r *probe.SendPollResult) { failWith(t, &r.Probe, name, errno, errnoName, msg) })
	}
	noCompletion := fail("ibv_poll_cq B (receive completion)", 0, "", "no completion within 8s")
	for _, tc := range []struct {
		name     string
		software bool
		edit     func(pr *probe.PortResult)
		slug     string
	}{
		{"healthy", false, nil, "completed"},
		{"healthy rxe", true, nil, "completed"},
		{"a frozen counter", false, sp(func(r *probe.SendPollResult) {
			r.Counters, r.BytesSent = []probe.CounterDelta{{Name: "port_xmit_data", Delta: 0, Unit: "bytes"}}, 4096
		}), "counters-frozen"},
		{"no completion", false, noCompletion, "no-completion"},
		{"no completion on rxe", true, noCompletion, "no-completion-rxe"},
		{"error completion", false, fail("send completion IBV_WC_SUCCESS", 0, "", "completed with IBV_WC_RETRY_EXC_ERR"), "completion-error"},
		{"payload differs", false, fail("payload received intact", 0, "", "byte 3 differs"), "wrong-data"},
		{"INIT→RTR refused", false, fail("ibv_modify_qp A INIT→RTR", 22, "EINVAL", "ibv_modify_qp: EINVAL"), "connect-refused"},
		{"memlock", false, fail("ibv_reg_mr", 12, "ENOMEM", "ibv_reg_mr: ENOMEM"), "step-failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := checks.RecordedPort(t, "rxe0-level2.json")
			if tc.edit != nil {
				tc.edit(pr)
			}
			c := level2One(pr, nil)
			c.Software = map[string]bool{"mlx5_0": tc.software}
			r := checks.RunLevel2Case(t, "probe.send_poll", c)
			want := []findingRef{{"probe.send_poll/" + tc.slug, "mlx5_0/1"}}
			if diff := cmp.Diff(want, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
			}
		})
	}
}
