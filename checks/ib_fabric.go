package checks

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/rdmadoctor/rdmadoctor/mad"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// The fabric as facts: what the ib.* checks ask of each InfiniBand port
// (the SM at its SM LID, the SMs the SA lists, the neighbour one hop out,
// the P_Key table), asked once and written down rather than judged, for
// inventory and for a snapshot's facts.

// ibFabricDeadline bounds one asking of the whole fabric, as a check's
// deadline bounds a check: every MAD has its own timeout and tries within it.
const ibFabricDeadline = 10 * time.Second

// ErrNoIBPort says libibumad works but lists no InfiniBand port (a RoCE-only
// host): there is no fabric to ask.
var ErrNoIBPort = errors.New("libibumad lists no InfiniBand port")

// IBFabricFacts asks the fabric about each InfiniBand port of the live host.
// An error says why nothing could be asked: no libibumad (a *mad.LoadError
// inside), a failing one, or no InfiniBand port (ErrNoIBPort). A part of a
// port that could not be asked carries its error in the facts.
func IBFabricFacts(ctx context.Context) (*sysfs.IBFabricFacts, error) {
	ctx, cancel := context.WithTimeout(ctx, ibFabricDeadline)
	defer cancel()
	madMu.Lock()
	defer madMu.Unlock()
	t, err := openMAD()
	if err != nil {
		return nil, fmt.Errorf("open libibumad: %w", err)
	}
	defer t.Close()
	ports, err := t.Ports()
	if err != nil {
		return nil, fmt.Errorf("list ports through libibumad: %w", err)
	}
	c := madClient(t)
	out := &sysfs.IBFabricFacts{Ports: []sysfs.IBFabricPort{}}
	for _, p := range ports {
		if p.InfiniBand() {
			out.Ports = append(out.Ports, askPortFabric(ctx, c, p))
		}
	}
	if len(out.Ports) == 0 {
		return nil, fmt.Errorf("%w (%d RDMA port(s), none with an InfiniBand link layer)", ErrNoIBPort, len(ports))
	}
	return out, nil
}

// askPortFabric asks what the fabric says of one port: its own P_Key
// table first (its own agent answers, with or without an SM or a link),
// then the SM and the neighbour, which a port whose link is not up cannot
// reach.
func askPortFabric(ctx context.Context, c *mad.Client, p mad.Port) sysfs.IBFabricPort {
	fp := sysfs.IBFabricPort{CA: p.CA, Port: p.Num, State: mad.PortStateName(uint8(p.State)),
		PhysState: mad.PhysStateName(uint8(p.PhysState)), LID: p.LID, SMLID: p.SMLID,
		PortGUID: GUIDText(p.GUID), SubnetPrefix: SubnetPrefixText(p.GIDPrefix)}
	keys, err := readPKeys(ctx, c, p)
	fp.PKeys = pkeyFacts(keys, err)
	var le *mad.Error
	if errors.As(err, &le) {
		// libibumad itself refused (umad_open_port without the rights to
		// /dev/infiniband/umad*): every other part would fail the same way.
		cause := "not asked: " + err.Error()
		fp.SM, fp.Neighbour = &sysfs.IBSMAnswer{Error: cause}, &sysfs.IBNeighbour{Error: cause}
		return fp
	}
	up := p.PhysState == physLinkUp
	switch {
	case !up:
		fp.SM = &sysfs.IBSMAnswer{Error: "physical link not up (" + fp.PhysState + "): no SM can be reached"}
	case p.SMLID == 0:
		fp.SM = &sysfs.IBSMAnswer{Error: "SM LID 0: no subnet manager has configured this port"}
	default:
		fp.SM = askSM(ctx, c, p)
		fp.SMs = askSMList(ctx, c, p)
	}
	if up {
		fp.Neighbour = askNeighbour(ctx, c, p)
	} else {
		fp.Neighbour = &sysfs.IBNeighbour{Error: "physical link not up (" + fp.PhysState + "): no far end to ask"}
	}
	return fp
}

