package sysfs

import (
	"strconv"
	"testing"
)

func TestParseRoCETOS(t *testing.T) {
	for in, want := range map[string]int{"0": 0, "106\n": 106, " 255 ": 255, "256": -1, "-1": -1, "0x6a": -1, "": -1, "\x00\xff": -1} {
		got, err := ParseRoCETOS(in)
		if want < 0 {
			if err == nil {
				t.Errorf("ParseRoCETOS(%q) = %d, want an error", in, got)
			}
			continue
		}
		if err != nil || int(got) != want {
			t.Errorf("ParseRoCETOS(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestRoCETOSPath(t *testing.T) {
	if got, want := RoCETOSPath("mlx5_0", 2), "/sys/kernel/config/rdma_cm/mlx5_0/ports/2/default_roce_tos"; got != want {
		t.Errorf("RoCETOSPath = %q, want %q", got, want)
	}
}

func FuzzParseRoCETOS(f *testing.F) {
	f.Add("106")
	f.Add("0\n")
	f.Add("\x00\xff")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRoCETOS(s)
		if err != nil {
			return
		}
		if back, err := ParseRoCETOS(strconv.Itoa(int(v))); err != nil || back != v {
			t.Fatalf("%q parsed as %d, which does not read back (%d, %v)", s, v, back, err)
		}
	})
}
