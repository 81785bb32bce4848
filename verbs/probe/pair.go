package probe

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// Loopback RC parameters. retry_cnt and rnr_retry stay below 7 (7 means
// retry forever), so a broken peer ends in RETRY_EXC_ERR, not a hang.
const (
	rcTimeout     = 14 // 4.096 µs × 2^14 ≈ 67 ms per try
	rcRetryCnt    = 3
	rcRNRRetry    = 3
	rcMinRNRTimer = 12
	rcHopLimit    = 1
)

// address is how the probe's QPs reach each other on this port.
type address struct {
	roce     bool
	gidIndex int
	gid      verbs.GID
	gidType  verbs.GIDType
	dlid     uint16
	mtu      verbs.MTU
	note     string
}

func (a *address) report(linkLayer string) *Addressing {
	out := &Addressing{LinkLayer: linkLayer, PathMTU: a.mtu.Bytes()}
	if a.roce {
		out.GIDIndex = a.gidIndex
		out.GID = a.gid.String()
		out.GIDType = a.gidType.String()
	} else {
		out.DLID = int(a.dlid)
	}
	return out
}

// resolve picks the loopback address: on RoCE a GID of this port, RoCE v2
// preferred (an IPv4-mapped one first); on InfiniBand the port's LID.
func (r *runner) resolve(s *session) (*address, error) {
	a := &address{mtu: verbs.MTU(s.port.ActiveMTU)}
	if a.mtu.Bytes() == 0 {
		a.mtu = verbs.MTU1024
	}
	switch s.port.LinkLayer {
	case verbs.LinkLayerEthernet:
		a.roce = true
	case verbs.LinkLayerInfiniBand, verbs.LinkLayerUnspecified:
		if s.port.LID == 0 {
			return nil, &causedError{
				msg:   fmt.Sprintf("port %d has LID 0", r.port),
				cause: "no subnet manager has configured the port: look for the fabric's SM (sminfo from an ACTIVE port) before starting one, and wait for the port to go ACTIVE with a LID",
			}
		}
		a.dlid = s.port.LID
		return a, nil
	default:
		return nil, fmt.Errorf("port %d: unknown link layer %d", r.port, s.port.LinkLayer)
	}

	cands, err := r.gidCandidates(s)
	if err != nil {
		return nil, err
	}
	best := -1
	rank := func(c verbs.GIDEntry) int {
		switch {
		case verbs.GIDType(c.GIDType) == verbs.GIDTypeRoCEv2 && c.GID.IsIPv4Mapped():
			return 3
		case verbs.GIDType(c.GIDType) == verbs.GIDTypeRoCEv2:
			return 2
		}
		return 1
	}
	for i, c := range cands {
		if best < 0 || rank(c) > rank(cands[best]) {
			best = i
		}
	}
	if best < 0 {
		return nil, &causedError{
			msg:   fmt.Sprintf("port %d has no GID", r.port),
			cause: "RoCE GIDs come from the netdev's addresses: bring the netdev up and give it an IP address",
		}
	}
	c := cands[best]
	a.gidIndex, a.gid, a.gidType = int(c.GIDIndex), c.GID, verbs.GIDType(c.GIDType)
	if a.gidType != verbs.GIDTypeRoCEv2 {
		a.note = "no RoCE v2 GID on this port; using RoCE v1"
	}
	return a, nil
}

// gidCandidates lists the port's non-empty GID entries with their types:
// from _ibv_query_gid_table when the library has it, else ibv_query_gid
// plus sysfs gid_attrs/types.
func (r *runner) gidCandidates(s *session) ([]verbs.GIDEntry, error) {
	var out []verbs.GIDEntry
	if r.lib.HasGIDTable() {
		max := int(s.port.GIDTblLen) * int(s.attr.PhysPortCnt)
		if max <= 0 || max > 1<<16 {
			max = 1 << 16
		}
		ents, err := s.ctx.QueryGIDTable(max)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if int(e.PortNum) == r.port && !e.GID.IsZero() {
				out = append(out, e)
			}
		}
		return out, nil
	}
	n := int(s.port.GIDTblLen)
	if n > 1024 {
		n = 1024
	}
	typesDir := filepath.Join(r.opts.SysfsRoot, "class/infiniband", r.dev.Name, "ports", fmt.Sprint(r.port), "gid_attrs/types")
	for i := 0; i < n; i++ {
		t, err := readSmall(filepath.Join(typesDir, fmt.Sprint(i)))
		if err != nil {
			continue // empty entries fail with EINVAL
		}
		g, err := s.ctx.QueryGID(uint8(r.port), i)
		if err != nil || g.IsZero() {
			continue
		}
		e := verbs.GIDEntry{GID: g, GIDIndex: uint32(i), PortNum: uint32(r.port), GIDType: uint32(verbs.GIDTypeRoCEv1)}
		switch strings.TrimSpace(t) {
		case "RoCE v2":
			e.GIDType = uint32(verbs.GIDTypeRoCEv2)
		case "IB/RoCE v1":
			e.GIDType = uint32(verbs.GIDTypeIB)
		}
		out = append(out, e)
	}
	return out, nil
}

// createRC creates an RC QP on the given CQs.
func (r *runner) createRC(p *Probe, s *session, pd *verbs.PD, name string, send, recv *verbs.CQ, wr uint32) (*verbs.QP, bool) {
	return r.createQP(p, s, pd, verbs.QPTRC, name, send, recv, wr)
}

