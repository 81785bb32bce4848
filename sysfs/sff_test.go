package sysfs_test

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// near compares decoded values to what the fixture wrote, within the
// encoding's resolution (0.1 µW, 2 µA, 100 µV, 1/256 °C).
func near(t *testing.T, what string, got *float64, want, tol float64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: not decoded, want %g", what, want)
		return
	}
	if math.Abs(*got-want) > tol {
		t.Errorf("%s = %g, want %g", what, *got, want)
	}
}

func TestDecodeQSFP28SR4(t *testing.T) {
	r, l := sysfstest.MMA1B00Readings(), sysfstest.MMA1B00Limits
	m, err := sysfs.DecodeTransceiver(sysfstest.QSFP28(sysfstest.ModuleID{Vendor: "Mellanox", Part: "MMA1B00-C100D", Rev: "A2", Serial: "MT2034FT01234"}, r, l))
	if err != nil {
		t.Fatal(err)
	}
	id := []string{m.Spec, m.Form, m.Vendor, m.Part, m.Revision, m.Serial, m.Firmware, m.Media}
	if d := cmp.Diff([]string{"SFF-8636", "QSFP28", "Mellanox", "MMA1B00-C100D", "A2", "MT2034FT01234", "", "optical"}, id); d != "" {
		t.Errorf("identity (-want +got):\n%s", d)
	}
	near(t, "temperature", m.Temp, 32.957, 1.0/256)
	near(t, "Vcc", m.Vcc, 3.2961, 100e-6)
	if len(m.Lanes) != 4 {
		t.Fatalf("%d lanes, want 4", len(m.Lanes))
	}
	for i, ln := range m.Lanes {
		near(t, "Rx power", ln.RxPowerMW, r.RxMW[i], 0.1e-3)
		near(t, "Tx power", ln.TxPowerMW, r.TxMW[i], 0.1e-3)
		near(t, "Tx bias", ln.TxBiasMA, r.BiasMA[i], 2e-3)
	}
	th := m.Thresholds
	if th == nil {
		t.Fatal("no thresholds decoded from page 03h")
	}
	near(t, "Rx low alarm", &th.RxPower.LowAlarm, l.RxMW[1], 0.1e-3)
	near(t, "temperature high warning", &th.Temp.HighWarn, 70, 1.0/256)
	near(t, "temperature low alarm (signed)", &th.Temp.LowAlarm, -5, 1.0/256)
	near(t, "bias high alarm", &th.TxBias.HighAlarm, 10, 2e-3)
	near(t, "Vcc low warning", &th.Vcc.LowWarn, 3.135, 100e-6)
	if !th.TxPower.Set || !th.RxPower.Set {
		t.Error("thresholds written but not marked set")
	}
}

func TestDecodeQSFP28DAC(t *testing.T) {
	m, err := sysfs.DecodeTransceiver(sysfstest.QSFP28DAC(sysfstest.ModuleID{Vendor: "Mellanox", Part: "MCP1600-C003", Rev: "A2", Serial: "MT1626VS04529"}))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Copper || m.Media != "passive copper" || m.Part != "MCP1600-C003" {
		t.Errorf("DAC decoded as %+v", m)
	}
	if m.Lanes != nil || m.Thresholds != nil || m.Temp != nil {
		t.Errorf("a passive DAC has no monitors to judge, got lanes %v thresholds %v temp %v", m.Lanes, m.Thresholds, m.Temp)
	}
}

func TestDecodeCMISOSFP(t *testing.T) {
	r := sysfstest.MMA4Z00Readings(65)
	m, err := sysfs.DecodeTransceiver(sysfstest.OSFP(sysfstest.ModuleID{Vendor: "NVIDIA", Part: "MMA4Z00-NS", Rev: "A5", Serial: "MT2410FT09876"},
		[2]byte{46, 120}, r, sysfstest.MMA4Z00Limits))
	if err != nil {
		t.Fatal(err)
	}
	id := []string{m.Spec, m.Form, m.Vendor, m.Part, m.Serial, m.Firmware, m.Media}
	if d := cmp.Diff([]string{"CMIS 5.0", "OSFP", "NVIDIA", "MMA4Z00-NS", "MT2410FT09876", "46.120", "optical"}, id); d != "" {
		t.Errorf("identity (-want +got):\n%s", d)
	}
	near(t, "temperature", m.Temp, 65, 1.0/256)
	if len(m.Lanes) != 8 {
		t.Fatalf("%d lanes, want the 8 media lanes of application 1", len(m.Lanes))
	}
	near(t, "lane 8 Rx power", m.Lanes[7].RxPowerMW, r.RxMW[7], 0.1e-3)
	near(t, "lane 5 bias", m.Lanes[4].TxBiasMA, r.BiasMA[4], 2e-3)
	near(t, "lane 2 Tx power", m.Lanes[1].TxPowerMW, r.TxMW[1], 0.1e-3)
	near(t, "temperature high warning", &m.Thresholds.Temp.HighWarn, 60, 1.0/256)
	near(t, "Rx power low alarm", &m.Thresholds.RxPower.LowAlarm, sysfstest.DBmToMW(-9.4), 0.1e-3)
}

