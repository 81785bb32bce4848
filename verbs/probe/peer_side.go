package probe

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
)

// Cross-host RC parameters. retry_cnt and rnr_retry stay below 7 (7 means
// retry forever) so a peer that vanished ends in RETRY_EXC_ERR; the hop
// limit lets RoCE v2 cross routers.
const (
	peerTimeout = 14 // 4.096 µs × 2^14 ≈ 67 ms per try
	// peerTimeoutSoftware is the ACK timeout of a software device (rxe):
	// its ACKs come from a CPU that may be shared with the traffic and
	// with other guests, and at 67 ms a deep queue of WRITEs retransmits
	// for no loss at all (seen under qemu: duplicate_request rising on a
	// loopback at 0.5 s too, with 16 MiB in flight). 4.096 µs × 2^19 ≈ 2.1 s.
	peerTimeoutSoftware = 19
	peerRetryCnt        = 7 - 1
	peerRNRRetry        = 7 - 1
	peerMinRNRTimer     = 12
	peerHopLimit        = 64
	peerRdAtomic        = 4
	// peerWR is the depth of each queue: the bandwidth test's
	// outstanding work requests and the echo's posted receives.
	peerWR = 128
)

// peerSide is one side's verbs objects in a peer session, destroyed by
// its session's teardown.
type peerSide struct {
	r              *runner
	s              *session
	pd             *verbs.PD
	buf            *verbs.Buffer
	mr             *verbs.MR
	sendCQ, recvCQ *verbs.CQ
	qp             *verbs.QP
	addr           *address
	local          wire.Endpoint
	params         wire.Params
	// peerIP is the other side's address on the control connection: on
	// RoCE the GID of an address on its subnet is picked first.
	peerIP netip.Addr
	// sameHost says the other side is a process on this host (the
	// control connection's two ends have one address): its poller then
	// competes with this one for the same CPUs.
	sameHost bool
	// remoteSoftware says the other side's device is a software one: its
	// QP retransmits on the longer ACK timeout.
	remoteSoftware bool
	// pace yields to the Go scheduler in the ping-pong loops (pace.go).
	pace pollPacer
}

// ackTimeoutExp is the RC ACK timeout exponent a side's QP uses.
func ackTimeoutExp(software bool) uint8 {
	if software {
		return peerTimeoutSoftware
	}
	return peerTimeout
}

// ackTimeout is that timeout: 4.096 µs × 2^exponent.
func ackTimeout(software bool) time.Duration {
	return 4096 * time.Nanosecond << ackTimeoutExp(software)
}

// transferWait is how long a check of single transfers (peer.send_recv,
// peer.rdma_write, peer.rdma_read) waits for each completion: long enough
// for RC to retransmit a lost packet twice on the slower side's ACK
// timeout (2.1 s on a software device), so that a frame lost at random is
// not taken for one that never fits the path or a QP that never connected;
// within the session's deadline. (At 2 s, 1 % loss on the pair's wire
// failed a 4096-byte SEND as a hop with a smaller MTU, and a READ as a
// stall.)
func (ps *peerSide) transferWait() time.Duration {
	w := max(maxPollWait, 2*ackTimeout(ps.r.software || ps.remoteSoftware)+time.Second)
	return min(w, max(time.Until(ps.r.deadline), 0))
}

// midRun explains a wait that ran out in the measuring checks. They run
// only after single transfers crossed on the same QPs, so "not connected"
// is not the likely cause: a frame was lost and RC resends it only after
// the ACK timeout — longer than the wait on a software device — or the
// link went down mid-run. Other errors pass unchanged.
func (ps *peerSide) midRun(err error) error {
	if !errors.Is(err, errNoCompletion) {
		return err
	}
	slower := ackTimeout(ps.r.software || ps.remoteSoftware)
	return &causedError{msg: err.Error(), err: err,
		cause: fmt.Sprintf("the path stopped delivering mid-run, after single transfers had crossed on the same QPs: "+
			"a frame lost on the way, which RC resends only after the ACK timeout (%v on the slower side), "+
			"or the link went down (see peer.counters)", slower.Round(time.Millisecond))}
}

