package sysfstest

import (
	"fmt"
	"path"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Fixtures of platforms built around RDMA that the bare-metal reference
// fixtures do not cover: AWS EFA instances (p5/p5e, trn1/trn1n), OCI bare
// metal RoCE, GCP A3 (GPUDirect-TCPX/TCPXO on gVNIC, no RDMA) and A3
// Ultra/A4 (ConnectX-7 VFs with RoCE), Broadcom Thor 2, BlueField-3 in DPU
// and NIC mode, AMD Pensando Pollara (ionic), Intel Gaudi, Cornelis
// Omni-Path, two rdma-core copies and a container image without
// providers. Each fixture's comment says what was read, what was inferred,
// and the verdict it must get at level 1 (PlatformVerdicts, stated before
// the code was run against it).

// PlatformVerdict is the verdict a fixture of this file must get: the
// status of the check it is about, with the finding named, and the exit
// code of the whole level-1 run.
type PlatformVerdict struct {
	Fixture        string
	Check          string
	Status         string // "pass", "warn", "fail", "error", "skip"
	Finding        string // the finding ID the check must carry ("" = none named)
	ExpectLossless bool   // run with --expect-lossless
	Exit           int
	// Healthy fixtures must show no warn, fail or error in any check.
	Healthy bool
	// Says and Never are texts the check's summary, details and remedy
	// must and must not contain: advice that fits the platform, and
	// advice that cannot be carried out there.
	Says, Never []string
}

// PlatformVerdicts are the verdicts stated before the code was run against
// the fixtures; the checks' tests assert each.
var PlatformVerdicts []PlatformVerdict

// stated registers a fixture with its stated verdict.
func stated(name string, build func() *Tree, verdicts ...PlatformVerdict) {
	register(name, build)
	for _, v := range verdicts {
		v.Fixture = name
		PlatformVerdicts = append(PlatformVerdicts, v)
	}
}

// ubuntu2204 is Ubuntu 22.04 on x86-64 (read: Ubuntu's multiarch layout,
// as Debian's; jammy's glibc 2.35) with the rdma-core release the AWS EFA
// installer and NVIDIA's DOCA packages ship (inferred: 50, the noble
// release, stands for "a current rdma-core").
var ubuntu2204 = debianMultiarch("x86_64-linux-gnu", ubuntuJammyOSRelease, "50", "ldconfig (Ubuntu GLIBC 2.35-0ubuntu3.8) stable release version 2.35")

const ubuntuJammyOSRelease = `PRETTY_NAME="Ubuntu 22.04.5 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.5 LTS (Jammy Jellyfish)"
VERSION_CODENAME=jammy
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
UBUNTU_CODENAME=jammy
`

// --- AWS EFA -----------------------------------------------------------
//
// Read: the kernel's drivers/infiniband/hw/efa (efa_main.c registers the
// device "efa_%d", renamed rdmap<bus>s<slot> by rdma-core's udev rule;
// efa_query_port: ACTIVE/LinkUp, 4X EDR-style rate from the link speed,
// no LID; efa_verbs.c: EFA_DEFINE_PORT_STATS / EFA_DEFINE_DEVICE_STATS in
// hw_counters, no process_mad, so no PMA counters; node_type
// RDMA_NODE_UNSPECIFIED, link layer "Unknown"; no netdev of its own — the
// ENA beside it carries IP). rdma-core's providers/efa matches 1d0f:efa0
// … efa3. efadv_query_device reports EFADV_DEVICE_ATTR_CAPS_RDMA_READ
// (trn1, p4d and later): a verbs query, not a sysfs file, so level 1
// cannot see it and judges nothing about it. EC2's instance pages: p5.48xlarge
// and p5e.48xlarge have 8 H100 / H200 GPUs and 32 EFA network cards
// (3200 Gbps), trn1.32xlarge 8 EFAs (800 Gbps) and trn1n.32xlarge 16
// (1600 Gbps), each with 16 Trainium chips (1d0f:7164, the neuron driver,
// "System peripheral" in published lspci listings).
// Inferred: the guests' PCIe tree (each GPU below one switch with its four
// EFAs, as `nvidia-smi topo -m` listings of p5 show PXB between a GPU and
// its four NICs), bus numbers, NUMA placement (GPUs 0–3 node 0), the EFA
// generation per instance (efa2 for p5, efa1 for trn1), the kernel
// release of the Deep Learning AMI.

// efaNIC is one EFA function, ACTIVE, named as rdma-core's udev rule names
// it (rdmap<bus>s0).
func efaNIC(bus, i int, device uint16, numa int, parent string) NIC {
	return NIC{Addr: fmt.Sprintf("0000:%02x:00.0", bus), Parent: parent, Vendor: 0x1d0f, Device: device, Class: 0x020000,
		SubVendor: 0x1d0f, SubDevice: device, Driver: "efa", NUMA: numa, Uverbs: i, IBDev: fmt.Sprintf("rdmap%ds0", bus),
		NodeType: "7: unspecified", NodeGUID: "0000:0000:0000:0000", FW: "0.0.0.0",
		Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "100 Gb/sec (4X EDR)", LinkLayer: "Unknown",
			PortGUID: fmt.Sprintf("0a1f:3aff:fe55:%04x", i)}}}
}

// enaNIC is the instance's primary ENA, which carries its IP address.
func enaNIC(mac, ip string) NIC {
	return NIC{Addr: "0000:00:05.0", Vendor: 0x1d0f, Device: 0xec20, Class: 0x020000, SubVendor: 0x1d0f, SubDevice: 0xec20, Driver: "ena",
		Ports: []Port{{Netdev: "ens5", MAC: mac, MTU: 9001, OperUp: true, Addrs: []string{ip}}}}
}

// nitroGuest is what every EC2 Nitro guest with accelerators shares: a
// hypervisor, no guest IOMMU, Amazon's DMI names.
func nitroGuest(product, kernel string) *GPUHost {
	return &GPUHost{Cmdline: "BOOT_IMAGE=/boot/vmlinuz-" + kernel + " root=PARTUUID=5f2a1c3e-01 ro console=tty1 console=ttyS0 nvme_core.io_timeout=4294967295",
		Hypervisor: true, SysVendor: "Amazon EC2", Product: product}
}

// awsP5 is a p5.48xlarge-shaped guest: 8 GPUs of device gpuID, each below
// its own Gen5 switch with four EFAs, DLAMI's kernel.
func awsP5(host string, gpuID uint16, nvidia string, mods []string) Host {
	const kernel = "6.8.0-1021-aws"
	h := Host{Hostname: host, Kernel: kernel, Memlock: "unlimited", CapIPCLock: true, Layout: ubuntu2204, Providers: allProviders,
		Modules: append(append([]string{"efa", "ena"}, mods...), "ib_uverbs", "ib_core"),
		NICs:    []NIC{enaNIC("02:1f:3a:55:0c:11", "10.1.2.3/20")}, GPU: nitroGuest("p5.48xlarge", kernel)}
	h.GPU.NVIDIAVersion = nvidia
	switchedGPUs(&h, gpuID, 4, 0x1d0f, 0x0200, func(bus, i, numa int, parent string) NIC { return efaNIC(bus, i, 0xefa2, numa, parent) })
	return h
}

