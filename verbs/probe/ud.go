package probe

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// UD probe parameters. The Q_Keys have their high bit clear: a SEND whose
// remote_qkey has it set uses the sending QP's own Q_Key instead (a
// "controlled" Q_Key), which would hide the wrong-Q_Key case.
const (
	udQKey      = 0x11111111
	udWrongQKey = 0x22222222
	udHopLimit  = 1
	udWR        = 4
	// udQuietWait is how long a receive that must not complete (a SEND
	// with the wrong Q_Key) is watched; the SEND with the right Q_Key that
	// follows proves the receive was still waiting.
	udQuietWait = 200 * time.Millisecond
	// udMaxRoundTrips and udRoundTripBudget bound the timed UD round trips.
	udMaxRoundTrips   = 200
	udRoundTripBudget = 200 * time.Millisecond
)

// iwarpNoUD is why probe.ud does not run on iWARP: iWARP is RC over TCP and
// has no unreliable datagram service.
const iwarpNoUD = "iWARP has no UD queue pairs (RC over TCP only)"

// Buffer slots of the UD probe: each holds the GRH area and a payload.
const (
	slotSendGood = iota
	slotSendWrong
	slotSendFollow
	slotRecvGood
	slotRecvQuiet
	slotRecvSmall
	numSlots
)

// udRig is the UD probe's objects on one port: A sends, B receives with
// room for the GRH, C receives into a buffer without that room.
type udRig struct {
	s       *session
	buf     *verbs.Buffer
	mr      *verbs.MR
	cqA     *verbs.CQ
	cqB     *verbs.CQ
	cqC     *verbs.CQ
	a, b, c *verbs.QP
	ah      *verbs.AH
	addr    *address
	payload int
	slot    int // bytes per slot
}

// ud is probe.ud: a UD SEND from A to B through an address handle, checked
// for status, byte count (payload + the 40-byte GRH area), the GRH flag on
// RoCE, the sender's QPN and the payload at offset 40; timed round trips;
// then a SEND with the wrong Q_Key (dropped, with no completion on the
// receiver) and a receive buffer without room for the GRH (an error
// completion).
func (r *runner) ud(resourcesFailed string) *UDResult {
	res := &UDResult{Probe: newProbe(UD), Software: r.software, QKey: udQKey, PayloadOffset: -1}
	t0 := time.Now()
	defer func() { res.Millis = millis(time.Since(t0)) }()
	if r.blocked(&res.Probe, resourcesFailed) {
		return res
	}
	switch {
	case r.noUD != "":
		res.Skipped = r.noUD
		return res
	case r.iwarp:
		res.Skipped = iwarpNoUD
		return res
	}
	s, ok := r.open(&res.Probe)
	if !ok {
		return res
	}
	defer r.teardown(&res.Probe, &s.td)
	g, ok := r.udSetup(res, s)
	if !ok {
		noUDQPs(res)
		return res
	}
	if !r.udGoodSend(res, g) {
		return res
	}
	if !r.udRoundTrips(res, g) || !r.udWrongQKey(res, g) {
		return res
	}
	r.udNoGRHRoom(res, g)
	return res
}

// noUDQPs turns a UD ibv_create_qp refused with EOPNOTSUPP into a skip: the
// provider offers applications no UD QPs (a device the parent's driver
// table does not know as such), which is no fault of the host.
func noUDQPs(res *UDResult) {
	st := res.Failed()
	if st != nil && strings.HasPrefix(st.Name, "ibv_create_qp") && syscall.Errno(st.Errno) == syscall.EOPNOTSUPP {
		res.Skipped = "the device offers applications no UD queue pairs: ibv_create_qp (UD) failed with EOPNOTSUPP"
	}
}

// udPayload is the bytes per UD SEND: the probe size, within the port's
// active MTU (a UD message is one packet).
func udPayload(size int, port *verbs.PortAttr) int {
	mtu := verbs.MTU(port.ActiveMTU).Bytes()
	if mtu == 0 {
		mtu = 256
	}
	if size > mtu {
		return mtu
	}
	return size
}

