package probe

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// CMListener is the server side of the rdma_cm probe: an rdma_cm listener
// on the session's address (port chosen by the library, announced to the
// client over the control connection), serving one connection.
type CMListener struct {
	res    *CMResult
	s      *cmStepper
	e      cmEnd
	listen *verbs.CMID
	port   uint16
	o      CMOptions
}

// ListenCM opens librdmacm and listens on addr (an IP of this host; port 0
// lets the library choose). On failure the returned listener's Result says
// which step failed; Port is 0.
func ListenCM(addr string, o CMOptions) *CMListener {
	o = o.withDefaults()
	l := &CMListener{res: &CMResult{Probe: newProbe(RDMACM), Size: o.Size}, o: o}
	l.s = &cmStepper{res: l.res, deadline: time.Now().Add(o.Timeout)}
	ap, err := netip.ParseAddr(addr)
	if !l.s.step("parse the listen address", func() error {
		if err != nil {
			return fmt.Errorf("rdma_cm listen address %q: %w", addr, err)
		}
		return nil
	}) || !l.e.open(l.s, o) {
		return l
	}
	l.s.stage = "listen"
	if !l.s.step("rdma_create_id RDMA_PS_TCP", func() (err error) {
		l.listen, err = l.e.ch.CreateID(verbs.PortSpaceTCP)
		return err
	}) {
		return l
	}
	l.e.td.push("rdma_destroy_id listener", l.listen.Destroy)
	if l.s.step("rdma_bind_addr "+ap.String(), func() error { return l.listen.BindAddr(netip.AddrPortFrom(ap, 0)) }) &&
		l.s.step("rdma_listen", func() error { return l.listen.Listen(4) }) {
		l.port = l.listen.LocalPort()
	}
	return l
}

// Port is the rdma_cm port the listener is bound to; 0 when it failed.
func (l *CMListener) Port() uint16 { return l.port }

// Result is the server side's record so far.
func (l *CMListener) Result() *CMResult { return l.res }

// Serve waits for the client's connection request (until wait passes),
// accepts it when its private data is nonce (rejects it otherwise),
// receives the payload, echoes it back and waits for the disconnect. It
// always tears everything down, the listener included.
func (l *CMListener) Serve(nonce []byte, wait time.Duration) *CMResult {
	t0 := time.Now()
	s := l.s
	defer func() { l.res.Millis += millis(time.Since(t0)); l.e.finish(s) }()
	if l.port == 0 {
		return l.res
	}
	s.deadline = time.Now().Add(wait)
	s.stage = "connect"
	var req *verbs.CMEvent
	if !s.step("RDMA_CM_EVENT_CONNECT_REQUEST", func() (err error) {
		req, err = expect(s, l.e.ch, verbs.CMEventConnectRequest, wait, func(*verbs.CMEvent) string {
			return "the client's connection request never arrived: it failed before connecting (its own report says why), " +
				"or on RoCE v2 UDP port 4791 is blocked towards this host"
		}, l.listen)
		return err
	}) {
		return l.res
	}
	id := req.ID
	l.e.td.push("rdma_destroy_id connection", id.Destroy)
	if !s.step("private data is this session's", func() error {
		// The CM pads the request's private data to its fixed size (56
		// bytes on IB CM): the nonce is a prefix.
		if len(nonce) > 0 && bytes.HasPrefix(req.PrivateData, nonce) || len(nonce) == 0 {
			return nil
		}
		_ = id.Reject([]byte("rdmadoctor: not this session"))
		return fmt.Errorf("connection request with %d bytes of private data that are not this session's: rejected", len(req.PrivateData))
	}) {
		return l.res
	}
	l.res.Device, l.res.Port = cmDevice(id), int(id.PortNum())
	b, ok := l.e.resources(s, id, l.o.Size)
	if !ok {
		_ = id.Reject(nil)
		return l.res
	}
	l.echo(id, b)
	return l.res
}

// echo accepts the connection, receives the payload and sends it back.
func (l *CMListener) echo(id *verbs.CMID, b *cmBuffers) {
	s, o := l.s, l.o
	if !s.step("ibv_post_recv", b.postRecv) ||
		!s.step("rdma_accept", func() error {
			return id.Accept(verbs.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: rcRNRRetry})
		}) ||
		!s.step("RDMA_CM_EVENT_ESTABLISHED", func() error {
			_, err := expect(s, l.e.ch, verbs.CMEventEstablished, o.Step, connectCause, l.listen, id)
			return err
		}) {
		return
	}
	if a, err := b.qp.Query(verbs.QPAttrPathMTU); err == nil {
		l.res.PathMTU = a.PathMTU.Bytes()
	}
	s.stage = "transfer"
	mem := b.buf.Bytes()
	if !s.step(fmt.Sprintf("RECV %d bytes", o.Size), func() error {
		_, err := b.waitCompletion(2, s.left(o.Step), "the client's SEND never arrived: larger frames are dropped "+
			"towards this host (an MTU mismatch) or the link went down")
		return err
	}) {
		return
	}
	copy(mem[:o.Size], mem[o.Size:2*o.Size])
	if !s.step(fmt.Sprintf("SEND the %d-byte echo", o.Size), func() error {
		if err := b.send(); err != nil {
			return err
		}
		_, err := b.waitCompletion(1, s.left(o.Step), causeEchoTimeout)
		return err
	}) {
		return
	}
	if o.Echoed != nil {
		o.Echoed()
	}
	s.stage = "disconnect"
	s.stepDetail("RDMA_CM_EVENT_DISCONNECTED", func() (string, error) {
		_, err := expect(s, l.e.ch, verbs.CMEventDisconnected, o.Step, func(*verbs.CMEvent) string {
			return "the client never disconnected"
		}, l.listen, id)
		// The echo crossed both ways: the connection works. A disconnect
		// request lost on a lossy wire is resent by the CM only seconds
		// later, and the session's teardown destroys the ID either way:
		// a late one is said, not failed (1 % loss on the VM pair's wire
		// failed a working rdma_cm this way).
		if errors.Is(err, verbs.ErrCMTimeout) {
			return fmt.Sprintf("not within %v: the client's disconnect request was lost or late; the echo had crossed both ways", o.Step), nil
		}
		return "", err
	})
}
