package checks

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func TestJudgeSendPoll(t *testing.T) {
	runVerdictCases(t, judgeSendPoll, []verdictCase{
		{name: "healthy rxe", software: true, status: report.Pass,
			contains: []string{"1024-byte SEND completed IBV_WC_SUCCESS", "1000 round trips: min", "ibv_post_send CPU cost median",
				"sent_pkts +2002 packets", "software RoCE"}},
		{name: "no completion", status: report.Fail, remedy: "UDP 4791",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.SendPoll.Probe, "ibv_poll_cq B (receive completion)"), 0, "", "no completion within 2s", "the work request never completed")
			},
			contains: []string{"no completion within 2s"}},
		{name: "retry exceeded", status: report.Fail, remedy: "RETRY_EXC_ERR — no ACK",
			edit: func(pr *probe.PortResult) {
				pr.SendPoll.SendStatus = "IBV_WC_RETRY_EXC_ERR"
				failStep(step(t, &pr.SendPoll.Probe, "send completion IBV_WC_SUCCESS"), 0, "", "send completed with IBV_WC_RETRY_EXC_ERR (vendor error 0x81)", "")
			},
			contains: []string{"IBV_WC_RETRY_EXC_ERR"}},
		{name: "payload differs", status: report.Fail, remedy: "wrong data",
			edit: func(pr *probe.PortResult) {
				pr.SendPoll.PayloadOK = false
				failStep(step(t, &pr.SendPoll.Probe, "payload received intact"), 0, "", "payload differs from byte 512 on", "")
			},
			contains: []string{"byte 512"}},
		{name: "round trip fails later", status: report.Fail, remedy: "RETRY_EXC_ERR",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.SendPoll.Probe, "timed round trips"), 0, "", "round trip 17: send completed with IBV_WC_RETRY_EXC_ERR", "")
			},
			contains: []string{"round trip 17"}},
		{name: "hardware port counts nothing", status: report.Warn, remedy: "perfquery",
			edit: func(pr *probe.PortResult) {
				pr.SendPoll.Counters = []probe.CounterDelta{{Name: "port_xmit_data", Before: 400, After: 400, Unit: "bytes"}}
			},
			contains: []string{"port_xmit_data did not move"}},
		{name: "hardware port counts", status: report.Pass,
			edit: func(pr *probe.PortResult) {
				pr.SendPoll.Counters = []probe.CounterDelta{{Name: "port_xmit_data", Before: 400, After: 1300400, Delta: 1300000, Unit: "bytes"}}
			},
			contains: []string{"port_xmit_data +1300000 bytes"}},
		{name: "software port counts nothing", software: true, status: report.Pass,
			edit: func(pr *probe.PortResult) {
				pr.SendPoll.Counters = []probe.CounterDelta{{Name: "port_xmit_data", Unit: "bytes"}}
			}},
		{name: "counters unreadable", status: report.Pass,
			edit:     func(pr *probe.PortResult) { pr.SendPoll.Counters, pr.SendPoll.CountersError = nil, "no counters" },
			contains: []string{"port counters not read: no counters"}},
	})
}
