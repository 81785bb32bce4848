package sysfstest

import (
	"fmt"
	"net"
	"path"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Host describes a machine; Build turns it into a Tree.
type Host struct {
	Hostname   string
	Kernel     string   // release, e.g. "6.1.0-18-amd64"
	Modules    []string // loaded modules, as /proc/modules lists them
	NICs       []NIC
	Soft       []SoftDevice
	Memlock    string // "unlimited" or bytes, soft and hard
	CapIPCLock bool
	// UserMemlock is the memlock default users' sessions get from
	// /etc/security/limits.d/rdma.conf, in KiB or "unlimited" ("" = unlimited);
	// "none" writes no file.
	UserMemlock string
	// Slurmd, when set, runs a slurmd with its own memlock limit (net.go).
	Slurmd *Slurmd
	// Providers are the rdma-core providers installed ("mlx5", "rxe", …);
	// nil means rdma-core is not installed at all.
	Providers []string
	// ExtraNetdevs are interfaces that carry no RDMA port (eno1, lo).
	ExtraNetdevs []sysfs.Netdev
	// Layout is the distribution's file layout; nil means Debian 12.
	Layout *Layout
	// Bonds are bonding masters over ports' netdevs (a RoCE LAG's bond0).
	Bonds []Bond
	// NetnsMode is the RDMA subsystem's netns mode ("" = shared).
	NetnsMode string
	// RoCETOS, when set, is rdma_cm's default_roce_tos of every port of
	// every RoCE NIC (set at boot on a lossless fabric); "" leaves
	// rdma_cm's configfs unmade.
	RoCETOS string
	// GPU, when set, makes a GPU host: PCIe switches, GPUs, the
	// configuration spaces, the IOMMU and the GPU driver (fixtures_gpu.go).
	GPU *GPUHost
}

// Bond is a bonding master; its slaves are the ports whose Port.Bond names it.
type Bond struct {
	Name  string
	MAC   string // the bond takes its first slave's MAC
	MTU   int
	Addrs []string
	// Mode is bonding/mode ("" = "802.3ad 4", a RoCE LAG's).
	Mode string
	// ActiveSlave, for an active-backup bond that is not a RoCE LAG, is
	// the slave whose RDMA port carries the bond's GIDs: roce_gid_mgmt.c
	// adds an upper bond's addresses only to the port of its active slave
	// (is_eth_active_slave_of_bonding_rcu) and deletes that port's default
	// GIDs (bond_delete_netdev_default_gids); the backup slave's port keeps
	// only its own default GIDs.
	ActiveSlave string
	// Netvsc makes it Hyper-V's synthetic NIC instead (hv_netvsc): a
	// VMBus device that is the master of the accelerated-networking VF
	// (netvsc_vf_join links master/upper_/lower_) but no bonding master —
	// no bonding/ directory.
	Netvsc bool
}

// bondParent is where the master of p's netdev lives.
func (p Port) bondParent() string { return Bond{Netvsc: p.NetvscMaster}.masterDir() }

// masterDir is where a bond's (or netvsc's) netdev lives in sysfs.
func (b Bond) masterDir() string {
	if b.Netvsc {
		return "/sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/000d3a12-3456-000d-3a12-3456000d3a12/net"
	}
	return "/sys/devices/virtual/net"
}

// Upper is a device stacked on a port's netdev: a VLAN or a macvlan.
type Upper struct {
	Name  string // "ens1f0np0.100"
	VLAN  int    // 802.1Q ID; 0 for a macvlan
	MAC   string // "" = the lower device's
	Addrs []string
}

// Layout is what differs between distributions in what the checks read
// beyond sysfs: /etc/os-release, where rdma-core installs its libraries
// (and which release it is), the loader's configuration, built-in
// directories and cache generator, and the merged-/usr links at the top.
type Layout struct {
	OSRelease string
	// LibDir is rdma-core's CMAKE_INSTALL_LIBDIR; the providers are in
	// LibDir/libibverbs (VERBS_PROVIDER_DIR).
	LibDir string
	// RDMACore is the rdma-core release: the last version number in each
	// library's file name (libibverbs.so.1.14.<RDMACore>.0).
	RDMACore string
	// LDConf are /etc/ld.so.conf and the /etc/ld.so.conf.d files the
	// distribution ships.
	LDConf map[string]string
	// SystemLibDirs are the directories ldconfig adds after the configured
	// ones, in its order (the first name of a directory is the one cached).
	SystemLibDirs []string
	// LDGenerator is what ldconfig records as the cache's generator.
	LDGenerator string
	// MergedUsr are the top-level links of a merged /usr, link → target.
	MergedUsr map[string]string
}

// Debian12 is Debian 12 (bookworm) on x86-64: rdma-core 44 in the
// multiarch directory, no merged-/usr links in the fixtures.
var Debian12 = debianMultiarch("x86_64-linux-gnu", debianOSRelease, "44", "ldconfig (Debian GLIBC 2.36-9+deb12u4) stable release version 2.36")

// debianMultiarch is a Debian-family layout for one multiarch triplet:
// rdma-core in /usr/lib/<triplet>, which libc6's
// /etc/ld.so.conf.d/<triplet>.conf lists with the other multiarch
// directories (and /usr/local/lib in libc.conf).
func debianMultiarch(triplet, osRelease, rdmaCore, generator string) *Layout {
	return &Layout{
		OSRelease: osRelease,
		LibDir:    "/usr/lib/" + triplet,
		RDMACore:  rdmaCore,
		LDConf: map[string]string{
			"/etc/ld.so.conf":             "include /etc/ld.so.conf.d/*.conf\n\n",
			"/etc/ld.so.conf.d/libc.conf": "# libc default configuration\n/usr/local/lib\n",
			"/etc/ld.so.conf.d/" + triplet + ".conf": "# Multiarch support\n/usr/local/lib/" + triplet + "\n/lib/" + triplet +
				"\n/usr/lib/" + triplet + "\n",
		},
		SystemLibDirs: []string{"/lib/" + triplet, "/usr/lib/" + triplet, "/lib", "/usr/lib"},
		LDGenerator:   generator,
	}
}

// Rocky93 is Rocky Linux 9.3 (the RHEL 9 family) on x86-64: rdma-core 46
// in /usr/lib64 (rdma-core.spec's %{_libdir}; the libibverbs package owns
// the library, the providers and /etc/libibverbs.d), /lib64 a link to
// usr/lib64, and glibc 2.34's ldconfig, whose x86-64 built-in directories
// are /lib, /lib64, /libx32 and the same under /usr — so the cache names
// 64-bit libraries by their /lib64 path, the first name of the directory.
var Rocky93 = &Layout{
	OSRelease: rockyOSRelease,
	LibDir:    "/usr/lib64",
	RDMACore:  "46",
	LDConf: map[string]string{
		"/etc/ld.so.conf": "include ld.so.conf.d/*.conf\n",
	},
	SystemLibDirs: []string{"/lib", "/lib64", "/libx32", "/usr/lib", "/usr/lib64", "/usr/libx32"},
	LDGenerator:   "ldconfig (GNU libc) stable release version 2.34",
	MergedUsr:     map[string]string{"/lib64": "usr/lib64"},
}

// layout is the host's layout, Debian 12 unless it names another.
func (h Host) layout() *Layout {
	if h.Layout == nil {
		return Debian12
	}
	return h.Layout
}

// layoutOf tells a built tree's layout by its /etc/os-release, as a
// distribution is told on a real host: a layout's own file, else the
// family's layout, else Debian 12.
func layoutOf(t *Tree) *Layout {
	osr := t.Files["/etc/os-release"]
	for _, l := range []*Layout{Debian12, Rocky93} {
		if osr == l.OSRelease {
			return l
		}
	}
	if sysfs.ParseOSRelease([]byte(osr)).Family() == "rhel" {
		return Rocky93
	}
	return Debian12
}

// libibverbsFile is the file libibverbs.so.1 links to.
func (l *Layout) libibverbsFile() string { return "libibverbs.so.1.14." + l.RDMACore + ".0" }

// providerLib is the library file of a provider that is also a public
// library (rdma_shared_provider), "" for a plain provider module.
func (l *Layout) providerLib(p string) string {
	if abi := sharedProviderABI[p]; abi != "" {
		return "lib" + p + ".so." + abi + "." + l.RDMACore + ".0"
	}
	return ""
}

func (l *Layout) providerDir() string { return path.Join(l.LibDir, "libibverbs") }

// NIC is one PCI function with (optionally) its RDMA device.
type NIC struct {
	Addr        string // "0000:3b:00.0"
	RootPort    string // upstream bridge "0000:3a:00.0" (under pci0000:3a)
	Vendor      uint16
	Device      uint16
	Class       uint32
	SubVendor   uint16
	SubDevice   uint16
	Driver      string // "" = unbound
	NUMA        int
	Speed       string // current_link_speed, e.g. "16.0 GT/s PCIe"; "" = no link files (mlx4)
	Width       int
	MaxSpeed    string
	MaxWidth    int
	BridgeSpeed string // root port max_link_speed
	BridgeWidth int
	TotalVFs    int
	IBDev       string // "" = no RDMA device registered
	Uverbs      int    // uverbsN index
	NodeGUID    string // "0c42:a103:002b:3c4d"
	FW          string
	HCAType     string // "MT4119"
	BoardID     string
	Ports       []Port
	// NodeType is the RDMA device's node_type ("" = "1: CA"); iWARP
	// drivers register "4: RNIC", EFA "7: unspecified".
	NodeType string
	// PMA: the driver answers PMA MADs, so ports/N/counters/ exist even
	// where counterFiles says it has none (bnxt_re since its PMA support,
	// bnxt_re_process_mad).
	PMA bool
	// PhysFn is the PF of an SR-IOV VF ("" for a PF).
	PhysFn string
	// SFs are mlx5 sub-functions of this PF.
	SFs []SF
	// Parent is the bridge (Host.Bridges) the function sits below, for
	// hosts with PCIe switches; it overrides RootPort.
	Parent string
	// MaxReadReq and RelaxedOrder go into the configuration space written
	// for the functions of a GPU host; ATS adds the ATS capability, enabled.
	MaxReadReq   int
	RelaxedOrder bool
	ATS          bool

	parentDir string // the resolved directory of Parent, set by Build
}

// SF is an mlx5 sub-function: an auxiliary device mlx5_core.sf.<Index>
// below its PF (mlx5/core/sf/dev/dev.c), bound to the mlx5_core.sf
// auxiliary driver, with an sfnum attribute; its netdev and its RDMA
// device are registered below it (mlx5e and mlx5_ib take mdev->device,
// the SF's auxiliary device, as their parent).
type SF struct {
	Index    int // the auxiliary device's id
	SFNum    int // the user's sfnum
	IBDev    string
	Uverbs   int
	NodeGUID string
	Port     Port
}

// Port is one RDMA port and, for RoCE, the netdev that carries it.
type Port struct {
	State     string // "4: ACTIVE"
	PhysState string // "5: LinkUp"
	Rate      string // "100 Gb/sec (4X EDR)"
	LinkLayer string // "Ethernet" | "InfiniBand"
	LID       int
	SMLID     int
	PortGUID  string // IB: GID 0 interface id "0c42:a103:002b:3c4e"
	Netdev    string // RoCE netdev name
	MAC       string
	MTU       int
	OperUp    bool
	Addrs     []string // CIDR
	// NoCarrier: the netdev is admin-up but has no carrier (cable, switch
	// port): operstate down.
	NoCarrier bool
	// Bond is the bond this port's netdev is enslaved to; a LAG device's
	// GIDs are made from the bond.
	Bond string
	// NetvscMaster: Bond names an hv_netvsc synthetic NIC (Bond.Netvsc),
	// not a bonding master.
	NetvscMaster bool
	// Uppers are VLAN/macvlan devices on the port's netdev.
	Uppers []Upper
	// PhysPortName is the netdev's phys_port_name ("p0", "pf0vf1").
	PhysPortName string
	// PKeyChildren are IPoIB child interfaces of an InfiniBand port's
	// IPoIB netdev (Netdev, "ib0"), one per partition.
	PKeyChildren []PKeyChild
	// Away: the netdev lives in another network namespace (a pod's): the
	// GID table still names it, this namespace does not list it.
	Away bool
}

// PKeyChild is an IPoIB child interface made with create_child (ib0.8001):
// ipoib_vlan.c registers it below the same parent device as ib0, with a
// pkey and a parent attribute; it is no upper device of ib0 and the port's
// GID table does not change.
type PKeyChild struct {
	Name  string // "ib0.8001"
	PKey  int    // 0x8001 (full membership bit set)
	Addrs []string
}

// SoftDevice is an rxe/siw device on a netdev.
type SoftDevice struct {
	Name     string // "rxe0"
	Uverbs   int
	Port     Port
	NodeGUID string
}

// FixtureBootID is the boot_id every fixture host carries.
const FixtureBootID = "3f1b2c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"

// libDir is Debian 12's library directory, where the default layout puts rdma-core.
const libDir = "/usr/lib/x86_64-linux-gnu"

// Build renders the host as a Tree: sysfs, procfs, /etc, libraries and facts.
func Build(h Host) *Tree {
	t := NewTree()
	t.Facts = &sysfs.Facts{Schema: sysfs.FactsSchema, Hostname: h.Hostname, DCB: map[string]sysfs.DCB{},
		RDMASystem: &sysfs.RDMASystem{NetnsMode: "shared"}, RDMAResources: []sysfs.RDMAResource{}}
	t.Attr("/proc/sys/kernel/osrelease", h.Kernel)
	t.Attr("/proc/sys/kernel/hostname", h.Hostname)
	// Which boot this is and for how long it has run (ten days): the
	// counter history (--state) tells a reboot and a rate since boot by
	// them. A test plays a reboot by writing another boot_id.
	t.Attr(sysfs.BootIDPath, FixtureBootID)
	t.Attr(sysfs.UptimePath, "864000.00 1728000.00")
	t.File("/proc/modules", procModules(h.Modules))
	lay := h.layout()
	t.File("/etc/os-release", lay.OSRelease)
	for l, target := range lay.MergedUsr {
		t.Link(l, target)
	}
	writeLimits(t, h)
	t.Dir("/sys/class/infiniband")
	t.Dir("/sys/class/infiniband_verbs")
	t.Dir("/sys/class/net")
	t.Dir("/sys/bus/pci/devices")
	t.Dir("/dev")
	t.RelLink("/sys/class/net/lo", "/sys/devices/virtual/net/lo")
	t.Attr("/sys/devices/virtual/net/lo/mtu", "65536")
	t.Attr("/sys/devices/virtual/net/lo/operstate", "unknown")
	// A host bridge and an unrelated function make the bus look like a bus.
	writePCI(t, NIC{Addr: "0000:00:00.0", Vendor: 0x8086, Device: 0x2020, Class: 0x060000, NUMA: 0})
	placeBelowBridges(&h)
	var enum []sysfs.VerbsDevice
	netdevs := append([]sysfs.Netdev{{Name: "lo", Index: 1, OperState: "unknown", AdminUp: true, Carrier: true, MTU: 65536, Addresses: []string{"127.0.0.1/8"}}}, h.ExtraNetdevs...)
	for _, n := range h.NICs {
		writePCI(t, n)
		fnDir := pciPath(n)
		for _, p := range n.Ports {
			if p.Netdev != "" && !p.Away {
				netdevs = append(netdevs, writeNetdev(t, path.Join(fnDir, "net"), p, len(netdevs)+1))
				writeQoS(t, path.Join(fnDir, "net", p.Netdev), n, p) // net.go
				netdevs = writeUppers(t, path.Join(fnDir, "net", p.Netdev), p, netdevs)
				netdevs = writePKeyChildren(t, path.Join(fnDir, "net"), p, netdevs)
			}
		}
		if n.IBDev != "" {
			devDir := path.Join(fnDir, "infiniband", n.IBDev)
			writeIBDevice(t, devDir, ibDevice{Name: n.IBDev, GUID: n.NodeGUID, FW: n.FW, HCA: n.HCAType, Board: n.BoardID,
				NodeType: n.NodeType, Driver: n.Driver, Ports: n.Ports, Bonds: h.Bonds, PMA: n.PMA})
			t.Link(path.Join(devDir, "device"), "../../../"+n.Addr) // the kernel's own form
			t.RelLink(path.Join("/sys/class/infiniband", n.IBDev), devDir)
			writeUverbs(t, path.Join(fnDir, "infiniband_verbs"), n.Uverbs, n.IBDev)
			enum = append(enum, sysfs.VerbsDevice{Name: n.IBDev, NodeGUID: n.NodeGUID, Uverbs: fmt.Sprintf("uverbs%d", n.Uverbs)})
			t.Facts.RDMAResources = append(t.Facts.RDMAResources, zeroResources(n.IBDev))
		}
	}
	for _, n := range h.NICs {
		for _, sf := range n.SFs {
			netdevs, enum = writeSF(t, n, sf, netdevs, enum)
		}
	}
	netdevs = writeBonds(t, h, netdevs)
	writeRoCETOS(t, h)
	if h.NetnsMode != "" {
		t.Facts.RDMASystem.NetnsMode = h.NetnsMode
	}
	for _, s := range h.Soft {
		if _, ok := t.Links[path.Join("/sys/class/net", s.Port.Netdev)]; !ok {
			netdevs = append(netdevs, writeNetdev(t, "/sys/devices/virtual/net", s.Port, len(netdevs)+1))
		}
		devDir := path.Join("/sys/devices/virtual/infiniband", s.Name)
		writeIBDevice(t, devDir, ibDevice{Name: s.Name, GUID: s.NodeGUID, NodeType: softNodeType(s.Name), Driver: softDriver(s.Name),
			Ports: []Port{s.Port}, Soft: true})
		t.Attr(path.Join(devDir, "parent"), s.Port.Netdev)
		t.RelLink(path.Join("/sys/class/infiniband", s.Name), devDir)
		writeUverbs(t, "/sys/devices/virtual/infiniband_verbs", s.Uverbs, s.Name)
		enum = append(enum, sysfs.VerbsDevice{Name: s.Name, NodeGUID: s.NodeGUID, Uverbs: fmt.Sprintf("uverbs%d", s.Uverbs)})
		t.Facts.RDMAResources = append(t.Facts.RDMAResources, zeroResources(s.Name))
		t.Facts.DCB[s.Port.Netdev] = sysfs.DCB{Err: "EOPNOTSUPP"}
	}
	t.Facts.Netdevs = netdevs
	if h.Providers != nil {
		writeLibibverbs(t, lay, h.Providers)
		t.Facts.Libibverbs = &sysfs.VerbsEnumeration{Library: "libibverbs.so.1",
			LibraryPath: path.Join(lay.LibDir, lay.libibverbsFile()), Devices: enum} // the mapped file, as the child reads it
		if enum == nil {
			t.Facts.Libibverbs.Devices = []sysfs.VerbsDevice{}
		} else {
			// libibverbs loads its providers only once the kernel shows a device.
			t.Facts.Libibverbs.Providers = loadedProviders(lay, h.Providers)
		}
	} else {
		t.Facts.Libibverbs = &sysfs.VerbsEnumeration{Library: "libibverbs.so.1",
			LoadError: "libibverbs.so.1: cannot open shared object file: No such file or directory", Devices: []sysfs.VerbsDevice{}}
	}
	writeGPUHost(t, h)     // bridges, GPUs, configuration spaces, IOMMU (fixtures_gpu.go)
	finishHardware(t, lay) // loader cache and /dev nodes (hw.go)
	return t
}

// writeSF writes a sub-function's auxiliary device, its netdev and its
// RDMA device below its PF.
func writeSF(t *Tree, pf NIC, sf SF, netdevs []sysfs.Netdev, enum []sysfs.VerbsDevice) ([]sysfs.Netdev, []sysfs.VerbsDevice) {
	aux := fmt.Sprintf("mlx5_core.sf.%d", sf.Index)
	dir := path.Join(pciPath(pf), aux)
	t.Attr(path.Join(dir, "sfnum"), fmt.Sprint(sf.SFNum))
	t.RelLink(path.Join(dir, "driver"), "/sys/bus/auxiliary/drivers/mlx5_core.sf")
	t.RelLink(path.Join("/sys/bus/auxiliary/devices", aux), dir)
	t.Dir("/sys/bus/auxiliary/drivers/mlx5_core.sf")
	if sf.Port.Netdev != "" {
		netdevs = append(netdevs, writeNetdev(t, path.Join(dir, "net"), sf.Port, len(netdevs)+1))
		t.Facts.DCB[sf.Port.Netdev] = sysfs.DCB{Err: sysfs.ErrNoDCB} // PFC is the PF's
	}
	devDir := path.Join(dir, "infiniband", sf.IBDev)
	writeIBDevice(t, devDir, ibDevice{Name: sf.IBDev, GUID: sf.NodeGUID, FW: pf.FW, HCA: pf.HCAType, Board: pf.BoardID,
		Driver: pf.Driver, Ports: []Port{sf.Port}})
	t.Link(path.Join(devDir, "device"), "../../../"+aux)
	t.RelLink(path.Join("/sys/class/infiniband", sf.IBDev), devDir)
	writeUverbs(t, path.Join(dir, "infiniband_verbs"), sf.Uverbs, sf.IBDev)
	t.Facts.RDMAResources = append(t.Facts.RDMAResources, zeroResources(sf.IBDev))
	return netdevs, append(enum, sysfs.VerbsDevice{Name: sf.IBDev, NodeGUID: sf.NodeGUID, Uverbs: fmt.Sprintf("uverbs%d", sf.Uverbs)})
}

// writeRoCETOS makes rdma_cm's configfs entry of every RoCE port of the
// host's NICs with the host's default ToS.
func writeRoCETOS(t *Tree, h Host) {
	if h.RoCETOS == "" {
		return
	}
	for _, n := range h.NICs {
		if n.IBDev == "" || n.NodeType != "" {
			continue
		}
		for i, p := range n.Ports {
			if p.LinkLayer == "Ethernet" {
				SetRoCETOS(t, n.IBDev, i+1, h.RoCETOS)
			}
		}
	}
}

func zeroResources(dev string) sysfs.RDMAResource {
	return sysfs.RDMAResource{Device: dev, Counts: map[string]int{"pd": 1, "cq": 0, "qp": 1, "cm_id": 0, "mr": 0, "ctx": 0, "srq": 0}}
}

func pciPath(n NIC) string {
	if n.parentDir != "" {
		return path.Join(n.parentDir, n.Addr)
	}
	if n.RootPort == "" {
		return path.Join("/sys/devices/pci0000:00", n.Addr)
	}
	return path.Join("/sys/devices/pci"+n.RootPort[:7], n.RootPort, n.Addr)
}

func writePCI(t *Tree, n NIC) {
	dir := pciPath(n)
	if n.RootPort != "" && n.parentDir == "" {
		br := path.Dir(dir)
		if _, ok := t.Files[path.Join(br, "vendor")]; !ok {
			t.Attr(path.Join(br, "vendor"), "0x8086")
			t.Attr(path.Join(br, "device"), "0x347a")
			t.Attr(path.Join(br, "class"), "0x060400")
			t.Attr(path.Join(br, "numa_node"), fmt.Sprint(n.NUMA))
			if n.BridgeSpeed != "" {
				t.Attr(path.Join(br, "max_link_speed"), n.BridgeSpeed)
				t.Attr(path.Join(br, "max_link_width"), fmt.Sprint(n.BridgeWidth))
				t.Attr(path.Join(br, "current_link_speed"), n.Speed)
				t.Attr(path.Join(br, "current_link_width"), fmt.Sprint(n.Width))
			}
			t.Attr(path.Join(br, "driver_override"), "(null)")
			t.RelLink(path.Join("/sys/bus/pci/devices", n.RootPort), br)
			t.RelLink(path.Join(br, "driver"), "/sys/bus/pci/drivers/pcieport")
			t.Dir("/sys/bus/pci/drivers/pcieport")
		}
	}
	t.Attr(path.Join(dir, "vendor"), fmt.Sprintf("0x%04x", n.Vendor))
	t.Attr(path.Join(dir, "device"), fmt.Sprintf("0x%04x", n.Device))
	t.Attr(path.Join(dir, "class"), fmt.Sprintf("0x%06x", n.Class))
	t.Attr(path.Join(dir, "subsystem_vendor"), fmt.Sprintf("0x%04x", n.SubVendor))
	t.Attr(path.Join(dir, "subsystem_device"), fmt.Sprintf("0x%04x", n.SubDevice))
	t.Attr(path.Join(dir, "numa_node"), fmt.Sprint(n.NUMA))
	t.Attr(path.Join(dir, "enable"), "1")
	t.Attr(path.Join(dir, "driver_override"), "(null)")
	if n.Speed != "" {
		t.Attr(path.Join(dir, "current_link_speed"), n.Speed)
		t.Attr(path.Join(dir, "current_link_width"), fmt.Sprint(n.Width))
		t.Attr(path.Join(dir, "max_link_speed"), n.MaxSpeed)
		t.Attr(path.Join(dir, "max_link_width"), fmt.Sprint(n.MaxWidth))
	}
	if n.TotalVFs > 0 {
		t.Attr(path.Join(dir, "sriov_totalvfs"), fmt.Sprint(n.TotalVFs))
		t.Attr(path.Join(dir, "sriov_numvfs"), "0")
	}
	if n.Driver != "" {
		drv := path.Join("/sys/bus/pci/drivers", n.Driver)
		t.Dir(drv)
		t.RelLink(path.Join(dir, "driver"), drv)
		t.RelLink(path.Join(drv, n.Addr), dir)
	}
	t.RelLink(path.Join("/sys/bus/pci/devices", n.Addr), dir)
	if n.PhysFn != "" {
		pf := path.Join(path.Dir(dir), n.PhysFn)
		t.RelLink(path.Join(dir, "physfn"), pf)
		vf := 0
		for t.Links[path.Join(pf, fmt.Sprintf("virtfn%d", vf))] != "" {
			vf++
		}
		t.RelLink(path.Join(pf, fmt.Sprintf("virtfn%d", vf)), dir)
		t.Attr(path.Join(pf, "sriov_numvfs"), fmt.Sprint(vf+1))
	}
}

func writeNetdev(t *Tree, parent string, p Port, index int) sysfs.Netdev {
	dir := path.Join(parent, p.Netdev)
	state := "down"
	if p.OperUp {
		state = "up"
	}
	t.Attr(path.Join(dir, "operstate"), state)
	t.Attr(path.Join(dir, "mtu"), fmt.Sprint(p.MTU))
	t.Attr(path.Join(dir, "address"), p.MAC)
	t.Attr(path.Join(dir, "ifindex"), fmt.Sprint(index))
	t.Attr(path.Join(dir, "type"), "1")
	if p.LinkLayer == "InfiniBand" {
		// IPoIB: ARPHRD_INFINIBAND, a 20-byte hardware address (QPN, then
		// the port GID), the port's number less one in dev_port
		// (ipoib_main.c ipoib_intf_init, ipoib_set_dev_features).
		t.Attr(path.Join(dir, "type"), "32")
	}
	if p.OperUp {
		t.Attr(path.Join(dir, "carrier"), "1")
	} else if p.NoCarrier {
		t.Attr(path.Join(dir, "carrier"), "0")
	}
	if p.PhysPortName != "" {
		t.Attr(path.Join(dir, "phys_port_name"), p.PhysPortName)
	}
	if p.Bond != "" {
		bondDir := path.Join(p.bondParent(), p.Bond)
		t.RelLink(path.Join(dir, "master"), bondDir)
		t.RelLink(path.Join(dir, "upper_"+p.Bond), bondDir)
		t.RelLink(path.Join(bondDir, "lower_"+p.Netdev), dir)
	}
	t.RelLink(path.Join("/sys/class/net", p.Netdev), dir)
	return sysfs.Netdev{Name: p.Netdev, Index: index, OperState: state, AdminUp: p.OperUp || p.NoCarrier, Carrier: p.OperUp,
		MTU: p.MTU, MAC: p.MAC, Addresses: append([]string(nil), p.Addrs...)}
}

// ipoibAddr is an IPoIB netdev's hardware address: flags and QPN, then the
// port GID (fe80::<port GUID>).
func ipoibAddr(qpn int, portGUID string) string {
	g := "fe80000000000000" + strings.ReplaceAll(portGUID, ":", "")
	parts := []string{"00", fmt.Sprintf("%02x", qpn>>16&0xff), fmt.Sprintf("%02x", qpn>>8&0xff), fmt.Sprintf("%02x", qpn&0xff)}
	for i := 0; i+2 <= len(g); i += 2 {
		parts = append(parts, g[i:i+2])
	}
	return strings.Join(parts, ":")
}

// writePKeyChildren writes an IPoIB netdev's pkey children beside it, below
// the same PCI function, each with its pkey and parent attributes
// (ipoib_vlan.c __ipoib_vlan_add), no DCB.
func writePKeyChildren(t *Tree, netDir string, p Port, netdevs []sysfs.Netdev) []sysfs.Netdev {
	for i, c := range p.PKeyChildren {
		cp := Port{Netdev: c.Name, LinkLayer: "InfiniBand", MAC: ipoibAddr(0x1100+i+1, p.PortGUID), MTU: p.MTU, OperUp: p.OperUp, Addrs: c.Addrs}
		netdevs = append(netdevs, writeNetdev(t, netDir, cp, len(netdevs)+1))
		t.Attr(path.Join(netDir, c.Name, "pkey"), fmt.Sprintf("0x%04x", c.PKey))
		t.Attr(path.Join(netDir, c.Name, "parent"), p.Netdev)
		t.Facts.DCB[c.Name] = sysfs.DCB{Err: sysfs.ErrNoDCB}
	}
	return netdevs
}

// writeUppers writes the VLAN and macvlan devices on a port's netdev: each
// a virtual netdev with a lower_ link to the port's netdev and an upper_
// link back (net/core/dev.c), a VLAN listed in /proc/net/vlan, and no DCB.
func writeUppers(t *Tree, lowerDir string, p Port, netdevs []sysfs.Netdev) []sysfs.Netdev {
	for _, u := range p.Uppers {
		dir := path.Join("/sys/devices/virtual/net", u.Name)
		mac := u.MAC
		if mac == "" {
			mac = p.MAC
		}
		up := Port{Netdev: u.Name, MAC: mac, MTU: p.MTU, OperUp: p.OperUp, Addrs: u.Addrs}
		netdevs = append(netdevs, writeNetdev(t, "/sys/devices/virtual/net", up, len(netdevs)+1))
		t.RelLink(path.Join(dir, "lower_"+p.Netdev), lowerDir)
		t.RelLink(path.Join(lowerDir, "upper_"+u.Name), dir)
		if u.VLAN > 0 {
			t.File(path.Join(sysfs.ProcNetVLAN, u.Name), fmt.Sprintf("%s  VID: %d\t REORDER_HDR: 1  dev->priv_flags: 1021\n", u.Name, u.VLAN))
		}
		t.Facts.DCB[u.Name] = sysfs.DCB{Err: sysfs.ErrNoDCB}
	}
	return netdevs
}

// writeBonds writes each bonding master: a virtual netdev with
// bonding/slaves and lower_ links to its slaves (the slaves' side is
// written with them), its addresses, and no DCB of its own — PFC, trust
// and ECN are set on the slaves.
func writeBonds(t *Tree, h Host, netdevs []sysfs.Netdev) []sysfs.Netdev {
	for _, b := range h.Bonds {
		var slaves []string
		for _, n := range h.NICs {
			for _, p := range n.Ports {
				if p.Bond == b.Name && p.Netdev != "" {
					slaves = append(slaves, p.Netdev)
				}
			}
		}
		dir := path.Join(b.masterDir(), b.Name)
		nd := writeNetdev(t, b.masterDir(), Port{Netdev: b.Name, MAC: b.MAC, MTU: b.MTU, OperUp: true, Addrs: b.Addrs}, len(netdevs)+1)
		netdevs = append(netdevs, nd)
		if !b.Netvsc {
			t.Attr(path.Join(dir, "bonding", "slaves"), strings.Join(slaves, " "))
			mode := b.Mode
			if mode == "" {
				mode = "802.3ad 4"
			}
			t.Attr(path.Join(dir, "bonding", "mode"), mode)
			if b.ActiveSlave != "" {
				t.Attr(path.Join(dir, "bonding", "active_slave"), b.ActiveSlave)
			}
		}
		t.Facts.DCB[b.Name] = sysfs.DCB{Err: sysfs.ErrNoDCB}
	}
	return netdevs
}

// ibDevice is what writeIBDevice needs of an RDMA device.
type ibDevice struct {
	Name, GUID, FW, HCA, Board string
	NodeType                   string // "" = "1: CA"
	Driver                     string // the PCI driver; "rdma_rxe"/"siw" for software
	Ports                      []Port
	Soft                       bool
	Bonds                      []Bond
	PMA                        bool
}

func softNodeType(name string) string {
	if strings.HasPrefix(name, "siw") {
		return "4: RNIC" // siw registers RDMA_NODE_RNIC
	}
	return ""
}

func writeIBDevice(t *Tree, dir string, d ibDevice) {
	nt := d.NodeType
	if nt == "" {
		nt = "1: CA"
	}
	t.Attr(path.Join(dir, "node_type"), nt)
	t.Attr(path.Join(dir, "node_guid"), d.GUID)
	t.Attr(path.Join(dir, "sys_image_guid"), d.GUID)
	if d.FW != "" {
		t.Attr(path.Join(dir, "fw_ver"), d.FW)
	}
	if d.HCA != "" {
		t.Attr(path.Join(dir, "hca_type"), d.HCA)
		t.Attr(path.Join(dir, "board_id"), d.Board)
	}
	t.Attr(path.Join(dir, "node_desc"), d.Name)
	for i, p := range d.Ports {
		pd := path.Join(dir, "ports", fmt.Sprint(i+1))
		t.Attr(path.Join(pd, "state"), p.State)
		t.Attr(path.Join(pd, "phys_state"), p.PhysState)
		t.Attr(path.Join(pd, "rate"), p.Rate)
		t.Attr(path.Join(pd, "link_layer"), p.LinkLayer)
		t.Attr(path.Join(pd, "lid"), fmt.Sprintf("0x%x", p.LID))
		t.Attr(path.Join(pd, "sm_lid"), fmt.Sprintf("0x%x", p.SMLID))
		t.Attr(path.Join(pd, "lid_mask_count"), "0")
		t.Attr(path.Join(pd, "sm_sl"), "0")
		writeGIDs(t, pd, gidEntries(d, p))
		writeCounters(t, pd, d.Driver, d.PMA)
	}
}

// gidEntry is one populated GID table entry.
type gidEntry struct{ gid, typ, ndev string }

// gidEntries is a port's GID table as the kernel fills it. InfiniBand: the
// port GID. iWARP (node_type RNIC): the port's MAC in the first six bytes
// (iw_cxgb4, irdma and siw query_gid), labelled "IB/RoCE v1" like every
// non-RoCE GID, with no netdev attribute. EFA: the device's address, no
// netdev. RoCE (core/roce_gid_mgmt.c): for the port's netdev — or the bond
// a LAG device sits on — and every upper device (VLAN, macvlan) the
// link-local GID and one per IP address, each as a v1 and a v2 entry,
// gid_attrs/ndevs naming the device the address is on.
func gidEntries(d ibDevice, p Port) []gidEntry {
	v1 := "IB/RoCE v1"
	switch {
	case p.LinkLayer == "InfiniBand":
		return []gidEntry{{"fe80:0000:0000:0000:" + p.PortGUID, v1, ""}}
	case strings.HasPrefix(d.NodeType, "4:"):
		return []gidEntry{{macGID(p.MAC), v1, ""}}
	case strings.HasPrefix(d.NodeType, "7:"):
		return []gidEntry{{"fe80:0000:0000:0000:" + p.PortGUID, v1, ""}}
	case strings.HasPrefix(d.NodeType, "6:"):
		// usNIC (usnic_ib_query_gid, usnic_mac_ip_to_gid): fe80, the
		// first address's IPv4 in bytes 4-7 (big endian), then the
		// MAC-derived interface id; the core adds no RoCE GIDs.
		return []gidEntry{{usnicGID(p), v1, ""}}
	}
	type carrier struct {
		name, mac string
		addrs     []string
	}
	own := carrier{p.Netdev, p.MAC, p.Addrs}
	for _, b := range d.Bonds {
		if b.Name == p.Bond && (b.ActiveSlave == "" || b.ActiveSlave == p.Netdev) {
			own = carrier{b.Name, b.MAC, b.Addrs}
		}
	}
	cs := []carrier{own}
	for _, u := range p.Uppers {
		mac := u.MAC
		if mac == "" {
			mac = own.mac
		}
		cs = append(cs, carrier{u.Name, mac, u.Addrs})
	}
	var out []gidEntry
	for _, c := range cs {
		ll := linkLocalGID(c.mac)
		out = append(out, gidEntry{ll, v1, c.name}, gidEntry{ll, "RoCE v2", c.name})
		for _, a := range c.addrs {
			if g := ipGID(a); g != "" {
				out = append(out, gidEntry{g, v1, c.name}, gidEntry{g, "RoCE v2", c.name})
			}
		}
	}
	return out
}

// writeGIDs fills a GID table: the populated entries, then unused (zero)
// ones up to the table's size.
func writeGIDs(t *Tree, pd string, entries []gidEntry) {
	for i := 0; i < 8 || i < len(entries); i++ {
		is := fmt.Sprint(i)
		if i >= len(entries) {
			t.Attr(path.Join(pd, "gids", is), sysfs.ZeroGID)
			continue
		}
		t.Attr(path.Join(pd, "gids", is), entries[i].gid)
		t.Attr(path.Join(pd, "gid_attrs", "types", is), entries[i].typ)
		if entries[i].ndev != "" {
			t.Attr(path.Join(pd, "gid_attrs", "ndevs", is), entries[i].ndev)
		}
	}
}

// macGID is an iWARP port's GID: the MAC, then zeros.
func macGID(mac string) string {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return sysfs.ZeroGID
	}
	b := make([]byte, 16)
	copy(b, hw)
	return gidString(b)
}

