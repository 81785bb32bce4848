package probe

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// IB CM reject reasons (IBTA 12.6.7.2) that REJECTED carries as its status.
const (
	ibCMRejInvalidServiceID = 8
	ibCMRejConsumerDefined  = 28
)

// Causes of the rdma_cm failures, by step. They name the layer that
// failed and what to look at, on RoCE and on InfiniBand.
const (
	causeAddrError = "address resolution failed (RDMA_CM_EVENT_ADDR_ERROR): no RDMA device owns the route to the peer's " +
		"address, or the neighbour (ARP/ND) never answered. Check `ip route get PEER` names a netdev that carries an " +
		"RDMA device (`rdma link`), that `ip neigh show PEER` resolves, and that the port is ACTIVE"
	causeAddrTimeout = "address resolution never finished: the neighbour (ARP/ND) lookup of the peer's address hangs; " +
		"check that the peer answers ping on the RDMA netdev"
	causeRouteError = "route resolution failed (RDMA_CM_EVENT_ROUTE_ERROR): on RoCE no GID of the source address is in " +
		"the port's GID table (the netdev's IP or VLAN is not mirrored: check /sys/class/infiniband/DEV/ports/N/gids), " +
		"on InfiniBand the subnet manager answered no path record (check `sminfo` and the SM's logs)"
	causeRouteTimeout = "route resolution never finished: on InfiniBand the subnet administrator did not answer the path query"
	causeRejected     = "the peer's connection manager rejected the request (RDMA_CM_EVENT_REJECTED): nothing listens on that " +
		"rdma_cm port on the peer (its listener is gone or was never started), or the listener refused this client"
	causeNoListener = "the peer's connection manager rejected the request: nothing listens on that rdma_cm port " +
		"(RDMA_CM_EVENT_REJECTED, IB CM reason 8 invalid service ID): the peer's listener is gone or was never started"
	causeRefused = "the peer's listener refused this connection (RDMA_CM_EVENT_REJECTED, IB CM reason 28 consumer " +
		"defined): it belongs to another session or client"
	causeUnreachable = "the peer's connection manager never answered (RDMA_CM_EVENT_UNREACHABLE / timeout): the CM's MADs " +
		"are lost on the way — on RoCE v2 UDP port 4791 is blocked between the hosts (firewall, ACL, security group), " +
		"on InfiniBand the path or the P_Key is wrong"
	causeEstablishTimeout = "the connection was never established: the CM exchange stalled (on RoCE v2 UDP port 4791 " +
		"filtered in one direction, or the peer stopped answering)"
	causeEchoTimeout = "the connection was established but the echo never arrived: larger frames are dropped on the path " +
		"(an MTU mismatch between the hosts: compare both netdevs' MTU and the switch ports') or the link went down"
)

// CMClient runs the client side of the rdma_cm probe against the listener
// at server ("IP:PORT", announced by the peer over the control
// connection). nonce is sent as the connection's private data: the peer
// accepts only the connection of its own session.
func CMClient(server string, nonce []byte, o CMOptions) *CMResult {
	o = o.withDefaults()
	res := &CMResult{Probe: newProbe(RDMACM), Size: o.Size}
	t0 := time.Now()
	defer func() { res.Millis = millis(time.Since(t0)) }()
	s := &cmStepper{res: res, deadline: t0.Add(o.Timeout)}
	var e cmEnd
	defer e.finish(s)
	dst, err := addrPort(server)
	if !s.step("parse the peer's rdma_cm address", func() error { return err }) || !e.open(s, o) {
		return res
	}
	var id *verbs.CMID
	if !s.step("rdma_create_id RDMA_PS_TCP", func() (err error) { id, err = e.ch.CreateID(verbs.PortSpaceTCP); return err }) {
		return res
	}
	e.td.push("rdma_destroy_id", id.Destroy)
	if !cmResolve(s, e.ch, id, dst, o) {
		return res
	}
	res.Device, res.Port = cmDevice(id), int(id.PortNum())
	res.SGID, res.DGID = id.SGID().String(), id.DGID().String()
	b, ok := e.resources(s, id, o.Size)
	if !ok || !cmConnect(s, e.ch, id, b, nonce, o) {
		return res
	}
	if cmExchange(s, b, o) && o.BeforeDisconnect != nil {
		s.stepDetail("the server's echo acknowledged", func() (string, error) { return o.BeforeDisconnect(), nil })
	}
	s.stage = "disconnect"
	s.step("rdma_disconnect", id.Disconnect)
	return res
}

