package probe

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
)

// cmProbeTimeout bounds the whole rdma_cm exchange of a session; less
// when the session's own deadline is nearer.
const cmProbeTimeout = 12 * time.Second

// CMPeerResult is peer.rdma_cm as the client's child reports it: its own
// side (CMResult) and the server's account.
type CMPeerResult struct {
	CMResult
	// Listener is where the server listened ("192.0.2.2:40123").
	Listener string `json:"listener,omitempty"`
	// Remote is the server's side; nil when it never reported.
	Remote *wire.CMResult `json:"remote,omitempty"`
	// ListenError is why the server could not listen.
	ListenError string `json:"listen_error,omitempty"`
}

// testRDMACM is the client's side of peer.rdma_cm: ask the server to
// listen, connect there through rdma_cm, collect the server's account.
func testRDMACM(em *emitter, conn *wire.Conn, preq *PeerRequest) {
	t0 := time.Now()
	res := &CMPeerResult{CMResult: CMResult{Probe: newProbe(RDMACM), Size: 4096}}
	defer func() { res.Millis = millis(time.Since(t0)); emitPeer(em, RDMACM, res) }()
	budget := min(cmProbeTimeout, time.Until(conn.Deadline)-conn.IOTimeout)
	s := &cmStepper{res: &res.CMResult, deadline: t0.Add(budget), stage: "listen"}
	if budget <= time.Second {
		s.step("time left in the session", func() error {
			return fmt.Errorf("only %s of the session left: no time for the rdma_cm test", budget.Round(time.Millisecond))
		})
		return
	}
	nonce := make([]byte, wire.CMNonceSize)
	askEchoed := preq.ProtocolVersion >= 3
	var at wire.CMListening
	if !s.step("the server listens with rdma_cm", func() error {
		if _, err := rand.Read(nonce); err != nil {
			return fmt.Errorf("nonce: %w", err)
		}
		if err := conn.Send(wire.MsgCMListen, wire.CMListen{Nonce: nonce, WaitMS: int(budget / time.Millisecond), Size: res.Size,
			Echoed: askEchoed}); err != nil {
			return err
		}
		return expectSkipping(conn, budget, wire.MsgCMListening, &at)
	}) {
		return
	}
	if at.Error != "" {
		res.ListenError = at.Error
		s.step("the server's rdma_cm listener", func() error { return errors.New("on the server: " + at.Error) })
		return
	}
	res.Listener = net.JoinHostPort(at.Addr, strconv.Itoa(at.Port))
	o := CMOptions{Library: preq.Library, Timeout: time.Until(s.deadline), Size: res.Size}
	var early *wire.CMResult
	if askEchoed {
		o.BeforeDisconnect = func() string { return awaitEchoed(conn, o.withDefaults().Step, &early) }
	}
	cl := CMClient(res.Listener, nonce, o)
	res.CMResult = mergeCM(&res.CMResult, cl)
	if early != nil {
		res.Remote = early
		return
	}
	var remote wire.CMResult
	// The server reports once its side ended: after the disconnect, or
	// when its own waits ran out.
	if err := expectSkipping(conn, time.Until(s.deadline)+conn.IOTimeout, wire.MsgCMResult, &remote); err == nil {
		res.Remote = &remote
	}
}

// awaitEchoed waits up to wait for the server's word that its echo was
// acknowledged, and says how it went. Not hearing it is not a failure
// here: the server's own report says what became of the echo. A report
// that comes first (the server's echo failed) is kept in early.
func awaitEchoed(conn *wire.Conn, wait time.Duration, early **wire.CMResult) string {
	t0 := time.Now()
	deadline := t0.Add(wait)
	for {
		f, err := conn.Recv(time.Until(deadline))
		if err != nil {
			return fmt.Sprintf("not said within %v (%v): disconnecting anyway", wait, err)
		}
		if staleAnswer(f.Type) {
			continue
		}
		if f.Type == wire.MsgCMResult {
			var r wire.CMResult
			if err := f.Decode(wire.MsgCMResult, &r); err != nil {
				return err.Error()
			}
			*early = &r
			return "the server reported its side before saying the echo was acknowledged"
		}
		if err := f.Decode(wire.MsgCMEchoed, &wire.CMEchoed{}); err != nil {
			return err.Error()
		}
		return fmt.Sprintf("after %.1f ms", float64(time.Since(t0).Microseconds())/1000)
	}
}