func usnicGID(p Port) string {
	ll := linkLocalGID(p.MAC)
	if len(p.Addrs) == 0 {
		return ll
	}
	ip, _, err := net.ParseCIDR(p.Addrs[0])
	if err != nil || ip.To4() == nil {
		return ll
	}
	v4 := ip.To4()
	return fmt.Sprintf("fe80:0000:%02x%02x:%02x%02x", v4[0], v4[1], v4[2], v4[3]) + ll[19:]
}

func linkLocalGID(mac string) string {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return sysfs.ZeroGID
	}
	b := []byte{0xfe, 0x80, 0, 0, 0, 0, 0, 0, hw[0] ^ 2, hw[1], hw[2], 0xff, 0xfe, hw[3], hw[4], hw[5]}
	return gidString(b)
}

// ipGID is the GID of an address: an IPv4 address mapped into IPv6
// (::ffff:a.b.c.d), an IPv6 address as itself (roce_gid_mgmt.c
// update_gid_ip/enum_netdev_ipv6_ips; rdma_ip2gid).
func ipGID(cidr string) string {
	ip, _, err := net.ParseCIDR(cidr)
	if err != nil {
		return ""
	}
	return gidString(ip.To16())
}

func gidString(b []byte) string {
	var parts []string
	for i := 0; i < 16; i += 2 {
		parts = append(parts, fmt.Sprintf("%02x%02x", b[i], b[i+1]))
	}
	return strings.Join(parts, ":")
}

