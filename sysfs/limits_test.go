package sysfs

import (
	"strings"
	"testing"
)

func TestParseUID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
		ok   bool
	}{
		{"Name:\tx\nUid:\t1000\t1001\t1002\t1003\nGid:\t0\t0\t0\t0\n", 1000, true},
		{"Uid:\t0\t0\t0\t0\n", 0, true},
		{"Name:\tx\n", 0, false},
		{"Uid:\n", 0, false},
		{"Uid:\t-1\t0\t0\t0\n", 0, false},
		{"Uid:\t4294967296\t0\n", 0, false},
	} {
		got, err := ParseUID([]byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseUID(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParseCgroupPath(t *testing.T) {
	for in, want := range map[string]string{
		"0::/system.slice/slurmd.service\n":                               "/system.slice/slurmd.service",
		"12:pids:/user.slice\n1:name=systemd:/user.slice/session-4.scope": "/user.slice/session-4.scope",
		"1:name=systemd:/a\n0::/b\n":                                      "/b",
		"garbage\n\x00:\xff":                                              "",
		"":                                                                "",
	} {
		if got := ParseCgroupPath([]byte(in)); got != want {
			t.Errorf("ParseCgroupPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseUID(f *testing.F) {
	f.Add([]byte("Uid:\t1000\t1000\t1000\t1000\n"))
	f.Add([]byte("Uid:\n"))
	f.Add([]byte("Uid:\t\xff99999999999\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := ParseUID(data); err == nil && !strings.Contains(string(data), "Uid:") {
			t.Fatal("a user ID without a Uid line")
		}
	})
}

func FuzzParseCgroupPath(f *testing.F) {
	f.Add([]byte("0::/system.slice/slurmd.service\n"))
	f.Add([]byte("1:name=systemd:/user.slice/session-4.scope\n"))
	f.Add([]byte("::\n0:::\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if p := ParseCgroupPath(data); p != "" && !strings.HasPrefix(p, "/") {
			t.Fatalf("cgroup path %q is not absolute", p)
		}
	})
}
