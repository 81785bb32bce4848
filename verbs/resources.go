package verbs

import (
	"fmt"
	"syscall"
	"unsafe"
)

// PD is a protection domain (struct ibv_pd).
type PD struct {
	Context *Context
	ptr     uintptr
}

// AllocPD calls ibv_alloc_pd.
func (c *Context) AllocPD() (*PD, error) {
	p, err := c.lib.callPtr("ibv_alloc_pd", c.lib.allocPD, c.ptr)
	if err != nil {
		return nil, err
	}
	return &PD{Context: c, ptr: p}, nil
}

// Dealloc calls ibv_dealloc_pd. On failure (EBUSY while a QP or MR still
// uses it) the PD stays valid and may be deallocated later.
func (pd *PD) Dealloc() error {
	if pd.ptr == 0 {
		return nil
	}
	err := pd.Context.lib.callInt("ibv_dealloc_pd", pd.Context.lib.deallocPD, pd.ptr)
	if err == nil {
		pd.ptr = 0
	}
	return err
}

// MR is a registered memory region (struct ibv_mr).
type MR struct {
	PD     *PD
	Addr   uintptr
	Length int
	LKey   uint32
	RKey   uint32
	ptr    uintptr
}

// RegMR registers length bytes of buf starting at off (ibv_reg_mr). The
// pages are pinned: ENOMEM here usually means RLIMIT_MEMLOCK.
func (pd *PD) RegMR(buf *Buffer, off, length int, access Access) (*MR, error) {
	if buf == nil {
		return nil, fmt.Errorf("ibv_reg_mr: no buffer to register")
	}
	if off < 0 || length <= 0 || off+length > buf.Len() {
		return nil, fmt.Errorf("ibv_reg_mr: range [%d, %d) outside the %d-byte buffer", off, off+length, buf.Len())
	}
	addr := unsafe.Pointer(&buf.Bytes()[off])
	p, err := pd.Context.lib.callPtr("ibv_reg_mr", pd.Context.lib.regMR, pd.ptr, uintptr(addr),
		uintptr(length), uintptr(access))
	if err != nil {
		return nil, err
	}
	m := (*cMR)(ptr(p))
	return &MR{PD: pd, Addr: m.Addr, Length: int(m.Length), LKey: m.LKey, RKey: m.RKey, ptr: p}, nil
}

// RegMRAddr registers length bytes at addr, memory the caller owns and
// keeps valid until Dereg: a GPU's device pointer, which ibv_reg_mr
// accepts only where a peer-memory client (nvidia_peermem) claims it.
func (pd *PD) RegMRAddr(addr uintptr, length int, access Access) (*MR, error) {
	if addr == 0 || length <= 0 {
		return nil, fmt.Errorf("ibv_reg_mr: no memory to register (address %#x, %d bytes)", addr, length)
	}
	p, err := pd.Context.lib.callPtr("ibv_reg_mr", pd.Context.lib.regMR, pd.ptr, addr, uintptr(length), uintptr(access))
	if err != nil {
		return nil, err
	}
	return pd.mrOf(p), nil
}

// ErrNoRegDMABufMR says the loaded libibverbs lacks ibv_reg_dmabuf_mr.
var ErrNoRegDMABufMR = fmt.Errorf("ibv_reg_dmabuf_mr: %w: this libibverbs is older than rdma-core 34 (no IBVERBS_1.12 symbol ibv_reg_dmabuf_mr)", ErrUnsupported)

