package checks

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Transport is what a port speaks on the wire; it decides which checks
// judge the port. Read from the driver, node_type and link_layer, never
// from the device's name.
type Transport string

const (
	InfiniBand Transport = "InfiniBand"
	RoCE       Transport = "RoCE"
	IWARP      Transport = "iWARP"
	EFA        Transport = "EFA (SRD)"
	OmniPath   Transport = "Omni-Path"
	// USNIC is Cisco's usNIC: verbs over plain UDP/IP (usnic_verbs on an
	// enic VF), link layer Ethernet but no RoCE: no RoCE GIDs, no PFC.
	USNIC   Transport = "usNIC (UDP)"
	Unknown Transport = "unknown"
)

// node_type values (include/rdma/ib_verbs.h enum rdma_node_type, shown by
// core/sysfs.c as "<n>: <name>").
const (
	nodeCA          = 1
	nodeRNIC        = 4
	nodeUSNIC       = 5 // RDMA_NODE_USNIC
	nodeUSNICUDP    = 6 // RDMA_NODE_USNIC_UDP, what usnic_verbs registers
	nodeUnspecified = 7
)

// FunctionKind is what the RDMA device sits on.
type FunctionKind string

const (
	PhysicalFunction FunctionKind = "PF"
	VirtualFunction  FunctionKind = "VF"
	SubFunction      FunctionKind = "SF"
	SoftwareDevice   FunctionKind = "software"
)

// DeviceModel is one RDMA device classified.
type DeviceModel struct {
	Dev      sysfs.RDMADevice
	Driver   *Driver // the table's family; nil for a driver outside the table
	NodeType int     // 0 when unreadable
	Function FunctionKind
	PhysFn   string // a VF's PF
	// LAG is set on a RoCE LAG device (mlx5_bond_N): one RDMA device for
	// the bond of two PFs, registered on the first PF.
	LAG   *LAG
	Ports []*PortModel
	// GuestVF: the device is an SR-IOV VF handed to this host as a
	// virtual machine (the CPU's hypervisor flag) — Azure's HB, HC and ND
	// VMs. Its fabric, subnet manager and PF belong to the platform: a VF
	// has no subnet-management QP (QP0), so no SM, sminfo or ibportstate
	// runs from it, and the guest's remedies are the platform's (wait,
	// redeploy, a support case).
	GuestVF bool
}

// LAG is a RoCE link aggregation: the bond and the slaves under it.
type LAG struct {
	Bond   string
	Slaves []string
}

// PortModel is one port classified, with the netdevs that carry it.
type PortModel struct {
	Device    *DeviceModel
	Port      sysfs.RDMAPort
	Label     string // "mlx5_0 port 1"
	Transport Transport
	// Netdev is the port's own netdev (the bond on a LAG); "" when none.
	Netdev string
	// Uppers are the devices stacked on Netdev (VLAN, macvlan, bond,
	// IPoIB children): the kernel adds GIDs for their addresses too. When
	// Netdev is in another namespace, the ones that live in this one.
	Uppers []string
	// DCBNetdevs are where PFC, trust and ECN live: a LAG's slaves (the
	// bond answers EOPNOTSUPP), else Netdev.
	DCBNetdevs []string
	// NetdevHere is false when Netdev is not in this network namespace
	// (moved into a container by a CNI, or the reader is in a container).
	NetdevHere  bool
	Representor bool // an eswitch representor port (switchdev mode)
	// OVSPort: the netdev is a port of Open vSwitch's datapath (its master
	// is ovs-system), a switch port such as a DPU's uplink: it forwards
	// others' traffic and carries no address of its own.
	OVSPort bool
	TopoErr error
}

// IsVF reports whether the port's device is a VF or sub-function: no IP on
// the host is normal for those.
func (p *PortModel) IsVF() bool {
	return p.Device.Function == VirtualFunction || p.Device.Function == SubFunction
}

// Carriers are the netdevs whose addresses the port's GIDs are made from.
func (p *PortModel) Carriers() []string {
	if p.Netdev == "" {
		return nil
	}
	return append([]string{p.Netdev}, p.Uppers...)
}

// HostModel is every RDMA device and port of the host, classified once.
type HostModel struct {
	Devices []*DeviceModel
	Ports   []*PortModel
}

// Model returns the classified host, built once per run.
func (e *Env) Model() *HostModel {
	e.modelOnce.Do(func() { e.model = buildModel(e.Host, e.Survey()) })
	return e.model
}

func buildModel(h *sysfs.Host, s *Survey) *HostModel {
	m := &HostModel{}
	guest := guestReader(h)
	for _, d := range s.Devices {
		dm := classifyDevice(s, d)
		dm.GuestVF = isVFFunction(s, dm) && guest()
		for _, p := range d.Ports {
			pm := classifyPort(h, s, dm, p)
			dm.Ports = append(dm.Ports, pm)
			m.Ports = append(m.Ports, pm)
		}
		if dm.LAG == nil && strings.HasPrefix(d.Name, "mlx5_bond_") {
			// mlx5 names a RoCE LAG device so (mlx5/core/lag); when its
			// bond cannot be read it is still the LAG of its card.
			dm.LAG = &LAG{Bond: "unknown bond"}
		}
		m.Devices = append(m.Devices, dm)
	}
	return m
}

