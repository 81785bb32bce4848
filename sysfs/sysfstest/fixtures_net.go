package sysfstest

import (
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Fixtures of the memlock, port, RoCE, lossless and counter checks.

// CX3VPI is a dual-port ConnectX-3 Pro (mlx4) InfiniBand host: one RDMA
// device with two ports, both ACTIVE with LIDs.
func CX3VPI() Host {
	port := func(lid int, guid string) Port {
		return Port{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "56 Gb/sec (4X FDR)", LinkLayer: "InfiniBand",
			LID: lid, SMLID: 0x1, PortGUID: guid}
	}
	return Host{
		Hostname: "cx3-node03", Kernel: "6.1.0-18-amd64",
		Modules: []string{"ib_ipoib", "mlx4_ib", "mlx4_en", "ib_uverbs", "mlx4_core", "rdma_ucm", "rdma_cm", "iw_cm", "ib_cm", "ib_core"},
		Memlock: "unlimited", CapIPCLock: true,
		Providers: []string{"mlx5", "mlx4", "rxe", "siw"},
		NICs: []NIC{{
			Addr: "0000:81:00.0", RootPort: "0000:80:02.0", Vendor: mellanox, Device: 0x1007, Class: 0x028000,
			SubVendor: mellanox, SubDevice: 0x0006, Driver: "mlx4_core", NUMA: 1,
			Speed: "8.0 GT/s PCIe", Width: 8, MaxSpeed: "8.0 GT/s PCIe", MaxWidth: 8, BridgeSpeed: "8.0 GT/s PCIe", BridgeWidth: 8,
			IBDev: "mlx4_0", Uverbs: 0, NodeGUID: "0002:c903:00a1:b2c0", FW: "2.42.5000", HCAType: "MT4103", BoardID: "MT_1090111023",
			Ports: []Port{port(0x11, "0002:c903:00a1:b2c1"), port(0x12, "0002:c903:00a1:b2c2")},
		}},
	}
}

func init() {
	register("memlock-64k", func() *Tree {
		h := CX5RoCE()
		h.Memlock = "65536" // the kernel's default before Linux 5.16
		h.CapIPCLock = false
		return Build(h)
	})
	register("port-down", func() *Tree {
		h := CX5RoCE()
		p := &h.NICs[1].Ports[0]
		p.State, p.PhysState, p.OperUp = "1: DOWN", "2: Polling", false // cable out
		return Build(h)
	})
	register("ib-no-sm", func() *Tree {
		h := CX6IB()
		p := &h.NICs[0].Ports[0]
		p.State, p.LID, p.SMLID = "2: INIT", 0, 0 // link up, no subnet manager configured it
		return Build(h)
	})
	register("multiport-one-down", func() *Tree {
		h := CX3VPI()
		p := &h.NICs[0].Ports[1]
		p.State, p.PhysState, p.LID, p.SMLID = "1: DOWN", "2: Polling", 0, 0
		return Build(h)
	})
	register("roce-no-ip", func() *Tree {
		h := CX5RoCE()
		h.NICs[0].Ports[0].Addrs = nil
		return Build(h)
	})
	register("roce-v1-default", func() *Tree {
		t := Build(CX5RoCE())
		// rdma_cm's configfs directory made for both devices; mlx5_0 left on v1.
		// A made directory shows default_roce_tos too, at the kernel's 0.
		t.Attr(sysfs.RoCEModePath("mlx5_0", 1), "IB/RoCE v1")
		t.Attr(sysfs.RoCEModePath("mlx5_1", 1), "RoCE v2")
		t.Attr(sysfs.RoCETOSPath("mlx5_0", 1), "0")
		t.Attr(sysfs.RoCETOSPath("mlx5_1", 1), "0")
		return t
	})
	register("pfc-off", func() *Tree {
		t := Build(CX5RoCE())
		SetPFC(t, "ens1f0np0", 0)
		SetPFC(t, "ens1f1np1", 0)
		return t
	})
	register("ecn-off-on-pfc-priority", func() *Tree {
		t := Build(CX5RoCE())
		SetECN(t, "ens1f1np1", RoCEPriority, false, "roce_np", "roce_rp")
		return t
	})
	register("counters-saturated", func() *Tree {
		t := Build(CX6IB())
		SetCounter(t, "mlx5_0", 1, "counters", "link_downed", "255")
		SetCounter(t, "mlx5_0", 1, "counters", "symbol_error", "65535")
		SetCounter(t, "mlx5_0", 1, "counters", "port_rcv_errors", "7")
		return t
	})
	// Receive errors beyond infiniband-diags' PortRcvErrors threshold (10).
	register("counters-above-threshold", func() *Tree {
		t := Build(CX6IB())
		SetCounter(t, "mlx5_0", 1, "counters", "port_rcv_errors", "12")
		return t
	})
	register("counters-na-no-pma", func() *Tree {
		t := Build(CX5RoCE())
		// A function whose PMA the driver cannot reach: every legacy counter says so.
		SetAllCounters(t, "mlx5_1", 1, "counters", "N/A (no PMA)")
		return t
	})
}