// switchedGPUs adds 8 GPUs of device gpuID, each below its own Gen5 switch
// (root port vendor:device rootVendor:rootDevice, a Broadcom PEX89000
// upstream) with nicsPer NICs from mkNIC on the switch's other downstream
// ports; GPUs 0–3 on NUMA node 0, 4–7 on node 1. A VM's virtual bridges
// carry no ACS capability; a bare-metal host's switches have ACS off.
func switchedGPUs(h *Host, gpuID uint16, nicsPer int, rootVendor, rootDevice uint16, mkNIC func(bus, i, numa int, parent string) NIC) {
	vm := h.GPU.Hypervisor
	for g := 0; g < 8; g++ {
		numa, hb := g/4, 0x10+g*0x10
		root, up := fmt.Sprintf("0000:%02x:01.0", hb), fmt.Sprintf("0000:%02x:00.0", hb+1)
		h.GPU.Bridges = append(h.GPU.Bridges,
			Bridge{Addr: root, HostBridge: fmt.Sprintf("pci0000:%02x", hb), PortType: 4, Vendor: rootVendor, Device: rootDevice, NUMA: numa, Speed: gen5, Width: 16, NoACS: vm},
			Bridge{Addr: up, Parent: root, PortType: 5, Vendor: 0x1000, Device: 0xc030, NUMA: numa, Speed: gen5, Width: 16, NoACS: vm})
		for port := 0; port <= nicsPer; port++ {
			dn := fmt.Sprintf("0000:%02x:%02x.0", hb+2, port)
			h.GPU.Bridges = append(h.GPU.Bridges, Bridge{Addr: dn, Parent: up, PortType: 6, Vendor: 0x1000, Device: 0xc030, NUMA: numa,
				Speed: gen5, Width: 16, NoACS: vm})
			bus := hb + 3 + port
			if port == nicsPer {
				h.GPU.GPUs = append(h.GPU.GPUs, GPUDev{Addr: fmt.Sprintf("0000:%02x:00.0", bus), Parent: dn, Vendor: 0x10de, Device: gpuID,
					Class: 0x030200, Driver: "nvidia", NUMA: numa, Speed: gen5, Width: 16, MaxSpeed: gen5, MaxWidth: 16})
				continue
			}
			h.NICs = append(h.NICs, mkNIC(bus, g*nicsPer+port, numa, dn))
		}
	}
}

// AWSP5 is a p5.48xlarge on the Deep Learning AMI: 8 H100 (10de:2330), 32
// EFAs, nvidia_peermem loaded (the AMI loads it for GPUDirect RDMA over
// EFA). Must get: every check pass or skip, exit 0; roce.config and
// roce.lossless skip (EFA runs SRD, no GIDs or PFC to set).
func AWSP5() Host {
	return awsP5("ip-10-1-2-3", 0x2330, nvidiaOpen550, nvidiaModules)
}

// AWSP5e is a p5e.48xlarge: 8 H200 (10de:2335), 32 EFAs, the open kernel
// modules 550 and no nvidia_peermem — the NIC reaches GPU memory through
// DMA-BUF (efa registers dma-buf MRs since Linux 5.15's
// efa_reg_user_mr_dmabuf; rdma-core ≥ 34). Must get: gpu.peer_memory pass
// (DMA-BUF), exit 0.
func AWSP5e() Host {
	return awsP5("ip-10-1-9-40", 0x2335, nvidiaOpen550, without(nvidiaModules, "nvidia_peermem"))
}

// awsTrn1 is a trn1-family guest: 16 Trainium chips (not GPUs: the neuron
// driver, class 0x0880) and n EFAs of the second generation.
func awsTrn1(host string, n int) Host {
	const kernel = "6.8.0-1021-aws"
	h := Host{Hostname: host, Kernel: kernel, Memlock: "unlimited", CapIPCLock: true, Layout: ubuntu2204, Providers: allProviders,
		Modules: []string{"neuron", "efa", "ena", "ib_uverbs", "ib_core"},
		NICs:    []NIC{enaNIC("02:44:9c:10:20:30", "10.2.0.17/20")}}
	for i := 0; i < 16; i++ {
		h.NICs = append(h.NICs, NIC{Addr: fmt.Sprintf("0000:%02x:1e.0", 0x10+i), Vendor: 0x1d0f, Device: 0x7164, Class: 0x088000,
			SubVendor: 0x1d0f, SubDevice: 0x7164, Driver: "neuron", NUMA: i / 8})
	}
	for i := 0; i < n; i++ {
		h.NICs = append(h.NICs, efaNIC(0x30+i, i, 0xefa1, i*2/n, ""))
	}
	return h
}

func init() {
	healthy := PlatformVerdict{Check: "pci.device", Status: "pass", Finding: "pci.device/bound", Exit: 0, Healthy: true}
	stated("aws-p5-efa-h100", func() *Tree { return Build(AWSP5()) }, healthy,
		PlatformVerdict{Check: "roce.lossless", Status: "skip", Finding: "roce.lossless/efa"},
		PlatformVerdict{Check: "gpu.peer_memory", Status: "pass", Finding: "gpu.peer_memory/available"})
	stated("aws-p5e-efa-dmabuf", func() *Tree { return Build(AWSP5e()) }, healthy,
		PlatformVerdict{Check: "gpu.peer_memory", Status: "pass", Finding: "gpu.peer_memory/available"})
	// trn1.32xlarge: 8 EFAs, 16 Trainium chips. Must get: all pass or
	// skip (no GPU: the gpu checks skip), exit 0.
	stated("aws-trn1-efa", func() *Tree { return Build(awsTrn1("ip-10-2-0-17", 8)) }, healthy,
		PlatformVerdict{Check: "roce.config", Status: "skip", Finding: "roce.config/efa"})
	// trn1n.32xlarge: 16 EFAs. Must get: all pass or skip, exit 0.
	stated("aws-trn1n-efa", func() *Tree { return Build(awsTrn1("ip-10-2-0-18", 16)) }, healthy,
		PlatformVerdict{Check: "rdma.devices", Status: "pass", Finding: "rdma.devices/present"})
}

// --- OCI bare metal RoCE -----------------------------------------------
//
// Read: OCI's shape pages — BM.Optimized3.36 has one 100 Gbps RDMA port
// (ConnectX-6 Dx, 15b3:101d) for its cluster network, BM.GPU.H100.8 8
// H100 and 16 × 200 Gbps RDMA ports (ConnectX-7, 15b3:1021) — and that the
// cluster network is RoCE v2. The kernel's mlx5 DCB (en_dcbnl.c: IEEE PFC,
// APP table DSCP entries switch the port to trust dscp) and MLNX_OFED's
// qos/trust and ecn/roce_{np,rp}/enable files. Inferred: the operator's
// QoS (trust dscp, DSCP 26 → priority 3 with PFC, ECN on, default ToS 106
// set in rdma_cm's configfs), Oracle Linux's UEK release, the RHEL-family
// library layout, bus numbers.

// ociCX7 is one ConnectX-7 200 GbE RoCE PF of an OCI GPU shape.
func ociCX7(bus, i, numa int, parent string) NIC {
	return NIC{Addr: fmt.Sprintf("0000:%02x:00.0", bus), Parent: parent, Vendor: mellanox, Device: 0x1021, Class: 0x020000,
		SubVendor: mellanox, SubDevice: 0x0041, Driver: "mlx5_core", NUMA: numa,
		Speed: gen5, Width: 16, MaxSpeed: gen5, MaxWidth: 16, IBDev: fmt.Sprintf("mlx5_%d", i), Uverbs: i,
		NodeGUID: fmt.Sprintf("946d:ae03:00%02x:%04x", 0x3f, 0x5a00+i), FW: "28.39.1002 (ORC0000000001)", HCAType: "MT4129", BoardID: "ORC0000000001",
		MaxReadReq: 4096, RelaxedOrder: true,
		Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "200 Gb/sec (4X HDR)", LinkLayer: "Ethernet",
			Netdev: fmt.Sprintf("rdma%d", i), MAC: fmt.Sprintf("94:6d:ae:3f:5a:%02x", i), MTU: 4220, OperUp: true,
			Addrs: []string{fmt.Sprintf("10.224.%d.%d/21", i/4, 10+i)}}}}
}

// OCIGPUH100 is a BM.GPU.H100.8: 8 H100 and 16 ConnectX-7 RoCE ports, two
// beside each GPU on its switch; IOMMU in passthrough, nvidia_peermem
// loaded. Must get: all pass or skip with --expect-lossless, exit 0.
func OCIGPUH100() Host {
	h := Host{Hostname: "inst-gpu-h100-01", Kernel: "5.15.0-208.159.3.2.el8uek.x86_64", Memlock: "unlimited", CapIPCLock: true,
		Layout: Rocky93, Providers: allProviders, RoCETOS: "106",
		Modules: append(append([]string{}, nvidiaModules...), rdmaModulesMLX5...),
		GPU: &GPUHost{Cmdline: "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-5.15.0-208.159.3.2.el8uek.x86_64 root=UUID=4a5b6c7d-8e9f-4a0b-9c1d-2e3f4a5b6c7d ro intel_iommu=on iommu=pt",
			SysVendor: "Oracle Corporation", Product: "BM.GPU.H100.8", IOMMUUnits: []string{"dmar0", "dmar1", "dmar2", "dmar3"},
			GroupType: "identity", NVIDIAVersion: nvidiaOpen550}}
	switchedGPUs(&h, 0x2330, 2, 0x8086, 0x352a, ociCX7)
	return h
}