// RegDMABufMR registers length bytes of the dma-buf fd from offset, at
// iova in the MR's address space (ibv_reg_dmabuf_mr): SGEs address the
// memory as iova + n. libibverbs stores the fd offset, not the iova, in
// the returned struct's addr; the MR's Addr here is the iova, so SGE
// builds the addresses the device expects. The MR holds its own reference
// on the dma-buf; the caller may close fd once it is registered.
func (pd *PD) RegDMABufMR(offset uint64, length int, iova uint64, fd int, access Access) (*MR, error) {
	l := pd.Context.lib
	if l.regDMABufMR == 0 {
		return nil, ErrNoRegDMABufMR
	}
	if length <= 0 || fd < 0 {
		return nil, fmt.Errorf("ibv_reg_dmabuf_mr: nothing to register (fd %d, %d bytes)", fd, length)
	}
	p, err := l.callPtr("ibv_reg_dmabuf_mr", l.regDMABufMR, pd.ptr, uintptr(offset), uintptr(length), uintptr(iova),
		uintptr(fd), uintptr(access))
	if err != nil {
		return nil, err
	}
	mr := pd.mrOf(p)
	mr.Addr = uintptr(iova)
	return mr, nil
}

func (pd *PD) mrOf(p uintptr) *MR {
	m := (*cMR)(ptr(p))
	return &MR{PD: pd, Addr: m.Addr, Length: int(m.Length), LKey: m.LKey, RKey: m.RKey, ptr: p}
}

// Dereg calls ibv_dereg_mr. The keys stay in the MR value so a probe can
// show what using a stale lkey does.
func (mr *MR) Dereg() error {
	if mr.ptr == 0 {
		return nil
	}
	err := mr.PD.Context.lib.callInt("ibv_dereg_mr", mr.PD.Context.lib.deregMR, mr.ptr)
	if err == nil {
		mr.ptr = 0
	}
	return err
}

// SGE is a scatter/gather entry over the whole region or part of it.
func (mr *MR) SGE(off, length int) SGE {
	return SGE{Addr: uint64(mr.Addr) + uint64(off), Length: uint32(length), LKey: mr.LKey}
}

// CompChannel is a completion event channel (struct ibv_comp_channel).
type CompChannel struct {
	Context *Context
	FD      int
	ptr     uintptr
}

// CreateCompChannel calls ibv_create_comp_channel.
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	p, err := c.lib.callPtr("ibv_create_comp_channel", c.lib.createCompChannel, c.ptr)
	if err != nil {
		return nil, err
	}
	return &CompChannel{Context: c, FD: int((*cCompChannel)(ptr(p)).FD), ptr: p}, nil
}

// Destroy calls ibv_destroy_comp_channel (EBUSY while a CQ uses it).
func (ch *CompChannel) Destroy() error {
	if ch.ptr == 0 {
		return nil
	}
	err := ch.Context.lib.callInt("ibv_destroy_comp_channel", ch.Context.lib.destroyCompChan, ch.ptr)
	if err == nil {
		ch.ptr = 0
	}
	return err
}

// GetCQEvent reads one completion event (ibv_get_cq_event); it blocks
// unless the channel's fd is non-blocking. Acknowledge it with
// cq.AckEvents(1).
func (ch *CompChannel) GetCQEvent() (cqPtr uintptr, err error) {
	a := ch.Context.events.take()
	defer a.mu.Unlock()
	out := allocT[[2]uintptr](a)
	if err := ch.Context.lib.callInt("ibv_get_cq_event", ch.Context.lib.getCQEvent, ch.ptr,
		uintptr(unsafe.Pointer(&out[0])), uintptr(unsafe.Pointer(&out[1]))); err != nil {
		return 0, err
	}
	return out[0], nil
}

// CQ is a completion queue (struct ibv_cq).
type CQ struct {
	Context *Context
	ptr     uintptr
	pollFn  uintptr
	notify  uintptr
}

// CreateCQ calls ibv_create_cq for at least cqe entries; ch may be nil.
// CQE tells how many the provider granted.
func (c *Context) CreateCQ(cqe int, ch *CompChannel, vector int) (*CQ, error) {
	var chp uintptr
	if ch != nil {
		chp = ch.ptr
	}
	p, err := c.lib.callPtr("ibv_create_cq", c.lib.createCQ, c.ptr, uintptr(cqe), 0, chp, uintptr(vector))
	if err != nil {
		return nil, err
	}
	ops := &c.c().Ops
	return &CQ{Context: c, ptr: p, pollFn: ops.PollCQ, notify: ops.ReqNotifyCQ}, nil
}

