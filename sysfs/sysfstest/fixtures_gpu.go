package sysfstest

import (
	"fmt"
	"path"
	"strings"
)

// GPUHost is what a GPU host adds to a Host: the PCIe switches between
// the CPUs and the devices, the GPUs, the IOMMU, the kernel command line,
// whether it is a VM, and the GPU driver.
type GPUHost struct {
	Bridges []Bridge
	GPUs    []GPUDev
	Cmdline string
	// Hypervisor sets the CPU's hypervisor flag in /proc/cpuinfo; SysVendor
	// and Product are /sys/class/dmi/id's.
	Hypervisor         bool
	SysVendor, Product string
	// IOMMUUnits are /sys/class/iommu's entries ("dmar0", "ivhd0");
	// GroupType is every device's group type ("identity", "DMA-FQ"), ""
	// for no groups.
	IOMMUUnits []string
	GroupType  string
	// NVIDIAVersion is /proc/driver/nvidia/version ("" = not loaded).
	NVIDIAVersion string
	// Unprivileged writes 64-byte configuration spaces: a capture as a
	// user without CAP_SYS_ADMIN.
	Unprivileged bool
}

// Bridge is a PCI bridge: a root port below a host bridge, or a switch's
// upstream or downstream port below another bridge.
type Bridge struct {
	Addr       string
	HostBridge string // "pci0000:15" for a root port (Parent "")
	Parent     string
	PortType   uint8 // 4 root port, 5 switch upstream, 6 switch downstream
	Vendor     uint16
	Device     uint16
	NUMA       int
	Speed      string // max and current link speed
	Width      int
	ACSCtl     uint16
	NoACS      bool
}

// GPUDev is a GPU function.
type GPUDev struct {
	Addr     string
	Parent   string
	Vendor   uint16
	Device   uint16
	Class    uint32
	Driver   string
	NUMA     int
	Speed    string // current; MaxSpeed/MaxWidth the card's
	Width    int
	MaxSpeed string
	MaxWidth int
}

// placeBelowBridges resolves each NIC's Parent to its directory.
func placeBelowBridges(h *Host) {
	if h.GPU == nil {
		return
	}
	dirs := bridgeDirs(h.GPU.Bridges)
	nics := append([]NIC(nil), h.NICs...)
	for i := range nics {
		if nics[i].Parent != "" {
			nics[i].parentDir = dirs[nics[i].Parent]
		}
	}
	h.NICs = nics
}

// bridgeDirs resolves every bridge's /sys/devices directory.
func bridgeDirs(bs []Bridge) map[string]string {
	byAddr := map[string]Bridge{}
	for _, b := range bs {
		byAddr[b.Addr] = b
	}
	dirs := map[string]string{}
	var dirOf func(addr string, depth int) string
	dirOf = func(addr string, depth int) string {
		if d, ok := dirs[addr]; ok {
			return d
		}
		b := byAddr[addr]
		d := path.Join("/sys/devices", b.HostBridge, addr)
		if b.Parent != "" && depth < 16 {
			d = path.Join(dirOf(b.Parent, depth+1), addr)
		}
		dirs[addr] = d
		return d
	}
	for _, b := range bs {
		dirOf(b.Addr, 0)
	}
	return dirs
}