// The steps of finding this host's own port for a peer session. A failure
// of any of them means this host cannot take part at all, so it is one
// finding (peer.connect's) and every later check that needs the local
// device is blocked by it. StepLocalSysfs is the one judged before any
// child is started (from sysfs alone); the others are the child's.
const (
	StepLocalSysfs  = "find an RDMA device in sysfs"
	StepLocalLoad   = "dlopen libibverbs"
	StepLocalList   = "ibv_get_device_list"
	StepLocalDevice = "find the local device"
)

// IsLocalStep says whether a step is one of those.
func IsLocalStep(name string) bool {
	switch name {
	case StepLocalSysfs, StepLocalLoad, StepLocalList, StepLocalDevice:
		return true
	}
	return false
}

// localError is why peerRunner found no local port: the step that failed
// and its error.
type localError struct {
	step string
	err  error
}

func (e *localError) Error() string { return e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// LocalStep is the failed step a peerRunner error stands for, with the
// errno named (ENOSYS from ibv_get_device_list is told apart by it).
func LocalStep(err error) Step {
	st := Step{Name: StepLocalDevice, Error: err.Error()}
	var le *localError
	if errors.As(err, &le) {
		st.Name = le.step
	}
	if e := verbs.ErrnoOf(err); e != 0 {
		st.Errno, st.ErrnoName = int(e), verbs.ErrnoName(e)
	}
	return st
}

// peerRunner opens the library and picks the device and port: the ones
// asked for, or the first ACTIVE port of the first device that has one.
// Its errors are *localError.
func peerRunner(em *emitter, preq *PeerRequest) (*runner, error) {
	preq.withDefaults()
	r := &runner{em: em, opts: Options{SysfsRoot: path.Join(preq.HostRoot, "sys")}.withDefaults(), hostRoot: preq.HostRoot}
	r.info.MemlockBytes = memlockBytes()
	lib, err := verbs.Open(preq.Library)
	if err != nil {
		return nil, &localError{StepLocalLoad, err}
	}
	r.lib = lib
	dl, err := lib.GetDeviceList()
	if err != nil {
		return nil, &localError{StepLocalList, err}
	}
	if len(dl.Devices) == 0 {
		// sysfs had devices (or the client would not have started this
		// child); rdma-core drops one whose /dev/infiniband node it cannot
		// stat, and one no provider claims.
		return nil, &localError{StepLocalList, errors.New("libibverbs lists no RDMA device, though sysfs has some: " +
			"no provider claims them, or their /dev/infiniband/uverbsN nodes are missing")}
	}
	if preq.Device != "" {
		r.dev = dl.Find(preq.Device)
		if r.dev == nil {
			var names []string
			for _, d := range dl.Devices {
				names = append(names, d.Name)
			}
			return nil, &localError{StepLocalDevice, fmt.Errorf("the library lists no device %q (it lists: %s)", preq.Device, strings.Join(names, ", "))}
		}
		r.port = max(preq.Port, 1)
	} else if r.dev, r.port = portOnSubnet(r.opts.SysfsRoot, preq.HostRoot, dl, preq.peerIP); r.dev != nil {
		// The port whose RoCE address shares the peer's subnet: on a host
		// with a NIC per rail, the one that reaches the peer directly.
	} else if r.dev, r.port = firstActivePort(dl); r.dev == nil {
		return nil, &localError{StepLocalDevice, errors.New("no device has an ACTIVE port: bring a link up or name the device with --device")}
	}
	r.info.Device, r.info.UverbsDev = r.dev.Name, r.dev.DevName
	r.software = isSoftwareDevice(r.opts.SysfsRoot, r.dev.Name)
	r.deadline = time.Now().Add(time.Duration(preq.SessionNS))
	return r, nil
}

// portOnSubnet returns the first ACTIVE RoCE port with a RoCE v2 GID whose
// address's subnet holds peerIP, read from sysfs alone; nil when none.
func portOnSubnet(sysRoot, hostRoot string, dl *verbs.DeviceList, peerIP netip.Addr) (*verbs.Device, int) {
	if !peerIP.Is4() {
		return nil, 0
	}
	for _, d := range dl.Devices {
		ports, _ := os.ReadDir(filepath.Join(sysRoot, "class/infiniband", d.Name, "ports"))
		for _, pe := range ports {
			port, err := strconv.Atoi(pe.Name())
			if err != nil {
				continue
			}
			dir := filepath.Join(sysRoot, "class/infiniband", d.Name, "ports", pe.Name())
			if st, _ := readSmall(filepath.Join(dir, "state")); !strings.HasPrefix(st, "4") {
				continue
			}
			for i := 0; i < 256; i++ {
				t, err := readSmall(filepath.Join(dir, "gid_attrs/types", strconv.Itoa(i)))
				if err != nil {
					break
				}
				g, _ := readSmall(filepath.Join(dir, "gids", strconv.Itoa(i)))
				ip, err := netip.ParseAddr(g)
				if t != "RoCE v2" || err != nil || !ip.Is4In6() {
					continue
				}
				var gid verbs.GID
				gid.Raw = ip.As16()
				ndev, _ := netdevOfGID(sysRoot, d.Name, port, i)
				if p, err := netip.ParsePrefix(gidSubnet(hostRoot, ndev, gid)); err == nil && p.Masked().Contains(peerIP) {
					return d, port
				}
			}
		}
	}
	return nil, 0
}

// firstActivePort returns the first device and port whose state is ACTIVE.
func firstActivePort(dl *verbs.DeviceList) (*verbs.Device, int) {
	for _, d := range dl.Devices {
		ctx, err := d.Open()
		if err != nil {
			continue
		}
		attr, err := ctx.QueryDevice()
		for p := 1; err == nil && p <= int(attr.PhysPortCnt); p++ {
			pa, perr := ctx.QueryPort(uint8(p))
			if perr == nil && verbs.PortState(pa.State) == verbs.PortActive {
				ctx.Close()
				return d, p
			}
		}
		ctx.Close()
	}
	return nil, 0
}

// build opens the device and creates what the session needs, up to an RC
// QP in INIT, and fills the local endpoint. gidIndex < 0 picks the GID.
func (ps *peerSide) build(p *Probe, gidIndex int) bool {
	r := ps.r
	s, ok := r.open(p)
	if !ok {
		return false
	}
	ps.s = s
	if st := verbs.PortState(s.port.State); !r.note(p, fmt.Sprintf("port %d ACTIVE", r.port), st == verbs.PortActive,
		fmt.Sprintf("port %d of %s is %s", r.port, r.dev.Name, st), "") {
		return false
	}
	pd, ok := r.allocPD(p, s)
	if !ok {
		return false
	}
	ps.pd = pd
	size := ps.params.BufferSize
	if !r.step(p, "mmap page-aligned buffer", func() (err error) { ps.buf, err = verbs.NewBuffer(size); return err }) {
		return false
	}
	s.td.push("munmap buffer", ps.buf.Free)
	r.info.MRBytes = ps.buf.Len()
	if !r.step(p, "ibv_reg_mr (remote read and write)", func() (err error) {
		ps.mr, err = pd.RegMR(ps.buf, 0, size, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
		return err
	}) {
		return false
	}
	s.td.push("ibv_dereg_mr", ps.mr.Dereg)
	cqe := clamp(2*peerWR, int(s.attr.MaxCQE))
	for _, cq := range []struct {
		name string
		dst  **verbs.CQ
	}{{"send", &ps.sendCQ}, {"recv", &ps.recvCQ}} {
		if !r.step(p, "ibv_create_cq "+cq.name, func() (err error) { *cq.dst, err = s.ctx.CreateCQ(cqe, nil, 0); return err }) {
			return false
		}
		s.td.push("ibv_destroy_cq "+cq.name, (*cq.dst).Destroy)
	}
	if ps.qp, ok = r.createRC(p, s, pd, "RC", ps.sendCQ, ps.recvCQ, peerWR); !ok {
		return false
	}
	init := verbs.QPAttr{QPState: verbs.QPSInit, PortNum: uint8(r.port),
		QPAccessFlags: verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite}
	if !r.step(p, "ibv_modify_qp RESET→INIT", func() error { return ps.qp.Modify(&init, verbs.MaskRCToInit) }) {
		return false
	}
	if !r.step(p, "pick the local address", func() (err error) { ps.addr, err = ps.pickAddress(gidIndex); return err }) {
		return false
	}
	ps.fillEndpoint()
	return true
}

// pickAddress is the port's address: the GID at gidIndex, or the one
// resolve prefers; on InfiniBand the LID.
func (ps *peerSide) pickAddress(gidIndex int) (*address, error) {
	r, s := ps.r, ps.s
	if s.port.LinkLayer != verbs.LinkLayerEthernet {
		return r.resolve(s)
	}
	if gidIndex < 0 {
		if a := ps.gidOnPeerSubnet(); a != nil {
			return a, nil
		}
		return r.resolve(s)
	}
	cands, err := r.gidCandidates(s)
	if err != nil {
		return nil, err
	}
	for _, c := range cands {
		if int(c.GIDIndex) == gidIndex {
			return &address{roce: true, gidIndex: gidIndex, gid: c.GID, gidType: verbs.GIDType(c.GIDType), mtu: verbs.MTU(s.port.ActiveMTU)}, nil
		}
	}
	return nil, &causedError{
		msg:   fmt.Sprintf("GID index %d of %s port %d is empty", gidIndex, r.dev.Name, r.port),
		cause: "list the port's GIDs with `rdmadoctor inventory` (or `show_gids`) and pass an index that holds the RoCE v2 GID of the interface's address",
	}
}

// gidOnPeerSubnet is the port's RoCE v2 GID whose address's subnet holds
// the peer's control address; nil when none does (or the peer's address
// is not IPv4).
func (ps *peerSide) gidOnPeerSubnet() *address {
	if !ps.peerIP.Is4() {
		return nil
	}
	r := ps.r
	cands, err := r.gidCandidates(ps.s)
	if err != nil {
		return nil
	}
	for _, c := range cands {
		if verbs.GIDType(c.GIDType) != verbs.GIDTypeRoCEv2 || !c.GID.IsIPv4Mapped() {
			continue
		}
		ndev, _ := netdevOfGID(r.opts.SysfsRoot, r.dev.Name, r.port, int(c.GIDIndex))
		if p, err := netip.ParsePrefix(gidSubnet(r.hostRoot, ndev, c.GID)); err == nil && p.Masked().Contains(ps.peerIP) {
			return &address{roce: true, gidIndex: int(c.GIDIndex), gid: c.GID, gidType: verbs.GIDTypeRoCEv2, mtu: verbs.MTU(ps.s.port.ActiveMTU)}
		}
	}
	return nil
}

func (ps *peerSide) fillEndpoint() {
	r, s, a := ps.r, ps.s, ps.addr
	var psn [4]byte
	_, _ = rand.Read(psn[:])
	e := wire.Endpoint{
		Device: r.dev.Name, Port: r.port, LinkLayer: verbs.LinkLayerName(s.port.LinkLayer),
		QPN: ps.qp.Num, PSN: binary.BigEndian.Uint32(psn[:]) & 0xffffff, LID: s.port.LID,
		ActiveMTU: verbs.MTU(s.port.ActiveMTU).Bytes(),
		Addr:      uint64(ps.buf.Addr()), RKey: ps.mr.RKey, Len: uint32(ps.buf.Len()), Software: r.software,
	}
	if a.roce {
		e.GID = append([]byte(nil), a.gid.Raw[:]...)
		e.GIDIndex = a.gidIndex
		e.GIDType = a.gidType.String()
		e.Netdev, e.NetdevMTU = netdevOfGID(r.opts.SysfsRoot, r.dev.Name, r.port, a.gidIndex)
		e.Subnet = gidSubnet(r.hostRoot, e.Netdev, a.gid)
	}
	ps.local = e
}

// netdevOfGID is the netdev behind a RoCE GID (gid_attrs/ndevs) and its
// MTU; "" and 0 when sysfs does not say.
func netdevOfGID(sysRoot, dev string, port, index int) (string, int) {
	name, err := readSmall(filepath.Join(sysRoot, "class/infiniband", dev, "ports", strconv.Itoa(port), "gid_attrs/ndevs", strconv.Itoa(index)))
	if err != nil || name == "" || strings.ContainsAny(name, "/") {
		return "", 0
	}
	v, err := readSmall(filepath.Join(sysRoot, "class/net", name, "mtu"))
	if err != nil {
		return name, 0
	}
	mtu, _ := strconv.Atoi(v)
	return name, mtu
}

// connectTo moves the QP INIT→RTR→RTS toward the remote endpoint at the
// negotiated path MTU.
func (ps *peerSide) connectTo(p *Probe, remote *wire.Endpoint, pathMTU int) bool {
	r := ps.r
	rtr := verbs.QPAttr{QPState: verbs.QPSRTR, PathMTU: verbs.MTU(wire.MTUEnum(pathMTU)), DestQPNum: remote.QPN,
		RqPSN: remote.PSN, MaxDestRdAtomic: peerRdAtomic, MinRNRTimer: peerMinRNRTimer}
	rtr.AHAttr.PortNum = uint8(r.port)
	rtr.AHAttr.SL = remote.SL
	if ps.addr.roce {
		rtr.AHAttr.IsGlobal = 1
		copy(rtr.AHAttr.GRH.DGID.Raw[:], remote.GID)
		rtr.AHAttr.GRH.SGIDIndex = uint8(ps.addr.gidIndex)
		rtr.AHAttr.GRH.HopLimit = peerHopLimit
	} else {
		rtr.AHAttr.DLID = remote.LID
	}
	if !r.step(p, fmt.Sprintf("ibv_modify_qp INIT→RTR (path MTU %d, remote QPN %#x)", pathMTU, remote.QPN), func() error {
		return ps.qp.Modify(&rtr, verbs.MaskRCToRTR)
	}) {
		return false
	}
	rts := verbs.QPAttr{QPState: verbs.QPSRTS, Timeout: ackTimeoutExp(r.software), RetryCnt: peerRetryCnt, RNRRetry: peerRNRRetry,
		SqPSN: ps.local.PSN, MaxRdAtomic: peerRdAtomic}
	if !r.step(p, "ibv_modify_qp RTR→RTS", func() error { return ps.qp.Modify(&rts, verbs.MaskRCToRTS) }) {
		return false
	}
	_, ok := r.expectState(p, "the QP", ps.qp, verbs.QPSRTS)
	return ok
}

// region returns the bytes of the buffer's region i of size n: 0 sends,
// 1 receives, 2 is the target of the other side's WRITE and READ.
func (ps *peerSide) region(i, n int) []byte { return ps.buf.Bytes()[i*n : (i+1)*n] }

func (ps *peerSide) sge(i, n int) verbs.SGE { return ps.mr.SGE(i*n, n) }

// waitCompletion polls cq for one completion within wait and checks its
// status: what failed names the verb and the status.
func (ps *peerSide) waitCompletion(p *Probe, name string, cq *verbs.CQ, wait time.Duration, cause string) (verbs.WC, bool) {
	var wc verbs.WC
	ok := ps.r.step(p, name, func() (err error) {
		wc, err = ps.pollOne(cq, wait)
		var ce *causedError
		if errors.As(err, &ce) && cause != "" {
			ce.cause = cause
		}
		if err == nil && wc.Status != verbs.WCSuccess {
			err = &causedError{msg: fmt.Sprintf("completed with %s (vendor error %#x)", wc.Status, wc.VendorErr), cause: wcCause(wc.Status)}
		}
		return err
	})
	return wc, ok
}

// wcCause is what an error completion means across two hosts.
func wcCause(st verbs.WCStatus) string {
	switch st {
	case verbs.WCRetryExcErr:
		return "the peer never acknowledged: it is unreachable over RDMA (routing, GID of another subnet, UDP 4791 blocked for RoCE v2), its QP is gone, or packets above some size are dropped on the path (an MTU mismatch)"
	case verbs.WCRNRRetryExc:
		return "the peer had no receive posted (receiver not ready) for every retry"
	case verbs.WCRemAccessErr:
		return "the peer refused the remote access: wrong rkey, an address outside its memory region, or a region registered without remote access"
	case verbs.WCRemInvReqErr:
		return "the peer's QP refused the request: its access flags do not allow the operation, or the message exceeds its receive"
	case verbs.WCLocLenErr:
		return "the message did not fit the posted receive buffer"
	case verbs.WCWRFlushErr:
		return "the QP went to the error state, flushing every outstanding request: an earlier error or the link going down"
	}
	return ""
}

// pollOne busy-polls cq for one completion within wait, as pollOne does;
// on a software device, where a wait lasts milliseconds, it reads the
// clock less often, yields to the Go scheduler on the ping-pong's beat
// (pollPacer) and between empty polls where the peer's poller shares this
// host (yieldBetweenPolls).
func (ps *peerSide) pollOne(cq *verbs.CQ, wait time.Duration) (verbs.WC, error) {
	if !ps.r.software {
		return pollOne(cq, wait)
	}
	var wc [1]verbs.WC
	deadline := time.Now().Add(wait)
	for i := 0; ; i++ {
		n, err := cq.Poll(wc[:])
		if err != nil {
			return verbs.WC{}, err
		}
		if n == 1 {
			return wc[0], nil
		}
		// The clock is read every 16th empty poll only: under emulation
		// a clock read can cost as much as the poll itself.
		if i%16 == 15 {
			now := time.Now()
			if now.After(deadline) {
				return verbs.WC{}, noCompletion(wait)
			}
			ps.pace.yieldAt(now)
		}
		ps.yieldBetweenPolls()
	}
}

// gidSubnet is the address of netdev that an IPv4-mapped GID carries,
// with its prefix; "" when the GID is not IPv4-mapped or the netdev does
// not hold it.
func gidSubnet(hostRoot, netdev string, gid verbs.GID) string {
	if netdev == "" || !gid.IsIPv4Mapped() {
		return ""
	}
	ip := netip.AddrFrom16(gid.Raw).Unmap()
	h, err := peerHost(hostRoot)
	if err != nil {
		return ""
	}
	nds, err := h.Netdevs()
	if err != nil {
		return ""
	}
	for _, nd := range nds {
		if nd.Name != netdev {
			continue
		}
		for _, a := range nd.Addresses {
			if p, err := netip.ParsePrefix(a); err == nil && p.Addr() == ip {
				return p.String()
			}
		}
	}
	return ""
}

// remoteIP is the address at the other end of the control connection.
func remoteIP(c *wire.Conn) netip.Addr {
	return addrOf(c.RemoteAddr())
}

func addrOf(a net.Addr) netip.Addr {
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// onSameHost says whether the control connection joins two processes of
// one host: a host reaching its own address (or loopback) talks from it.
func onSameHost(c *wire.Conn) bool {
	r := remoteIP(c)
	return r.IsValid() && (r.IsLoopback() || r == addrOf(c.LocalAddr()))
}

// yieldBetweenPolls lets another task run between two empty polls, only
// where one needs this CPU: a software device whose peer's poller is a
// process on this host. Across hosts the device's own work runs in
// softirq context, which preempts the poller anyway, and a sched_yield
// per empty poll cost the ping-pong: on the VM suite's two guests the
// median round trip was 1.26 ms with it, 0.85 ms without, beside
// ib_send_lat's 0.66 ms (five rounds, every round faster without).
func (ps *peerSide) yieldBetweenPolls() {
	if ps.r.software && ps.sameHost {
		yieldCPU()
	}
}