func writeUverbs(t *Tree, parent string, n int, ibdev string) {
	name := fmt.Sprintf("uverbs%d", n)
	dir := path.Join(parent, name)
	t.Attr(path.Join(dir, "ibdev"), ibdev)
	t.Attr(path.Join(dir, "abi_version"), "1")
	t.Attr(path.Join(dir, "dev"), fmt.Sprintf("231:%d", 192+n))
	t.RelLink(path.Join("/sys/class/infiniband_verbs", name), dir)
	t.Attr("/sys/class/infiniband_verbs/abi_version", "6")
}

// procModules renders /proc/modules lines for the named modules.
func procModules(names []string) string {
	usedBy := map[string][]string{
		"ib_core":   {"rdma_rxe", "mlx5_ib", "mlx4_ib", "ib_uverbs", "rdma_ucm", "rdma_cm", "iw_cm", "ib_cm"},
		"ib_uverbs": {"rdma_ucm", "mlx5_ib", "mlx4_ib", "rdma_rxe"},
		"mlx5_core": {"mlx5_ib"}, "mlx4_core": {"mlx4_ib", "mlx4_en"}, "rdma_cm": {"rdma_ucm"},
		"iw_cm": {"rdma_cm"}, "ib_cm": {"rdma_cm"},
	}
	present := map[string]bool{}
	for _, n := range names {
		present[n] = true
	}
	var b strings.Builder
	addr := uint64(0xffffffffc0a00000)
	for i, n := range names {
		var users []string
		for _, u := range usedBy[n] {
			if present[u] {
				users = append(users, u)
			}
		}
		dep := "-"
		if len(users) > 0 {
			dep = strings.Join(users, ",") + ","
		}
		fmt.Fprintf(&b, "%s %d %d %s Live 0x%x\n", n, 16384*(i%37+3), len(users), dep, addr)
		addr += 0x40000
	}
	return b.String()
}

