package probe

import (
	"fmt"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// What a correct stack does with the two classic UD mistakes, with the GRH
// flag of a RoCE receive and with the byte count of a payload that arrived
// intact; the steps that observe them carry these as Want (a deviation
// there leaves the UD data path working).
const (
	wantGRHFlag  = "IBV_WC_GRH on a RoCE receive completion"
	wantByteLen  = "byte_len = payload + 40"
	wantDropped  = "dropped: no receive completion"
	wantLenError = "an error completion (IBV_WC_LOC_LEN_ERR; rxe on Linux 6.1 gives IBV_WC_LOC_QP_OP_ERR)"
)

// udWrongQKey sends to B with a Q_Key that is not B's. The receiver drops
// the packet (the kernel's rxe counts it in the port's qkey_viol_cntr)
// and nothing completes on B, while A's SEND completes IBV_WC_SUCCESS: UD
// has no acknowledgement. A SEND with the right Q_Key then proves B's
// receive was still waiting, and that what it got is the second payload.
func (r *runner) udWrongQKey(res *UDResult, g *udRig) bool {
	p := &res.Probe
	before, beforeErr := g.s.ctx.QueryPort(uint8(r.port))
	fillPattern(g.region(slotSendWrong, g.payload), 101)
	follow := g.region(slotSendFollow, g.payload)
	fillPattern(follow, 53)
	clear(g.region(slotRecvQuiet, g.slot))
	if !r.step(p, "ibv_post_recv B (for the wrong Q_Key)", func() error {
		return g.b.PostRecv(g.recvWR(7, slotRecvQuiet, g.payload+verbs.GRHBytes))
	}) {
		return false
	}
	if _, ok := r.udSendAndComplete(p, fmt.Sprintf("B with qkey %#x (B's is %#x)", udWrongQKey, udQKey), " — wrong Q_Key",
		g.sendWR(8, slotSendWrong, g.b, udWrongQKey), g); !ok {
		return false
	}
	r.begin(p, "watch B for the wrong Q_Key")
	wc, got, err := r.pollQuiet(g.cqB, udQuietWait)
	if err != nil {
		return r.step(p, "ibv_poll_cq B (wrong Q_Key)", func() error { return err })
	}
	st := Step{Name: "SEND with the wrong Q_Key dropped", Want: wantDropped, OK: !got,
		Detail: fmt.Sprintf("no receive completion within %v", udQuietWait)}
	if got {
		res.WrongQKey = "delivered"
		st.Error = fmt.Sprintf("B completed a receive (%s, byte_len %d) for a SEND with qkey %#x although its own is %#x: the QP does not enforce its Q_Key",
			wc.Status, wc.ByteLen, udWrongQKey, udQKey)
		p.Steps = append(p.Steps, st)
		return true
	}
	p.Steps = append(p.Steps, st)
	if !r.udFollowUp(res, g, follow) {
		return false
	}
	if after, err := g.s.ctx.QueryPort(uint8(r.port)); err == nil && beforeErr == nil {
		res.QKeyViolations = &CounterDelta{Name: "qkey_viol_cntr", Before: uint64(before.QkeyViolCntr),
			After: uint64(after.QkeyViolCntr), Unit: "packets"}
		if after.QkeyViolCntr >= before.QkeyViolCntr {
			res.QKeyViolations.Delta = uint64(after.QkeyViolCntr - before.QkeyViolCntr)
		}
	}
	return true
}

// udFollowUp sends the right Q_Key to B after the wrong one: B's waiting
// receive must take it, with its payload, not the dropped one's.
func (r *runner) udFollowUp(res *UDResult, g *udRig, follow []byte) bool {
	p := &res.Probe
	if _, ok := r.udSendAndComplete(p, fmt.Sprintf("B with qkey %#x (after the wrong one)", udQKey), " — after the wrong Q_Key",
		g.sendWR(9, slotSendFollow, g.b, udQKey), g); !ok {
		return false
	}
	wc, ok := r.udPoll(p, "ibv_poll_cq B (the right Q_Key after the wrong one)", g.cqB, udNoDelivery)
	if !ok || !r.note(p, "receive completion IBV_WC_SUCCESS — after the wrong Q_Key", wc.Status == verbs.WCSuccess,
		fmt.Sprintf("receive completed with %s (vendor error %#x)", wc.Status, wc.VendorErr), "") {
		return false
	}
	got := g.region(slotRecvQuiet, g.slot)
	if off := payloadOffset(got, follow); off >= 0 {
		res.WrongQKey = "dropped"
		return true
	}
	if payloadOffset(got, g.region(slotSendWrong, g.payload)) >= 0 {
		res.WrongQKey = "delivered"
		p.Steps = append(p.Steps, Step{Name: "SEND with the wrong Q_Key dropped", Want: wantDropped,
			Error: fmt.Sprintf("B's receive holds the payload sent with qkey %#x, not the one sent after it with %#x: the QP does not enforce its Q_Key", udWrongQKey, udQKey)})
		return true
	}
	return r.note(p, "payload of the right Q_Key received", false, "B's receive holds neither payload", "")
}

// udNoGRHRoom posts on C a receive that holds the payload but not the GRH
// area in front of it, and sends to C. rxe writes the GRH area first and
// finds no room for the payload after it; on Linux 6.1 its copy fails as a
// malformed receive and the receive completes IBV_WC_LOC_QP_OP_ERR, where
// the verbs contract's status is IBV_WC_LOC_LEN_ERR (C then goes to the
// error state). Any error status shows the mistake is caught; a success
// or nothing at all does not.
func (r *runner) udNoGRHRoom(res *UDResult, g *udRig) {
	p := &res.Probe
	clear(g.region(slotRecvSmall, g.slot))
	if !r.step(p, fmt.Sprintf("ibv_post_recv C (%d bytes: the payload, no room for the GRH)", g.payload), func() error {
		return g.c.PostRecv(g.recvWR(10, slotRecvSmall, g.payload))
	}) {
		return
	}
	if _, ok := r.udSendAndComplete(p, fmt.Sprintf("C (qkey %#x)", udQKey), " — to C", g.sendWR(11, slotSendGood, g.c, udQKey), g); !ok {
		return
	}
	r.begin(p, "watch C for the receive without GRH room")
	wc, got, err := r.pollQuiet(g.cqC, udErrorWait)
	if err != nil {
		r.step(p, "ibv_poll_cq C (no GRH room)", func() error { return err })
		return
	}
	st := Step{Name: "receive without room for the GRH completes in error", Want: wantLenError}
	switch {
	case !got:
		res.NoGRHRoom = "no completion"
		st.Error = fmt.Sprintf("no completion within %v: the message was dropped without an error completion, so a program with this mistake waits forever", udErrorWait)
	case wc.Status == verbs.WCSuccess:
		res.NoGRHRoom = wc.Status.String()
		st.Error = fmt.Sprintf("the receive completed IBV_WC_SUCCESS (byte_len %d) into a %d-byte buffer that has no room for the 40-byte GRH area", wc.ByteLen, g.payload)
	default:
		res.NoGRHRoom = wc.Status.String()
		st.OK = true
		st.Detail = wc.Status.String()
	}
	p.Steps = append(p.Steps, st)
}
