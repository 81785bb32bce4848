package sysfs

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"sync"
)

// GPU vendors and the PCI classes a GPU registers as: VGA (0x0300), 3D
// controller (0x0302: datacenter NVIDIA parts such as the H100 SXM),
// other display (0x0380), and processing accelerator (0x1200: AMD
// Instinct MI300X).
const (
	VendorNVIDIA = 0x10de
	VendorAMD    = 0x1002
)

var gpuClasses = map[uint32]bool{0x0300: true, 0x0302: true, 0x0380: true, 0x1200: true}

// IsGPU reports whether a PCI function is an NVIDIA or AMD GPU by its
// vendor and class. An NVIDIA or AMD function of another class (the HDMI
// audio function of a display card, a switch) is not.
func IsGPU(fn PCIFunction) bool {
	return (fn.Vendor == VendorNVIDIA || fn.Vendor == VendorAMD) && gpuClasses[fn.Class>>8]
}

// PCIRelation is how two PCI functions are connected, in the classes of
// `nvidia-smi topo -m`, nearest first.
type PCIRelation int

const (
	RelPIX     PCIRelation = iota // at most one PCIe switch between them
	RelPXB                        // several switches, not through the host bridge
	RelPHB                        // through one PCIe host bridge (root complex)
	RelNODE                       // across host bridges within one NUMA node
	RelSYS                        // across the interconnect between NUMA nodes (UPI, Infinity Fabric)
	RelUnknown                    // the paths could not be read
)

func (r PCIRelation) String() string {
	if r < 0 || r > RelUnknown {
		return "?"
	}
	return [...]string{"PIX", "PXB", "PHB", "NODE", "SYS", "?"}[r]
}

// Meaning is the class's meaning as nvidia-smi's legend words it.
func (r PCIRelation) Meaning() string {
	switch r {
	case RelPIX:
		return "at most a single PCIe switch"
	case RelPXB:
		return "multiple PCIe switches, not through the host bridge"
	case RelPHB:
		return "through a PCIe host bridge (the CPU's root complex)"
	case RelNODE:
		return "across PCIe host bridges within one NUMA node"
	case RelSYS:
		return "across the interconnect between NUMA nodes (sockets)"
	}
	return "unknown"
}

// PCITreePath is a function's place in the PCI tree, from its resolved
// /sys/devices path: the host bridge directory ("pci0000:17") and the
// bridges from the root port down, the function itself excluded.
type PCITreePath struct {
	HostBridge string
	Bridges    []string
	// HiddenBy is the device a paravirtual root bus hangs from, "" for a
	// bus below a host bridge: Hyper-V's pci-hyperv makes one root bus
	// per passed-through function below its VMBus device
	// (…/VMBUS:00/<instance GUID>/pci<domain>:00/<domain>:00:00.0), the
	// PCIe path above it being the hypervisor's, which the guest cannot see.
	HiddenBy string
}

