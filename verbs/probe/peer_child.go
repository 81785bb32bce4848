package probe

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
)

// Peer child modes (os.Args[2]); the session's socket is fd peerConnFD.
const (
	modePeerServe = "peer-serve"
	modePeerTest  = "peer-test"
	peerConnFD    = 4
	// peerClientEvent is the serve child's event with the client's Setup.
	peerClientEvent = "peer.client"
)

// peerConn wraps the inherited socket with the session's deadlines.
func peerConn(preq *PeerRequest) (*wire.Conn, error) {
	f := os.NewFile(peerConnFD, "peer-conn")
	if f == nil {
		return nil, errors.New("no session socket on fd 4")
	}
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("session socket on fd 4: %w", err)
	}
	return &wire.Conn{Conn: c, IOTimeout: time.Duration(preq.IOTimeoutNS),
		Deadline: time.Now().Add(time.Duration(preq.SessionNS))}, nil
}

// runPeerChild is a peer child's work: the server's or the client's side
// of one session.
func runPeerChild(em *emitter, mode string, req request) error {
	preq := req.Peer
	if preq == nil {
		return errors.New("no peer request")
	}
	conn, err := peerConn(preq)
	if err != nil {
		return err
	}
	defer conn.Close()
	preq.peerIP = remoteIP(conn)
	if mode == modePeerServe {
		return servePeer(em, conn, preq)
	}
	testPeer(em, conn, preq)
	return nil
}

// emitPeer writes one peer check's result.
func emitPeer(em *emitter, name string, res any) {
	b, err := json.Marshal(res)
	if err != nil {
		em.emit(event{Kind: "fatal", Error: "encode " + name + ": " + err.Error()})
		return
	}
	em.emit(event{Kind: "result", Probe: name, Result: b})
}

// servePeer is the server's side of a session: read the client's Setup,
// build and connect the local QP, answer, then serve operations until Bye,
// the end of the connection or the session's deadline. Every verbs object
// is destroyed on the way out (and by the kernel if the child is killed).
func servePeer(em *emitter, conn *wire.Conn, preq *PeerRequest) error {
	var setup wire.Setup
	f, err := conn.Recv(0)
	// A client whose port has no hand-made QP (iWARP) may go straight to
	// peer.rdma_cm, before any Setup.
	for err == nil && f.Type == wire.MsgCMListen {
		if err = serveRDMACM(conn, f, nil, preq); err == nil {
			f, err = conn.Recv(0)
		}
	}
	if err == nil && f.Type == wire.MsgBye {
		return nil // the client's own port could not take part
	}
	if err == nil {
		err = f.Decode(wire.MsgSetup, &setup)
	}
	if err != nil {
		return fmt.Errorf("read Setup: %w", err)
	}
	emitPeer(em, peerClientEvent, &setup)
	if preq.MaxBuffer > 0 && setup.Params.BufferSize > preq.MaxBuffer {
		msg := fmt.Sprintf("a %d-byte buffer exceeds this server's %d-byte share of its memory cap", setup.Params.BufferSize, preq.MaxBuffer)
		_ = conn.Send(wire.MsgSetupReply, wire.SetupReply{Error: msg})
		return errors.New(msg)
	}
	r, err := peerRunner(em, preq)
	if err != nil {
		_ = conn.Send(wire.MsgSetupReply, wire.SetupReply{Error: err.Error()})
		return err
	}
	ps := &peerSide{r: r, params: setup.Params, peerIP: remoteIP(conn), sameHost: onSameHost(conn)}
	p := newProbe("peer.serve")
	defer func() {
		if ps.s != nil {
			r.teardown(&p, &ps.s.td)
		}
	}()
	var mtu int
	if ps.build(&p, preq.GIDIndex) {
		mtu, _ = wire.NegotiatePathMTU(&ps.local, &setup.Endpoint)
		ps.connectTo(&p, &setup.Endpoint, mtu)
	}
	preq.Host.RateGbps = portRateGbps(r)
	preq.Host.Counters, _ = readPeerCounters(r) // unreadable: the client's peer.counters says so
	reply := wire.SetupReply{Endpoint: ps.local, Host: preq.Host, PathMTU: mtu}
	if p.Failed() != nil {
		reply.Error = failedText(&p)
		_ = conn.Send(wire.MsgSetupReply, reply)
		return errors.New(reply.Error)
	}
	if err := conn.Send(wire.MsgSetupReply, reply); err != nil {
		return err
	}
	for {
		f, err := conn.Recv(time.Until(conn.Deadline))
		if err != nil {
			return fmt.Errorf("wait for the next operation: %w", err)
		}
		if f.Type == wire.MsgBye {
			return nil
		}
		if f.Type == wire.MsgCMListen {
			if err := serveRDMACM(conn, f, ps, preq); err != nil {
				return err
			}
			continue
		}
		var op wire.Op
		if err := f.Decode(wire.MsgOp, &op); err != nil {
			return err
		}
		if err := ps.serveOp(conn, &op); err != nil {
			return err
		}
	}
}

