package sysfs

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Plug-in module EEPROM addressing, as the ethtool netlink request
// ETHTOOL_MSG_MODULE_EEPROM_GET takes it (include/uapi/linux/ethtool_netlink.h,
// Documentation/networking/ethtool-netlink.rst "MODULE_EEPROM_GET"): a read
// names an I2C address, a page, a bank, an offset and a length, and never
// crosses a half page. Offsets 0-127 are the lower page (always page 0);
// 128-255 are the upper half of the page named.
const (
	ModuleHalfPage = 128
	// ModuleI2CA0 is the module's ID and management address (0xA0 in
	// 8-bit form): SFF-8636, CMIS and SFF-8472's serial ID.
	ModuleI2CA0 = 0x50
	// ModuleI2CA2 is SFF-8472's diagnostics address (0xA2).
	ModuleI2CA2 = 0x51
)

// ErrNoModule is the answer of a driver that has no module EEPROM
// interface at all (dummy, virtio, veth, rxe's netdev's driver): the kernel
// answers the request with EOPNOTSUPP.
const ErrNoModule = "EOPNOTSUPP"

// ModuleEEPROM is what one network interface's plug-in module (QSFP, OSFP,
// SFP) answered: the raw half pages, so a snapshot replays them and the
// decoders (sff.go) judge the same bytes elsewhere. Err is set when the
// first read — the lower page — failed: the errno name ("EOPNOTSUPP" for a
// driver without module support, "EIO" or "ENODEV" for an empty cage,
// "EPERM" without CAP_NET_ADMIN); Pages are then empty.
type ModuleEEPROM struct {
	Err string `json:"error,omitempty"`
	// Source is how the pages were read: "netlink" (MODULE_EEPROM_GET) or
	// "ioctl" (SIOCETHTOOL ETHTOOL_GMODULEEEPROM on kernels before 5.13).
	Source string       `json:"source,omitempty"`
	Pages  []ModulePage `json:"pages,omitempty"`
}

// ModulePage is one half page of a module's memory.
type ModulePage struct {
	I2C    uint8 `json:"i2c_address"`
	Page   uint8 `json:"page"`
	Bank   uint8 `json:"bank,omitempty"`
	Offset int   `json:"offset"` // 0: the lower page; 128: the upper half of Page
	// Data is the half page's bytes in hex; Err the errno name when the
	// read of this half page failed.
	Data string `json:"data,omitempty"`
	Err  string `json:"error,omitempty"`
}

// NewModulePage records bytes read from a module.
func NewModulePage(i2c, page, bank uint8, offset int, data []byte) ModulePage {
	return ModulePage{I2C: i2c, Page: page, Bank: bank, Offset: offset, Data: hex.EncodeToString(data)}
}

// Name says which half page this is, as the specifications name them:
// "lower page 00h", "upper page 03h", "upper page 11h bank 0", "A2h lower page".
func (p ModulePage) Name() string { return modulePageName(p.I2C, p.Page, p.Bank, p.Offset) }

func modulePageName(i2c, page, bank uint8, offset int) string {
	half := "upper"
	if offset < ModuleHalfPage {
		half = "lower"
	}
	prefix := ""
	if i2c != ModuleI2CA0 {
		prefix = fmt.Sprintf("%02Xh ", int(i2c)<<1)
	}
	s := fmt.Sprintf("%s%s page %02Xh", prefix, half, page)
	if bank != 0 {
		s += fmt.Sprintf(" bank %d", bank)
	}
	return s
}

// Bytes decodes the half page's data.
func (p ModulePage) Bytes() ([]byte, error) {
	if p.Err != "" {
		return nil, fmt.Errorf("%s: the read failed: %s", p.Name(), p.Err)
	}
	b, err := hex.DecodeString(strings.TrimSpace(p.Data))
	if err != nil {
		return nil, fmt.Errorf("%s: data is not hex: %w", p.Name(), err)
	}
	return b, nil
}

// errPageMissing says a half page the decoder needs is not in the record.
var errPageMissing = errors.New("not read")