// writeGPUHost writes what a GPU host adds: bridges, GPUs, configuration
// spaces of every function judged, the IOMMU, /proc/cmdline, cpuinfo, DMI
// and the NVIDIA driver's version file.
func writeGPUHost(t *Tree, h Host) {
	g := h.GPU
	if g == nil {
		return
	}
	dirs := bridgeDirs(g.Bridges)
	group := 0
	addGroup := func(dir string) {
		if g.GroupType == "" {
			return
		}
		gd := fmt.Sprintf("/sys/kernel/iommu_groups/%d", group)
		t.Attr(path.Join(gd, "type"), g.GroupType)
		t.RelLink(path.Join(dir, "iommu_group"), gd)
		t.RelLink(path.Join(gd, "devices", path.Base(dir)), dir)
		group++
	}
	for _, b := range g.Bridges {
		d := dirs[b.Addr]
		writeFunction(t, d, b.Vendor, b.Device, 0x060400, b.NUMA, "pcieport")
		t.Attr(path.Join(d, "max_link_speed"), b.Speed)
		t.Attr(path.Join(d, "max_link_width"), fmt.Sprint(b.Width))
		t.Attr(path.Join(d, "current_link_speed"), b.Speed)
		t.Attr(path.Join(d, "current_link_width"), fmt.Sprint(b.Width))
		t.File(path.Join(d, "config"), string(EncodeConfig(ConfigSpace{Vendor: b.Vendor, Device: b.Device, Class: 0x060400, Bridge: true,
			PortType: b.PortType, HasACS: !b.NoACS && b.PortType != 5, ACSCap: 0x005f, ACSCtl: b.ACSCtl, Unprivileged: g.Unprivileged})))
		addGroup(d)
	}
	for _, gpu := range g.GPUs {
		d := path.Join(dirs[gpu.Parent], gpu.Addr)
		if gpu.Parent == "" {
			d = path.Join("/sys/devices/pci0000:00", gpu.Addr)
		}
		writeFunction(t, d, gpu.Vendor, gpu.Device, gpu.Class, gpu.NUMA, gpu.Driver)
		t.Attr(path.Join(d, "current_link_speed"), gpu.Speed)
		t.Attr(path.Join(d, "current_link_width"), fmt.Sprint(gpu.Width))
		t.Attr(path.Join(d, "max_link_speed"), gpu.MaxSpeed)
		t.Attr(path.Join(d, "max_link_width"), fmt.Sprint(gpu.MaxWidth))
		t.File(path.Join(d, "config"), string(EncodeConfig(ConfigSpace{Vendor: gpu.Vendor, Device: gpu.Device, Class: gpu.Class,
			MaxReadReq: 512, RelaxedOrder: true, Unprivileged: g.Unprivileged})))
		addGroup(d)
	}
	for _, n := range h.NICs {
		d := pciPath(n)
		t.File(path.Join(d, "config"), string(EncodeConfig(ConfigSpace{Vendor: n.Vendor, Device: n.Device, Class: n.Class,
			MaxReadReq: n.MaxReadReq, RelaxedOrder: n.RelaxedOrder, HasATS: n.ATS, ATSEnabled: n.ATS, Unprivileged: g.Unprivileged})))
		addGroup(d)
	}
	t.Dir("/sys/class/iommu")
	for _, u := range g.IOMMUUnits {
		t.RelLink(path.Join("/sys/class/iommu", u), path.Join("/sys/devices/virtual/iommu", u))
		t.Dir(path.Join("/sys/devices/virtual/iommu", u))
	}
	t.Attr("/proc/cmdline", g.Cmdline)
	t.File("/proc/cpuinfo", cpuinfo(g.Hypervisor))
	t.Attr("/sys/class/dmi/id/sys_vendor", g.SysVendor)
	t.Attr("/sys/class/dmi/id/product_name", g.Product)
	if g.NVIDIAVersion != "" {
		t.File("/proc/driver/nvidia/version", g.NVIDIAVersion)
	}
}

// writeFunction writes a PCI function's identity, NUMA node and driver.
func writeFunction(t *Tree, dir string, vendor, device uint16, class uint32, numa int, driver string) {
	t.Attr(path.Join(dir, "vendor"), fmt.Sprintf("0x%04x", vendor))
	t.Attr(path.Join(dir, "device"), fmt.Sprintf("0x%04x", device))
	t.Attr(path.Join(dir, "class"), fmt.Sprintf("0x%06x", class))
	t.Attr(path.Join(dir, "numa_node"), fmt.Sprint(numa))
	t.Attr(path.Join(dir, "enable"), "1")
	addr := path.Base(dir)
	t.RelLink(path.Join("/sys/bus/pci/devices", addr), dir)
	if driver != "" {
		drv := path.Join("/sys/bus/pci/drivers", driver)
		t.Dir(drv)
		t.RelLink(path.Join(dir, "driver"), drv)
		t.RelLink(path.Join(drv, addr), dir)
	}
}

// cpuinfo is one processor's /proc/cpuinfo entry; a guest's flags carry
// "hypervisor" (CPUID leaf 1 ECX bit 31, which every hypervisor sets).
func cpuinfo(guest bool) string {
	flags := "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm " +
		"constant_tsc rep_good nopl xtopology cpuid pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand"
	if guest {
		flags += " hypervisor"
	}
	return "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Platinum 8480C\n" +
		"flags\t\t: " + flags + "\n\n"
}

