package sysfstest

import (
	"fmt"
	"path"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// RoCEPriority is the priority the fixtures make lossless: DSCP 26, the
// RoCE default traffic class, maps to it (26 >> 3).
const RoCEPriority = 3

// mellanoxVFs are the ConnectX VF device IDs: VF netdevs have no DCB.
var mellanoxVFs = map[uint16]bool{0x1014: true, 0x1016: true, 0x1018: true, 0x101a: true, 0x101c: true, 0x101e: true}

// writeQoS records what a hardware netdev answers about lossless Ethernet.
// An mlx5 physical function is configured the way a RoCE fabric wants it
// (PFC on priority 3, trust dscp, ECN on): the DCB netlink answer in the
// facts and MLNX_OFED's qos/trust and ecn files in sysfs. Every other
// driver, and VFs, have no DCB: the kernel answers EOPNOTSUPP.
func writeQoS(t *Tree, netdevDir string, n NIC, p Port) {
	if !dcbDrivers[n.Driver] || mellanoxVFs[n.Device] || n.PhysFn != "" || p.LinkLayer != "Ethernet" || n.NodeType != "" || strings.Contains(p.PhysPortName, "vf") {
		t.Facts.DCB[p.Netdev] = sysfs.DCB{Err: sysfs.ErrNoDCB}
		return
	}
	t.Facts.DCB[p.Netdev] = sysfs.DCB{PFCCap: 8, PFCEn: 1 << RoCEPriority, App: []sysfs.DCBApp{
		{Selector: "dscp", Protocol: 26, Priority: RoCEPriority},
		{Selector: "dscp", Protocol: 48, Priority: 6},
	}}
	if n.Driver != "mlx5_core" {
		return // qos/trust and ecn/ are MLNX_OFED's files
	}
	t.Attr(path.Join(netdevDir, "qos", "trust"), "dscp")
	for prio := 0; prio < 8; prio++ {
		for _, point := range []string{"roce_np", "roce_rp"} {
			t.Attr(path.Join(netdevDir, "ecn", point, "enable", fmt.Sprint(prio)), "1")
		}
	}
}

// dcbDrivers answer DCB netlink with IEEE PFC and APP (DSCP) support:
// mlx5_core, ice (ice_dcb_nl.c) and bnxt_en (bnxt_dcb.c).
var dcbDrivers = map[string]bool{"mlx5_core": true, "ice": true, "bnxt_en": true}

// writeUserMemlock writes the memlock default of users' sessions.
func writeUserMemlock(t *Tree, v string) {
	switch v {
	case "none":
		return
	case "":
		v = "unlimited"
	}
	t.File("/etc/security/limits.d/rdma.conf",
		"# Let RDMA applications register (pin) as much memory as they need.\n"+
			fmt.Sprintf("* soft memlock %s\n* hard memlock %s\n", v, v))
}

// Slurmd is a running slurmd as /proc shows it, and the slurm.conf it reads.
type Slurmd struct {
	PID     int
	Memlock string // "unlimited" or bytes, soft and hard
	Args    []string
	Conf    string // slurm.conf's text ("" = none written)
	ConfAt  string // where ("" = /etc/slurm/slurm.conf)
}

// writeSlurmd writes the slurmd process's comm, cmdline and limits (the
// kernel's formats: comm with a newline, cmdline NUL-separated) and its
// slurm.conf.
func writeSlurmd(t *Tree, s *Slurmd) {
	if s == nil {
		return
	}
	dir := fmt.Sprintf("/proc/%d", s.PID)
	t.File(dir+"/comm", "slurmd\n")
	t.File(dir+"/cmdline", strings.Join(append([]string{"/usr/sbin/slurmd"}, s.Args...), "\x00")+"\x00")
	t.File(dir+"/limits", "Limit                     Soft Limit           Hard Limit           Units     \n"+
		"Max open files            131072               131072               files     \n"+
		fmt.Sprintf("Max locked memory         %-20s %-20s bytes     \n", s.Memlock, s.Memlock))
	if s.Conf != "" {
		at := s.ConfAt
		if at == "" {
			at = "/etc/slurm/slurm.conf"
		}
		t.File(at, s.Conf)
	}
}

// NetDir is the /sys/devices directory of a netdev in the tree, found
// through its /sys/class/net link ("" when there is none).
func NetDir(t *Tree, ifname string) string {
	l := path.Join("/sys/class/net", ifname)
	target, ok := t.Links[l]
	if !ok {
		return ""
	}
	if path.IsAbs(target) {
		return path.Clean(target)
	}
	return path.Join(path.Dir(l), target)
}

// SetPFC sets the PFC bitmap a netdev's DCB answer reports.
func SetPFC(t *Tree, ifname string, bitmap uint8) {
	d := t.Facts.DCB[ifname]
	d.PFCEn = bitmap
	t.Facts.DCB[ifname] = d
}

// SetECN switches MLNX_OFED's ECN enable file of one priority, for the
// notification point ("roce_np") and/or the reaction point ("roce_rp").
func SetECN(t *Tree, ifname string, prio int, on bool, points ...string) {
	v := "0"
	if on {
		v = "1"
	}
	for _, point := range points {
		t.Attr(path.Join(NetDir(t, ifname), "ecn", point, "enable", fmt.Sprint(prio)), v)
	}
}

// SetTrust writes MLNX_OFED's qos/trust of a netdev.
func SetTrust(t *Tree, ifname, trust string) {
	t.Attr(path.Join(NetDir(t, ifname), "qos", "trust"), trust)
}

// PortDir is ports/<n> of an RDMA device in the tree.
func PortDir(t *Tree, dev string, port int) string {
	l := path.Join("/sys/class/infiniband", dev)
	target, ok := t.Links[l]
	if !ok {
		return ""
	}
	return path.Join(path.Dir(l), target, "ports", fmt.Sprint(port))
}

// SetCounter writes one counter file ("counters" or "hw_counters") of a port.
func SetCounter(t *Tree, dev string, port int, group, name, value string) {
	t.Attr(path.Join(PortDir(t, dev, port), group, name), value)
}

// SetAllCounters overwrites every file of a port's counter group.
func SetAllCounters(t *Tree, dev string, port int, group, value string) {
	dir := path.Join(PortDir(t, dev, port), group) + "/"
	for p := range t.Files {
		if strings.HasPrefix(p, dir) {
			t.Files[p] = value + "\n"
		}
	}
}

// SetRoCETOS writes rdma_cm's default_roce_tos of a port, as if its configfs
// directory had been made (which also shows default_roce_mode).
func SetRoCETOS(t *Tree, dev string, port int, tos string) {
	t.Attr(sysfs.RoCETOSPath(dev, port), tos)
	if _, ok := t.Files[sysfs.RoCEModePath(dev, port)]; !ok {
		t.Attr(sysfs.RoCEModePath(dev, port), "RoCE v2")
	}
}

// MarkVLAN makes an interface an 802.1Q VLAN device: the 8021q module lists
// it in /proc/net/vlan.
func MarkVLAN(t *Tree, ifname string) {
	t.File(path.Join(sysfs.ProcNetVLAN, ifname), fmt.Sprintf("%s  VID: 100\t REORDER_HDR: 1  dev->priv_flags: 1021\n", ifname))
}

// SetUntaggedPCP makes a netdev trust PCP the upstream way: no qos/trust
// file and no DSCP entries in the DCB APP table.
func SetUntaggedPCP(t *Tree, ifname string) {
	t.Remove(path.Join(NetDir(t, ifname), "qos"))
	d := t.Facts.DCB[ifname]
	var apps []sysfs.DCBApp
	for _, a := range d.App {
		if a.Selector != "dscp" {
			apps = append(apps, a)
		}
	}
	d.App = apps
	t.Facts.DCB[ifname] = d
}
