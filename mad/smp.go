package mad

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Route is where an SMP goes: LID routed to LID, or, when Path is not nil,
// directed route out of this port through Path's ports, one per hop (IBTA
// vol 1 14.2.2). An empty, non-nil Path is this port's own node.
type Route struct {
	LID  uint16
	Path []uint8
}

// Directed reports whether the route is a directed route.
func (r Route) Directed() bool { return r.Path != nil }

func (r Route) String() string {
	if !r.Directed() {
		return fmt.Sprintf("LID %d", r.LID)
	}
	parts := []string{"0"}
	for _, p := range r.Path {
		parts = append(parts, fmt.Sprint(p))
	}
	return "directed route " + strings.Join(parts, ",")
}

// maxHops is the longest directed route an SMP carries (14.2.1.2: the
// initial path has 64 entries, entry 0 unused).
const maxHops = 63

// NewSMP encodes a subnet management Get of attr (modifier mod) along r.
func NewSMP(r Route, attr uint16, mod uint32, tid uint64) ([]byte, error) {
	if !r.Directed() {
		if r.LID == 0 || r.LID >= 0xc000 && r.LID != PermissiveLID {
			return nil, fmt.Errorf("SMP to LID %d: not a unicast LID", r.LID)
		}
		return newRequest(ClassSubnLID, MethodGet, attr, mod, tid), nil
	}
	if len(r.Path) > maxHops {
		return nil, fmt.Errorf("directed route of %d hops: at most %d", len(r.Path), maxHops)
	}
	b := newRequest(ClassSubnDR, MethodGet, attr, mod, tid)
	// Hop pointer 0, hop count len(Path) (14.2.2.2); DrSLID and DrDLID
	// permissive: the route is directed at both ends.
	binary.BigEndian.PutUint16(b[6:], uint16(len(r.Path)))
	binary.BigEndian.PutUint16(b[32:], PermissiveLID)
	binary.BigEndian.PutUint16(b[34:], PermissiveLID)
	copy(b[drInitPath+1:], r.Path)
	return b, nil
}

// DRFields are the directed-route part of an SMP (14.2.1.2, table 142).
type DRFields struct {
	Direction   bool // D: set on the return trip
	HopPointer  uint8
	HopCount    uint8
	DrSLID      uint16
	DrDLID      uint16
	InitialPath []uint8 // entries 1..HopCount
	ReturnPath  []uint8
}

// DecodeDR reads the directed-route fields of a directed-route SMP.
func DecodeDR(b []byte) (DRFields, error) {
	h, err := DecodeHeader(b)
	if err != nil {
		return DRFields{}, err
	}
	if h.Class != ClassSubnDR {
		return DRFields{}, &UnexpectedError{What: "management class", Got: ClassName(h.Class), Want: ClassName(ClassSubnDR)}
	}
	if len(b) < Size {
		return DRFields{}, &TruncatedError{What: "directed-route SMP", Got: len(b), Want: Size}
	}
	d := DRFields{Direction: h.Status&directionBit != 0, HopPointer: b[6], HopCount: b[7],
		DrSLID: binary.BigEndian.Uint16(b[32:]), DrDLID: binary.BigEndian.Uint16(b[34:])}
	if d.HopCount > maxHops {
		return d, fmt.Errorf("directed-route SMP: hop count %d exceeds %d", d.HopCount, maxHops)
	}
	n := int(d.HopCount)
	d.InitialPath = append([]uint8(nil), b[drInitPath+1:drInitPath+1+n]...)
	d.ReturnPath = append([]uint8(nil), b[drRetPath+1:drRetPath+1+n]...)
	return d, nil
}

// SMPData is the 64-byte attribute data of a checked SMP answer.
func SMPData(b []byte) []byte { return clip(b, smpDataOff, smpDataLen) }

// clip returns b[off:off+n], shorter or empty when b is.
func clip(b []byte, off, n int) []byte {
	if off >= len(b) {
		return nil
	}
	return b[off:min(len(b), off+n)]
}

func need(what string, b []byte, n int) error {
	if len(b) < n {
		return &TruncatedError{What: what, Got: len(b), Want: n}
	}
	return nil
}

