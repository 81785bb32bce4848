package probe

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// Causes of a completion that never came on the UD probe's queues.
const (
	udNoSendCompletion = "the device never completed the SEND: a UD SEND completes once it leaves the port, acknowledged or not, " +
		"so the port is down or the device stalled"
	// udErrorWait bounds the wait for the error completion of a receive
	// without room for the GRH.
	udErrorWait = 500 * time.Millisecond
)

// udPoll waits for one completion on cq as a step; noneCause explains a
// wait that ran out.
func (r *runner) udPoll(p *Probe, name string, cq *verbs.CQ, noneCause string) (verbs.WC, bool) {
	var wc verbs.WC
	ok := r.step(p, name, func() (err error) {
		wc, err = pollOne(cq, r.pollWait())
		var ce *causedError
		if errors.As(err, &ce) {
			ce.cause = noneCause
		}
		return err
	})
	return wc, ok
}

// pollQuiet watches cq for wait (within the port's deadline) and reports
// the completion that came, if any.
func (r *runner) pollQuiet(cq *verbs.CQ, wait time.Duration) (verbs.WC, bool, error) {
	if left := r.pollWait(); left < wait {
		wait = left
	}
	var wc [1]verbs.WC
	deadline := time.Now().Add(wait)
	for {
		n, err := cq.Poll(wc[:])
		if err != nil || n == 1 {
			return wc[0], n == 1, err
		}
		if time.Now().After(deadline) {
			return verbs.WC{}, false, nil
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// udSendAndComplete posts a UD SEND from A and waits for its completion,
// which must be IBV_WC_SUCCESS whatever becomes of the packet: UD has no
// acknowledgement. tag tells the SENDs' steps apart ("", " — wrong Q_Key").
func (r *runner) udSendAndComplete(p *Probe, label, tag string, wr verbs.SendWR, g *udRig) (verbs.WC, bool) {
	if !r.step(p, "ibv_post_send A → "+label, func() error { return g.a.PostSend(wr) }) {
		return verbs.WC{}, false
	}
	swc, ok := r.udPoll(p, "ibv_poll_cq A (send completion"+tag+")", g.cqA, udNoSendCompletion)
	if !ok {
		return swc, false
	}
	return swc, r.note(p, "send completion IBV_WC_SUCCESS"+tag, swc.Status == verbs.WCSuccess,
		fmt.Sprintf("send completed with %s (vendor error %#x)", swc.Status, swc.VendorErr), "")
}

// udGoodSend is the SEND with the right Q_Key: B's receive leaves room for
// the GRH; both completions and the received bytes are judged.
func (r *runner) udGoodSend(res *UDResult, g *udRig) bool {
	p := &res.Probe
	sent := g.region(slotSendGood, g.payload)
	fillPattern(sent, 3)
	clear(g.region(slotRecvGood, g.slot))
	res.SenderQPN = g.a.Num
	res.ByteLenWant = uint32(g.payload + verbs.GRHBytes)
	if !r.step(p, "ibv_post_recv B (payload + 40-byte GRH area)", func() error {
		return g.b.PostRecv(g.recvWR(2, slotRecvGood, g.payload+verbs.GRHBytes))
	}) {
		return false
	}
	swc, ok := r.udSendAndComplete(p, fmt.Sprintf("B (qkey %#x, through the address handle)", udQKey), "", g.sendWR(1, slotSendGood, g.b, udQKey), g)
	res.SendStatus = swc.Status.String()
	if !ok {
		return false
	}
	rwc, ok := r.udPoll(p, "ibv_poll_cq B (receive completion)", g.cqB, udNoDelivery)
	if !ok {
		return false
	}
	return r.udJudgeReceive(res, g, rwc, sent)
}

// udJudgeReceive checks B's receive completion and buffer.
func (r *runner) udJudgeReceive(res *UDResult, g *udRig, wc verbs.WC, sent []byte) bool {
	p := &res.Probe
	res.RecvStatus, res.ByteLen, res.SrcQP = wc.Status.String(), wc.ByteLen, wc.SrcQP
	res.GRHFlag = wc.WCFlags&verbs.WCGRH != 0
	if !r.note(p, "receive completion IBV_WC_SUCCESS", wc.Status == verbs.WCSuccess,
		fmt.Sprintf("receive completed with %s (vendor error %#x)", wc.Status, wc.VendorErr), "") {
		return false
	}
	ll := g.s.port.LinkLayer
	ok := r.udByteLen(p, res, wc.ByteLen, ll)
	if ll == verbs.LinkLayerEthernet {
		// Observed, not a break of the data path: a provider that leaves
		// the flag out still delivers; what breaks is a reply built with
		// ibv_init_ah_from_wc, which needs the flag to make a RoCE handle.
		st := Step{Name: "IBV_WC_GRH set (RoCE always carries a GRH)", Want: wantGRHFlag, OK: res.GRHFlag}
		if !st.OK {
			st.Error = fmt.Sprintf("wc_flags %#x lack IBV_WC_GRH although a RoCE packet always carries a GRH", uint32(wc.WCFlags))
		}
		p.Steps = append(p.Steps, st)
	}
	ok = r.note(p, "src_qp is A's QP number", wc.SrcQP == g.a.Num,
		fmt.Sprintf("src_qp %#x, A is %#x: a UD receiver answers the QP src_qp names", wc.SrcQP, g.a.Num), "") && ok
	got := g.region(slotRecvGood, g.slot)
	res.PayloadOffset = payloadOffset(got, sent)
	return r.note(p, "payload at offset 40", res.PayloadOffset == verbs.GRHBytes, payloadOffsetError(res.PayloadOffset), "") && ok
}

// udByteLen judges byte_len: payload + 40 (the GRH area) as the verbs
// contract says, rxe does and IPoIB relies on. A count of the payload
// alone is observed, not a break: the data is there, and what goes wrong
// is a program that takes byte_len − 40 as the payload size. On a link
// layer of Unknown (EFA) that count is the device's own and passes.
func (r *runner) udByteLen(p *Probe, res *UDResult, got uint32, ll uint8) bool {
	const name = "receive byte_len = payload + 40 (GRH area)"
	switch {
	case got == res.ByteLenWant:
		return r.note(p, name, true, "", "")
	case int(got) == res.Payload && ll == verbs.LinkLayerUnspecified:
		return r.note(p, name, true, "", "byte_len counts the payload alone (link layer Unknown)")
	case int(got) == res.Payload:
		p.Steps = append(p.Steps, Step{Name: name, Want: wantByteLen,
			Error: fmt.Sprintf("byte_len %d counts the %d-byte payload alone, without the 40-byte GRH area in front of it", got, res.Payload)})
		return true
	}
	return r.note(p, name, false, fmt.Sprintf("byte_len %d, expected %d (%d-byte payload + the 40-byte GRH area, which a UD receive always consumes)",
		got, res.ByteLenWant, res.Payload), "")
}

// payloadOffset finds sent in the receive buffer got: at the GRH offset
// (40, correct) or at 0; -1 when it is in neither place.
func payloadOffset(got, sent []byte) int {
	for _, off := range []int{verbs.GRHBytes, 0} {
		if off+len(sent) <= len(got) && bytes.Equal(got[off:off+len(sent)], sent) {
			return off
		}
	}
	return -1
}

func payloadOffsetError(off int) string {
	if off == 0 {
		return "the payload starts at offset 0 of the receive buffer, not after the 40-byte GRH area"
	}
	return "the payload is not in the receive buffer (neither at offset 40 nor at 0)"
}

// udRoundTrips times UD SENDs from A to B: post_send to both completions
// polled, up to udMaxRoundTrips within udRoundTripBudget.
func (r *runner) udRoundTrips(res *UDResult, g *udRig) bool {
	r.begin(&res.Probe, "timed round trips")
	budget := udRoundTripBudget
	if d := time.Until(r.deadline) / 2; d < budget {
		budget = d
	}
	end := time.Now().Add(budget)
	send, recv := g.sendWR(5, slotSendGood, g.b, udQKey), g.recvWR(6, slotRecvGood, g.payload+verbs.GRHBytes)
	var lat []time.Duration
	var loopErr error
	for len(lat) < udMaxRoundTrips && time.Now().Before(end) {
		var d time.Duration
		if d, loopErr = r.udRoundTrip(g, send, recv); loopErr != nil {
			loopErr = fmt.Errorf("round trip %d: %w", len(lat)+1, loopErr)
			break
		}
		lat = append(lat, d)
	}
	res.Latency = stats(lat)
	st := Step{Name: "timed round trips", OK: loopErr == nil && len(lat) > 0,
		Detail: fmt.Sprintf("%d round trips", len(lat))}
	if loopErr != nil {
		r.fill(&st, loopErr)
	} else if len(lat) == 0 {
		st.Error = "no round trip fitted in the time budget"
	}
	res.Steps = append(res.Steps, st)
	return st.OK
}

// udRoundTrip is one timed SEND: the receive is posted first (untimed).
func (r *runner) udRoundTrip(g *udRig, send verbs.SendWR, recv verbs.RecvWR) (time.Duration, error) {
	if err := g.b.PostRecv(recv); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := g.a.PostSend(send); err != nil {
		return 0, err
	}
	for _, c := range []struct {
		cq   *verbs.CQ
		what string
	}{{g.cqA, "send"}, {g.cqB, "receive"}} {
		wc, err := pollOne(c.cq, r.pollWait())
		if err != nil {
			return 0, err
		}
		if wc.Status != verbs.WCSuccess {
			return 0, fmt.Errorf("%s completed with %s", c.what, wc.Status)
		}
	}
	return time.Since(t0), nil
}
