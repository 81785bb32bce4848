package sysfs

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"strings"
)

// Where the IOMMU shows itself (drivers/iommu/iommu-sysfs.c, iommu.c):
// every IOMMU unit registers in /sys/class/iommu (Intel VT-d "dmar0",
// AMD-Vi "ivhd0", Arm SMMUv3 "smmu3.0x…", virtio-iommu in a guest); every
// device it translates has an iommu_group link; each group says its
// default domain type in type ("identity" = passthrough, "DMA" or
// "DMA-FQ" = translated, "blocked", "unmanaged" = owned by VFIO).
const (
	IOMMUClassDir  = "/sys/class/iommu"
	IOMMUGroupsDir = "/sys/kernel/iommu_groups"
	ProcCmdline    = "/proc/cmdline"
	ProcCPUInfo    = "/proc/cpuinfo"
	DMIDir         = "/sys/class/dmi/id"
	NVIDIAVersion  = "/proc/driver/nvidia/version"
)

// IOMMUState is what the host says of its IOMMU.
type IOMMUState struct {
	Units    []string // /sys/class/iommu entries
	UnitsErr error    // the class could not be listed (not-exist: no IOMMU registered)
	Cmdline  string   // /proc/cmdline, "" when unreadable
	CmdErr   error
	// Params are the IOMMU parameters of the command line, in order:
	// intel_iommu=, amd_iommu=, iommu=, iommu.passthrough=, iommu.strict=.
	Params []string
}

// iommuParams are the kernel parameters that decide the IOMMU's mode
// (Documentation/admin-guide/kernel-parameters.txt).
var iommuParams = []string{"intel_iommu=", "amd_iommu=", "iommu=", "iommu.passthrough=", "iommu.strict=", "iommu_pt"}

// ReadIOMMU reads the IOMMU units and the command line's IOMMU parameters.
func (h *Host) ReadIOMMU() IOMMUState {
	var s IOMMUState
	s.Units, s.UnitsErr = h.ReadDir(IOMMUClassDir)
	data, err := h.ReadFile(ProcCmdline)
	if err != nil {
		s.CmdErr = err
		return s
	}
	s.Cmdline = strings.TrimSpace(string(data))
	for _, f := range strings.Fields(s.Cmdline) {
		for _, p := range iommuParams {
			if strings.HasPrefix(f, p) {
				s.Params = append(s.Params, f)
			}
		}
	}
	return s
}

// Param returns the last value of a command-line parameter ("iommu" for
// iommu=pt) — the kernel lets a later one override an earlier one.
func (s IOMMUState) Param(name string) (string, bool) {
	val, ok := "", false
	for _, p := range s.Params {
		if v, found := strings.CutPrefix(p, name+"="); found {
			val, ok = v, true
		}
	}
	return val, ok
}

// IOMMUGroup is a device's IOMMU group and its default domain type.
type IOMMUGroup struct {
	ID      string // "" when the device has no group (not translated)
	Type    string // "identity", "DMA", "DMA-FQ", …; "" when unreadable
	TypeErr error
}

// IOMMUGroupOf reads a PCI function's iommu_group link and its group's type.
// No link is no group: the device is not behind an IOMMU.
func (h *Host) IOMMUGroupOf(addr string) (IOMMUGroup, error) {
	id, err := h.LinkBase(path.Join(PCIDevicesDir, addr, "iommu_group"))
	if err != nil {
		if IsNotExist(err) {
			return IOMMUGroup{}, nil
		}
		return IOMMUGroup{}, err
	}
	g := IOMMUGroup{ID: id}
	g.Type, g.TypeErr = h.ReadAttr(path.Join(IOMMUGroupsDir, id, "type"))
	return g, g.TypeErr
}

// Virtualization is what tells a guest from bare metal: the CPU's
// hypervisor flag (set by every hypervisor that follows the CPUID
// convention: KVM, Hyper-V, VMware, Xen HVM) and the DMI system vendor.
type Virtualization struct {
	HypervisorFlag bool
	CPUInfoErr     error
	SysVendor      string // /sys/class/dmi/id/sys_vendor: "QEMU", "Microsoft Corporation", …
	ProductName    string
}

