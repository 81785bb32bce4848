package verbs

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Device is one entry of ibv_get_device_list.
type Device struct {
	Name          string // kernel IB device, e.g. "mlx5_0", "rxe0"
	DevName       string // uverbs device, e.g. "uverbs0"
	DevPath       string // sysfs infiniband_verbs class device
	IBDevPath     string // sysfs infiniband class device
	NodeType      int32  // IBV_NODE_*
	TransportType int32  // IBV_TRANSPORT_*

	lib *Lib
	ptr uintptr
}

// DeviceList is the array ibv_get_device_list returned. The Devices stay
// valid until Free; contexts opened from them outlive Free.
type DeviceList struct {
	Devices []*Device

	lib *Lib
	ptr uintptr
}

// GetDeviceList calls ibv_get_device_list. A NULL result is an *Error
// carrying errno: ENOSYS when the kernel has no InfiniBand support at all.
// An empty list is not an error.
func (l *Lib) GetDeviceList() (*DeviceList, error) {
	a := l.scratch.take()
	num := allocT[int32](a)
	r, errno := l.call(l.getDeviceList, uintptr(unsafe.Pointer(num)))
	n := int(*num)
	a.mu.Unlock()
	if r == 0 {
		return nil, &Error{Verb: "ibv_get_device_list", Errno: errno}
	}
	dl := &DeviceList{lib: l, ptr: r}
	arr := unsafe.Slice((*uintptr)(ptr(r)), n+1)
	for i := 0; i < n && arr[i] != 0; i++ {
		cd := (*cDevice)(ptr(arr[i]))
		dl.Devices = append(dl.Devices, &Device{
			Name:          cArrayString(cd.Name[:]),
			DevName:       cArrayString(cd.DevName[:]),
			DevPath:       cArrayString(cd.DevPath[:]),
			IBDevPath:     cArrayString(cd.IbdevPath[:]),
			NodeType:      cd.NodeType,
			TransportType: cd.TransportType,
			lib:           l,
			ptr:           arr[i],
		})
	}
	return dl, nil
}

// Free releases the list (ibv_free_device_list).
func (dl *DeviceList) Free() {
	if dl == nil || dl.ptr == 0 {
		return
	}
	dl.lib.call(dl.lib.freeDeviceList, dl.ptr)
	dl.ptr = 0
	dl.Devices = nil
}

// Find returns the device named name, nil if the list has none.
func (dl *DeviceList) Find(name string) *Device {
	for _, d := range dl.Devices {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// GUID is the device's node GUID in host order (ibv_get_device_guid).
func (d *Device) GUID() uint64 {
	r, _ := d.lib.call(d.lib.getDeviceGUID, d.ptr)
	// The library returns the __be64 as stored: big-endian bytes.
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], uint64(r))
	return binary.BigEndian.Uint64(b[:])
}

// FormatGUID writes a GUID the way sysfs node_guid does: "0002:c903:00a1:b2c3".
func FormatGUID(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, (g>>32)&0xffff, (g>>16)&0xffff, g&0xffff)
}

// Context is an opened device (struct ibv_context).
type Context struct {
	Device *Device

	lib     *Lib
	ptr     uintptr
	scratch *arena
	events  *arena // for ibv_get_async_event, which may block
	// borrowed: librdmacm opened the device for a cm_id and closes it.
	borrowed bool
}

// borrowContext wraps a struct ibv_context another library opened (the
// device of an rdma_cm_id): the binding drives it but never closes it.
func (l *Lib) borrowContext(p uintptr) (*Context, error) {
	scratch, err := newArena()
	if err != nil {
		return nil, err
	}
	events, err := newArena()
	if err != nil {
		scratch.buf.Free()
		return nil, err
	}
	cd := (*cDevice)(ptr((*cContext)(ptr(p)).Device))
	dev := &Device{Name: cArrayString(cd.Name[:]), DevName: cArrayString(cd.DevName[:]),
		DevPath: cArrayString(cd.DevPath[:]), IBDevPath: cArrayString(cd.IbdevPath[:]),
		NodeType: cd.NodeType, TransportType: cd.TransportType, lib: l, ptr: (*cContext)(ptr(p)).Device}
	return &Context{Device: dev, lib: l, ptr: p, scratch: scratch, events: events, borrowed: true}, nil
}

// release frees a borrowed context's scratch memory once its owner closed it.
func (c *Context) release() {
	if c.ptr == 0 {
		return
	}
	c.ptr = 0
	c.scratch.buf.Free()
	c.events.buf.Free()
}

