package sysfs

import (
	"path"
	"strings"
)

// UverbsClass lists the uverbs character devices, one per RDMA device the
// kernel registered. The class is not network-namespaced, unlike
// /sys/class/infiniband: from a namespace that cannot see a device
// (exclusive RDMA netns mode) its uverbsN still names it.
const UverbsClass = "/sys/class/infiniband_verbs"

// UverbsDevice is one /sys/class/infiniband_verbs/uverbsN.
type UverbsDevice struct {
	Name    string // "uverbs0"
	IBDev   string // the RDMA device it belongs to
	PCIAddr string // the PCI function it sits under, "" for software devices
}

// UverbsDevices lists the uverbs class. A missing class is an empty list
// and the not-exist error.
func (h *Host) UverbsDevices() ([]UverbsDevice, error) {
	names, err := h.ReadDir(UverbsClass)
	if err != nil {
		return nil, err
	}
	var out []UverbsDevice
	for _, n := range names {
		if !strings.HasPrefix(n, "uverbs") {
			continue // abi_version
		}
		u := UverbsDevice{Name: n}
		if s, err := h.ReadAttr(path.Join(UverbsClass, n, "ibdev")); err == nil {
			u.IBDev = strings.TrimSpace(s)
		}
		// …/<PCI function>/infiniband_verbs/uverbsN
		if p, err := h.ResolveLink(path.Join(UverbsClass, n)); err == nil && path.Base(path.Dir(p)) == "infiniband_verbs" {
			if fn := path.Base(path.Dir(path.Dir(p))); isPCIAddr(fn) {
				u.PCIAddr = fn
			}
		}
		out = append(out, u)
	}
	return out, nil
}

// isPCIAddr tells a PCI function's name ("0000:3b:00.0") from others.
func isPCIAddr(s string) bool {
	return len(s) == 12 && s[4] == ':' && s[7] == ':' && s[10] == '.'
}
