package mad

import (
	"encoding/binary"
	"fmt"
)

// Sizes of the MAD layouts (IBTA vol 1 13.4.2, 14.2.1, 15.2.1, 16.1.1).
const (
	Size       = 256 // every MAD this package sends or reads
	HeaderSize = 24  // the common MAD header
	smpDataOff = 64  // SMP data, LID-routed and directed-route alike (14.2.1.1, 14.2.1.2)
	smpDataLen = 64
	drInitPath = 128 // directed-route SMP: initial path, then return path (14.2.1.2)
	drRetPath  = 192
	saHdrOff   = 36 // SA header after the 12-byte RMPP header (15.2.1.1)
	saDataOff  = 56
	saDataLen  = 200
	pmaDataOff = 64 // PMA: 40 reserved bytes after the header (16.1.1)
	pmaDataLen = 192
)

// Management classes (13.4.4, table 105).
const (
	ClassSubnLID = 0x01 // subnet management, LID routed
	ClassSA      = 0x03 // subnet administration
	ClassPerf    = 0x04 // performance management
	ClassSubnDR  = 0x81 // subnet management, directed route
)

// Methods (13.4.5, table 106; SA 15.2.2, table 188).
const (
	MethodGet          = 0x01
	MethodGetResp      = 0x81
	MethodGetTable     = 0x12
	MethodGetTableResp = 0x92
)

// Attribute IDs: subnet management (14.2.5, table 145), SA (15.2.5, table
// 193) and PMA (16.1.3, table 207).
const (
	AttrClassPortInfo  = 0x0001
	AttrNodeDesc       = 0x0010
	AttrNodeInfo       = 0x0011
	AttrPortInfo       = 0x0015
	AttrPKeyTable      = 0x0016
	AttrSMInfo         = 0x0020
	AttrNodeRecord     = 0x0011 // SA
	AttrSMInfoRecord   = 0x0018 // SA
	AttrPathRecord     = 0x0035 // SA
	AttrPortCounters   = 0x0012 // PMA
	PermissiveLID      = 0xffff
	directionBit       = 0x8000 // directed-route SMP status: D bit (14.2.1.2)
	StatusBusy         = 0x0001
	StatusRedirect     = 0x0002
	statusInvalidField = 0x001c
)

// classVersions are the class versions this package encodes and decodes:
// SMI 1 (14.2.1), SA 2 (15.2.1), PMA 1 (16.1.1).
var classVersions = map[uint8]uint8{ClassSubnLID: 1, ClassSubnDR: 1, ClassSA: 2, ClassPerf: 1}

// ClassVersion is the version this package speaks of class, 0 for a
// class it does not know.
func ClassVersion(class uint8) uint8 { return classVersions[class] }

// Header is the common MAD header (13.4.2, table 100).
type Header struct {
	BaseVersion   uint8
	Class         uint8
	ClassVersion  uint8
	Method        uint8  // with the response bit 0x80
	Status        uint16 // for a directed-route SMP: D bit and 15-bit status
	ClassSpecific uint16 // for a directed-route SMP: hop pointer << 8 | hop count
	TID           uint64
	AttrID        uint16
	AttrMod       uint32
}

func (h Header) put(b []byte) {
	b[0], b[1], b[2], b[3] = h.BaseVersion, h.Class, h.ClassVersion, h.Method
	binary.BigEndian.PutUint16(b[4:], h.Status)
	binary.BigEndian.PutUint16(b[6:], h.ClassSpecific)
	binary.BigEndian.PutUint64(b[8:], h.TID)
	binary.BigEndian.PutUint16(b[16:], h.AttrID)
	binary.BigEndian.PutUint16(b[18:], 0)
	binary.BigEndian.PutUint32(b[20:], h.AttrMod)
}

// DecodeHeader reads the common header of a MAD.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, &TruncatedError{What: "MAD header", Got: len(b), Want: HeaderSize}
	}
	return Header{
		BaseVersion: b[0], Class: b[1], ClassVersion: b[2], Method: b[3],
		Status:        binary.BigEndian.Uint16(b[4:]),
		ClassSpecific: binary.BigEndian.Uint16(b[6:]),
		TID:           binary.BigEndian.Uint64(b[8:]),
		AttrID:        binary.BigEndian.Uint16(b[16:]),
		AttrMod:       binary.BigEndian.Uint32(b[20:]),
	}, nil
}

// StatusCode is the status with a directed-route SMP's D bit removed.
func (h Header) StatusCode() uint16 {
	if h.Class == ClassSubnDR {
		return h.Status &^ directionBit
	}
	return h.Status
}

// newRequest is a zeroed Get MAD of class with its header filled.
func newRequest(class uint8, method uint8, attr uint16, mod uint32, tid uint64) []byte {
	b := make([]byte, Size)
	Header{BaseVersion: 1, Class: class, ClassVersion: classVersions[class], Method: method,
		TID: tid, AttrID: attr, AttrMod: mod}.put(b)
	return b
}

