package checks

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Inventory describes what the host has — the RDMA NICs, the RDMA devices
// with their ports and GIDs, and the netdevs that carry them — independent
// of any judgement, so a report that fails still says what was there.
func Inventory(env *Env) report.Inventory {
	s := env.Survey()
	h := env.Host
	inv := report.NewInventory()
	for _, n := range s.NICs {
		inv.PCIFunctions = append(inv.PCIFunctions, inventoryFunction(h, n))
	}
	// The netdevs worth listing are those that carry RDMA: a port's GID
	// netdev, its parent, or a netdev of an RDMA NIC function.
	carried := map[string]bool{}
	for _, d := range s.Devices {
		inv.RDMADevices = append(inv.RDMADevices, inventoryDevice(d, carried))
	}
	for _, n := range s.NICs {
		for _, nd := range n.Fn.Netdevs {
			carried[nd] = true
		}
	}
	addModel(env.Model(), &inv)
	inventoryGPUs(env, &inv)
	var mtu map[string]int
	inv.Netdevs, mtu = inventoryNetdevs(env.Netdevs(), carried)
	inventoryModules(env, inv.Netdevs)
	setActiveMTUs(&inv, mtu)
	sort.Slice(inv.Netdevs, func(i, j int) bool { return inv.Netdevs[i].Name < inv.Netdevs[j].Name })
	return inv
}

// inventoryFunction describes one RDMA NIC function as the PCI bus shows it.
func inventoryFunction(h *sysfs.Host, n NIC) report.PCIFunction {
	fn := n.Fn
	p := report.PCIFunction{
		Address: fn.Address, VendorID: fmt.Sprintf("0x%04x", fn.Vendor), DeviceID: fmt.Sprintf("0x%04x", fn.Device),
		Class: fmt.Sprintf("0x%06x", fn.Class), Vendor: VendorName(fn.Vendor), Product: n.Product, Driver: fn.Driver,
		PhysFn: fn.PhysFn, NumVFs: fn.NumVFs, TotalVFs: fn.TotalVFs,
		RDMADevices: nonNil(fn.RDMADevs), Netdevs: nonNil(fn.Netdevs),
	}
	if fn.HasNUMA {
		v := fn.NUMANode
		p.NUMANode = &v
	}
	p.Link = pciLink(h, fn.Address)
	return p
}

// inventoryDevice describes one RDMA device and its ports, marking in
// carried the netdevs its ports use. A software device's driver is named
// from the device alone (the module list is not read for the inventory).
func inventoryDevice(d sysfs.RDMADevice, carried map[string]bool) report.RDMADevice {
	rd := report.RDMADevice{
		Name: d.Name, Kind: "hardware", Driver: d.Driver, PCI: d.PCIAddr, NodeType: d.NodeType,
		NodeGUID: d.NodeGUID, SysGUID: d.SysGUID, FWVer: d.FWVer, HCAType: d.HCAType, BoardID: d.BoardID,
		Ports: []report.Port{},
	}
	if d.Software || d.PCIAddr == "" {
		rd.Kind = "software"
		rd.Driver = softwareDriver(d.Name, func(string) bool { return false }).Modules[0]
	}
	for _, pt := range d.Ports {
		rd.Ports = append(rd.Ports, inventoryPort(d, pt, carried))
	}
	return rd
}

// inventoryPort describes one port: its state, its LIDs on InfiniBand, its
// GIDs, and its netdev — the first GID's, else on Ethernet the device's
// parent — which it marks in carried.
func inventoryPort(d sysfs.RDMADevice, pt sysfs.RDMAPort, carried map[string]bool) report.Port {
	rp := report.Port{Port: pt.Num, State: pt.State.String(), PhysState: pt.PhysState.String(),
		Rate: pt.Rate, LinkLayer: pt.LinkLayer, GIDs: []report.GID{}}
	if pt.LinkLayer == "InfiniBand" && pt.HasLID {
		lid, sm := int(pt.LID), int(pt.SMLID)
		rp.LID, rp.SMLID = &lid, &sm
	}
	for _, g := range pt.GIDs {
		if g.Index == 0 && pt.LinkLayer == "InfiniBand" {
			rp.PortGUID, rp.SubnetPrefix = splitGID0(g.GID)
		}
		rp.GIDs = append(rp.GIDs, report.GID{Index: g.Index, GID: g.GID, Type: g.Type, Netdev: g.Netdev})
		if g.Netdev != "" {
			carried[g.Netdev] = true
			if rp.Netdev == "" {
				rp.Netdev = g.Netdev
			}
		}
	}
	if rp.Netdev == "" && d.Parent != "" && pt.LinkLayer == "Ethernet" {
		rp.Netdev = d.Parent
	}
	if rp.Netdev != "" {
		carried[rp.Netdev] = true
	}
	return rp
}