// OCIOptimized3 is a BM.Optimized3.36: one ConnectX-6 Dx 100 GbE port on
// the cluster network (the second port unused, down without a cable), no
// GPU. Must get: roce.lossless pass with --expect-lossless, exit 0.
func OCIOptimized3() Host {
	h := CX5RoCE()
	h.Hostname, h.Kernel, h.Layout = "inst-hpc-opt3-07", "5.15.0-208.159.3.2.el8uek.x86_64", Rocky93
	for i := range h.NICs {
		n := &h.NICs[i]
		n.Device, n.SubDevice, n.HCAType = 0x101d, 0x0016, "MT4125"
		n.FW, n.BoardID = "22.39.2048 (ORC0000000003)", "ORC0000000003"
		n.Speed, n.MaxSpeed, n.BridgeSpeed = "16.0 GT/s PCIe", "16.0 GT/s PCIe", "16.0 GT/s PCIe"
	}
	h.NICs = h.NICs[:1]
	h.NICs[0].Ports[0].Netdev, h.NICs[0].Ports[0].Addrs = "ens800f0np0", []string{"172.16.5.37/22"}
	return h
}

func init() {
	lossless := PlatformVerdict{Check: "roce.lossless", Status: "pass", Finding: "roce.lossless/lossless", ExpectLossless: true, Exit: 0, Healthy: true}
	stated("oci-bm-gpu-h100-roce", func() *Tree { return Build(OCIGPUH100()) }, lossless,
		PlatformVerdict{Check: "gpu.nic_affinity", Status: "pass", Healthy: true})
	stated("oci-bm-optimized3-roce", func() *Tree { return Build(OCIOptimized3()) }, lossless)
	// The BM.GPU.H100.8 with PFC switched off on every port (priority 3 no
	// longer lossless: `mlnx_qos --pfc 0,0,0,0,0,0,0,0` after a firmware
	// reset, say), trust dscp and ECN still on. Must get: roce.lossless
	// warn (lossy) and exit 0; with --expect-lossless fail
	// (lossless-expected), exit 21.
	stated("oci-bm-roce-pfc-off", func() *Tree {
		h := OCIGPUH100()
		h.Hostname = "inst-gpu-h100-02"
		t := Build(h)
		for _, n := range h.NICs {
			if n.IBDev != "" {
				SetPFC(t, n.Ports[0].Netdev, 0)
			}
		}
		return t
	}, PlatformVerdict{Check: "roce.lossless", Status: "warn", Finding: "roce.lossless/lossy", Exit: 0},
		PlatformVerdict{Check: "roce.lossless", Status: "fail", Finding: "roce.lossless/lossless-expected", ExpectLossless: true, Exit: 21})
}

// --- GCP A3 / A3 Ultra / A4 --------------------------------------------
//
// Read: the kernel's gve driver (drivers/net/ethernet/google/gve:
// PCI_VENDOR_ID_GOOGLE 0x1ae0, PCI_DEV_ID_GVNIC 0x0042), a plain Ethernet
// function with no RDMA engine; Google Cloud's GPU machine-type pages —
// a3-highgpu-8g: 8 H100 and 5 gVNICs (one for the host, four for
// GPUDirect-TCPX), a3-megagpu-8g: 8 H100 and 9 gVNICs (GPUDirect-TCPXO),
// a3-ultragpu-8g: 8 H200, a4-highgpu-8g: 8 B200, each with 8 ConnectX-7
// 400 Gb/s NICs on an RDMA network running RoCE v2 and a gVNIC for the
// host. mlx5's VFs (15b3:101e) have no DCB of their own: PFC and ECN are
// the hypervisor host's and the fabric's. Inferred: that the CX-7s reach
// the guest as VFs, the guests' PCIe tree (a GPU and its NIC below one
// switch), the RDMA netdev names, MTU 8896, addresses, the kernel release
// and driver versions, nvidia_peermem on A3 Ultra and DMA-BUF on A4.

// gvnic is one gVNIC function with its netdev.
func gvnic(slot int, mac, ip string) NIC {
	var addrs []string
	if ip != "" {
		addrs = []string{ip}
	}
	return NIC{Addr: fmt.Sprintf("0000:00:%02x.0", slot), Vendor: 0x1ae0, Device: 0x0042, Class: 0x020000, SubVendor: 0x1ae0, SubDevice: 0x0058,
		Driver: "gve", Ports: []Port{{Netdev: fmt.Sprintf("ens%d", slot), MAC: mac, MTU: 8244, OperUp: true, Addrs: addrs}}}
}

// gceGuest is a Compute Engine guest with 8 NVIDIA GPUs.
func gceGuest(host, product string, mods []string, nvidia string) Host {
	const kernel = "6.8.0-1019-gcp"
	return Host{Hostname: host, Kernel: kernel, Memlock: "unlimited", CapIPCLock: true, Layout: ubuntu2204, Providers: allProviders,
		Modules: mods,
		GPU: &GPUHost{Cmdline: "BOOT_IMAGE=/vmlinuz-" + kernel + " root=PARTUUID=9b3c2d1e-0f4a-4b5c-8d6e-7f8091a2b3c4 ro console=ttyS0,115200",
			Hypervisor: true, SysVendor: "Google", Product: "Google Compute Engine", NVIDIAVersion: nvidia}}
}

// gceTCPX is an A3 High / A3 Mega guest: 8 H100 and n gVNICs, no RDMA
// device at all (GPUDirect-TCPX/TCPXO runs over the gVNICs).
func gceTCPX(host string, n int) Host {
	h := gceGuest(host, "a3-highgpu-8g", append([]string{"gve"}, without(nvidiaModules, "nvidia_peermem")...), nvidiaOpen550)
	h.Providers = nil
	for i := 0; i < n; i++ {
		h.NICs = append(h.NICs, gvnic(4+i, fmt.Sprintf("42:01:0a:80:00:%02x", 2+i), fmt.Sprintf("10.%d.0.2/32", 128+i)))
	}
	for g := 0; g < 8; g++ {
		root := fmt.Sprintf("0000:%02x:00.0", 0x80+g*0x10)
		h.GPU.Bridges = append(h.GPU.Bridges, Bridge{Addr: root, HostBridge: fmt.Sprintf("pci0000:%02x", 0x80+g*0x10), PortType: 4,
			Vendor: 0x1b36, Device: 0x000c, NUMA: g / 4, Speed: gen5, Width: 16, NoACS: true})
		h.GPU.GPUs = append(h.GPU.GPUs, GPUDev{Addr: fmt.Sprintf("0000:%02x:00.0", 0x81+g*0x10), Parent: root, Vendor: 0x10de, Device: 0x2330,
			Class: 0x030200, Driver: "nvidia", NUMA: g / 4, Speed: gen5, Width: 16, MaxSpeed: gen5, MaxWidth: 16})
	}
	return h
}

// gceCX7VF is one ConnectX-7 VF of GCP's RDMA network, RoCE v2 at 400
// Gb/s, its netdev addressed.
func gceCX7VF(bus, i, numa int, parent string) NIC {
	guid := fmt.Sprintf("0000:0000:0000:%04x", 0x0100+i)
	return NIC{Addr: fmt.Sprintf("0000:%02x:00.0", bus), Parent: parent, Vendor: mellanox, Device: 0x101e, Class: 0x020000,
		SubVendor: mellanox, SubDevice: 0x0041, Driver: "mlx5_core", NUMA: numa,
		Speed: gen5, Width: 16, MaxSpeed: gen5, MaxWidth: 16, IBDev: fmt.Sprintf("mlx5_%d", i), Uverbs: i,
		NodeGUID: guid, FW: "28.41.1000 (GOG0000000003)", HCAType: "MT4129", BoardID: "GOG0000000003", ATS: true,
		Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "400 Gb/sec (4X NDR)", LinkLayer: "Ethernet",
			Netdev: fmt.Sprintf("gpu%drdma0", i), MAC: fmt.Sprintf("42:01:c0:a8:%02x:02", i), MTU: 8896, OperUp: true,
			Addrs: []string{fmt.Sprintf("192.168.%d.2/32", i)}}}}
}

