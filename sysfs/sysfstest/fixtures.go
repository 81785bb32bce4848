package sysfstest

import (
	"fmt"
	"sort"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// fixtures maps a fixture name (testdata/hosts/<name>, written by
// Materialize) to its builder.
var fixtures = map[string]func() *Tree{}

// register adds a named fixture; called from init in the fixture files.
func register(name string, build func() *Tree) {
	if _, dup := fixtures[name]; dup {
		panic("sysfstest: duplicate fixture " + name)
	}
	fixtures[name] = build
}

// Fixtures lists the fixture names, sorted.
func Fixtures() []string {
	names := make([]string, 0, len(fixtures))
	for n := range fixtures {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Fixture builds the named fixture.
func Fixture(name string) (*Tree, error) {
	b, ok := fixtures[name]
	if !ok {
		return nil, fmt.Errorf("no fixture %q", name)
	}
	return b(), nil
}

// Mellanox/NVIDIA ConnectX IDs used by the fixtures.
const (
	mellanox = 0x15b3
	cx5      = 0x1017
	cx6      = 0x101b
)

var rdmaModulesMLX5 = []string{"mlx5_ib", "ib_uverbs", "mlx5_core", "mlxfw", "psample", "tls", "pci_hyperv_intf",
	"rdma_ucm", "rdma_cm", "iw_cm", "ib_cm", "ib_core"}

// CX5RoCE is a dual-port ConnectX-5 Ethernet host, mlx5, both ports ACTIVE
// at 100 Gb/s with IPv4 addresses and RoCE v2 GIDs, on a Gen3 x16 slot.
func CX5RoCE() Host {
	nic := func(fn int, netdev, mac, ip string) NIC {
		return NIC{
			Addr: fmt.Sprintf("0000:3b:00.%d", fn), RootPort: "0000:3a:00.0", Vendor: mellanox, Device: cx5, Class: 0x020000,
			SubVendor: mellanox, SubDevice: 0x0008, Driver: "mlx5_core", NUMA: 0,
			Speed: "8.0 GT/s PCIe", Width: 16, MaxSpeed: "8.0 GT/s PCIe", MaxWidth: 16, BridgeSpeed: "8.0 GT/s PCIe", BridgeWidth: 16,
			TotalVFs: 8, IBDev: fmt.Sprintf("mlx5_%d", fn), Uverbs: fn,
			NodeGUID: fmt.Sprintf("0c42:a103:002b:3c%02x", 0x4c+fn), FW: "16.35.2000 (MT_0000000008)", HCAType: "MT4119", BoardID: "MT_0000000008",
			Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "100 Gb/sec (4X EDR)", LinkLayer: "Ethernet",
				Netdev: netdev, MAC: mac, MTU: 9000, OperUp: true, Addrs: []string{ip}}},
		}
	}
	return Host{
		Hostname: "cx5-node01", Kernel: "6.1.0-18-amd64", Modules: rdmaModulesMLX5, Memlock: "unlimited", CapIPCLock: true, RoCETOS: "106",
		Providers: []string{"mlx5", "mlx4", "rxe", "siw", "bnxt_re", "efa", "irdma", "qedr", "hns", "cxgb4", "erdma", "mana"},
		NICs: []NIC{
			nic(0, "ens1f0np0", "0c:42:a1:2b:3c:4c", "192.0.2.10/24"),
			nic(1, "ens1f1np1", "0c:42:a1:2b:3c:4d", "198.51.100.10/24"),
		},
	}
}

// CX6IB is a single-port ConnectX-6 HDR InfiniBand host with a LID and an
// SM, running Rocky Linux 9.3 (its kernel and the RHEL-family layout: the
// distribution's rdma-core 46 in /usr/lib64).
func CX6IB() Host {
	return Host{
		Hostname: "cx6-ib-node07", Kernel: "5.14.0-362.8.1.el9_3.x86_64", Modules: append([]string{"ib_ipoib"}, rdmaModulesMLX5...),
		Memlock: "unlimited", CapIPCLock: true, Layout: Rocky93,
		Providers: []string{"mlx5", "mlx4", "rxe", "siw", "efa", "bnxt_re"},
		NICs: []NIC{{
			Addr: "0000:c1:00.0", RootPort: "0000:c0:01.1", Vendor: mellanox, Device: cx6, Class: 0x020700,
			SubVendor: mellanox, SubDevice: 0x0007, Driver: "mlx5_core", NUMA: 1,
			Speed: "16.0 GT/s PCIe", Width: 16, MaxSpeed: "16.0 GT/s PCIe", MaxWidth: 16, BridgeSpeed: "16.0 GT/s PCIe", BridgeWidth: 16,
			IBDev: "mlx5_0", Uverbs: 0, NodeGUID: "b83f:d203:00a1:2c6e", FW: "20.38.1002 (MT_0000000222)", HCAType: "MT4123", BoardID: "MT_0000000222",
			Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "200 Gb/sec (4X HDR)", LinkLayer: "InfiniBand",
				LID: 0x1a, SMLID: 0x1, PortGUID: "b83f:d203:00a1:2c6e"}},
		}},
	}
}