func cmDevice(id *verbs.CMID) string {
	if ctx, err := id.Context(); err == nil && ctx.Device != nil {
		return ctx.Device.Name
	}
	return ""
}

// cmResolve runs address then route resolution, each to its event.
func cmResolve(s *cmStepper, ch *verbs.EventChannel, id *verbs.CMID, dst netip.AddrPort, o CMOptions) bool {
	s.stage = "address"
	resolveMs := s.left(o.Step) * 2 / 3 // the library's own timeout, inside our wait
	if !s.step("rdma_resolve_addr "+dst.Addr().String(), func() error {
		return id.ResolveAddr(netip.AddrPort{}, dst, resolveMs)
	}) || !s.step("RDMA_CM_EVENT_ADDR_RESOLVED", func() error {
		_, err := expect(s, ch, verbs.CMEventAddrResolved, o.Step, func(ev *verbs.CMEvent) string {
			if ev == nil {
				return causeAddrTimeout
			}
			return causeAddrError
		}, id)
		return err
	}) {
		return false
	}
	s.stage = "route"
	return s.step("rdma_resolve_route", func() error { return id.ResolveRoute(s.left(o.Step) * 2 / 3) }) &&
		s.step("RDMA_CM_EVENT_ROUTE_RESOLVED", func() error {
			_, err := expect(s, ch, verbs.CMEventRouteResolved, o.Step, func(ev *verbs.CMEvent) string {
				if ev == nil {
					return causeRouteTimeout
				}
				return causeRouteError
			}, id)
			return err
		})
}

// cmConnect posts the receive for the echo and connects.
func cmConnect(s *cmStepper, ch *verbs.EventChannel, id *verbs.CMID, b *cmBuffers, nonce []byte, o CMOptions) bool {
	s.stage = "connect"
	if !s.step("ibv_post_recv", b.postRecv) {
		return false
	}
	t0 := time.Now()
	if !s.step("rdma_connect", func() error {
		return id.Connect(verbs.ConnParam{PrivateData: nonce, ResponderResources: 1, InitiatorDepth: 1,
			RetryCount: rcRetryCnt, RNRRetryCount: rcRNRRetry})
	}) || !s.step("RDMA_CM_EVENT_ESTABLISHED", func() error {
		_, err := expect(s, ch, verbs.CMEventEstablished, o.Step, connectCause, id)
		return err
	}) {
		return false
	}
	s.res.ConnectMicros = micros(time.Since(t0))
	if a, err := b.qp.Query(verbs.QPAttrPathMTU); err == nil {
		s.res.PathMTU = a.PathMTU.Bytes()
	}
	return true
}

func connectCause(ev *verbs.CMEvent) string {
	switch {
	case ev == nil:
		return causeEstablishTimeout
	case ev.Type == verbs.CMEventRejected && ev.Status == ibCMRejInvalidServiceID:
		return causeNoListener
	case ev.Type == verbs.CMEventRejected && ev.Status == ibCMRejConsumerDefined:
		return causeRefused
	case ev.Type == verbs.CMEventRejected:
		return causeRejected
	case ev.Type == verbs.CMEventUnreachable, ev.Type == verbs.CMEventConnectError:
		return causeUnreachable
	}
	return "unexpected connection manager event " + ev.Type.String()
}

// cmExchange SENDs the payload and waits for the peer's echo, checked.
func cmExchange(s *cmStepper, b *cmBuffers, o CMOptions) bool {
	s.stage = "transfer"
	mem := b.buf.Bytes()
	fill(mem[:o.Size], 0x5a)
	clear(mem[o.Size : 2*o.Size])
	t0 := time.Now()
	ok := s.step(fmt.Sprintf("SEND %d bytes", o.Size), func() error {
		if err := b.send(); err != nil {
			return err
		}
		_, err := b.waitCompletion(1, s.left(o.Step), causeEchoTimeout)
		return err
	}) && s.step(fmt.Sprintf("RECV the %d-byte echo", o.Size), func() error {
		wc, err := b.waitCompletion(2, s.left(o.Step), causeEchoTimeout)
		if err != nil {
			return err
		}
		if int(wc.ByteLen) != o.Size {
			return &causedError{msg: fmt.Sprintf("echo of %d bytes, sent %d", wc.ByteLen, o.Size),
				cause: "the peer answered with a different length: a protocol or provider bug"}
		}
		return payloadCheck(mem[o.Size:2*o.Size], mem[:o.Size])
	})
	if ok {
		s.res.RoundTripMicros = micros(time.Since(t0))
	}
	return ok
}
