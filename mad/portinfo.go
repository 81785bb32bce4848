package mad

import (
	"encoding/binary"
	"fmt"
)

// PortInfo is the part of the PortInfo attribute (IBTA vol 1 14.2.5.6,
// table 152) the checks read. Byte offsets are in the decoder; 4-bit
// fields share a byte, upper nibble first.
type PortInfo struct {
	GIDPrefix          uint64
	LID                uint16
	MasterSMLID        uint16
	CapMask            uint32
	LocalPortNum       uint8
	LinkWidthEnabled   uint8
	LinkWidthSupported uint8
	LinkWidthActive    uint8
	LinkSpeedSupported uint8
	PortState          uint8
	PhysState          uint8
	LMC                uint8
	LinkSpeedActive    uint8
	LinkSpeedEnabled   uint8
	NeighborMTU        uint8
	MasterSMSL         uint8
	MTUCap             uint8
	LinkSpeedExtActive uint8 // 0 when the port does not use the extended speeds
	LinkSpeedExtSupp   uint8
	CapMask2           uint16
}

const portInfoLen = 64

// DecodePortInfo reads PortInfo from attribute data.
func DecodePortInfo(d []byte) (PortInfo, error) {
	if err := need("PortInfo", d, portInfoLen); err != nil {
		return PortInfo{}, err
	}
	return PortInfo{
		GIDPrefix:          binary.BigEndian.Uint64(d[8:]),
		LID:                binary.BigEndian.Uint16(d[16:]),
		MasterSMLID:        binary.BigEndian.Uint16(d[18:]),
		CapMask:            binary.BigEndian.Uint32(d[20:]),
		LocalPortNum:       d[28],
		LinkWidthEnabled:   d[29],
		LinkWidthSupported: d[30],
		LinkWidthActive:    d[31],
		LinkSpeedSupported: d[32] >> 4,
		PortState:          d[32] & 0x0f,
		PhysState:          d[33] >> 4,
		LMC:                d[34] & 0x07,
		LinkSpeedActive:    d[35] >> 4,
		LinkSpeedEnabled:   d[35] & 0x0f,
		NeighborMTU:        d[36] >> 4,
		MasterSMSL:         d[36] & 0x0f,
		MTUCap:             d[41] & 0x0f,
		CapMask2:           binary.BigEndian.Uint16(d[60:]),
		LinkSpeedExtActive: d[62] >> 4,
		LinkSpeedExtSupp:   d[62] & 0x0f,
	}, nil
}

// PortStateName names a PortState as smpquery prints it (table 152).
func PortStateName(s uint8) string {
	switch s {
	case 0:
		return "NoChange"
	case 1:
		return "Down"
	case 2:
		return "Initialize"
	case 3:
		return "Armed"
	case 4:
		return "Active"
	}
	return fmt.Sprintf("state %d", s)
}

// PhysStateName names a PortPhysicalState.
func PhysStateName(s uint8) string {
	names := []string{"NoChange", "Sleep", "Polling", "Disabled", "PortConfigurationTraining", "LinkUp", "LinkErrorRecovery", "PhyTest"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("phys state %d", s)
}

// WidthName names one LinkWidthActive value (1X, 4X, 8X, 12X, 2X).
func WidthName(w uint8) string {
	switch w {
	case 1:
		return "1X"
	case 2:
		return "4X"
	case 4:
		return "8X"
	case 8:
		return "12X"
	case 16:
		return "2X"
	}
	return fmt.Sprintf("width 0x%x", w)
}

// WidthLanes is the number of lanes of a LinkWidthActive value, 0 if unknown.
func WidthLanes(w uint8) int {
	return map[uint8]int{1: 1, 2: 4, 4: 8, 8: 12, 16: 2}[w]
}

// SpeedName names the active speed: LinkSpeedExtActive when set (FDR and
// faster, 14.2.5.6 table 152), else LinkSpeedActive.
func (p PortInfo) SpeedName() string {
	switch p.LinkSpeedExtActive {
	case 0:
	case 1:
		return "FDR"
	case 2:
		return "EDR"
	case 4:
		return "HDR"
	case 8:
		return "NDR"
	default:
		return fmt.Sprintf("ext speed 0x%x", p.LinkSpeedExtActive)
	}
	switch p.LinkSpeedActive {
	case 1:
		return "SDR"
	case 2:
		return "DDR"
	case 4:
		return "QDR"
	}
	return fmt.Sprintf("speed 0x%x", p.LinkSpeedActive)
}

// MTUBytes is an IB MTU code (1..5) in bytes, 0 if unknown.
func MTUBytes(code uint8) int {
	if code >= 1 && code <= 5 {
		return 128 << code
	}
	return 0
}