// createQP creates a QP of type typ on the given CQs, with wr work
// requests each way (within max_qp_wr) and one SGE.
func (r *runner) createQP(p *Probe, s *session, pd *verbs.PD, typ verbs.QPType, name string, send, recv *verbs.CQ, wr uint32) (*verbs.QP, bool) {
	if wr > uint32(s.attr.MaxQPWR) && s.attr.MaxQPWR > 0 {
		wr = uint32(s.attr.MaxQPWR)
	}
	asked := verbs.QPCap{MaxSendWR: wr, MaxRecvWR: wr, MaxSendSGE: 1, MaxRecvSGE: 1}
	r.info.QPAsked = capsOf(asked)
	var qp *verbs.QP
	if !r.step(p, "ibv_create_qp "+name, func() (err error) {
		qp, err = pd.CreateQP(verbs.QPInit{SendCQ: send, RecvCQ: recv, Cap: asked, Type: typ})
		return err
	}) {
		return nil, false
	}
	s.td.push("ibv_destroy_qp "+name, qp.Destroy)
	return qp, true
}

// modify moves qp to the next state with the attributes an RC QP needs
// there, toward peer.
func (r *runner) modify(p *Probe, name string, qp, peer *verbs.QP, a *address, from, to verbs.QPState) bool {
	attr, mask := rcAttr(r.port, peer, a, to)
	return r.step(p, fmt.Sprintf("ibv_modify_qp %s %s→%s", name, from, to), func() error {
		return qp.Modify(&attr, mask)
	})
}

func rcAttr(port int, peer *verbs.QP, a *address, to verbs.QPState) (verbs.QPAttr, verbs.QPAttrMask) {
	attr := verbs.QPAttr{QPState: to}
	switch to {
	case verbs.QPSInit:
		attr.PortNum = uint8(port)
		attr.PkeyIndex = 0
		attr.QPAccessFlags = verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite
		return attr, verbs.MaskRCToInit
	case verbs.QPSRTR:
		attr.PathMTU = a.mtu
		if peer != nil {
			attr.DestQPNum = peer.Num
		}
		attr.RqPSN = 0
		attr.MaxDestRdAtomic = 1
		attr.MinRNRTimer = rcMinRNRTimer
		attr.AHAttr.PortNum = uint8(port)
		if a.roce {
			attr.AHAttr.IsGlobal = 1
			attr.AHAttr.GRH.DGID = a.gid
			attr.AHAttr.GRH.SGIDIndex = uint8(a.gidIndex)
			attr.AHAttr.GRH.HopLimit = rcHopLimit
		} else {
			attr.AHAttr.DLID = a.dlid
		}
		return attr, verbs.MaskRCToRTR
	case verbs.QPSRTS:
		attr.Timeout = rcTimeout
		attr.RetryCnt = rcRetryCnt
		attr.RNRRetry = rcRNRRetry
		attr.SqPSN = 0
		attr.MaxRdAtomic = 1
		return attr, verbs.MaskRCToRTS
	}
	return attr, verbs.MaskState
}

// expectState queries qp and records whether the kernel holds want. The
// state is QPSUnknown when the query failed.
func (r *runner) expectState(p *Probe, name string, qp *verbs.QP, want verbs.QPState) (verbs.QPState, bool) {
	got := verbs.QPSUnknown
	if !r.step(p, "ibv_query_qp "+name, func() error {
		a, err := qp.Query(verbs.QPAttrState)
		if err == nil {
			got = a.QPState
		}
		return err
	}) {
		return got, false
	}
	return got, r.note(p, fmt.Sprintf("%s is %s", name, want), got == want,
		fmt.Sprintf("ibv_query_qp says %s is %s, expected %s", name, got, want), "")
}

// connect walks both QPs RESET→INIT→RTR→RTS toward each other.
func (r *runner) connect(p *Probe, a, b *verbs.QP, addr *address) bool {
	for _, st := range [][2]verbs.QPState{{verbs.QPSReset, verbs.QPSInit}, {verbs.QPSInit, verbs.QPSRTR}, {verbs.QPSRTR, verbs.QPSRTS}} {
		if !r.modify(p, "A", a, b, addr, st[0], st[1]) || !r.modify(p, "B", b, a, addr, st[0], st[1]) {
			return false
		}
	}
	return true
}

// pollOne busy-polls cq until it yields one completion or the wait runs out.
func pollOne(cq *verbs.CQ, wait time.Duration) (verbs.WC, error) {
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
		if i%64 == 0 && time.Now().After(deadline) {
			return verbs.WC{}, noCompletion(wait)
		}
	}
}

// errNoCompletion is what noCompletion's errors stand for.
var errNoCompletion = errors.New("no completion")

// noCompletion is the error of a wait that saw no completion.
func noCompletion(wait time.Duration) error {
	return &causedError{
		msg:   fmt.Sprintf("no completion within %v", wait.Round(time.Millisecond)),
		cause: "the work request never completed: the QPs are not connected (address, GID, LID), the port is down, or the device stalled",
		err:   errNoCompletion,
	}
}

func capsOf(c verbs.QPCap) Caps {
	return Caps{MaxSendWR: c.MaxSendWR, MaxRecvWR: c.MaxRecvWR, MaxSendSGE: c.MaxSendSGE,
		MaxRecvSGE: c.MaxRecvSGE, MaxInlineData: c.MaxInlineData}
}

// readSmall reads a sysfs attribute with one read(2) into a small buffer:
// some drivers answer EAGAIN and a read-until-EOF loop would spin.
func readSmall(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, err := f.Read(buf)
	if err != nil && n == 0 {
		return "", err
	}
	return string(bytes.TrimSpace(buf[:n])), nil
}