// The DGX H100 / HGX H100 8-GPU layout, from its published listings: GPUs
// at buses 1b, 43, 52, 61, 9d, c3, d1, df (nvidia-smi's 00000000:1B:00.0 …),
// ConnectX-7 NICs at 18, 40, 4f, 5e, 9a, c0, ce, dc (the ibp24s0 … ibp220s0
// interfaces), each GPU sharing a Broadcom PEX89000 Gen5 switch with one
// NIC (nvidia-smi topo -m: PIX), GPUs 0–3 and their NICs on NUMA node 0,
// 4–7 on node 1, each switch below its own root port and host bridge.
var (
	hgxGPUBuses = []int{0x1b, 0x43, 0x52, 0x61, 0x9d, 0xc3, 0xd1, 0xdf}
	hgxNICBuses = []int{0x18, 0x40, 0x4f, 0x5e, 0x9a, 0xc0, 0xce, 0xdc}
)

const (
	gen5          = "32.0 GT/s PCIe"
	nvidiaOpen550 = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release Build  (dvs-builder@U16-I3-B03-4-3)  Fri May 31 09:30:47 UTC 2024\n" +
		"GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"
	nvidiaProp535 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.154.05  Thu Dec 28 15:37:48 UTC 2023\n" +
		"GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)\n"
)

var nvidiaModules = []string{"nvidia_peermem", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia"}

// switchPair is one Gen5 switch below its root port with a NIC and a GPU
// on two downstream ports: the bridges, the NIC's and the GPU's parent.
// The NIC's bus is the root port's + 3 (root port, upstream, downstream).
func switchPair(nicBus, numa int, acsCtl uint16) ([]Bridge, string, string) {
	hb := nicBus - 3
	root := fmt.Sprintf("0000:%02x:01.0", hb)
	up := fmt.Sprintf("0000:%02x:00.0", hb+1)
	dnNIC, dnGPU := fmt.Sprintf("0000:%02x:00.0", hb+2), fmt.Sprintf("0000:%02x:01.0", hb+2)
	br := []Bridge{
		{Addr: root, HostBridge: fmt.Sprintf("pci0000:%02x", hb), PortType: 4, Vendor: 0x8086, Device: 0x352a, NUMA: numa, Speed: gen5, Width: 16},
		{Addr: up, Parent: root, PortType: 5, Vendor: 0x1000, Device: 0xc030, NUMA: numa, Speed: gen5, Width: 16},
		{Addr: dnNIC, Parent: up, PortType: 6, Vendor: 0x1000, Device: 0xc030, NUMA: numa, Speed: gen5, Width: 16, ACSCtl: acsCtl},
		{Addr: dnGPU, Parent: up, PortType: 6, Vendor: 0x1000, Device: 0xc030, NUMA: numa, Speed: gen5, Width: 16, ACSCtl: acsCtl},
	}
	return br, dnNIC, dnGPU
}

// cx7IB is a ConnectX-7 NDR InfiniBand PF below parent, its port ACTIVE.
func cx7IB(i, bus, numa int, parent string) NIC {
	guid := fmt.Sprintf("a088:c203:00%02x:%04x", 0x2a, 0x3c00+i)
	return NIC{Addr: fmt.Sprintf("0000:%02x:00.0", bus), Parent: parent, Vendor: mellanox, Device: 0x1021, Class: 0x020700,
		SubVendor: mellanox, SubDevice: 0x0041, Driver: "mlx5_core", NUMA: numa,
		Speed: gen5, Width: 16, MaxSpeed: gen5, MaxWidth: 16, IBDev: fmt.Sprintf("mlx5_%d", i), Uverbs: i,
		NodeGUID: guid, FW: "28.39.1002 (MT_0000000838)", HCAType: "MT4129", BoardID: "MT_0000000838",
		MaxReadReq: 4096, RelaxedOrder: true, ATS: false,
		Ports: []Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "400 Gb/sec (4X NDR)", LinkLayer: "InfiniBand",
			LID: 0x100 + i, SMLID: 0x1, PortGUID: guid}}}
}