// serveOp carries out the server's part of one operation.
func (ps *peerSide) serveOp(conn *wire.Conn, op *wire.Op) error {
	wait := min(time.Duration(op.WaitMS)*time.Millisecond, time.Until(conn.Deadline))
	switch op.Kind {
	case wire.OpSendRecv:
		return ps.serveSendRecv(conn, op, wait)
	case wire.OpCheckMemory, wire.OpFillMemory:
		if op.Offset+op.Len > ps.buf.Len() {
			return conn.Send(wire.MsgOpReply, wire.OpReply{Error: fmt.Sprintf("bytes %d–%d lie outside the %d-byte region", op.Offset, op.Offset+op.Len, ps.buf.Len())})
		}
		mem := ps.buf.Bytes()[op.Offset : op.Offset+op.Len]
		if op.Kind == wire.OpFillMemory {
			wire.Pattern(mem, op.Seed)
			return conn.Send(wire.MsgOpReply, wire.OpReply{OK: true})
		}
		if at := wire.PatternMismatch(mem, op.Seed); at >= 0 {
			return conn.Send(wire.MsgOpReply, wire.OpReply{Error: fmt.Sprintf("the memory the client wrote differs from byte %d on", at)})
		}
		return conn.Send(wire.MsgOpReply, wire.OpReply{OK: true, Detail: fmt.Sprintf("%d bytes written intact", op.Len)})
	case wire.OpEcho:
		return ps.serveEcho(conn, op, wait)
	case wire.OpCounters:
		cs, err := readPeerCounters(ps.r)
		if err != nil {
			return conn.Send(wire.MsgOpReply, wire.OpReply{Error: err.Error()})
		}
		return conn.Send(wire.MsgOpReply, wire.OpReply{OK: true, Counters: cs})
	}
	return conn.Send(wire.MsgOpReply, wire.OpReply{Error: fmt.Sprintf("operation %s is not served by this version", op.Kind)})
}

// serveSendRecv is the server's part of peer.send_recv: post a receive,
// say so, check the client's SEND, answer with a SEND of the next seed.
// The SEND is the session's message size or shorter (protocol 2: the
// one-packet SEND before the full one).
func (ps *peerSide) serveSendRecv(conn *wire.Conn, op *wire.Op, wait time.Duration) error {
	n := op.Len
	p := newProbe(string(op.Kind))
	if n < 1 || n > ps.params.MsgSize {
		return conn.Send(wire.MsgOpReply, wire.OpReply{Error: fmt.Sprintf("length %d is not 1–%d, the session's message size", n, ps.params.MsgSize)})
	}
	recv := ps.region(1, n)
	clear(recv)
	if !ps.r.step(&p, "ibv_post_recv", func() error { return ps.qp.PostRecv(verbs.RecvWR{ID: 1, SGEs: []verbs.SGE{ps.sge(1, n)}}) }) {
		return conn.Send(wire.MsgOpReply, opFailure(&p))
	}
	if err := conn.Send(wire.MsgOpReady, wire.OpReady{}); err != nil {
		return err
	}
	wc, ok := ps.waitCompletion(&p, "ibv_poll_cq recv (the client's SEND)", ps.recvCQ, wait,
		"the client's SEND never arrived: its packets do not reach this host over RDMA")
	if !ok {
		return conn.Send(wire.MsgOpReply, opFailure(&p))
	}
	if at := wire.PatternMismatch(recv, op.Seed); int(wc.ByteLen) != n || at >= 0 {
		return conn.Send(wire.MsgOpReply, wire.OpReply{Error: fmt.Sprintf("received %d bytes, payload differs from byte %d", wc.ByteLen, at)})
	}
	send := ps.region(0, n)
	wire.Pattern(send, op.Seed+1)
	if !ps.r.step(&p, "ibv_post_send SEND", func() error {
		return ps.qp.PostSend(verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGEs: []verbs.SGE{ps.sge(0, n)}})
	}) {
		return conn.Send(wire.MsgOpReply, opFailure(&p))
	}
	if _, ok := ps.waitCompletion(&p, "ibv_poll_cq send (the answer)", ps.sendCQ, wait, ""); !ok {
		return conn.Send(wire.MsgOpReply, opFailure(&p))
	}
	return conn.Send(wire.MsgOpReply, wire.OpReply{OK: true, Detail: fmt.Sprintf("received %d bytes intact, answered", n)})
}

