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
	// Providers are the rdma-core providers installed ("mlx5", "rxe", …);
	// nil means rdma-core is not installed at all.
	Providers []string
	// ExtraNetdevs are interfaces that carry no RDMA port (eno1, lo).
	ExtraNetdevs []sysfs.Netdev
}

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
}

// SoftDevice is an rxe/siw device on a netdev.
type SoftDevice struct {
	Name     string // "rxe0"
	Uverbs   int
	Port     Port
	NodeGUID string
}

const (
	libDir      = "/usr/lib/x86_64-linux-gnu"
	providerDir = libDir + "/libibverbs"
)

// Build renders the host as a Tree: sysfs, procfs, /etc, libraries and facts.
func Build(h Host) *Tree {
	t := NewTree()
	t.Facts = &sysfs.Facts{Schema: sysfs.FactsSchema, Hostname: h.Hostname, DCB: map[string]sysfs.DCB{},
		RDMASystem: &sysfs.RDMASystem{NetnsMode: "shared"}, RDMAResources: []sysfs.RDMAResource{}}
	t.Attr("/proc/sys/kernel/osrelease", h.Kernel)
	t.Attr("/proc/sys/kernel/hostname", h.Hostname)
	t.File("/proc/modules", procModules(h.Modules))
	t.File("/etc/os-release", debianOSRelease)
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
	var enum []sysfs.VerbsDevice
	netdevs := append([]sysfs.Netdev{{Name: "lo", Index: 1, OperState: "unknown", AdminUp: true, Carrier: true, MTU: 65536, Addresses: []string{"127.0.0.1/8"}}}, h.ExtraNetdevs...)
	for _, n := range h.NICs {
		writePCI(t, n)
		fnDir := pciPath(n)
		for _, p := range n.Ports {
			if p.Netdev != "" {
				netdevs = append(netdevs, writeNetdev(t, path.Join(fnDir, "net"), p, len(netdevs)+1))
				writeQoS(t, path.Join(fnDir, "net", p.Netdev), n, p) // net.go
			}
		}
		if n.IBDev != "" {
			devDir := path.Join(fnDir, "infiniband", n.IBDev)
			writeIBDevice(t, devDir, n.IBDev, n.NodeGUID, n.FW, n.HCAType, n.BoardID, n.Ports, false)
			t.Link(path.Join(devDir, "device"), "../../../"+n.Addr) // the kernel's own form
			t.RelLink(path.Join("/sys/class/infiniband", n.IBDev), devDir)
			writeUverbs(t, path.Join(fnDir, "infiniband_verbs"), n.Uverbs, n.IBDev)
			enum = append(enum, sysfs.VerbsDevice{Name: n.IBDev, NodeGUID: n.NodeGUID, Uverbs: fmt.Sprintf("uverbs%d", n.Uverbs)})
			t.Facts.RDMAResources = append(t.Facts.RDMAResources, zeroResources(n.IBDev))
		}
	}
	for _, s := range h.Soft {
		if _, ok := t.Links[path.Join("/sys/class/net", s.Port.Netdev)]; !ok {
			netdevs = append(netdevs, writeNetdev(t, "/sys/devices/virtual/net", s.Port, len(netdevs)+1))
		}
		devDir := path.Join("/sys/devices/virtual/infiniband", s.Name)
		writeIBDevice(t, devDir, s.Name, s.NodeGUID, "", "", "", []Port{s.Port}, true)
		t.Attr(path.Join(devDir, "parent"), s.Port.Netdev)
		t.RelLink(path.Join("/sys/class/infiniband", s.Name), devDir)
		writeUverbs(t, "/sys/devices/virtual/infiniband_verbs", s.Uverbs, s.Name)
		enum = append(enum, sysfs.VerbsDevice{Name: s.Name, NodeGUID: s.NodeGUID, Uverbs: fmt.Sprintf("uverbs%d", s.Uverbs)})
		t.Facts.RDMAResources = append(t.Facts.RDMAResources, zeroResources(s.Name))
		t.Facts.DCB[s.Port.Netdev] = sysfs.DCB{Err: "EOPNOTSUPP"}
	}
	t.Facts.Netdevs = netdevs
	if h.Providers != nil {
		writeLibibverbs(t, h.Providers)
		t.Facts.Libibverbs = &sysfs.VerbsEnumeration{Library: "libibverbs.so.1",
			LibraryPath: path.Join(libDir, "libibverbs.so.1.14.44.0"), Devices: enum} // the mapped file, as the child reads it
		if enum == nil {
			t.Facts.Libibverbs.Devices = []sysfs.VerbsDevice{}
		} else {
			// libibverbs loads its providers only once the kernel shows a device.
			t.Facts.Libibverbs.Providers = loadedProviders(h.Providers)
		}
	} else {
		t.Facts.Libibverbs = &sysfs.VerbsEnumeration{Library: "libibverbs.so.1",
			LoadError: "libibverbs.so.1: cannot open shared object file: No such file or directory", Devices: []sysfs.VerbsDevice{}}
	}
	finishHardware(t) // loader cache and /dev nodes (hw.go)
	return t
}

