package mad

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// GID is a 128-bit InfiniBand global identifier: subnet prefix and
// interface (port) GUID.
type GID struct{ Prefix, GUID uint64 }

func (g GID) String() string {
	var b [16]byte
	g.put(b[:])
	return netip.AddrFrom16(b).String()
}

func (g GID) put(b []byte) {
	binary.BigEndian.PutUint64(b, g.Prefix)
	binary.BigEndian.PutUint64(b[8:], g.GUID)
}

func gidAt(b []byte) GID {
	return GID{Prefix: binary.BigEndian.Uint64(b), GUID: binary.BigEndian.Uint64(b[8:])}
}

// PathRecord component mask bits (IBTA vol 1 15.2.5.16, table 210).
const (
	PRCompDGID       = 1 << 2
	PRCompSGID       = 1 << 3
	PRCompDLID       = 1 << 4
	PRCompSLID       = 1 << 5
	PRCompReversible = 1 << 11
	PRCompNumbPath   = 1 << 12
)

// PathRecord is the SA PathRecord (15.2.5.16, table 209).
type PathRecord struct {
	DGID, SGID   GID
	DLID, SLID   uint16
	FlowLabel    uint32
	HopLimit     uint8
	TClass       uint8
	Reversible   bool
	NumbPath     uint8
	PKey         uint16
	SL           uint8
	MTU          uint8 // code: 1=256 .. 5=4096
	Rate         uint8 // code: 3=10 Gb/s, 7=40, 16=100, 21=400 ... (RateGbps)
	PktLifeTime  uint8 // 4.096 µs × 2^PktLifeTime
	MTUSelector  uint8
	RateSelector uint8
	Preference   uint8
}

const pathRecordLen = 64

func (p PathRecord) put(d []byte) {
	p.DGID.put(d[8:])
	p.SGID.put(d[24:])
	binary.BigEndian.PutUint16(d[40:], p.DLID)
	binary.BigEndian.PutUint16(d[42:], p.SLID)
	binary.BigEndian.PutUint32(d[44:], (p.FlowLabel&0xfffff)<<8|uint32(p.HopLimit))
	d[48] = p.TClass
	d[49] = p.NumbPath & 0x7f
	if p.Reversible {
		d[49] |= 0x80
	}
	binary.BigEndian.PutUint16(d[50:], p.PKey)
	d[53] = p.SL & 0x0f
	d[54] = p.MTUSelector<<6 | p.MTU&0x3f
	d[55] = p.RateSelector<<6 | p.Rate&0x3f
	d[56] = p.PktLifeTime & 0x3f
	d[57] = p.Preference
}

// DecodePathRecord reads a PathRecord from SA record data.
func DecodePathRecord(d []byte) (PathRecord, error) {
	if err := need("PathRecord", d, pathRecordLen); err != nil {
		return PathRecord{}, err
	}
	fl := binary.BigEndian.Uint32(d[44:])
	return PathRecord{
		DGID: gidAt(d[8:]), SGID: gidAt(d[24:]),
		DLID: binary.BigEndian.Uint16(d[40:]), SLID: binary.BigEndian.Uint16(d[42:]),
		FlowLabel: fl >> 8 & 0xfffff, HopLimit: uint8(fl), TClass: d[48],
		Reversible: d[49]&0x80 != 0, NumbPath: d[49] & 0x7f,
		PKey: binary.BigEndian.Uint16(d[50:]), SL: d[53] & 0x0f,
		MTUSelector: d[54] >> 6, MTU: d[54] & 0x3f, RateSelector: d[55] >> 6, Rate: d[55] & 0x3f,
		PktLifeTime: d[56] & 0x3f, Preference: d[57],
	}, nil
}

// NewPathRecordQuery encodes an SA Get(PathRecord) from sgid to dgid: one
// reversible path (15.4.2; the SA answers a Get with one record).
func NewPathRecordQuery(sgid, dgid GID, tid uint64) []byte {
	b := newRequest(ClassSA, MethodGet, AttrPathRecord, 0, tid)
	mask := uint64(PRCompDGID | PRCompSGID | PRCompReversible | PRCompNumbPath)
	binary.BigEndian.PutUint64(b[saHdrOff+12:], mask)
	PathRecord{DGID: dgid, SGID: sgid, Reversible: true, NumbPath: 1}.put(b[saDataOff:])
	return b
}

// SAData is the record data of a checked SA answer.
func SAData(b []byte) []byte { return clip(b, saDataOff, saDataLen) }

// SAComponentMask reads the SA header's component mask (15.2.1.1).
func SAComponentMask(b []byte) (uint64, error) {
	if err := need("SA header", b, saDataOff); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(b[saHdrOff+12:]), nil
}

// rateGbps are the PathRecord rate codes (15.2.5.16, table 211; the codes
// above 10 are from the extended speeds).
var rateGbps = map[uint8]float64{2: 2.5, 3: 10, 4: 30, 5: 5, 6: 20, 7: 40, 8: 60, 9: 80, 10: 120,
	11: 14, 12: 56, 13: 112, 14: 168, 15: 25, 16: 100, 17: 200, 18: 300, 19: 28, 20: 50,
	21: 400, 22: 600, 23: 800, 24: 1200}

// RateGbps is a rate code in Gb/s, 0 when unknown.
func RateGbps(code uint8) float64 { return rateGbps[code] }

