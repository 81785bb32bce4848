package sysfstest

import (
	"fmt"
	"path"
	"strconv"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Fixtures of Azure VMs on Hyper-V whose GPUs and InfiniBand VFs are
// passed through on vPCI buses. Each comment says what the fixture was
// made from (read: a source; inferred: what the source implies without
// showing it) and the verdict and exit code rdmadoctor must give it at
// level 1, stated before the checks were run against it; HypervVerdicts
// holds the same for the test that asserts them.
//
// What every fixture here shares:
//   - read: drivers/pci/controller/pci-hyperv.c — each passed-through
//     function gets its own root bus ("modeled as a root PCI bus because
//     no bridges are being exposed to the VM"), created below its VMBus
//     device (/sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/
//     <instance GUID>/pci<domain>:00/<domain>:00:00.0); hv_pci_probe
//     takes the domain from bytes 4 and 5 of the instance GUID
//     (dom_req = b[5] << 8 | b[4]), the second group of the GUID as the
//     VMBus device's name prints it; hv_pci_assign_numa_node sets each
//     function's numa_node from the host's virtual_numa_node when the
//     host flags HV_PCI_DEVICE_FLAG_NUMA_AFFINITY.
//   - read: Azure/azhpc-images topology/ndv5-topo.xml and ndv4-topo.xml,
//     installed as /opt/microsoft/<size>-topo.xml, with /etc/nccl.conf
//     naming the size's file in NCCL_TOPO_FILE (the ND v5 script links
//     /opt/microsoft/ndv5/topo.xml to it and loads nvidia-peermem): the
//     GPU–NIC pairing of the size, each pair below one virtual bridge
//     (busid ffff:ff:0N.0) of a NUMA node; GPUs are class 0x030200 on
//     domains 0001…, the IB VFs class 0x020700 on domains 0101….
//   - read: mlx5_ib's hca_type is "MT" and the PCI device ID in decimal
//     (0x101c ConnectX-6 VF → MT4124, 0x101e the ConnectX-6 Dx and later
//     VF → MT4126); a VF has no physfn link in a guest and no PCIe link
//     files of its own the guest could act on (its link is the PF's).
//   - inferred: the instance GUIDs' other groups, node and port GUIDs
//     (Hyper-V's OUI 00:15:5d), LIDs and the SM's LID, firmware and board
//     IDs, kernel releases of the Azure HPC images, IPoIB addresses;
//     accelerated networking's Ethernet VF is left out (eth0 is
//     hv_netvsc's synthetic NIC alone).

// vpciGUID is the VMBus instance GUID of the vPCI device with PCI domain
// domain ("0101"): pci-hyperv reads the domain from its second group.
func vpciGUID(serial int, domain string) string {
	return fmt.Sprintf("%08x-%s-0000-3130-444532304235", serial, domain)
}

// vpciDir is the /sys/devices directory of the function <domain>:00:00.0
// on its own vPCI bus.
func vpciDir(serial int, domain string) string {
	return path.Join(hypervVPCIBus(domain, vpciGUID(serial, domain)), domain+":00:00.0")
}

// azureIBVF is an InfiniBand VF of an Azure HPC or ND VM on the vPCI bus of
// domain, its port ACTIVE with a LID from the platform's subnet manager;
// the images' udev rule names it mlx5_ib<i> and IPoIB's netdev ib<i>.
func azureIBVF(i int, domain string, numa int, device uint16, rate, fw string) NIC {
	guid := fmt.Sprintf("0015:5dff:fe34:%04x", 0x2000+i)
	n := NIC{Addr: domain + ":00:00.0", Vendor: mellanox, Device: device, Class: 0x020700, SubVendor: mellanox, SubDevice: 0x0023,
		Driver: "mlx5_core", NUMA: numa, IBDev: fmt.Sprintf("mlx5_ib%d", i), Uverbs: i, NodeGUID: fmt.Sprintf("0015:5dff:fe34:%04x", 0x1000+i),
		FW: fw, HCAType: fmt.Sprintf("MT%d", device), BoardID: "MT_0000000223", MaxReadReq: 4096, RelaxedOrder: true,
		Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: rate, LinkLayer: "InfiniBand", LID: 0x2a0 + i, SMLID: 0x1,
			PortGUID: guid, Netdev: fmt.Sprintf("ib%d", i), MAC: ipoibAddr(0x1048+i, guid), MTU: 2044, OperUp: true}},
		parentDir: hypervVPCIBus(domain, vpciGUID(0x100+i, domain))}
	if i == 0 {
		n.Ports[0].Addrs = []string{"172.16.1.4/16"}
	}
	return n
}