// gceRDMA is an A3 Ultra / A4 guest: 8 GPUs of device gpuID, each below a
// virtual switch with its ConnectX-7 VF, and the host's gVNIC.
func gceRDMA(host, product string, gpuID uint16, mods []string) Host {
	h := gceGuest(host, product, append(append([]string{"gve"}, mods...), rdmaModulesMLX5...), nvidiaOpen550)
	h.NICs = []NIC{gvnic(4, "42:01:0a:80:00:02", "10.128.0.2/32")}
	switchedGPUs(&h, gpuID, 1, 0x1b36, 0x000c, gceCX7VF)
	return h
}

func init() {
	// a3-highgpu-8g with GPUDirect-TCPX: no RDMA device, by the machine
	// type. Must get: pci.device skip (cloud-vnic-only: gVNIC has no RDMA
	// engine; no BIOS, seating or Soft-RoCE advice), exit 0 (it was fail,
	// no-rdma-nic, exit 10, advising to reseat a card in a VM).
	noRDMA := PlatformVerdict{Check: "pci.device", Status: "skip", Finding: "pci.device/cloud-vnic-only", Exit: 0, Healthy: true,
		Says: []string{"A3 Ultra"}, Never: []string{"seated", "BIOS", "rdma_rxe"}}
	stated("gcp-a3-high-tcpx", func() *Tree { return Build(gceTCPX("a3-high-0", 5)) }, noRDMA)
	// a3-megagpu-8g with GPUDirect-TCPXO: 9 gVNICs. Must get: the same.
	stated("gcp-a3-mega-tcpxo", func() *Tree { return Build(gceTCPX("a3-mega-0", 9)) }, noRDMA)
	// a3-ultragpu-8g: 8 H200, 8 CX-7 VFs, nvidia_peermem. Must get: all
	// pass or skip (VFs have no DCB: roce.lossless does not judge them,
	// saying PFC and ECN are the PF's on the hypervisor host — it was
	// "driver has no DCB"), exit 0.
	stated("gcp-a3-ultra-roce", func() *Tree {
		return Build(gceRDMA("a3-ultra-0", "a3-ultragpu-8g", 0x2335, nvidiaModules))
	}, PlatformVerdict{Check: "roce.config", Status: "pass", Finding: "roce.config/ok", Healthy: true},
		PlatformVerdict{Check: "gpu.nic_affinity", Status: "pass"},
		PlatformVerdict{Check: "roce.lossless", Status: "skip", Finding: "roce.lossless/none-judged"})
	// a4-highgpu-8g: 8 B200 (10de:2901), 8 CX-7 VFs, DMA-BUF without
	// nvidia_peermem. Must get: all pass or skip, gpu.peer_memory pass
	// (DMA-BUF), exit 0.
	stated("gcp-a4-roce", func() *Tree {
		return Build(gceRDMA("a4-0", "a4-highgpu-8g", 0x2901, without(nvidiaModules, "nvidia_peermem")))
	}, PlatformVerdict{Check: "gpu.peer_memory", Status: "pass", Finding: "gpu.peer_memory/available", Healthy: true})
}

// --- Broadcom Thor 2 (BCM57608, bnxt_re) -------------------------------
//
// Read: drivers/infiniband/hw/bnxt_re — main.c registers "bnxt_re%d" on
// bnxt_en's auxiliary device (the RDMA device's parent is the PCI
// function), RoCE v2 over the bnxt_en netdev; hw_counters.c's stat table;
// bnxt_re_process_mad (2025) answers PMA; debugfs.c makes
// /sys/kernel/debug/bnxt_re/<PCI address>/cc_config/ with enable_cc,
// tos_ecn, tos_dscp, cc_mode … (0400; a read queries the firmware and
// prints "%d\n"). bnxt_en's DCB (bnxt_dcb.c) answers IEEE PFC and APP
// DSCP entries. Broadcom's bnxt_setupcc.sh (its out-of-tree driver
// package) sets PFC on the RoCE priority, the DSCP→priority APP entry,
// and CC with ECN marking. pci.ids: 14e4:1760 BCM57608 (Thor 2, 400G).
// Inferred: the kernel release carrying the debugfs CC files, slot, bus
// numbers, firmware string, addresses.

// Thor2 is a BCM57608 400 GbE host with RoCE, PFC on priority 3 for DSCP
// 26 and bnxt_re's congestion control on with ECT set.
func Thor2(host string) Host {
	h := ethRoCE(host, "bnxt_re", "bnxt_en", "bnxt_re0", 0x14e4, 0x1760, "ens7f0np0", "84:16:0c:3e:21:a0", "192.0.2.150/24",
		[]string{"bnxt_re", "bnxt_en", "rdma_ucm", "rdma_cm", "iw_cm", "ib_cm", "ib_uverbs", "ib_core"})
	h.Kernel = "6.16.3-1-amd64"
	n := &h.NICs[0]
	n.Speed, n.MaxSpeed, n.BridgeSpeed, n.FW, n.PMA = gen5, gen5, gen5, "230.2.52.0", true
	n.Ports[0].Rate = "400 Gb/sec (4X NDR)"
	return h
}

// withBnxtCC writes bnxt_re's debugfs congestion-control files of every
// bnxt_en function: enable_cc and tos_ecn as given, DSCP 26, CC mode 1.
func withBnxtCC(h Host, enable, ect int) *Tree {
	t := Build(h)
	for _, n := range h.NICs {
		if n.Driver != "bnxt_en" {
			continue
		}
		dir := "/sys/kernel/debug/bnxt_re/" + n.Addr + "/cc_config"
		for name, v := range map[string]int{"enable_cc": enable, "tos_ecn": ect, "tos_dscp": 26, "cc_mode": 1, "run_avg_weight_g": 8} {
			t.Attr(dir+"/"+name, fmt.Sprint(v))
		}
	}
	return t
}

func init() {
	// Thor 2 with PFC on 3, DSCP 26 → 3, CC on with ECT. Must get:
	// roce.lossless pass (ECN read from debugfs: on), also with
	// --expect-lossless, exit 0.
	stated("bnxt-thor2-roce-cc", func() *Tree { return withBnxtCC(Thor2("thor2-node01"), 1, 1) },
		PlatformVerdict{Check: "roce.lossless", Status: "pass", Finding: "roce.lossless/lossless", ExpectLossless: true, Healthy: true},
		PlatformVerdict{Check: "kernel.modules", Status: "pass", Healthy: true})
	// The same host with bnxt_re's congestion control off (enable_cc 0:
	// a firmware reset, or bnxt_setupcc.sh -m 1, PFC only). Must get:
	// roce.lossless warn (ecn-off, naming enable_cc and the debugfs
	// command), exit 0; with --expect-lossless fail, exit 21.
	stated("bnxt-thor2-cc-off", func() *Tree { return withBnxtCC(Thor2("thor2-node02"), 0, 1) },
		PlatformVerdict{Check: "roce.lossless", Status: "warn", Finding: "roce.lossless/ecn-off",
			Says: []string{"/sys/kernel/debug/bnxt_re/0000:b1:00.0/cc_config/enable_cc"}, Never: []string{"mlnx_qos", "/ecn/roce_np"}},
		PlatformVerdict{Check: "roce.lossless", Status: "fail", Finding: "roce.lossless/lossless-expected", ExpectLossless: true, Exit: 21})
}

// --- BlueField-3: DPU mode (host side and Arm side) and NIC mode -------
//
// Read: the kernel's mlx5 — a BlueField-3 network function is 15b3:a2dc
// (mlx5_core's pci table, "MT43244 BlueField-3 integrated ConnectX-7");
// on the DPU's Arm the PFs are embedded-CPU functions (ECPF) that own the
// eswitch, in switchdev mode: the uplink representor's phys_port_name is
// "p0", the x86 host's PF representor is an external controller's PCI PF
// port, named by devlink "c1pf0" (__devlink_port_phys_port_name_get:
// controller, then "pf%u"), its VFs' "c1pf0vf0", and the Arm's own
// sub-functions' "pf0sf0"; every representor is a port of the uplink's
// RDMA device (mlx5_ib's representor ports). SFs are auxiliary devices
// mlx5_core.sf.N below the PF with their own netdev and RDMA device. The
// BlueField OS documentation: Ubuntu 22.04 arm64, OVS bridges ovsbr1/2
// holding p0, pf0hpf and the SF representor, the Arm's own traffic on an
// SF netdev (enp3s0f0s0); in DPU mode the Arm owns the function's
// capabilities (`devlink port function set … roce`) and the host cannot
// change them; NIC mode (mlxconfig INTERNAL_CPU_OFFLOAD_ENGINE=1) gives
// the host a plain ConnectX-7. Inferred: the SoC management function's
// ID (15b3:c2d5, class 0x0801) beside the PFs, bus numbers, firmware,
// kernel releases, addresses.