// udSetup builds the rig: PD, buffer, MR, three CQs, three UD QPs walked
// to RTS, the loopback address and its address handle.
func (r *runner) udSetup(res *UDResult, s *session) (*udRig, bool) {
	p := &res.Probe
	g := &udRig{s: s, payload: udPayload(r.opts.Size, &s.port)}
	g.slot = (g.payload + verbs.GRHBytes + 63) &^ 63
	res.Payload = g.payload
	pd, ok := r.allocPD(p, s)
	if !ok {
		return nil, false
	}
	if !r.step(p, "mmap page-aligned buffer", func() (err error) { g.buf, err = verbs.NewBuffer(numSlots * g.slot); return err }) {
		return nil, false
	}
	s.td.push("munmap buffer", g.buf.Free)
	r.info.MRBytes = g.buf.Len()
	if !r.step(p, "ibv_reg_mr", func() (err error) {
		g.mr, err = pd.RegMR(g.buf, 0, g.buf.Len(), verbs.AccessLocalWrite)
		return err
	}) {
		return nil, false
	}
	s.td.push("ibv_dereg_mr", g.mr.Dereg)
	cqe := clamp(probeCQE, int(s.attr.MaxCQE))
	for _, c := range []struct {
		name string
		cq   **verbs.CQ
	}{{"A", &g.cqA}, {"B", &g.cqB}, {"C", &g.cqC}} {
		if !r.step(p, "ibv_create_cq "+c.name, func() (err error) { *c.cq, err = s.ctx.CreateCQ(cqe, nil, 0); return err }) {
			return nil, false
		}
		s.td.push("ibv_destroy_cq "+c.name, (*c.cq).Destroy)
	}
	for _, q := range []struct {
		name string
		qp   **verbs.QP
		cq   *verbs.CQ
	}{{"A", &g.a, g.cqA}, {"B", &g.b, g.cqB}, {"C", &g.c, g.cqC}} {
		qp, ok := r.createQP(p, s, pd, verbs.QPTUD, q.name, q.cq, q.cq, udWR)
		if !ok || !r.udWalk(p, q.name, qp) {
			return nil, false
		}
		*q.qp = qp
	}
	if !r.udQKeyTaken(p, g.b) {
		return nil, false
	}
	return g, r.udAddressHandle(res, g, pd)
}

// udWalk moves a UD QP RESET→INIT (P_Key index, port, Q_Key)→RTR→RTS
// (send PSN): a UD QP has no peer, so RTR needs nothing but the state.
func (r *runner) udWalk(p *Probe, name string, qp *verbs.QP) bool {
	init := verbs.QPAttr{QPState: verbs.QPSInit, PkeyIndex: 0, PortNum: uint8(r.port), QKey: udQKey}
	steps := []struct {
		label string
		attr  verbs.QPAttr
		mask  verbs.QPAttrMask
	}{
		{fmt.Sprintf("RESET→INIT (pkey_index 0, port %d, qkey %#x)", r.port, udQKey), init, verbs.MaskUDToInit},
		{"INIT→RTR", verbs.QPAttr{QPState: verbs.QPSRTR}, verbs.MaskUDToRTR},
		{"RTR→RTS (sq_psn 0)", verbs.QPAttr{QPState: verbs.QPSRTS, SqPSN: 0}, verbs.MaskUDToRTS},
	}
	for _, st := range steps {
		if !r.step(p, "ibv_modify_qp "+name+" "+st.label, func() error { return qp.Modify(&st.attr, st.mask) }) {
			return false
		}
	}
	return true
}

// udQKeyTaken reads B back: RTS after the walk. The Q_Key it reports is
// recorded, not judged (the SEND with the wrong Q_Key judges whether the
// QP holds it).
func (r *runner) udQKeyTaken(p *Probe, qp *verbs.QP) bool {
	var got verbs.QPAttr
	if !r.step(p, "ibv_query_qp B", func() (err error) {
		got, err = qp.Query(verbs.QPAttrState | verbs.QPAttrQKey)
		return err
	}) {
		return false
	}
	return r.note(p, "B is RTS", got.QPState == verbs.QPSRTS,
		fmt.Sprintf("ibv_query_qp says B is %s, expected RTS", got.QPState), fmt.Sprintf("qkey read back %#x", got.QKey))
}