// vpciGPU is a GPU passed through on its own vPCI bus: Hyper-V hands the
// guest the device's configuration space, so its link registers are the
// device's own; no bridge is above it.
type vpciGPU struct {
	GPUDev
	Serial int
}

// writeVPCIGPUs writes each GPU below its VMBus device.
func writeVPCIGPUs(t *Tree, gpus []vpciGPU) {
	for _, g := range gpus {
		d := vpciDir(g.Serial, g.Addr[:4])
		writeFunction(t, d, g.Vendor, g.Device, g.Class, g.NUMA, g.Driver)
		t.Attr(path.Join(d, "current_link_speed"), g.Speed)
		t.Attr(path.Join(d, "current_link_width"), fmt.Sprint(g.Width))
		t.Attr(path.Join(d, "max_link_speed"), g.MaxSpeed)
		t.Attr(path.Join(d, "max_link_width"), fmt.Sprint(g.MaxWidth))
		t.File(path.Join(d, "config"), string(EncodeConfig(ConfigSpace{Vendor: g.Vendor, Device: g.Device, Class: g.Class,
			MaxReadReq: 512, RelaxedOrder: true})))
	}
}

// azureGuestGPU is what an Azure ND VM adds for its GPUs: no IOMMU in the
// guest, the hypervisor's CPU flag, Hyper-V's SMBIOS identity, the NVIDIA
// driver of the HPC image.
func azureGuestGPU(kernel string) *GPUHost {
	return &GPUHost{Cmdline: "BOOT_IMAGE=/boot/vmlinuz-" + kernel + " root=PARTUUID=6a5c8f1e-0c1d-4d7e-9b2a-3f4e5d6c7b8a ro console=tty1 console=ttyS0 earlyprintk=ttyS0",
		Hypervisor: true, SysVendor: "Microsoft Corporation", Product: "Virtual Machine", NVIDIAVersion: nvidiaProp535}
}

// ndPair is one GPU–NIC pair of an ND VM: the GPU's and the NIC's domains
// and their NUMA node, in the order of the size's topology file.
type ndPair struct {
	gpu, nic string
	numa     int
}

// ndVM is an Azure ND VM: a GPU and an IB VF per pair, each on its own
// vPCI bus.
type ndVM struct {
	host  Host
	gpus  []vpciGPU
	files map[string]string // /etc/nccl.conf, the topology files
	links map[string]string // link → target
}

func newNDVM(host Host, pairs []ndPair, gpu GPUDev, nicDevice uint16, rate, fw string) ndVM {
	vm := ndVM{host: host}
	for i, p := range pairs {
		// The images name the IB devices in PCI order: mlx5_ib0 is 0101.
		dom, _ := strconv.ParseUint(p.nic, 16, 16)
		vm.host.NICs = append(vm.host.NICs, azureIBVF(int(dom)-0x101, p.nic, p.numa, nicDevice, rate, fw))
		g := gpu
		g.Addr, g.NUMA = p.gpu+":00:00.0", p.numa
		vm.gpus = append(vm.gpus, vpciGPU{GPUDev: g, Serial: 0x10 + i})
	}
	return vm
}

// build writes the VM's tree: the host, its GPUs, its files.
func (vm ndVM) build() *Tree {
	t := Build(vm.host)
	writeVPCIGPUs(t, vm.gpus)
	for p, c := range vm.files {
		t.File(p, c)
	}
	for l, target := range vm.links {
		t.RelLink(l, target)
	}
	return t
}

