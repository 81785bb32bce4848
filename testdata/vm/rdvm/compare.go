package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The inventory comparison: rdmadoctor's JSON inventory against tools no one
// here wrote, run in the same guest a moment before — rdma-core's ibv_devices
// and ibv_devinfo -v, iproute2's rdma -j link, rdma -j dev and ip -j addr.
// Device names, node GUIDs, port state, link layer, active MTU and GIDs are
// required on rdmadoctor's side; every other field is compared wherever both
// sides report it.

type invGID struct {
	Index  int    `json:"index"`
	GID    string `json:"gid"`
	Type   string `json:"type"`
	Netdev string `json:"netdev"`
}

type invPort struct {
	Port      int      `json:"port"`
	State     string   `json:"state"`
	PhysState string   `json:"phys_state"`
	Rate      string   `json:"rate"`
	LinkLayer string   `json:"link_layer"`
	LID       *int     `json:"lid"`
	SMLID     *int     `json:"sm_lid"`
	Netdev    string   `json:"netdev"`
	ActiveMTU int      `json:"active_mtu"`
	GIDs      []invGID `json:"gids"`
}

type invDevice struct {
	Name     string    `json:"name"`
	NodeType string    `json:"node_type"`
	NodeGUID string    `json:"node_guid"`
	SysGUID  string    `json:"sys_image_guid"`
	FWVer    string    `json:"fw_ver"`
	BoardID  string    `json:"board_id"`
	Ports    []invPort `json:"ports"`
}

type invNetdev struct {
	Name      string   `json:"name"`
	State     string   `json:"state"`
	MTU       int      `json:"mtu"`
	MAC       string   `json:"mac"`
	Addresses []string `json:"addresses"`
}

type inventory struct {
	RDMADevices []invDevice `json:"rdma_devices"`
	Netdevs     []invNetdev `json:"netdevs"`
}

// devinfoDevice is one hca_id block of `ibv_devinfo -v`.
type devinfoDevice struct {
	Name  string
	Attrs map[string]string
	Ports []devinfoPort
}

type devinfoPort struct {
	Num   int
	Attrs map[string]string
	GIDs  map[int]devinfoGID
}

type devinfoGID struct {
	GID  string
	Type string // empty when this rdma-core does not print it
}

var gidLineRe = regexp.MustCompile(`^GID\[\s*(\d+)\]:\s*([0-9a-fA-F:.]+)(?:,\s*(.+))?$`)

// parseDevinfo reads `ibv_devinfo -v`: "hca_id:" starts a device, "port:"
// a port, and "key: value" lines belong to the innermost one.
func parseDevinfo(text string) []devinfoDevice {
	var devs []devinfoDevice
	for _, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if v, ok := strings.CutPrefix(line, "hca_id:"); ok {
			devs = append(devs, devinfoDevice{Name: strings.TrimSpace(v), Attrs: map[string]string{}})
			continue
		}
		if len(devs) == 0 || line == "" {
			continue
		}
		d := &devs[len(devs)-1]
		if m := gidLineRe.FindStringSubmatch(line); m != nil && len(d.Ports) > 0 {
			i, _ := strconv.Atoi(m[1])
			d.Ports[len(d.Ports)-1].GIDs[i] = devinfoGID{GID: m[2], Type: strings.TrimSpace(m[3])}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "port" {
			n, err := strconv.Atoi(v)
			if err == nil {
				d.Ports = append(d.Ports, devinfoPort{Num: n, Attrs: map[string]string{}, GIDs: map[int]devinfoGID{}})
			}
			continue
		}
		if len(d.Ports) > 0 {
			d.Ports[len(d.Ports)-1].Attrs[k] = v
		} else {
			d.Attrs[k] = v
		}
	}
	return devs
}

// parseIbvDevices reads `ibv_devices`: a header, a ruler, then "name guid".
func parseIbvDevices(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || f[0] == "device" || strings.HasPrefix(f[0], "---") {
			continue
		}
		out[f[0]] = f[1]
	}
	return out
}