// guestVFAt reports whether the RDMA device on the PCI function addr is a
// VF in a virtual machine (DeviceModel.GuestVF).
func (m *HostModel) guestVFAt(addr string) bool {
	for _, d := range m.Devices {
		if d.GuestVF && d.Dev.PCIAddr == addr {
			return true
		}
	}
	return false
}

// guestReader reads whether the host is a virtual machine, once, when a
// device first needs it: a host without VFs never reads /proc/cpuinfo
// for it.
func guestReader(h *sysfs.Host) func() bool {
	var once sync.Once
	guest := false
	return func() bool {
		once.Do(func() { guest = h.ReadVirtualization().Guest() })
		return guest
	}
}

// isVFFunction reports whether a device sits on an SR-IOV VF: by its
// physfn link where the PF is on this host, else — in a guest, which sees
// no PF — by its device ID (the ConnectX VF IDs: Azure's HB/HC/ND VMs get
// ConnectX-6 VFs 15b3:101c and ConnectX-7 VFs 15b3:101e). A whole HCA
// passed through to a guest is no VF.
func isVFFunction(s *Survey, dm *DeviceModel) bool {
	if dm.Function == VirtualFunction {
		return true
	}
	if dm.Function != PhysicalFunction {
		return false
	}
	for _, fn := range s.PCI {
		if fn.Address == dm.Dev.PCIAddr && fn.Vendor == 0x15b3 {
			return strings.HasSuffix(mellanoxProducts[fn.Device], " VF")
		}
	}
	return false
}

// parseNodeType reads the number of "1: CA"; 0 when unreadable.
func parseNodeType(s string) int {
	num, _, _ := strings.Cut(s, ":")
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil {
		return 0
	}
	return n
}

func classifyDevice(s *Survey, d sysfs.RDMADevice) *DeviceModel {
	dm := &DeviceModel{Dev: d, NodeType: parseNodeType(d.NodeType), Function: PhysicalFunction}
	switch {
	case d.Software || d.PCIAddr == "":
		dm.Function = SoftwareDevice
		dm.Driver = softwareDriver(d.Name, nil)
	case strings.Contains(d.SysPath, ".sf."):
		// mlx5 sub-functions are auxiliary devices below their PF
		// (…/<PF>/mlx5_core.sf.N/…).
		dm.Function = SubFunction
		dm.Driver = DriverByPCI("mlx5_core")
		dm.PhysFn, _ = subFunctionPF(d)
	default:
		dm.Driver = legacyX722(DriverByPCI(d.Driver), d.Name, nil)
		for _, n := range s.PCI {
			if n.Address == d.PCIAddr && n.PhysFn != "" {
				dm.Function, dm.PhysFn = VirtualFunction, n.PhysFn
			}
		}
	}
	return dm
}

// transportRule decides a port's transport; the first rule that knows wins.
// Drivers whose transport does not show in node_type or link_layer come
// first: hfi1 reports an InfiniBand link layer for Omni-Path, EFA an
// "Unknown" one.
var transportByDriver = map[string]Transport{
	"efa": EFA, "hfi1": OmniPath, "cxgb4": IWARP, "siw": IWARP, "rdma_rxe": RoCE,
}

func portTransport(dm *DeviceModel, p sysfs.RDMAPort) Transport {
	drv := dm.Dev.Driver
	if dm.Function == SoftwareDevice && dm.Driver != nil {
		drv = dm.Driver.Modules[0]
	}
	if t, ok := transportByDriver[drv]; ok {
		return t
	}
	switch {
	case dm.NodeType == nodeRNIC:
		return IWARP
	case dm.NodeType == nodeUSNIC || dm.NodeType == nodeUSNICUDP:
		// An Ethernet link layer, yet not RoCE: judging its GIDs as RoCE
		// failed a working usNIC host (usnic_ib_query_gid builds its one
		// GID from the MAC and IP; the core adds none).
		return USNIC
	case dm.NodeType == nodeUnspecified && p.LinkLayer != "InfiniBand" && p.LinkLayer != "Ethernet":
		return EFA
	case p.LinkLayer == "InfiniBand":
		return InfiniBand
	case p.LinkLayer == "Ethernet":
		return RoCE
	}
	return Unknown
}