// The ND H100 v5 pairs, from ndv5-topo.xml: GPU domains 0001, 0002, 0003,
// 0008 with NICs 0101–0104 on NUMA node 0, 0009, 000a, 000b, 000c with
// 0105–0108 on node 1.
var ndv5Pairs = []ndPair{{"0001", "0101", 0}, {"0002", "0102", 0}, {"0003", "0103", 0}, {"0008", "0104", 0},
	{"0009", "0105", 1}, {"000a", "0106", 1}, {"000b", "0107", 1}, {"000c", "0108", 1}}

// The ND A100 v4 pairs, from ndv4-topo.xml: two GPUs and two NICs below one
// virtual bridge on each of four NUMA nodes.
var ndv4Pairs = []ndPair{{"0003", "0103", 0}, {"0004", "0104", 0}, {"0001", "0101", 1}, {"0002", "0102", 1},
	{"000d", "0107", 2}, {"000e", "0108", 2}, {"000b", "0105", 3}, {"000c", "0106", 3}}

// ncclTopoFile writes an NCCL topology file as Azure's are made (without
// their CPU affinity masks, which nothing here reads): per NUMA
// node a <cpu>, per virtual bridge a <pci> holding its GPUs and NICs.
// perBridge is how many pairs share one bridge (1 on ND v5, 2 on ND v4).
func ncclTopoFile(pairs []ndPair, perBridge int, cpuVendor, speed string) string {
	s := "<system version=\"1\">\n"
	bridge := 0
	for i := 0; i < len(pairs); i += perBridge {
		numa := pairs[i].numa
		if i == 0 || pairs[i-1].numa != numa {
			if i > 0 {
				s += "  </cpu>\n"
			}
			s += fmt.Sprintf("  <cpu numaid=\"%d\" arch=\"x86_64\" vendor=\"%s\">\n", numa, cpuVendor)
		}
		bridge++
		s += fmt.Sprintf("    <pci busid=\"ffff:ff:%02x.0\" class=\"0x060400\" link_speed=\"%s\" link_width=\"16\">\n", bridge, speed)
		for _, p := range pairs[i:min(i+perBridge, len(pairs))] {
			s += fmt.Sprintf("      <pci busid=\"%s:00:00.0\" class=\"0x030200\" link_speed=\"%s\" link_width=\"16\"/>\n", p.gpu, speed)
			s += fmt.Sprintf("      <pci busid=\"%s:00:00.0\" class=\"0x020700\" link_speed=\"%s\" link_width=\"16\"/>\n", p.nic, speed)
		}
		s += "    </pci>\n"
	}
	return s + "  </cpu>\n</system>\n"
}

// azureTopoFiles are the topology files the HPC images install for every
// ND size, whatever the VM's size: a reader must pick the VM's own.
func azureTopoFiles() map[string]string {
	return map[string]string{
		"/opt/microsoft/ndv5-topo.xml": ncclTopoFile(ndv5Pairs, 1, "GenuineIntel", gen5),
		"/opt/microsoft/ndv4-topo.xml": ncclTopoFile(ndv4Pairs, 2, "AuthenticAMD", "16 GT/s"),
	}
}

// azureEth0 is hv_netvsc's synthetic NIC, the VM's only Ethernet interface.
var azureEth0 = sysfs.Netdev{Name: "eth0", Index: 2, OperState: "up", AdminUp: true, Carrier: true, MTU: 1500, Addresses: []string{"10.0.0.4/24"}}