// serveEcho answers Count SENDs of Len bytes, each with a SEND of the same
// size: the latency ping-pong. Receives are kept posted ahead, at most the
// queue's depth.
func (ps *peerSide) serveEcho(conn *wire.Conn, op *wire.Op, wait time.Duration) error {
	n := op.Len
	if n < 1 || n > ps.params.MsgSize {
		return conn.Send(wire.MsgOpReply, wire.OpReply{Error: fmt.Sprintf("echo length %d is not 1–%d", n, ps.params.MsgSize)})
	}
	p := newProbe("echo")
	recvWR := verbs.RecvWR{ID: 21, SGEs: []verbs.SGE{ps.mr.SGE(ps.params.MsgSize, n)}}
	sendWR := verbs.SendWR{ID: 22, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGEs: []verbs.SGE{ps.mr.SGE(0, n)}}
	posted := 0
	for ; posted < min(op.Count, peerWR/2); posted++ {
		if err := ps.qp.PostRecv(recvWR); err != nil {
			return conn.Send(wire.MsgOpReply, wire.OpReply{Error: "ibv_post_recv: " + err.Error()})
		}
	}
	if err := conn.Send(wire.MsgOpReady, wire.OpReady{}); err != nil {
		return err
	}
	// No step per round trip: each step writes an event to the parent,
	// which wakes another process on the CPU the ping-pong runs on (on a
	// 1-vCPU guest that multiplied the round trip several times). Only a
	// failure is recorded, as the client's loop does.
	failed := func(what string, i int, err error) error {
		st := Step{Name: fmt.Sprintf("ibv_poll_cq %s (round trip %d)", what, i+1)}
		ps.r.fill(&st, err)
		p.Steps = append(p.Steps, st)
		return conn.Send(wire.MsgOpReply, opFailure(&p))
	}
	sends := sendReaper{ps: ps}
	endDataPath := ps.pace.beginDataPath()
	defer endDataPath()
	for i := 0; i < op.Count; i++ {
		ps.pace.maybeYield()
		if err := ps.pollStatus(ps.recvCQ, wait, "recv"); err != nil {
			return failed("recv", i, err)
		}
		// The answer first, the next receive after it: only the answer
		// is on the round trip's clock.
		if err := ps.qp.PostSend(sendWR); err != nil {
			return conn.Send(wire.MsgOpReply, wire.OpReply{Error: "ibv_post_send: " + err.Error()})
		}
		sends.outstanding++
		if posted < op.Count {
			if err := ps.qp.PostRecv(recvWR); err != nil {
				return conn.Send(wire.MsgOpReply, wire.OpReply{Error: "ibv_post_recv: " + err.Error()})
			}
			posted++
		}
		if err := sends.reap(false, wait); err != nil {
			return failed("send", i, err)
		}
	}
	if err := sends.reap(true, wait); err != nil {
		return failed("send", op.Count-1, err)
	}
	return conn.Send(wire.MsgOpReply, wire.OpReply{OK: true, Detail: fmt.Sprintf("%d round trips answered", op.Count)})
}

// opFailure is the reply for an operation whose step failed.
func opFailure(p *Probe) wire.OpReply {
	return wire.OpReply{Error: failedText(p)}
}