// SM states (14.2.5.13, table 172).
const (
	SMNotActive   = 0
	SMDiscovering = 1
	SMStandby     = 2
	SMMaster      = 3
)

// SMStateName names an SMState as sminfo prints it.
func SMStateName(s uint8) string {
	switch s {
	case SMNotActive:
		return "NOTACTIVE"
	case SMDiscovering:
		return "DISCOVERING"
	case SMStandby:
		return "STANDBY"
	case SMMaster:
		return "MASTER"
	}
	return fmt.Sprintf("state %d", s)
}

// SMInfo is the SMInfo attribute (14.2.5.13, table 171).
type SMInfo struct {
	GUID     uint64
	SMKey    uint64
	ActCount uint32
	Priority uint8 // 0..15
	State    uint8 // SMMaster...
}

const smInfoLen = 21

// DecodeSMInfo reads SMInfo from attribute data.
func DecodeSMInfo(d []byte) (SMInfo, error) {
	if err := need("SMInfo", d, smInfoLen); err != nil {
		return SMInfo{}, err
	}
	return SMInfo{GUID: binary.BigEndian.Uint64(d[0:]), SMKey: binary.BigEndian.Uint64(d[8:]),
		ActCount: binary.BigEndian.Uint32(d[16:]), Priority: d[20] >> 4, State: d[20] & 0x0f}, nil
}

// Node types (14.2.5.3, table 147).
const (
	NodeCA     = 1
	NodeSwitch = 2
	NodeRouter = 3
)

// NodeTypeName names a node type.
func NodeTypeName(t uint8) string {
	switch t {
	case NodeCA:
		return "channel adapter"
	case NodeSwitch:
		return "switch"
	case NodeRouter:
		return "router"
	}
	return fmt.Sprintf("node type %d", t)
}

// NodeInfo is the NodeInfo attribute (14.2.5.3, table 146).
type NodeInfo struct {
	BaseVersion  uint8
	ClassVersion uint8
	NodeType     uint8
	NumPorts     uint8
	SystemGUID   uint64
	NodeGUID     uint64
	PortGUID     uint64
	PartitionCap uint16
	DeviceID     uint16
	Revision     uint32
	LocalPortNum uint8 // the port the SMP entered the node by
	VendorID     uint32
}

const nodeInfoLen = 40

// DecodeNodeInfo reads NodeInfo from attribute data.
func DecodeNodeInfo(d []byte) (NodeInfo, error) {
	if err := need("NodeInfo", d, nodeInfoLen); err != nil {
		return NodeInfo{}, err
	}
	return NodeInfo{BaseVersion: d[0], ClassVersion: d[1], NodeType: d[2], NumPorts: d[3],
		SystemGUID: binary.BigEndian.Uint64(d[4:]), NodeGUID: binary.BigEndian.Uint64(d[12:]),
		PortGUID: binary.BigEndian.Uint64(d[20:]), PartitionCap: binary.BigEndian.Uint16(d[28:]),
		DeviceID: binary.BigEndian.Uint16(d[30:]), Revision: binary.BigEndian.Uint32(d[32:]),
		LocalPortNum: d[36], VendorID: uint32(d[37])<<16 | uint32(d[38])<<8 | uint32(d[39])}, nil
}

// DecodeNodeDesc reads NodeDescription (14.2.5.2: 64 bytes of UTF-8, NUL
// padded) from attribute data.
func DecodeNodeDesc(d []byte) (string, error) {
	if err := need("NodeDescription", d, smpDataLen); err != nil {
		return "", err
	}
	return strings.ToValidUTF8(cString(d[:smpDataLen]), "?"), nil
}

// PKeysPerBlock is the number of P_Keys in one P_KeyTable block (14.2.5.7).
const PKeysPerBlock = 32

// DecodePKeyBlock reads one P_KeyTable block (14.2.5.7, table 155).
func DecodePKeyBlock(d []byte) ([]uint16, error) {
	if err := need("P_KeyTable block", d, 2*PKeysPerBlock); err != nil {
		return nil, err
	}
	out := make([]uint16, PKeysPerBlock)
	for i := range out {
		out[i] = binary.BigEndian.Uint16(d[2*i:])
	}
	return out, nil
}