// rootBusRE matches a PCI root bus directory: "pci0000:00", "pci0101:00".
var rootBusRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^pci[0-9a-f]{4,8}:[0-9a-f]{2}$`) })

// TreePathOf splits a resolved /sys/devices path. A path outside
// /sys/devices/pci* (a VMBus or platform device) has no PCI tree.
func TreePathOf(sysPath string) (PCITreePath, error) {
	rest, ok := strings.CutPrefix(path.Clean(sysPath), "/sys/devices/")
	if !ok {
		return PCITreePath{}, fmt.Errorf("%s is not below /sys/devices", sysPath)
	}
	parts := strings.Split(rest, "/")
	root := paravirtualRoot(parts)
	if root < 0 && (len(parts) < 2 || !strings.HasPrefix(parts[0], "pci")) {
		return PCITreePath{}, fmt.Errorf("%s is not below a PCI host bridge (/sys/devices/pciDDDD:BB) nor on a paravirtual root bus", sysPath)
	}
	p := PCITreePath{HostBridge: parts[0]}
	if root > 0 {
		p = PCITreePath{HostBridge: parts[root], HiddenBy: parts[root-1]}
		parts = parts[root:]
	}
	for _, el := range parts[1 : len(parts)-1] {
		if len(p.Bridges) >= maxPCIDepth {
			return p, fmt.Errorf("%s: deeper than %d bridges", sysPath, maxPCIDepth)
		}
		if IsPCIAddress(el) {
			p.Bridges = append(p.Bridges, el)
		}
	}
	return p, nil
}

// paravirtualRoot is the index in parts (a /sys/devices path split at
// "/") of a root bus that hangs from a device that is not a PCI function
// (a VMBus device), -1 when there is none. Intel VMD's root bus hangs from
// the VMD endpoint, a PCI function whose own path is seen: that one is no
// paravirtual root.
func paravirtualRoot(parts []string) int {
	for i := 1; i < len(parts)-1; i++ {
		if rootBusRE().MatchString(parts[i]) {
			if IsPCIAddress(parts[i-1]) || strings.HasPrefix(parts[0], "pci") {
				return -1
			}
			return i
		}
	}
	return -1
}

// HiddenPCIePath reports whether the PCIe path above fn is the
// hypervisor's, hidden from the guest, and names the bus and the device
// it hangs from ("pci0101:00 below VMBus device 00000100-0101-…").
func HiddenPCIePath(fn PCIFunction) (string, bool) {
	p, err := TreePathOf(fn.SysPath)
	if err != nil || p.HiddenBy == "" {
		return "", false
	}
	return p.HostBridge + " below " + p.HiddenBy, true
}

// Relation computes how a and b are connected from their resolved sysfs
// paths and NUMA nodes, the way nvidia-smi topo -m classifies them:
//   - different host bridges: SYS when their NUMA nodes differ, NODE when
//     they are the same (or when the platform reports none: one node);
//   - one host bridge but no bridge in common (different root ports): PHB;
//   - a bridge in common with at most one bridge below it on each side —
//     one switch's upstream port and a downstream port each: PIX;
//   - a bridge in common and more below it on either side: PXB.
//
// It returns the class and a sentence saying which bridges decided it.
func Relation(a, b PCIFunction) (PCIRelation, string) {
	pa, errA := TreePathOf(a.SysPath)
	pb, errB := TreePathOf(b.SysPath)
	if errA != nil || errB != nil {
		return RelUnknown, "the PCI path could not be read: " + firstErr(errA, errB).Error()
	}
	if pa.HiddenBy != "" || pb.HiddenBy != "" {
		return hiddenRelation(a, b, pa, pb)
	}
	if pa.HostBridge != pb.HostBridge {
		switch {
		case a.HasNUMA && b.HasNUMA && a.NUMANode != b.NUMANode:
			return RelSYS, fmt.Sprintf("host bridges %s and %s on NUMA nodes %d and %d", pa.HostBridge, pb.HostBridge, a.NUMANode, b.NUMANode)
		case a.HasNUMA && b.HasNUMA:
			return RelNODE, fmt.Sprintf("host bridges %s and %s, both on NUMA node %d", pa.HostBridge, pb.HostBridge, a.NUMANode)
		}
		return RelNODE, fmt.Sprintf("host bridges %s and %s; no NUMA node reported, counted as one node", pa.HostBridge, pb.HostBridge)
	}
	common := pa.commonBridges(pb)
	if common == 0 {
		return RelPHB, fmt.Sprintf("same host bridge %s, different root ports", pa.HostBridge)
	}
	top := pa.Bridges[common-1]
	below := max(len(pa.Bridges), len(pb.Bridges)) - common
	if below <= 1 {
		return RelPIX, fmt.Sprintf("one PCIe switch: both below %s", top)
	}
	return RelPXB, fmt.Sprintf("below %s through %d and %d further bridges", top, len(pa.Bridges)-common, len(pb.Bridges)-common)
}

// hiddenRelation is the relation of two functions one of which sits on a
// paravirtual root bus: the guest sees no switch or root port between
// them, only their NUMA nodes, so the class is NODE or SYS as
// `nvidia-smi topo -m` prints it there, and the sentence says the path
// itself is hidden.
func hiddenRelation(a, b PCIFunction, pa, pb PCITreePath) (PCIRelation, string) {
	hidden := fmt.Sprintf("the hypervisor hides the PCIe path (root buses %s and %s)", pa.HostBridge, pb.HostBridge)
	switch {
	case a.HasNUMA && b.HasNUMA && a.NUMANode != b.NUMANode:
		return RelSYS, fmt.Sprintf("%s; NUMA nodes %d and %d", hidden, a.NUMANode, b.NUMANode)
	case a.HasNUMA && b.HasNUMA:
		return RelNODE, fmt.Sprintf("%s; both on NUMA node %d", hidden, a.NUMANode)
	}
	return RelNODE, hidden + "; no NUMA node reported, counted as one node"
}

// BridgesBetween are the bridges the traffic from a to b passes below
// their common ancestor — the ports where a switch may redirect peer
// requests (ACS) — nearest to a first, then b's from the top down. For
// functions that meet only at the root complex, it is every bridge of both.
func BridgesBetween(a, b PCIFunction) ([]string, error) {
	pa, errA := TreePathOf(a.SysPath)
	pb, errB := TreePathOf(b.SysPath)
	if err := firstErr(errA, errB); err != nil {
		return nil, err
	}
	common := pa.commonBridges(pb)
	var out []string
	for i := len(pa.Bridges) - 1; i >= common; i-- {
		out = append(out, pa.Bridges[i])
	}
	// The common ancestor routes between its children: a downstream port
	// above both (nested switches) applies its ACS too.
	if common > 0 {
		out = append(out, pa.Bridges[common-1])
	}
	out = append(out, pb.Bridges[common:]...)
	return out, nil
}

// commonBridges is how many bridges, from the root port down, p and q
// share: 0 when they meet only at their host bridge or not at all.
func (p PCITreePath) commonBridges(q PCITreePath) int {
	if p.HostBridge != q.HostBridge {
		return 0
	}
	n := 0
	for n < len(p.Bridges) && n < len(q.Bridges) && p.Bridges[n] == q.Bridges[n] {
		n++
	}
	return n
}

// Nearest picks, among candidates (resolved /sys/devices paths; "" when
// unknown), the function closest to fn in the PCI tree: the most bridges in
// common, then the same host bridge; ties go to the lower index. shared is
// how many bridges the chosen one has in common with fn (0: only the root
// complex, or nothing).
func Nearest(fn string, candidates []string) (best, shared int) {
	a, errA := TreePathOf(fn)
	best, score := 0, -1
	for i, c := range candidates {
		n := 0 // 0 nothing in common, 1 the host bridge, 1+k k bridges
		if b, err := TreePathOf(c); errA == nil && err == nil && a.HostBridge == b.HostBridge {
			n = 1 + a.commonBridges(b)
		}
		if n > score {
			best, score = i, n
		}
	}
	return best, max(score-1, 0)
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
