package checks

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func init() {
	register(Check{
		ID: "probe.send_poll", Code: 32, Level: 2,
		Title:      "a loopback RC SEND completes with IBV_WC_SUCCESS, the right byte count and payload; latency measured",
		Needs:      []string{"verbs.qp_state"},
		Privileges: level2Needs,
		Explain: Explanation{
			Judges: "On every ACTIVE port two connected RC QPs: the receive is posted first, then a SEND of --probe-size bytes (default 1024); " +
				"both CQs are polled with a deadline. Pass: both completions IBV_WC_SUCCESS, byte_len equal to the size, payload equal byte for byte. " +
				"Then up to 1000 round trips (at most 1 s) are timed from ibv_post_send to both completions polled (min, median, p99), and, apart " +
				"from them, the time of the ibv_post_send call alone — the CPU cost of building the WQE and ringing the doorbell, not the NIC's " +
				"latency. port_xmit_data/port_rcv_data (×4 bytes) or the software device's packet counters are read before and after. " +
				"iWARP devices (RNIC: siw, cxgb4, irdma in iWARP mode) skip it: their RC QPs connect only through rdma_cm, not ibv_modify_qp. " +
				"Devices without RC QPs skip it too: EFA (UD and SRD only), whose UD path probe.ud judges.",
			Why: "It is the smallest real data transfer through the whole stack: if it does not complete, or completes with an error status, " +
				"no application on this port will work. A hardware port whose data counters do not move while traffic flows is not counting.",
		},
		Run: func(ctx context.Context, env *Env) Result {
			return runLevel2(ctx, env, probe.SendPoll, sendPollFrame, judgeSendPoll)
		},
	})
}

const (
	sendTimeoutFix = "The SEND never completed: on RoCE check that the netdev is up, the GID's address is on it and that no pause storm stalls the port " +
		"(`ethtool -S <if> | grep -i pause`); on InfiniBand check the port's LID and the subnet manager. " +
		"The same loopback by hand: " + pingpongGeneric + "."
	// rxeFirewallNote applies to software RoCE only: hardware RoCE is
	// offloaded and its packets never reach the host's netfilter.
	rxeFirewallNote = " rxe sends RoCE v2 as UDP through the host's network stack: check that no firewall rule drops UDP port 4791 " +
		"(`nft list ruleset | grep 4791`, `iptables -S | grep 4791`)."
	sendStatusFix = "The completion status names the cause: RETRY_EXC_ERR — no ACK came back (path, GID, MTU, a lossy fabric without PFC); " +
		"LOC_PROT_ERR / LOC_QP_OP_ERR — the lkey or the work request was refused; REM_* — the receiver refused it. Compare with " + pingpongGeneric + "."
	counterFix = "The NIC may have looped the traffic between its own QPs internally, so it never reached the port counters; that alone is not a fault. " +
		"To tell, run traffic to another host — a server `<pingpong>` on the peer, `<pingpong> <peer address>` here — and watch " +
		"`perfquery -x -C <device> -P <port>` on InfiniBand or `ethtool -S <if>` on RoCE; counters that stay frozen under real traffic need a firmware update."
)

// wrongDataFix is for a device that delivered other bytes than were sent.
const wrongDataFix = "The device delivered wrong data: update the firmware and the driver, and report it to the vendor."

// probe.send_poll's findings.
var (
	sendPollFrame     = declareLevel2Frame("probe.send_poll")
	sendPollCompleted = declare(Finding{ID: "probe.send_poll/completed", Status: report.Pass,
		When: "the SEND completed IBV_WC_SUCCESS with the right byte count and payload (the port's counters moved, or could not be judged)",
		Message: "{label}: {size}-byte SEND completed IBV_WC_SUCCESS with the right byte count and payload; {n} round trips: " +
			"min {min}, median {median}, p99 {p99}; ibv_post_send CPU cost median {post_send}"})
	sendPollCountersFrozen = declare(Finding{ID: "probe.send_poll/counters-frozen", Status: report.Warn,
		When: "a hardware port's port_xmit_data did not move while the probe sent data: possibly internal loopback",
		Message: "{label}: traffic completed but port_xmit_data did not move ({bytes} bytes sent): possibly internal loopback in the NIC, " +
			"or a counter that does not count",
		Fix: strings.NewReplacer("<pingpong>", "{pingpong_cmd}", "<device>", "{device}", "<port>", "{num}").Replace(counterFix)})
	sendPollNoCompletion = declare(Finding{ID: "probe.send_poll/no-completion", Status: report.Fail,
		When: "no completion within the deadline", Message: "{label}: {step}", Fix: portTemplate(sendTimeoutFix)})
	sendPollNoCompletionRXE = declare(Finding{ID: "probe.send_poll/no-completion-rxe", Status: report.Fail,
		When:    "no completion within the deadline on software RoCE (rxe), whose packets pass through the host's firewall",
		Message: "{label}: {step}", Fix: portTemplate(sendTimeoutFix) + rxeFirewallNote})
	sendPollStatus = declare(Finding{ID: "probe.send_poll/completion-error", Status: report.Fail,
		When: "a completion with an error status (RETRY_EXC_ERR, LOC_PROT_ERR, ...)", Message: "{label}: {step}", Fix: portTemplate(sendStatusFix)})
	sendPollWrongData = declare(Finding{ID: "probe.send_poll/wrong-data", Status: report.Fail,
		When: "wrong byte_len or a payload that differs", Message: "{label}: {step}", Fix: wrongDataFix})
	sendPollConnect = declare(Finding{ID: "probe.send_poll/connect-refused", Status: report.Fail,
		When:    "connecting the two QPs fails (the loopback address, or a transition of ibv_modify_qp)",
		Message: "{label}: {step}", Fix: rtrFixTemplate})
	sendPollStepFailed = declare(Finding{ID: "probe.send_poll/step-failed", Status: report.Fail,
		When: verbsStepFixWhen, Message: "{label}: {step}", Fix: "{verbs_fix}"})
)