// askSM asks the SM at the port's SM LID for its SMInfo and its node's
// description.
func askSM(ctx context.Context, c *mad.Client, p mad.Port) *sysfs.IBSMAnswer {
	to := mad.Route{LID: p.SMLID}
	info, err := c.SMInfo(ctx, p, to)
	if err != nil {
		return &sysfs.IBSMAnswer{Error: fmt.Sprintf("SMInfo from LID %d: %v", p.SMLID, err)}
	}
	sm := smFacts(p.SMLID, info)
	a := &sysfs.IBSMAnswer{LID: sm.LID, GUID: sm.GUID, Priority: sm.Priority, State: sm.State}
	if desc, err := c.NodeDesc(ctx, p, to); err != nil {
		a.Error = fmt.Sprintf("NodeDescription from LID %d: %v", p.SMLID, err)
	} else {
		a.NodeDesc = desc
	}
	return a
}

// askSMList lists the SMs the SA knows.
func askSMList(ctx context.Context, c *mad.Client, p mad.Port) *sysfs.IBSMList {
	recs, err := c.SMInfoRecords(ctx, p)
	if err != nil {
		return &sysfs.IBSMList{SMs: []sysfs.IBSM{}, Error: fmt.Sprintf("SMInfoRecord GetTable from the SA at LID %d: %v", p.SMLID, err)}
	}
	l := &sysfs.IBSMList{SMs: []sysfs.IBSM{}}
	for _, r := range recs {
		l.SMs = append(l.SMs, smFacts(r.LID, r.SMInfo))
	}
	return l
}

func smFacts(lid uint16, info mad.SMInfo) sysfs.IBSM {
	return sysfs.IBSM{LID: lid, GUID: GUIDText(info.GUID), Priority: info.Priority, State: mad.SMStateName(info.State)}
}

// askNeighbour asks the node one hop out, as ib.far_end does.
func askNeighbour(ctx context.Context, c *mad.Client, p mad.Port) *sysfs.IBNeighbour {
	fe, err := askFarEnd(ctx, c, p)
	if err != nil {
		return &sysfs.IBNeighbour{Error: "directed route one hop out: " + err.Error()}
	}
	return &sysfs.IBNeighbour{NodeType: mad.NodeTypeName(fe.node.NodeType), NodeGUID: GUIDText(fe.node.NodeGUID),
		NodeDesc: fe.desc, Port: int(fe.node.LocalPortNum), State: mad.PortStateName(fe.port.PortState),
		PhysState: mad.PhysStateName(fe.port.PhysState), Width: mad.WidthName(fe.port.LinkWidthActive), Speed: fe.port.SpeedName()}
}

// pkeyFacts is the port's own P_Key table as ib.pkey reads it (readPKeys),
// or why it could not be read; empty slots (0x0000, 0x8000) are left out.
func pkeyFacts(keys []uint16, err error) *sysfs.IBPKeyTable {
	if err != nil {
		return &sysfs.IBPKeyTable{Keys: []sysfs.IBPKey{}, Error: "P_KeyTable by directed route to the port itself: " + err.Error()}
	}
	t := &sysfs.IBPKeyTable{Keys: []sysfs.IBPKey{}}
	for _, k := range keys {
		if k&0x7fff != 0 {
			t.Keys = append(t.Keys, sysfs.IBPKey{PKey: fmt.Sprintf("0x%04x", k), FullMember: k&0x8000 != 0})
		}
	}
	return t
}

// GUIDText writes a GUID as sysfs does: "0002:c903:00a1:b2c3".
func GUIDText(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

// SubnetPrefixText writes a subnet prefix as an IPv6 prefix: "fe80::/64".
func SubnetPrefixText(prefix uint64) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], prefix)
	return netip.PrefixFrom(netip.AddrFrom16(b), 64).String()
}
