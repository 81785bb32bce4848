package sysfs

import (
	"testing"
	"time"
)

func TestBootIDAndUptimeThroughTheRoot(t *testing.T) {
	dir := writeRoot(t, map[string]string{
		"proc/sys/kernel/random/boot_id": "5E2B1C4A-9D3F-4E7A-8B6C-0F1E2D3C4B5A\n",
		"proc/uptime":                    "86400.25 170000.00\n",
	}, nil)
	h, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	id, err := h.BootID()
	if err != nil || id != "5e2b1c4a-9d3f-4e7a-8b6c-0f1e2d3c4b5a" {
		t.Fatalf("BootID = %q, %v", id, err)
	}
	up, err := h.Uptime()
	if err != nil || up != 86400*time.Second+250*time.Millisecond {
		t.Fatalf("Uptime = %v, %v", up, err)
	}
}

func TestBootIDAndUptimeRefuseWhatTheKernelNeverWrites(t *testing.T) {
	for _, s := range []string{"", "not-a-uuid", "5e2b1c4a-9d3f-4e7a-8b6c-0f1e2d3c4b5", "5e2b1c4a+9d3f-4e7a-8b6c-0f1e2d3c4b5a",
		"5e2b1c4a-9d3f-4e7a-8b6c-0f1e2d3c4b5g", "\x00\x01"} {
		if id, err := ParseBootID(s); err == nil {
			t.Errorf("ParseBootID(%q) = %q, want an error", s, id)
		}
	}
	for _, s := range []string{"", "abc 1", "-5 1", "NaN 1", "1e300 1", "+Inf"} {
		if d, err := ParseUptime(s); err == nil {
			t.Errorf("ParseUptime(%q) = %v, want an error", s, d)
		}
	}
	dir := writeRoot(t, map[string]string{"proc/uptime": "garbage\n"}, nil)
	h, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.BootID(); !IsNotExist(err) {
		t.Errorf("missing boot_id: %v, want not-exist", err)
	}
	if _, err := h.Uptime(); err == nil || err.Error() != `read `+dir+`/proc/uptime: uptime "garbage" is not a number of seconds since boot` {
		t.Errorf("garbage uptime: %v", err)
	}
}
