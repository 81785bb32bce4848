package checks

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func TestJudgeCQOverflow(t *testing.T) {
	co := func(slug string) []unitFinding { return onlyFinding("probe.cq_overflow/"+slug, "rxe0/1") }
	runVerdictCases(t, judgeCQOverflow, []verdictCase{
		{name: "healthy rxe", findings: co("event-raised"), status: report.Pass,
			// the counts measured
			contains: []string{"a CQ granted 1 entries, overrun by 6 signaled SENDs, raised IBV_EVENT_CQ_ERR (5 event(s), 5 completion(s) lost)"}},
		{name: "lost silently", findings: co("lost-silently"), status: report.Fail, remedy: "max_send_wr",
			edit: func(pr *probe.PortResult) {
				r := pr.CQOverflow
				r.CQErrOnCQ, r.Events = 0, nil
				failStep(step(t, &r.Probe, "IBV_EVENT_CQ_ERR for the overrun CQ"), 0, "", "5 completions lost and no IBV_EVENT_CQ_ERR within 2s", "")
			},
			contains: []string{"5 of 6 completions were lost and no IBV_EVENT_CQ_ERR"}},
		{name: "not overrun", findings: co("not-overrun"), status: report.Error,
			edit: func(pr *probe.PortResult) {
				r := pr.CQOverflow
				r.CQErrOnCQ, r.Events, r.Lost, r.Completions, r.CQEGranted = 0, nil, 0, 6, 63
				failStep(step(t, &r.Probe, "IBV_EVENT_CQ_ERR for the overrun CQ"), 0, "", "the CQ granted 63 entries held all 6 completions; it was not overrun", "")
			},
			contains: []string{"could not overrun the CQ: the CQ granted 63 entries"}},
		{name: "setup fails", findings: co("connect-refused"), status: report.Fail, remedy: "RoCE v2",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.CQOverflow.Probe, "ibv_modify_qp A INIT→RTR"), 22, "EINVAL", "ibv_modify_qp: EINVAL (invalid argument)", "")
			}},
		{name: "poll error recorded", findings: co("event-raised"), status: report.Pass,
			edit:     func(pr *probe.PortResult) { pr.CQOverflow.PollError = "ibv_poll_cq: EIO" },
			contains: []string{"polling the overrun CQ: ibv_poll_cq: EIO"}},
	})
}