// bf3PF is one BlueField-3 PF of the x86 host, RoCE at 200 Gb/s.
func bf3PF(fn int, netdev, mac, ip string) NIC {
	return NIC{Addr: fmt.Sprintf("0000:17:00.%d", fn), RootPort: "0000:16:01.0", Vendor: mellanox, Device: 0xa2dc, Class: 0x020000,
		SubVendor: mellanox, SubDevice: 0x0051, Driver: "mlx5_core", NUMA: 0,
		Speed: gen5, Width: 16, MaxSpeed: gen5, MaxWidth: 16, BridgeSpeed: gen5, BridgeWidth: 16,
		IBDev: fmt.Sprintf("mlx5_%d", fn), Uverbs: fn, NodeGUID: fmt.Sprintf("a088:c203:00e1:7a%02x", fn),
		FW: "32.41.1000 (MT_0000000884)", HCAType: "MT41692", BoardID: "MT_0000000884",
		Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "200 Gb/sec (4X HDR)", LinkLayer: "Ethernet",
			Netdev: netdev, MAC: mac, MTU: 9000, OperUp: true, Addrs: []string{ip}}}}
}

// bf3SoCMgmt is the BlueField-3 SoC management function (RShim over PCIe)
// beside the PFs: a DMA controller, no network function.
func bf3SoCMgmt() NIC {
	return NIC{Addr: "0000:17:00.2", RootPort: "0000:16:01.0", Vendor: mellanox, Device: 0xc2d5, Class: 0x080100,
		SubVendor: mellanox, SubDevice: 0x0051, NUMA: 0}
}

// BF3HostSide is the x86 host of a BlueField-3: its two PFs with RoCE and
// the SoC management function.
func BF3HostSide(host string) Host {
	h := CX5RoCE()
	h.Hostname, h.Kernel, h.Layout = host, "6.8.0-49-generic", ubuntu2204
	h.NICs = []NIC{bf3PF(0, "ens1f0np0", "a0:88:c2:e1:7a:00", "192.0.2.160/24"), bf3PF(1, "ens1f1np1", "a0:88:c2:e1:7a:01", "198.51.100.160/24"), bf3SoCMgmt()}
	return h
}

// ubuntu2204Arm64 is the BlueField OS's Ubuntu 22.04 on arm64 with
// DOCA's rdma-core.
var ubuntu2204Arm64 = debianMultiarch("aarch64-linux-gnu", ubuntuJammyOSRelease, "50", "ldconfig (Ubuntu GLIBC 2.35-0ubuntu3.8) stable release version 2.35")

// BF3ArmSide is the BlueField-3's own Arm OS in DPU mode: each ECPF's RDMA
// device carries the uplink (p0/p1, an OVS port without an address) and
// the representors of the x86 host's PF (c1pf0/c1pf1, netdevs pf0hpf,
// pf1hpf) and of the Arm's SF (pf0sf0, en3f0pf0sf0); the SF itself
// (mlx5_2, netdev enp3s0f0s0) carries the Arm's RDMA address.
func BF3ArmSide() Host {
	port := func(netdev, phys, mac string) Port {
		return Port{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "200 Gb/sec (4X HDR)", LinkLayer: "Ethernet",
			Netdev: netdev, MAC: mac, MTU: 9216, OperUp: true, PhysPortName: phys}
	}
	pf := func(fn int) NIC {
		n := bf3PF(fn, "", "", "")
		n.Addr, n.RootPort, n.Speed, n.MaxSpeed, n.BridgeSpeed = fmt.Sprintf("0000:03:00.%d", fn), "0000:02:00.0", "", "", ""
		n.IBDev, n.Uverbs = fmt.Sprintf("mlx5_%d", fn), fn
		n.Ports = []Port{port(fmt.Sprintf("p%d", fn), fmt.Sprintf("p%d", fn), fmt.Sprintf("58:a2:e1:7a:00:%02x", fn)),
			port(fmt.Sprintf("pf%dhpf", fn), fmt.Sprintf("c1pf%d", fn), fmt.Sprintf("58:a2:e1:7a:10:%02x", fn)),
			port(fmt.Sprintf("en3f%dpf%dsf0", fn, fn), fmt.Sprintf("pf%dsf0", fn), fmt.Sprintf("58:a2:e1:7a:20:%02x", fn))}
		sfPort := port(fmt.Sprintf("enp3s0f%ds0", fn), "", fmt.Sprintf("02:a2:e1:7a:30:%02x", fn))
		sfPort.Addrs = []string{fmt.Sprintf("192.0.2.%d/24", 170+fn)}
		n.SFs = []SF{{Index: 2 + fn, SFNum: 0, IBDev: fmt.Sprintf("mlx5_%d", 2+fn), Uverbs: 2 + fn,
			NodeGUID: fmt.Sprintf("a088:c203:00e1:7b%02x", fn), Port: sfPort}}
		return n
	}
	return Host{Hostname: "bf3-dpu-arm01", Kernel: "5.15.0-1042-bluefield", Memlock: "unlimited", CapIPCLock: true, RoCETOS: "106",
		Modules:   append([]string{"openvswitch", "mlx5_vdpa"}, rdmaModulesMLX5...),
		Providers: allProviders, Layout: ubuntu2204Arm64, NICs: []NIC{pf(0), pf(1)}}
}

// ovsPorts makes the named netdevs ports of the OVS datapath (openvswitch
// links each port to ovs-system: netdev_master_upper_dev_link gives it a
// master and upper_ovs-system link), and writes ovs-system itself.
func ovsPorts(t *Tree, netdevs ...string) {
	const dp = "/sys/devices/virtual/net/ovs-system"
	t.Attr(dp+"/operstate", "down")
	t.Attr(dp+"/mtu", "1500")
	t.RelLink("/sys/class/net/ovs-system", dp)
	t.Facts.DCB["ovs-system"] = sysfs.DCB{Err: sysfs.ErrNoDCB}
	for _, nd := range netdevs {
		dir := t.Links["/sys/class/net/"+nd]
		if dir == "" {
			panic("sysfstest: ovsPorts: no netdev " + nd)
		}
		abs := path.Join("/sys/class/net", dir)
		t.RelLink(path.Join(abs, "master"), dp)
		t.RelLink(path.Join(abs, "upper_ovs-system"), dp)
		t.RelLink(path.Join(dp, "lower_"+nd), abs)
	}
}