// sfpPages builds an SFF-8472 SFP with internally calibrated diagnostics:
// A0h with its identity and byte 92, A2h with thresholds and monitors.
func sfpPages(diag byte) sysfs.ModuleEEPROM {
	a0, a2 := make([]byte, 128), make([]byte, 128)
	a0[0], a0[92] = 0x03, diag
	copy(a0[20:36], "FINISAR CORP.   ")
	copy(a0[40:56], "FTLX8571D3BCL   ")
	copy(a0[68:84], "AQ70P4U         ")
	binary.BigEndian.PutUint16(a2[0:], 75*256)  // temperature high alarm
	binary.BigEndian.PutUint16(a2[16:], 5900)   // bias high alarm: 11.8 mA
	binary.BigEndian.PutUint16(a2[32:], 10000)  // Rx power high alarm: 1 mW
	binary.BigEndian.PutUint16(a2[34:], 100)    // Rx power low alarm: 0.01 mW
	binary.BigEndian.PutUint16(a2[96:], 0x1e24) // 30.14 °C
	binary.BigEndian.PutUint16(a2[98:], 33440)  // 3.3440 V
	binary.BigEndian.PutUint16(a2[100:], 3967)  // 7.934 mA
	binary.BigEndian.PutUint16(a2[102:], 5734)  // 0.5734 mW
	binary.BigEndian.PutUint16(a2[104:], 4)     // 0.0004 mW
	return sysfs.ModuleEEPROM{Pages: []sysfs.ModulePage{sysfs.NewModulePage(0x50, 0, 0, 0, a0), sysfs.NewModulePage(0x51, 0, 0, 0, a2)}}
}

// The SFP values are those of a published `ethtool -m` listing of a
// Finisar FTLX8571D3BCL 10GBASE-SR with no light received.
func TestDecodeSFF8472(t *testing.T) {
	m, err := sysfs.DecodeTransceiver(sfpPages(0x68))
	if err != nil {
		t.Fatal(err)
	}
	if m.Spec != "SFF-8472" || m.Vendor != "FINISAR CORP." || m.Part != "FTLX8571D3BCL" || m.Serial != "AQ70P4U" {
		t.Errorf("identity %+v", m)
	}
	near(t, "temperature", m.Temp, 30.14, 1.0/256)
	near(t, "Vcc", m.Vcc, 3.344, 100e-6)
	near(t, "bias", m.Lanes[0].TxBiasMA, 7.934, 2e-3)
	near(t, "Tx power", m.Lanes[0].TxPowerMW, 0.5734, 0.1e-3)
	near(t, "Rx power", m.Lanes[0].RxPowerMW, 0.0004, 0.1e-3)
	near(t, "Rx low alarm", &m.Thresholds.RxPower.LowAlarm, 0.01, 0.1e-3)
	ext, err := sysfs.DecodeTransceiver(sfpPages(0x50)) // externally calibrated only
	if err != nil || ext.Lanes != nil || ext.MonitorNote == "" {
		t.Errorf("externally calibrated SFP: %+v, %v; want no monitors and a note", ext, err)
	}
}

