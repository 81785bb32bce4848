package report

import (
	"fmt"
	"io"
	"net"
	"strings"
)

// InventoryReport is what `rdmadoctor inventory --format json` prints: the
// host and the same inventory the health report carries.
type InventoryReport struct {
	Schema    string    `json:"schema"`
	Version   string    `json:"version"`
	Host      HostInfo  `json:"host"`
	Inventory Inventory `json:"inventory"`
	// IBFabric is what the fabric said of each InfiniBand port (live, by
	// management datagrams, or from a snapshot's facts);
	// IBFabricUnavailable says why there is none (no libibumad, no
	// InfiniBand port, a snapshot that did not record it).
	IBFabric            []IBFabricPort `json:"ib_fabric,omitempty"`
	IBFabricUnavailable string         `json:"ib_fabric_unavailable,omitempty"`
}

// InventorySchema names the JSON form of `rdmadoctor inventory`; its
// inventory member has the report schema's $defs/inventory.
const InventorySchema = "rdmadoctor.inventory/v1"

// WriteInventoryText renders the inventory the way an operator reads
// ibv_devinfo and ibstat: one block per RDMA device — its driver,
// firmware, node GUID and PCIe link — and per port its state, rate and
// width, link layer, and then LID, SM LID and port GUID (InfiniBand) or
// the netdevs with their addresses and the RoCE v2 GID index of each
// address (RoCE), which is what an application's GID index must be. Under
// an InfiniBand port come what the fabric said of it (IBFabric): its SM,
// the SA's SMs, the neighbour and the P_Key table.
func WriteInventoryText(w io.Writer, r *InventoryReport, width int) error {
	width = normWidth(width)
	var b strings.Builder
	fields := []string{"rdmadoctor " + Escape(r.Version), "host " + orQ(Escape(r.Host.Hostname)), "kernel " + orQ(Escape(r.Host.Kernel))}
	if root := Escape(r.Host.Root); root != "/" && root != "" {
		fields = append(fields, "root "+root)
	}
	b.WriteString(strings.Join(headerLines(fields, width), "\n") + "\n")
	inv := r.Inventory
	if len(inv.RDMADevices) == 0 {
		b.WriteString("\nno RDMA device in /sys/class/infiniband; `rdmadoctor` (the checks) says why\n")
	}
	pci := map[string]PCIFunction{}
	for _, f := range inv.PCIFunctions {
		pci[f.Address] = f
	}
	nds := map[string]Netdev{}
	for _, n := range inv.Netdevs {
		nds[n.Name] = n
	}
	fabric := map[string]IBFabricPort{}
	for _, f := range r.IBFabric {
		fabric[ibKey(f.CA, f.Port)] = f
	}
	shown := map[string]bool{}
	for _, d := range inv.RDMADevices {
		b.WriteByte('\n')
		writeDevice(&b, d, pci, nds, fabric, width)
		for _, p := range d.Ports {
			if _, ok := fabric[ibKey(d.Name, p.Port)]; ok && p.LinkLayer == "InfiniBand" {
				shown[ibKey(d.Name, p.Port)] = true
			}
		}
	}
	writeIBFabric(&b, r, shown, width)
	// A NIC function without an RDMA device (bound to vfio-pci, its RDMA
	// module missing) is what the operator is looking for: name it.
	for _, f := range inv.PCIFunctions {
		if len(f.RDMADevices) == 0 {
			line := fmt.Sprintf("%s  %s, driver %s: no RDMA device", f.Address, orDash(f.Product), orDash(f.Driver))
			b.WriteString("\n" + strings.Join(Wrap(Escape(line), width, 0, 2), "\n") + "\n")
		}
	}
	writeGPUs(&b, inv, width)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeGPUs lists the GPUs, each with its PCIe link and the NIC it pairs
// with, and the GPU×NIC matrix in nvidia-smi topo -m's classes.
func writeGPUs(b *strings.Builder, inv Inventory, width int) {
	if len(inv.GPUs) == 0 {
		return
	}
	rel := map[[2]string]GPUNICPair{}
	var nics []GPUNICPair // the NIC columns, in matrix order
	seen := map[string]bool{}
	for _, p := range inv.GPUNICMatrix {
		rel[[2]string{p.GPU, p.NIC}] = p
		if !seen[p.NIC] {
			seen[p.NIC] = true
			nics = append(nics, p)
		}
	}
	for _, g := range inv.GPUs {
		b.WriteByte('\n')
		title := fmt.Sprintf("%s %s %s, driver %s", Escape(g.Name), Escape(g.Address), Escape(g.Product), orDash(g.Driver))
		b.WriteString(strings.Join(Wrap(Escape(title), width, 0, 2), "\n") + "\n")
		if g.NUMANode != nil {
			kv(b, 2, "numa_node", fmt.Sprint(*g.NUMANode), width)
		}
		if g.Link != nil {
			kv(b, 2, "pcie", fmt.Sprintf("%s x%d (max %s x%d)", g.Link.Speed, g.Link.Width, g.Link.MaxSpeed, g.Link.MaxWidth), width)
		}
		if g.PairedNIC != "" {
			kv(b, 2, "nic", g.PairedNIC, width)
		}
	}
	if len(nics) == 0 {
		return
	}
	b.WriteString("\nGPU×NIC (nvidia-smi topo -m classes; * = paired)\n")
	w := 6
	for _, n := range nics {
		w = max(w, len(Escape(n.RDMADevice))+1)
	}
	var hdr strings.Builder
	fmt.Fprintf(&hdr, "%-6s", "")
	for _, n := range nics {
		fmt.Fprintf(&hdr, "%-*s", w, Escape(n.RDMADevice))
	}
	b.WriteString(strings.TrimRight(hdr.String(), " ") + "\n")
	for _, g := range inv.GPUs {
		var row strings.Builder
		fmt.Fprintf(&row, "%-6s", Escape(g.Name))
		for _, n := range nics {
			p := rel[[2]string{g.Address, n.NIC}]
			cell := Escape(p.Relation)
			if p.Paired {
				cell += "*"
			}
			fmt.Fprintf(&row, "%-*s", w, cell)
		}
		b.WriteString(strings.TrimRight(row.String(), " ") + "\n")
	}
}

// valueCol is where every value of the inventory starts, so that a
// device's attributes, its ports and their netdevs read as one column.
const valueCol = 18

// kv writes one "label  value" line, the label at indent and the value at
// valueCol (or after a long label); a long value wraps under itself.
func kv(b *strings.Builder, indent int, label, value string, width int) {
	lead := strings.Repeat(" ", indent) + label
	lead += strings.Repeat(" ", max(1, valueCol-len(lead)))
	b.WriteString(lead + strings.Join(Wrap(Escape(value), width, len(lead), len(lead)), "\n") + "\n")
}

func writeDevice(b *strings.Builder, d RDMADevice, pci map[string]PCIFunction, nds map[string]Netdev, fabric map[string]IBFabricPort, width int) {
	title := Escape(d.Name)
	fn, hasPCI := pci[d.PCI]
	var what []string
	if hasPCI && fn.Product != "" {
		what = append(what, fn.Product)
	}
	if d.Driver != "" {
		what = append(what, d.Driver)
	}
	what = append(what, d.Kind)
	b.WriteString(title + "  " + Escape(strings.Join(what, ", ")) + "\n")
	if d.PCI != "" {
		kv(b, 2, "PCI", pciLine(d.PCI, fn, hasPCI), width)
	}
	kv(b, 2, "firmware", orDash(d.FWVer), width)
	kv(b, 2, "node GUID", orDash(d.NodeGUID), width)
	if d.SysGUID != "" && d.SysGUID != d.NodeGUID {
		kv(b, 2, "sys image GUID", d.SysGUID, width)
	}
	if d.HCAType != "" {
		kv(b, 2, "HCA type", d.HCAType, width)
	}
	if d.BoardID != "" {
		kv(b, 2, "board ID", d.BoardID, width)
	}
	kv(b, 2, "node type", orDash(d.NodeType), width)
	if len(d.Ports) == 0 {
		kv(b, 2, "ports", "none", width)
	}
	for _, p := range d.Ports {
		f, ok := fabric[ibKey(d.Name, p.Port)]
		writePort(b, p, nds, width)
		if ok && p.LinkLayer == "InfiniBand" {
			writeIBFabricPort(b, f, width)
		}
	}
}

func pciLine(addr string, fn PCIFunction, known bool) string {
	s := addr
	if !known {
		return s
	}
	if fn.NUMANode != nil {
		s += fmt.Sprintf(", NUMA node %d", *fn.NUMANode)
	}
	if l := fn.Link; l != nil {
		s += fmt.Sprintf(", PCIe %s x%d (card max %s x%d)", trimPCIe(l.Speed), l.Width, trimPCIe(l.MaxSpeed), l.MaxWidth)
	}
	if fn.PhysFn != "" {
		s += ", VF of " + fn.PhysFn
	} else if fn.NumVFs > 0 {
		s += fmt.Sprintf(", %d VF(s)", fn.NumVFs)
	}
	return s
}

// trimPCIe drops sysfs's " PCIe" suffix ("8.0 GT/s PCIe"): the label says it.
func trimPCIe(s string) string {
	s = strings.TrimSuffix(strings.TrimSpace(s), " PCIe")
	if s == "" {
		return "?"
	}
	return s
}

func writePort(b *strings.Builder, p Port, nds map[string]Netdev, width int) {
	state := orDash(p.State)
	if p.PhysState != "" {
		state += " (" + p.PhysState + ")"
	}
	parts := []string{state, orDash(p.Rate), orDash(p.LinkLayer)}
	if p.ActiveMTU > 0 {
		parts = append(parts, fmt.Sprintf("active MTU %d", p.ActiveMTU))
	}
	kv(b, 2, fmt.Sprintf("port %d", p.Port), strings.Join(parts, ", "), width)
	if p.LID != nil {
		// Decimal first, as ibv_devinfo and ibstat print LIDs.
		lid := fmt.Sprintf("%d (0x%x)", *p.LID, *p.LID)
		if p.SMLID != nil {
			lid += fmt.Sprintf(", SM LID %d (0x%x)", *p.SMLID, *p.SMLID)
		}
		kv(b, 4, "LID", lid, width)
	}
	if p.LinkLayer == "InfiniBand" {
		if g := gidAt(p, 0); g != "" {
			kv(b, 4, "port GUID", portGUID(g), width)
		}
		return
	}
	for _, name := range portNetdevs(p) {
		writeNetdev(b, p, name, nds, width)
	}
}

// writeNetdev writes a netdev that carries the port, and each of its
// addresses with the RoCE v2 GID index that addresses it.
func writeNetdev(b *strings.Builder, p Port, name string, nds map[string]Netdev, width int) {
	nd, ok := nds[name]
	if !ok {
		kv(b, 4, "netdev", name+" (not in the netdev list)", width)
		return
	}
	desc := fmt.Sprintf("%s, %s, MTU %d", name, orDash(nd.State), nd.MTU)
	if nd.MAC != "" {
		desc += ", MAC " + nd.MAC
	}
	kv(b, 4, "netdev", desc, width)
	if m := nd.Module; m != nil {
		line := fmt.Sprintf("%s %s %s, SN %s (%s %s)", orDash(m.Vendor), orDash(m.Part), m.Revision, orDash(m.Serial), m.Form, m.Media)
		if m.Firmware != "" {
			line += ", firmware " + m.Firmware
		}
		kv(b, 6, "module", strings.Join(strings.Fields(line), " "), width)
	}
	if len(nd.Addresses) == 0 {
		kv(b, 6, "address", "none: no IP, so no RoCE v2 GID for this netdev", width)
	}
	for _, a := range nd.Addresses {
		idx := roceV2Index(p, name, a)
		where := "no RoCE v2 GID for it"
		if idx >= 0 {
			where = fmt.Sprintf("RoCE v2 GID index %d", idx)
		}
		kv(b, 6, "address", a+", "+where, width)
	}
}

// portNetdevs are the netdevs of a RoCE port: its own first, then the upper
// devices (VLAN, macvlan, bond) its GIDs name, in GID order.
func portNetdevs(p Port) []string {
	var out []string
	seen := map[string]bool{}
	add := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	add(p.Netdev)
	for _, g := range p.GIDs {
		add(g.Netdev)
	}
	return out
}

// roceV2Index is the index of the port's RoCE v2 GID for an address of a
// netdev ("192.0.2.10/24"; an IPv4 address is an IPv4-mapped GID), or -1.
func roceV2Index(p Port, netdev, addr string) int {
	ip, _, err := net.ParseCIDR(addr)
	if err != nil {
		if ip = net.ParseIP(addr); ip == nil {
			return -1
		}
	}
	for _, g := range p.GIDs {
		if g.Type != "RoCE v2" || (g.Netdev != "" && g.Netdev != netdev) {
			continue
		}
		if gip := parseGID(g.GID); gip != nil && gip.Equal(ip) {
			return g.Index
		}
	}
	return -1
}

// parseGID reads a GID as sysfs prints it, eight groups of four hex digits,
// or in any form net.ParseIP reads.
func parseGID(s string) net.IP {
	return net.ParseIP(strings.TrimSpace(s))
}

func gidAt(p Port, i int) string {
	for _, g := range p.GIDs {
		if g.Index == i {
			return g.GID
		}
	}
	return ""
}

// portGUID is the interface ID of an InfiniBand port's GID 0 — the subnet
// prefix and the port GUID — written as ibstat does ("0x…").
func portGUID(gid0 string) string {
	ip := parseGID(gid0)
	if ip == nil || ip.To16() == nil {
		return gid0
	}
	return fmt.Sprintf("0x%x", []byte(ip.To16()[8:]))
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