// halfPage returns the bytes of one half page, which must be whole (128
// bytes): a short or missing page is an error naming the page.
func (m ModuleEEPROM) halfPage(i2c, page, bank uint8, offset int) ([]byte, error) {
	for _, p := range m.Pages {
		if p.I2C != i2c || p.Page != page || p.Bank != bank || p.Offset != offset {
			continue
		}
		b, err := p.Bytes()
		if err != nil {
			return nil, err
		}
		if len(b) != ModuleHalfPage {
			return nil, fmt.Errorf("%s: %d bytes, want %d", p.Name(), len(b), ModuleHalfPage)
		}
		return b, nil
	}
	return nil, fmt.Errorf("%s: %w", modulePageName(i2c, page, bank, offset), errPageMissing)
}

// ModuleEEPROM returns what the module of one network interface answered:
// live, read through the ethtool netlink API (else the ioctl); from a
// fixture or snapshot, the recorded pages. found is false when a snapshot
// has no module record for the interface (taken before modules were
// captured): nothing is known, which is not an error of the host.
func (h *Host) ModuleEEPROM(ifname string) (m ModuleEEPROM, found bool, err error) {
	if h.Live() {
		src, ok := h.live.(moduleSource)
		if !ok {
			return ModuleEEPROM{}, false, errors.New("this live source cannot read module EEPROMs")
		}
		m, err := src.ModuleEEPROM(ifname)
		return m, err == nil, err
	}
	if h.facts == nil || h.facts.ModuleEEPROMs == nil {
		return ModuleEEPROM{}, false, nil
	}
	m, found = h.facts.ModuleEEPROMs[ifname]
	return m, found, nil
}

// RecordsModules tells whether module EEPROMs can be known here: always
// on a live host; in a fixture or snapshot, when its facts file records
// them (one taken before modules were captured does not).
func (h *Host) RecordsModules() bool {
	return h.Live() || h.facts != nil && h.facts.ModuleEEPROMs != nil
}

// moduleSource is a live source that reads module EEPROMs (the netlink
// source does; a test's source may not).
type moduleSource interface {
	ModuleEEPROM(ifname string) (ModuleEEPROM, error)
}

// ModuleReadPlan lists the half pages worth reading after the lower page,
// by what the lower page says the module is: the identifier picks the
// specification, and a flat-memory module has only page 00h.
func ModuleReadPlan(lower []byte) []ModulePage {
	if len(lower) < 3 {
		return nil
	}
	upper := func(page uint8) ModulePage {
		return ModulePage{I2C: ModuleI2CA0, Page: page, Offset: ModuleHalfPage}
	}
	switch moduleSpecOf(lower[0]) {
	case specSFF8636:
		if lower[sff8636StatusOffset]&sff8636FlatMem != 0 {
			return []ModulePage{upper(0)}
		}
		return []ModulePage{upper(0), upper(3)}
	case specCMIS:
		if lower[cmisMemoryModelOffset]&cmisFlatMem != 0 {
			return []ModulePage{upper(0)}
		}
		return []ModulePage{upper(0), upper(1), upper(2), upper(0x11)}
	case specSFF8472:
		if len(lower) > sff8472DiagTypeOffset && lower[sff8472DiagTypeOffset]&sff8472DDMImplemented != 0 {
			return []ModulePage{{I2C: ModuleI2CA2, Page: 0, Offset: 0}}
		}
	}
	return nil
}

// ethtool netlink constants of the reply (include/uapi/linux/ethtool_netlink.h).
const (
	ethtoolAModuleEEPROMHeader = 1 // ETHTOOL_A_MODULE_EEPROM_HEADER: nest of ETHTOOL_A_HEADER_*
	ethtoolAModuleEEPROMOffset = 2 // u32
	ethtoolAModuleEEPROMLength = 3 // u32
	ethtoolAModuleEEPROMPage   = 4 // u8
	ethtoolAModuleEEPROMBank   = 5 // u8
	ethtoolAModuleEEPROMI2C    = 6 // u8 ETHTOOL_A_MODULE_EEPROM_I2C_ADDRESS
	ethtoolAModuleEEPROMData   = 7 // binary ETHTOOL_A_MODULE_EEPROM_DATA
)

