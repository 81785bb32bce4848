package sysfstest

import (
	"path"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Fixtures of InfiniBand seen from inside a cloud VM: the HCA is an SR-IOV
// virtual function on a Hyper-V vPCI bus, the fabric and its subnet
// manager belong to the platform. The comment says what the fixture was
// made from (read: a source; inferred: what the source implies without
// showing it) and the verdict and exit code rdmadoctor must give it at
// level 1, stated before the checks were run against it; GuestIBVerdicts
// holds the same for the test that asserts them.
//
// azure-hbv3-ib-init: an Azure HBv3 VM (Standard_HB120rs_v3) whose
// InfiniBand port is still INIT: the link trained (phys LinkUp) but the
// fabric's subnet manager has not configured it (LID 0, SM LID 0).
//   - read: Azure's HBv3 size page — AMD EPYC 7V73X, 200 Gb/s HDR
//     InfiniBand through SR-IOV; the HPC VM images' published `lspci`
//     lists "Infiniband controller: Mellanox Technologies MT28908 Family
//     [ConnectX-6 Virtual Function]" (15b3:101c) and `ibstat` a CA
//     "mlx5_ib0" (the images' udev rule names IB devices mlx5_ib<n>, as
//     the ND sizes' NCCL topology files do) at "Rate: 200", "Link layer:
//     InfiniBand"; Azure's HPC troubleshooting page says a port left in
//     INIT/down is fixed by redeploying the VM, and that the fabric's SM
//     is the platform's (a guest cannot run one).
//   - read: drivers/pci/controller/pci-hyperv.c — a vPCI device's root
//     bus is pci<domain>:00 below its VMBus device
//     (/sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/<guid>/),
//     the domain taken from the VMBus instance GUID, no bridge above the
//     function; the guest sees no PF (no physfn link).
//   - read: arch/x86/kernel/cpu — every hypervisor sets CPUID.1:ECX[31],
//     shown as the "hypervisor" cpuinfo flag; Hyper-V's SMBIOS reads
//     "Microsoft Corporation" / "Virtual Machine".
//   - read: IBA — a VF has no QP0 (subnet management), so neither opensm
//     nor sminfo/ibportstate can run from it.
//   - inferred: the vPCI domain 0101 and its VMBus GUID, the VF's GUIDs
//     (Hyper-V's OUI 00:15:5d), the firmware version; accelerated
//     networking is off, so hv_netvsc's eth0 is the only Ethernet
//     interface; IPoIB's ib0 is up without carrier (IPoIB's carrier
//     follows the port going ACTIVE) and without the address the platform
//     gives it later; the VF's PCIe link files are left out (a VF's link
//     is its PF's, which the guest does not see).
//
// Must be: port.state fail, exit 19 — finding port.state/init-no-sm-guest
// on mlx5_ib0/1, whose fix waits for the platform's SM and redeploys; no
// remedy in the report mentions opensm.
func AzureHBv3IBInit() Host {
	const guid = "0015:5dff:fd33:ff0c"
	return Host{Hostname: "hbv3-vm01", Kernel: "5.15.0-1057-azure",
		Modules: append([]string{"ib_ipoib", "mlx5_ib", "mlx5_core", "hv_netvsc", "pci_hyperv"}, cmModules...),
		Memlock: "unlimited", CapIPCLock: true, Providers: allProviders,
		NICs: []NIC{{Addr: "0101:00:00.0", Vendor: mellanox, Device: 0x101c, Class: 0x020700, SubVendor: mellanox, SubDevice: 0x0007,
			Driver: "mlx5_core", NUMA: 0, IBDev: "mlx5_ib0", Uverbs: 0, NodeGUID: "0015:5dff:fd33:ff0b",
			FW: "20.28.4000 (MT_0000000223)", HCAType: "MT4124", BoardID: "MT_0000000223",
			Ports: []Port{{State: "2: INIT", PhysState: "5: LinkUp", Rate: "200 Gb/sec (4X HDR)", LinkLayer: "InfiniBand",
				LID: 0, SMLID: 0, PortGUID: guid, Netdev: "ib0", MAC: ipoibAddr(0x48, guid), MTU: 2044, NoCarrier: true}},
			parentDir: hypervVPCIBus("0101", vpciGUID(0x100, "0101"))}},
		ExtraNetdevs: []sysfs.Netdev{{Name: "eth0", Index: 2, OperState: "up", AdminUp: true, Carrier: true, MTU: 1500,
			Addresses: []string{"10.0.0.4/24"}}},
	}
}

// hypervVPCIBus is the root bus pci-hyperv makes for a vPCI device: below
// its VMBus device, named by the PCI domain it takes from the GUID.
func hypervVPCIBus(domain, vmbusGUID string) string {
	return path.Join("/sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00", vmbusGUID, "pci"+domain+":00")
}

// hypervGuest marks a tree as a Hyper-V guest: the CPU's hypervisor flag
// and Hyper-V's SMBIOS identity.
func hypervGuest(t *Tree, cpu string) {
	t.File("/proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: "+cpu+"\n"+
		"flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext "+
		"fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl cpuid pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt aes xsave avx "+
		"f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext\n\n")
	t.Attr("/sys/class/dmi/id/sys_vendor", "Microsoft Corporation")
	t.Attr("/sys/class/dmi/id/product_name", "Virtual Machine")
}

func init() {
	register("azure-hbv3-ib-init", func() *Tree {
		t := Build(AzureHBv3IBInit())
		hypervGuest(t, "AMD EPYC 7V73X 64-Core Processor")
		return t
	})
}

// GuestIBVerdict is the verdict a guest InfiniBand fixture must get.
type GuestIBVerdict struct {
	Exit    int
	Check   string
	Status  string
	Finding string // the finding the check must return
}

// GuestIBVerdicts are the verdicts stated above, by fixture.
var GuestIBVerdicts = map[string]GuestIBVerdict{
	"azure-hbv3-ib-init": {19, "port.state", "fail", "port.state/init-no-sm-guest"},
}
