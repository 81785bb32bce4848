package sysfs

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

const sampleLimits = `Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max stack size            8388608              unlimited            bytes     
Max locked memory         65536                65536                bytes     
Max nice priority         0                    0                    
Max realtime timeout      unlimited            unlimited            us        
`

func TestParseProcLimits(t *testing.T) {
	lim, err := ParseProcLimits([]byte(sampleLimits))
	if err != nil {
		t.Fatal(err)
	}
	if got := lim["Max locked memory"]; got != (Rlimit{65536, 65536}) {
		t.Errorf("memlock = %+v", got)
	}
	if got := lim["Max stack size"]; got != (Rlimit{8388608, Unlimited}) {
		t.Errorf("stack = %+v", got)
	}
	if got := lim["Max nice priority"]; got != (Rlimit{0, 0}) {
		t.Errorf("nice (no unit) = %+v", got)
	}
	for _, bad := range []string{"", "Limit Soft Hard Units\n", "Max locked memory lots lots bytes\n", "Max locked memory 99999999999999999999999 1 bytes\n"} {
		if _, err := ParseProcLimits([]byte(bad)); err == nil {
			t.Errorf("ParseProcLimits(%q): no error", bad)
		}
	}
	// The running process's own file parses and has the memlock line.
	if data, err := os.ReadFile("/proc/self/limits"); err == nil {
		lim, err := ParseProcLimits(data)
		if err != nil {
			t.Fatalf("this machine's /proc/self/limits: %v", err)
		}
		if _, ok := lim["Max locked memory"]; !ok {
			t.Error("this machine's /proc/self/limits: no Max locked memory")
		}
	}
}

func TestParseCapEff(t *testing.T) {
	c, err := ParseCapEff([]byte("Name:\tx\nCapPrm:\t0000000000004000\nCapEff:\t0000000000004000\n"))
	if err != nil || c&(1<<CapIPCLock) == 0 {
		t.Fatalf("CapEff = %x, %v; want bit 14", c, err)
	}
	if _, err := ParseCapEff([]byte("CapEff:\tzz\n")); err == nil {
		t.Error("bad hex accepted")
	}
	if _, err := ParseCapEff([]byte("Name:\tx\n")); err == nil {
		t.Error("missing CapEff accepted")
	}
}