func classifyPort(h *sysfs.Host, s *Survey, dm *DeviceModel, p sysfs.RDMAPort) *PortModel {
	pm := &PortModel{Device: dm, Port: p, Label: portLabel(dm.Dev.Name, p.Num), Transport: portTransport(dm, p)}
	if pm.Transport == InfiniBand || pm.Transport == OmniPath || pm.Transport == EFA {
		return pm
	}
	pm.Netdev = portNetdev(s, dm.Dev, p)
	if pm.Netdev == "" {
		return pm
	}
	if own := ownBondSlave(h, s, dm.Dev, pm.Netdev); own != "" {
		pm.Netdev = own
	}
	topo, err := h.NetdevTopology(pm.Netdev)
	pm.TopoErr = err
	pm.NetdevHere = topo.Exists || err != nil
	pm.Uppers = stackedOn(h, topo)
	if !pm.NetdevHere {
		pm.Uppers = uppersHere(h, p, pm.Netdev) // hostmodel_netns.go
	}
	pm.Representor = topo.Representor()
	pm.OVSPort = topo.Master == "ovs-system"
	pm.DCBNetdevs = []string{pm.Netdev}
	if topo.Bond {
		slaves, _ := h.BondSlaves(pm.Netdev)
		dm.LAG = &LAG{Bond: pm.Netdev, Slaves: slaves}
		if len(slaves) > 0 {
			pm.DCBNetdevs = slaves
		}
	}
	return pm
}

// ownBondSlave tells a bond that only carries a port from a RoCE LAG. A
// port's GIDs name a bond in both cases: on an mlx5 RoCE LAG the device's
// netdev is the bond (mlx5_lag_get_roce_netdev), while a plain bond over
// PFs that each keep their RDMA device (a bond across two cards, which
// mlx5/core/lag never pairs, or one whose LAG is not allowed) lends its
// addresses to its slaves' ports as an upper device (roce_gid_mgmt.c
// is_eth_port_of_netdev_filter). mlx5 unregisters every PF's device when
// it forms a LAG, so a bond whose slave belongs to a PCI function with an
// RDMA device of its own, other than this one, is not a LAG: the port's
// netdev is then this device's own slave of the bond. "" when the bond is
// a LAG (or not a bond).
func ownBondSlave(h *sysfs.Host, s *Survey, d sysfs.RDMADevice, bond string) string {
	if t, err := h.NetdevTopology(bond); err != nil || !t.Bond || d.PCIAddr == "" {
		return ""
	}
	slaves, _ := h.BondSlaves(bond)
	fnOf := map[string]string{} // netdev → its PCI function
	for _, n := range s.NICs {
		for _, nd := range n.Fn.Netdevs {
			fnOf[nd] = n.Fn.Address
		}
	}
	hasDev := map[string]bool{}
	for _, o := range s.Devices {
		if o.Name != d.Name && o.PCIAddr != "" {
			hasDev[o.PCIAddr] = true
		}
	}
	own, shared := "", false
	for _, sl := range slaves {
		switch fn := fnOf[sl]; {
		case fn == d.PCIAddr:
			own = sl
		case fn != "" && hasDev[fn]:
			shared = true
		}
	}
	if !shared {
		return ""
	}
	return own
}

// stackedOn lists the devices stacked on a netdev, transitively (a VLAN on
// a bond on the port's netdev carries the port's traffic too), bounded.
func stackedOn(h *sysfs.Host, t sysfs.NetdevTopology) []string {
	seen := map[string]bool{t.Name: true}
	var out []string
	queue := append([]string(nil), t.Uppers...)
	for len(queue) > 0 && len(out) < 64 {
		n := queue[0]
		queue = queue[1:]
		if seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
		if up, err := h.NetdevTopology(n); err == nil {
			queue = append(queue, up.Uppers...)
		}
	}
	sort.Strings(out)
	return out
}

// LAGOf returns the LAG device whose bond has netdev among its slaves.
func (m *HostModel) LAGOf(netdev string) *DeviceModel {
	for _, d := range m.Devices {
		if d.LAG == nil {
			continue
		}
		for _, s := range d.LAG.Slaves {
			if s == netdev {
				return d
			}
		}
	}
	return nil
}

// PortsOf returns the ports of the given transports.
func (m *HostModel) PortsOf(ts ...Transport) []*PortModel {
	var out []*PortModel
	for _, p := range m.Ports {
		for _, t := range ts {
			if p.Transport == t {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// transportTally says which ports a check does not judge and why:
// "2 iWARP ports (cxgb4_0 port 1, …)".
func transportTally(ports []*PortModel) string {
	by := map[Transport][]string{}
	var order []Transport
	for _, p := range ports {
		if _, ok := by[p.Transport]; !ok {
			order = append(order, p.Transport)
		}
		by[p.Transport] = append(by[p.Transport], p.Label)
	}
	var parts []string
	for _, t := range order {
		labels := by[t]
		if len(labels) > tallyListMax {
			// An EFA instance has 32 ports: a count and the ends of the
			// list read better than every name.
			parts = append(parts, fmt.Sprintf("%s: %d ports (%s, %s, …, %s)", t, len(labels), labels[0], labels[1], labels[len(labels)-1]))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %s", t, strings.Join(labels, ", ")))
	}
	return strings.Join(parts, "; ")
}

// tallyListMax is how many ports of one transport transportTally names
// one by one.
const tallyListMax = 8
