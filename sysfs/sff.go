package sysfs

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Decoders of plug-in module memory: SFF-8636 (QSFP+/QSFP28), CMIS 4.0/5.x
// (QSFP-DD, OSFP, QSFP112) and SFF-8472 (SFP/SFP28). Every offset below is
// the specification's, checked against the layouts ethtool's own decoders
// use (ethtool qsfp.h, cmis.h, sfpdiag.c, sff-common.h). Units
// (SFF-8636 rev 2.10a §6.2.4, CMIS 5.2 §8.2.5 and §8.9, SFF-8472 rev 12.4
// §9.2): temperature is a signed 16-bit count of 1/256 °C, supply voltage
// an unsigned count of 100 µV, optical power an unsigned count of 0.1 µW,
// laser bias an unsigned count of 2 µA. Multi-byte values are big-endian.
// The decoders read only what the pages hold: a short, missing or garbled
// page is an error naming the page, never a panic.

// Identifier byte values (SFF-8024 rev 4.11 Table 4-1; ethtool sff-common.h).
const (
	idSFP          = 0x03
	idQSFP         = 0x0C
	idQSFPPlus     = 0x0D
	idQSFP28       = 0x11
	idQSFPDD       = 0x18
	idOSFP         = 0x19
	idDSFP         = 0x1B
	idQSFPPlusCMIS = 0x1E
	idSFPDDCMIS    = 0x1F
	idSFPPlusCMIS  = 0x20
)

type moduleSpec int

const (
	specUnknown moduleSpec = iota
	specSFF8636
	specCMIS
	specSFF8472
)

func moduleSpecOf(id byte) moduleSpec {
	switch id {
	case idQSFP, idQSFPPlus, idQSFP28:
		return specSFF8636
	case idQSFPDD, idOSFP, idDSFP, idQSFPPlusCMIS, idSFPDDCMIS, idSFPPlusCMIS:
		return specCMIS
	case idSFP:
		return specSFF8472
	}
	return specUnknown
}

// identifierNames are SFF-8024's names of the form factors decoded here.
var identifierNames = map[byte]string{
	idSFP: "SFP/SFP+/SFP28", idQSFP: "QSFP", idQSFPPlus: "QSFP+", idQSFP28: "QSFP28",
	idQSFPDD: "QSFP-DD", idOSFP: "OSFP", idDSFP: "DSFP", idQSFPPlusCMIS: "QSFP+ (CMIS)",
	idSFPDDCMIS: "SFP-DD (CMIS)", idSFPPlusCMIS: "SFP+ (CMIS)",
}

// Transceiver is a plug-in module decoded: what it is, who made it, and its
// monitors and the alarm and warning thresholds it carries for them.
type Transceiver struct {
	Spec       string // "SFF-8636", "CMIS 5.0", "SFF-8472"
	Identifier byte
	Form       string // "QSFP28", "OSFP"
	Vendor     string
	Part       string
	Revision   string // the vendor's hardware revision
	Serial     string
	// Firmware is CMIS's active module firmware ("1.2"); SFF-8636 and
	// SFF-8472 define no firmware field.
	Firmware string
	// Media says what carries the signal: "optical", "passive copper",
	// "active copper" or "active optical cable".
	Media string
	// Copper is a direct-attach copper cable, passive or active: it has no
	// laser and no optical power to judge.
	Copper bool
	Temp   *float64 // °C
	Vcc    *float64 // V
	Lanes  []Lane
	// Thresholds are the module's own alarm and warning limits; nil when
	// it has none (flat memory: a DAC).
	Thresholds *ModuleThresholds
	// MonitorNote says why the monitors are not decoded (an SFP without
	// diagnostics, or one that needs external calibration), "" otherwise.
	MonitorNote string
}

// Lane is one lane's monitors; a nil value is one the module does not report.
type Lane struct {
	N         int      // 1-based
	RxPowerMW *float64 // received optical power, mW
	TxPowerMW *float64 // transmitted optical power, mW
	TxBiasMA  *float64 // laser bias current, mA
}

// Limits are one monitor's four thresholds. Set is false when the module
// leaves all four at zero (no thresholds programmed): nothing to judge.
type Limits struct {
	HighAlarm, LowAlarm, HighWarn, LowWarn float64
	Set                                    bool
}

// ModuleThresholds are the module's thresholds, in the monitors' units
// (°C, V, mW, mA).
type ModuleThresholds struct {
	Temp, Vcc, RxPower, TxPower, TxBias Limits
}

// DBm converts optical power in mW to dBm; -Inf for no light.
func DBm(mw float64) float64 {
	if mw <= 0 {
		return math.Inf(-1)
	}
	return 10 * math.Log10(mw)
}

// Raw units to physical ones.
func tempC(b []byte, off int) float64 { return float64(int16(binary.BigEndian.Uint16(b[off:]))) / 256 }
func volts(b []byte, off int) float64 { return float64(binary.BigEndian.Uint16(b[off:])) * 100e-6 }
func powerMW(b []byte, off int) float64 {
	return float64(binary.BigEndian.Uint16(b[off:])) * 0.1e-3 // 0.1 µW
}
func biasMA(b []byte, off int, mult float64) float64 {
	return float64(binary.BigEndian.Uint16(b[off:])) * 2e-3 * mult // 2 µA
}