func TestParseLimitsConf(t *testing.T) {
	e, probs := ParseLimitsConf([]byte("# comment\n*  soft memlock 65536 # trailing\n@rdma - memlock unlimited\nbroken line\n\nroot hard MEMLOCK infinity\n"))
	if len(e) != 3 || len(probs) != 1 {
		t.Fatalf("entries %+v problems %v: want 3 and 1", e, probs)
	}
	if e[0].Domain != "*" || e[0].Type != "soft" || e[0].Value != "65536" || e[0].Line != 2 {
		t.Errorf("first entry %+v", e[0])
	}
	if e[2].Item != "memlock" {
		t.Errorf("item is not lower-cased: %q", e[2].Item)
	}
	for in, want := range map[string]uint64{"64": 65536, "unlimited": Unlimited, "-1": Unlimited, "infinity": Unlimited} {
		if got, err := ParseLimitsMemlock(in); err != nil || got != want {
			t.Errorf("ParseLimitsMemlock(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	// pam_limits reads the value with strtoull and ignores what follows the
	// digits: "64M" is 64 KiB, not 64 MiB; a value without digits is refused.
	if got, err := ParseLimitsMemlock("64M"); err != nil || got != 64<<10 {
		t.Errorf("ParseLimitsMemlock(64M) = %d, %v; want 64 KiB, as pam_limits reads it", got, err)
	}
	if _, err := ParseLimitsMemlock("lots"); err == nil {
		t.Error("a value without digits accepted")
	}
}

func TestParseSystemd(t *testing.T) {
	v, line, ok := ParseSystemdConf([]byte("[Manager]\n#DefaultLimitMEMLOCK=8M\nDefaultLimitMEMLOCK=64M\n[Other]\nDefaultLimitMEMLOCK=1\n"), "Manager", "DefaultLimitMEMLOCK")
	if !ok || v != "64M" || line != 3 {
		t.Fatalf("got %q line %d ok %v", v, line, ok)
	}
	cases := map[string]Rlimit{"infinity": {Unlimited, Unlimited}, "64M": {64 << 20, 64 << 20}, "8K:infinity": {8 << 10, Unlimited}, "65536": {65536, 65536}, "1G": {1 << 30, 1 << 30}}
	for in, want := range cases {
		if got, err := ParseSystemdLimit(in); err != nil || got != want {
			t.Errorf("ParseSystemdLimit(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "16E", "1:2:3"} {
		if _, err := ParseSystemdLimit(bad); err == nil {
			t.Errorf("ParseSystemdLimit(%q): no error", bad)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for in, want := range map[uint64]string{65536: "64 KiB", 8 << 20: "8 MiB", Unlimited: "unlimited", 1000: "1000 bytes", 3 << 29: "1.5 GiB"} {
		if got := FormatBytes(in); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestParseCounter(t *testing.T) {
	if v, err := ParseCounter("4294967295\n"); err != nil || v != 4294967295 {
		t.Errorf("got %d, %v", v, err)
	}
	if _, err := ParseCounter("N/A (no PMA)\n"); !errors.Is(err, ErrNoPMA) {
		t.Errorf("N/A: err %v, want ErrNoPMA", err)
	}
	for _, bad := range []string{"", "-1", "0x10", "18446744073709551616", "\x00\x01"} {
		if _, err := ParseCounter(bad); err == nil {
			t.Errorf("ParseCounter(%q): no error", bad)
		}
	}
}

func TestParseRate(t *testing.T) {
	cases := map[string]PortRate{
		"100 Gb/sec (4X EDR)": {100, "4X", "EDR"},
		"2.5 Gb/sec (1X SDR)": {2.5, "1X", "SDR"},
		"200 Gb/sec (2X HDR)": {200, "2X", "HDR"},
		"10 Gb/sec (4X)":      {10, "4X", ""},
		"25 Gb/sec":           {25, "", ""},
	}
	for in, want := range cases {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "fast", "100 Mb/sec (4X EDR)", "100 Gb/sec (4X EDR", "100 Gb/sec (EDR)", "NaN Gb/sec", "-1 Gb/sec"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q): no error", bad)
		}
	}
}

// nla builds one netlink attribute, padded.
func nla(typ uint16, val []byte) []byte {
	b := make([]byte, (nlaHdrLen+len(val)+3)&^3)
	binary.NativeEndian.PutUint16(b, uint16(nlaHdrLen+len(val)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[nlaHdrLen:], val)
	return b
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// dcbReply builds the kernel's answer: dcbmsg, IFNAME, IEEE{PFC, APP_TABLE}, DCBX.
func dcbReply(pfcEn uint8, apps ...[4]byte) []byte {
	pfc := make([]byte, 136) // sizeof(struct ieee_pfc)
	pfc[0], pfc[1] = 8, pfcEn
	var table []byte
	for _, a := range apps {
		typ := uint16(dcbAttrIEEEApp)
		if a[0] == 255 {
			typ = dcbAttrDCBApp
		}
		table = append(table, nla(typ, a[:])...)
	}
	const nested = 1 << 15 // NLA_F_NESTED, set by nla_nest_start
	ieee := cat(nla(1, make([]byte, 80)) /* ETS */, nla(dcbAttrIEEEPFC, pfc), nla(dcbAttrIEEEAppTab|nested, table))
	return cat([]byte{0, dcbCmdIEEEGet, 0, 0}, nla(dcbAttrIfname, []byte("ens1f0np0\x00")), nla(dcbAttrIEEE|nested, ieee), nla(14, []byte{0x08}))
}

func app(sel, prio uint8, proto uint16) [4]byte {
	var a [4]byte
	a[0], a[1] = sel, prio
	binary.NativeEndian.PutUint16(a[2:], proto)
	return a
}

func TestParseDCBReply(t *testing.T) {
	d, err := ParseDCBReply(dcbReply(0x08, app(5, 3, 26), app(5, 6, 48), app(1, 3, 0x8915), app(255, 2, 10)))
	if err != nil {
		t.Fatal(err)
	}
	if d.PFCCap != 8 || d.PFCEn != 0x08 || d.Err != "" {
		t.Errorf("PFC = cap %d en %#x err %q", d.PFCCap, d.PFCEn, d.Err)
	}
	want := []DCBApp{{"dscp", 26, 3}, {"dscp", 48, 6}, {"ethertype", 0x8915, 3}, {"pcp", 10, 2}}
	if len(d.App) != len(want) {
		t.Fatalf("APP = %+v, want %+v", d.App, want)
	}
	for i := range want {
		if d.App[i] != want[i] {
			t.Errorf("APP[%d] = %+v, want %+v", i, d.App[i], want[i])
		}
	}
	if got := PFCPriorities(d.PFCEn); len(got) != 1 || got[0] != 3 {
		t.Errorf("PFCPriorities(%#x) = %v", d.PFCEn, got)
	}

	full := dcbReply(0x28)
	for _, n := range []int{0, 3, 8, 20, len(full) - 1} {
		if _, err := ParseDCBReply(full[:n]); err == nil && n < 24 {
			t.Errorf("reply cut to %d bytes: no error", n)
		}
	}
	wrongCmd := append([]byte(nil), full...)
	wrongCmd[1] = 0
	if _, err := ParseDCBReply(wrongCmd); err == nil {
		t.Error("reply to another command accepted")
	}
	shortPFC := cat([]byte{0, dcbCmdIEEEGet, 0, 0}, nla(dcbAttrIEEE, nla(dcbAttrIEEEPFC, []byte{8, 1})))
	if _, err := ParseDCBReply(shortPFC); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Errorf("short ieee_pfc: err %v", err)
	}
	noIEEE := cat([]byte{0, dcbCmdIEEEGet, 0, 0}, nla(dcbAttrIfname, []byte("x\x00")))
	if _, err := ParseDCBReply(noIEEE); err == nil {
		t.Error("reply without DCB_ATTR_IEEE accepted")
	}
}

func TestEncodeDCBRequest(t *testing.T) {
	b := encodeDCBRequest("eth0")
	if len(b)%4 != 0 || b[1] != dcbCmdIEEEGet {
		t.Fatalf("request % x: want 4-byte aligned with cmd %d", b, dcbCmdIEEEGet)
	}
	attrs, err := parseNLAttrs(b[dcbmsgLen:])
	if err != nil || len(attrs) != 1 || attrs[0].typ != dcbAttrIfname || string(attrs[0].val) != "eth0\x00" {
		t.Fatalf("attrs %+v, %v", attrs, err)
	}
}

func TestParseTrust(t *testing.T) {
	for in, want := range map[string]string{"dscp\n": "dscp", "pcp": "pcp", "Priority trust state: dscp": "dscp"} {
		if got, err := ParseTrust(in); err != nil || got != want {
			t.Errorf("ParseTrust(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseTrust("none"); err == nil {
		t.Error("ParseTrust(none): no error")
	}
}

// Fuzz targets: no input may panic, and what parses must be consistent.

func FuzzParseProcLimits(f *testing.F) {
	f.Add([]byte(sampleLimits))
	f.Add([]byte("Max locked memory unlimited unlimited bytes\n"))
	f.Add([]byte("Limit\n\x00\xff 1 2"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lim, err := ParseProcLimits(data)
		if err == nil && len(lim) == 0 {
			t.Fatal("no error and no limits")
		}
	})
}

func FuzzParseLimitsConf(f *testing.F) {
	f.Add([]byte("* soft memlock unlimited\n* hard memlock unlimited\n"))
	f.Add([]byte("@rdma - memlock 65536 # x\nbad\n"))
	f.Add([]byte("#\n\n\t\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, _ := ParseLimitsConf(data)
		for _, e := range entries {
			if e.NoLimits && e.Domain != "" && e.Type == "-" && e.Item == "" && e.Value == "" && e.Line >= 1 {
				continue // a "<domain> -" line
			}
			if e.Domain == "" || e.Item == "" || e.Value == "" || e.Line < 1 || e.NoLimits {
				t.Fatalf("incomplete entry %+v", e)
			}
			v, err := ParseLimitsMemlock(e.Value)
			if err == nil && v != Unlimited && v%1024 != 0 {
				t.Fatalf("%q → %d bytes: not whole KiB", e.Value, v)
			}
		}
	})
}

func FuzzParseSystemdLimit(f *testing.F) {
	for _, s := range []string{"infinity", "64M", "8K:infinity", "1E", "17E", "", ":", "9999999999999999999K"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ParseSystemdLimit(s)
		ParseSystemdConf([]byte(s), "Manager", "DefaultLimitMEMLOCK")
	})
}

func FuzzParseCounter(f *testing.F) {
	for _, s := range []string{"0\n", "4294967295", "N/A (no PMA)\n", "18446744073709551615", "-0", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseCounter(s)
		if err != nil {
			return
		}
		if back, err := ParseCounter(strconv.FormatUint(v, 10)); err != nil || back != v {
			t.Fatalf("%q → %d does not round-trip", s, v)
		}
	})
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"100 Gb/sec (4X EDR)", "2.5 Gb/sec (1X SDR)", "25 Gb/sec", "1 Gb/sec (X)", "0 Gb/sec ()"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err == nil && (r.Gbps < 0 || (r.Width != "" && !strings.HasSuffix(r.Width, "X"))) {
			t.Fatalf("%q → %+v", s, r)
		}
	})
}

func FuzzParseDCBReply(f *testing.F) {
	f.Add(dcbReply(0x08, app(5, 3, 26), app(255, 1, 1)))
	f.Add(dcbReply(0))
	f.Add([]byte{0, dcbCmdIEEEGet, 0, 0, 4, 0, 13, 0})
	f.Add([]byte{0, dcbCmdIEEEGet, 0, 0, 0xff, 0xff, 13, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDCBReply(b)
		if err == nil && len(d.App) > maxAppTableEntries {
			t.Fatalf("%d APP entries", len(d.App))
		}
	})
}
