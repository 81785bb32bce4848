package probe

import (
	"fmt"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
)

// testPeer is the client's side of a session: each peer check in turn,
// each run only when the one before passed, each emitted as a result.
func testPeer(em *emitter, conn *wire.Conn, preq *PeerRequest) {
	t0 := time.Now()
	cr := &PeerConnectResult{Probe: newProbe(PeerConnect)}
	r, err := peerRunner(em, preq)
	if err != nil {
		// This host cannot take part at all: one result says why, and the
		// server hears Bye instead of a Setup it would wait for.
		cr.Steps = append(cr.Steps, LocalStep(err))
		emitPeer(em, PeerConnect, cr)
		_ = conn.Send(wire.MsgBye, struct{}{})
		return
	}
	ps := &peerSide{r: r, params: preq.Params, peerIP: remoteIP(conn), sameHost: onSameHost(conn)}
	defer func() {
		if ps.s != nil {
			p := newProbe("teardown")
			r.teardown(&p, &ps.s.td)
		}
		// peer.rdma_cm needs only the control connection, not the
		// checks above: it runs whatever they found.
		testRDMACM(em, conn, preq)
		_ = conn.Send(wire.MsgBye, struct{}{})
	}()
	ok := ps.connectPeer(conn, preq, cr)
	cr.Millis = millis(time.Since(t0))
	emitPeer(em, PeerConnect, cr)
	if !ok {
		return
	}
	ps.measure(em, conn, preq, cr)
}

// measure runs the checks after peer.connect in order, each only when the
// one before it passed; a check not run is not emitted (the judge says
// which one blocked it). Both sides' counters are read before the first
// transfer and again after the last one that ran, whichever stopped the
// run: a lossy link that stalls the latency or bandwidth run is exactly
// when the rising counters must still be named.
func (ps *peerSide) measure(em *emitter, conn *wire.Conn, preq *PeerRequest, cr *PeerConnectResult) {
	before, rBefore, lErr, rErr := ps.counterSnapshot(conn)
	defer ps.emitTimed(em, PeerCounters, func() (any, *Probe) {
		after, rAfter, lErr2, rErr2 := ps.counterSnapshot(conn)
		res := &PeerCountersResult{Probe: newProbe(PeerCounters), LocalError: firstOf(lErr, lErr2), RemoteError: firstOf(rErr, rErr2)}
		if res.LocalError == "" {
			res.Local = counterPairs(before, after)
		}
		if res.RemoteError == "" {
			res.Remote = counterPairs(rBefore, rAfter)
		}
		ps.r.note(&res.Probe, "counters read on both sides around the session's transfers", true, "",
			fmt.Sprintf("%d here, %d on the peer", len(res.Local), len(res.Remote)))
		return res, &res.Probe
	})
	if !ps.emitTimed(em, PeerSendRecv, func() (any, *Probe) { sr := ps.sendRecv(conn, preq.ProtocolVersion); return sr, &sr.Probe }) {
		return
	}
	if !ps.emitTimed(em, PeerWrite, func() (any, *Probe) { w := ps.rdmaWrite(conn, cr.Remote); return w, &w.Probe }) {
		return
	}
	if !ps.emitTimed(em, PeerRead, func() (any, *Probe) { rd := ps.rdmaRead(conn, cr.Remote); return rd, &rd.Probe }) {
		return
	}
	if !ps.emitTimed(em, PeerLatency, func() (any, *Probe) { l := ps.latency(conn, preq); return l, &l.Probe }) {
		return
	}
	remoteRate := 0.0
	if cr.RemoteHost != nil {
		remoteRate = cr.RemoteHost.RateGbps
	}
	ps.emitTimed(em, PeerBandwidth, func() (any, *Probe) { b := ps.bandwidth(cr.Remote, remoteRate, preq); return b, &b.Probe })
}

