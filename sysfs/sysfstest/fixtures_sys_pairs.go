package sysfstest

import "fmt"

// Fixtures of GPU–NIC pairs across sockets: two-socket GPU servers whose
// GPUs' nearest RDMA NIC is on the other NUMA node (nvidia-smi topo -m:
// SYS). Where the GPU's socket has no RDMA NIC at all that is the
// platform's wiring, and gpu.nic_affinity warns with the bandwidth
// consequence; the expectations file's gpu_nic_max_distance turns it into
// a failure; where the GPU's socket does have an RDMA NIC, a SYS pair is a
// misplaced pairing and fails.
//
// What was read: the kernel's PCI sysfs (drivers/pci/pci-sysfs.c:
// numa_node is the node of the device's host bridge, as the firmware's
// _PXM gives it; every function below one root port has its node);
// nvidia-smi topo -m's legend ("SYS = Connection traversing PCIe as well
// as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)", "NODE =
// Connection traversing PCIe as well as the interconnect between PCIe Host
// Bridges within a NUMA node"); NCCL's environment variables documentation
// (NCCL_NET_GDR_LEVEL: GPUDirect RDMA is used up to PXB by default, SYS is
// the level that would allow it across the inter-socket link).
// What was inferred: the wiring — four double-width GPUs in the slots of
// the second CPU's root ports and the RDMA NICs in slots of the first
// CPU, a layout 2U four-GPU servers' block diagrams show when the NIC
// slots (OCP 3.0 and the remaining x16 slots) hang off CPU 1; no
// particular model is claimed. Bus numbers follow Sapphire Rapids' one
// host bridge per root port (the healthy HGX fixture's shape); device IDs
// are the H100 PCIe (10de:2331) and the ConnectX-7 (15b3:1021) of the
// other GPU fixtures.

// SysPairsVerdict is the verdict a fixture of this file must get: the
// status of the check it is about and the finding it carries, with the
// expectations class line named (Expect, "" for none), and the exit code
// of the whole level-1 run.
type SysPairsVerdict struct {
	Fixture string
	Check   string
	Status  string // "pass", "warn", "fail", "error", "skip"
	Finding string // the finding ID the check must carry
	// Expect is one line of the host's class in the expectations file
	// ("gpu_nic_max_distance = NODE"); "" runs without expectations.
	Expect string
	Exit   int
}

// SysPairsVerdicts are the verdicts stated before the code was run against
// the fixtures.
var SysPairsVerdicts = []SysPairsVerdict{
	{Fixture: "gpu4-nics-other-socket", Check: "gpu.nic_affinity", Status: "warn", Finding: "gpu.nic_affinity/no-nic-on-socket", Exit: 0},
	{Fixture: "gpu4-nics-other-socket", Check: "gpu.nic_affinity", Status: "fail", Finding: "gpu.nic_affinity/farther-than-expected",
		Expect: "gpu_nic_max_distance = NODE", Exit: 23},
	{Fixture: "gpu4-nics-other-socket", Check: "gpu.nic_affinity", Status: "warn", Finding: "gpu.nic_affinity/no-nic-on-socket",
		Expect: "gpu_nic_max_distance = SYS", Exit: 0},
	{Fixture: "gpu4-one-nic-on-gpu-socket", Check: "gpu.nic_affinity", Status: "fail", Finding: "gpu.nic_affinity/across-sockets", Exit: 23},
}

// Sockets' buses in the fixtures of this file: each root port is alone
// below its host bridge (pci0000:BB), its device on bus BB+1.
var (
	sysPairsGPUHostBridges = []int{0x97, 0xa7, 0xb7, 0xc7} // NUMA node 1
	sysPairsNICHostBridges = []int{0x17, 0x27}             // NUMA node 0
)

// GPUsAcrossFromNICs is a two-socket Sapphire Rapids server with four H100
// PCIe GPUs below root ports of NUMA node 1 and two ConnectX-7 NDR NICs
// below root ports of NUMA node 0, everything else as the healthy HGX
// node (IOMMU in passthrough, nvidia_peermem, open kernel modules).
func GPUsAcrossFromNICs() Host {
	h := HGXH100()
	h.Hostname = "gpu4-node11"
	h.GPU.SysVendor, h.GPU.Product = "", ""
	h.GPU.IOMMUUnits = []string{"dmar0", "dmar1", "dmar2", "dmar3"}
	h.GPU.Bridges, h.GPU.GPUs, h.NICs = nil, nil, nil
	root := func(hb, numa int) string {
		addr := fmt.Sprintf("0000:%02x:01.0", hb)
		h.GPU.Bridges = append(h.GPU.Bridges, Bridge{Addr: addr, HostBridge: fmt.Sprintf("pci0000:%02x", hb), PortType: 4,
			Vendor: 0x8086, Device: 0x352a, NUMA: numa, Speed: gen5, Width: 16})
		return addr
	}
	for _, hb := range sysPairsGPUHostBridges {
		h.GPU.GPUs = append(h.GPU.GPUs, GPUDev{Addr: fmt.Sprintf("0000:%02x:00.0", hb+1), Parent: root(hb, 1), Vendor: 0x10de, Device: 0x2331,
			Class: 0x030200, Driver: "nvidia", NUMA: 1, Speed: gen5, Width: 16, MaxSpeed: gen5, MaxWidth: 16})
	}
	for i, hb := range sysPairsNICHostBridges {
		h.NICs = append(h.NICs, cx7IB(i, hb+1, 0, root(hb, 0)))
	}
	return h
}

func init() {
	// Every GPU on NUMA node 1, both RDMA NICs on node 0: each GPU's pair
	// is SYS and its socket has no NIC. Must get: gpu.nic_affinity warn
	// (no-nic-on-socket) on every GPU, exit 0; with gpu_nic_max_distance =
	// NODE in the host's class fail (farther-than-expected), exit 23; with
	// gpu_nic_max_distance = SYS still warn, exit 0.
	register("gpu4-nics-other-socket", func() *Tree { return Build(GPUsAcrossFromNICs()) })
	// The same server with its second NIC in a slot of node 1 (host bridge
	// pci0000:d7): two GPUs share it (NODE), the other two get the node-0
	// NIC although their own socket has one. Must get: gpu.nic_affinity
	// fail (across-sockets) on GPU2 and GPU3, exit 23.
	register("gpu4-one-nic-on-gpu-socket", func() *Tree {
		h := GPUsAcrossFromNICs()
		h.Hostname = "gpu4-node12"
		h.GPU.Bridges = append(h.GPU.Bridges, Bridge{Addr: "0000:d7:01.0", HostBridge: "pci0000:d7", PortType: 4,
			Vendor: 0x8086, Device: 0x352a, NUMA: 1, Speed: gen5, Width: 16})
		h.NICs[1] = cx7IB(1, 0xd8, 1, "0000:d7:01.0")
		return Build(h)
	})
}
