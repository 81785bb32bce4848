package sysfstest

import (
	"fmt"
	"path"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Fixtures of two host kinds the x86-64 reference fixtures do not cover:
// Arm64 servers (NVIDIA Grace Hopper, Ampere Altra), whose loader cache
// flags every library FLAG_AARCH64_LIB64, and MLNX_OFED / DOCA-OFED hosts
// that set RoCE's traffic class globally through
// /sys/class/infiniband/<dev>/tc/<port>/traffic_class. Each fixture's
// comment says what was read, what was inferred, and the verdict and exit
// code it must get at level 1; ArmOFEDVerdicts lists them for the tests.

// ArmOFEDVerdict is the verdict a fixture of this file must get: the
// status of the check it is about, with the options named, and the exit
// code of the whole level-1 run.
type ArmOFEDVerdict struct {
	Fixture        string
	Check          string
	Status         string // "pass", "warn", "fail", "error", "skip"
	Finding        string // the finding ID the check must carry
	ExpectLossless bool   // run with --expect-lossless
	Exit           int
}

// ArmOFEDVerdicts are the verdicts stated before the code was run against
// the fixtures.
var ArmOFEDVerdicts = []ArmOFEDVerdict{
	{Fixture: "gh200-dmabuf-no-peermem", Check: "gpu.peer_memory", Status: "pass", Finding: "gpu.peer_memory/available", Exit: 0},
	{Fixture: "gh200-rdma-core-33", Check: "gpu.peer_memory", Status: "fail", Finding: "gpu.peer_memory/nvidia-no-path", Exit: 24},
	{Fixture: "ampere-altra-roce", Check: "libibverbs.install", Status: "pass", Finding: "libibverbs.install/ok", Exit: 0},
	{Fixture: "kunpeng920-rocky9-aarch64", Check: "libibverbs.install", Status: "pass", Finding: "libibverbs.install/ok", Exit: 0},
	{Fixture: "mlnx-ofed-global-tclass", Check: "roce.lossless", Status: "pass", Finding: "roce.lossless/lossless", ExpectLossless: true, Exit: 0},
	{Fixture: "mlnx-ofed-global-tclass", Check: "roce.lossless", Status: "pass", Finding: "roce.lossless/lossless", Exit: 0},
	{Fixture: "mlnx-ofed-tclass-pfc-elsewhere", Check: "roce.lossless", Status: "fail", Finding: "roce.lossless/ofed-tclass-off-pfc", ExpectLossless: true, Exit: 21},
	{Fixture: "mlnx-ofed-tclass-pfc-elsewhere", Check: "roce.lossless", Status: "warn", Finding: "roce.lossless/ofed-tclass-off-pfc", Exit: 0},
}

// Ubuntu2404Arm64 is Ubuntu 24.04 on arm64 (read: Ubuntu's rdma-core
// package is 50.0 in noble and installs into the multiarch directory
// /usr/lib/aarch64-linux-gnu, as Debian's does; libc6's
// /etc/ld.so.conf.d/aarch64-linux-gnu.conf lists the multiarch
// directories; the generator string is inferred from Debian's shape).
var Ubuntu2404Arm64 = debianMultiarch("aarch64-linux-gnu", ubuntuNobleOSRelease, "50", "ldconfig (Ubuntu GLIBC 2.39-0ubuntu8.3) stable release version 2.39")

// Debian12Arm64 is Debian 12 on arm64: rdma-core 44 in
// /usr/lib/aarch64-linux-gnu (read: Debian's rdma-core 44.0-2 for arm64).
var Debian12Arm64 = debianMultiarch("aarch64-linux-gnu", debianOSRelease, "44", "ldconfig (Debian GLIBC 2.36-9+deb12u4) stable release version 2.36")

const ubuntuNobleOSRelease = `PRETTY_NAME="Ubuntu 24.04.1 LTS"
NAME="Ubuntu"
VERSION_ID="24.04"
VERSION="24.04.1 LTS (Noble Numbat)"
VERSION_CODENAME=noble
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
UBUNTU_CODENAME=noble
`

// buildArm64 builds an arm64 host: the tree as Build makes it, then the
// loader cache rewritten the way an aarch64 ldconfig writes it. ldconfig
// flags each entry with the ABI its ELF header names (glibc's
// sysdeps/generic/ldconfig.h FLAG_AARCH64_LIB64 0x0a00 with FLAG_ELF_LIBC6
// 0x0003: `ldconfig -p` prints "libc6,AArch64"), and an aarch64 LP64 loader
// looks up only entries with that _DL_CACHE_DEFAULT_ID (read: glibc's
// sysdeps/aarch64/dl-cache.h).
func buildArm64(h Host) *Tree {
	t := Build(h)
	writeArm64LDCache(t, h.layout().LDGenerator)
	return t
}

// writeArm64LDCache re-flags every entry of the tree's loader cache as an
// aarch64 library and writes it back with the layout's generator.
func writeArm64LDCache(t *Tree, generator string) {
	c, err := sysfs.ParseLDCache([]byte(t.Files[sysfs.LDSOCache]))
	if err != nil {
		panic(fmt.Sprintf("sysfstest: the generated loader cache does not parse: %v", err))
	}
	entries := make([]LDEntry, 0, len(c.Entries))
	for _, e := range c.Entries {
		flags := e.Flags&sysfs.LDFlagTypeMask | sysfs.LDFlagAArch64Lib64
		entries = append(entries, LDEntry{Name: e.Name, Path: e.Path, Flags: flags})
	}
	SortLDEntries(entries)
	t.File(sysfs.LDSOCache, string(EncodeLDCache(entries, generator)))
}

// nvidiaOpenAarch64 is the version file of the open kernel modules on
// arm64 (inferred: the x86-64 line with the architecture NVIDIA's aarch64
// builds name; Grace Hopper is supported only by the open modules).
const nvidiaOpenAarch64 = "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  550.127.05  Release Build  (dvs-builder@U16-I3-B14-1-1)  Tue Oct  8 03:16:01 UTC 2024\n" +
	"GCC version:  gcc version 13.2.0 (Ubuntu 13.2.0-23ubuntu4)\n"

// GH200 is a single-superchip NVIDIA GH200 node (a Supermicro ARS-111GL-NHR
// shape). Read: NVIDIA's GH200 documentation — the Hopper GPU is attached
// to Grace by NVLink-C2C and shows up as PCI device 10de:2342 in its own
// PCI domain (0009:01:00.0 in published lspci listings), the ConnectX-7 on
// a Grace PCIe Gen5 root port in domain 0000; Grace Hopper runs the open
// GPU kernel modules and NVIDIA recommends DMA-BUF over nvidia-peermem.
// Inferred: the root ports' device ID (10de:22b2), the IOMMU unit name,
// Ubuntu 24.04's nvidia-64k kernel release, passthrough by
// iommu.passthrough=1. nvidia_peermem is not loaded.
func GH200() Host {
	root := func(dom int) Bridge {
		return Bridge{Addr: fmt.Sprintf("%04x:00:00.0", dom), HostBridge: fmt.Sprintf("pci%04x:00", dom), PortType: 4,
			Vendor: 0x10de, Device: 0x22b2, NUMA: 0, Speed: gen5, Width: 16}
	}
	nic := cx7IB(0, 0x01, 0, "0000:00:00.0")
	return Host{Hostname: "gh200-node01", Kernel: "6.8.0-1021-nvidia-64k", Memlock: "unlimited", CapIPCLock: true,
		Modules:   append(append([]string{"ib_ipoib"}, without(nvidiaModules, "nvidia_peermem")...), rdmaModulesMLX5...),
		Providers: allProviders, Layout: Ubuntu2404Arm64, NICs: []NIC{nic},
		GPU: &GPUHost{Cmdline: "BOOT_IMAGE=/boot/vmlinuz-6.8.0-1021-nvidia-64k root=UUID=3c4d5e6f-7081-492a-b3c4-d5e6f7081a2b ro iommu.passthrough=1 init_on_alloc=0",
			SysVendor: "Supermicro", Product: "ARS-111GL-NHR", IOMMUUnits: []string{"smmu3.0x0000000011000000"}, GroupType: "identity",
			NVIDIAVersion: nvidiaOpenAarch64,
			Bridges:       []Bridge{root(0x0000), root(0x0009)},
			GPUs: []GPUDev{{Addr: "0009:01:00.0", Parent: "0009:00:00.0", Vendor: 0x10de, Device: 0x2342, Class: 0x030200, Driver: "nvidia",
				NUMA: 0, Speed: gen5, Width: 16, MaxSpeed: gen5, MaxWidth: 16}}},
	}
}

// AmpereAltraRoCE is an Ampere Altra Max server (arm64) with a dual-port
// ConnectX-6 Dx (15b3:101d) carrying RoCE, Debian 12 arm64 and its
// rdma-core 44. Read: Debian's arm64 packaging of rdma-core; the ConnectX-6
// Dx device ID. Inferred: the slot, firmware and addresses (the CX5RoCE
// shape with the card swapped).
func AmpereAltraRoCE() Host {
	h := CX5RoCE()
	h.Hostname, h.Kernel, h.Layout = "altra-node03", "6.1.0-18-arm64", Debian12Arm64
	for i := range h.NICs {
		n := &h.NICs[i]
		n.Device, n.SubDevice, n.HCAType = 0x101d, 0x0016, "MT4125"
		n.FW, n.BoardID = "22.39.2048 (MT_0000000359)", "MT_0000000359"
		n.Speed, n.MaxSpeed, n.BridgeSpeed = "16.0 GT/s PCIe", "16.0 GT/s PCIe", "16.0 GT/s PCIe"
	}
	return h
}

// Kunpeng920Rocky9 is a Kunpeng 920 host with its on-die HNS3 RoCE ports
// (the HNSRoCE shape) running Rocky Linux 9 for aarch64: the RHEL family
// installs 64-bit libraries in /usr/lib64 on aarch64 as on x86-64 (read:
// rdma-core.spec's %{_libdir}; glibc's aarch64 built-in directories are
// /lib64 and /usr/lib64), and its cache entries carry FLAG_AARCH64_LIB64.
// Inferred: the el9 aarch64 kernel release.
func Kunpeng920Rocky9() Host {
	h := HNSRoCE()
	h.Hostname, h.Kernel, h.Layout = "kunpeng-node02", "5.14.0-362.8.1.el9_3.aarch64", Rocky93
	return h
}

// mlnxOFEDRoCE is a RHEL 9 host (the Rocky 9.3 layout: rdma-core in
// /usr/lib64, where MLNX_OFED installs its own build too) with a
// ConnectX-5 pair under MLNX_OFED: trust dscp, PFC on priority 3, DSCP 26
// mapped to priority 3 and ECN on (the generator's mlx5 QoS), and no
// rdma_cm configfs entry: the only class set is MLNX_OFED's global one.
func mlnxOFEDRoCE(host string) Host {
	h := CX5RoCE()
	h.Hostname, h.Kernel, h.Layout, h.RoCETOS = host, "5.14.0-362.8.1.el9_3.x86_64", Rocky93, ""
	return h
}

// SetOFEDTrafficClass writes MLNX_OFED's tc/<port>/traffic_class of an RDMA
// device as it reads after `echo tclass=<N> > …/traffic_class`:
// "Global tclass=<N>" (read: the MLNX_OFED/DOCA-OFED RoCE documentation's
// example output, quoted the same way in the issue this fixture answers).
func SetOFEDTrafficClass(t *Tree, dev string, port, tclass int) {
	devDir := path.Dir(path.Dir(PortDir(t, dev, port)))
	t.Attr(path.Join(devDir, "tc", fmt.Sprint(port), "traffic_class"), fmt.Sprintf("Global tclass=%d", tclass))
}

// withOFEDTClass builds a MLNX_OFED host with the global tclass 106 (DSCP 26)
// on every port, and PFC on the priorities of pfc.
func withOFEDTClass(h Host, pfc uint8) *Tree {
	t := Build(h)
	for _, n := range h.NICs {
		SetOFEDTrafficClass(t, n.IBDev, 1, 106)
		SetPFC(t, n.Ports[0].Netdev, pfc)
	}
	return t
}

func init() {
	// GH200 with DMA-BUF and no nvidia-peermem: open modules 550, kernel
	// 6.8, rdma-core 50 read from the aarch64 cache entry. Must get:
	// gpu.peer_memory pass (DMA-BUF), exit 0 (it was error: the x86-64
	// lookup found no libibverbs in an aarch64 cache).
	register("gh200-dmabuf-no-peermem", func() *Tree { return buildArm64(GH200()) })
	// The same GH200 with an rdma-core older than ibv_reg_dmabuf_mr (33):
	// the release is really read from the aarch64 entry, and DMA-BUF is
	// missing. Must get: gpu.peer_memory fail (nvidia-no-path), exit 24.
	register("gh200-rdma-core-33", func() *Tree {
		h := GH200()
		lay := *Ubuntu2404Arm64
		lay.RDMACore = "33"
		h.Hostname, h.Layout = "gh200-node02", &lay
		return buildArm64(h)
	})
	// Ampere Altra with rdma-core 44 in the aarch64 cache. Must get:
	// libibverbs.install pass on /usr/lib/aarch64-linux-gnu/libibverbs.so.1,
	// exit 0.
	register("ampere-altra-roce", func() *Tree { return buildArm64(AmpereAltraRoCE()) })
	// Kunpeng 920 on Rocky 9 aarch64, rdma-core 46 in /usr/lib64 cached as
	// aarch64. Must get: libibverbs.install pass on /usr/lib64's copy (the
	// cache's /lib64 name), exit 0 (hns_roce_hw_v2 has no DCB: roce.lossless
	// skips).
	register("kunpeng920-rocky9-aarch64", func() *Tree { return buildArm64(Kunpeng920Rocky9()) })
	// MLNX_OFED, global tclass 106 (DSCP 26 → priority 3), PFC on 3, trust
	// dscp, ECN on. Must get: roce.lossless pass, also with
	// --expect-lossless, exit 0 (it judged ToS 0 → priority 0: warn, and
	// fail 21 with --expect-lossless).
	register("mlnx-ofed-global-tclass", func() *Tree { return withOFEDTClass(mlnxOFEDRoCE("ofed-roce-01"), 1<<3) })
	// The same host with PFC on priority 4 only: DSCP 26 still lands on
	// priority 3. Must get: roce.lossless warn (ofed-tclass-off-pfc), exit
	// 0; with --expect-lossless fail, exit 21.
	register("mlnx-ofed-tclass-pfc-elsewhere", func() *Tree { return withOFEDTClass(mlnxOFEDRoCE("ofed-roce-02"), 1<<4) })
}