// RXE is a VM with Soft-RoCE on a virtio NIC: no RDMA NIC, one rxe device.
func RXE() Host {
	return Host{
		Hostname: "rxe-dev", Kernel: "6.1.0-18-amd64",
		Modules: []string{"rdma_rxe", "ip6_udp_tunnel", "udp_tunnel", "rdma_ucm", "rdma_cm", "iw_cm", "ib_cm", "ib_uverbs", "ib_core", "virtio_net"},
		Memlock: "unlimited", CapIPCLock: true,
		Providers: []string{"mlx5", "mlx4", "rxe", "siw", "efa"},
		NICs: []NIC{{Addr: "0000:00:03.0", Vendor: 0x1af4, Device: 0x1041, Class: 0x020000, SubVendor: 0x1af4, SubDevice: 0x1100,
			Driver: "virtio-pci", Ports: []Port{{Netdev: "enp0s3", MAC: "52:54:00:12:34:56", MTU: 1500, OperUp: true, Addrs: []string{"192.0.2.30/24"}}}}},
		Soft: []SoftDevice{{Name: "rxe0", Uverbs: 0, NodeGUID: "5054:00ff:fe12:3456",
			Port: Port{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "100 Gb/sec (4X EDR)", LinkLayer: "Ethernet",
				Netdev: "enp0s3", MAC: "52:54:00:12:34:56", MTU: 1500, OperUp: true, Addrs: []string{"192.0.2.30/24"}}}},
	}
}

func init() {
	register("cx5-roce-healthy", func() *Tree { return Build(CX5RoCE()) })
	register("cx6-ib-healthy", func() *Tree { return Build(CX6IB()) })
	register("rxe-softroce", func() *Tree { return Build(RXE()) })
	register("no-rdma-nic", func() *Tree {
		h := RXE()
		h.Hostname = "plain-vm"
		h.Soft = nil
		h.Modules = []string{"virtio_net", "net_failover", "failover"}
		h.Providers = nil
		return Build(h)
	})
	register("mlx5-ib-module-missing", func() *Tree {
		h := CX5RoCE()
		h.Modules = without(h.Modules, "mlx5_ib")
		for i := range h.NICs {
			h.NICs[i].IBDev = "" // without mlx5_ib no RDMA device registers
		}
		return Build(h)
	})
	// The RHEL-family layout without the mlx5 provider (its .driver file and
	// /usr/lib64/libibverbs/libmlx5-rdmav34.so deleted): libibverbs lists no
	// device, and the fix names the package that carries the providers there.
	register("rhel-provider-missing", func() *Tree {
		h := CX6IB()
		h.Providers = without(h.Providers, "mlx5")
		t := Build(h)
		t.Facts.Libibverbs.Devices = []sysfs.VerbsDevice{}
		return t
	})
	// A kernel too old to register the NICs' RDMA devices (an old kernel
	// that runs them only warns).
	register("kernel-too-old", func() *Tree {
		h := CX5RoCE()
		h.Kernel = "4.15.0-213-generic"
		for i := range h.NICs {
			h.NICs[i].IBDev = ""
		}
		return Build(h)
	})
}

func without(list []string, drop ...string) []string {
	var out []string
	for _, s := range list {
		keep := true
		for _, d := range drop {
			if s == d {
				keep = false
			}
		}
		if keep {
			out = append(out, s)
		}
	}
	return out
}