func ptr(v float64) *float64 { return &v }

// text reads a space-padded ASCII field, dropping what is not printable.
func text(b []byte, from, to int) string {
	var sb strings.Builder
	for _, c := range b[from : to+1] {
		if c >= 0x20 && c < 0x7f {
			sb.WriteByte(c)
		}
	}
	return strings.TrimSpace(sb.String())
}

// limits reads four consecutive 2-byte thresholds — high alarm, low alarm,
// high warning, low warning, the order of SFF-8636 page 03h, CMIS page 02h
// and SFF-8472 A2h — with the monitor's own conversion.
func limits(b []byte, off int, conv func([]byte, int) float64) Limits {
	l := Limits{HighAlarm: conv(b, off), LowAlarm: conv(b, off+2), HighWarn: conv(b, off+4), LowWarn: conv(b, off+6)}
	for i := 0; i < 8; i++ {
		if b[off+i] != 0 {
			l.Set = true
		}
	}
	return l
}

// ErrNotAModule says the lower page's identifier is not a module this
// package decodes.
var ErrNotAModule = errors.New("identifier not decoded")

// UnknownIdentifierError is a lower page whose identifier (SFF-8024 Table
// 4-1) names no layout decoded here; it is ErrNotAModule.
type UnknownIdentifierError struct{ ID byte }

func (e UnknownIdentifierError) Error() string {
	return fmt.Sprintf("lower page 00h: identifier 0x%02x: %v", e.ID, ErrNotAModule)
}

// Is makes errors.Is(err, ErrNotAModule) true.
func (e UnknownIdentifierError) Is(target error) bool { return target == ErrNotAModule }

// DecodeTransceiver decodes a module's recorded pages by the specification its
// identifier names.
func DecodeTransceiver(m ModuleEEPROM) (*Transceiver, error) {
	lower, err := m.halfPage(ModuleI2CA0, 0, 0, 0)
	if err != nil {
		return nil, err
	}
	switch moduleSpecOf(lower[0]) {
	case specSFF8636:
		return decodeSFF8636(m, lower)
	case specCMIS:
		return decodeCMIS(m, lower)
	case specSFF8472:
		return decodeSFF8472(m, lower)
	}
	return nil, UnknownIdentifierError{ID: lower[0]}
}

// serialField is where a module's vendor serial number lies: the half
// page and the offset of its 16 ASCII bytes in it (SFF-8636 bytes 196-211
// of upper page 00h, CMIS bytes 166-181 of upper page 00h, SFF-8472 bytes
// 68-83 of A0h).
func serialField(spec moduleSpec) (f serialLayout, ok bool) {
	switch spec {
	case specSFF8636: // CC_EXT, byte 223, sums bytes 192-222
		return serialLayout{offset: ModuleHalfPage, at: sff8636VendorSN, sumFrom: 64, sumAt: 95}, true
	case specCMIS: // the page checksum, byte 222, sums bytes 128-221
		return serialLayout{offset: ModuleHalfPage, at: cmisVendorSN, sumFrom: 0, sumAt: 94}, true
	case specSFF8472: // CC_EXT, byte 95, sums bytes 64-94
		return serialLayout{offset: 0, at: sff8472VendorSN, sumFrom: 64, sumAt: 95}, true
	}
	return serialLayout{}, false
}

// serialLayout places the serial in its half page, and the checksum that
// covers it: the low byte of the sum of bytes sumFrom to sumAt-1.
type serialLayout struct{ offset, at, sumFrom, sumAt int }

func checksum(b []byte) byte {
	var sum byte
	for _, c := range b {
		sum += c
	}
	return sum
}

// ReplaceSerial rewrites the module's vendor serial number in its recorded
// pages with what replace returns for it (space-padded to the field's 16
// bytes, cut at 16): a redacted snapshot keeps the module's make and part
// but not the serial that names one unit. false: the pages hold no serial
// this decoder knows where to find (an unknown identifier, a missing page);
// nothing was changed.
func (m *ModuleEEPROM) ReplaceSerial(replace func(serial string) string) bool {
	lower, err := m.halfPage(ModuleI2CA0, 0, 0, 0)
	if err != nil || len(lower) == 0 {
		return false
	}
	f, ok := serialField(moduleSpecOf(lower[0]))
	if !ok {
		return false
	}
	for i, p := range m.Pages {
		if p.I2C != ModuleI2CA0 || p.Page != 0 || p.Bank != 0 || p.Offset != f.offset {
			continue
		}
		b, err := p.Bytes()
		if err != nil || len(b) != ModuleHalfPage {
			return false
		}
		sumWasRight := checksum(b[f.sumFrom:f.sumAt]) == b[f.sumAt]
		copy(b[f.at:f.at+16], fmt.Sprintf("%-16.16s", replace(text(b, f.at, f.at+15))))
		if sumWasRight {
			// A checksum that held still holds; a wrong one stays wrong, as
			// the module wrote it.
			b[f.sumAt] = checksum(b[f.sumFrom:f.sumAt])
		}
		m.Pages[i].Data = hex.EncodeToString(b)
		return true
	}
	return false
}
