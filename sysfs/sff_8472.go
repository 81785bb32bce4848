package sysfs

// SFF-8472 rev 12.4 (SFP/SFP+/SFP28) offsets; ethtool sfpid.c and
// sfpdiag.c read the same.
const (
	sff8472CableTech       = 8    // A0h byte 8 (SFP+ cable technology): bit 2 passive, bit 3 active
	sff8472PassiveCable    = 0x04 //
	sff8472ActiveCable     = 0x08 //
	sff8472VendorName      = 20   // A0h 20-35
	sff8472VendorPN        = 40   // 40-55
	sff8472VendorRev       = 56   // 56-59
	sff8472VendorSN        = 68   // 68-83
	sff8472DiagTypeOffset  = 92   // §8.8 diagnostic monitoring type
	sff8472DDMImplemented  = 0x40 // bit 6: digital diagnostics implemented
	sff8472InternallyCal   = 0x20 // bit 5: internally calibrated
	sff8472ExternallyCal   = 0x10 // bit 4: externally calibrated (needs A2h constants)
	sff8472TempLimits      = 0    // A2h §9.1: 0-7 temperature, 8-15 Vcc, 16-23 bias, 24-31 Tx power, 32-39 Rx power
	sff8472VccLimits       = 8
	sff8472TxBiasLimits    = 16
	sff8472TxPowerLimits   = 24
	sff8472RxPowerLimits   = 32
	sff8472TempOffset      = 96 // A2h §9.2: 96-97 temperature, 98-99 Vcc, 100-101 bias, 102-103 Tx, 104-105 Rx
	sff8472VccOffset       = 98
	sff8472TxBiasOffset    = 100
	sff8472TxPowerOffset   = 102
	sff8472RxPowerOffset   = 104
	sff8472ExternalCalNote = "externally calibrated diagnostics (SFF-8472 §9.3): not decoded"
)

func decodeSFF8472(m ModuleEEPROM, a0 []byte) (*Transceiver, error) {
	mod := &Transceiver{Spec: "SFF-8472", Identifier: a0[0], Form: identifierNames[a0[0]],
		Vendor: text(a0, sff8472VendorName, sff8472VendorName+15), Part: text(a0, sff8472VendorPN, sff8472VendorPN+15),
		Revision: text(a0, sff8472VendorRev, sff8472VendorRev+3), Serial: text(a0, sff8472VendorSN, sff8472VendorSN+15),
		Media: "optical"}
	switch {
	case a0[sff8472CableTech]&sff8472PassiveCable != 0:
		mod.Media, mod.Copper = "passive copper", true
	case a0[sff8472CableTech]&sff8472ActiveCable != 0:
		mod.Media, mod.Copper = "active copper", true
	}
	diag := a0[sff8472DiagTypeOffset]
	switch {
	case mod.Copper:
		return mod, nil
	case diag&sff8472DDMImplemented == 0:
		mod.MonitorNote = "no digital diagnostics (SFF-8472 byte 92 bit 6 clear)"
		return mod, nil
	case diag&sff8472InternallyCal == 0 && diag&sff8472ExternallyCal != 0:
		mod.MonitorNote = sff8472ExternalCalNote
		return mod, nil
	}
	a2, err := m.halfPage(ModuleI2CA2, 0, 0, 0)
	if err != nil {
		return nil, err
	}
	bias := func(b []byte, o int) float64 { return biasMA(b, o, 1) }
	mod.Temp, mod.Vcc = ptr(tempC(a2, sff8472TempOffset)), ptr(volts(a2, sff8472VccOffset))
	mod.Lanes = []Lane{{N: 1, RxPowerMW: ptr(powerMW(a2, sff8472RxPowerOffset)), TxPowerMW: ptr(powerMW(a2, sff8472TxPowerOffset)),
		TxBiasMA: ptr(bias(a2, sff8472TxBiasOffset))}}
	mod.Thresholds = &ModuleThresholds{
		Temp: limits(a2, sff8472TempLimits, tempC), Vcc: limits(a2, sff8472VccLimits, volts),
		TxBias: limits(a2, sff8472TxBiasLimits, bias), TxPower: limits(a2, sff8472TxPowerLimits, powerMW),
		RxPower: limits(a2, sff8472RxPowerLimits, powerMW),
	}
	return mod, nil
}
