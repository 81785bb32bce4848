package mad

import "encoding/binary"

// PortCounters is the PMA PortCounters attribute (IBTA vol 1 16.1.3.5,
// table 247): the 16- and 32-bit error and traffic counters of one port.
// They saturate at their maximum rather than wrap.
type PortCounters struct {
	PortSelect                   uint8
	SymbolErrors                 uint16
	LinkErrorRecovery            uint8
	LinkDowned                   uint8
	RcvErrors                    uint16
	RcvRemotePhysErrors          uint16
	RcvSwitchRelayErrors         uint16
	XmitDiscards                 uint16
	XmitConstraintErrors         uint8
	RcvConstraintErrors          uint8
	LocalLinkIntegrityErrors     uint8 // 4 bits
	ExcessiveBufferOverrunErrors uint8 // 4 bits
	VL15Dropped                  uint16
	XmitData                     uint32 // in 4-byte words
	RcvData                      uint32
	XmitPkts                     uint32
	RcvPkts                      uint32
	XmitWait                     uint32
}

const portCountersLen = 44

// NewPortCountersQuery encodes a PMA Get(PortCounters) of port on the
// node at the destination.
func NewPortCountersQuery(port uint8, tid uint64) []byte {
	b := newRequest(ClassPerf, MethodGet, AttrPortCounters, 0, tid)
	b[pmaDataOff+1] = port
	return b
}

// PMAData is the attribute data of a checked PMA answer.
func PMAData(b []byte) []byte { return clip(b, pmaDataOff, pmaDataLen) }

// DecodePortCounters reads PortCounters from PMA attribute data.
func DecodePortCounters(d []byte) (PortCounters, error) {
	if err := need("PortCounters", d, portCountersLen); err != nil {
		return PortCounters{}, err
	}
	u16 := func(o int) uint16 { return binary.BigEndian.Uint16(d[o:]) }
	u32 := func(o int) uint32 { return binary.BigEndian.Uint32(d[o:]) }
	return PortCounters{
		PortSelect: d[1], SymbolErrors: u16(4), LinkErrorRecovery: d[6], LinkDowned: d[7],
		RcvErrors: u16(8), RcvRemotePhysErrors: u16(10), RcvSwitchRelayErrors: u16(12),
		XmitDiscards: u16(14), XmitConstraintErrors: d[16], RcvConstraintErrors: d[17],
		LocalLinkIntegrityErrors: d[19] >> 4, ExcessiveBufferOverrunErrors: d[19] & 0x0f,
		VL15Dropped: u16(22), XmitData: u32(24), RcvData: u32(28), XmitPkts: u32(32),
		RcvPkts: u32(36), XmitWait: u32(40),
	}, nil
}