// CheckResponse verifies that resp answers req: a MAD of base version 1, the
// same class in a version this package knows, the response method, the
// same transaction (its low 32 bits: the kernel owns the high ones) and
// attribute, and a success status. It returns the response's header.
func CheckResponse(req, resp []byte) (Header, error) {
	q, err := DecodeHeader(req)
	if err != nil {
		return Header{}, fmt.Errorf("request: %w", err)
	}
	h, err := DecodeHeader(resp)
	if err != nil {
		return Header{}, err
	}
	switch {
	case h.BaseVersion != 1:
		return h, &UnexpectedError{What: "base version", Got: fmt.Sprint(h.BaseVersion), Want: "1"}
	case h.Class != q.Class:
		return h, &UnexpectedError{What: "management class", Got: ClassName(h.Class), Want: ClassName(q.Class)}
	case h.ClassVersion != classVersions[h.Class]:
		return h, &UnexpectedError{What: "class version", Got: fmt.Sprintf("%s version %d", ClassName(h.Class), h.ClassVersion),
			Want: fmt.Sprintf("version %d", classVersions[h.Class])}
	case h.Method != q.Method|0x80:
		return h, &UnexpectedError{What: "method", Got: fmt.Sprintf("0x%02x", h.Method), Want: fmt.Sprintf("0x%02x", q.Method|0x80)}
	case uint32(h.TID) != uint32(q.TID):
		return h, &UnexpectedError{What: "transaction ID", Got: fmt.Sprintf("0x%016x", h.TID), Want: fmt.Sprintf("0x%016x", q.TID)}
	case h.AttrID != q.AttrID:
		return h, &UnexpectedError{What: "attribute", Got: AttrName(h.Class, h.AttrID), Want: AttrName(q.Class, q.AttrID)}
	}
	if s := h.StatusCode(); s != 0 {
		return h, &StatusError{Class: h.Class, Attr: h.AttrID, Status: s}
	}
	// The attribute's own decoder judges the length: an SA answer of one
	// record is as long as its record (opensm sends 120 bytes for a
	// PathRecord), shorter than a 256-byte MAD.
	return h, nil
}

// ClassName names a management class for messages.
func ClassName(class uint8) string {
	switch class {
	case ClassSubnLID:
		return "SMP"
	case ClassSubnDR:
		return "directed-route SMP"
	case ClassSA:
		return "SA"
	case ClassPerf:
		return "PMA"
	}
	return fmt.Sprintf("class 0x%02x", class)
}

// attrNames names the attributes this package asks for, by class.
var attrNames = map[uint8]map[uint16]string{
	ClassSubnLID: {AttrNodeDesc: "NodeDescription", AttrNodeInfo: "NodeInfo", AttrPortInfo: "PortInfo", AttrPKeyTable: "P_KeyTable", AttrSMInfo: "SMInfo"},
	ClassSA:      {AttrClassPortInfo: "ClassPortInfo", AttrNodeRecord: "NodeRecord", AttrSMInfoRecord: "SMInfoRecord", AttrPathRecord: "PathRecord"},
	ClassPerf:    {AttrClassPortInfo: "ClassPortInfo", AttrPortCounters: "PortCounters"},
}

// AttrName names an attribute of a class, "attribute 0x0042" when unknown.
func AttrName(class uint8, id uint16) string {
	if class == ClassSubnDR {
		class = ClassSubnLID
	}
	if n, ok := attrNames[class][id]; ok {
		return n
	}
	return fmt.Sprintf("attribute 0x%04x", id)
}

// StatusText says what a MAD status means (13.4.7, table 111; SA codes in
// bits 8-15, 15.2.1.1 table 187).
func StatusText(class uint8, s uint16) string {
	var parts []string
	if s&StatusBusy != 0 {
		parts = append(parts, "busy, try again later")
	}
	if s&StatusRedirect != 0 {
		parts = append(parts, "redirection required (ClassPortInfo)")
	}
	switch (s & statusInvalidField) >> 2 {
	case 0:
	case 1:
		parts = append(parts, "bad class version")
	case 2:
		parts = append(parts, "method not supported")
	case 3:
		parts = append(parts, "method/attribute combination not supported")
	case 7:
		parts = append(parts, "invalid attribute or attribute modifier value")
	default:
		parts = append(parts, fmt.Sprintf("invalid field code %d", (s&statusInvalidField)>>2))
	}
	if cs := s >> 8; cs != 0 {
		parts = append(parts, classStatusText(class, cs))
	}
	if len(parts) == 0 {
		return "reserved status bits set"
	}
	return joinWords(parts)
}

var saStatus = map[uint16]string{
	1: "ERR_NO_RESOURCES", 2: "ERR_REQ_INVALID", 3: "ERR_NO_RECORDS (no such record)",
	4: "ERR_TOO_MANY_RECORDS", 5: "ERR_REQ_INVALID_GID", 6: "ERR_REQ_INSUFFICIENT_COMPONENTS",
	7: "ERR_REQ_DENIED",
}

func classStatusText(class uint8, cs uint16) string {
	if class == ClassSA {
		if t, ok := saStatus[cs]; ok {
			return "SA " + t
		}
	}
	return fmt.Sprintf("class-specific status %d", cs)
}

func joinWords(parts []string) string {
	out := parts[0]
	for _, p := range parts[1:] {
		out += "; " + p
	}
	return out
}