// Every page the decoder needs that is missing, short, garbled or failed
// is an error naming that page.
func TestDecodeTransceiverErrorsNameThePage(t *testing.T) {
	full := sysfstest.QSFP28(sysfstest.ModuleID{Vendor: "Mellanox"}, sysfstest.MMA1B00Readings(), sysfstest.MMA1B00Limits)
	edit := func(f func(ps []sysfs.ModulePage) []sysfs.ModulePage) sysfs.ModuleEEPROM {
		ps := append([]sysfs.ModulePage(nil), full.Pages...)
		return sysfs.ModuleEEPROM{Pages: f(ps)}
	}
	cases := map[string]struct {
		m    sysfs.ModuleEEPROM
		want string
	}{
		"no pages":           {sysfs.ModuleEEPROM{}, "lower page 00h: not read"},
		"page 03h missing":   {edit(func(ps []sysfs.ModulePage) []sysfs.ModulePage { return ps[:2] }), "upper page 03h: not read"},
		"page 03h failed":    {edit(func(ps []sysfs.ModulePage) []sysfs.ModulePage { ps[2].Data, ps[2].Err = "", "EIO"; return ps }), "upper page 03h: the read failed: EIO"},
		"lower page short":   {edit(func(ps []sysfs.ModulePage) []sysfs.ModulePage { ps[0].Data = ps[0].Data[:40]; return ps }), "lower page 00h: 20 bytes, want 128"},
		"upper page garbled": {edit(func(ps []sysfs.ModulePage) []sysfs.ModulePage { ps[1].Data = "zz"; return ps }), "upper page 00h: data is not hex"},
	}
	for name, tc := range cases {
		_, err := sysfs.DecodeTransceiver(tc.m)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
	unknown := edit(func(ps []sysfs.ModulePage) []sysfs.ModulePage {
		ps[0].Data = "00" + ps[0].Data[2:]
		return ps
	})
	if _, err := sysfs.DecodeTransceiver(unknown); !errors.Is(err, sysfs.ErrNotAModule) {
		t.Errorf("identifier 0x00: %v, want ErrNotAModule", err)
	}
}

// The ioctl's flat 640 bytes of an SFF-8636 module are cut into the half
// pages netlink returns, and decode the same.
func TestIoctlPagesSFF8636(t *testing.T) {
	nl := sysfstest.QSFP28(sysfstest.ModuleID{Vendor: "Mellanox", Part: "MMA1B00-C100D"}, sysfstest.MMA1B00Readings(), sysfstest.MMA1B00Limits)
	flat := make([]byte, 640)
	for _, p := range nl.Pages {
		b, _ := hex.DecodeString(p.Data)
		at := p.Offset
		if p.Page > 0 {
			at = (int(p.Page) + 1) * 128
		}
		copy(flat[at:], b)
	}
	pages := sysfs.IoctlPages(3, flat)
	if len(pages) != 5 {
		t.Fatalf("%d half pages from 640 bytes, want 5", len(pages))
	}
	fromNL, err1 := sysfs.DecodeTransceiver(nl)
	fromIoctl, err2 := sysfs.DecodeTransceiver(sysfs.ModuleEEPROM{Pages: pages})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if d := cmp.Diff(fromNL, fromIoctl); d != "" {
		t.Errorf("ioctl layout decodes differently (-netlink +ioctl):\n%s", d)
	}
	if got := sysfs.IoctlPages(3, flat[:200]); len(got) != 1 {
		t.Errorf("200 bytes: %d half pages, want only the whole lower page", len(got))
	}
}

func TestModuleReadPlan(t *testing.T) {
	names := func(ps []sysfs.ModulePage) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name())
		}
		return out
	}
	lower := func(b ...byte) []byte { return append(b, make([]byte, 128-len(b))...) }
	sfp := lower(0x03)
	sfp[92] = 0x68
	cases := []struct {
		name  string
		lower []byte
		want  []string
	}{
		{"QSFP28 paged", lower(0x11, 0x08, 0x00), []string{"upper page 00h", "upper page 03h"}},
		{"QSFP28 flat", lower(0x11, 0x08, 0x04), []string{"upper page 00h"}},
		{"OSFP paged", lower(0x19, 0x50, 0x00), []string{"upper page 00h", "upper page 01h", "upper page 02h", "upper page 11h"}},
		{"QSFP-DD flat", lower(0x18, 0x40, 0x80), []string{"upper page 00h"}},
		{"SFP with diagnostics", sfp, []string{"A2h lower page 00h"}},
		{"unknown", lower(0x00), nil},
		{"short", []byte{0x11}, nil},
	}
	for _, tc := range cases {
		if d := cmp.Diff(tc.want, names(sysfs.ModuleReadPlan(tc.lower))); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}

func TestParseModuleEEPROMReply(t *testing.T) {
	data := []byte{0x11, 0x08, 0x00, 0x01, 0x02}
	attr := make([]byte, 4+len(data))
	binary.NativeEndian.PutUint16(attr[0:], uint16(len(attr)))
	binary.NativeEndian.PutUint16(attr[2:], 7) // ETHTOOL_A_MODULE_EEPROM_DATA
	copy(attr[4:], data)
	reply := append([]byte{32, 1, 0, 0}, attr...)
	got, err := sysfs.ParseModuleEEPROMReply(reply)
	if err != nil || !cmp.Equal(got, data) {
		t.Errorf("ParseModuleEEPROMReply = %x, %v; want %x", got, err, data)
	}
	for _, bad := range [][]byte{nil, {32, 1}, {32, 1, 0, 0}, {32, 1, 0, 0, 0xff, 0x00, 7, 0}} {
		if _, err := sysfs.ParseModuleEEPROMReply(bad); err == nil {
			t.Errorf("reply %x: no error", bad)
		}
	}
}

