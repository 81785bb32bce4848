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
		ID: "probe.ud", Code: 35, Level: 2,
		Title:      "a loopback UD SEND through an address handle arrives with the GRH area, the right Q_Key and payload; wrong Q_Keys are dropped",
		Needs:      []string{"verbs.resources"},
		Privileges: level2Needs,
		Explain: Explanation{
			Judges: "On every ACTIVE port three UD QPs walk RESET→INIT (pkey_index 0, the port, Q_Key 0x11111111)→RTR→RTS (sq_psn 0), and an address " +
				"handle to the port itself is created with ibv_create_ah: on RoCE is_global=1 with the port's RoCE v2 GID as sgid_index and as " +
				"destination GID; on InfiniBand dlid = the port's LID; on EFA (link layer Unknown) the device's GID at index 0 with a GRH. " +
				"B posts a receive of payload + 40 bytes (the payload is the probe size within the active MTU: a UD message is one packet), A sends " +
				"to it with wr.ud {ah, remote_qpn, remote_qkey}. Pass: the send completion is IBV_WC_SUCCESS; the receive completion is IBV_WC_SUCCESS " +
				"with byte_len = payload + 40 (a UD receive always consumes the 40-byte GRH area in front of the payload, GRH present or not), " +
				"src_qp = A's QP number, and the payload at offset 40; IBV_WC_GRH must be set on RoCE (every RoCE packet carries one: " +
				"its absence warns, as does a byte_len of the payload alone; on EFA, link layer Unknown, that count passes). " +
				"Then up to 200 round trips (at most 200 ms) are timed. Two classic mistakes are then made on purpose, as the kernel's rxe handles " +
				"them (its receive path checks the Q_Key and drops a mismatch, counting it in the port's qkey_viol_cntr; its responder writes the " +
				"40-byte GRH area first and fails the receive whose buffer has no room left for the payload — IBV_WC_LOC_QP_OP_ERR on Linux 6.1, " +
				"where the verbs contract says IBV_WC_LOC_LEN_ERR): a SEND with another Q_Key must complete IBV_WC_SUCCESS on the sender (UD is " +
				"unacknowledged) and bring no receive completion within 200 ms, and a SEND with the right Q_Key after it must land in that same " +
				"receive; a receive posted with room for the payload but not the GRH must complete with an error status (any). " +
				"Devices whose applications cannot create UD QPs skip it: iWARP (RC over TCP), qedr (RC only), mana (RC and raw packet), " +
				"and any provider that refuses the UD QP with EOPNOTSUPP.",
			Why: "UD carries the InfiniBand management datagrams (subnet administration, connection management), IPoIB and the datagram " +
				"transports of UCX, libfabric and EFA; its failures are silent by design (no acknowledgement, no error completion for a wrong " +
				"Q_Key). Every ConnectX supports UD: a UD SEND that never arrives is an address handle that was not created or not filled " +
				"(the destination LID or GID, is_global on RoCE), a remote_qpn or remote_qkey that is not the receiver's, or a receive buffer " +
				"without the 40 bytes the GRH area takes.",
		},
		Run: func(ctx context.Context, env *Env) Result {
			return runLevel2(ctx, env, probe.UD, udFrame, judgeUD)
		},
	})
}

