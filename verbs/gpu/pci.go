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

// Nearest picks the GPU closest to a NIC in the PCIe tree. nicPath and
// gpuPaths are sysfs device paths with symlinks resolved
// (/sys/devices/pci0000:00/0000:00:01.0/0000:3b:00.0): the GPU sharing
// the most path elements with the NIC sits under the same switch or
// bridge. Ties go to the lower index; a GPU whose path is unknown ("")
// shares nothing. It returns the index into gpuPaths and how many levels
// below the root complex the two paths share (0: only the same root
// complex or none).
func Nearest(nicPath string, gpuPaths []string) (best, shared int) {
	nic := pathElems(nicPath)
	best, shared = 0, -1
	for i, g := range gpuPaths {
		n := 0
		if g != "" {
			ge := pathElems(g)
			for n < len(ge) && n < len(nic) && ge[n] == nic[n] {
				n++
			}
		}
		if n > shared {
			best, shared = i, n
		}
	}
	return best, max(shared-rootDepth(nic), 0)
}

// pathElems splits a device path into its elements after "devices".
func pathElems(p string) []string {
	var out []string
	seen := false
	for _, e := range strings.Split(p, "/") {
		if e == "" {
			continue
		}
		if !seen {
			seen = e == "devices"
			continue
		}
		out = append(out, e)
	}
	return out
}

// rootDepth is how many leading elements name the root complex
// ("pci0000:00"), so that sharing it alone counts as 0.
func rootDepth(elems []string) int {
	if len(elems) > 0 && strings.HasPrefix(elems[0], "pci") {
		return 1
	}
	return 0
}
