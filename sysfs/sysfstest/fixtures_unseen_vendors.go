package sysfstest

import "fmt"

// Fixtures of RDMA NICs of vendors other than Mellanox/NVIDIA, each as its
// driver registers it; the comments name the kernel source of the shape.

var allProviders = []string{"mlx5", "mlx4", "rxe", "siw", "bnxt_re", "efa", "irdma", "qedr", "hns", "cxgb4", "erdma", "mana"}

// oneNIC is a host with one RDMA NIC function.
func oneNIC(host, kernel string, mods []string, n NIC) Host {
	return Host{Hostname: host, Kernel: kernel, Modules: mods, Memlock: "unlimited", CapIPCLock: true,
		Providers: allProviders, NICs: []NIC{n}}
}

var cmModules = []string{"rdma_ucm", "rdma_cm", "iw_cm", "ib_cm", "ib_uverbs", "ib_core"}

// QedrRoCE is a Marvell FastLinQ QL41000 (1077:8070, qede + qedr) in RoCE
// mode: qedr registers "qedr%d" (qedr_register_device), node_type CA, link
// layer Ethernet; qedr_query_port reports a 25G link as 1X EDR
// (get_link_speed_and_width). qedr has no hw_counters.
func QedrRoCE() Host {
	return oneNIC("qedr-node01", "6.1.0-18-amd64", append([]string{"qedr", "qede", "qed"}, cmModules...), NIC{
		Addr: "0000:41:00.0", RootPort: "0000:40:01.1", Vendor: 0x1077, Device: 0x8070, Class: 0x020000,
		SubVendor: 0x1077, SubDevice: 0x0001, Driver: "qede", NUMA: 0,
		Speed: "8.0 GT/s PCIe", Width: 8, MaxSpeed: "8.0 GT/s PCIe", MaxWidth: 8, BridgeSpeed: "16.0 GT/s PCIe", BridgeWidth: 16,
		IBDev: "qedr0", NodeGUID: "f6e9:d4ff:fe8a:1b20", FW: "8.59.1.0",
		Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "25 Gb/sec (1X EDR)", LinkLayer: "Ethernet",
			Netdev: "ens1f0", MAC: "f4:e9:d4:8a:1b:20", MTU: 9000, OperUp: true, Addrs: []string{"192.0.2.80/24"}}},
	})
}

// QedrIWARP is the same card with the iWARP personality (qed's
// rdma_protocol = iwarp): qedr registers node_type RNIC and the port's GID
// is its MAC (qedr_iw_query_gid).
func QedrIWARP() Host {
	h := QedrRoCE()
	h.Hostname = "qedr-node02"
	h.NICs[0].NodeType = "4: RNIC"
	return h
}

// HNSRoCE is a Kunpeng 920 host (arm64, openEuler-like RHEL layout) with
// its on-die HNS3 NIC: integrated PCI functions on bus 7d (19e5:a222,
// 25GE RDMA), hns3 bound, hns_roce_hw_v2 registering "hns_%d"
// (hns_roce_register_device), node_type CA, RoCE.
func HNSRoCE() Host {
	nic := func(fn int, netdev, mac, ip string) NIC {
		return NIC{Addr: fmt.Sprintf("0000:7d:00.%d", fn), RootPort: "0000:7c:00.0", Vendor: 0x19e5, Device: 0xa222, Class: 0x020000,
			SubVendor: 0x19e5, SubDevice: 0x0454, Driver: "hns3", NUMA: 0, Uverbs: fn,
			IBDev: fmt.Sprintf("hns_%d", fn), NodeGUID: fmt.Sprintf("5a2b:74ff:fe1c:0%d00", fn), FW: "1.9.38.24",
			Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "25 Gb/sec (1X EDR)", LinkLayer: "Ethernet",
				Netdev: netdev, MAC: mac, MTU: 9000, OperUp: true, Addrs: []string{ip}}}}
	}
	h := Host{Hostname: "kunpeng-node01", Kernel: "5.10.0-136.12.0.86.oe2203sp1.aarch64",
		Modules: append([]string{"hns_roce_hw_v2", "hns3", "hnae3", "hclge"}, cmModules...), Memlock: "unlimited", CapIPCLock: true,
		Layout: Rocky93, Providers: allProviders,
		NICs: []NIC{nic(0, "enp125s0f0", "58:2b:74:1c:00:00", "192.0.2.90/24"), nic(1, "enp125s0f1", "58:2b:74:1c:01:00", "198.51.100.90/24")}}
	return h
}

