package sysfstest

import (
	"path"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Fixtures of the hardware path: PCIe link, RDMA and uverbs devices, and the
// libibverbs installation.

// CX7IB is a ConnectX-7 NDR InfiniBand card: PCIe Gen5 x16.
func CX7IB() Host {
	h := CX6IB()
	h.Hostname = "cx7-ib-node03"
	n := &h.NICs[0]
	n.Device = 0x1021
	n.MaxSpeed, n.MaxWidth = "32.0 GT/s PCIe", 16
	n.Speed, n.Width = "32.0 GT/s PCIe", 16
	n.BridgeSpeed, n.BridgeWidth = "32.0 GT/s PCIe", 16
	n.FW, n.HCAType, n.BoardID = "28.39.1002 (MT_0000000838)", "MT4129", "MT_0000000838"
	n.Ports[0].Rate = "400 Gb/sec (4X NDR)"
	return h
}

func init() {
	// A x16 card trained at x8: a card not fully seated, or a riser.
	register("pcie-degraded", func() *Tree {
		h := CX5RoCE()
		h.Hostname = "cx5-degraded"
		h.NICs[0].Width = 8
		h.NICs[1].Width = 8
		return Build(h)
	})
	// A Gen5 card in a Gen4 slot: trained at Gen4, which is all the slot can do.
	register("gen5-card-gen4-slot", func() *Tree {
		h := CX7IB()
		h.NICs[0].Speed, h.NICs[0].BridgeSpeed = "16.0 GT/s PCIe", "16.0 GT/s PCIe"
		return Build(h)
	})
	// mlx5_ib is loaded but the second function registered no RDMA device
	// (firmware, enable_rdma off, …): kernel.modules passes, rdma.devices fails.
	register("no-ib-device", func() *Tree {
		h := CX5RoCE()
		h.NICs[1].IBDev = ""
		return Build(h)
	})
	// A container that sees the host's /sys but was given no /dev/infiniband.
	register("uverbs-node-missing", func() *Tree {
		t := Build(CX5RoCE())
		t.File("/.dockerenv", "")
		RemoveDevNode(t, sysfs.DevInfiniband)
		return t
	})
	// libibverbs.so.1 points at a file that was deleted after the last ldconfig.
	register("libibverbs-dangling-link", func() *Tree {
		t := Build(CX5RoCE())
		t.Remove(path.Join(libDir, "libibverbs.so.1.14.44.0"))
		t.Facts.Libibverbs = &sysfs.VerbsEnumeration{LoadError: "libibverbs.so.1: cannot open shared object file: No such file or directory", Devices: []sysfs.VerbsDevice{}}
		return t
	})
	// The distribution's rdma-core plus a second libibverbs in /usr/lib64
	// (a vendor stack's), both in the loader cache; the vendor copy wins.
	register("libibverbs-two-copies", func() *Tree {
		t := Build(CX5RoCE())
		const lib64 = "/usr/lib64"
		t.File(path.Join(lib64, "libibverbs.so.1.14.56.0"), elfStub("libibverbs.so.1"))
		t.Link(path.Join(lib64, "libibverbs.so.1"), "libibverbs.so.1.14.56.0")
		t.File(path.Join(lib64, "libmlx5.so.1.24.56.0"), elfStub("libmlx5.so.1"))
		t.Link(path.Join(lib64, "libmlx5.so.1"), "libmlx5.so.1.24.56.0")
		t.Link(path.Join(lib64, "libibverbs", "libmlx5-rdmav34.so"), "../libmlx5.so.1.24.56.0")
		t.File("/etc/ld.so.conf.d/mlnx-ofed.conf", lib64+"\n")
		WriteLDCache(t)
		t.Facts.Libibverbs.LibraryPath = path.Join(lib64, "libibverbs.so.1")
		return t
	})
	// rdma-core's library without the mlx5 provider: libibverbs lists no device.
	register("provider-missing", func() *Tree {
		h := CX5RoCE()
		h.Providers = without(h.Providers, "mlx5")
		t := Build(h)
		t.Facts.Libibverbs.Devices = []sysfs.VerbsDevice{}
		return t
	})
	// The first ConnectX-5 port is handed to vfio-pci (driverctl set its
	// driver_override) for a VM: the host has no netdev and no RDMA device for
	// it, pci.device fails naming vfio-pci.
	register("mlx5-vfio-passthrough", func() *Tree {
		h := CX5RoCE()
		h.Hostname = "cx5-vfio-host"
		h.Modules = append([]string{"vfio_pci", "vfio_pci_core", "vfio_iommu_type1", "vfio"}, h.Modules...)
		n := &h.NICs[0]
		n.Driver, n.IBDev, n.Ports = "vfio-pci", "", nil
		t := Build(h)
		t.Attr(path.Join(pciDir(t, n.Addr), "driver_override"), "vfio-pci")
		return t
	})
	// No libibverbs at all on a host whose kernel side is complete.
	register("libibverbs-missing", func() *Tree {
		h := CX5RoCE()
		h.Providers = nil
		return Build(h)
	})
}