func init() {
	// The x86 host of a BlueField-3 in NIC mode: its PFs are a ConnectX-7
	// to the host; the SoC management function beside them is no RDMA
	// NIC. Must get: every check pass or skip, exit 0.
	stated("bf3-nic-mode-host", func() *Tree { return Build(BF3HostSide("bf3-nic-host01")) },
		PlatformVerdict{Check: "pci.device", Status: "pass", Finding: "pci.device/bound", Healthy: true},
		PlatformVerdict{Check: "roce.lossless", Status: "pass", Finding: "roce.lossless/lossless", ExpectLossless: true})
	// The x86 host of a BlueField-3 in DPU mode whose Arm disabled RoCE on
	// the host's first PF (`devlink port function set … roce disable` on
	// its c1pf0 port): mlx5_ib registers no RDMA device there. Must get:
	// rdma.devices fail (not-registered-bluefield: the fix is the DPU's
	// Arm OS, with no driver reload or devlink reload on this host), exit
	// 14.
	stated("bf3-dpu-host-roce-disabled", func() *Tree {
		h := BF3HostSide("bf3-dpu-host02")
		h.NICs[0].IBDev = ""
		return Build(h)
	}, PlatformVerdict{Check: "rdma.devices", Status: "fail", Finding: "rdma.devices/not-registered-bluefield", Exit: 14,
		Says: []string{"roce enable"}, Never: []string{"modprobe -r", "devlink dev reload"}})
	// The x86 host of a BlueField-3 with PFC off on its ports. Must get:
	// roce.lossless warn (lossy), exit 0, the fix saying that in DPU mode
	// the settings are made on the DPU's Arm OS, on the uplink.
	stated("bf3-dpu-host-pfc-off", func() *Tree {
		h := BF3HostSide("bf3-dpu-host03")
		t := Build(h)
		SetPFC(t, "ens1f0np0", 0)
		SetPFC(t, "ens1f1np1", 0)
		return t
	}, PlatformVerdict{Check: "roce.lossless", Status: "warn", Finding: "roce.lossless/lossy", Says: []string{"DPU's Arm OS", "p0"}})
	// The BlueField-3's Arm OS in DPU mode: uplinks in OVS without an
	// address, host-PF and SF representors, the Arm's SFs with addresses.
	// Must get: every check pass or skip (representors and OVS-enslaved
	// uplinks are switch ports, not RoCE endpoints), exit 0.
	stated("bf3-dpu-arm-side", func() *Tree {
		t := buildArm64(BF3ArmSide())
		ovsPorts(t, "p0", "pf0hpf", "en3f0pf0sf0", "p1", "pf1hpf", "en3f1pf1sf0")
		return t
	}, PlatformVerdict{Check: "roce.config", Status: "pass", Healthy: true})
}

// --- AMD Pensando Pollara 400 (ionic) ----------------------------------
//
// Read: drivers/net/ethernet/pensando/ionic (ionic_aux.c: an auxiliary
// device for a LIF with IONIC_LIF_CAP_RDMA; the PF's PCI ID
// PCI_DEVICE_ID_PENSANDO_IONIC_ETH_PF 0x1002, vendor 0x1dd8) and
// drivers/infiniband/hw/ionic (ionic_ibdev.c: ib_device_set_netdev on the
// LIF's netdev, node_type CA, one port, ib_register_device "ionic_%d"
// with the PCI function as parent; hw stats named by the firmware, so no
// fixed counter names); rdma-core's ionic provider. The ionic netdev has
// no dcbnl_ops: DCB answers EOPNOTSUPP and QoS is set through AMD's
// tools. AMD's Pollara 400 brief: a 400 GbE AI NIC on PCIe Gen5 x16 with
// RoCE v2, paired with Instinct MI300X/MI325X in AMD's reference nodes.
// Inferred: that Pollara keeps the ionic PF ID, the slot, firmware
// string, addresses, the rate string (4X NDR-style from ib_query_port).

// pollara is one Pollara 400 PF with ionic_rdma's device on it.
func pollara(bus, i, numa int, parent string) NIC {
	return NIC{Addr: fmt.Sprintf("0000:%02x:00.0", bus), Parent: parent, Vendor: 0x1dd8, Device: 0x1002, Class: 0x020000,
		SubVendor: 0x1dd8, SubDevice: 0x5201, Driver: "ionic", NUMA: numa,
		Speed: gen5, Width: 16, MaxSpeed: gen5, MaxWidth: 16, IBDev: fmt.Sprintf("ionic_%d", i), Uverbs: i,
		NodeGUID: fmt.Sprintf("0690:81ff:fe5a:%02x00", i), FW: "1.110.0-a-79",
		Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "400 Gb/sec (4X NDR)", LinkLayer: "Ethernet",
			Netdev: fmt.Sprintf("benic%dp1", i+1), MAC: fmt.Sprintf("04:90:81:5a:%02x:00", i), MTU: 9000, OperUp: true,
			Addrs: []string{fmt.Sprintf("10.10.%d.11/24", i)}}}}
}

// PollaraMI300X is the MI300X node with a Pollara 400 beside each GPU on
// its switch instead of a ConnectX-7, ionic_rdma loaded, rdma-core with
// the ionic provider.
func PollaraMI300X() Host {
	h := MI300X()
	h.Hostname = "mi300x-pollara01"
	h.Modules = append([]string{"ionic_rdma", "ionic", "amdgpu"}, cmModules...)
	h.Providers = append(append([]string{}, allProviders...), "ionic")
	for i := range h.NICs {
		n := h.NICs[i]
		bus := 0
		fmt.Sscanf(n.Addr[5:7], "%x", &bus)
		h.NICs[i] = pollara(bus, i, n.NUMA, n.Parent)
	}
	return h
}

func init() {
	// MI300X with 8 Pollara 400: ionic in the driver table. Must get:
	// pci.device pass (bound, not "driver outside the table"),
	// kernel.modules names ionic_rdma, libibverbs.install pass (ionic
	// provider), gpu.nic_affinity pass (PIX), roce.lossless skip (ionic
	// has no DCB), counters.errors skip, exit 0.
	stated("pollara-mi300x", func() *Tree { return Build(PollaraMI300X()) },
		PlatformVerdict{Check: "pci.device", Status: "pass", Finding: "pci.device/bound", Healthy: true},
		PlatformVerdict{Check: "libibverbs.install", Status: "pass", Finding: "libibverbs.install/ok"},
		PlatformVerdict{Check: "gpu.nic_affinity", Status: "pass"})
	// One Pollara 400 on an rdma-core without the ionic provider (a
	// distribution release older than the provider). Must get:
	// libibverbs.install fail (provider ionic missing), exit 16.
	stated("pollara-no-provider", func() *Tree {
		h := oneNIC("pollara-node02", "6.17.0-5-generic", append([]string{"ionic_rdma", "ionic"}, cmModules...), pollara(0xc3, 0, 1, ""))
		h.NICs[0].RootPort, h.NICs[0].BridgeSpeed, h.NICs[0].BridgeWidth = "0000:c0:01.1", gen5, 16
		t := Build(h)
		t.Facts.Libibverbs.Devices = []sysfs.VerbsDevice{}
		return t
	}, PlatformVerdict{Check: "libibverbs.install", Status: "fail", Finding: "libibverbs.install/provider-missing", Exit: 16,
		Says: []string{"ionic-common"}})
}

// --- Two rdma-core copies; a container image without providers ---------
//
// Read: rdma-core's build (libibverbs.so.1 → libibverbs.so.1.14.<release>.0,
// providers lib<name>-rdmav34.so in <libdir>/libibverbs named by
// /etc/libibverbs.d/<name>.driver; a source build installs into
// /usr/local/lib by CMake's default prefix); glibc's ldconfig (every
// directory of /etc/ld.so.conf.d enters the cache, and the cache's first
// entry for a soname wins). An image built FROM a base with libibverbs1
// but without ibverbs-providers (Debian's split: libibverbs1 carries the
// library, ibverbs-providers the .driver files and providers) has the
// library and no provider; a pod with the RDMA shared device plugin still
// sees the host's devices. Inferred: the paths of the vendor build, the
// image's contents.

// withVendorRDMACore adds a second rdma-core build under prefix (its lib
// directory in the loader configuration when cached) beside the
// distribution's.
func withVendorRDMACore(t *Tree, prefix string, cached bool) {
	lib := path.Join(prefix, "lib")
	t.File(path.Join(lib, "libibverbs.so.1.14.57.0"), elfStub("libibverbs.so.1"))
	t.Link(path.Join(lib, "libibverbs.so.1"), "libibverbs.so.1.14.57.0")
	t.File(path.Join(lib, "libmlx5.so.1.25.57.0"), elfStub("libmlx5.so.1"))
	t.Link(path.Join(lib, "libmlx5.so.1"), "libmlx5.so.1.25.57.0")
	t.Link(path.Join(lib, "libibverbs", "libmlx5-rdmav34.so"), "../libmlx5.so.1.25.57.0")
	t.Attr(path.Join(prefix, "etc", "libibverbs.d", "mlx5.driver"), "driver mlx5")
	if cached {
		t.File("/etc/ld.so.conf.d/rdma-core-local.conf", lib+"\n")
		WriteLDCache(t)
		t.Facts.Libibverbs.LibraryPath = path.Join(lib, "libibverbs.so.1.14.57.0")
	}
}

