package sysfstest

import "fmt"

// Fixtures of Mellanox/NVIDIA host shapes beyond the reference ones: an
// mlx4 VPI card with one port of each link layer, a ConnectX-7 NDR split
// port, bonds that are not a RoCE LAG, a LAG with one slave down, IPv6-only
// RoCE and an address on a macvlan. The comments name the kernel source.

var rdmaModulesMLX4 = []string{"mlx4_ib", "mlx4_en", "ib_uverbs", "mlx4_core", "rdma_ucm", "rdma_cm", "iw_cm", "ib_cm", "ib_core"}

// CX3ProVPI is a dual-port ConnectX-3 Pro (15b3:1007) with port 1 set to
// InfiniBand and port 2 to Ethernet (mlx4_core's port_type_array=1,2, or
// mlx4_port2 = eth): one RDMA device, mlx4_0, whose port 1 has an IB link
// layer and a LID, and port 2 RoCE over mlx4_en's netdev (dev_port 1: the
// "d1" name); IPoIB's ib0 on port 1 sits beside it below the same PCI
// function. The PCI function has no current_link_* files (as kernels
// before 4.13 show every function): pci.link cannot judge it and says so.
func CX3ProVPI() Host {
	return Host{
		Hostname: "cx3-vpi-node04", Kernel: "5.15.0-91-generic", Modules: append([]string{"ib_ipoib"}, rdmaModulesMLX4...), Memlock: "unlimited", CapIPCLock: true, RoCETOS: "106",
		Providers: []string{"mlx5", "mlx4", "rxe", "siw", "efa"},
		NICs: []NIC{{
			Addr: "0000:04:00.0", RootPort: "0000:00:02.0", Vendor: mellanox, Device: 0x1007, Class: 0x020000,
			SubVendor: mellanox, SubDevice: 0x0006, Driver: "mlx4_core", NUMA: 0, TotalVFs: 0,
			IBDev: "mlx4_0", Uverbs: 0, NodeGUID: "e41d:2d03:0071:a2b0", FW: "2.42.5000", HCAType: "MT4103", BoardID: "MT_1090111023",
			Ports: []Port{
				{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "56 Gb/sec (4X FDR)", LinkLayer: "InfiniBand",
					LID: 0x7, SMLID: 0x1, PortGUID: "e41d:2d03:0071:a2b1",
					Netdev: "ib0", MAC: ipoibAddr(0x48, "e41d:2d03:0071:a2b1"), MTU: 4092, OperUp: true, Addrs: []string{"10.10.0.54/16"}},
				{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "40 Gb/sec (4X QDR)", LinkLayer: "Ethernet",
					Netdev: "enp4s0d1", MAC: "e4:1d:2d:71:a2:b2", MTU: 9000, OperUp: true, Addrs: []string{"192.0.2.54/24"}},
			},
		}},
	}
}

// CX7NDR200 is a ConnectX-7 (15b3:1021, MT4129) InfiniBand port on a
// split NDR cable: 2 lanes of NDR, 200 Gb/s, on a Gen5 x16 slot.
func CX7NDR200() Host {
	h := CX6IB()
	h.Hostname = "cx7-ndr-node11"
	n := &h.NICs[0]
	n.Device, n.HCAType, n.BoardID, n.FW = 0x1021, "MT4129", "MT_0000000838", "28.39.1002 (MT_0000000838)"
	n.Speed, n.MaxSpeed, n.BridgeSpeed = "32.0 GT/s PCIe", "32.0 GT/s PCIe", "32.0 GT/s PCIe"
	n.Ports[0].Rate = "200 Gb/sec (2X NDR)"
	return h
}

// CX6DxActiveBackup is two ConnectX-6 Dx cards, one port each used, whose
// netdevs are slaves of one active-backup bond: mlx5/core/lag pairs only
// the PFs of one card (mlx5_lag_dev is per device), so there is no RoCE
// LAG and each PF keeps its RDMA device, mlx5_0 and mlx5_1. bond0 holds
// the address; the active slave's port carries bond0's GIDs, the backup's
// only its own default GIDs (roce_gid_mgmt.c). Bonding gives the backup
// slave bond0's MAC (fail_over_mac none).
func CX6DxActiveBackup() Host {
	h := CX6DxLAG()
	h.Hostname = "ab-node05"
	h.NICs[0].IBDev, h.NICs[0].Uverbs = "mlx5_0", 0
	b := &h.NICs[1]
	b.Addr, b.RootPort, b.IBDev, b.Uverbs = "0000:b1:00.0", "0000:b0:01.0", "mlx5_1", 1
	b.NodeGUID = "a088:c203:0051:0c40"
	b.Ports[0].Netdev, b.Ports[0].MAC, b.Ports[0].PhysPortName = "ens3f0np0", h.NICs[0].Ports[0].MAC, "p0"
	h.Bonds[0].Mode = "active-backup 1"
	h.Bonds[0].ActiveSlave = "ens2f0np0"
	return h
}

