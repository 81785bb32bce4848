package sysfs

import (
	"errors"
	"fmt"
)

// CMIS 5.2 offsets (CMIS 4.0 has the same for every field read here); ethtool
// cmis.h names the same.
const (
	cmisRevOffset         = 1    // §8.2.1: revision, major in the high nibble
	cmisMemoryModelOffset = 2    // §8.2.1 byte 2 bit 7: flat memory (page 00h only)
	cmisFlatMem           = 0x80 //
	cmisTempOffset        = 14   // §8.2.5 module monitors: temperature 14-15
	cmisVccOffset         = 16   // supply voltage 16-17
	cmisFWMajor           = 39   // §8.2.9 active firmware revision: 39 major, 40 minor
	cmisFWMinor           = 40
	cmisMediaType         = 85 // §8.2.10 MediaType (SFF-8024 Table 4-5)
	cmisApp1MediaLanes    = 88 // application 1: bits 3-0 media lane count
	cmisMaxLanes          = 8  // one bank

	// Upper page 00h (§8.3), as offsets into the half page.
	cmisVendorName = 129 - ModuleHalfPage // 129-144
	cmisVendorPN   = 148 - ModuleHalfPage // 148-163
	cmisVendorRev  = 164 - ModuleHalfPage // 164-165
	cmisVendorSN   = 166 - ModuleHalfPage // 166-181
	cmisMediaTech  = 212 - ModuleHalfPage // media interface technology; 0x0A-0x0F copper

	// Upper page 01h (§8.4.9): monitors advertised, Tx bias multiplier.
	cmisMonAdvert  = 160 - ModuleHalfPage
	cmisTxBiasMon  = 0x01
	cmisTxPowerMon = 0x02
	cmisRxPowerMon = 0x04
	cmisBiasMult   = 0x18 // bits 4-3: 00 ×1, 01 ×2, 10 ×4

	// Upper page 02h (§8.5): thresholds.
	cmisTempLimits    = 128 - ModuleHalfPage
	cmisVccLimits     = 136 - ModuleHalfPage
	cmisTxPowerLimits = 176 - ModuleHalfPage
	cmisTxBiasLimits  = 184 - ModuleHalfPage
	cmisRxPowerLimits = 192 - ModuleHalfPage

	// Upper page 11h bank 0 (§8.9.4): lane monitors.
	cmisTxPowerBase = 154 - ModuleHalfPage // lanes 1-8, 154-169
	cmisTxBiasBase  = 170 - ModuleHalfPage // 170-185
	cmisRxPowerBase = 186 - ModuleHalfPage // 186-201
)

// SFF-8024 Table 4-5 MediaType values.
const (
	cmisMediaMMF           = 0x01
	cmisMediaSMF           = 0x02
	cmisMediaPassiveCopper = 0x03
	cmisMediaActiveCable   = 0x04
	cmisMediaBaseT         = 0x05
	cmisCopperTechFrom     = 0x0A // media interface technology: copper from here on
)

func decodeCMIS(m ModuleEEPROM, lower []byte) (*Transceiver, error) {
	up0, err := m.halfPage(ModuleI2CA0, 0, 0, ModuleHalfPage)
	if err != nil {
		return nil, err
	}
	mod := &Transceiver{Spec: fmt.Sprintf("CMIS %d.%d", lower[cmisRevOffset]>>4, lower[cmisRevOffset]&0x0f),
		Identifier: lower[0], Form: identifierNames[lower[0]],
		Vendor: text(up0, cmisVendorName, cmisVendorName+15), Part: text(up0, cmisVendorPN, cmisVendorPN+15),
		Revision: text(up0, cmisVendorRev, cmisVendorRev+1), Serial: text(up0, cmisVendorSN, cmisVendorSN+15),
		Firmware: fmt.Sprintf("%d.%d", lower[cmisFWMajor], lower[cmisFWMinor])}
	mod.Media, mod.Copper = cmisMedia(lower[cmisMediaType], up0[cmisMediaTech])
	if mod.Copper || lower[cmisMemoryModelOffset]&cmisFlatMem != 0 {
		// A flat-memory module (a passive DAC) has no pages 01h, 02h
		// and 11h: no lane monitors and no thresholds.
		return mod, nil
	}
	mod.Temp, mod.Vcc = ptr(tempC(lower, cmisTempOffset)), ptr(volts(lower, cmisVccOffset))
	p1, err := m.halfPage(ModuleI2CA0, 1, 0, ModuleHalfPage)
	if err != nil {
		return nil, err
	}
	p2, err := m.halfPage(ModuleI2CA0, 2, 0, ModuleHalfPage)
	if err != nil {
		return nil, err
	}
	adv := p1[cmisMonAdvert]
	mult := float64(int(1) << ((adv & cmisBiasMult) >> 3))
	bias := func(b []byte, o int) float64 { return biasMA(b, o, mult) }
	p11, err := m.halfPage(ModuleI2CA0, 0x11, 0, ModuleHalfPage)
	switch {
	case err == nil:
		mod.Lanes = cmisLanes(p11, adv, cmisLaneCount(lower), bias)
	case m.Source == "ioctl" && errors.Is(err, errPageMissing):
		// The ioctl's flat layout ends at page 03h: on a kernel without
		// the netlink request the module-level monitors are all there is.
	default:
		return nil, err
	}
	mod.Thresholds = &ModuleThresholds{
		Temp: limits(p2, cmisTempLimits, tempC), Vcc: limits(p2, cmisVccLimits, volts),
		TxPower: limits(p2, cmisTxPowerLimits, powerMW), TxBias: limits(p2, cmisTxBiasLimits, bias),
		RxPower: limits(p2, cmisRxPowerLimits, powerMW),
	}
	return mod, nil
}

// cmisMedia names what carries the signal, from MediaType and the media
// interface technology.
func cmisMedia(mediaType, tech byte) (string, bool) {
	switch mediaType {
	case cmisMediaPassiveCopper:
		return "passive copper", true
	case cmisMediaActiveCable:
		if tech >= cmisCopperTechFrom {
			return "active copper", true
		}
		return "active optical cable", false
	case cmisMediaMMF, cmisMediaSMF:
		return "optical", false
	case cmisMediaBaseT:
		return "BASE-T", true
	}
	return fmt.Sprintf("media type 0x%02x", mediaType), false
}

// cmisLaneCount is the media lane count of the module's first application,
// the lanes a fully used module lights (1-8); 8 when it says none.
func cmisLaneCount(lower []byte) int {
	n := int(lower[cmisApp1MediaLanes] & 0x0f)
	if n < 1 || n > cmisMaxLanes {
		return cmisMaxLanes
	}
	return n
}

// cmisLanes reads the lane monitors the module advertises from page 11h.
func cmisLanes(p11 []byte, adv byte, n int, bias func([]byte, int) float64) []Lane {
	lanes := make([]Lane, 0, n)
	for i := 0; i < n; i++ {
		l := Lane{N: i + 1}
		if adv&cmisRxPowerMon != 0 {
			l.RxPowerMW = ptr(powerMW(p11, cmisRxPowerBase+2*i))
		}
		if adv&cmisTxPowerMon != 0 {
			l.TxPowerMW = ptr(powerMW(p11, cmisTxPowerBase+2*i))
		}
		if adv&cmisTxBiasMon != 0 {
			l.TxBiasMA = ptr(bias(p11, cmisTxBiasBase+2*i))
		}
		lanes = append(lanes, l)
	}
	return lanes
}
