package sysfstest

import (
	"fmt"
	"path"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Fixtures of the host kinds beyond a plain ConnectX: LAG, VLAN, SR-IOV,
// iWARP, EFA, Omni-Path, Intel E810 and Broadcom RoCE, and ports that are
// off on purpose or degraded. Each writes what its driver really shows in
// sysfs; the comments name the kernel source the shape comes from.

// CX6DxLAG is a dual-port ConnectX-6 Dx with both PFs in an 802.3ad bond
// and RoCE LAG active: mlx5 (mlx5/core/lag) unregisters both PFs' RDMA
// devices and registers one, mlx5_bond_0, on the first PF; its GIDs carry
// bond0's addresses. PFC, trust and ECN are set on the slaves.
func CX6DxLAG() Host {
	pf := func(fn int, netdev, mac string) NIC {
		n := NIC{
			Addr: fmt.Sprintf("0000:98:00.%d", fn), RootPort: "0000:97:01.0", Vendor: mellanox, Device: 0x101d, Class: 0x020000,
			SubVendor: mellanox, SubDevice: 0x0016, Driver: "mlx5_core", NUMA: 1,
			Speed: "16.0 GT/s PCIe", Width: 16, MaxSpeed: "16.0 GT/s PCIe", MaxWidth: 16, BridgeSpeed: "16.0 GT/s PCIe", BridgeWidth: 16,
			TotalVFs: 8, NodeGUID: "a088:c203:0045:7e1a", FW: "22.39.1002 (MT_0000000359)", HCAType: "MT4125", BoardID: "MT_0000000359",
			Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "100 Gb/sec (4X EDR)", LinkLayer: "Ethernet",
				Netdev: netdev, MAC: mac, MTU: 9000, OperUp: true, Bond: "bond0", PhysPortName: fmt.Sprintf("p%d", fn)}},
		}
		return n
	}
	first := pf(0, "ens2f0np0", "a0:88:c2:45:7e:1a")
	first.IBDev = "mlx5_bond_0"
	return Host{
		Hostname: "lag-node12", Kernel: "6.1.0-18-amd64", Modules: append([]string{"bonding"}, rdmaModulesMLX5...),
		Memlock: "unlimited", CapIPCLock: true, RoCETOS: "106",
		Providers: []string{"mlx5", "mlx4", "rxe", "siw", "bnxt_re", "efa", "irdma", "qedr", "hns", "cxgb4", "erdma", "mana"},
		NICs:      []NIC{first, pf(1, "ens2f1np1", "a0:88:c2:45:7e:1b")},
		Bonds:     []Bond{{Name: "bond0", MAC: "a0:88:c2:45:7e:1a", MTU: 9000, Addrs: []string{"192.0.2.40/24"}}},
	}
}

// ChelsioT6 is a Chelsio T62100 (cxgb4 on PF4, iw_cxgb4): iWARP, node_type
// RNIC. iw_cxgb4's query_port reports a fixed 4X DDR rate whatever the
// link, ACTIVE/LinkUp when the netdev has carrier.
func ChelsioT6() Host {
	return Host{
		Hostname: "iwarp-stor02", Kernel: "6.1.0-18-amd64",
		Modules: []string{"iw_cxgb4", "libcxgb", "cxgb4", "rdma_ucm", "rdma_cm", "iw_cm", "ib_cm", "ib_uverbs", "ib_core"},
		Memlock: "unlimited", CapIPCLock: true,
		Providers: []string{"mlx5", "mlx4", "rxe", "siw", "bnxt_re", "efa", "irdma", "qedr", "hns", "cxgb4", "erdma", "mana"},
		NICs: []NIC{{
			Addr: "0000:81:00.4", RootPort: "0000:80:03.0", Vendor: 0x1425, Device: 0x6408, Class: 0x020000,
			SubVendor: 0x1425, SubDevice: 0x0000, Driver: "cxgb4", NUMA: 1,
			Speed: "8.0 GT/s PCIe", Width: 16, MaxSpeed: "8.0 GT/s PCIe", MaxWidth: 16, BridgeSpeed: "8.0 GT/s PCIe", BridgeWidth: 16,
			IBDev: "cxgb4_0", NodeType: "4: RNIC", NodeGUID: "0007:4305:71c0:0000", FW: "1.27.1.0",
			Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "20 Gb/sec (4X DDR)", LinkLayer: "Ethernet",
				Netdev: "enp129s0f4", MAC: "00:07:43:71:c0:10", MTU: 9000, OperUp: true, Addrs: []string{"192.0.2.50/24"}}},
		}},
	}
}