// HGXH100 is the healthy 8-GPU HGX H100 node: DGX OS's kernel, IOMMU in
// passthrough, nvidia_peermem loaded with the open kernel modules, ACS
// off on the switches (DGX OS turns it off at boot).
func HGXH100() Host {
	h := Host{Hostname: "hgx-h100-01", Kernel: "5.15.0-1042-nvidia", Memlock: "unlimited", CapIPCLock: true,
		Modules:   append(append([]string{"ib_ipoib"}, nvidiaModules...), rdmaModulesMLX5...),
		Providers: []string{"mlx5", "mlx4", "rxe", "siw", "efa", "bnxt_re"},
		GPU: &GPUHost{Cmdline: "BOOT_IMAGE=/boot/vmlinuz-5.15.0-1042-nvidia root=UUID=7b4f2b1c-9a51-4c0e-8f1d-2d3c4b5a6f70 ro intel_iommu=on iommu=pt pci=realloc=off",
			SysVendor: "NVIDIA", Product: "DGXH100", IOMMUUnits: []string{"dmar0", "dmar1", "dmar2", "dmar3", "dmar4", "dmar5", "dmar6", "dmar7"},
			GroupType: "identity", NVIDIAVersion: nvidiaOpen550},
	}
	for i := range hgxGPUBuses {
		numa := i / 4
		br, dnNIC, dnGPU := switchPair(hgxNICBuses[i], numa, 0)
		h.GPU.Bridges = append(h.GPU.Bridges, br...)
		h.NICs = append(h.NICs, cx7IB(i, hgxNICBuses[i], numa, dnNIC))
		h.GPU.GPUs = append(h.GPU.GPUs, GPUDev{Addr: fmt.Sprintf("0000:%02x:00.0", hgxGPUBuses[i]), Parent: dnGPU, Vendor: 0x10de, Device: 0x2330,
			Class: 0x030200, Driver: "nvidia", NUMA: numa, Speed: gen5, Width: 16, MaxSpeed: gen5, MaxWidth: 16})
	}
	return h
}

// MI300X is an 8-GPU AMD Instinct MI300X node (1002:74a1, class 0x1200,
// amdgpu from ROCm 6) with a ConnectX-7 NDR NIC beside each GPU on its
// switch, AMD-Vi in passthrough (ROCm's guidance: iommu=pt), Ubuntu
// 22.04's HWE kernel: the DMA-BUF path.
func MI300X() Host {
	h := HGXH100()
	h.Hostname, h.Kernel = "mi300x-node05", "6.8.0-45-generic"
	h.Modules = append([]string{"ib_ipoib", "amdgpu", "amddrm_ttm_helper", "amdxcp", "drm_exec", "gpu_sched"}, rdmaModulesMLX5...)
	h.GPU.Cmdline = "BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=UUID=1e2d3c4b-5a69-4788-9a0b-c1d2e3f4a5b6 ro amd_iommu=on iommu=pt pci=realloc=off"
	h.GPU.SysVendor, h.GPU.Product = "Dell Inc.", "PowerEdge XE9680"
	h.GPU.IOMMUUnits = []string{"ivhd0", "ivhd1", "ivhd2", "ivhd3"}
	h.GPU.NVIDIAVersion = ""
	for i := range h.GPU.GPUs {
		h.GPU.GPUs[i].Vendor, h.GPU.GPUs[i].Device, h.GPU.GPUs[i].Class, h.GPU.GPUs[i].Driver = 0x1002, 0x74a1, 0x120000, "amdgpu"
	}
	return h
}

// GPUVM is a KVM guest with one H100 and one ConnectX-7 VF passed through,
// each below its own QEMU pcie-root-port (1b36:000c), no guest IOMMU.
func GPUVM() Host {
	h := HGXH100()
	h.Hostname, h.Kernel = "gpu-vm-01", "6.1.0-18-amd64"
	g := h.GPU
	g.Cmdline = "BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID=0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0 ro console=ttyS0"
	g.Hypervisor, g.SysVendor, g.Product = true, "QEMU", "Standard PC (Q35 + ICH9, 2009)"
	g.IOMMUUnits, g.GroupType = nil, ""
	g.Bridges = []Bridge{
		{Addr: "0000:00:02.0", HostBridge: "pci0000:00", PortType: 4, Vendor: 0x1b36, Device: 0x000c, NUMA: -1, Speed: gen5, Width: 16, NoACS: true},
		{Addr: "0000:00:02.1", HostBridge: "pci0000:00", PortType: 4, Vendor: 0x1b36, Device: 0x000c, NUMA: -1, Speed: gen5, Width: 16, NoACS: true},
	}
	g.GPUs = []GPUDev{{Addr: "0000:01:00.0", Parent: "0000:00:02.0", Vendor: 0x10de, Device: 0x2330, Class: 0x030200, Driver: "nvidia", NUMA: -1,
		Speed: gen5, Width: 16, MaxSpeed: gen5, MaxWidth: 16}}
	vf := cx7IB(0, 0x02, -1, "0000:00:02.1")
	vf.Device, vf.SubDevice, vf.ATS = 0x101e, 0x0041, true
	vf.NodeGUID, vf.Ports[0].PortGUID = "a088:c203:002a:3c80", "a088:c203:002a:3c80"
	h.NICs = []NIC{vf}
	return h
}