// podShared is a pod with the RDMA shared device plugin: the host's
// devices, the pod's own eth0, the host's netdevs out of sight.
func podShared(h Host) *Tree {
	h.Hostname = "train-7d9f-0"
	for i := range h.NICs {
		h.NICs[i].Ports[0].Away = true
	}
	h.ExtraNetdevs = []sysfs.Netdev{{Name: "eth0", Index: 3, OperState: "up", AdminUp: true, Carrier: true, MTU: 1500, Addresses: []string{"10.244.1.7/24"}}}
	t := Build(h)
	t.File("/.dockerenv", "")
	return t
}

func init() {
	// rdma-core 57 built from source into /usr/local (its lib in
	// /etc/ld.so.conf.d) beside Debian's 44: both in the loader cache.
	// Must get: libibverbs.install fail (two-copies), exit 16.
	stated("rdma-core-usr-local-copy", func() *Tree {
		t := Build(CX5RoCE())
		withVendorRDMACore(t, "/usr/local", true)
		return t
	}, PlatformVerdict{Check: "libibverbs.install", Status: "fail", Finding: "libibverbs.install/two-copies", Exit: 16})
	// A vendor rdma-core under /opt/vendor/rdma-core, outside the loader's
	// path (its applications set LD_LIBRARY_PATH): the loader reaches one
	// copy. Must get: libibverbs.install pass, exit 0.
	stated("rdma-core-opt-uncached", func() *Tree {
		t := Build(CX5RoCE())
		withVendorRDMACore(t, "/opt/vendor/rdma-core", false)
		return t
	}, PlatformVerdict{Check: "libibverbs.install", Status: "pass", Finding: "libibverbs.install/ok", Healthy: true})
	// A container image with libibverbs1 and no providers, in a pod that
	// sees the host's two ConnectX-5 devices. Must get:
	// libibverbs.install fail (provider-missing), exit 16, the fix naming
	// the image (not a package installed into the running container);
	// roce.config fails too (the pod has no interface on the RDMA
	// network), after it in code order.
	stated("container-no-providers", func() *Tree {
		h := CX5RoCE()
		h.Providers = []string{}
		t := podShared(h)
		t.Facts.Libibverbs.Devices = []sysfs.VerbsDevice{}
		return t
	}, PlatformVerdict{Check: "libibverbs.install", Status: "fail", Finding: "libibverbs.install/provider-missing", Exit: 16,
		Says: []string{"image"}})
	// The same image on an EFA instance's pod. Must get: the same.
	stated("container-no-providers-efa", func() *Tree {
		h := AWSEFA()
		h.Providers = []string{}
		t := Build(h)
		t.File("/.dockerenv", "")
		t.Facts.Libibverbs.Devices = []sysfs.VerbsDevice{}
		return t
	}, PlatformVerdict{Check: "libibverbs.install", Status: "fail", Finding: "libibverbs.install/provider-missing", Exit: 16,
		Says: []string{"image"}})
}

// --- Omni-Path: Intel OPA 100 and Cornelis CN5000 ----------------------
//
// Read: the kernel's drivers/infiniband/hw/hfi1 (on rdmavt; "hfi1_%d";
// link layer InfiniBand; PMA counters; Intel 8086:24f0/24f1), rdma-core's
// hfi1verbs provider; Omni-Path fabrics are run by Cornelis/Intel's
// fabric manager (opafm), not opensm. Cornelis's CN5000 (400 Gb/s
// Omni-Path Express) is driven by the hfi1 of Cornelis's OPX software
// suite, out of tree. Inferred — no upstream source was found for it:
// that CN5000 keeps hfi1's device shape and names, its PCI IDs (vendor
// 0x434e "CN", device 0x0001), the 4X rate string, the kernel release,
// firmware string and LIDs.

// CN5000 is a host with one Cornelis CN5000 adapter under OPX's hfi1.
func CN5000(host string) Host {
	h := OmniPath()
	h.Hostname, h.Kernel, h.Layout = host, "5.14.0-503.14.1.el9_5.x86_64", Rocky93
	n := &h.NICs[0]
	n.Vendor, n.Device, n.SubVendor, n.SubDevice = 0x434e, 0x0001, 0x434e, 0x0001
	n.Speed, n.MaxSpeed, n.BridgeSpeed = gen5, gen5, gen5
	n.NodeGUID, n.FW = "0006:6a01:00b2:1c3d", "12.0.0.0.38"
	n.Ports[0].Rate, n.Ports[0].PortGUID = "400 Gb/sec (4X NDR)", "0006:6a01:00b2:1c3d"
	return h
}

func init() {
	// CN5000 under OPX's hfi1, port ACTIVE with a LID from opafm. Must
	// get: pci.device pass (bound: hfi1 knows the Cornelis IDs as it does
	// Intel's), roce.* skip (Omni-Path), exit 0.
	stated("cn5000-opx-hfi1", func() *Tree { return Build(CN5000("cn5k-node01")) },
		PlatformVerdict{Check: "pci.device", Status: "pass", Finding: "pci.device/bound", Healthy: true},
		PlatformVerdict{Check: "roce.config", Status: "skip"})
	// The same host with the port in INIT: no fabric manager has swept
	// it yet (LID 0). Must get: port.state fail, exit 19, the fix naming
	// the Omni-Path fabric manager (opafm), never opensm.
	stated("cn5000-port-init", func() *Tree {
		h := CN5000("cn5k-node02")
		p := &h.NICs[0].Ports[0]
		p.State, p.LID, p.SMLID = "2: INIT", 0, 0
		return Build(h)
	}, PlatformVerdict{Check: "port.state", Status: "fail", Exit: 19, Says: []string{"opafm"}, Never: []string{"opensm"}})
	// Intel OPA 100 with the port in INIT. Must get: the same.
	stated("opa100-port-init", func() *Tree {
		h := OmniPath()
		h.Hostname = "opa-node32"
		p := &h.NICs[0].Ports[0]
		p.State, p.LID, p.SMLID = "2: INIT", 0, 0
		return Build(h)
	}, PlatformVerdict{Check: "port.state", Status: "fail", Exit: 19, Says: []string{"opafm"}, Never: []string{"opensm"}})
}

// --- NVIDIA Spectrum-X host: ConnectX-8 SuperNIC -----------------------
//
// Read: NVIDIA's ConnectX-8 SuperNIC pages (800 Gb/s, 48 lanes of PCIe
// Gen6 with a built-in PCIe switch that the GPU sits behind, Spectrum-X
// Ethernet with RoCE adaptive routing and congestion control) and the
// kernel's mlx5 (15b3:1023 ConnectX-8 in mlx5_core's pci table). Adaptive
// routing is the switch's and the NIC firmware's (out-of-order placement
// of RoCE packets, set with mlxconfig), with no sysfs file on the host:
// a host-side doctor sees a RoCE port like any ConnectX's. Inferred: the
// CX-8's switch port IDs, that both the NIC function and the GPU sit on
// its downstream ports (nvidia-smi topo -m: PIX), the 800G rate string,
// the B300 device ID (10de:3182), PFC/ECN/DSCP as on other RoCE fabrics,
// DOCA's kernel and driver versions.