func zeroResources(dev string) sysfs.RDMAResource {
	return sysfs.RDMAResource{Device: dev, Counts: map[string]int{"pd": 1, "cq": 0, "qp": 1, "cm_id": 0, "mr": 0, "ctx": 0, "srq": 0}}
}

func pciPath(n NIC) string {
	if n.RootPort == "" {
		return path.Join("/sys/devices/pci0000:00", n.Addr)
	}
	return path.Join("/sys/devices/pci"+n.RootPort[:7], n.RootPort, n.Addr)
}

func writePCI(t *Tree, n NIC) {
	dir := pciPath(n)
	if n.RootPort != "" {
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
	if p.OperUp {
		t.Attr(path.Join(dir, "carrier"), "1")
	}
	t.RelLink(path.Join("/sys/class/net", p.Netdev), dir)
	return sysfs.Netdev{Name: p.Netdev, Index: index, OperState: state, AdminUp: p.OperUp, Carrier: p.OperUp,
		MTU: p.MTU, MAC: p.MAC, Addresses: append([]string(nil), p.Addrs...)}
}

func writeIBDevice(t *Tree, dir, name, guid, fw, hca, board string, ports []Port, soft bool) {
	t.Attr(path.Join(dir, "node_type"), "1: CA")
	t.Attr(path.Join(dir, "node_guid"), guid)
	t.Attr(path.Join(dir, "sys_image_guid"), guid)
	if fw != "" {
		t.Attr(path.Join(dir, "fw_ver"), fw)
	}
	if hca != "" {
		t.Attr(path.Join(dir, "hca_type"), hca)
		t.Attr(path.Join(dir, "board_id"), board)
	}
	t.Attr(path.Join(dir, "node_desc"), name)
	for i, p := range ports {
		pd := path.Join(dir, "ports", fmt.Sprint(i+1))
		t.Attr(path.Join(pd, "state"), p.State)
		t.Attr(path.Join(pd, "phys_state"), p.PhysState)
		t.Attr(path.Join(pd, "rate"), p.Rate)
		t.Attr(path.Join(pd, "link_layer"), p.LinkLayer)
		t.Attr(path.Join(pd, "lid"), fmt.Sprintf("0x%x", p.LID))
		t.Attr(path.Join(pd, "sm_lid"), fmt.Sprintf("0x%x", p.SMLID))
		t.Attr(path.Join(pd, "lid_mask_count"), "0")
		t.Attr(path.Join(pd, "sm_sl"), "0")
		writeGIDs(t, pd, p)
		writeCounters(t, pd, soft)
	}
}

// writeGIDs fills a GID table: for IB the port GID; for RoCE the link-local
// and the IPv4-mapped GID of each address, each as a v1 and a v2 entry.
func writeGIDs(t *Tree, pd string, p Port) {
	var entries []struct{ gid, typ string }
	if p.LinkLayer == "InfiniBand" {
		entries = append(entries, struct{ gid, typ string }{"fe80:0000:0000:0000:" + p.PortGUID, "IB/RoCE v1"})
	} else {
		ll := linkLocalGID(p.MAC)
		entries = append(entries, struct{ gid, typ string }{ll, "IB/RoCE v1"}, struct{ gid, typ string }{ll, "RoCE v2"})
		for _, a := range p.Addrs {
			if g := v4MappedGID(a); g != "" {
				entries = append(entries, struct{ gid, typ string }{g, "IB/RoCE v1"}, struct{ gid, typ string }{g, "RoCE v2"})
			}
		}
	}
	for i := 0; i < 8 || i < len(entries); i++ {
		is := fmt.Sprint(i)
		if i >= len(entries) {
			t.Attr(path.Join(pd, "gids", is), sysfs.ZeroGID)
			continue
		}
		t.Attr(path.Join(pd, "gids", is), entries[i].gid)
		t.Attr(path.Join(pd, "gid_attrs", "types", is), entries[i].typ)
		if p.Netdev != "" {
			t.Attr(path.Join(pd, "gid_attrs", "ndevs", is), p.Netdev)
		}
	}
}

func linkLocalGID(mac string) string {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return sysfs.ZeroGID
	}
	b := []byte{0xfe, 0x80, 0, 0, 0, 0, 0, 0, hw[0] ^ 2, hw[1], hw[2], 0xff, 0xfe, hw[3], hw[4], hw[5]}
	return gidString(b)
}