// ERDMA is an Alibaba ECS instance with Elastic RDMA: erdma binds its own
// PCI function (1ded:107f) and registers "erdma_%d" as node_type RNIC
// (iWARP); it has no netdev of its own: erdma_netdev_event ties it to the
// virtio-net whose MAC matches, and erdma_query_gid returns that MAC.
func ERDMA() Host {
	return Host{Hostname: "ecs-erdma-01", Kernel: "5.10.134-16.al8.x86_64",
		Modules: append([]string{"erdma", "virtio_net"}, cmModules...), Memlock: "unlimited", CapIPCLock: true, Layout: Rocky93,
		Providers: allProviders,
		NICs: []NIC{
			{Addr: "0000:00:05.0", Vendor: 0x1af4, Device: 0x1000, Class: 0x020000, SubVendor: 0x1af4, SubDevice: 0x0001, Driver: "virtio-pci",
				Ports: []Port{{Netdev: "eth0", MAC: "00:16:3e:0a:11:22", MTU: 1500, OperUp: true, Addrs: []string{"172.16.0.10/24"}}}},
			{Addr: "0000:00:06.0", Vendor: 0x1ded, Device: 0x107f, Class: 0x020000, SubVendor: 0x1ded, SubDevice: 0x107f, Driver: "erdma",
				IBDev: "erdma_0", NodeType: "4: RNIC", NodeGUID: "0216:3eff:fe0a:1122", FW: "0.2.0",
				Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "100 Gb/sec (4X EDR)", LinkLayer: "Ethernet",
					MAC: "00:16:3e:0a:11:22"}}},
		}}
}

// X722IWARP is an Intel X722 (i40e, 8086:37d2) with irdma: iWARP only,
// node_type RNIC, "irdma%d" (irdma_ib_register_device).
func X722IWARP() Host {
	return oneNIC("x722-node01", "6.1.0-18-amd64", append([]string{"irdma", "i40e", "ice"}, cmModules...), NIC{
		Addr: "0000:3d:00.0", RootPort: "0000:3c:03.0", Vendor: 0x8086, Device: 0x37d2, Class: 0x020000,
		SubVendor: 0x8086, SubDevice: 0x0001, Driver: "i40e", NUMA: 0,
		IBDev: "irdma0", NodeType: "4: RNIC", NodeGUID: "a4bf:0100:0051:0000", FW: "0.2",
		Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "10 Gb/sec (1X QDR)", LinkLayer: "Ethernet",
			Netdev: "eno1", MAC: "a4:bf:01:51:00:00", MTU: 1500, OperUp: true, Addrs: []string{"192.0.2.100/24"}}},
	})
}

// E810IWARP is an E810 with irdma in iWARP mode (devlink param
// enable_iwarp, or roce_ena=0 before 6.x): node_type RNIC, MAC GID.
func E810IWARP() Host {
	h := E810()
	h.Hostname = "e810-iwarp01"
	h.NICs[0].NodeType = "4: RNIC"
	return h
}

// SIW is soft-iWARP on a plain NIC: "siw_<netdev>" style name is the
// admin's choice (rdma link add siw0 type siw netdev ...), node_type RNIC.
func SIW() Host {
	h := RXE()
	h.Hostname = "siw-dev"
	h.Modules = []string{"siw", "rdma_ucm", "rdma_cm", "iw_cm", "ib_cm", "ib_uverbs", "ib_core", "virtio_net"}
	h.Soft[0].Name = "siw0"
	return h
}

// EFAMany is a p5-like EC2 instance: 32 EFA functions (1d0f:efa2, named
// rdmapNsM by udev) and one ENA; the EFAs have no netdev and no address.
func EFAMany() Host {
	h := AWSEFA()
	h.Hostname = "ip-10-1-2-3"
	h.NICs = h.NICs[:1]
	for i := 0; i < 32; i++ {
		bus := 0x10 + i
		h.NICs = append(h.NICs, NIC{Addr: fmt.Sprintf("0000:%02x:00.0", bus), Vendor: 0x1d0f, Device: 0xefa2, Class: 0x020000,
			SubVendor: 0x1d0f, SubDevice: 0xefa2, Driver: "efa", Uverbs: i, IBDev: fmt.Sprintf("rdmap%ds0", bus),
			NodeType: "7: unspecified", NodeGUID: "0000:0000:0000:0000", FW: "0.0.0.0",
			Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "100 Gb/sec (4X EDR)", LinkLayer: "Unknown",
				PortGUID: fmt.Sprintf("0a1f:3aff:fe55:%04x", i)}}})
	}
	return h
}