// CQE is the number of entries the CQ holds (cq->cqe, what was granted).
func (cq *CQ) CQE() int { return int((*cCQ)(ptr(cq.ptr)).CQE) }

// Destroy calls ibv_destroy_cq (EBUSY while a QP uses it).
func (cq *CQ) Destroy() error {
	if cq.ptr == 0 {
		return nil
	}
	err := cq.Context.lib.callInt("ibv_destroy_cq", cq.Context.lib.destroyCQ, cq.ptr)
	if err == nil {
		cq.ptr = 0
	}
	return err
}

// Poll is ibv_poll_cq: it fills up to len(wcs) completions and returns how
// many. A negative return is the provider's own failure code (mlx5 returns
// -2 for a CQ in error), not an errno: it comes back as a *ReturnError
// carrying the raw value.
func (cq *CQ) Poll(wcs []WC) (int, error) {
	if len(wcs) == 0 {
		return 0, nil
	}
	a := cq.Context.scratch.take()
	defer a.mu.Unlock()
	max := len(wcs)
	if room := int(a.room() / unsafe.Sizeof(WC{})); max > room {
		max = room
	}
	p := a.alloc(uintptr(max)*unsafe.Sizeof(WC{}), unsafe.Alignof(WC{}))
	rc := a.call3(cq.pollFn, cq.ptr, uintptr(max), p)
	if rc < 0 {
		return 0, &ReturnError{Verb: "ibv_poll_cq", Return: rc}
	}
	n := copy(wcs, unsafe.Slice((*WC)(ptr(p)), int(rc)))
	return n, nil
}

// ReqNotify arms the CQ's completion channel (ibv_req_notify_cq).
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	var s uintptr
	if solicitedOnly {
		s = 1
	}
	return intStatus("ibv_req_notify_cq", callFast(cq.notify, cq.ptr, s), 0)
}

// AckEvents acknowledges n completion events of this CQ (ibv_ack_cq_events).
func (cq *CQ) AckEvents(n int) {
	cq.Context.lib.call(cq.Context.lib.ackCQEvents, cq.ptr, uintptr(n))
}

// QPInit describes a QP to create (struct ibv_qp_init_attr).
type QPInit struct {
	SendCQ    *CQ
	RecvCQ    *CQ
	Cap       QPCap
	Type      QPType
	SignalAll bool
}

// QP is a queue pair (struct ibv_qp).
type QP struct {
	PD  *PD
	Num uint32
	Cap QPCap // what create_qp granted

	ptr      uintptr
	postSend uintptr
	postRecv uintptr
	cm       *CMID // created by rdma_create_qp: destroyed by rdma_destroy_qp
}

// CreateQP calls ibv_create_qp. EINVAL usually means caps beyond the
// device limits (QueryDevice: max_qp_wr, max_sge).
func (pd *PD) CreateQP(init QPInit) (*QP, error) {
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
	p, err := c.lib.callPtr("ibv_create_qp", c.lib.createQP, pd.ptr, uintptr(unsafe.Pointer(attr)))
	if err != nil {
		return nil, err
	}
	ops := &c.c().Ops
	return &QP{PD: pd, Num: (*cQP)(ptr(p)).QPNum, Cap: attr.Cap, ptr: p,
		postSend: ops.PostSend, postRecv: ops.PostRecv}, nil
}

// State is the state the library last recorded for the QP (ibv_qp.state);
// Query asks the kernel.
func (qp *QP) State() QPState { return (*cQP)(ptr(qp.ptr)).State }

// Modify calls ibv_modify_qp with the attributes mask selects.
func (qp *QP) Modify(attr *QPAttr, mask QPAttrMask) error {
	c := qp.PD.Context
	a := c.scratch.take()
	defer a.mu.Unlock()
	ca := allocT[QPAttr](a)
	*ca = *attr
	return c.lib.callInt("ibv_modify_qp", c.lib.modifyQP, qp.ptr, uintptr(unsafe.Pointer(ca)), uintptr(mask))
}

