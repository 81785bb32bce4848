package sysfstest

import "encoding/binary"

// ConfigSpace is what a fixture sets of a function's PCI configuration
// space; EncodeConfig lays it out as the hardware does: the header, a
// capability list at 0x40 (power management, MSI-X, PCI Express) and, from
// 0x100, the extended list (ACS on switch and root ports, ATS on NICs).
type ConfigSpace struct {
	Vendor, Device uint16
	Class          uint32
	Bridge         bool  // header type 1
	PortType       uint8 // PCIe port type: 0 endpoint, 4 root port, 5 upstream, 6 downstream
	MaxReadReq     int   // bytes, 128…4096; 0 = 512 (the reset default)
	MaxPayload     int   // bytes; 0 = 256
	RelaxedOrder   bool
	// ACS, when HasACS, is the ACS capability: ACSCap supported, ACSCtl enabled.
	HasACS         bool
	ACSCap, ACSCtl uint16
	// HasATS adds the ATS capability, with ATSEnabled its Enable bit.
	HasATS     bool
	ATSEnabled bool
	// Unprivileged keeps only the first 64 bytes: what a reader without
	// CAP_SYS_ADMIN gets (pci_read_config), and so what its snapshot holds.
	Unprivileged bool
}

// sizeCode is the 3-bit encoding of a PCIe size field: 128 << code.
func sizeCode(bytes, def int) uint16 {
	if bytes == 0 {
		bytes = def
	}
	c := uint16(0)
	for 128<<c < bytes && c < 5 {
		c++
	}
	return c
}

// EncodeConfig renders the configuration space: 4096 bytes, or 64 when
// Unprivileged.
func EncodeConfig(c ConfigSpace) []byte {
	b := make([]byte, 4096)
	le := binary.LittleEndian
	le.PutUint16(b[0x00:], c.Vendor)
	le.PutUint16(b[0x02:], c.Device)
	le.PutUint16(b[0x04:], 0x0546) // memory, bus master, SERR, parity
	le.PutUint16(b[0x06:], 0x0010) // status: capability list
	le.PutUint32(b[0x08:], c.Class<<8)
	if c.Bridge {
		b[0x0e] = 0x01
	}
	b[0x34] = 0x40
	// 0x40 power management → 0x50 MSI-X → 0x60 PCI Express.
	b[0x40], b[0x41] = 0x01, 0x50
	le.PutUint16(b[0x42:], 0x0003)
	b[0x50], b[0x51] = 0x11, 0x60
	b[0x60], b[0x61] = 0x10, 0x00
	le.PutUint16(b[0x62:], uint16(c.PortType)<<4|0x2) // capability version 2
	le.PutUint32(b[0x64:], 0x00008025)                // DevCap: MPS 256 supported, FLR-less, role-based errors
	devctl := sizeCode(c.MaxReadReq, 512)<<12 | sizeCode(c.MaxPayload, 256)<<5
	if c.RelaxedOrder {
		devctl |= 0x0010
	}
	le.PutUint16(b[0x68:], devctl)
	// Extended list: 0x100 AER → [0x148 ACS] → [0x1c0 ATS].
	type ext struct {
		id  uint16
		off int
	}
	caps := []ext{{0x0001, 0x100}}
	if c.HasACS {
		caps = append(caps, ext{0x000d, 0x148})
	}
	if c.HasATS {
		caps = append(caps, ext{0x000f, 0x1c0})
	}
	for i, e := range caps {
		next := 0
		if i+1 < len(caps) {
			next = caps[i+1].off
		}
		le.PutUint32(b[e.off:], uint32(next)<<20|1<<16|uint32(e.id))
		switch e.id {
		case 0x000d:
			le.PutUint16(b[e.off+4:], c.ACSCap)
			le.PutUint16(b[e.off+6:], c.ACSCtl)
		case 0x000f:
			if c.ATSEnabled {
				le.PutUint16(b[e.off+6:], 0x8000)
			}
		}
	}
	if c.Unprivileged {
		return b[:64]
	}
	return b
}