func init() {
	register("hgx-8gpu-healthy", func() *Tree { return Build(HGXH100()) })
	// nvidia_peermem not loaded, and the proprietary kernel modules (no
	// DMA-BUF export): no path for the NIC into GPU memory.
	register("hgx-no-peermem", func() *Tree {
		h := HGXH100()
		h.Modules = without(h.Modules, "nvidia_peermem")
		h.GPU.NVIDIAVersion = nvidiaProp535
		return Build(h)
	})
	// ACS P2P Request/Completion Redirect and Upstream Forwarding on the
	// downstream ports of GPU2's switch (SrcValid+ ReqRedir+ CmpltRedir+
	// UpstreamFwd+, what the kernel sets when an IOMMU driver asks for ACS).
	register("hgx-acs-redirect", func() *Tree {
		h := HGXH100()
		for i := range h.GPU.Bridges {
			if b := &h.GPU.Bridges[i]; b.PortType == 6 && strings.HasPrefix(b.Addr, "0000:4e:") {
				b.ACSCtl = 0x001d
			}
		}
		return Build(h)
	})
	// GPU3's NIC moved into a slot below a root port of the other socket.
	register("hgx-nic-across-socket", func() *Tree {
		h := HGXH100()
		h.GPU.Bridges = append(h.GPU.Bridges, Bridge{Addr: "0000:b0:01.0", HostBridge: "pci0000:b0", PortType: 4, Vendor: 0x8086, Device: 0x352a,
			NUMA: 1, Speed: gen5, Width: 16})
		h.NICs[3] = cx7IB(3, 0xb1, 1, "0000:b0:01.0")
		return Build(h)
	})
	register("gpu-vm-passthrough", func() *Tree { return Build(GPUVM()) })
	// Four L40S in a render node with Ethernet only: no RDMA NIC.
	register("gpu-no-rdma-nic", func() *Tree {
		h := RXE()
		h.Hostname, h.Soft, h.Providers = "render-node02", nil, nil
		h.Modules = append([]string{"virtio_net", "net_failover", "failover"}, without(nvidiaModules, "nvidia_peermem")...)
		h.GPU = &GPUHost{Cmdline: "BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID=2a3b4c5d-6e7f-4081-92a3-b4c5d6e7f809 ro",
			SysVendor: "Supermicro", Product: "SYS-421GE-TNRT", NVIDIAVersion: nvidiaOpen550}
		for i, bus := range []int{0x17, 0x31, 0x98, 0xb1} {
			root := fmt.Sprintf("0000:%02x:01.0", bus-1)
			h.GPU.Bridges = append(h.GPU.Bridges, Bridge{Addr: root, HostBridge: fmt.Sprintf("pci0000:%02x", bus-1), PortType: 4,
				Vendor: 0x8086, Device: 0x352a, NUMA: i / 2, Speed: "16.0 GT/s PCIe", Width: 16})
			h.GPU.GPUs = append(h.GPU.GPUs, GPUDev{Addr: fmt.Sprintf("0000:%02x:00.0", bus), Parent: root, Vendor: 0x10de, Device: 0x26b9,
				Class: 0x030200, Driver: "nvidia", NUMA: i / 2, Speed: "16.0 GT/s PCIe", Width: 16, MaxSpeed: "16.0 GT/s PCIe", MaxWidth: 16})
		}
		return Build(h)
	})
	register("amd-mi300x", func() *Tree { return Build(MI300X()) })
}