type rdmaLink struct {
	IfName        string `json:"ifname"`
	Port          int    `json:"port"`
	State         string `json:"state"`
	PhysicalState string `json:"physical_state"`
	Netdev        string `json:"netdev"`
}

type rdmaDev struct {
	IfName       string `json:"ifname"`
	NodeType     string `json:"node_type"`
	NodeGUID     string `json:"node_guid"`
	SysImageGUID string `json:"sys_image_guid"`
	FW           string `json:"fw"`
}

type ipAddr struct {
	IfName    string `json:"ifname"`
	MTU       int    `json:"mtu"`
	OperState string `json:"operstate"`
	Address   string `json:"address"`
	AddrInfo  []struct {
		Family    string `json:"family"`
		Local     string `json:"local"`
		PrefixLen int    `json:"prefixlen"`
	} `json:"addr_info"`
}

type comparison struct {
	agree    int
	failures []string
}

// eq compares one field; both sides normalized by the caller.
func (c *comparison) eq(what, mine, ref, refTool string) {
	if mine == ref {
		c.agree++
		return
	}
	c.failures = append(c.failures, fmt.Sprintf("%s: rdmadoctor %q, %s %q", what, mine, refTool, ref))
}

// both compares only when both sides report the field.
func (c *comparison) both(what, mine, ref, refTool string) {
	if mine == "" || ref == "" {
		return
	}
	c.eq(what, mine, ref, refTool)
}

func (c *comparison) failf(format string, a ...any) {
	c.failures = append(c.failures, fmt.Sprintf(format, a...))
}

// normGUID makes "f4c7:47ff:fe46:fc9f" and "f4c747fffe46fc9f" one form.
func normGUID(s string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), ":", ""))
}

var parenRe = regexp.MustCompile(`\s*\(\d+\)\s*$`)

// normState makes "PORT_ACTIVE (4)", "4: ACTIVE" and "ACTIVE" one form, and
// "LINK_UP (5)", "5: LinkUp" and "LinkUp" another.
func normState(s string) string {
	s = parenRe.ReplaceAllString(strings.TrimSpace(s), "")
	if _, rest, ok := strings.Cut(s, ": "); ok {
		s = rest
	}
	s = strings.TrimPrefix(strings.ToUpper(s), "PORT_")
	return strings.ToLower(strings.ReplaceAll(s, "_", ""))
}

// normGID makes sysfs's full form and ibv_devinfo's compressed form one.
func normGID(s string) string {
	ip := net.ParseIP(strings.TrimSpace(s))
	if ip == nil {
		return strings.ToLower(strings.TrimSpace(s))
	}
	return ip.To16().String()
}

// normGIDType makes sysfs's "IB/RoCE v1" and ibv_devinfo's "RoCE v1" one.
func normGIDType(s string) string {
	return strings.TrimPrefix(strings.TrimSpace(s), "IB/")
}

