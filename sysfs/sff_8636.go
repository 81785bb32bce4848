package sysfs

// SFF-8636 rev 2.10a (QSFP+/QSFP28) offsets; ethtool qsfp.h names the same.
const (
	sff8636StatusOffset = 2    // Status byte 2
	sff8636FlatMem      = 0x04 // bit 2 Flat_mem: upper page 00h only
	sff8636TempOffset   = 22   // §6.2.4 module monitors: temperature 22-23
	sff8636VccOffset    = 26   // supply voltage 26-27
	sff8636RxPowerBase  = 34   // §6.2.5 channel monitors: Rx power 1-4, 34-41
	sff8636TxBiasBase   = 42   // Tx bias 1-4, 42-49
	sff8636TxPowerBase  = 50   // Tx power 1-4, 50-57
	sff8636Lanes        = 4

	// Upper page 00h (§6.3), as offsets into the 128-byte half page.
	sff8636Connector    = 130 - ModuleHalfPage
	sff8636DeviceTech   = 147 - ModuleHalfPage // bits 7-4: transmitter technology (Table 6-19)
	sff8636VendorName   = 148 - ModuleHalfPage // 148-163
	sff8636VendorPN     = 168 - ModuleHalfPage // 168-183
	sff8636VendorRev    = 184 - ModuleHalfPage // 184-185
	sff8636ExtCompl     = 192 - ModuleHalfPage // extended specification compliance (SFF-8024 Table 4-4)
	sff8636VendorSN     = 196 - ModuleHalfPage // 196-211
	sff8636DiagType     = 220 - ModuleHalfPage // bit 2: Tx power measurement supported
	sff8636TxPowerMeas  = 0x04
	sff8636CopperTechLo = 0xA // 1010b copper unequalized … 1111b copper linear active
	sff8636PassiveTopHi = 0xB // 1011b copper passive equalized: the last passive kind

	// Upper page 03h (§6.4.1, ethtool SFF8636_*_HALRM): thresholds.
	sff8636TempLimits    = 128 - ModuleHalfPage
	sff8636VccLimits     = 144 - ModuleHalfPage
	sff8636RxPowerLimits = 176 - ModuleHalfPage
	sff8636TxBiasLimits  = 184 - ModuleHalfPage
	sff8636TxPowerLimits = 192 - ModuleHalfPage
)

// SFF-8024 extended compliance codes of active optical cables.
var sff8024AOC = map[byte]bool{0x01: true, 0x18: true, 0x31: true, 0x33: true}

func decodeSFF8636(m ModuleEEPROM, lower []byte) (*Transceiver, error) {
	up0, err := m.halfPage(ModuleI2CA0, 0, 0, ModuleHalfPage)
	if err != nil {
		return nil, err
	}
	mod := &Transceiver{Spec: "SFF-8636", Identifier: lower[0], Form: identifierNames[lower[0]],
		Vendor: text(up0, sff8636VendorName, sff8636VendorName+15), Part: text(up0, sff8636VendorPN, sff8636VendorPN+15),
		Revision: text(up0, sff8636VendorRev, sff8636VendorRev+1), Serial: text(up0, sff8636VendorSN, sff8636VendorSN+15)}
	tech := up0[sff8636DeviceTech] >> 4
	switch {
	case tech >= sff8636CopperTechLo && tech <= sff8636PassiveTopHi:
		mod.Media, mod.Copper = "passive copper", true
	case tech > sff8636PassiveTopHi:
		mod.Media, mod.Copper = "active copper", true
	case sff8024AOC[up0[sff8636ExtCompl]]:
		mod.Media = "active optical cable"
	default:
		mod.Media = "optical"
	}
	if mod.Copper {
		return mod, nil // no laser: the monitors read zero and have no thresholds
	}
	mod.Temp, mod.Vcc = ptr(tempC(lower, sff8636TempOffset)), ptr(volts(lower, sff8636VccOffset))
	txPower := up0[sff8636DiagType]&sff8636TxPowerMeas != 0
	for i := 0; i < sff8636Lanes; i++ {
		l := Lane{N: i + 1, RxPowerMW: ptr(powerMW(lower, sff8636RxPowerBase+2*i)), TxBiasMA: ptr(biasMA(lower, sff8636TxBiasBase+2*i, 1))}
		if txPower {
			l.TxPowerMW = ptr(powerMW(lower, sff8636TxPowerBase+2*i))
		}
		mod.Lanes = append(mod.Lanes, l)
	}
	if lower[sff8636StatusOffset]&sff8636FlatMem != 0 {
		return mod, nil
	}
	p3, err := m.halfPage(ModuleI2CA0, 3, 0, ModuleHalfPage)
	if err != nil {
		return nil, err
	}
	mod.Thresholds = &ModuleThresholds{
		Temp: limits(p3, sff8636TempLimits, tempC), Vcc: limits(p3, sff8636VccLimits, volts),
		RxPower: limits(p3, sff8636RxPowerLimits, powerMW), TxPower: limits(p3, sff8636TxPowerLimits, powerMW),
		TxBias: limits(p3, sff8636TxBiasLimits, func(b []byte, o int) float64 { return biasMA(b, o, 1) }),
	}
	return mod, nil
}