// judgeSendPoll judges probe.send_poll on one port.
func judgeSendPoll(label string, software bool, pr *probe.PortResult) (verdict, bool) {
	r := pr.SendPoll
	if r == nil {
		return verdict{}, false
	}
	if r.Skipped != "" {
		return sendPollFrame.skippedVerdict(label, &r.Probe), true
	}
	ev := map[string]any{
		"size": r.Size, "send_status": r.SendStatus, "recv_status": r.RecvStatus, "byte_len": r.ByteLen,
		"payload_ok": r.PayloadOK, "latency_ns": r.Latency, "post_send_cpu_ns": r.PostSendCPU,
		"iterations_asked": r.IterationsAsked, "bytes_sent": r.BytesSent, "counters": r.Counters,
		"software_device": software, "duration_ms": r.Millis,
	}
	if r.CountersError != "" {
		ev["counters_error"] = r.CountersError
	}
	if st := r.Failed(); st != nil {
		ev["failed_step"] = st
		v := sendPollFailure(st, label, software, r.Addressing)
		v.evidence = ev
		return v, true
	}
	return sendPollPass(label, software, r, ev), true
}

// sendPollFailure is the verdict for a failed step, by what failed: no
// completion, an error completion, wrong data, the connection, or another
// verb (verbs.resources's fix).
func sendPollFailure(st *probe.Step, label string, software bool, a *probe.Addressing) verdict {
	unit, slots := portUnitOf(label), portFixSlots(label, a).with("label", label, "step", stepText(st))
	switch {
	case strings.Contains(st.Error, "no completion") && software:
		return sendPollNoCompletionRXE.unit(unit, slots)
	case strings.Contains(st.Error, "no completion"):
		return sendPollNoCompletion.unit(unit, slots)
	case strings.Contains(st.Name, "IBV_WC_SUCCESS") || strings.Contains(st.Error, "completed with"):
		return sendPollStatus.unit(unit, slots)
	case strings.Contains(st.Name, "payload") || strings.Contains(st.Name, "byte_len"):
		return sendPollWrongData.unit(unit, slots)
	case strings.Contains(st.Name, "ibv_modify_qp") || strings.Contains(st.Name, "resolve"):
		return sendPollConnect.unit(unit, slots.with(slotPairs(rtrSlots(label))...))
	}
	return sendPollStepFailed.unit(unit, slots.with("verbs_fix", resourcesRemedy(st, label, a)))
}

// sendPollPass is the verdict of a port whose SEND completed: it passes,
// or warns when a hardware port's data counter did not move.
func sendPollPass(label string, software bool, r *probe.SendPollResult, ev map[string]any) verdict {
	unit := portUnitOf(label)
	var details []string
	if software {
		details = append(details, "software device"+softwareNote(true))
	}
	var deltas []string
	var xmit *probe.CounterDelta
	for i, c := range r.Counters {
		deltas = append(deltas, fmt.Sprintf("%s +%d %s", c.Name, c.Delta, c.Unit))
		if c.Name == "port_xmit_data" {
			xmit = &r.Counters[i]
		}
	}
	switch {
	case len(deltas) > 0:
		details = append(details, fmt.Sprintf("port counters while %d bytes were sent: %s", r.BytesSent, strings.Join(deltas, ", ")))
	case r.CountersError != "":
		details = append(details, "port counters not read: "+r.CountersError)
	}
	var v verdict
	if !software && xmit != nil && xmit.Delta == 0 && r.BytesSent > 0 {
		// A loopback between two QPs of one port may never leave the NIC:
		// a frozen counter here is a hint, not a finding.
		v = sendPollCountersFrozen.unit(unit, portFixSlots(label, r.Addressing).with(slotPairs(rtrSlots(label))...).
			with("label", label, "bytes", fmt.Sprint(r.BytesSent)))
	} else {
		v = sendPollCompleted.unit(unit, Slots{"label": label, "size": fmt.Sprint(r.Size), "n": fmt.Sprint(r.Latency.N),
			"min": fmtNS(r.Latency.MinNS), "median": fmtNS(r.Latency.MedNS), "p99": fmtNS(r.Latency.P99NS), "post_send": fmtNS(r.PostSendCPU.MedNS)})
	}
	v.evidence, v.details = ev, details
	return v
}

// probe.send_poll's flag: the SEND's size.
func init() {
	declareKnob(32, func(fs *pflag.FlagSet, o *Options) {
		fs.IntVar(&o.ProbeSize, "probe-size", 1024, "probe.send_poll: bytes per SEND")
	}, func(o *Options, _ func(string) bool) error {
		if o.ProbeSize <= 0 {
			return fmt.Errorf("--probe-size %d must be positive", o.ProbeSize)
		}
		return nil
	})
}