func writeLimits(t *Tree, h Host) {
	ml := h.Memlock
	if ml == "" {
		ml = "unlimited"
	}
	t.File("/proc/self/limits", fmt.Sprintf(`Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max file size             unlimited            unlimited            bytes     
Max data size             unlimited            unlimited            bytes     
Max stack size            8388608              unlimited            bytes     
Max core file size        0                    unlimited            bytes     
Max resident set          unlimited            unlimited            bytes     
Max processes             513402               513402               processes 
Max open files            1048576              1048576              files     
Max locked memory         %-20s %-20s bytes     
Max address space         unlimited            unlimited            bytes     
Max file locks            unlimited            unlimited            locks     
Max pending signals       513402               513402               signals   
Max msgqueue size         819200               819200               bytes     
Max nice priority         0                    0                    
Max realtime priority     0                    0                    
Max realtime timeout      unlimited            unlimited            us        
`, ml, ml))
	writeUserMemlock(t, h.UserMemlock) // net.go
	writeSlurmd(t, h.Slurmd)           // net.go
	capEff := "0000000000000000"
	if h.CapIPCLock {
		capEff = "000001ffffffffff"
	}
	t.File("/proc/self/status", fmt.Sprintf("Name:\trdmadoctor\nUmask:\t0022\nState:\tR (running)\nTgid:\t4242\nPid:\t4242\nPPid:\t4200\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nCapInh:\t0000000000000000\nCapPrm:\t%s\nCapEff:\t%s\nCapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\nNoNewPrivs:\t0\n", capEff, capEff))
}

