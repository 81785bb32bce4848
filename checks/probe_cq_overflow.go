package checks

import (
	"context"
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func init() {
	register(Check{
		ID: "probe.cq_overflow", Code: 33, Level: 2,
		Title:      "an overrun completion queue raises IBV_EVENT_CQ_ERR instead of losing completions silently",
		Needs:      []string{"verbs.qp_state"},
		Privileges: level2Needs,
		Explain: Explanation{
			Judges: "On every ACTIVE port a send CQ is created with cqe=1 (what the provider granted is reported), its RC QP connected to a peer " +
				"whose receive CQ is large, and more signaled SENDs than the CQ holds are posted without polling it. The context's async fd " +
				"(non-blocking, polled with a deadline, every event acked) must report IBV_EVENT_CQ_ERR for that CQ. retry_cnt is 3 so nothing " +
				"retries forever. Fail: completions were lost and no event came. " +
				"iWARP devices (RNIC: siw, cxgb4, irdma in iWARP mode) skip it: their RC QPs connect only through rdma_cm, not ibv_modify_qp. " +
				"Devices without RC QPs skip it too: EFA (UD and SRD only), whose UD path probe.ud judges.",
			Why: "An application whose CQ is too small loses completions; the only signal it gets is IBV_EVENT_CQ_ERR on the async fd. " +
				"A stack that drops completions without that event turns a sizing bug into silent hangs.",
		},
		Run: func(ctx context.Context, env *Env) Result {
			return runLevel2(ctx, env, probe.CQOverflow, cqOverflowFrame, judgeCQOverflow)
		},
	})
}

// cqSizingRule is the true rule (RDMA-FACTS): only work completions go to
// a CQ, and it must hold every one that can be outstanding.
const cqSizingRule = "Size every CQ for all the completions that can be outstanding on it: cqe ≥ the sum, over the QPs that use it, of " +
	"max_send_wr (signaled sends) and max_recv_wr, plus what the application leaves unpolled; read ibv_cq->cqe for what was granted, and " +
	"watch the async fd (ibv_get_async_event) for IBV_EVENT_CQ_ERR, after which the CQ is unusable."

// probe.cq_overflow's findings.
var (
	cqOverflowFrame  = declareLevel2Frame("probe.cq_overflow")
	cqOverflowRaised = declare(Finding{ID: "probe.cq_overflow/event-raised", Status: report.Pass,
		When: "the overrun CQ raised IBV_EVENT_CQ_ERR on the async fd",
		Message: "{label}: a CQ granted {granted} entries, overrun by {sends} signaled SENDs, raised IBV_EVENT_CQ_ERR " +
			"({events} event(s), {lost} completion(s) lost)"})
	cqOverflowLost = declare(Finding{ID: "probe.cq_overflow/lost-silently", Status: report.Fail,
		When:    "completions were lost and no IBV_EVENT_CQ_ERR came",
		Message: "{label}: {lost} of {sends} completions were lost and no IBV_EVENT_CQ_ERR came within {waited} ms", Fix: cqSizingRule})
	cqOverflowNotOverrun = declare(Finding{ID: "probe.cq_overflow/not-overrun", Status: report.Error,
		When:    "the CQ could not be overrun (the SENDs did not arrive, or the provider grew the CQ)",
		Message: "{label}: could not overrun the CQ: {cause}", Fix: cqSizingRule})
	cqOverflowNoJudgement = declare(Finding{ID: "probe.cq_overflow/no-judgement", Status: report.Error,
		When:    "the probe ended without judging the overrun (no event, no completion lost, no step failed)",
		Message: "{label}: the probe did not reach its judgement", Fix: portTemplate(genericVerbsFix)})
	cqOverflowConnect = declare(Finding{ID: "probe.cq_overflow/connect-refused", Status: report.Fail,
		When:    "connecting the two QPs fails (the loopback address, or a transition of ibv_modify_qp)",
		Message: "{label}: {step}", Fix: rtrFixTemplate})
	cqOverflowStepFailed = declare(Finding{ID: "probe.cq_overflow/step-failed", Status: report.Fail,
		When: verbsStepFixWhen, Message: "{label}: {step}", Fix: "{verbs_fix}"})
)

// judgeCQOverflow judges probe.cq_overflow on one port.
func judgeCQOverflow(label string, software bool, pr *probe.PortResult) (verdict, bool) {
	r := pr.CQOverflow
	if r == nil {
		return verdict{}, false
	}
	if r.Skipped != "" {
		return cqOverflowFrame.skippedVerdict(label, &r.Probe), true
	}
	ev := map[string]any{
		"cqe_asked": r.CQEAsked, "cqe_granted": r.CQEGranted, "sends_posted": r.SendsPosted, "retry_cnt": r.RetryCnt,
		"cq_err_events": r.CQErrOnCQ, "events": r.Events, "completions_polled": r.Completions, "completions_lost": r.Lost,
		"qp_state_after": r.QPStateAfter, "waited_ms": r.WaitedMS, "duration_ms": r.Millis,
	}
	if r.PollError != "" {
		ev["poll_error"] = r.PollError
	}
	const judged = "IBV_EVENT_CQ_ERR for the overrun CQ"
	unit, slots := portUnitOf(label), Slots{"label": label}
	if st := firstFailure(&r.Probe, judged); st != nil {
		ev["failed_step"] = st
		slots = slots.with("step", stepText(st))
		var v verdict
		if strings.Contains(st.Name, "ibv_modify_qp") || strings.Contains(st.Name, "resolve") {
			v = cqOverflowConnect.unit(unit, slots.with(slotPairs(rtrSlots(label))...))
		} else {
			v = cqOverflowStepFailed.unit(unit, slots.with("verbs_fix", resourcesRemedy(st, label, nil)))
		}
		v.evidence = ev
		return v, true
	}
	v := cqOverflowJudgement(label, r, judged)
	v.evidence, v.details = ev, cqOverflowDetails(r)
	return v, true
}

// cqOverflowJudgement judges the overrun: the event came, completions were
// lost silently, the CQ could not be overrun, or the probe did not get
// that far.
func cqOverflowJudgement(label string, r *probe.CQOverflowResult, judged string) verdict {
	unit, slots := portUnitOf(label), Slots{"label": label, "granted": fmt.Sprint(r.CQEGranted), "sends": fmt.Sprint(r.SendsPosted),
		"events": fmt.Sprint(r.CQErrOnCQ), "lost": fmt.Sprint(r.Lost)}
	var judgement *probe.Step
	for i := range r.Steps {
		if r.Steps[i].Name == judged {
			judgement = &r.Steps[i]
		}
	}
	switch {
	case r.CQErrOnCQ > 0:
		return cqOverflowRaised.unit(unit, slots)
	case r.Lost > 0:
		return cqOverflowLost.unit(unit, slots.with("waited", fmt.Sprintf("%.0f", r.WaitedMS)))
	case judgement != nil && judgement.Error != "":
		return cqOverflowNotOverrun.unit(unit, slots.with("cause", judgement.Error))
	}
	return cqOverflowNoJudgement.unit(unit, portFixSlots(label, nil).with("label", label))
}

// cqOverflowDetails says what the overrun did: the CQ's size, the SENDs,
// the completions and the events.
func cqOverflowDetails(r *probe.CQOverflowResult) []string {
	details := []string{fmt.Sprintf("cqe asked 1, granted %d; %d signaled SENDs posted; %d completion(s) polled, %d lost; %d IBV_EVENT_CQ_ERR; QP after: %s",
		r.CQEGranted, r.SendsPosted, r.Completions, r.Lost, r.CQErrOnCQ, firstOr([]string{r.QPStateAfter}, "unknown"))}
	if r.PollError != "" {
		details = append(details, "polling the overrun CQ: "+r.PollError)
	}
	for _, e := range r.Events {
		details = append(details, fmt.Sprintf("event %s on %s after %.1f ms (acked)", e.Type, e.Object, e.AfterMS))
	}
	return details
}