var leadingNum = regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)`)

func leadingFloat(s string) (float64, bool) {
	m := leadingNum.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	f, err := strconv.ParseFloat(m[1], 64)
	return f, err == nil
}

// devinfoRate is active_width × active_speed in Gb/s ("1X (1)", "2.5 Gbps (1)").
func devinfoRate(p devinfoPort) (float64, bool) {
	w, ok1 := leadingFloat(strings.TrimSuffix(strings.Fields(p.Attrs["active_width"] + " x")[0], "X"))
	s, ok2 := leadingFloat(p.Attrs["active_speed"])
	if !ok1 || !ok2 {
		return 0, false
	}
	return w * s, true
}

func readRef(dir, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	return string(b), err
}

func compareInventory(raw json.RawMessage, dir string) comparison {
	var c comparison
	var inv inventory
	if err := json.Unmarshal(raw, &inv); err != nil {
		c.failf("cannot read the report's inventory: %v", err)
		return c
	}
	mine := map[string]invDevice{}
	var myNames []string
	for _, d := range inv.RDMADevices {
		mine[d.Name] = d
		myNames = append(myNames, d.Name)
	}
	sort.Strings(myNames)

	// ibv_devices: names and node GUIDs, through the real library.
	if text, err := readRef(dir, "ref.ibv_devices"); err != nil {
		c.failf("no ibv_devices output: %v", err)
	} else {
		ref := parseIbvDevices(text)
		c.eq("device names", strings.Join(myNames, ","), strings.Join(sortedKeys(ref), ","), "ibv_devices")
		for name, guid := range ref {
			if d, ok := mine[name]; ok {
				c.eq(name+" node GUID", normGUID(d.NodeGUID), normGUID(guid), "ibv_devices")
			}
		}
	}

	// ibv_devinfo -v: device attributes, ports, GIDs.
	if text, err := readRef(dir, "ref.ibv_devinfo"); err != nil {
		c.failf("no ibv_devinfo -v output: %v", err)
	} else {
		devs := parseDevinfo(text)
		var names []string
		for _, rd := range devs {
			names = append(names, rd.Name)
		}
		sort.Strings(names)
		c.eq("device names", strings.Join(myNames, ","), strings.Join(names, ","), "ibv_devinfo")
		for _, rd := range devs {
			d, ok := mine[rd.Name]
			if !ok {
				continue
			}
			compareDevinfo(&c, d, rd)
		}
	}

	// rdma -j link: port state, physical state, netdev, from RDMA netlink.
	if text, err := readRef(dir, "ref.rdma_link.json"); err != nil {
		c.failf("no rdma -j link output: %v", err)
	} else {
		var links []rdmaLink
		if err := json.Unmarshal([]byte(text), &links); err != nil {
			c.failf("rdma -j link: %v", err)
		}
		seen := map[string]bool{}
		for _, l := range links {
			seen[l.IfName] = true
			d, ok := mine[l.IfName]
			if !ok {
				c.failf("rdma link shows %s/%d, the inventory has no %s", l.IfName, l.Port, l.IfName)
				continue
			}
			p := findPort(d, l.Port)
			if p == nil {
				c.failf("rdma link shows %s/%d, the inventory has no port %d", l.IfName, l.Port, l.Port)
				continue
			}
			what := fmt.Sprintf("%s port %d", l.IfName, l.Port)
			c.eq(what+" state", normState(p.State), normState(l.State), "rdma link")
			c.both(what+" phys_state", normState(p.PhysState), normState(l.PhysicalState), "rdma link")
			c.both(what+" netdev", p.Netdev, l.Netdev, "rdma link")
		}
		for _, n := range myNames {
			if !seen[n] {
				c.failf("the inventory has %s, rdma link does not", n)
			}
		}
	}

	// rdma -j dev: node type and GUIDs, from RDMA netlink.
	if text, err := readRef(dir, "ref.rdma_dev.json"); err == nil {
		var devs []rdmaDev
		if err := json.Unmarshal([]byte(text), &devs); err != nil {
			c.failf("rdma -j dev: %v", err)
		}
		for _, rd := range devs {
			d, ok := mine[rd.IfName]
			if !ok {
				c.failf("rdma dev shows %s, the inventory does not", rd.IfName)
				continue
			}
			c.both(rd.IfName+" node GUID", normGUID(d.NodeGUID), normGUID(rd.NodeGUID), "rdma dev")
			c.both(rd.IfName+" sys_image_guid", normGUID(d.SysGUID), normGUID(rd.SysImageGUID), "rdma dev")
			c.both(rd.IfName+" node_type", normNodeType(d.NodeType), normNodeType(rd.NodeType), "rdma dev")
			c.both(rd.IfName+" fw_ver", d.FWVer, rd.FW, "rdma dev")
		}
	}

	compareNetdevs(&c, inv, dir)
	compareGIDNetdevs(&c, inv, dir)
	return c
}

// compareGIDNetdevs checks each GID's netdev against the interface that `ip
// addr` shows holding the GID's address (an IPv4-mapped GID is its IPv4
// address). GIDs whose address no interface holds (the default GID made
// from the MAC when the link-local address is gone) are not compared.
func compareGIDNetdevs(c *comparison, inv inventory, dir string) {
	text, err := readRef(dir, "ref.ip_addr.json")
	if err != nil {
		return
	}
	var links []ipAddr
	if json.Unmarshal([]byte(text), &links) != nil {
		return
	}
	owner := map[string]string{}
	for _, l := range links {
		for _, ai := range l.AddrInfo {
			if ip := net.ParseIP(ai.Local); ip != nil {
				owner[ip.To16().String()] = l.IfName
			}
		}
	}
	for _, d := range inv.RDMADevices {
		for _, p := range d.Ports {
			for _, g := range p.GIDs {
				ip := net.ParseIP(g.GID)
				if ip == nil || g.Netdev == "" {
					continue
				}
				if want, ok := owner[ip.To16().String()]; ok {
					c.eq(fmt.Sprintf("%s port %d GID[%d] netdev", d.Name, p.Port, g.Index), g.Netdev, want, "ip addr")
				}
			}
		}
	}
}