// UnknownDriverNIC is an Emulex OneConnect Skyhawk (10df:0720) with RoCE:
// be2net binds the function and carries the netdev, ocrdma
// (drivers/infiniband/hw/ocrdma, ocrdma_register_device: "ocrdma%d") puts
// its RDMA device on the same function — a driver outside the table.
func UnknownDriverNIC() Host {
	return oneNIC("ocrdma-node01", "6.12.0-1-amd64", append([]string{"ocrdma", "be2net"}, cmModules...), NIC{
		Addr: "0000:c3:00.0", RootPort: "0000:c0:01.1", Vendor: 0x10df, Device: 0x0720, Class: 0x020000,
		SubVendor: 0x10df, SubDevice: 0xe800, Driver: "be2net", NUMA: 1,
		Speed: "8.0 GT/s PCIe", Width: 8, MaxSpeed: "8.0 GT/s PCIe", MaxWidth: 8, BridgeSpeed: "16.0 GT/s PCIe", BridgeWidth: 16,
		IBDev: "ocrdma0", NodeGUID: "0290:faff:fe01:0200", FW: "12.0.1169.0",
		Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "10 Gb/sec (1X QDR)", LinkLayer: "Ethernet",
			Netdev: "enp195s0", MAC: "00:90:fa:01:02:00", MTU: 9000, OperUp: true, Addrs: []string{"192.0.2.110/24"}}},
	})
}

func init() {
	register("qedr-roce", func() *Tree { return Build(QedrRoCE()) })
	register("qedr-iwarp", func() *Tree { return Build(QedrIWARP()) })
	register("hns-roce-arm64", func() *Tree { return buildArm64(HNSRoCE()) }) // an aarch64 loader cache
	register("erdma-ecs", func() *Tree { return Build(ERDMA()) })
	register("x722-iwarp", func() *Tree { return Build(X722IWARP()) })
	register("irdma-e810-iwarp", func() *Tree { return Build(E810IWARP()) })
	register("siw-softiwarp", func() *Tree { return Build(SIW()) })
	register("efa-p5-many", func() *Tree { return Build(EFAMany()) })
	register("unknown-driver-nic", func() *Tree { return Build(UnknownDriverNIC()) })
}

// MANA is an Azure VM with Accelerated Networking and MANA RDMA: the MANA
// VF (1414:00ba, mana + mana_ib, on a Hyper-V PCI domain) carries the
// netdev enP30832s1 with no address of its own; hv_netvsc's synthetic eth0
// is its master (netvsc_vf_join: netdev_master_upper_dev_link) and holds
// the IP. mana_ib registers "mana_%d"; mana_ib_query_port reports 4X EDR,
// ACTIVE when the VF netdev has carrier, link layer Ethernet, IP GIDs —
// the core adds eth0's addresses as the port's GIDs (roce_gid_mgmt,
// upper devices).
func MANA() Host {
	return Host{Hostname: "azvm-mana01", Kernel: "6.8.0-1021-azure",
		Modules: append([]string{"mana_ib", "mana", "hv_netvsc", "pci_hyperv"}, cmModules...), Memlock: "unlimited", CapIPCLock: true,
		Providers: allProviders,
		NICs: []NIC{{Addr: "7870:00:00.0", Vendor: 0x1414, Device: 0x00ba, Class: 0x020000, SubVendor: 0x1414, SubDevice: 0x00ba,
			Driver: "mana", IBDev: "mana_0", NodeGUID: "6245:bdff:fe12:3456", FW: "0.0.0.0",
			Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "100 Gb/sec (4X EDR)", LinkLayer: "Ethernet",
				Netdev: "enP30832s1", MAC: "60:45:bd:12:34:56", MTU: 1500, OperUp: true, Bond: "eth0", NetvscMaster: true}}}},
		Bonds: []Bond{{Name: "eth0", MAC: "60:45:bd:12:34:56", MTU: 1500, Addrs: []string{"10.0.0.4/24"}, Netvsc: true}},
	}
}