// Query calls ibv_query_qp. The returned QPAttr's QPState is the state the
// kernel holds.
func (qp *QP) Query(mask QPAttrMask) (QPAttr, error) {
	c := qp.PD.Context
	a := c.scratch.take()
	defer a.mu.Unlock()
	ca := allocT[QPAttr](a)
	ia := allocT[qpInitAttr](a)
	if err := c.lib.callInt("ibv_query_qp", c.lib.queryQP, qp.ptr, uintptr(unsafe.Pointer(ca)), uintptr(mask),
		uintptr(unsafe.Pointer(ia))); err != nil {
		return QPAttr{}, err
	}
	return *ca, nil
}

// Destroy calls ibv_destroy_qp.
func (qp *QP) Destroy() error {
	if qp.ptr == 0 {
		return nil
	}
	if qp.cm != nil {
		qp.cm.DestroyQP()
		return nil
	}
	c := qp.PD.Context
	err := c.lib.callInt("ibv_destroy_qp", c.lib.destroyQP, qp.ptr)
	if err == nil {
		qp.ptr = 0
	}
	return err
}

// SendWR is one send work request (struct ibv_send_wr).
type SendWR struct {
	ID         uint64
	Opcode     WROpcode
	Flags      SendFlags
	SGEs       []SGE
	Imm        uint32 // network byte order, for *_WITH_IMM
	RemoteAddr uint64 // RDMA opcodes
	RKey       uint32 // RDMA opcodes
	// UD: the address handle and the destination QP and Q_Key. A SEND
	// whose Q_Key differs from the receiving QP's is dropped by the
	// receiver, without a completion on either side saying so.
	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32
}

// RecvWR is one receive work request (struct ibv_recv_wr).
type RecvWR struct {
	ID   uint64
	SGEs []SGE
}

// PostError is a failed post: what the provider returned and which work
// request it refused (bad_wr), counted from 0.
type PostError struct {
	Verb string
	// Errno is the errno the provider returned; 0 when the return value
	// (Return) is not one.
	Errno  syscall.Errno
	Return int32
	BadWR  int // -1 when bad_wr pointed at none of them
}

func (e *PostError) Error() string {
	if e.Errno == 0 {
		return fmt.Sprintf("%s returned %d, which is not an errno (work request %d)", e.Verb, e.Return, e.BadWR)
	}
	return fmt.Sprintf("%s (work request %d)", (&Error{Verb: e.Verb, Errno: e.Errno}).Error(), e.BadWR)
}

// Unwrap makes errors.Is(err, syscall.EINVAL) work.
func (e *PostError) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

// scratchFull is the error of a post whose work requests do not fit the
// scratch memory. It is made only then: a post is on the latency path, and
// formatting an error for every one cost an allocation each.
func scratchFull(verb string, n int) error {
	return fmt.Errorf("%s: %d work requests do not fit the %d-byte scratch memory", verb, n, arenaSize)
}