// AWSEFA is an EC2 instance with one EFA: the EFA is a PCI function of its
// own (no netdev; the ENA beside it carries IP). efa registers node_type
// 7 (unspecified), a link layer the core prints as "Unknown", LID 0, a
// 4X EDR rate from efa_query_port, one GID (the device address), and no
// PMA counters (no process_mad).
func AWSEFA() Host {
	return Host{
		Hostname: "ip-10-0-1-23", Kernel: "6.1.0-18-cloud-amd64",
		Modules: []string{"efa", "ib_uverbs", "ib_core", "ena"},
		Memlock: "unlimited", CapIPCLock: true,
		Providers: []string{"mlx5", "mlx4", "rxe", "siw", "bnxt_re", "efa", "irdma", "qedr", "hns", "cxgb4", "erdma", "mana"},
		NICs: []NIC{
			{Addr: "0000:00:05.0", Vendor: 0x1d0f, Device: 0xec20, Class: 0x020000, SubVendor: 0x1d0f, SubDevice: 0xec20, Driver: "ena",
				Ports: []Port{{Netdev: "ens5", MAC: "02:1f:3a:55:0c:11", MTU: 9001, OperUp: true, Addrs: []string{"10.0.1.23/24"}}}},
			{Addr: "0000:00:06.0", Vendor: 0x1d0f, Device: 0xefa1, Class: 0x020000, SubVendor: 0x1d0f, SubDevice: 0xefa1, Driver: "efa",
				IBDev: "rdmap0s6", NodeType: "7: unspecified", NodeGUID: "0000:0000:0000:0000", FW: "0.0.0.0",
				Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "100 Gb/sec (4X EDR)", LinkLayer: "Unknown",
					PortGUID: "021f:3aff:fe55:0c11"}}},
		},
	}
}

// OmniPath is an Intel Omni-Path HFI (8086:24f0, hfi1 on rdmavt): an
// InfiniBand-like link layer, LIDs from the fabric manager (opafm), PMA
// counters; the provider is hfi1verbs.
func OmniPath() Host {
	return Host{
		Hostname: "opa-node31", Kernel: "6.1.0-18-amd64",
		Modules: []string{"hfi1", "rdmavt", "ib_ipoib", "rdma_ucm", "rdma_cm", "iw_cm", "ib_cm", "ib_uverbs", "ib_core"},
		Memlock: "unlimited", CapIPCLock: true,
		Providers: []string{"mlx5", "mlx4", "rxe", "siw", "hfi1verbs", "efa"},
		NICs: []NIC{{
			Addr: "0000:5e:00.0", RootPort: "0000:5d:00.0", Vendor: 0x8086, Device: 0x24f0, Class: 0x020800,
			SubVendor: 0x8086, SubDevice: 0x2628, Driver: "hfi1", NUMA: 0,
			Speed: "8.0 GT/s PCIe", Width: 16, MaxSpeed: "8.0 GT/s PCIe", MaxWidth: 16, BridgeSpeed: "8.0 GT/s PCIe", BridgeWidth: 16,
			IBDev: "hfi1_0", NodeGUID: "0011:7501:017a:1b2c", FW: "1.27.0",
			Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "100 Gb/sec (4X EDR)", LinkLayer: "InfiniBand",
				LID: 0x3, SMLID: 0x1, PortGUID: "0011:7501:017a:1b2c"}},
		}},
	}
}

// ethRoCE is a one-port RoCE NIC of a vendor other than Mellanox.
func ethRoCE(host, kernelMod, driver, ibdev string, vendor, device uint16, netdev, mac, ip string, mods []string) Host {
	return Host{
		Hostname: host, Kernel: "6.1.0-18-amd64", Modules: mods, Memlock: "unlimited", CapIPCLock: true, RoCETOS: "106",
		Providers: []string{"mlx5", "mlx4", "rxe", "siw", "bnxt_re", "efa", "irdma", "qedr", "hns", "cxgb4", "erdma", "mana"},
		NICs: []NIC{{
			Addr: "0000:b1:00.0", RootPort: "0000:b0:02.0", Vendor: vendor, Device: device, Class: 0x020000,
			SubVendor: vendor, SubDevice: 0x0001, Driver: driver, NUMA: 1,
			Speed: "16.0 GT/s PCIe", Width: 16, MaxSpeed: "16.0 GT/s PCIe", MaxWidth: 16, BridgeSpeed: "16.0 GT/s PCIe", BridgeWidth: 16,
			IBDev: ibdev, NodeGUID: "b6a9:fcff:fe3e:21a0", FW: fwFor(kernelMod),
			Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "100 Gb/sec (4X EDR)", LinkLayer: "Ethernet",
				Netdev: netdev, MAC: mac, MTU: 9000, OperUp: true, Addrs: []string{ip}}},
		}},
	}
}