const (
	ahFix = "The kernel refused the address handle: on RoCE it needs is_global=1 and a GRH whose sgid_index is a populated GID of the port " +
		"(`ibv_devinfo -v -d <device>` lists the GID table; /sys/class/infiniband/<device>/ports/<port>/gid_attrs/types says which entries are RoCE v2) " +
		"and whose destination GID has a route and a neighbour; on InfiniBand a destination LID on an ACTIVE port (a subnet manager has " +
		"assigned LIDs). " + udPingpongGeneric + " fail the same way if the stack is broken."
	udNoDeliveryFix = "A UD SEND goes where its address handle says and is accepted only with the receiving QP's Q_Key; nothing reports a miss. " +
		"Check what the probe could not: on RoCE that the GID's address is on an up netdev and that no pause storm stalls the port; on InfiniBand " +
		"the LID and the subnet manager. In an application, the usual causes are an address handle that was never created or filled " +
		"(dlid, or is_global with dgid and sgid_index on RoCE), a remote_qpn or remote_qkey that is not the receiver's, or a receive buffer " +
		"without 40 bytes in front of the payload. The same loopback by hand: " + udPingpongGeneric + "."
	udStatusFix = "The completion status names the cause: LOC_QP_OP_ERR — the work request is not valid for UD (no address handle, a message " +
		"larger than the path MTU: a UD message is one packet); LOC_PROT_ERR — the lkey was refused; LOC_LEN_ERR on a receive — the buffer " +
		"has no room for the 40-byte GRH area plus the payload. Compare with " + udPingpongGeneric + "."
	udLayoutFix = "The provider reports the UD receive against the verbs contract (the first 40 bytes of a UD receive buffer are the GRH area, " +
		"byte_len counts them, src_qp names the sender): update rdma-core and the firmware, and report " +
		"it to the provider's maintainers with `ibv_devinfo -v` output."
	udGRHFlagFix = "The provider does not set IBV_WC_GRH on RoCE receive completions, although every RoCE packet carries a GRH (it is in " +
		"the first 40 bytes of the receive buffer). Data arrives; what breaks is a reply built from the completion with ibv_init_ah_from_wc " +
		"or ibv_create_ah_from_wc, which makes the handle global only when the flag is set, and RoCE refuses a handle without a GRH. " +
		"Update rdma-core's provider, and report it to its maintainers."
	udByteLenFix = "The provider's byte_len counts the UD payload without the 40-byte GRH area in front of it, against the verbs contract " +
		"(rxe counts it, and IPoIB strips 40 bytes from every UD byte count). Data arrives; a program that takes byte_len − 40 as the payload " +
		"size reads 40 bytes short. Update rdma-core's provider and the firmware, and report it to the provider's maintainers."
	udQKeyFix = "This stack delivered a UD SEND whose Q_Key is not the receiving QP's, so Q_Keys do not keep UD applications apart here. " +
		"Data still flows; report it to the provider's (or driver's) maintainers with the kernel and rdma-core versions."
	udGRHRoomFix = "A UD receive buffer must hold the 40-byte GRH area in front of the payload; this stack did not complete such a receive " +
		"with an error, so a program that posts receives of exactly the payload size gets no error to find the mistake by. " +
		"Post UD receives of payload + 40 bytes and read the payload at offset 40."
	// udPingpongGeneric is rdma-core's UD loopback on one port.
	udPingpongGeneric = "`ibv_ud_pingpong -d <device> -i <port> -g <gid index> -s <size>` and, in a second shell, " +
		"`ibv_ud_pingpong -d <device> -i <port> -g <gid index> -s <size> localhost`"
)

// udPingpongCmd is rdma-core's ibv_ud_pingpong for the port of label, with
// the probe's GID index and payload size (InfiniBand needs no GID: the LID
// addresses the port).
func udPingpongCmd(label string, r *probe.UDResult) string {
	dev, port := labelParts(label)
	g := " -g <gid index>"
	switch {
	case r.Addressing != nil && r.Addressing.LinkLayer == "InfiniBand":
		g = ""
	case r.Addressing != nil && r.Addressing.GID != "":
		g = fmt.Sprintf(" -g %d", r.Addressing.GIDIndex)
	}
	return fmt.Sprintf("ibv_ud_pingpong -d %s -i %s%s -s %d", dev, port, g, r.Payload)
}

// udTemplate turns a UD fix written for any port into a template: the
// slots {ud_pingpong_cmd}, {device} and {num} (udSlots).
func udTemplate(fix string) string {
	return strings.NewReplacer(udPingpongGeneric, "`{ud_pingpong_cmd}` and, in a second shell, `{ud_pingpong_cmd} localhost`",
		"<device>", "{device}", "<port>", "{num}").Replace(fix)
}

// udSlots are the slots of a port's UD findings.
func udSlots(label string, r *probe.UDResult) Slots {
	dev, port := labelParts(label)
	return Slots{"label": label, "device": dev, "num": port, "ud_pingpong_cmd": udPingpongCmd(label, r)}
}

// udModifyQPFix is for a UD QP whose transition was refused.
const udModifyQPFix = "A UD QP takes pkey_index, port and qkey at INIT, only the state at RTR and sq_psn at RTS; the probe gave exactly those, so " +
	"the refusal is the provider's or the kernel's: " + genericVerbsFix

