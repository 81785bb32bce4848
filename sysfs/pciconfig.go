package sysfs

import (
	"encoding/binary"
	"fmt"
	"path"
)

// PCI configuration space as the kernel exposes it in
// /sys/bus/pci/devices/<addr>/config (drivers/pci/pci-sysfs.c,
// pci_read_config): 4096 bytes for a PCIe function, 256 for conventional
// PCI — but a reader without CAP_SYS_ADMIN gets only the first 64 bytes
// (the standard header; the capability lists lie beyond it). The offsets
// below are the PCI Local Bus and PCI Express Base specifications', as
// include/uapi/linux/pci_regs.h names them.
const (
	PCIConfigHeaderSize   = 64   // what an unprivileged read returns
	PCIConfigStandardSize = 256  // conventional space: the capability list
	PCIConfigExtendedSize = 4096 // PCIe extended space: ACS, ATS

	pciStatus         = 0x06
	pciStatusCapList  = 0x10
	pciHeaderType     = 0x0e
	pciCapabilityList = 0x34
	pciExtStart       = 0x100

	// PCICapExp is the PCI Express capability (PCI_CAP_ID_EXP).
	PCICapExp = 0x10
	// PCIExtCapACS and PCIExtCapATS are extended capability IDs
	// (PCI_EXT_CAP_ID_ACS, PCI_EXT_CAP_ID_ATS).
	PCIExtCapACS = 0x000d
	PCIExtCapATS = 0x000f
)

// ACS Control bits (PCI_ACS_*, the ACS Control register at cap+6; the
// ACS Capability register at cap+4 has the same layout).
const (
	ACSSourceValidation  uint16 = 0x0001 // SV
	ACSTranslationBlock  uint16 = 0x0002 // TB
	ACSP2PRequestRedir   uint16 = 0x0004 // RR: peer requests go up to the root complex
	ACSP2PCompletionRdr  uint16 = 0x0008 // CR
	ACSUpstreamForward   uint16 = 0x0010 // UF
	ACSP2PEgressControl  uint16 = 0x0020 // EC
	ACSDirectTranslatedP uint16 = 0x0040 // DT: translated (ATS) requests go direct
)

// ACSBitNames are the ACS control bits as lspci prints them (ACSCtl:).
var ACSBitNames = []struct {
	Bit  uint16
	Name string
}{
	{ACSSourceValidation, "SrcValid"}, {ACSTranslationBlock, "TransBlk"}, {ACSP2PRequestRedir, "ReqRedir"},
	{ACSP2PCompletionRdr, "CmpltRedir"}, {ACSUpstreamForward, "UpstreamFwd"}, {ACSP2PEgressControl, "EgressCtrl"},
	{ACSDirectTranslatedP, "DirectTrans"},
}

// PCIConfig is what rdmadoctor reads of one function's configuration
// space. A capability that lies beyond the bytes read is unknown, not
// absent: Size says how much was readable.
type PCIConfig struct {
	Size     int // bytes read
	Vendor   uint16
	Device   uint16
	Header   uint8 // header type, low 7 bits: 0 endpoint, 1 bridge
	PCIe     *PCIeCap
	ACS      *ACSCap
	ATS      *ATSCap
	Problems []string // a malformed capability list, said as found
}

// Standard reports whether the capability list (bytes 64–255) was readable.
func (c PCIConfig) Standard() bool { return c.Size >= PCIConfigStandardSize }

// Extended reports whether the PCIe extended space (ACS, ATS) was readable.
func (c PCIConfig) Extended() bool { return c.Size >= PCIConfigExtendedSize }

// PCIeCap is the PCI Express capability's device registers.
type PCIeCap struct {
	Offset   int
	PortType uint8  // Flags bits 7:4: 0 endpoint, 4 root port, 5 switch upstream, 6 switch downstream
	DevCap   uint32 // Device Capabilities (cap+4)
	DevCtl   uint16 // Device Control (cap+8)
}

// MaxReadRequest is Device Control's Max_Read_Request_Size (bits 14:12) in bytes.
func (p PCIeCap) MaxReadRequest() int { return 128 << ((p.DevCtl >> 12) & 7) }

// MaxPayload is Device Control's Max_Payload_Size (bits 7:5) in bytes.
func (p PCIeCap) MaxPayload() int { return 128 << ((p.DevCtl >> 5) & 7) }

// RelaxedOrdering is Device Control's Enable Relaxed Ordering (bit 4).
func (p PCIeCap) RelaxedOrdering() bool { return p.DevCtl&0x0010 != 0 }

// ACSCap is the Access Control Services extended capability.
type ACSCap struct {
	Offset int
	Cap    uint16 // what the port supports
	Ctl    uint16 // what is enabled
}

// ATSCap is the Address Translation Services extended capability.
type ATSCap struct {
	Offset int
	Ctl    uint16
}

// Enabled is ATS Control's Enable bit (15).
func (a ATSCap) Enabled() bool { return a.Ctl&0x8000 != 0 }

