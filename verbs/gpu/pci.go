package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// ParsePCIAddr normalises a PCI bus id as drivers print it —
// "0000:3B:00.0", NVIDIA's "00000000:3B:00.0", or without a domain
// "3b:00.0" — to sysfs' form, "0000:3b:00.0".
func ParsePCIAddr(s string) (string, error) {
	s = strings.TrimSpace(s)
	parts := strings.Split(s, ":")
	if len(parts) == 2 {
		parts = append([]string{"0"}, parts...)
	}
	if len(parts) != 3 {
		return "", fmt.Errorf("PCI bus id %q: want [domain:]bus:device.function", s)
	}
	devFn := strings.Split(parts[2], ".")
	if len(devFn) != 2 {
		return "", fmt.Errorf("PCI bus id %q: no .function", s)
	}
	fields := []struct {
		text string
		max  uint64
		what string
	}{{parts[0], 0xffffffff, "domain"}, {parts[1], 0xff, "bus"}, {devFn[0], 0x1f, "device"}, {devFn[1], 7, "function"}}
	var v [4]uint64
	for i, f := range fields {
		n, err := strconv.ParseUint(f.text, 16, 64)
		if err != nil || f.text == "" || n > f.max {
			return "", fmt.Errorf("PCI bus id %q: bad %s %q", s, f.what, f.text)
		}
		v[i] = n
	}
	return fmt.Sprintf("%04x:%02x:%02x.%d", v[0], v[1], v[2], v[3]), nil
}