// sharedProviderABI are the providers that rdma-core also installs as a
// public library (rdma_shared_provider), with their library ABI version:
// lib<name>.so.<ABI>.<release>.0 in the library directory, and the provider
// lib<name>-rdmav34.so a link to it. The ABIs are those of rdma-core 44-46.
var sharedProviderABI = map[string]string{"mlx5": "1.24", "mlx4": "1.0", "efa": "1.3", "mana": "1.0"}

// writeLibibverbs installs rdma-core's libibverbs and providers as the
// layout's distribution lays them out (the same shape on Debian and the RHEL
// family, in a different directory).
func writeLibibverbs(t *Tree, lay *Layout, providers []string) {
	lib := lay.libibverbsFile()
	t.File(path.Join(lay.LibDir, lib), elfStub("libibverbs.so.1"))
	t.Link(path.Join(lay.LibDir, "libibverbs.so.1"), lib)
	for _, p := range providers {
		t.Attr(path.Join("/etc/libibverbs.d", p+".driver"), "driver "+p)
		prov := path.Join(lay.providerDir(), "lib"+p+"-rdmav34.so")
		if lib := lay.providerLib(p); lib != "" {
			t.File(path.Join(lay.LibDir, lib), elfStub(lib))
			t.Link(path.Join(lay.LibDir, strings.SplitN(lib, ".so.", 2)[0]+".so.1"), lib)
			t.Link(prov, "../"+lib)
		} else {
			t.File(prov, elfStub(path.Base(prov)))
		}
	}
}