func v4MappedGID(cidr string) string {
	ip, _, err := net.ParseCIDR(cidr)
	if err != nil || ip.To4() == nil {
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

var pmaCounters = []string{"VL15_dropped", "excessive_buffer_overrun_errors", "link_downed", "link_error_recovery",
	"local_link_integrity_errors", "port_rcv_constraint_errors", "port_rcv_data", "port_rcv_errors",
	"port_rcv_packets", "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors",
	"port_xmit_constraint_errors", "port_xmit_data", "port_xmit_discards", "port_xmit_packets",
	"port_xmit_wait", "symbol_error", "unicast_rcv_packets", "unicast_xmit_packets"}

var mlx5HWCounters = []string{"duplicate_request", "implied_nak_seq_err", "lifespan", "local_ack_timeout_err",
	"np_cnp_sent", "np_ecn_marked_roce_packets", "out_of_buffer", "out_of_sequence", "packet_seq_err",
	"req_cqe_error", "req_remote_access_errors", "req_remote_invalid_request", "resp_cqe_error",
	"resp_local_length_error", "resp_remote_access_errors", "rnr_nak_retry_err", "roce_adp_retrans",
	"rp_cnp_handled", "rx_atomic_requests", "rx_read_requests", "rx_write_requests"}

var rxeHWCounters = []string{"ack_deferred", "completer_retry_err", "duplicate_request", "lifespan",
	"link_downed", "out_of_seq_request", "rcvd_pkts", "rcvd_rnr_err", "rcvd_seq_err", "rdma_recvs",
	"rdma_sends", "retry_exceeded_err", "retry_rnr_exceeded_err", "send_err", "send_rnr_err", "sent_pkts"}

func writeCounters(t *Tree, pd string, soft bool) {
	if soft {
		for _, c := range rxeHWCounters {
			v := "0"
			if c == "lifespan" {
				v = "10"
			}
			t.Attr(path.Join(pd, "hw_counters", c), v)
		}
		return
	}
	for _, c := range pmaCounters {
		v := "0"
		switch c {
		case "port_xmit_data":
			v = "2203791820"
		case "port_rcv_data":
			v = "2196417504"
		case "port_xmit_packets", "unicast_xmit_packets":
			v = "31337902"
		case "port_rcv_packets", "unicast_rcv_packets":
			v = "31290611"
		}
		t.Attr(path.Join(pd, "counters", c), v)
	}
	for _, c := range mlx5HWCounters {
		v := "0"
		if c == "lifespan" {
			v = "12"
		}
		t.Attr(path.Join(pd, "hw_counters", c), v)
	}
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
	capEff := "0000000000000000"
	if h.CapIPCLock {
		capEff = "000001ffffffffff"
	}
	t.File("/proc/self/status", fmt.Sprintf("Name:\trdmadoctor\nUmask:\t0022\nState:\tR (running)\nTgid:\t4242\nPid:\t4242\nPPid:\t4200\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nCapInh:\t0000000000000000\nCapPrm:\t%s\nCapEff:\t%s\nCapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\nNoNewPrivs:\t0\n", capEff, capEff))
}

// providerLibs maps a provider name to its library file as Debian 12 ships it.
var providerLibs = map[string]string{
	"mlx5": "libmlx5.so.1.24.44.0", "mlx4": "libmlx4.so.1.0.44.0", "rxe": "", "siw": "", "bnxt_re": "",
	"irdma": "", "efa": "libefa.so.1.3.44.0", "qedr": "", "hns": "", "cxgb4": "", "erdma": "", "mana": "libmana.so.1.0.44.0",
}

// writeLibibverbs installs rdma-core as Debian 12 lays it out.
func writeLibibverbs(t *Tree, providers []string) {
	t.File(path.Join(libDir, "libibverbs.so.1.14.44.0"), elfStub("libibverbs.so.1"))
	t.Link(path.Join(libDir, "libibverbs.so.1"), "libibverbs.so.1.14.44.0")
	for _, p := range providers {
		t.Attr(path.Join("/etc/libibverbs.d", p+".driver"), "driver "+p)
		prov := path.Join(providerDir, "lib"+p+"-rdmav34.so")
		if lib := providerLibs[p]; lib != "" {
			t.File(path.Join(libDir, lib), elfStub(lib))
			t.Link(path.Join(libDir, strings.SplitN(lib, ".so.", 2)[0]+".so.1"), lib)
			t.Link(prov, "../"+lib)
		} else {
			t.File(prov, elfStub(path.Base(prov)))
		}
	}
}

// loadedProviders are the files libibverbs maps for the installed providers
// (a provider's symlink resolved to its library), sorted, as the verbs child
// reports them.
func loadedProviders(providers []string) []string {
	var out []string
	for _, p := range providers {
		if lib := providerLibs[p]; lib != "" {
			out = append(out, path.Join(libDir, lib))
		} else {
			out = append(out, path.Join(providerDir, "lib"+p+"-rdmav34.so"))
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