// FuzzDecodeTransceiver: any bytes, cut into any half pages, decode or
// fail with an error; never a panic.
func FuzzDecodeTransceiver(f *testing.F) {
	for _, m := range []sysfs.ModuleEEPROM{
		sysfstest.QSFP28(sysfstest.ModuleID{}, sysfstest.MMA1B00Readings(), sysfstest.MMA1B00Limits),
		sysfstest.OSFP(sysfstest.ModuleID{}, [2]byte{1, 2}, sysfstest.MMA4Z00Readings(40), sysfstest.MMA4Z00Limits),
		sysfstest.QSFP28DAC(sysfstest.ModuleID{}), sfpPages(0x68),
	} {
		var flat []byte
		for _, p := range m.Pages {
			b, _ := hex.DecodeString(p.Data)
			flat = append(flat, b...)
		}
		f.Add(flat, uint8(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, layout uint8) {
		pages := sysfs.IoctlPages(uint32(layout%5), data)
		for i := range pages { // the plan's pages, whatever the lower page says
			if i > 0 && len(data) > 0 {
				pages[i].Page = data[i%len(data)] & 0x13
			}
		}
		m := sysfs.ModuleEEPROM{Pages: pages}
		_, _ = sysfs.DecodeTransceiver(m)
		if len(data) > 0 {
			_ = sysfs.ModuleReadPlan(data)
		}
		_, _ = sysfs.ParseModuleEEPROMReply(data)
		// A page whose hex is cut short or garbled is an error too.
		if len(pages) > 0 {
			pages[0].Data = pages[0].Data[:len(pages[0].Data)/2] + "g"
			_, _ = sysfs.DecodeTransceiver(sysfs.ModuleEEPROM{Pages: pages})
		}
	})
}

// Read through the ioctl (a kernel before 5.13), a CMIS module has no page
// 11h: its module-level monitors and thresholds are decoded, its lanes are
// not; read through netlink, a missing page 11h is an error.
func TestDecodeCMISThroughIoctl(t *testing.T) {
	m := sysfstest.OSFP(sysfstest.ModuleID{Vendor: "NVIDIA"}, [2]byte{46, 120}, sysfstest.MMA4Z00Readings(50), sysfstest.MMA4Z00Limits)
	m.Pages = m.Pages[:4] // no page 11h
	if _, err := sysfs.DecodeTransceiver(m); err == nil || !strings.Contains(err.Error(), "upper page 11h: not read") {
		t.Errorf("netlink without page 11h: %v, want an error naming the page", err)
	}
	m.Source = "ioctl"
	got, err := sysfs.DecodeTransceiver(m)
	if err != nil || got.Lanes != nil || got.Temp == nil || got.Thresholds == nil {
		t.Errorf("ioctl CMIS: %+v, %v; want module monitors and thresholds, no lanes", got, err)
	}
}

// A redacted snapshot keeps a module's make and part but replaces its
// serial, where each specification puts it; the rest decodes unchanged.
func TestReplaceSerial(t *testing.T) {
	for _, tc := range []struct {
		name, serial string
		m            sysfs.ModuleEEPROM
	}{
		{"SFF-8636 DAC", "MT1626VS04529", sysfstest.QSFP28DAC(sysfstest.ModuleID{Vendor: "Mellanox", Part: "MCP1600-C003", Rev: "A2", Serial: "MT1626VS04529"})},
		{"CMIS OSFP", "MT2410FT09876", sysfstest.OSFP(sysfstest.ModuleID{Vendor: "NVIDIA", Part: "MMA4Z00-NS", Rev: "A5", Serial: "MT2410FT09876"},
			[2]byte{46, 120}, sysfstest.MMA4Z00Readings(40), sysfstest.MMA4Z00Limits)},
		{"SFF-8472 SFP", "AQ70P4U", sfpPages(0x68)},
	} {
		before, err := sysfs.DecodeTransceiver(tc.m)
		if err != nil || before.Serial != tc.serial {
			t.Fatalf("%s: serial %q before, %v", tc.name, before.Serial, err)
		}
		var asked string
		if !tc.m.ReplaceSerial(func(sn string) string { asked = sn; return "SN0001" }) {
			t.Fatalf("%s: no serial replaced", tc.name)
		}
		after, err := sysfs.DecodeTransceiver(tc.m)
		if err != nil {
			t.Fatal(err)
		}
		if asked != tc.serial || after.Serial != "SN0001" {
			t.Errorf("%s: asked for %q, serial now %q", tc.name, asked, after.Serial)
		}
		before.Serial, after.Serial = "", ""
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("%s: more than the serial changed (-before +after):\n%s", tc.name, diff)
		}
	}
	unknown := sysfs.ModuleEEPROM{Pages: []sysfs.ModulePage{sysfs.NewModulePage(0x50, 0, 0, 0, make([]byte, 128))}}
	if unknown.ReplaceSerial(func(string) string { return "x" }) {
		t.Error("a module of unknown identifier had a serial replaced")
	}
}
