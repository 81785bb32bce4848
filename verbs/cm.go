package verbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

// DefaultCMLibrary is the soname a program linked with -lrdmacm loads.
const DefaultCMLibrary = "librdmacm.so.1"

// CMLib is an opened librdmacm, the RDMA connection manager's library:
// address and route resolution and connection setup the way MPI,
// NFS-over-RDMA and storage initiators connect. It uses the libibverbs the
// dynamic loader resolves for it, which is the one Open("") loads; the
// verbs objects it hands out (the device context of a cm_id, its QP) are
// driven through that *Lib.
type CMLib struct {
	path string
	v    *Lib

	createEventChannel  uintptr
	destroyEventChannel uintptr
	createID            uintptr
	destroyID           uintptr
	bindAddr            uintptr
	resolveAddr         uintptr
	resolveRoute        uintptr
	listen              uintptr
	connect             uintptr
	accept              uintptr
	reject              uintptr
	disconnect          uintptr
	createQP            uintptr
	destroyQP           uintptr
	getCMEvent          uintptr
	ackCMEvent          uintptr
	getSrcPort          uintptr
}

func (cm *CMLib) symbols() []symbol {
	return []symbol{
		{"rdma_create_event_channel", &cm.createEventChannel, false},
		{"rdma_destroy_event_channel", &cm.destroyEventChannel, false},
		{"rdma_create_id", &cm.createID, false},
		{"rdma_destroy_id", &cm.destroyID, false},
		{"rdma_bind_addr", &cm.bindAddr, false},
		{"rdma_resolve_addr", &cm.resolveAddr, false},
		{"rdma_resolve_route", &cm.resolveRoute, false},
		{"rdma_listen", &cm.listen, false},
		{"rdma_connect", &cm.connect, false},
		{"rdma_accept", &cm.accept, false},
		{"rdma_reject", &cm.reject, false},
		{"rdma_disconnect", &cm.disconnect, false},
		{"rdma_create_qp", &cm.createQP, false},
		{"rdma_destroy_qp", &cm.destroyQP, false},
		{"rdma_get_cm_event", &cm.getCMEvent, false},
		{"rdma_ack_cm_event", &cm.ackCMEvent, false},
		{"rdma_get_src_port", &cm.getSrcPort, false},
	}
}

// OpenCM loads librdmacm (DefaultCMLibrary when path is empty) beside the
// opened libibverbs v. Errors are those of Open: *LoadError when the loader
// cannot open it (librdmacm1 not installed), *MissingSymbolsError.
func OpenCM(path string, v *Lib) (*CMLib, error) {
	if path == "" {
		path = DefaultCMLibrary
	}
	if v == nil {
		return nil, errors.New("open " + path + ": no libibverbs opened")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, &LoadError{Path: path, Loader: err.Error()}
	}
	cm := &CMLib{path: path, v: v}
	var missing []string
	for _, s := range cm.symbols() {
		addr, err := purego.Dlsym(h, s.name)
		if err != nil || addr == 0 {
			missing = append(missing, s.name)
			continue
		}
		*s.addr = addr
	}
	if len(missing) > 0 {
		return nil, &MissingSymbolsError{Path: path, Symbols: missing}
	}
	return cm, nil
}

// Path is the name the library was opened by.
func (cm *CMLib) Path() string { return cm.path }

// EventChannel is an rdma_event_channel. Its fd is non-blocking: events are
// read with a deadline (WaitEvent), never by a call that may block forever.
type EventChannel struct {
	cm      *CMLib
	ptr     uintptr
	scratch *arena
}

// CreateEventChannel calls rdma_create_event_channel and makes its fd
// non-blocking.
func (cm *CMLib) CreateEventChannel() (*EventChannel, error) {
	scratch, err := newArena()
	if err != nil {
		return nil, err
	}
	p, err := cm.v.callPtr("rdma_create_event_channel", cm.createEventChannel)
	if err != nil {
		scratch.buf.Free()
		return nil, err
	}
	ch := &EventChannel{cm: cm, ptr: p, scratch: scratch}
	if err := unix.SetNonblock(ch.FD(), true); err != nil {
		ch.Destroy()
		return nil, fmt.Errorf("fcntl rdma_cm event channel fd %d O_NONBLOCK: %w", ch.FD(), err)
	}
	return ch, nil
}

// FD is the channel's file descriptor (readable when an event is pending).
func (ch *EventChannel) FD() int { return int((*cEventChannel)(ptr(ch.ptr)).FD) }