func compareDevinfo(c *comparison, d invDevice, rd devinfoDevice) {
	const tool = "ibv_devinfo"
	c.eq(d.Name+" node GUID", normGUID(d.NodeGUID), normGUID(rd.Attrs["node_guid"]), tool)
	c.both(d.Name+" sys_image_guid", normGUID(d.SysGUID), normGUID(rd.Attrs["sys_image_guid"]), tool)
	c.both(d.Name+" fw_ver", d.FWVer, rd.Attrs["fw_ver"], tool)
	c.both(d.Name+" board_id", d.BoardID, rd.Attrs["board_id"], tool)
	// transport: InfiniBand (0) is a CA (or switch), iWARP (1) an RNIC.
	if t := rd.Attrs["transport"]; t != "" && d.NodeType != "" {
		nt := normNodeType(d.NodeType)
		ok := (strings.HasPrefix(t, "InfiniBand") && (nt == "ca" || nt == "switch")) ||
			(strings.HasPrefix(t, "iWARP") && nt == "rnic") ||
			(strings.HasPrefix(t, "usNIC") && strings.HasPrefix(nt, "usnic"))
		if ok {
			c.agree++
		} else {
			c.failf("%s node_type %q does not fit ibv_devinfo's transport %q", d.Name, d.NodeType, t)
		}
	}
	if n := rd.Attrs["phys_port_cnt"]; n != "" {
		c.eq(d.Name+" port count", strconv.Itoa(len(d.Ports)), n, tool)
	}
	for _, rp := range rd.Ports {
		what := fmt.Sprintf("%s port %d", d.Name, rp.Num)
		p := findPort(d, rp.Num)
		if p == nil {
			c.failf("%s: ibv_devinfo shows it, the inventory does not", what)
			continue
		}
		c.eq(what+" state", normState(p.State), normState(rp.Attrs["state"]), tool)
		c.both(what+" phys_state", normState(p.PhysState), normState(rp.Attrs["phys_state"]), tool)
		c.eq(what+" link_layer", p.LinkLayer, rp.Attrs["link_layer"], tool)
		if mtu, ok := leadingFloat(rp.Attrs["active_mtu"]); ok {
			c.eq(what+" active_mtu", strconv.Itoa(p.ActiveMTU), strconv.Itoa(int(mtu)), tool)
		}
		if p.LID != nil && rp.Attrs["port_lid"] != "" {
			c.eq(what+" lid", strconv.Itoa(*p.LID), rp.Attrs["port_lid"], tool)
		}
		if p.SMLID != nil && rp.Attrs["sm_lid"] != "" {
			c.eq(what+" sm_lid", strconv.Itoa(*p.SMLID), rp.Attrs["sm_lid"], tool)
		}
		if want, ok := devinfoRate(rp); ok && p.Rate != "" {
			got, ok := leadingFloat(p.Rate)
			if ok && math.Abs(got-want) < 0.01 {
				c.agree++
			} else {
				c.failf("%s rate: rdmadoctor %q, ibv_devinfo %s × %s = %g Gb/s", what, p.Rate, rp.Attrs["active_width"], rp.Attrs["active_speed"], want)
			}
		}
		// GIDs: the same populated entries, index by index, with their type.
		mineG := map[int]invGID{}
		for _, g := range p.GIDs {
			mineG[g.Index] = g
		}
		for i, rg := range rp.GIDs {
			g, ok := mineG[i]
			if !ok {
				c.failf("%s GID[%d] %s: ibv_devinfo shows it, the inventory does not", what, i, rg.GID)
				continue
			}
			c.eq(fmt.Sprintf("%s GID[%d]", what, i), normGID(g.GID), normGID(rg.GID), tool)
			if rg.Type != "" {
				c.eq(fmt.Sprintf("%s GID[%d] type", what, i), normGIDType(g.Type), normGIDType(rg.Type), tool)
			}
		}
		for i, g := range mineG {
			if _, ok := rp.GIDs[i]; !ok {
				c.failf("%s GID[%d] %s: in the inventory, not in ibv_devinfo", what, i, g.GID)
			}
		}
	}
}