// probe.ud's findings.
var (
	udFrame       = declareLevel2Frame("probe.ud")
	udArrivedWhen = "the UD SEND arrived intact through the address handle, with byte_len = payload + 40 and the payload at offset 40, " +
		"and the classic mistakes came out as on a correct stack"
	udArrivedGRH = declare(Finding{ID: "probe.ud/arrived-grh", Status: report.Pass,
		When: udArrivedWhen + " (IBV_WC_GRH set)",
		Message: "{label}: {payload}-byte UD SEND through an address handle arrived IBV_WC_SUCCESS, byte_len {byte_len} (payload + 40-byte GRH area), " +
			"payload at offset 40, IBV_WC_GRH set; {n} round trips: min {min}, median {median}, p99 {p99}"})
	udArrived = declare(Finding{ID: "probe.ud/arrived", Status: report.Pass,
		When: udArrivedWhen + " (no IBV_WC_GRH: EFA, InfiniBand without a GRH)",
		Message: "{label}: {payload}-byte UD SEND through an address handle arrived IBV_WC_SUCCESS, byte_len {byte_len} (payload + 40-byte GRH area), " +
			"payload at offset 40; {n} round trips: min {min}, median {median}, p99 {p99}"})
	udAHRefused = declare(Finding{ID: "probe.ud/ah-refused", Status: report.Fail,
		When: "ibv_create_ah fails", Message: "{label}: {step}", Fix: udTemplate(ahFix)})
	udNoDelivery = declare(Finding{ID: "probe.ud/no-delivery", Status: report.Fail,
		When: "the SEND never arrives (no receive completion)", Message: "{label}: {step}", Fix: udTemplate(udNoDeliveryFix)})
	udNoDeliveryRXE = declare(Finding{ID: "probe.ud/no-delivery-rxe", Status: report.Fail,
		When:    "the SEND never arrives on software RoCE (rxe), whose packets pass through the host's firewall",
		Message: "{label}: {step}", Fix: udTemplate(udNoDeliveryFix) + rxeFirewallNote})
	udCompletionError = declare(Finding{ID: "probe.ud/completion-error", Status: report.Fail,
		When: "a completion with an error status", Message: "{label}: {step}", Fix: udTemplate(udStatusFix)})
	udLayoutWrong = declare(Finding{ID: "probe.ud/layout-wrong", Status: report.Fail,
		When: "another byte_len, a wrong src_qp or the payload not at offset 40", Message: "{label}: {step}", Fix: udLayoutFix})
	udModifyQPRefused = declare(Finding{ID: "probe.ud/modify-qp-refused", Status: report.Fail,
		When: "a UD QP's transition (RESET→INIT, INIT→RTR, RTR→RTS) is refused", Message: "{label}: {step}", Fix: portTemplate(udModifyQPFix)})
	udStepFailed = declare(Finding{ID: "probe.ud/step-failed", Status: report.Fail,
		When: verbsStepFixWhen, Message: "{label}: {step}", Fix: "{verbs_fix}"})
	udWrongQKey = declare(Finding{ID: "probe.ud/wrong-qkey-delivered", Status: report.Warn,
		When: "a SEND with the wrong Q_Key is delivered", Message: "{label}: UD data path works, but {step}", Fix: udQKeyFix})
	udNoGRHFlag = declare(Finding{ID: "probe.ud/no-grh-flag", Status: report.Warn,
		When: "no IBV_WC_GRH on a RoCE receive completion", Message: "{label}: UD data path works, but {step}", Fix: udGRHFlagFix})
	udByteLenShort = declare(Finding{ID: "probe.ud/byte-len-short", Status: report.Warn,
		When:    "byte_len counts the payload alone (the payload itself intact at offset 40)",
		Message: "{label}: UD data path works, but {step}", Fix: udByteLenFix})
	udGRHRoom = declare(Finding{ID: "probe.ud/no-grh-room-accepted", Status: report.Warn,
		When:    "a receive without room for the GRH completes IBV_WC_SUCCESS or not at all",
		Message: "{label}: UD data path works, but {step}", Fix: udGRHRoomFix})
)

// udFailed splits the probe's failed steps: the first that broke the data
// path (a fail) and the first classic-mistake observation that came out
// otherwise than on a correct stack (a warn: the steps with a Want).
func udFailed(p *probe.Probe) (broken, deviation *probe.Step) {
	for i := range p.Steps {
		st := &p.Steps[i]
		switch {
		case st.OK:
		case st.Want == "" && broken == nil:
			broken = st
		case st.Want != "" && deviation == nil:
			deviation = st
		}
	}
	return broken, deviation
}

// judgeUD judges probe.ud on one port.
func judgeUD(label string, software bool, pr *probe.PortResult) (verdict, bool) {
	r := pr.UD
	if r == nil {
		return verdict{}, false
	}
	if r.Skipped != "" {
		return udFrame.skippedVerdict(label, &r.Probe), true
	}
	ev := udEvidence(r, software)
	broken, deviation := udFailed(&r.Probe)
	var v verdict
	switch {
	case broken != nil:
		ev["failed_step"] = broken
		v = udBroken(broken, label, r, software)
		v.details = []string{stepsDone(&r.Probe)}
	case deviation != nil:
		ev["failed_step"] = deviation
		v = udDeviation(deviation).unit(portUnitOf(label), Slots{"label": label, "step": stepText(deviation)})
	default:
		v = udPass(label, software, r)
	}
	v.evidence = ev
	return v, true
}