// Destroy calls rdma_destroy_event_channel. Every cm_id on it must be gone.
func (ch *EventChannel) Destroy() {
	if ch == nil || ch.ptr == 0 {
		return
	}
	ch.cm.v.call(ch.cm.destroyEventChannel, ch.ptr)
	ch.ptr = 0
	ch.scratch.buf.Free()
}

// CMEvent is one event read from a channel. Ack it (rdma_ack_cm_event)
// before destroying the cm_id it is about.
type CMEvent struct {
	Type   CMEventType
	Status int32 // negative errno or, for REJECTED, the IB CM reason
	// ID is the cm_id the event is about; for CONNECT_REQUEST a new one,
	// created by the library for the incoming connection.
	ID *CMID
	// PrivateData is the connection's private data (CONNECT_REQUEST,
	// ESTABLISHED, REJECTED), copied out of the library's event.
	PrivateData []byte

	ch    *EventChannel
	ptr   uintptr
	acked bool
}

// ErrCMTimeout is returned by WaitEvent when no event came in time.
var ErrCMTimeout = errors.New("no rdma_cm event before the deadline")

// WaitEvent polls the channel's fd until an event is readable or timeout
// passes, then reads it (rdma_get_cm_event). known maps the cm_ids this
// program created (by their C address) so the event names them; an id it
// does not know (a new connection) is wrapped as a new *CMID.
func (ch *EventChannel) WaitEvent(timeout time.Duration, known ...*CMID) (*CMEvent, error) {
	deadline := time.Now().Add(timeout)
	for {
		left := max(time.Until(deadline), 0)
		fds := []unix.PollFd{{Fd: int32(ch.FD()), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int((left+time.Millisecond-1)/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("poll rdma_cm event channel: %w", err)
		}
		if n == 0 {
			return nil, ErrCMTimeout
		}
		ev, err := ch.getEvent(known)
		if ErrnoOf(err) == unix.EAGAIN {
			if time.Now().After(deadline) {
				return nil, ErrCMTimeout
			}
			continue
		}
		return ev, err
	}
}

func (ch *EventChannel) getEvent(known []*CMID) (*CMEvent, error) {
	a := ch.scratch.take()
	slot := allocT[uintptr](a)
	err := ch.cm.v.callInt("rdma_get_cm_event", ch.cm.getCMEvent, ch.ptr, uintptr(unsafe.Pointer(slot)))
	p := *slot
	a.mu.Unlock()
	if err != nil {
		return nil, err
	}
	ce := (*cCMEvent)(ptr(p))
	ev := &CMEvent{Type: ce.Event, Status: ce.Status, ch: ch, ptr: p}
	for _, id := range known {
		if id != nil && id.ptr == ce.ID {
			ev.ID = id
		}
	}
	if ev.ID == nil && ce.ID != 0 {
		ev.ID = &CMID{cm: ch.cm, ptr: ce.ID, ch: ch}
	}
	if n := int(ce.Conn.PrivateDataLen); n > 0 && ce.Conn.PrivateData != 0 {
		ev.PrivateData = append([]byte(nil), unsafe.Slice((*byte)(ptr(ce.Conn.PrivateData)), n)...)
	}
	return ev, nil
}

// Ack calls rdma_ack_cm_event; a second Ack is a no-op.
func (e *CMEvent) Ack() error {
	if e == nil || e.acked {
		return nil
	}
	e.acked = true
	return e.ch.cm.v.callInt("rdma_ack_cm_event", e.ch.cm.ackCMEvent, e.ptr)
}

// String is "RDMA_CM_EVENT_ADDR_ERROR (status -110 ETIMEDOUT)".
func (e *CMEvent) String() string {
	if e.Status == 0 {
		return e.Type.String()
	}
	if e.Status < 0 {
		return fmt.Sprintf("%s (status %d %s)", e.Type, e.Status, ErrnoName(unix.Errno(-e.Status)))
	}
	return fmt.Sprintf("%s (status %d)", e.Type, e.Status)
}

// CMID is an rdma_cm_id: one end of a connection, or a listener.
type CMID struct {
	cm  *CMLib
	ch  *EventChannel
	ptr uintptr
	ctx *Context
	qp  *QP
}

func (id *CMID) c() *cCMID { return (*cCMID)(ptr(id.ptr)) }

// CreateID calls rdma_create_id on the channel.
func (ch *EventChannel) CreateID(ps PortSpace) (*CMID, error) {
	a := ch.scratch.take()
	slot := allocT[uintptr](a)
	err := ch.cm.v.callInt("rdma_create_id", ch.cm.createID, ch.ptr, uintptr(unsafe.Pointer(slot)), 0, uintptr(ps))
	p := *slot
	a.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return &CMID{cm: ch.cm, ch: ch, ptr: p}, nil
}

// sockaddrIn4 writes a struct sockaddr_in for ap into the arena.
func sockaddrIn4(a *arena, ap netip.AddrPort) (uintptr, error) {
	if !ap.Addr().Is4() && !ap.Addr().Is4In6() {
		return 0, fmt.Errorf("%s: only IPv4 addresses are supported", ap)
	}
	sa := allocT[unix.RawSockaddrInet4](a)
	sa.Family = unix.AF_INET
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], ap.Port())
	sa.Addr = ap.Addr().Unmap().As4()
	return uintptr(unsafe.Pointer(sa)), nil
}