// ParseModuleEEPROMReply decodes the payload of the kernel's answer to
// ETHTOOL_MSG_MODULE_EEPROM_GET (the bytes after the netlink header): the
// generic-netlink header, then attributes, of which
// ETHTOOL_A_MODULE_EEPROM_DATA holds the bytes read.
func ParseModuleEEPROMReply(b []byte) ([]byte, error) {
	if len(b) < genlHdrLen {
		return nil, fmt.Errorf("MODULE_EEPROM_GET reply of %d bytes: shorter than the generic netlink header", len(b))
	}
	attrs, err := parseNLAttrs(b[genlHdrLen:])
	if err != nil {
		return nil, fmt.Errorf("MODULE_EEPROM_GET reply: %w", err)
	}
	for _, a := range attrs {
		if a.typ == ethtoolAModuleEEPROMData {
			return append([]byte(nil), a.val...), nil
		}
	}
	return nil, errors.New("MODULE_EEPROM_GET reply without ETHTOOL_A_MODULE_EEPROM_DATA")
}

// Module layouts the ETHTOOL_GMODULEINFO ioctl names (include/uapi/linux/ethtool.h).
const (
	ethModuleSFF8079 = 0x1 // SFP serial ID, A0h only: 256 bytes
	ethModuleSFF8472 = 0x2 // SFP with diagnostics: A0h then A2h, 512 bytes
	ethModuleSFF8636 = 0x3 // QSFP: page 00h, then pages 01h-03h' upper halves, 256 or 640 bytes
	ethModuleSFF8436 = 0x4
)

// IoctlPages cuts the flat bytes ETHTOOL_GMODULEEEPROM returned into the
// half pages MODULE_EEPROM_GET would have returned, by the layout
// ETHTOOL_GMODULEINFO named (ethtool's sfpid.c/sfpdiag.c/qsfp.c read the
// same flat layouts): SFF-8472 puts A2h after A0h's 256 bytes; SFF-8636
// puts the upper halves of pages 01h, 02h and 03h after page 00h. A
// trailing piece shorter than a half page is dropped.
func IoctlPages(layout uint32, data []byte) []ModulePage {
	var out []ModulePage
	add := func(i2c, page uint8, offset, at int) {
		if at+ModuleHalfPage <= len(data) {
			out = append(out, NewModulePage(i2c, page, 0, offset, data[at:at+ModuleHalfPage]))
		}
	}
	add(ModuleI2CA0, 0, 0, 0)
	add(ModuleI2CA0, 0, ModuleHalfPage, ModuleHalfPage)
	switch layout {
	case ethModuleSFF8472:
		add(ModuleI2CA2, 0, 0, 2*ModuleHalfPage)
		add(ModuleI2CA2, 0, ModuleHalfPage, 3*ModuleHalfPage)
	case ethModuleSFF8636, ethModuleSFF8436:
		for page := 1; page <= 3; page++ {
			add(ModuleI2CA0, uint8(page), ModuleHalfPage, (page+1)*ModuleHalfPage)
		}
	}
	return out
}

// maxModuleQueries bounds the module reads of one capture, as
// maxDCBQueries bounds the DCB ones.
const maxModuleQueries = 256

// gatherModuleEEPROMs reads the module of every interface for a snapshot;
// what could not be read is named in unavailable.
func (h *Host) gatherModuleEEPROMs(nds []Netdev, unavailable map[string]string) map[string]ModuleEEPROM {
	out := map[string]ModuleEEPROM{}
	for i, nd := range nds {
		if i >= maxModuleQueries {
			unavailable["module_eeproms"] = fmt.Sprintf("asked only the first %d interfaces", maxModuleQueries)
			break
		}
		m, _, err := h.ModuleEEPROM(nd.Name)
		if err != nil {
			unavailable["module_eeprom:"+nd.Name] = err.Error()
			continue
		}
		out[nd.Name] = m
	}
	return out
}