func init() {
	register("mana-azure", func() *Tree { return Build(MANA()) })
}

// BCM57508PMA is the BCM57508 on a kernel whose bnxt_re answers PMA MADs
// (bnxt_re_process_mad, PerfMgmt class port counters from the extended
// stats): ports/1/counters beside its hw_counters.
func BCM57508PMA() Host {
	h := BCM57508()
	h.Hostname = "bnxt-node06"
	h.Kernel = "6.12.0-1-amd64"
	h.NICs[0].PMA = true
	return h
}

// RXEOnVLAN is Soft-RoCE bound to a VLAN netdev (rdma link add rxe0 type
// rxe netdev enp0s3.100): rxe's port netdev is the VLAN, its GIDs the
// VLAN's addresses; the lower device carries no address.
func RXEOnVLAN() Host {
	h := RXE()
	h.Hostname = "rxe-vlan-dev"
	h.Modules = append([]string{"8021q"}, h.Modules...)
	h.NICs[0].Ports[0].Addrs = nil
	h.NICs[0].Ports[0].Uppers = []Upper{{Name: "enp0s3.100", VLAN: 100, Addrs: []string{"192.0.2.31/24"}}}
	h.Soft[0].Port.Netdev = "enp0s3.100"
	h.Soft[0].Port.Addrs = []string{"192.0.2.31/24"}
	return h
}

func init() {
	register("bnxt-re-pma", func() *Tree { return Build(BCM57508PMA()) })
	register("rxe-on-vlan", func() *Tree { return Build(RXEOnVLAN()) })
}

// USNIC is a Cisco UCS host with a VIC usNIC VF (1137:0071, enic bound,
// usnic_verbs): a driver outside the table. usnic registers "usnic_%d"
// with node_type 6 "usNIC UDP" (RDMA_NODE_USNIC_UDP, core/sysfs.c
// show_node_type), link layer Ethernet (usnic_ib_port_link_layer), and
// one GID built from the MAC and the IPv4 address — no RoCE GIDs.
func USNIC() Host {
	return oneNIC("ucs-usnic01", "5.14.0-362.8.1.el9_3.x86_64", append([]string{"usnic_verbs", "enic"}, cmModules...), NIC{
		Addr: "0000:0b:00.1", RootPort: "0000:0a:00.0", Vendor: 0x1137, Device: 0x0071, Class: 0x020000,
		SubVendor: 0x1137, SubDevice: 0x012c, Driver: "enic", NUMA: 0,
		Speed: "8.0 GT/s PCIe", Width: 16, MaxSpeed: "8.0 GT/s PCIe", MaxWidth: 16, BridgeSpeed: "8.0 GT/s PCIe", BridgeWidth: 16,
		IBDev: "usnic_0", NodeType: "6: usNIC UDP", NodeGUID: "025a:4bff:fe1c:2d3e", FW: "4.2(3b)",
		Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "40 Gb/sec (4X QDR)", LinkLayer: "Ethernet",
			Netdev: "enp11s0f1", MAC: "00:5a:4b:1c:2d:3e", MTU: 9000, OperUp: true, Addrs: []string{"192.0.2.120/24"}}},
	})
}

func init() {
	register("usnic-cisco-vic", func() *Tree { return Build(USNIC()) })
}

// X722I40IW is the X722 on a kernel before 5.14, where i40iw (not irdma)
// drives its iWARP engine: device "i40iw%d" (i40iw_register_rdma_device),
// node_type RNIC, and rdma-core's i40iw provider (libi40iw, replaced by
// irdma in rdma-core 36). The library layout is the generator's default;
// the provider list is what an rdma-core older than 36 installs.
func X722I40IW() Host {
	h := X722IWARP()
	h.Hostname = "x722-node02"
	h.Kernel = "5.4.0-150-generic"
	h.Modules = append([]string{"i40iw", "i40e"}, cmModules...)
	h.NICs[0].IBDev = "i40iw0"
	h.Providers = []string{"mlx5", "mlx4", "rxe", "siw", "bnxt_re", "efa", "i40iw", "qedr", "hns", "cxgb4"}
	return h
}

func init() {
	register("x722-i40iw-old-kernel", func() *Tree { return Build(X722I40IW()) })
}