// BindAddr calls rdma_bind_addr: the local address (and port; 0 lets the
// library pick one) this id listens on or connects from.
func (id *CMID) BindAddr(ap netip.AddrPort) error {
	a := id.ch.scratch.take()
	defer a.mu.Unlock()
	sa, err := sockaddrIn4(a, ap)
	if err != nil {
		return fmt.Errorf("rdma_bind_addr: %w", err)
	}
	return id.cm.v.callInt("rdma_bind_addr", id.cm.bindAddr, id.ptr, sa)
}

// Listen calls rdma_listen.
func (id *CMID) Listen(backlog int) error {
	return id.cm.v.callInt("rdma_listen", id.cm.listen, id.ptr, uintptr(backlog))
}

// LocalPort is the id's bound port in host order (rdma_get_src_port).
func (id *CMID) LocalPort() uint16 {
	r, _ := id.cm.v.call(id.cm.getSrcPort, id.ptr)
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], uint16(r))
	return binary.BigEndian.Uint16(b[:])
}

// ResolveAddr calls rdma_resolve_addr: the local device and port that reach
// dst (the neighbour/ARP lookup happens here). The outcome comes as
// ADDR_RESOLVED or ADDR_ERROR on the channel; timeout bounds the
// library's own wait.
func (id *CMID) ResolveAddr(src netip.AddrPort, dst netip.AddrPort, timeout time.Duration) error {
	a := id.ch.scratch.take()
	defer a.mu.Unlock()
	var sp uintptr
	if src.IsValid() {
		var err error
		if sp, err = sockaddrIn4(a, src); err != nil {
			return fmt.Errorf("rdma_resolve_addr: %w", err)
		}
	}
	dp, err := sockaddrIn4(a, dst)
	if err != nil {
		return fmt.Errorf("rdma_resolve_addr: %w", err)
	}
	return id.cm.v.callInt("rdma_resolve_addr", id.cm.resolveAddr, id.ptr, sp, dp, uintptr(timeout.Milliseconds()))
}

// ResolveRoute calls rdma_resolve_route (ROUTE_RESOLVED or ROUTE_ERROR).
func (id *CMID) ResolveRoute(timeout time.Duration) error {
	return id.cm.v.callInt("rdma_resolve_route", id.cm.resolveRoute, id.ptr, uintptr(timeout.Milliseconds()))
}

// PortNum is the device port the id is bound to (after address resolution).
func (id *CMID) PortNum() uint8 { return id.c().PortNum }

// SGID and DGID are the GIDs address resolution chose (RoCE: the source
// and destination IP addresses as GIDs).
func (id *CMID) SGID() GID { return id.c().Route.Addr.SGID }
func (id *CMID) DGID() GID { return id.c().Route.Addr.DGID }

// Context is the device the id resolved to, as a *Context the library
// owns: closing it is a no-op (rdma_destroy_id's business). Nil before
// address resolution or a bind to a device's address.
func (id *CMID) Context() (*Context, error) {
	if id.ctx != nil {
		return id.ctx, nil
	}
	p := id.c().Verbs
	if p == 0 {
		return nil, errors.New("the cm_id has no device yet (address not resolved)")
	}
	ctx, err := id.cm.v.borrowContext(p)
	if err != nil {
		return nil, err
	}
	id.ctx = ctx
	return ctx, nil
}

