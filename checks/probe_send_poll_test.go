package checks

import (
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// Hardware RoCE is offloaded: its packets never meet the host's firewall.
func TestSendTimeoutNoFirewallOnHardware(t *testing.T) {
	pr := healthyPort(t)
	failStep(step(t, &pr.SendPoll.Probe, "ibv_poll_cq B (receive completion)"), 0, "", "no completion within 2s", "")
	v, _ := judgeSendPoll("mlx5_0 port 1", false, pr)
	if v.status != report.Fail || strings.Contains(v.remedy, "4791") || strings.Contains(v.remedy, "firewall") {
		t.Errorf("%s: hardware remedy mentions the firewall: %s", v.status, v.remedy)
	}
	if !strings.Contains(v.remedy, "ibv_rc_pingpong -d mlx5_0 -i 1 -g 1 localhost") {
		t.Errorf("remedy lacks the client side: %s", v.remedy)
	}
}

func TestJudgeSendPoll(t *testing.T) {
	sp := func(slug string) []unitFinding { return onlyFinding("probe.send_poll/"+slug, "rxe0/1") }
	runVerdictCases(t, judgeSendPoll, []verdictCase{
		{name: "healthy rxe", findings: sp("completed"), software: true, status: report.Pass,
			// the measured values the recorded run gives
			contains: []string{"1000 round trips: min", "sent_pkts +2002 packets"}},
		{name: "no completion on rxe", findings: sp("no-completion-rxe"), software: true, status: report.Fail, remedy: "drops UDP port 4791",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.SendPoll.Probe, "ibv_poll_cq B (receive completion)"), 0, "", "no completion within 2s", "the work request never completed")
			},
			contains: []string{"no completion within 2s"}},
		{name: "no completion names both pingpong sides", findings: sp("no-completion"), status: report.Fail,
			remedy: "`ibv_rc_pingpong -d rxe0 -i 1 -g 1` and, in a second shell, `ibv_rc_pingpong -d rxe0 -i 1 -g 1 localhost`",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.SendPoll.Probe, "ibv_poll_cq B (receive completion)"), 0, "", "no completion within 2s", "the work request never completed")
			}},
		{name: "retry exceeded", findings: sp("completion-error"), status: report.Fail, remedy: "RETRY_EXC_ERR — no ACK",
			edit: func(pr *probe.PortResult) {
				pr.SendPoll.SendStatus = "IBV_WC_RETRY_EXC_ERR"
				failStep(step(t, &pr.SendPoll.Probe, "send completion IBV_WC_SUCCESS"), 0, "", "send completed with IBV_WC_RETRY_EXC_ERR (vendor error 0x81)", "")
			},
			contains: []string{"IBV_WC_RETRY_EXC_ERR"}},
		{name: "payload differs", findings: sp("wrong-data"), status: report.Fail, remedy: "wrong data",
			edit: func(pr *probe.PortResult) {
				pr.SendPoll.PayloadOK = false
				failStep(step(t, &pr.SendPoll.Probe, "payload received intact"), 0, "", "payload differs from byte 512 on", "")
			},
			contains: []string{"byte 512"}},
		{name: "round trip fails later", findings: sp("completion-error"), status: report.Fail, remedy: "RETRY_EXC_ERR",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.SendPoll.Probe, "timed round trips"), 0, "", "round trip 17: send completed with IBV_WC_RETRY_EXC_ERR", "")
			},
			contains: []string{"round trip 17"}},
		{name: "hardware port counts nothing", findings: sp("counters-frozen"), status: report.Warn, remedy: "perfquery -x -C rxe0 -P 1",
			edit: func(pr *probe.PortResult) {
				pr.SendPoll.Counters = []probe.CounterDelta{{Name: "port_xmit_data", Before: 400, After: 400, Unit: "bytes"}}
			}},
		{name: "hardware port counts", findings: sp("completed"), status: report.Pass,
			edit: func(pr *probe.PortResult) {
				pr.SendPoll.Counters = []probe.CounterDelta{{Name: "port_xmit_data", Before: 400, After: 1300400, Delta: 1300000, Unit: "bytes"}}
			},
			contains: []string{"port_xmit_data +1300000 bytes"}},
		{name: "software port counts nothing", findings: sp("completed"), software: true, status: report.Pass,
			edit: func(pr *probe.PortResult) {
				pr.SendPoll.Counters = []probe.CounterDelta{{Name: "port_xmit_data", Unit: "bytes"}}
			}},
		{name: "counters unreadable", findings: sp("completed"), status: report.Pass,
			edit: func(pr *probe.PortResult) { pr.SendPoll.Counters, pr.SendPoll.CountersError = nil, "no counters" },
			// no finding of its own: the detail says why the counters are missing
			contains: []string{"port counters not read: no counters"}},
	})
}