// PostSend is ibv_post_send through the context ops.
func (qp *QP) PostSend(wrs ...SendWR) error {
	if len(wrs) == 0 {
		return nil
	}
	c := qp.PD.Context
	a := c.scratch.take()
	defer a.mu.Unlock()
	cwrs := make([]*cSendWR, len(wrs))
	for i := range wrs {
		w := &wrs[i]
		p := a.alloc(unsafe.Sizeof(cSendWR{}), unsafe.Alignof(cSendWR{}))
		if p == 0 {
			return scratchFull("ibv_post_send", len(wrs))
		}
		cw := (*cSendWR)(ptr(p))
		cwrs[i] = cw
		cw.WRID = w.ID
		cw.Opcode = w.Opcode
		cw.SendFlags = w.Flags
		cw.ImmData = w.Imm
		if w.AH != nil {
			cw.setUD(w.AH.ptr, w.RemoteQPN, w.RemoteQKey)
		} else {
			cw.WR[0] = w.RemoteAddr
			cw.WR[1] = uint64(w.RKey)
		}
		var ok bool
		if cw.SGList, cw.NumSGE, ok = a.sgList(w.SGEs); !ok {
			return scratchFull("ibv_post_send", len(wrs))
		}
		if i > 0 {
			cwrs[i-1].Next = uintptr(unsafe.Pointer(cw))
		}
	}
	bad := a.alloc(unsafe.Sizeof(uintptr(0)), unsafe.Alignof(uintptr(0)))
	if bad == 0 {
		return scratchFull("ibv_post_send", len(wrs))
	}
	rc := a.call3(qp.postSend, qp.ptr, uintptr(unsafe.Pointer(cwrs[0])), bad)
	if rc == 0 {
		return nil
	}
	return postError("ibv_post_send", rc, badIndex(*(*uintptr)(ptr(bad)), cwrs))
}

// PostRecv is ibv_post_recv through the context ops.
func (qp *QP) PostRecv(wrs ...RecvWR) error {
	if len(wrs) == 0 {
		return nil
	}
	c := qp.PD.Context
	a := c.scratch.take()
	defer a.mu.Unlock()
	cwrs := make([]*cRecvWR, len(wrs))
	for i := range wrs {
		w := &wrs[i]
		p := a.alloc(unsafe.Sizeof(cRecvWR{}), unsafe.Alignof(cRecvWR{}))
		if p == 0 {
			return scratchFull("ibv_post_recv", len(wrs))
		}
		cw := (*cRecvWR)(ptr(p))
		cwrs[i] = cw
		cw.WRID = w.ID
		var ok bool
		if cw.SGList, cw.NumSGE, ok = a.sgList(w.SGEs); !ok {
			return scratchFull("ibv_post_recv", len(wrs))
		}
		if i > 0 {
			cwrs[i-1].Next = uintptr(unsafe.Pointer(cw))
		}
	}
	bad := a.alloc(unsafe.Sizeof(uintptr(0)), unsafe.Alignof(uintptr(0)))
	if bad == 0 {
		return scratchFull("ibv_post_recv", len(wrs))
	}
	rc := a.call3(qp.postRecv, qp.ptr, uintptr(unsafe.Pointer(cwrs[0])), bad)
	if rc == 0 {
		return nil
	}
	return postError("ibv_post_recv", rc, badIndex(*(*uintptr)(ptr(bad)), cwrs))
}

// sgList copies a work request's scatter/gather entries into the arena and
// returns what the C work request carries: their address and count. ok is
// false when the arena is full.
func (a *arena) sgList(sges []SGE) (addr uintptr, n int32, ok bool) {
	if len(sges) == 0 {
		return 0, 0, true
	}
	p := a.alloc(uintptr(len(sges))*unsafe.Sizeof(SGE{}), unsafe.Alignof(SGE{}))
	if p == 0 {
		return 0, 0, false
	}
	copy(unsafe.Slice((*SGE)(ptr(p)), len(sges)), sges)
	return p, int32(len(sges)), true
}

// maxErrno is the largest errno value (the kernel's MAX_ERRNO).
const maxErrno = 4095

// postError turns a failed post's return value into the error: rdma-core's
// providers return a positive errno; anything else (a negative value, one
// past the errno range) is the provider's own code and is reported raw
// rather than read as an errno it may not be.
func postError(verb string, rc int32, badWR int) *PostError {
	e := &PostError{Verb: verb, Return: rc, BadWR: badWR}
	if rc > 0 && rc <= maxErrno {
		e.Errno = syscall.Errno(rc)
	}
	return e
}

func badIndex[T any](bad uintptr, wrs []*T) int {
	for i, w := range wrs {
		if uintptr(unsafe.Pointer(w)) == bad {
			return i
		}
	}
	return -1
}
