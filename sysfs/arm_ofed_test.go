package sysfs_test

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestParseOFEDTrafficClass(t *testing.T) {
	for _, tc := range []struct {
		in     string
		global bool
		tclass uint8
		other  int
		bad    bool
	}{
		{in: "Global tclass=106\n", global: true, tclass: 106},
		{in: "", global: false},
		{in: "Global tclass=-1\n"},
		{in: "Global tclass=106\ntclass=96,src_ip=192.0.2.1,dst_ip=192.0.2.2\n", global: true, tclass: 106, other: 1},
		{in: "Global tclass=256\n", bad: true},
		{in: "Global tclass=abc\n", bad: true},
	} {
		got, err := sysfs.ParseOFEDTrafficClass(tc.in)
		if (err != nil) != tc.bad {
			t.Errorf("%q: error %v, want error %v", tc.in, err, tc.bad)
			continue
		}
		if got.Global != tc.global || got.TClass != tc.tclass || len(got.Other) != tc.other {
			t.Errorf("%q = %+v", tc.in, got)
		}
	}
}

func TestLDCacheHostABI(t *testing.T) {
	const libc6 = sysfs.LDFlagELFLibc6
	arm := []sysfstest.LDEntry{
		{Name: "libc.so.6", Path: "/lib/aarch64-linux-gnu/libc.so.6", Flags: libc6 | sysfs.LDFlagAArch64Lib64},
		{Name: "libibverbs.so.1", Path: "/lib/aarch64-linux-gnu/libibverbs.so.1", Flags: libc6 | sysfs.LDFlagAArch64Lib64},
		{Name: "libibverbs.so.1", Path: "/lib/arm-linux-gnueabihf/libibverbs.so.1", Flags: libc6 | 0x0900},
	}
	for _, tc := range []struct {
		name      string
		entries   []sysfstest.LDEntry
		preferred int32
		want      int32
	}{
		{"an aarch64 cache judged on x86-64", arm, sysfs.LDFlagX8664Lib64, sysfs.LDFlagAArch64Lib64},
		{"an aarch64 cache judged on aarch64", arm, sysfs.LDFlagAArch64Lib64, sysfs.LDFlagAArch64Lib64},
		{"no libc: the most common ABI", arm[1:2], sysfs.LDFlagX8664Lib64, sysfs.LDFlagAArch64Lib64},
		{"an x86-64 cache", ldEntries, sysfs.LDFlagX8664Lib64, sysfs.LDFlagX8664Lib64},
		{"an x86-64 cache with aarch64 cross libraries, judged on aarch64", ldEntries, sysfs.LDFlagAArch64Lib64, sysfs.LDFlagX8664Lib64},
		{"an empty cache", nil, sysfs.LDFlagX8664Lib64, sysfs.LDFlagX8664Lib64},
	} {
		c, err := sysfs.ParseLDCache(sysfstest.EncodeLDCache(tc.entries, ""))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.HostABI(tc.preferred); got != tc.want {
			t.Errorf("%s: HostABI = %#x, want %#x", tc.name, got, tc.want)
		}
		if tc.want == sysfs.LDFlagAArch64Lib64 {
			if got := c.Lookup("libibverbs.so.1", c.HostABI(tc.preferred)); len(got) != 1 || got[0].Path != "/lib/aarch64-linux-gnu/libibverbs.so.1" {
				t.Errorf("%s: lookup = %+v", tc.name, got)
			}
		}
	}
}