func fwFor(mod string) string {
	if mod == "irdma" {
		return "1.70"
	}
	return "227.1.111.0"
}

// E810 is an Intel E810-C (ice + irdma) in RoCE v2 mode.
func E810() Host {
	return ethRoCE("e810-node04", "irdma", "ice", "irdma0", 0x8086, 0x1592, "ens801f0", "b4:96:91:3e:21:a0", "192.0.2.60/24",
		[]string{"irdma", "ice", "rdma_ucm", "rdma_cm", "iw_cm", "ib_cm", "ib_uverbs", "ib_core"})
}

// BCM57508 is a Broadcom NetXtreme-E BCM57508 (bnxt_en + bnxt_re), RoCE v2.
func BCM57508() Host {
	return ethRoCE("bnxt-node05", "bnxt_re", "bnxt_en", "bnxt_re0", 0x14e4, 0x1750, "ens3f0np0", "00:0a:f7:3e:21:a0", "192.0.2.70/24",
		[]string{"bnxt_re", "bnxt_en", "rdma_ucm", "rdma_cm", "iw_cm", "ib_cm", "ib_uverbs", "ib_core"})
}

// withVFs adds SR-IOV VFs of the host's first PF: mlx5_core bound, an
// RDMA device each, a netdev up without an address (a hypervisor passes
// the VF's traffic to a guest, or a CNI moves the netdev into a pod).
func withVFs(h Host, away ...bool) Host {
	pf := h.NICs[0]
	for i, gone := range away {
		vf := NIC{
			Addr: fmt.Sprintf("0000:3b:00.%d", 2+i), RootPort: pf.RootPort, Vendor: mellanox, Device: 0x1018, Class: 0x020000,
			SubVendor: mellanox, SubDevice: 0x0080, Driver: "mlx5_core", NUMA: pf.NUMA, Speed: "Unknown", MaxSpeed: "Unknown",
			IBDev: fmt.Sprintf("mlx5_%d", 2+i), Uverbs: 2 + i, PhysFn: pf.Addr,
			NodeGUID: fmt.Sprintf("0000:0000:0000:00%02x", 0x10+i), FW: pf.FW, HCAType: "MT4120", BoardID: pf.BoardID,
			Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "100 Gb/sec (4X EDR)", LinkLayer: "Ethernet",
				Netdev: fmt.Sprintf("ens1f0v%d", i), MAC: fmt.Sprintf("ae:5d:11:00:00:%02x", i), MTU: 9000, OperUp: true, Away: gone}},
		}
		h.NICs = append(h.NICs, vf)
	}
	return h
}

// withRepresentors puts the first PF in switchdev mode: its uplink port
// (phys_port_name p0) and one representor port per VF on the same RDMA
// device (mlx5_ib's representor ports), each representor netdev up
// without an address.
func withRepresentors(h Host, n int) Host {
	pf := &h.NICs[0]
	pf.Ports[0].PhysPortName = "p0"
	for i := 0; i < n; i++ {
		pf.Ports = append(pf.Ports, Port{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: pf.Ports[0].Rate, LinkLayer: "Ethernet",
			Netdev: fmt.Sprintf("ens1f0npf0vf%d", i), MAC: fmt.Sprintf("de:ad:be:ef:00:%02x", i), MTU: 9000, OperUp: true,
			PhysPortName: fmt.Sprintf("pf0vf%d", i)})
	}
	return h
}

// cx6IBTwoPorts is the ConnectX-6 InfiniBand host with a second port.
func cx6IBTwoPorts(second Port) Host {
	h := CX6IB()
	h.NICs[0].Ports = append(h.NICs[0].Ports, second)
	return h
}

// rmDevice hides an RDMA device from the tree as a non-matching network
// namespace does: the class link and the device directory.
func rmDevice(t *Tree, pciAddr, dev string) {
	t.Remove(path.Join("/sys/class/infiniband", dev))
	for p := range t.Files {
		if strings.Contains(p, pciAddr+"/infiniband/"+dev+"/") {
			delete(t.Files, p)
		}
	}
	for p := range t.Links {
		if strings.Contains(p, pciAddr+"/infiniband/"+dev+"/") {
			delete(t.Links, p)
		}
	}
}

