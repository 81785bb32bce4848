package sysfstest

import (
	"encoding/binary"
	"math"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Fixtures of link.optics: plug-in modules' EEPROM pages, written byte by
// byte at the offsets of the specifications (SFF-8636 rev 2.10a, CMIS 5.2;
// the same offsets ethtool's qsfp.h and cmis.h use) from the values of
// published `ethtool -m` listings, so the decoders read what a real module
// holds. Serial numbers are made up.
//
// optics-qsfp28-healthy: the ConnectX-5 RoCE host with an NVIDIA/Mellanox
// MMA1B00-C100D (100GBASE-SR4 QSFP28) in each port, every monitor within
// the module's own thresholds. Verdict: link.optics pass, exit 0.
//   - readings and thresholds: the QSFP28 SR4 listing published in the
//     AsterNOS transceiver command reference (docs.asternos.com,
//     "show interface transceiver … eeprom detail": Rx 0.84/0.70/1.64/1.15
//     dBm, bias 6.07/6.30/5.92/6.51 mA, 32.96 °C, 3.2961 V; Rx power alarm
//     +4.4/−13.30 dBm, warning +3.40/−10.30 dBm; bias alarm 10/2 mA, warning
//     8.5/3 mA; temperature alarm 75/−5 °C, warning 70/0 °C; Vcc alarm
//     3.63/2.97 V, warning 3.465/3.135 V); Tx power thresholds from IEEE
//     802.3bm 100GBASE-SR4's average launch power (−8.4 dBm minimum, +2.4
//     dBm maximum), which that listing omits.
//
// optics-dac: the same host cabled with Mellanox MCP1600-C003 passive
// copper (QSFP28 DAC, 3 m). Chester Gillon's published notes on reading
// QSFP modules (gist "Reading QSFP module information") show `ethtool -m`
// of a Mellanox passive copper QSFP+ DAC (MC2206130-002) on a ConnectX;
// this is its QSFP28 sibling, written as SFF-8636 encodes a passive copper
// cable: identifier 0x11, connector 0x23 "no separable connector",
// transmitter technology 1010b "copper cable unequalized", flat memory.
// Verdict: link.optics pass naming the DAC, exit 0.
//
// optics-rx-low-alarm: optics-qsfp28-healthy with lane 3 of ens1f1np1's
// module receiving 0.0209 mW (−16.80 dBm), below the module's low alarm
// (−13.30 dBm): a dirty or broken fibre, or a dead far-end laser. Verdict:
// link.optics fail with link.optics/rx-power-alarm, exit 61.
//
// optics-cmis-hot: a ConnectX-7 400 GbE host with an NVIDIA MMA4Z00-NS
// (OSFP, CMIS 5.0, twin-port 2x400G SR4, 8 media lanes) in port 1 at
// 65 °C, above the high warning (60 °C) the module programs in page 02h
// but below its alarm (70 °C); port 2's module is at 45 °C. The thresholds
// and readings are written from CMIS 5.2 §8.5 and IEEE 802.3db
// 100GBASE-SR1's per-lane limits (Tx −4.6…+4.0 dBm, Rx ≥ −6.4 dBm): no
// public listing of this module's pages was at hand. Verdict: link.optics
// warn with link.optics/temp-warning, exit 0.
//
// optics-no-module: the Soft-RoCE VM: its virtio netdev's driver has no
// module EEPROM, and the kernel answers EOPNOTSUPP. Verdict: link.optics
// skip with link.optics/no-module-support, exit 0.

// OpticsVerdict is what a fixture's comment above states of link.optics.
type OpticsVerdict struct {
	Exit    int
	Status  string
	Finding string
}

// OpticsVerdicts are the verdicts stated above, by fixture.
var OpticsVerdicts = map[string]OpticsVerdict{
	"optics-qsfp28-healthy": {0, "pass", "link.optics/ok"},
	"optics-dac":            {0, "pass", "link.optics/copper"},
	"optics-rx-low-alarm":   {61, "fail", "link.optics/rx-power-alarm"},
	"optics-cmis-hot":       {0, "warn", "link.optics/temp-warning"},
	"optics-no-module":      {0, "skip", "link.optics/no-module-support"},
}

// ModuleID is what a module says it is.
type ModuleID struct {
	Vendor, Part, Rev, Serial string
}

// Quad is one monitor's thresholds: high alarm, low alarm, high warning,
// low warning — the order the specifications store them in.
type Quad [4]float64

// OpticLimits are a module's thresholds in °C, V, mW and mA.
type OpticLimits struct {
	Temp, Vcc, RxMW, TxMW, BiasMA Quad
}

// OpticReadings are a module's monitors; one entry per lane.
type OpticReadings struct {
	TempC, Vcc         float64
	RxMW, TxMW, BiasMA []float64
}

// Monitor encodings (SFF-8636 §6.2.4, CMIS §8.2.5): big-endian 16 bits.
func putTemp(b []byte, off int, c float64) {
	binary.BigEndian.PutUint16(b[off:], uint16(int16(math.Round(c*256))))
}
func putU16(b []byte, off int, v, unit float64) {
	binary.BigEndian.PutUint16(b[off:], uint16(math.Round(v/unit)))
}
func putVolts(b []byte, off int, v float64) { putU16(b, off, v, 100e-6) }
func putMW(b []byte, off int, mw float64)   { putU16(b, off, mw, 0.1e-3) }
func putMA(b []byte, off int, ma float64)   { putU16(b, off, ma, 2e-3) }

// putText writes a space-padded ASCII field.
func putText(b []byte, off, n int, s string) {
	for i := 0; i < n; i++ {
		b[off+i] = ' '
		if i < len(s) {
			b[off+i] = s[i]
		}
	}
}

// putQuad writes four thresholds with one monitor's encoding.
func putQuad(b []byte, off int, q Quad, put func([]byte, int, float64)) {
	for i, v := range q {
		put(b, off+2*i, v)
	}
}

func half() []byte { return make([]byte, sysfs.ModuleHalfPage) }

func page(i2c, p uint8, off int, b []byte) sysfs.ModulePage {
	return sysfs.NewModulePage(i2c, p, 0, off, b)
}

// DBmToMW converts dBm, as listings print power, to mW.
func DBmToMW(dbm float64) float64 { return math.Pow(10, dbm/10) }

// QSFP28 returns an SFF-8636 optic's pages: lower page 00h with its
// monitors, upper page 00h with its identity (transmitter technology 0000b
// 850 nm VCSEL, Tx power measurement advertised), upper page 03h with its
// thresholds.
func QSFP28(id ModuleID, r OpticReadings, l OpticLimits) sysfs.ModuleEEPROM {
	lower, up0, up3 := half(), half(), half()
	lower[0], lower[1] = 0x11, 0x08 // QSFP28; SFF-8636 rev 2.10a (Table 6-3)
	putTemp(lower, 22, r.TempC)
	putVolts(lower, 26, r.Vcc)
	for i := 0; i < 4 && i < len(r.RxMW); i++ {
		putMW(lower, 34+2*i, r.RxMW[i])
		putMA(lower, 42+2*i, r.BiasMA[i])
		putMW(lower, 50+2*i, r.TxMW[i])
	}
	qsfpIdentity(up0, id)
	up0[130-128] = 0x0c // MPO 1x12
	up0[147-128] = 0x00 // 850 nm VCSEL
	up0[192-128] = 0x02 // 100GBASE-SR4
	up0[220-128] = 0x0c // Rx power average, Tx power measured
	putQuad(up3, 128-128, l.Temp, putTemp)
	putQuad(up3, 144-128, l.Vcc, putVolts)
	putQuad(up3, 176-128, l.RxMW, putMW)
	putQuad(up3, 184-128, l.BiasMA, putMA)
	putQuad(up3, 192-128, l.TxMW, putMW)
	return sysfs.ModuleEEPROM{Source: "netlink", Pages: []sysfs.ModulePage{
		page(sysfs.ModuleI2CA0, 0, 0, lower), page(sysfs.ModuleI2CA0, 0, 128, up0), page(sysfs.ModuleI2CA0, 3, 128, up3)}}
}

func qsfpIdentity(up0 []byte, id ModuleID) {
	up0[0] = 0x11
	putText(up0, 148-128, 16, id.Vendor)
	putText(up0, 168-128, 16, id.Part)
	putText(up0, 184-128, 2, id.Rev)
	putText(up0, 196-128, 16, id.Serial)
}

// QSFP28DAC returns a passive copper cable's pages: flat memory (lower page
// byte 2 bit 2), so only page 00h; transmitter technology 1010b.
func QSFP28DAC(id ModuleID) sysfs.ModuleEEPROM {
	lower, up0 := half(), half()
	lower[0], lower[1], lower[2] = 0x11, 0x07, 0x04 // QSFP28, rev 2.8, flat memory
	qsfpIdentity(up0, id)
	up0[130-128] = 0x23 // no separable connector
	up0[146-128] = 3    // cable assembly length, m
	up0[147-128] = 0xa0 // copper cable unequalized
	up0[192-128] = 0x0b // 100GBASE-CR4
	return sysfs.ModuleEEPROM{Source: "netlink", Pages: []sysfs.ModulePage{
		page(sysfs.ModuleI2CA0, 0, 0, lower), page(sysfs.ModuleI2CA0, 0, 128, up0)}}
}

// OSFP returns a CMIS 5.0 optic's pages: lower page 00h (monitors,
// firmware, MediaType MMF, application 1 with 8 media lanes), upper pages
// 00h (identity, 850 nm VCSEL), 01h (Tx bias, Tx and Rx power monitors
// advertised, bias multiplier 1), 02h (thresholds) and 11h bank 0 (lane
// monitors).
func OSFP(id ModuleID, fw [2]byte, r OpticReadings, l OpticLimits) sysfs.ModuleEEPROM {
	lower, up0, up1, up2, up11 := half(), half(), half(), half(), half()
	lower[0], lower[1] = 0x19, 0x50 // OSFP, CMIS 5.0
	lower[3] = 0x03 << 1            // ModuleReady
	putTemp(lower, 14, r.TempC)
	putVolts(lower, 16, r.Vcc)
	lower[39], lower[40] = fw[0], fw[1]
	lower[85] = 0x01                                                    // multimode fibre
	lower[86], lower[87], lower[88], lower[89] = 0x11, 0x0b, 0x88, 0x01 // application 1: interface codes, 8 host and 8 media lanes (byte 88)
	up0[0] = 0x19
	putText(up0, 129-128, 16, id.Vendor)
	putText(up0, 148-128, 16, id.Part)
	putText(up0, 164-128, 2, id.Rev)
	putText(up0, 166-128, 16, id.Serial)
	up0[203-128] = 0x0c // MPO 1x12
	up0[212-128] = 0x00 // 850 nm VCSEL
	up1[160-128] = 0x07 // Tx bias, Tx power, Rx power monitored; multiplier 1
	putQuad(up2, 128-128, l.Temp, putTemp)
	putQuad(up2, 136-128, l.Vcc, putVolts)
	putQuad(up2, 176-128, l.TxMW, putMW)
	putQuad(up2, 184-128, l.BiasMA, putMA)
	putQuad(up2, 192-128, l.RxMW, putMW)
	for i := 0; i < 8 && i < len(r.RxMW); i++ {
		putMW(up11, 154-128+2*i, r.TxMW[i])
		putMA(up11, 170-128+2*i, r.BiasMA[i])
		putMW(up11, 186-128+2*i, r.RxMW[i])
	}
	return sysfs.ModuleEEPROM{Source: "netlink", Pages: []sysfs.ModulePage{
		page(sysfs.ModuleI2CA0, 0, 0, lower), page(sysfs.ModuleI2CA0, 0, 128, up0), page(sysfs.ModuleI2CA0, 1, 128, up1),
		page(sysfs.ModuleI2CA0, 2, 128, up2), page(sysfs.ModuleI2CA0, 0x11, 128, up11)}}
}

// MMA1B00Limits are the QSFP28 SR4's thresholds (see optics-qsfp28-healthy).
var MMA1B00Limits = OpticLimits{
	Temp: Quad{75, -5, 70, 0}, Vcc: Quad{3.63, 2.97, 3.465, 3.135},
	RxMW:   Quad{DBmToMW(4.4), DBmToMW(-13.2975), DBmToMW(3.4001), DBmToMW(-10.3012)},
	TxMW:   Quad{DBmToMW(3.4), DBmToMW(-8.4), DBmToMW(2.4), DBmToMW(-7.4)},
	BiasMA: Quad{10, 2, 8.5, 3},
}

// MMA1B00Readings are a healthy QSFP28 SR4's monitors.
func MMA1B00Readings() OpticReadings {
	return OpticReadings{TempC: 32.957, Vcc: 3.2961,
		RxMW:   []float64{DBmToMW(0.8422), DBmToMW(0.6971), DBmToMW(1.6414), DBmToMW(1.1458)},
		TxMW:   []float64{0.8831, 0.9120, 0.8654, 0.9333},
		BiasMA: []float64{6.074, 6.296, 5.922, 6.510}}
}

// MMA4Z00Limits are the OSFP's thresholds (see optics-cmis-hot).
var MMA4Z00Limits = OpticLimits{
	Temp: Quad{70, -5, 60, 0}, Vcc: Quad{3.63, 2.97, 3.465, 3.135},
	RxMW:   Quad{DBmToMW(5.0), DBmToMW(-9.4), DBmToMW(4.0), DBmToMW(-6.4)},
	TxMW:   Quad{DBmToMW(5.0), DBmToMW(-6.6), DBmToMW(4.0), DBmToMW(-4.6)},
	BiasMA: Quad{13, 3, 12, 4},
}

// MMA4Z00Readings are a healthy OSFP's monitors at tempC.
func MMA4Z00Readings(tempC float64) OpticReadings {
	r := OpticReadings{TempC: tempC, Vcc: 3.2874}
	for i := 0; i < 8; i++ {
		r.RxMW = append(r.RxMW, DBmToMW(0.2+0.1*float64(i%3)))
		r.TxMW = append(r.TxMW, DBmToMW(0.9-0.1*float64(i%2)))
		r.BiasMA = append(r.BiasMA, 7.1+0.05*float64(i))
	}
	return r
}

// withModules builds a host with the given modules by netdev.
func withModules(h Host, mods map[string]sysfs.ModuleEEPROM) *Tree {
	t := Build(h)
	t.Facts.ModuleEEPROMs = mods
	return t
}

func healthyQSFP28(serial string) sysfs.ModuleEEPROM {
	return QSFP28(ModuleID{"Mellanox", "MMA1B00-C100D", "A2", serial}, MMA1B00Readings(), MMA1B00Limits)
}

func init() {
	register("optics-qsfp28-healthy", func() *Tree {
		return withModules(CX5RoCE(), map[string]sysfs.ModuleEEPROM{
			"ens1f0np0": healthyQSFP28("MT2034FT01234"), "ens1f1np1": healthyQSFP28("MT2034FT01307")})
	})
	register("optics-dac", func() *Tree {
		return withModules(CX5RoCE(), map[string]sysfs.ModuleEEPROM{
			"ens1f0np0": QSFP28DAC(ModuleID{"Mellanox", "MCP1600-C003", "A2", "MT1626VS04529"}),
			"ens1f1np1": QSFP28DAC(ModuleID{"Mellanox", "MCP1600-C003", "A2", "MT1626VS04531"})})
	})
	register("optics-rx-low-alarm", func() *Tree {
		r := MMA1B00Readings()
		r.RxMW[2] = DBmToMW(-16.8)
		return withModules(CX5RoCE(), map[string]sysfs.ModuleEEPROM{
			"ens1f0np0": healthyQSFP28("MT2034FT01234"),
			"ens1f1np1": QSFP28(ModuleID{"Mellanox", "MMA1B00-C100D", "A2", "MT2034FT01307"}, r, MMA1B00Limits)})
	})
	register("optics-cmis-hot", func() *Tree {
		osfp := func(serial string, temp float64) sysfs.ModuleEEPROM {
			return OSFP(ModuleID{"NVIDIA", "MMA4Z00-NS", "A5", serial}, [2]byte{46, 120}, MMA4Z00Readings(temp), MMA4Z00Limits)
		}
		return withModules(CX7RoCE(), map[string]sysfs.ModuleEEPROM{
			"ens1f0np0": osfp("MT2410FT09876", 65), "ens1f1np1": osfp("MT2410FT09877", 45)})
	})
	register("optics-no-module", func() *Tree {
		return withModules(RXE(), map[string]sysfs.ModuleEEPROM{"enp0s3": {Err: sysfs.ErrNoModule}})
	})
}