func init() {
	register("mlx4-vpi-ib-eth", func() *Tree { return Build(CX3ProVPI()) })
	register("cx7-ndr200-split", func() *Tree { return Build(CX7NDR200()) })
	register("mlx5-bond-active-backup", func() *Tree { return Build(CX6DxActiveBackup()) })
	// A RoCE LAG whose second slave lost its carrier: the bond, and with
	// it mlx5_bond_0's port, stay up on the first (mlx5_ib's query_port
	// reads the LAG's bond netdev, mlx5_lag_get_roce_netdev).
	register("lag-one-slave-down", func() *Tree {
		h := CX6DxLAG()
		h.Hostname = "lag-node13"
		p := &h.NICs[1].Ports[0]
		p.OperUp, p.NoCarrier = false, true
		return Build(h)
	})
	// IPv6 only: the GIDs are the link-local and the global IPv6 address.
	register("roce-ipv6-only", func() *Tree {
		h := CX5RoCE()
		h.Hostname = "v6-node09"
		for i := range h.NICs {
			h.NICs[i].Ports[0].Addrs = []string{fmt.Sprintf("2001:db8:%d::10/64", 10+i)}
		}
		return Build(h)
	})
	// A macvlan on the port's netdev carries the address (a container
	// network's parent interface); the port's netdev has none.
	register("roce-macvlan-ip", func() *Tree {
		h := CX5RoCE()
		h.Hostname = "mvl-node03"
		p := &h.NICs[0].Ports[0]
		p.Uppers = []Upper{{Name: "mvl0", MAC: "02:42:c0:00:02:0a", Addrs: p.Addrs}}
		p.Addrs = nil
		return Build(h)
	})
}

// CX6IBIPoIB is the ConnectX-6 HDR host with IPoIB up: ib0 on the port,
// in datagram mode (MTU 4092 on a 4096-byte IB MTU) with the address,
// and a partition child ib0.8001 with its own. IPoIB netdevs are no RoCE
// netdevs: the port's GID table is the port GID alone.
func CX6IBIPoIB() Host {
	h := CX6IB()
	h.Hostname = "ib-ipoib-node02"
	p := &h.NICs[0].Ports[0]
	p.Netdev, p.MTU, p.OperUp, p.Addrs = "ib0", 4092, true, []string{"10.10.0.7/16"}
	p.MAC = ipoibAddr(0x1100, p.PortGUID)
	p.PKeyChildren = []PKeyChild{{Name: "ib0.8001", PKey: 0x8001, Addrs: []string{"10.20.0.7/16"}}}
	return h
}

func init() {
	register("ib-ipoib-pkey-child", func() *Tree { return Build(CX6IBIPoIB()) })
}

// BF3Host is the host side of a BlueField-3 DPU (15b3:a2dc, MT41692) in
// DPU mode with two sub-functions made on the host PF (devlink port add
// … flavour pcisf): each SF is an auxiliary device mlx5_core.sf.N below
// the PF with its own netdev and RDMA device, mlx5_2 and mlx5_3. The SFs'
// netdevs carry no address on the host: they are handed to containers or
// services that address them themselves.
func BF3Host() Host {
	h := CX5RoCE()
	h.Hostname = "bf3-host01"
	h.NICs = h.NICs[:1]
	n := &h.NICs[0]
	n.Device, n.HCAType, n.BoardID, n.FW = 0xa2dc, "MT41692", "MT_0000000884", "32.39.2048 (MT_0000000884)"
	n.Speed, n.MaxSpeed, n.BridgeSpeed = "32.0 GT/s PCIe", "32.0 GT/s PCIe", "32.0 GT/s PCIe"
	n.Ports[0].Rate = "200 Gb/sec (4X HDR)"
	sf := func(i, num int, netdev, mac string) SF {
		return SF{Index: i, SFNum: num, IBDev: fmt.Sprintf("mlx5_%d", i), Uverbs: i, NodeGUID: fmt.Sprintf("0c42:a103:002b:3d%02x", 0x10+i),
			Port: Port{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "200 Gb/sec (4X HDR)", LinkLayer: "Ethernet",
				Netdev: netdev, MAC: mac, MTU: 1500, OperUp: true}}
	}
	n.SFs = []SF{sf(2, 88, "enp59s0f0s88", "02:a1:2b:3c:00:58"), sf(3, 89, "enp59s0f0s89", "02:a1:2b:3c:00:59")}
	return h
}

func init() {
	register("bf3-subfunctions", func() *Tree { return Build(BF3Host()) })
}