// loadedProviders are the files libibverbs maps for the installed providers
// (a provider's symlink resolved to its library), sorted, as the verbs child
// reports them.
func loadedProviders(lay *Layout, providers []string) []string {
	var out []string
	for _, p := range providers {
		if lib := lay.providerLib(p); lib != "" {
			out = append(out, path.Join(lay.LibDir, lib))
		} else {
			out = append(out, path.Join(lay.providerDir(), "lib"+p+"-rdmav34.so"))
		}
	}
	sort.Strings(out)
	return out
}

// elfStub stands in for a shared object: the ELF magic and the soname, not
// a loadable library (fixtures are never dlopened).
func elfStub(soname string) string { return "\x7fELF\x02\x01\x01\x00fixture:" + soname + "\n" }

const debianOSRelease = `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
`

const rockyOSRelease = `NAME="Rocky Linux"
VERSION="9.3 (Blue Onyx)"
ID="rocky"
ID_LIKE="rhel centos fedora"
VERSION_ID="9.3"
PLATFORM_ID="platform:el9"
PRETTY_NAME="Rocky Linux 9.3 (Blue Onyx)"
ANSI_COLOR="0;32"
LOGO="fedora-logo-icon"
CPE_NAME="cpe:/o:rocky:rocky:9::baseos"
HOME_URL="https://rockylinux.org/"
BUG_REPORT_URL="https://bugs.rockylinux.org/"
SUPPORT_END="2032-05-31"
ROCKY_SUPPORT_PRODUCT="Rocky-Linux-9"
ROCKY_SUPPORT_PRODUCT_VERSION="9.3"
REDHAT_SUPPORT_PRODUCT="Rocky Linux"
REDHAT_SUPPORT_PRODUCT_VERSION="9.3"
`