// Guest reports whether the host is a virtual machine.
func (v Virtualization) Guest() bool { return v.HypervisorFlag }

// ReadVirtualization reads the hypervisor flag and the DMI identity.
func (h *Host) ReadVirtualization() Virtualization {
	var v Virtualization
	data, err := h.ReadFile(ProcCPUInfo)
	if err != nil {
		v.CPUInfoErr = err
	} else {
		v.HypervisorFlag = cpuFlag(data, "hypervisor")
	}
	v.SysVendor, _ = h.ReadAttr(path.Join(DMIDir, "sys_vendor"))
	v.ProductName, _ = h.ReadAttr(path.Join(DMIDir, "product_name"))
	return v
}

// cpuFlag reports whether the first processor's flags line (x86 "flags",
// arm64 "Features") lists flag.
func cpuFlag(data []byte, flag string) bool {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		if k = strings.TrimSpace(k); k == "flags" || k == "Features" {
			for _, f := range strings.Fields(v) {
				if f == flag {
					return true
				}
			}
			return false
		}
	}
	return false
}

// NVIDIADriver is the loaded NVIDIA kernel driver as
// /proc/driver/nvidia/version names it: "NVRM version: NVIDIA UNIX Open
// Kernel Module for x86_64  550.90.07  Release Build …" for the open
// kernel modules, "NVRM version: NVIDIA UNIX x86_64 Kernel Module
// 535.154.05  …" for the proprietary ones.
type NVIDIADriver struct {
	Line    string // the NVRM line
	Version string // "550.90.07"
	Major   int    // 550
	Open    bool
}

// ReadNVIDIADriver reads /proc/driver/nvidia/version; not-exist means the
// nvidia module is not loaded.
func (h *Host) ReadNVIDIADriver() (NVIDIADriver, error) {
	data, err := h.ReadFile(NVIDIAVersion)
	if err != nil {
		return NVIDIADriver{}, err
	}
	return ParseNVIDIAVersion(data), nil
}

// ParseNVIDIAVersion parses the version file; a file without an NVRM
// line leaves the driver's version unknown (Major 0).
func ParseNVIDIAVersion(data []byte) NVIDIADriver {
	var d NVIDIADriver
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(l, "NVRM version:") {
			continue
		}
		d.Line = trimForMsg(strings.TrimSpace(l))
		d.Open = strings.Contains(l, "Open Kernel Module")
		for _, f := range strings.Fields(l) {
			if maj, ok := driverMajor(f); ok {
				d.Version, d.Major = f, maj
				break
			}
		}
		break
	}
	return d
}

// driverMajor parses "550.90.07" into 550: digits, a dot, more.
func driverMajor(f string) (int, bool) {
	head, tail, ok := strings.Cut(f, ".")
	if !ok || head == "" || tail == "" || len(head) > 4 || (head[0] == '0' && len(head) > 1) || !isDigits(head) ||
		!isDigits(strings.ReplaceAll(tail, ".", "")) {
		return 0, false
	}
	n := 0
	for _, c := range head {
		n = n*10 + int(c-'0')
	}
	return n, true
}

// KernelConfig reads one option of the running kernel's build
// configuration from /boot/config-<release>, the file distributions ship:
// "y", "m", "" when it is not set. ok is false when the file is unreadable.
func (h *Host) KernelConfig(release, option string) (string, bool, error) {
	if release == "" || strings.ContainsAny(release, "/\x00") || release == "." || release == ".." {
		return "", false, fmt.Errorf("kernel release %q cannot name a /boot/config file", release)
	}
	p := "/boot/config-" + release
	data, err := h.ReadFile(p)
	if err != nil {
		return "", false, err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, found := strings.CutPrefix(l, option+"="); found {
			return strings.Trim(v, `"`), true, nil
		}
	}
	return "", true, nil
}