// ACSNames lists the set bits of an ACS register the way lspci names them.
func ACSNames(v uint16) []string {
	var out []string
	for _, b := range ACSBitNames {
		if v&b.Bit != 0 {
			out = append(out, b.Name)
		}
	}
	return out
}

// ReadPCIConfig reads one function's configuration space file and parses it.
func (h *Host) ReadPCIConfig(addr string) (PCIConfig, error) {
	p := path.Join(PCIDevicesDir, addr, "config")
	data, err := h.ReadFile(p)
	if err != nil {
		return PCIConfig{}, err
	}
	c, err := ParsePCIConfig(data)
	if err != nil {
		return c, fmt.Errorf("%s: %w", h.Display(p), err)
	}
	return c, nil
}

// maxCaps bounds a capability walk: the standard space holds at most 48
// capabilities (4 bytes each in 192 bytes), the extended space at most
// 960; a longer walk is a loop in a hostile or corrupt list.
const (
	maxStdCaps = 48
	maxExtCaps = (PCIConfigExtendedSize - pciExtStart) / 4
)

// ParsePCIConfig parses a configuration space image of any length. Fewer
// than 64 bytes is an error; fewer than 256 leaves the capabilities
// unknown; a list that loops, points into the header or past the end is
// cut there and said in Problems — never followed forever.
func ParsePCIConfig(b []byte) (PCIConfig, error) {
	c := PCIConfig{Size: len(b)}
	if len(b) < PCIConfigHeaderSize {
		return c, fmt.Errorf("%d bytes: shorter than the 64-byte PCI header", len(b))
	}
	c.Size = min(len(b), PCIConfigExtendedSize)
	c.Vendor = binary.LittleEndian.Uint16(b[0:])
	c.Device = binary.LittleEndian.Uint16(b[2:])
	c.Header = b[pciHeaderType] & 0x7f
	if c.Vendor == 0xffff {
		return c, fmt.Errorf("vendor ID 0xffff: the function does not answer (removed or in reset)")
	}
	if !c.Standard() || binary.LittleEndian.Uint16(b[pciStatus:])&pciStatusCapList == 0 {
		return c, nil
	}
	c.walkStandard(b)
	if c.Extended() && c.PCIe != nil {
		c.walkExtended(b)
	}
	return c, nil
}

// walkStandard follows the capability list from the pointer at 0x34.
func (c *PCIConfig) walkStandard(b []byte) {
	seen := map[int]bool{}
	ptr := int(b[pciCapabilityList]) &^ 3
	for i := 0; ptr != 0; i++ {
		switch {
		case i >= maxStdCaps || seen[ptr]:
			c.Problems = append(c.Problems, fmt.Sprintf("capability list loops at 0x%02x", ptr))
			return
		case ptr < PCIConfigHeaderSize || ptr+2 > PCIConfigStandardSize:
			c.Problems = append(c.Problems, fmt.Sprintf("capability pointer 0x%02x outside 0x40–0xff", ptr))
			return
		}
		seen[ptr] = true
		if b[ptr] == PCICapExp && c.PCIe == nil && ptr+10 <= PCIConfigStandardSize {
			c.PCIe = &PCIeCap{Offset: ptr, PortType: b[ptr+2] >> 4,
				DevCap: binary.LittleEndian.Uint32(b[ptr+4:]), DevCtl: binary.LittleEndian.Uint16(b[ptr+8:])}
		}
		ptr = int(b[ptr+1]) &^ 3
	}
}

// walkExtended follows the PCIe extended capability list from 0x100.
func (c *PCIConfig) walkExtended(b []byte) {
	seen := map[int]bool{}
	ptr := pciExtStart
	for i := 0; ptr != 0; i++ {
		switch {
		case i >= maxExtCaps || seen[ptr]:
			c.Problems = append(c.Problems, fmt.Sprintf("extended capability list loops at 0x%03x", ptr))
			return
		case ptr < pciExtStart || ptr+4 > PCIConfigExtendedSize:
			c.Problems = append(c.Problems, fmt.Sprintf("extended capability pointer 0x%03x outside 0x100–0xfff", ptr))
			return
		}
		seen[ptr] = true
		hdr := binary.LittleEndian.Uint32(b[ptr:])
		if hdr == 0 || hdr == 0xffffffff {
			return // no extended capabilities
		}
		c.extCap(b, ptr, uint16(hdr))
		ptr = int(hdr>>20) &^ 3
	}
}

// extCap records one extended capability of the kinds rdmadoctor judges.
func (c *PCIConfig) extCap(b []byte, ptr int, id uint16) {
	switch {
	case id == PCIExtCapACS && c.ACS == nil && ptr+8 <= PCIConfigExtendedSize:
		c.ACS = &ACSCap{Offset: ptr, Cap: binary.LittleEndian.Uint16(b[ptr+4:]), Ctl: binary.LittleEndian.Uint16(b[ptr+6:])}
	case id == PCIExtCapATS && c.ATS == nil && ptr+8 <= PCIConfigExtendedSize:
		c.ATS = &ATSCap{Offset: ptr, Ctl: binary.LittleEndian.Uint16(b[ptr+6:])}
	}
}
