package sysfs

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// PCIFunction is one PCI function as /sys/bus/pci/devices/<addr> shows it.
// Fields that could not be read stay zero and the reason is in Problems.
type PCIFunction struct {
	Address   string // "0000:3b:00.0"
	SysPath   string // resolved /sys/devices/... path
	Vendor    uint16
	Device    uint16
	Class     uint32 // 0x020000 Ethernet, 0x020700 InfiniBand
	SubVendor uint16
	SubDevice uint16
	Driver    string // bound driver name, "" when none is bound
	NUMANode  int    // -1 when the platform has none
	HasNUMA   bool
	PhysFn    string // PF address when this is an SR-IOV VF
	NumVFs    int
	TotalVFs  int
	RDMADevs  []string // names under <fn>/infiniband
	Netdevs   []string // names under <fn>/net
	Problems  []string // fields that could not be read, with the reason
}

// PCIDevicesDir is where the kernel lists every PCI function.
const PCIDevicesDir = "/sys/bus/pci/devices"

// PCIFunctions lists every PCI function of the host. A missing bus directory
// is an error (sysfs not mounted or not captured); unreadable attributes of
// one function are recorded in its Problems and do not stop the listing.
func (h *Host) PCIFunctions() ([]PCIFunction, error) {
	names, err := h.ReadDir(PCIDevicesDir)
	if err != nil {
		return nil, err
	}
	fns := make([]PCIFunction, len(names))
	parallel(len(names), func(i int) { fns[i] = h.PCIFunction(names[i]) })
	return fns, nil
}

// PCIFunction reads one function by its address.
func (h *Host) PCIFunction(addr string) PCIFunction {
	dir := path.Join(PCIDevicesDir, addr)
	fn := PCIFunction{Address: addr, NUMANode: -1}
	if p, err := h.ResolveLink(dir); err == nil {
		fn.SysPath = p
	} else {
		fn.SysPath = dir
	}
	prob := func(err error) { fn.Problems = append(fn.Problems, err.Error()) }
	readHex := func(name string, bits int) uint64 {
		s, err := h.ReadAttr(path.Join(dir, name))
		if err != nil {
			prob(err)
			return 0
		}
		v, err := ParseHex(s, bits)
		if err != nil {
			prob(fmt.Errorf("parse %s: %w", h.Display(path.Join(dir, name)), err))
		}
		return v
	}
	fn.Vendor = uint16(readHex("vendor", 16))
	fn.Device = uint16(readHex("device", 16))
	fn.Class = uint32(readHex("class", 24))
	if ok, _ := h.Exists(path.Join(dir, "subsystem_vendor")); ok {
		fn.SubVendor = uint16(readHex("subsystem_vendor", 16))
		fn.SubDevice = uint16(readHex("subsystem_device", 16))
	}
	if d, err := h.LinkBase(path.Join(dir, "driver")); err == nil {
		fn.Driver = d
	} else if !IsNotExist(err) {
		prob(err)
	}
	if s, err := h.ReadAttr(path.Join(dir, "numa_node")); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
			fn.NUMANode, fn.HasNUMA = n, n >= 0
		}
	}
	if pf, err := h.LinkBase(path.Join(dir, "physfn")); err == nil {
		fn.PhysFn = pf
	}
	if s, err := h.ReadAttr(path.Join(dir, "sriov_numvfs")); err == nil {
		fn.NumVFs, _ = strconv.Atoi(strings.TrimSpace(s))
	}
	if s, err := h.ReadAttr(path.Join(dir, "sriov_totalvfs")); err == nil {
		fn.TotalVFs, _ = strconv.Atoi(strings.TrimSpace(s))
	}
	fn.RDMADevs, _ = h.ReadDir(path.Join(dir, "infiniband"))
	fn.Netdevs, _ = h.ReadDir(path.Join(dir, "net"))
	return fn
}

// ParseHex parses a sysfs hex attribute such as "0x15b3" that must fit in bits.
func ParseHex(s string, bits int) (uint64, error) {
	s = strings.TrimSpace(s)
	t := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	if t == "" || len(t) > 16 {
		return 0, fmt.Errorf("%q is not a hex number", s)
	}
	v, err := strconv.ParseUint(t, 16, bits)
	if err != nil {
		return 0, fmt.Errorf("%q is not a %d-bit hex number", s, bits)
	}
	return v, nil
}