// azure-ndv5-h100: a healthy Standard_ND96isr_H100_v5.
//   - read: "Decoding Azure's NCCL Topology Files" (an ND96isr_H100_v5
//     taken apart from /sys): two Sapphire Rapids Xeon 8480C sockets of
//     48 vCPUs, each with 4 H100 GPUs and 4 ConnectX-7 400 Gb/s
//     InfiniBand NICs; without /opt/microsoft/ndv5-topo.xml NCCL falls
//     back to its own, wrong, detection (every function is on its own
//     root bus); Azure's size list: 96 vCPUs, 8 GPUs.
//   - read: the azhpc-images ND v5 script (the topology file, its
//     /opt/microsoft/ndv5/topo.xml link, /etc/nccl.conf, nvidia-peermem).
//   - inferred: 10de:2330 (H100 SXM5 80GB) and the ConnectX-7 VF ID
//     15b3:101e (the mlx5 VF ID of ConnectX-6 Dx and later), the 535
//     driver, the 5.15 Azure kernel, PCIe Gen5 x16 GPU links.
//
// Must be: exit 0; gpu.nic_affinity pass with gpu.nic_affinity/published-pair
// on each GPU (paired by the VM's topology file, the hypervisor hiding
// the PCIe path); no warn in the report.
func AzureNDv5H100() ndVM {
	const kernel = "5.15.0-1073-azure"
	h := Host{Hostname: "ndv5-vm01", Kernel: kernel, Memlock: "unlimited", CapIPCLock: true, Providers: allProviders,
		Modules:      append(append([]string{"ib_ipoib", "mlx5_ib", "mlx5_core", "hv_netvsc", "pci_hyperv"}, nvidiaModules...), cmModules...),
		ExtraNetdevs: []sysfs.Netdev{azureEth0}, GPU: azureGuestGPU(kernel)}
	vm := newNDVM(h, ndv5Pairs, GPUDev{Vendor: 0x10de, Device: 0x2330, Class: 0x030200, Driver: "nvidia",
		Speed: gen5, Width: 16, MaxSpeed: gen5, MaxWidth: 16}, 0x101e, "400 Gb/sec (4X NDR)", "28.39.2048 (MT_0000000223)")
	vm.files = azureTopoFiles()
	vm.files["/etc/nccl.conf"] = "NCCL_IB_PCI_RELAXED_ORDERING=1\nNCCL_TOPO_FILE=/opt/microsoft/ndv5/topo.xml\n"
	vm.links = map[string]string{"/opt/microsoft/ndv5/topo.xml": "/opt/microsoft/ndv5-topo.xml"}
	return vm
}

// azure-ndv5-h100-vf-missing: the ND H100 v5 VM after host servicing
// brought back seven of its eight InfiniBand VFs: 0105:00:00.0 (mlx5_ib4,
// GPU 0009:00:00.0's rail) is gone.
//   - read: the published topology pairs 0009:00:00.0 with 0105:00:00.0;
//     pci-hyperv adds and removes functions as the host offers and
//     revokes them (PCI_BUS_RELATIONS / PCI_EJECT), so a VF the host does
//     not offer is simply absent in the guest.
//   - inferred: that host servicing is what takes a VF away; the other
//     devices keep their names; the remedy a cloud guest has is the
//     platform's (deallocate and start, redeploy, a support case).
//
// Must be: gpu.nic_affinity fail, exit 23 — gpu.nic_affinity/published-nic-missing
// on GPU 0009:00:00.0, whose fix is the platform's (redeploy, support
// case), never a slot or BIOS change.
func AzureNDv5H100VFMissing() ndVM {
	vm := AzureNDv5H100()
	vm.host.Hostname = "ndv5-vm02"
	var nics []NIC
	for _, n := range vm.host.NICs {
		if n.Addr != "0105:00:00.0" {
			nics = append(nics, n)
		}
	}
	vm.host.NICs = nics
	return vm
}