// udResolve picks the address the SENDs go to: this port itself. RoCE and
// InfiniBand as for the RC probes (a RoCE v2 GID; the port's LID); a port
// of neither link layer (EFA reports "Unknown") is addressed by its GID at
// index 0, with a GRH, as EFA's address handles are.
func (r *runner) udResolve(s *session) (*address, error) {
	if s.port.LinkLayer != verbs.LinkLayerUnspecified {
		return r.resolve(s)
	}
	g, err := s.ctx.QueryGID(uint8(r.port), 0)
	if err != nil {
		return nil, err
	}
	if g.IsZero() {
		return nil, &causedError{
			msg:   fmt.Sprintf("port %d has no GID at index 0", r.port),
			cause: "the device has no address: the driver did not finish its set-up; read dmesg",
		}
	}
	a := &address{roce: true, gidIndex: 0, gid: g, gidType: verbs.GIDTypeIB, mtu: verbs.MTU(s.port.ActiveMTU)}
	a.note = "addressed by the device's GID at index 0 (link layer Unknown)"
	return a, nil
}

// udAHAttr is the address handle's attributes: a GRH with the source GID
// index and the destination GID where the port is addressed by GID (RoCE,
// EFA), the destination LID on InfiniBand.
func udAHAttr(port int, a *address) verbs.AHAttr {
	attr := verbs.AHAttr{PortNum: uint8(port)}
	if a.roce {
		attr.IsGlobal = 1
		attr.GRH.DGID = a.gid
		attr.GRH.SGIDIndex = uint8(a.gidIndex)
		attr.GRH.HopLimit = udHopLimit
	} else {
		attr.DLID = a.dlid
	}
	return attr
}

// udAddressHandle resolves the loopback address and creates its handle.
func (r *runner) udAddressHandle(res *UDResult, g *udRig, pd *verbs.PD) bool {
	p := &res.Probe
	if !r.step(p, "resolve loopback address", func() (err error) { g.addr, err = r.udResolve(g.s); return err }) {
		return false
	}
	res.Addressing = g.addr.report(verbs.LinkLayerName(g.s.port.LinkLayer))
	attr := udAHAttr(r.port, g.addr)
	if !r.step(p, "ibv_create_ah", func() (err error) { g.ah, err = pd.CreateAH(attr); return err }) {
		return false
	}
	g.s.td.push("ibv_destroy_ah", g.ah.Destroy)
	return true
}

// region returns slot i of the rig's buffer, n bytes from its start.
func (g *udRig) region(i, n int) []byte { return g.buf.Bytes()[i*g.slot : i*g.slot+n] }

// sendWR is a signaled UD SEND of the payload in slot i to qp with qkey.
func (g *udRig) sendWR(id uint64, i int, qp *verbs.QP, qkey uint32) verbs.SendWR {
	return verbs.SendWR{ID: id, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGEs: []verbs.SGE{g.mr.SGE(i*g.slot, g.payload)}, AH: g.ah, RemoteQPN: qp.Num, RemoteQKey: qkey}
}

// recvWR is a receive into slot i, n bytes long.
func (g *udRig) recvWR(id uint64, i, n int) verbs.RecvWR {
	return verbs.RecvWR{ID: id, SGEs: []verbs.SGE{g.mr.SGE(i*g.slot, n)}}
}

// fillPattern writes a payload that tells one SEND from another.
func fillPattern(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7) + seed
	}
}

// udNoDelivery is the cause of a UD SEND that never reached its receiver.
const udNoDelivery = "the UD SEND never arrived: the address handle does not lead back to this port (GID, LID), " +
	"the Q_Key differs from the receiving QP's, or the port drops the packet"