// mergeCM keeps the steps already taken (asking the server to listen)
// before the client's own.
func mergeCM(before, cl *CMResult) CMResult {
	out := *cl
	out.Steps = append(append([]Step{}, before.Steps...), cl.Steps...)
	return out
}

// expectSkipping reads frames until one of type want, dropping the
// answers of operations the client had already given up on (an OpReply
// that came after its wait): the session stays usable after a failed
// check.
func expectSkipping(conn *wire.Conn, wait time.Duration, want wire.MsgType, v any) error {
	deadline := time.Now().Add(wait)
	for {
		f, err := conn.Recv(time.Until(deadline))
		if err != nil {
			return err
		}
		if staleAnswer(f.Type) {
			continue
		}
		return f.Decode(want, v)
	}
}

// staleAnswer says a frame is the answer of an operation the client had
// already given up on (an OpReply or OpReady that came after its wait).
func staleAnswer(t wire.MsgType) bool { return t == wire.MsgOpReply || t == wire.MsgOpReady }

// serveRDMACM is the server's side of peer.rdma_cm: listen on the address
// of this side's RoCE GID (else the control connection's), tell the client
// where, serve its one connection, report.
func serveRDMACM(conn *wire.Conn, f wire.Frame, ps *peerSide, preq *PeerRequest) error {
	var m wire.CMListen
	if err := f.Decode(wire.MsgCMListen, &m); err != nil {
		return err
	}
	wait := min(time.Duration(m.WaitMS)*time.Millisecond, time.Until(conn.Deadline))
	addr := cmListenAddr(conn, ps)
	o := CMOptions{Library: preq.Library, Timeout: wait, Size: m.Size}
	if m.Echoed {
		o.Echoed = func() { _ = conn.Send(wire.MsgCMEchoed, wire.CMEchoed{}) }
	}
	l := ListenCM(addr, o)
	if l.Port() == 0 {
		l.Serve(nil, 0) // tears down what was built
		return conn.Send(wire.MsgCMListening, wire.CMListening{Error: failedText(&l.Result().Probe)})
	}
	if err := conn.Send(wire.MsgCMListening, wire.CMListening{Addr: addr, Port: int(l.Port())}); err != nil {
		l.Serve(nil, 0)
		return err
	}
	res := l.Serve(m.Nonce, wait)
	out := wire.CMResult{OK: res.FailedStage == "" && res.Failed() == nil, PathMTU: res.PathMTU, Device: res.Device}
	if st := res.Failed(); st != nil {
		out.Step, out.Error, out.Cause = st.Name, st.Error, st.Cause
	}
	return conn.Send(wire.MsgCMResult, out)
}

// cmListenAddr is the IPv4 address rdma_cm listens on: the one in this
// side's RoCE v2 GID (the RDMA netdev's), else the address the client
// reached the control port on.
func cmListenAddr(conn *wire.Conn, ps *peerSide) string {
	if ps != nil && len(ps.local.GID) == 16 {
		if ip := net.IP(ps.local.GID).To4(); ip != nil {
			return ip.String()
		}
	}
	if ta, ok := conn.LocalAddr().(*net.TCPAddr); ok {
		if ip := ta.IP.To4(); ip != nil {
			return ip.String()
		}
		return ta.IP.String()
	}
	return ""
}

// failedText is what a server sends back about its failed step: the step
// and its error (the verb said once) and the cause — the listener's error,
// a setup reply's, an operation's.
func failedText(p *Probe) string {
	st := p.Failed()
	if st == nil {
		return "failed"
	}
	msg := wire.StepError(st.Name, st.Error)
	if st.Cause != "" {
		msg += " (" + st.Cause + ")"
	}
	return msg
}