// CreateQP calls rdma_create_qp: an RC QP on the id's device, moved by
// librdmacm through INIT, RTR and RTS as the connection proceeds. Destroy
// it with DestroyQP (or QP.Destroy, which does the same).
func (id *CMID) CreateQP(pd *PD, init QPInit) (*QP, error) {
	c := pd.Context
	a := c.scratch.take()
	defer a.mu.Unlock()
	attr := allocT[qpInitAttr](a)
	if init.SendCQ != nil {
		attr.SendCQ = init.SendCQ.ptr
	}
	if init.RecvCQ != nil {
		attr.RecvCQ = init.RecvCQ.ptr
	}
	attr.Cap = init.Cap
	attr.QPType = uint32(init.Type)
	if init.SignalAll {
		attr.SqSigAll = 1
	}
	if err := id.cm.v.callInt("rdma_create_qp", id.cm.createQP, id.ptr, pd.ptr, uintptr(unsafe.Pointer(attr))); err != nil {
		return nil, err
	}
	p := id.c().QP
	ops := &c.c().Ops
	id.qp = &QP{PD: pd, Num: (*cQP)(ptr(p)).QPNum, Cap: attr.Cap, ptr: p,
		postSend: ops.PostSend, postRecv: ops.PostRecv, cm: id}
	return id.qp, nil
}

// DestroyQP calls rdma_destroy_qp.
func (id *CMID) DestroyQP() {
	if id.qp == nil || id.qp.ptr == 0 {
		return
	}
	id.cm.v.call(id.cm.destroyQP, id.ptr)
	id.qp.ptr = 0
	id.qp = nil
}

// ConnParam is struct rdma_conn_param's part a probe sets.
type ConnParam struct {
	PrivateData        []byte // at most 56 bytes on connect, 196 on accept (IB CM limits)
	ResponderResources uint8
	InitiatorDepth     uint8
	RetryCount         uint8 // < 7: 7 means retry forever
	RNRRetryCount      uint8
}

func (id *CMID) connParam(a *arena, p ConnParam) (uintptr, error) {
	cp := allocT[cConnParam](a)
	if n := len(p.PrivateData); n > 0 {
		if n > 255 {
			return 0, fmt.Errorf("private data of %d bytes: at most 255", n)
		}
		buf := a.alloc(uintptr(n), 8)
		if buf == 0 {
			return 0, errors.New("private data does not fit the scratch memory")
		}
		copy(unsafe.Slice((*byte)(ptr(buf)), n), p.PrivateData)
		cp.PrivateData, cp.PrivateDataLen = buf, uint8(n)
	}
	cp.ResponderResources, cp.InitiatorDepth = p.ResponderResources, p.InitiatorDepth
	cp.RetryCount, cp.RNRRetryCount = p.RetryCount, p.RNRRetryCount
	return uintptr(unsafe.Pointer(cp)), nil
}

// Connect calls rdma_connect (ESTABLISHED, REJECTED, UNREACHABLE or
// CONNECT_ERROR follow on the channel).
func (id *CMID) Connect(p ConnParam) error {
	a := id.ch.scratch.take()
	defer a.mu.Unlock()
	cp, err := id.connParam(a, p)
	if err != nil {
		return fmt.Errorf("rdma_connect: %w", err)
	}
	return id.cm.v.callInt("rdma_connect", id.cm.connect, id.ptr, cp)
}

// Accept calls rdma_accept on a CONNECT_REQUEST's id.
func (id *CMID) Accept(p ConnParam) error {
	a := id.ch.scratch.take()
	defer a.mu.Unlock()
	cp, err := id.connParam(a, p)
	if err != nil {
		return fmt.Errorf("rdma_accept: %w", err)
	}
	return id.cm.v.callInt("rdma_accept", id.cm.accept, id.ptr, cp)
}

// Reject calls rdma_reject on a CONNECT_REQUEST's id, with private data
// the peer sees in its REJECTED event.
func (id *CMID) Reject(privateData []byte) error {
	a := id.ch.scratch.take()
	defer a.mu.Unlock()
	var p uintptr
	if n := len(privateData); n > 0 {
		if p = a.alloc(uintptr(n), 8); p == 0 {
			return errors.New("rdma_reject: private data does not fit the scratch memory")
		}
		copy(unsafe.Slice((*byte)(ptr(p)), n), privateData)
	}
	return id.cm.v.callInt("rdma_reject", id.cm.reject, id.ptr, p, uintptr(uint8(len(privateData))))
}

// Disconnect calls rdma_disconnect (the QP goes to ERR; both sides get
// DISCONNECTED).
func (id *CMID) Disconnect() error {
	return id.cm.v.callInt("rdma_disconnect", id.cm.disconnect, id.ptr)
}

// Destroy destroys the id's QP if it still has one, then calls
// rdma_destroy_id. Ack every event about the id first: rdma_destroy_id
// waits for them.
func (id *CMID) Destroy() error {
	if id == nil || id.ptr == 0 {
		return nil
	}
	id.DestroyQP()
	err := id.cm.v.callInt("rdma_destroy_id", id.cm.destroyID, id.ptr)
	if err == nil {
		id.ptr = 0
		if id.ctx != nil {
			id.ctx.release()
		}
	}
	return err
}