func init() {
	register("mlx5-roce-lag-bond", func() *Tree {
		t := Build(CX6DxLAG())
		return t
	})
	// The same LAG with PFC off on the slaves: no priority is lossless.
	register("mlx5-roce-lag-pfc-off", func() *Tree {
		t := Build(CX6DxLAG())
		SetPFC(t, "ens2f0np0", 0)
		SetPFC(t, "ens2f1np1", 0)
		return t
	})
	// The address only on a VLAN of the port's netdev.
	register("roce-vlan-ip", func() *Tree {
		h := CX5RoCE()
		h.Hostname = "vlan-node08"
		p := &h.NICs[0].Ports[0]
		p.Uppers = []Upper{{Name: p.Netdev + ".100", VLAN: 100, Addrs: p.Addrs}}
		p.Addrs = nil
		t := Build(h)
		return t
	})
	// A hypervisor's PF with two VFs: one netdev on the host without an
	// address, one moved into a pod by a CNI.
	register("sriov-vfs-hypervisor", func() *Tree {
		h := withVFs(CX5RoCE(), false, true)
		h.Hostname = "hv-node02"
		t := Build(h)
		return t
	})
	// switchdev: the uplink device carries one representor port per VF.
	register("sriov-switchdev-representors", func() *Tree {
		h := withRepresentors(CX5RoCE(), 2)
		h.Hostname = "hv-node03"
		t := Build(h)
		return t
	})
	register("cxgb4-iwarp", func() *Tree { return Build(ChelsioT6()) })
	register("aws-efa", func() *Tree { return Build(AWSEFA()) })
	register("hfi1-omnipath", func() *Tree { return Build(OmniPath()) })
	register("irdma-e810-roce", func() *Tree {
		t := Build(E810())
		return t
	})
	register("bnxt-re-roce", func() *Tree {
		t := Build(BCM57508())
		return t
	})
	// Port 2 switched off by management (ibportstate … disable): phys Disabled.
	register("ib-port-disabled", func() *Tree {
		return Build(cx6IBTwoPorts(Port{State: "1: DOWN", PhysState: "3: Disabled", Rate: "10 Gb/sec (4X SDR)", LinkLayer: "InfiniBand",
			PortGUID: "b83f:d203:00a1:2c6f"}))
	})
	// A 4X HDR port that trained one lane: a lane or cable fault.
	register("ib-link-degraded-1x", func() *Tree {
		h := CX6IB()
		h.NICs[0].Ports[0].Rate = "50 Gb/sec (1X HDR)"
		return Build(h)
	})
	// An HDR100 split port: 2X is how it trains.
	register("ib-hdr100-split-2x", func() *Tree {
		h := CX6IB()
		h.NICs[0].Ports[0].Rate = "100 Gb/sec (2X HDR)"
		return Build(h)
	})
	// RoCE port whose netdev is admin-up without carrier: mlx5 reports the
	// port DOWN / Disabled; the cable or the switch port is the cause.
	register("roce-disabled-no-carrier", func() *Tree {
		h := CX5RoCE()
		p := &h.NICs[1].Ports[0]
		p.State, p.PhysState, p.OperUp, p.NoCarrier = "1: DOWN", "3: Disabled", false, true
		return Build(h)
	})
	// PFC on priority 3 but no default ToS set: rdma_cm, NCCL, UCX and
	// perftest send ToS 0, which lands on priority 0, without PFC.
	register("roce-tos-default-zero", func() *Tree {
		h := CX5RoCE()
		h.RoCETOS = ""
		return Build(h)
	})
	// A container in its own network namespace, RDMA netns mode exclusive:
	// the devices live in the host's namespace, invisible here, while the
	// uverbs class (not namespaced) still names them.
	register("netns-exclusive-container", func() *Tree {
		h := CX5RoCE()
		h.Hostname = "pod-7f9c"
		h.NetnsMode = "exclusive"
		for i := range h.NICs {
			h.NICs[i].Ports[0].Away = true
		}
		h.ExtraNetdevs = []sysfs.Netdev{{Name: "eth0", Index: 3, OperState: "up", AdminUp: true, Carrier: true, MTU: 1500, Addresses: []string{"10.244.1.7/24"}}}
		t := Build(h)
		for _, n := range h.NICs {
			rmDevice(t, n.Addr, n.IBDev)
		}
		t.Facts.Libibverbs.Devices = []sysfs.VerbsDevice{}
		t.Facts.RDMAResources = []sysfs.RDMAResource{}
		t.File("/.dockerenv", "")
		return t
	})
}