// splitGID0 splits an InfiniBand port's GID 0 into its port GUID (the
// lower 64 bits, as sysfs writes GUIDs) and its subnet prefix (the upper 64
// bits, "fe80::/64"); both "" when the GID does not parse.
func splitGID0(gid string) (portGUID, prefix string) {
	a, err := netip.ParseAddr(strings.TrimSpace(gid))
	if err != nil || !a.Is6() || a.Is4In6() {
		return "", ""
	}
	b := a.As16()
	return GUIDText(binary.BigEndian.Uint64(b[8:])), SubnetPrefixText(binary.BigEndian.Uint64(b[:8]))
}

// inventoryNetdevs describes the netdevs that carry RDMA, and returns
// their MTUs for the ports' active MTU; a netdev list that cannot be read
// leaves both empty.
func inventoryNetdevs(t *netdevTable, carried map[string]bool) ([]report.Netdev, map[string]int) {
	out := []report.Netdev{}
	mtu := map[string]int{}
	if t.err != nil {
		return out, mtu
	}
	for _, nd := range t.list {
		if !carried[nd.Name] {
			continue
		}
		mtu[nd.Name] = nd.MTU
		out = append(out, report.Netdev{Name: nd.Name, State: nd.OperState, MTU: nd.MTU, MAC: nd.MAC, Addresses: nonNil(nd.Addresses)})
	}
	return out, mtu
}

// setActiveMTUs gives each Ethernet port the RoCE MTU its netdev's MTU
// allows.
func setActiveMTUs(inv *report.Inventory, mtu map[string]int) {
	for i := range inv.RDMADevices {
		for j := range inv.RDMADevices[i].Ports {
			p := &inv.RDMADevices[i].Ports[j]
			if p.LinkLayer == "Ethernet" && mtu[p.Netdev] > 0 {
				p.ActiveMTU = RoCEActiveMTU(mtu[p.Netdev])
			}
		}
	}
}

// RoCEActiveMTU is the largest IB MTU (256…4096) whose RoCE packet fits in a
// netdev of the given MTU — what the kernel reports as the port's active
// MTU. The kernel (iboe_get_mtu) reserves room for the GRH/IP, UDP, BTH,
// XRC and atomic extended headers and the ICRC — 96 bytes — so a 1500-byte
// netdev allows 1024 and a 9000-byte netdev allows 4096.
func RoCEActiveMTU(netdevMTU int) int {
	const roceOverhead = 40 + 8 + 12 + 4 + 28 + 4
	best := 0
	for _, m := range []int{256, 512, 1024, 2048, 4096} {
		if m+roceOverhead <= netdevMTU {
			best = m
		}
	}
	return best
}

func pciLink(h *sysfs.Host, addr string) *report.PCILink {
	dir := path.Join(sysfs.PCIDevicesDir, addr)
	read := func(n string) string {
		s, err := h.ReadAttr(path.Join(dir, n))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(s)
	}
	l := report.PCILink{Speed: read("current_link_speed"), MaxSpeed: read("max_link_speed")}
	l.Width, _ = strconv.Atoi(read("current_link_width"))
	l.MaxWidth, _ = strconv.Atoi(read("max_link_width"))
	if l.Speed == "" && l.MaxSpeed == "" {
		return nil
	}
	return &l
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// addModel writes the host model's classification into the inventory:
// each device's function and LAG, each port's transport and the devices
// stacked on its netdev.
func addModel(m *HostModel, inv *report.Inventory) {
	byName := map[string]*DeviceModel{}
	for _, d := range m.Devices {
		byName[d.Dev.Name] = d
	}
	for i := range inv.RDMADevices {
		rd := &inv.RDMADevices[i]
		d := byName[rd.Name]
		if d == nil {
			continue
		}
		rd.Function = string(d.Function)
		if d.LAG != nil {
			rd.LAG = &report.LAG{Bond: d.LAG.Bond, Slaves: nonNil(d.LAG.Slaves)}
		}
		for j := range rd.Ports {
			for _, pm := range d.Ports {
				if pm.Port.Num == rd.Ports[j].Port {
					rd.Ports[j].Transport = string(pm.Transport)
					rd.Ports[j].UpperNetdevs = pm.Uppers
					if pm.Netdev != "" && rd.Ports[j].Netdev != "" {
						// The model's netdev: a slave, not the bond
						// its GIDs name, on a bond that is no LAG.
						rd.Ports[j].Netdev = pm.Netdev
					}
				}
			}
		}
	}
}