// Open opens the device (ibv_open_device).
func (d *Device) Open() (*Context, error) {
	scratch, err := newArena()
	if err != nil {
		return nil, err
	}
	events, err := newArena()
	if err != nil {
		scratch.buf.Free()
		return nil, err
	}
	p, err := d.lib.callPtr("ibv_open_device", d.lib.openDevice, d.ptr)
	if err != nil {
		scratch.buf.Free()
		events.buf.Free()
		return nil, err
	}
	return &Context{Device: d, lib: d.lib, ptr: p, scratch: scratch, events: events}, nil
}

func (c *Context) c() *cContext { return (*cContext)(ptr(c.ptr)) }

// Close closes the device (ibv_close_device). The kernel frees whatever
// the context still holds.
func (c *Context) Close() error {
	if c.ptr == 0 || c.borrowed {
		return nil
	}
	err := c.lib.callInt("ibv_close_device", c.lib.closeDevice, c.ptr)
	if err == nil {
		c.ptr = 0
		c.scratch.buf.Free()
		c.events.buf.Free()
	}
	return err
}

// AsyncFD is the file descriptor async events are read from.
func (c *Context) AsyncFD() int { return int(c.c().AsyncFD) }

// CmdFD is the uverbs command file descriptor.
func (c *Context) CmdFD() int { return int(c.c().CmdFD) }

// NumCompVectors is the number of completion vectors of the device.
func (c *Context) NumCompVectors() int { return int(c.c().NumCompVectors) }

// QueryDevice calls ibv_query_device.
func (c *Context) QueryDevice() (DeviceAttr, error) {
	a := c.scratch.take()
	defer a.mu.Unlock()
	attr := allocT[DeviceAttr](a)
	if err := c.lib.callInt("ibv_query_device", c.lib.queryDevice, c.ptr, uintptr(unsafe.Pointer(attr))); err != nil {
		return DeviceAttr{}, err
	}
	return *attr, nil
}

// FwVer is the firmware version string of a DeviceAttr.
func (a *DeviceAttr) FwVersion() string { return cArrayString(a.FwVer[:]) }

// QueryPort does what the ibv_query_port macro does in C: call
// verbs_context->query_port with the size of the modern struct when the
// context is extended and the provider has that op, else the exported
// compat symbol, which fills only the older, shorter struct.
func (c *Context) QueryPort(port uint8) (PortAttr, error) {
	a := c.scratch.take()
	defer a.mu.Unlock()
	attr := allocT[PortAttr](a)
	if fn := c.verbsOp(unsafe.Offsetof(cVerbsContext{}.QueryPort)); fn != 0 {
		if err := c.lib.callInt("ibv_query_port", fn, c.ptr, uintptr(port),
			uintptr(unsafe.Pointer(attr)), unsafe.Sizeof(*attr)); err != nil {
			return PortAttr{}, err
		}
		return *attr, nil
	}
	if err := c.lib.callInt("ibv_query_port", c.lib.queryPortCompat, c.ptr, uintptr(port),
		uintptr(unsafe.Pointer(attr))); err != nil {
		return PortAttr{}, err
	}
	return *attr, nil
}

// verbsOp mirrors verbs_get_ctx_op: the function pointer at offset off in
// the verbs_context around this context, or 0 where the inline would find
// none (context not extended, provider's struct too short, op not set).
func (c *Context) verbsOp(off uintptr) uintptr {
	if c.c().AbiCompat != abiIsExtended {
		return 0
	}
	var v cVerbsContext
	base := c.ptr - unsafe.Offsetof(v.Context)
	vctx := (*cVerbsContext)(ptr(base))
	if vctx.Sz < unsafe.Sizeof(v)-off {
		return 0
	}
	return *(*uintptr)(ptr(base + off))
}

// QueryGID calls ibv_query_gid for one GID table entry.
func (c *Context) QueryGID(port uint8, index int) (GID, error) {
	a := c.scratch.take()
	defer a.mu.Unlock()
	gid := allocT[GID](a)
	if err := c.lib.callInt("ibv_query_gid", c.lib.queryGID, c.ptr, uintptr(port), uintptr(index),
		uintptr(unsafe.Pointer(gid))); err != nil {
		return GID{}, err
	}
	return *gid, nil
}