// emitTimed runs one check, times it and emits its result; it reports
// whether the check passed, so the next may run.
func (ps *peerSide) emitTimed(em *emitter, name string, run func() (any, *Probe)) bool {
	t0 := time.Now()
	res, p := run()
	p.Millis = millis(time.Since(t0))
	emitPeer(em, name, res)
	return p.Failed() == nil
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// peerIWARPSkip is why an iWARP device cannot take part: its RC QPs
// connect only through rdma_cm (a TCP connection stands behind each).
const peerIWARPSkip = "iWARP RC QPs connect only through rdma_cm, not with ibv_modify_qp and exchanged QP numbers; pass --device of an InfiniBand or RoCE port"

// connectPeer builds the local QP, exchanges endpoints with the server
// and moves the QP to RTS toward the server's.
func (ps *peerSide) connectPeer(conn *wire.Conn, preq *PeerRequest, cr *PeerConnectResult) bool {
	r, p := ps.r, &cr.Probe
	if r.dev.TransportType == verbs.TransportIWARP || r.dev.NodeType == verbs.NodeRNIC {
		p.Skipped = peerIWARPSkip
		return false
	}
	if !ps.build(p, preq.GIDIndex) {
		return false
	}
	preq.Host.RateGbps = portRateGbps(r)
	preq.Host.Counters, _ = readPeerCounters(r) // unreadable: peer.counters says so
	cr.Local, cr.LocalHost = &ps.local, &preq.Host
	var reply wire.SetupReply
	if !r.step(p, "exchange endpoints with the server", func() error {
		if err := conn.Send(wire.MsgSetup, wire.Setup{Endpoint: ps.local, Host: preq.Host, Params: ps.params}); err != nil {
			return err
		}
		// The server opens its device and moves its QP to RTS first.
		return conn.Expect(r.pollWait()+conn.IOTimeout, wire.MsgSetupReply, &reply)
	}) {
		return false
	}
	cr.RemoteHost = &reply.Host
	if reply.Error != "" {
		cr.RemoteError = reply.Error
		return r.note(p, "the server's QP", false, "the server could not build or connect its QP: "+reply.Error, "")
	}
	cr.Remote = &reply.Endpoint
	ps.remoteSoftware = reply.Endpoint.Software
	cr.PathMTU, cr.MTUNote = wire.NegotiatePathMTU(&ps.local, &reply.Endpoint)
	if !r.note(p, "same link layer", ps.local.LinkLayer == reply.Endpoint.LinkLayer,
		fmt.Sprintf("this port is %s, the server's is %s: RC needs one fabric", ps.local.LinkLayer, reply.Endpoint.LinkLayer), "") {
		return false
	}
	if !r.note(p, "both sides agree on the path MTU", reply.PathMTU == cr.PathMTU,
		fmt.Sprintf("the server chose path MTU %d, this side %d", reply.PathMTU, cr.PathMTU), "") {
		return false
	}
	return ps.connectTo(p, &reply.Endpoint, cr.PathMTU)
}

// onePacketSize is the SEND peer.send_recv sends each way before the full
// one: it fits one packet at any path MTU (256 and up), so it crosses a
// path whatever MTU its hops have.
const onePacketSize = 64

// sendRecv is peer.send_recv: a SEND to the server, checked there, and
// its answer, checked here; first one of a single packet, then one of
// --size bytes (packets of the path MTU), so that a path that carries
// small packets but drops full ones is told apart from one that carries
// nothing.
func (ps *peerSide) sendRecv(conn *wire.Conn, version int) *PeerSendRecvResult {
	n := ps.params.MsgSize
	res := &PeerSendRecvResult{Probe: newProbe(PeerSendRecv), Size: n}
	if n > onePacketSize && version >= 2 {
		res.OnePacketSize = onePacketSize
		if !ps.sendRecvOnce(conn, res, onePacketSize) {
			return res
		}
		res.OnePacketOK = true
		res.ToPeer, res.FromPeer = false, false
	}
	ps.sendRecvOnce(conn, res, n)
	return res
}

// sendRecvOnce is one SEND of n bytes each way; it records its steps in
// res and says whether both arrived intact.
func (ps *peerSide) sendRecvOnce(conn *wire.Conn, res *PeerSendRecvResult, n int) bool {
	r, p := ps.r, &res.Probe
	what := fmt.Sprintf("%d-byte ", n)
	recv := ps.region(1, n)
	clear(recv)
	if !r.step(p, "ibv_post_recv (for the "+what+"answer)", func() error {
		return ps.qp.PostRecv(verbs.RecvWR{ID: 11, SGEs: []verbs.SGE{ps.sge(1, n)}})
	}) {
		return false
	}
	seed := uint32(time.Now().UnixNano())
	wait := ps.transferWait()
	if !r.step(p, "the server posts its receive", func() error {
		if err := conn.Send(wire.MsgOp, wire.Op{Kind: wire.OpSendRecv, Seed: seed, Len: n, WaitMS: int(wait / time.Millisecond)}); err != nil {
			return err
		}
		return conn.Expect(0, wire.MsgOpReady, &wire.OpReady{})
	}) {
		return false
	}
	wire.Pattern(ps.region(0, n), seed)
	if !r.step(p, "ibv_post_send "+what+"SEND", func() error {
		return ps.qp.PostSend(verbs.SendWR{ID: 12, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGEs: []verbs.SGE{ps.sge(0, n)}})
	}) {
		return false
	}
	sendOK := true
	if _, ok := ps.waitCompletion(p, "ibv_poll_cq send (the "+what+"SEND to the server)", ps.sendCQ, wait,
		"the server never acknowledged the SEND: its QP is not reachable over RDMA from here"); !ok {
		sendOK = false
	}
	var reply wire.OpReply
	if !r.step(p, "the server's account", func() error { return conn.Expect(wait, wire.MsgOpReply, &reply) }) {
		return false
	}
	if !reply.OK {
		res.RemoteError = reply.Error
		r.note(p, "the server received the SEND intact", false, "on the server: "+reply.Error, "")
		return false
	}
	res.ToPeer = sendOK
	if !sendOK {
		return false
	}
	wc, ok := ps.waitCompletion(p, "ibv_poll_cq recv (the server's "+what+"answer)", ps.recvCQ, ps.transferWait(),
		"the server's answer never arrived: its packets do not reach this host over RDMA (one direction of the path is broken)")
	if !ok {
		return false
	}
	at := wire.PatternMismatch(recv, seed+1)
	res.FromPeer = r.note(p, "the "+what+"answer arrived intact", int(wc.ByteLen) == n && at < 0,
		fmt.Sprintf("received %d bytes of %d, payload differs from byte %d", wc.ByteLen, n, at), "")
	return res.FromPeer
}