// udDeviation is the finding for an observation that came out otherwise
// than on a correct stack.
func udDeviation(st *probe.Step) *Finding {
	switch {
	case strings.Contains(st.Name, "Q_Key"):
		return udWrongQKey
	case strings.Contains(st.Name, "IBV_WC_GRH"):
		return udNoGRHFlag
	case strings.Contains(st.Name, "byte_len"):
		return udByteLenShort
	}
	return udGRHRoom
}

func udEvidence(r *probe.UDResult, software bool) map[string]any {
	ev := map[string]any{
		"qkey": r.QKey, "payload_bytes": r.Payload, "send_status": r.SendStatus, "recv_status": r.RecvStatus,
		"byte_len": r.ByteLen, "byte_len_want": r.ByteLenWant, "grh_flag": r.GRHFlag, "src_qp": r.SrcQP,
		"sender_qpn": r.SenderQPN, "payload_offset": r.PayloadOffset, "latency_ns": r.Latency,
		"wrong_qkey_outcome": r.WrongQKey, "no_grh_room_outcome": r.NoGRHRoom,
		"software_device": software, "duration_ms": r.Millis,
	}
	if r.Addressing != nil {
		ev["addressing"] = r.Addressing
	}
	if r.QKeyViolations != nil {
		ev["qkey_violations"] = r.QKeyViolations
	}
	return ev
}

// udBroken is the verdict for a step that broke the UD data path, by what
// the step says.
func udBroken(st *probe.Step, label string, r *probe.UDResult, software bool) verdict {
	unit, slots := portUnitOf(label), udSlots(label, r).with("step", stepText(st))
	switch {
	case strings.HasPrefix(st.Name, "ibv_create_ah"):
		return udAHRefused.unit(unit, slots)
	case strings.Contains(st.Error, "no completion") && software:
		return udNoDeliveryRXE.unit(unit, slots)
	case strings.Contains(st.Error, "no completion"):
		return udNoDelivery.unit(unit, slots)
	case strings.Contains(st.Name, "IBV_WC_SUCCESS"):
		return udCompletionError.unit(unit, slots)
	case strings.Contains(st.Name, "byte_len"), strings.Contains(st.Name, "src_qp"), strings.Contains(st.Name, "payload"):
		return udLayoutWrong.unit(unit, slots)
	case strings.HasPrefix(st.Name, "ibv_modify_qp"):
		return udModifyQPRefused.unit(unit, slots.with(slotPairs(portFixSlots(label, nil))...))
	}
	return udStepFailed.unit(unit, slots.with("verbs_fix", resourcesRemedy(st, label, nil)))
}

// udPass is the verdict of a port where UD behaved as a correct stack does.
func udPass(label string, software bool, r *probe.UDResult) verdict {
	fd := udArrived
	if r.GRHFlag {
		fd = udArrivedGRH
	}
	v := fd.unit(portUnitOf(label), Slots{"label": label, "payload": fmt.Sprint(r.Payload), "byte_len": fmt.Sprint(r.ByteLen),
		"n": fmt.Sprint(r.Latency.N), "min": fmtNS(r.Latency.MinNS), "median": fmtNS(r.Latency.MedNS), "p99": fmtNS(r.Latency.P99NS)})
	if r.WrongQKey != "" {
		d := fmt.Sprintf("a SEND with the wrong Q_Key was %s", r.WrongQKey)
		if q := r.QKeyViolations; q != nil {
			d += fmt.Sprintf(" (qkey_viol_cntr +%d)", q.Delta)
		}
		v.details = append(v.details, d)
	}
	if r.NoGRHRoom != "" {
		v.details = append(v.details, "a receive without room for the GRH completed "+r.NoGRHRoom)
	}
	if r.Addressing != nil {
		v.details = append(v.details, udAddressLine(r.Addressing))
	}
	if software {
		v.details = append(v.details, "software device"+softwareNote(true))
	}
	return v
}

func udAddressLine(a *probe.Addressing) string {
	if a.GID != "" {
		return fmt.Sprintf("address handle: %s, GID index %d (%s, %s)", a.LinkLayer, a.GIDIndex, a.GID, a.GIDType)
	}
	return fmt.Sprintf("address handle: %s, DLID %d", a.LinkLayer, a.DLID)
}