// azure-ndv4-a100: a healthy Standard_ND96asr_v4.
//   - read: ndv4-topo.xml — four NUMA nodes (AMD family 23 model 49,
//     EPYC Rome), two GPUs and two NICs below each virtual bridge, PCIe
//     16 GT/s x16; the azhpc-images ND v4 script (/opt/microsoft/ndv4
//     link, /etc/nccl.conf).
//   - inferred: 8 A100 SXM4 40GB (10de:20b0), 8 HDR 200 Gb/s ConnectX-6
//     VFs (15b3:101c, as the HBv3 fixture's), the EPYC 7V12 model name,
//     the driver and kernel releases.
//
// Must be: exit 0; gpu.nic_affinity pass with gpu.nic_affinity/published-pair
// on each GPU; no warn in the report.
func AzureNDv4A100() ndVM {
	const kernel = "5.15.0-1068-azure"
	h := Host{Hostname: "ndv4-vm01", Kernel: kernel, Memlock: "unlimited", CapIPCLock: true, Providers: allProviders,
		Modules:      append(append([]string{"ib_ipoib", "mlx5_ib", "mlx5_core", "hv_netvsc", "pci_hyperv"}, nvidiaModules...), cmModules...),
		ExtraNetdevs: []sysfs.Netdev{azureEth0}, GPU: azureGuestGPU(kernel)}
	const gen4 = "16.0 GT/s PCIe"
	vm := newNDVM(h, ndv4Pairs, GPUDev{Vendor: 0x10de, Device: 0x20b0, Class: 0x030200, Driver: "nvidia",
		Speed: gen4, Width: 16, MaxSpeed: gen4, MaxWidth: 16}, 0x101c, "200 Gb/sec (4X HDR)", "20.31.1014 (MT_0000000223)")
	vm.files = azureTopoFiles()
	vm.files["/etc/nccl.conf"] = "NCCL_IB_PCI_RELAXED_ORDERING=1\nNCCL_TOPO_FILE=/opt/microsoft/ndv4/topo.xml\nNCCL_IGNORE_CPU_AFFINITY=1\n"
	vm.links = map[string]string{"/opt/microsoft/ndv4/topo.xml": "/opt/microsoft/ndv4-topo.xml"}
	return vm
}

// azure-hbv4-ib: a healthy Standard_HB176rs_v4.
//   - read: Azure's HBv4-series overview — two 96-core EPYC 9V33X
//     (Genoa-X), SMT off, 176 cores and 4 NUMA domains in the VM.
//   - inferred: one 400 Gb/s NDR InfiniBand ConnectX-7 VF (15b3:101e) as
//     the size's InfiniBand (the size page's table, not re-read), the
//     kernel release, the VF's domain 0101 and NUMA node 0, no GPU.
//
// Must be: exit 0; port.state pass on mlx5_ib0/1; the GPU checks skip
// (no GPU); no warn in the report.
func AzureHBv4IB() Host {
	return Host{Hostname: "hbv4-vm01", Kernel: "5.15.0-1073-azure", Memlock: "unlimited", CapIPCLock: true, Providers: allProviders,
		Modules:      append([]string{"ib_ipoib", "mlx5_ib", "mlx5_core", "hv_netvsc", "pci_hyperv"}, cmModules...),
		NICs:         []NIC{azureIBVF(0, "0101", 0, 0x101e, "400 Gb/sec (4X NDR)", "28.39.2048 (MT_0000000223)")},
		ExtraNetdevs: []sysfs.Netdev{azureEth0}}
}

func init() {
	register("azure-ndv5-h100", func() *Tree { return AzureNDv5H100().build() })
	register("azure-ndv5-h100-vf-missing", func() *Tree { return AzureNDv5H100VFMissing().build() })
	register("azure-ndv4-a100", func() *Tree {
		t := AzureNDv4A100().build()
		hypervGuest(t, "AMD EPYC 7V12 64-Core Processor")
		return t
	})
	register("azure-hbv4-ib", func() *Tree {
		t := Build(AzureHBv4IB())
		hypervGuest(t, "AMD EPYC 9V33X 96-Core Processor")
		return t
	})
}

// HypervVerdicts are the verdicts stated above, by fixture.
var HypervVerdicts = map[string]GuestIBVerdict{
	"azure-ndv5-h100":            {0, "gpu.nic_affinity", "pass", "gpu.nic_affinity/published-pair"},
	"azure-ndv5-h100-vf-missing": {23, "gpu.nic_affinity", "fail", "gpu.nic_affinity/published-nic-missing"},
	"azure-ndv4-a100":            {0, "gpu.nic_affinity", "pass", "gpu.nic_affinity/published-pair"},
	"azure-hbv4-ib":              {0, "port.state", "pass", ""},
}