// compareNetdevs checks the inventory's netdevs against ip -j addr, and that
// every netdev a port names is in the inventory.
func compareNetdevs(c *comparison, inv inventory, dir string) {
	text, err := readRef(dir, "ref.ip_addr.json")
	if err != nil {
		c.failf("no ip -j addr output: %v", err)
		return
	}
	var links []ipAddr
	if err := json.Unmarshal([]byte(text), &links); err != nil {
		c.failf("ip -j addr: %v", err)
		return
	}
	byName := map[string]ipAddr{}
	for _, l := range links {
		byName[l.IfName] = l
	}
	have := map[string]bool{}
	for _, n := range inv.Netdevs {
		have[n.Name] = true
		l, ok := byName[n.Name]
		if !ok {
			c.failf("netdev %s: in the inventory, not in ip addr", n.Name)
			continue
		}
		c.both("netdev "+n.Name+" state", strings.ToLower(n.State), strings.ToLower(l.OperState), "ip addr")
		if n.MTU != 0 {
			c.eq("netdev "+n.Name+" mtu", strconv.Itoa(n.MTU), strconv.Itoa(l.MTU), "ip addr")
		}
		c.both("netdev "+n.Name+" mac", strings.ToLower(n.MAC), strings.ToLower(l.Address), "ip addr")
		var mine, ref []string
		withPrefix := false
		for _, a := range n.Addresses {
			if strings.Contains(a, "/") {
				withPrefix = true
			}
			mine = append(mine, normAddr(a))
		}
		for _, ai := range l.AddrInfo {
			if withPrefix {
				ref = append(ref, normAddr(fmt.Sprintf("%s/%d", ai.Local, ai.PrefixLen)))
			} else {
				ref = append(ref, normAddr(ai.Local))
			}
		}
		sort.Strings(mine)
		sort.Strings(ref)
		c.eq("netdev "+n.Name+" addresses", strings.Join(mine, ","), strings.Join(ref, ","), "ip addr")
	}
	for _, d := range inv.RDMADevices {
		for _, p := range d.Ports {
			if p.Netdev != "" && !have[p.Netdev] {
				c.failf("%s port %d runs on netdev %s, which inventory.netdevs does not list", d.Name, p.Port, p.Netdev)
			}
		}
	}
}

func normAddr(a string) string {
	host, prefix, hasPrefix := strings.Cut(strings.TrimSpace(a), "/")
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	if hasPrefix {
		return host + "/" + prefix
	}
	return host
}

// normNodeType makes sysfs's "1: CA" and rdma's "ca" one form.
func normNodeType(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return strings.ToLower(f[len(f)-1])
}

func findPort(d invDevice, n int) *invPort {
	for i := range d.Ports {
		if d.Ports[i].Port == n {
			return &d.Ports[i]
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