// RateName writes a rate code as "100 Gb/s".
func RateName(code uint8) string {
	if g := RateGbps(code); g != 0 {
		return fmt.Sprintf("%g Gb/s", g)
	}
	return fmt.Sprintf("rate code %d", code)
}

// SMInfoRecord is the SA's SMInfoRecord (IBTA vol 1 15.2.5.13): an SM's
// LID and its SMInfo. The SA leaves SM_Key zero.
type SMInfoRecord struct {
	LID    uint16
	SMInfo SMInfo
}

// NewSMInfoRecordQuery encodes an SA GetTable(SMInfoRecord) with no
// component: every SM the SA knows.
func NewSMInfoRecordQuery(tid uint64) []byte {
	return newRequest(ClassSA, MethodGetTable, AttrSMInfoRecord, 0, tid)
}

// DecodeSMInfoRecords reads the records of a checked GetTable answer (see
// saTable): the SA leaves SM_Key zero.
func DecodeSMInfoRecords(resp []byte) ([]SMInfoRecord, error) {
	recs, err := saTable(resp, "SMInfoRecord", 4+smInfoLen)
	if err != nil {
		return nil, err
	}
	var out []SMInfoRecord
	for _, r := range recs {
		si, err := DecodeSMInfo(r[4:])
		if err != nil {
			return out, err
		}
		out = append(out, SMInfoRecord{LID: binary.BigEndian.Uint16(r), SMInfo: si})
	}
	return out, nil
}

// saTable splits a checked GetTable answer into its records of at least
// recLen bytes: one every AttributeOffset 8-byte words from the SA data
// (15.2.1.1); an offset of 0 is an empty table. The records end where the
// RMPP header's payload length says (13.6.2.3) when RMPP is active, else
// at the first record with LID 0 (every record these queries ask for
// starts with a LID, never 0 once assigned; a single 256-byte MAD pads
// with zeros) or at the last whole record in the MAD (a simulator that
// sends one MAD of a longer table cuts the next record short).
func saTable(resp []byte, what string, recLen int) ([][]byte, error) {
	if err := need("SA header", resp, saDataOff); err != nil {
		return nil, err
	}
	if resp[26]&1 != 0 { // RMPP active: the payload after the RMPP header
		if n := saHdrOff + int(binary.BigEndian.Uint32(resp[32:])); n >= saDataOff && n < len(resp) {
			resp = resp[:n]
		}
	}
	step := int(binary.BigEndian.Uint16(resp[saHdrOff+8:])) * 8
	if step == 0 {
		return nil, nil
	}
	if step < recLen {
		return nil, fmt.Errorf("%s: attribute offset of %d bytes, shorter than the record's %d", what, step, recLen)
	}
	var out [][]byte
	for off := saDataOff; off+recLen <= len(resp); off += step {
		if binary.BigEndian.Uint16(resp[off:]) == 0 {
			break
		}
		out = append(out, resp[off:off+recLen])
	}
	return out, nil
}

// NodeRecord is the SA's NodeRecord (IBTA vol 1 15.2.5.2, table 195): one
// port of a node — the LID of that port (a switch: its port 0's), then the
// node's NodeInfo (PortGUID, LocalPortNum: that port) and NodeDescription.
type NodeRecord struct {
	LID  uint16
	Info NodeInfo
	Desc string
}

// NodeRecord's layout: LID (2 bytes), 2 reserved, NodeInfo (40 bytes) at
// 4, NodeDescription (64 bytes) at 44 (table 195).
const (
	nodeRecInfoOff = 4
	nodeRecDescOff = 4 + nodeInfoLen
	nodeRecordLen  = nodeRecDescOff + smpDataLen
)

// NRCompNodeDesc is NodeRecord's NodeDescription component (15.2.5.2: the
// component bits follow the record's fields, NodeInfo's ten fields after
// LID and reserved; infiniband-diags' IB_NR_COMPMASK_NODEDESC). opensm
// matches it against the whole 64 bytes (strncmp).
const NRCompNodeDesc = 1 << 14

// NewNodeRecordQuery encodes an SA GetTable(NodeRecord): the records whose
// NodeDescription is desc exactly, or every record when desc is "". A
// description longer than NodeDescription's 64 bytes is an error.
func NewNodeRecordQuery(desc string, tid uint64) ([]byte, error) {
	if len(desc) > smpDataLen {
		return nil, fmt.Errorf("NodeRecord: a node description of %d bytes, longer than NodeDescription's %d", len(desc), smpDataLen)
	}
	b := newRequest(ClassSA, MethodGetTable, AttrNodeRecord, 0, tid)
	if desc != "" {
		binary.BigEndian.PutUint64(b[saHdrOff+12:], NRCompNodeDesc)
		copy(b[saDataOff+nodeRecDescOff:], desc)
	}
	return b, nil
}

// DecodeNodeRecords reads the NodeRecords of a checked GetTable answer.
func DecodeNodeRecords(resp []byte) ([]NodeRecord, error) {
	recs, err := saTable(resp, "NodeRecord", nodeRecordLen)
	if err != nil {
		return nil, err
	}
	var out []NodeRecord
	for _, r := range recs {
		ni, err := DecodeNodeInfo(r[nodeRecInfoOff:])
		if err != nil {
			return out, err
		}
		desc, err := DecodeNodeDesc(r[nodeRecDescOff:])
		if err != nil {
			return out, err
		}
		out = append(out, NodeRecord{LID: binary.BigEndian.Uint16(r), Info: ni, Desc: desc})
	}
	return out, nil
}