// QueryGIDTable returns every valid GID entry of the device, all ports
// (_ibv_query_gid_table, the body of the ibv_query_gid_table inline).
// ErrUnsupported when the library predates it.
func (c *Context) QueryGIDTable(maxEntries int) ([]GIDEntry, error) {
	if c.lib.queryGIDTable == 0 {
		return nil, fmt.Errorf("ibv_query_gid_table: %w", ErrUnsupported)
	}
	if maxEntries <= 0 {
		return nil, nil
	}
	size := int(unsafe.Sizeof(GIDEntry{}))
	buf, err := NewBuffer(maxEntries * size)
	if err != nil {
		return nil, err
	}
	defer buf.Free()
	bp := unsafe.Pointer(&buf.Bytes()[0])
	r, errno := c.lib.call(c.lib.queryGIDTable, c.ptr, uintptr(bp), uintptr(maxEntries), 0, uintptr(size))
	n := int64(r) // ssize_t
	if n < 0 {
		if n == -1 && errno != 0 {
			return nil, &Error{Verb: "ibv_query_gid_table", Errno: errno}
		}
		return nil, &Error{Verb: "ibv_query_gid_table", Errno: syscall.Errno(-n)}
	}
	if n > int64(maxEntries) {
		n = int64(maxEntries)
	}
	out := make([]GIDEntry, n)
	copy(out, unsafe.Slice((*GIDEntry)(bp), n))
	return out, nil
}

// AsyncEvent is one event read from the context's async fd. Ack it exactly
// once: destroying the object it names waits for the ack.
type AsyncEvent struct {
	Type    EventType
	Element uintptr // the raw union: a CQ/QP/SRQ/WQ pointer or a port number

	ctx   *Context
	acked bool
}

// Port is the port number of a port event.
func (e *AsyncEvent) Port() int { return int(int32(e.Element)) }

// IsCQ reports whether the event is about cq.
func (e *AsyncEvent) IsCQ(cq *CQ) bool {
	return e.Type.ElementKind() == ElementCQ && cq != nil && e.Element == cq.ptr
}

// IsQP reports whether the event is about qp.
func (e *AsyncEvent) IsQP(qp *QP) bool {
	return e.Type.ElementKind() == ElementQP && qp != nil && e.Element == qp.ptr
}

// SetAsyncNonblocking makes ibv_get_async_event return EAGAIN instead of
// blocking when no event is pending.
func (c *Context) SetAsyncNonblocking(on bool) error {
	if err := unix.SetNonblock(c.AsyncFD(), on); err != nil {
		return fmt.Errorf("fcntl async fd %d O_NONBLOCK: %w", c.AsyncFD(), err)
	}
	return nil
}

// GetAsyncEvent reads the next async event (ibv_get_async_event). On a
// non-blocking fd with nothing pending it fails with EAGAIN.
func (c *Context) GetAsyncEvent() (*AsyncEvent, error) {
	a := c.events.take()
	defer a.mu.Unlock()
	ev := allocT[cAsyncEvent](a)
	if err := c.lib.callInt("ibv_get_async_event", c.lib.getAsyncEvent, c.ptr, uintptr(unsafe.Pointer(ev))); err != nil {
		return nil, err
	}
	return &AsyncEvent{Type: ev.EventType, Element: ev.Element, ctx: c}, nil
}

// WaitAsyncEvent polls the async fd until an event is readable or timeout
// passes, then reads it. It returns (nil, nil) on timeout. The fd should be
// non-blocking so that a spurious wakeup cannot block the read.
func (c *Context) WaitAsyncEvent(timeout time.Duration) (*AsyncEvent, error) {
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left < 0 {
			left = 0
		}
		fds := []unix.PollFd{{Fd: int32(c.AsyncFD()), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int((left+time.Millisecond-1)/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("poll async fd: %w", err)
		}
		if n == 0 {
			return nil, nil
		}
		ev, err := c.GetAsyncEvent()
		if ErrnoOf(err) == unix.EAGAIN {
			if time.Now().After(deadline) {
				return nil, nil
			}
			continue
		}
		return ev, err
	}
}

// Ack acknowledges the event (ibv_ack_async_event). A second Ack is a no-op.
func (e *AsyncEvent) Ack() {
	if e == nil || e.acked {
		return
	}
	e.acked = true
	a := e.ctx.events.take()
	defer a.mu.Unlock()
	ev := allocT[cAsyncEvent](a)
	ev.Element = e.Element
	ev.EventType = e.Type
	e.ctx.lib.call(e.ctx.lib.ackAsyncEvent, uintptr(unsafe.Pointer(ev)))
}