// spectrumXHost is an 8-GPU host with a ConnectX-8 SuperNIC per GPU, the
// GPU below the CX-8's own Gen6 switch.
func spectrumXHost(host string) Host {
	const gen6 = "64.0 GT/s PCIe"
	h := Host{Hostname: host, Kernel: "6.8.0-1025-nvidia", Memlock: "unlimited", CapIPCLock: true, Layout: ubuntu2204, Providers: allProviders,
		RoCETOS: "106", Modules: append(append([]string{}, nvidiaModules...), rdmaModulesMLX5...),
		GPU: &GPUHost{Cmdline: "BOOT_IMAGE=/boot/vmlinuz-6.8.0-1025-nvidia root=UUID=5b6c7d8e-9fa0-4b1c-8d2e-3f4a5b6c7d8e ro iommu=pt",
			SysVendor: "NVIDIA", Product: "HGX B300", IOMMUUnits: []string{"dmar0", "dmar1"}, GroupType: "identity", NVIDIAVersion: nvidiaOpen550}}
	for g := 0; g < 8; g++ {
		numa, hb := g/4, 0x10+g*0x10
		root, up := fmt.Sprintf("0000:%02x:01.0", hb), fmt.Sprintf("0000:%02x:00.0", hb+1)
		dnNIC, dnGPU := fmt.Sprintf("0000:%02x:00.0", hb+2), fmt.Sprintf("0000:%02x:01.0", hb+2)
		h.GPU.Bridges = append(h.GPU.Bridges,
			Bridge{Addr: root, HostBridge: fmt.Sprintf("pci0000:%02x", hb), PortType: 4, Vendor: 0x8086, Device: 0x352a, NUMA: numa, Speed: gen6, Width: 16},
			Bridge{Addr: up, Parent: root, PortType: 5, Vendor: mellanox, Device: 0x197b, NUMA: numa, Speed: gen6, Width: 16},
			Bridge{Addr: dnNIC, Parent: up, PortType: 6, Vendor: mellanox, Device: 0x197b, NUMA: numa, Speed: gen6, Width: 16},
			Bridge{Addr: dnGPU, Parent: up, PortType: 6, Vendor: mellanox, Device: 0x197b, NUMA: numa, Speed: gen6, Width: 16})
		n := ociCX7(hb+3, g, numa, dnNIC)
		n.Device, n.HCAType, n.BoardID, n.FW = 0x1023, "MT4131", "MT_0000001070", "40.44.1036 (MT_0000001070)"
		n.Speed, n.MaxSpeed = gen6, gen6
		n.Ports[0].Rate, n.Ports[0].Netdev, n.Ports[0].MTU = "800 Gb/sec (4X XDR)", fmt.Sprintf("enp%ds0f0np0", hb+3), 9000
		h.NICs = append(h.NICs, n)
		h.GPU.GPUs = append(h.GPU.GPUs, GPUDev{Addr: fmt.Sprintf("0000:%02x:00.0", hb+4), Parent: dnGPU, Vendor: 0x10de, Device: 0x3182,
			Class: 0x030200, Driver: "nvidia", NUMA: numa, Speed: gen6, Width: 16, MaxSpeed: gen6, MaxWidth: 16})
	}
	return h
}

func init() {
	// Spectrum-X host, 8 CX-8 SuperNICs, each GPU behind its CX-8's
	// switch. Must get: every check pass or skip with --expect-lossless,
	// gpu.nic_affinity pass (PIX through the NIC's own switch), pci.link
	// pass at Gen6 x16, exit 0.
	stated("spectrumx-cx8-supernic", func() *Tree { return Build(spectrumXHost("b300-node01")) },
		PlatformVerdict{Check: "gpu.nic_affinity", Status: "pass", ExpectLossless: true, Healthy: true},
		PlatformVerdict{Check: "pci.link", Status: "pass", Says: []string{"64.0 GT/s"}})
	// The same host where one CX-8 trained at Gen5 (a riser or retimer
	// fault). Must get: pci.link fail, exit 11.
	stated("spectrumx-cx8-gen5-link", func() *Tree {
		h := spectrumXHost("b300-node02")
		h.NICs[2].Speed = gen5
		return Build(h)
	}, PlatformVerdict{Check: "pci.link", Status: "fail", Exit: 11, Says: []string{"0000:33:00.0"}})
}

// --- Intel Gaudi 2 / Gaudi 3 (integrated RoCE ports) -------------------
//
// Read: the kernel's drivers/accel/habanalabs (PCI vendor 0x1da3, Gaudi 2
// 0x1020; the accelerator's compute only) — the network drivers Intel
// posted for upstream (hbl_cn, hbl_en and the hbl InfiniBand driver,
// 2024) are not merged, so an upstream kernel shows no netdev and no RDMA
// device for the accelerators' 24 integrated 100/200 GbE RoCE ports;
// Intel's Gaudi software installs its own habanalabs with them. Intel's
// pages: an HLS-Gaudi2/3 node has 8 accelerators, 3 (Gaudi 2) or 6
// (Gaudi 3) ports of each for scale-out. Inferred: Gaudi 3's device ID
// (0x1060), the RDMA device names of Intel's stack (hbl_N, one per
// accelerator with its scale-out ports), the processing-accelerator
// class, NUMA placement, addresses.

// gaudiHost is a node with 8 Gaudi accelerators of device id (class
// 0x1200, habanalabs) and an X710 (i40e, no RDMA engine) for the host
// network.
func gaudiHost(host string, id uint16) Host {
	h := Host{Hostname: host, Kernel: "6.8.0-49-generic", Memlock: "unlimited", CapIPCLock: true, Layout: ubuntu2204, Providers: allProviders,
		Modules: []string{"habanalabs", "i40e"},
		NICs: []NIC{{Addr: "0000:b1:00.0", RootPort: "0000:b0:02.0", Vendor: 0x8086, Device: 0x1572, Class: 0x020000, SubVendor: 0x8086,
			SubDevice: 0x0001, Driver: "i40e", NUMA: 1,
			Ports: []Port{{Netdev: "ens801f0", MAC: "b4:96:91:3e:21:b0", MTU: 1500, OperUp: true, Addrs: []string{"10.20.0.5/16"}}}}}}
	for i := 0; i < 8; i++ {
		h.NICs = append(h.NICs, NIC{Addr: fmt.Sprintf("0000:%02x:00.0", 0x19+i*0x10), RootPort: fmt.Sprintf("0000:%02x:01.0", 0x18+i*0x10),
			Vendor: 0x1da3, Device: id, Class: 0x120000, SubVendor: 0x1da3, SubDevice: id, Driver: "habanalabs", NUMA: i / 4,
			Speed: "32.0 GT/s PCIe", Width: 16, MaxSpeed: "32.0 GT/s PCIe", MaxWidth: 16, BridgeSpeed: "32.0 GT/s PCIe", BridgeWidth: 16})
	}
	return h
}

func init() {
	// 8 Gaudi 3 on the upstream kernel: habanalabs bound, no network or
	// RDMA driver for the integrated ports, an X710 for the host network. Must get: pci.device fail (accelerator-ports-no-driver,
	// naming the accelerators and Intel's Gaudi software, never reseating
	// a card or Soft-RoCE), exit 10.
	gaudiNoDriver := PlatformVerdict{Check: "pci.device", Status: "fail", Finding: "pci.device/accelerator-ports-no-driver", Exit: 10,
		Says: []string{"Gaudi"}, Never: []string{"seated", "rdma_rxe"}}
	stated("gaudi3-upstream-no-rdma", func() *Tree { return Build(gaudiHost("hls3-node01", 0x1060)) }, gaudiNoDriver,
		PlatformVerdict{Check: "pci.device", Status: "fail", Says: []string{"8 × Intel Gaudi 3"}, Exit: 10})
	// 8 Gaudi 2 with Intel's stack: an RDMA device hbl_N on each
	// accelerator's function with its 3 scale-out ports up and addressed.
	// Must get: pci.device pass (driver-not-in-table: present, not
	// judged), port.state pass, exit 0.
	stated("gaudi2-intel-stack", func() *Tree {
		h := gaudiHost("hls2-node01", 0x1020)
		h.Modules = append([]string{"habanalabs_ib", "habanalabs_en", "habanalabs_cn"}, append(h.Modules, cmModules...)...)
		h.Providers = append(append([]string{}, allProviders...), "hbl")
		for i := 1; i < len(h.NICs); i++ {
			n := &h.NICs[i]
			n.IBDev, n.Uverbs, n.NodeGUID, n.FW = fmt.Sprintf("hbl_%d", i-1), i-1, fmt.Sprintf("b0fd:0bff:fe%02x:0000", i), "1.18.0"
			for p := 0; p < 3; p++ {
				n.Ports = append(n.Ports, Port{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "100 Gb/sec (4X EDR)", LinkLayer: "Ethernet",
					Netdev: fmt.Sprintf("hbl%dp%d", i-1, p), MAC: fmt.Sprintf("b0:fd:0b:%02x:00:%02x", i, p), MTU: 8192, OperUp: true,
					Addrs: []string{fmt.Sprintf("10.%d.%d.5/24", 100+p, i)}})
			}
		}
		return Build(h)
	}, PlatformVerdict{Check: "pci.device", Status: "pass", Finding: "pci.device/driver-not-in-table", Healthy: true},
		PlatformVerdict{Check: "port.state", Status: "pass"})
}
