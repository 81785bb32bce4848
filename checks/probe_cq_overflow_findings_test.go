package checks_test

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func TestProbeCQOverflowFindings(t *testing.T) {
	const judged = "IBV_EVENT_CQ_ERR for the overrun CQ"
	cq := func(edit func(r *probe.CQOverflowResult)) func(pr *probe.PortResult) {
		return func(pr *probe.PortResult) { edit(pr.CQOverflow) }
	}
	// judgedStep marks the judgement step failed with msg and leaves the
	// steps after it.
	judgedStep := func(r *probe.CQOverflowResult, msg string) {
		for i := range r.Steps {
			if r.Steps[i].Name == judged {
				r.Steps[i].OK, r.Steps[i].Error = false, msg
			}
		}
	}
	for _, tc := range []struct {
		name string
		edit func(pr *probe.PortResult)
		slug string
	}{
		{"healthy", nil, "event-raised"},
		{"lost silently", cq(func(r *probe.CQOverflowResult) {
			r.CQErrOnCQ, r.Events = 0, nil
			judgedStep(r, "5 completions lost and no IBV_EVENT_CQ_ERR within 2s")
		}), "lost-silently"},
		{"not overrun", cq(func(r *probe.CQOverflowResult) {
			r.CQErrOnCQ, r.Events, r.Lost, r.Completions, r.CQEGranted = 0, nil, 0, 6, 63
			judgedStep(r, "the CQ granted 63 entries held all 6 completions; it was not overrun")
		}), "not-overrun"},
		{"no judgement", cq(func(r *probe.CQOverflowResult) { r.CQErrOnCQ, r.Events, r.Lost = 0, nil, 0 }), "no-judgement"},
		{"INIT→RTR refused", cq(func(r *probe.CQOverflowResult) {
			failWith(t, &r.Probe, "ibv_modify_qp A INIT→RTR", 22, "EINVAL", "ibv_modify_qp: EINVAL")
		}), "connect-refused"},
		{"memlock", cq(func(r *probe.CQOverflowResult) {
			failWith(t, &r.Probe, "ibv_reg_mr", 12, "ENOMEM", "ibv_reg_mr: ENOMEM")
		}), "step-failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			level2Findings(t, "probe.cq_overflow", "rxe0-level2.json", tc.edit, []findingRef{{"probe.cq_overflow/" + tc.slug, "mlx5_0/1"}})
		})
	}
}
