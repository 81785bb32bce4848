package main

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The text of `rdmadoctor inventory`, read back as an operator reads it and
// held against `ibv_devinfo -v` from the same guest: every value it shows
// that ibv_devinfo shows too must agree — device names, node GUIDs,
// firmware, port count, state, physical state, rate, link layer, active
// MTU, LID and SM LID, and for each address the RoCE v2 GID index it names.

// textDevice is one device block of the inventory text.
type textDevice struct {
	Name     string
	Attrs    map[string]string // "firmware", "node GUID", …
	Ports    []textPort
	AddrGIDs []textAddr // in the order shown, with the port they belong to
}

type textPort struct {
	Num   int
	Value string // "ACTIVE (LinkUp), 2.5 Gb/sec (1X SDR), Ethernet, active MTU 1024"
	LID   string // "26 (0x1a), SM LID 1 (0x1)", empty when not shown
}

type textAddr struct {
	Port    int
	Addr    string // "192.0.2.1/24"
	GIDIdx  int    // -1: "no RoCE v2 GID for it"
	RawLine string
}

var (
	labelValueRe = regexp.MustCompile(`^( +)(\S.*?)  +(\S.*)$`)
	gidIndexRe   = regexp.MustCompile(`^(\S+), RoCE v2 GID index (\d+)$`)
	portLabelRe  = regexp.MustCompile(`^port \d+$`)
)

// valueColumn is where the inventory text starts its values; a line indented
// this far continues the value above it.
const valueColumn = 18

// parseInventoryText reads the device blocks: a device line starts at
// column 0 after the header; its attributes, ports, LIDs, netdevs and
// addresses are "label  value" lines below it.
func parseInventoryText(text string) []textDevice {
	var devs []textDevice
	var last *string
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if i == 0 || strings.TrimSpace(line) == "" {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if indent == 0 {
			devs = append(devs, textDevice{Name: strings.Fields(line)[0], Attrs: map[string]string{}})
			last = nil
			continue
		}
		if len(devs) == 0 {
			continue // the header's continuation
		}
		d := &devs[len(devs)-1]
		if indent >= valueColumn && last != nil {
			*last += " " + strings.TrimSpace(line)
			continue
		}
		m := labelValueRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		label, value := m[2], m[3]
		switch {
		case portLabelRe.MatchString(label):
			n, _ := strconv.Atoi(strings.TrimPrefix(label, "port "))
			d.Ports = append(d.Ports, textPort{Num: n, Value: value})
			last = &d.Ports[len(d.Ports)-1].Value
		case label == "LID" && len(d.Ports) > 0:
			d.Ports[len(d.Ports)-1].LID = value
			last = &d.Ports[len(d.Ports)-1].LID
		case label == "address" && len(d.Ports) > 0:
			a := textAddr{Port: d.Ports[len(d.Ports)-1].Num, GIDIdx: -1, RawLine: value}
			if g := gidIndexRe.FindStringSubmatch(value); g != nil {
				a.Addr = g[1]
				a.GIDIdx, _ = strconv.Atoi(g[2])
			}
			d.AddrGIDs = append(d.AddrGIDs, a)
			last = nil
		default:
			d.Attrs[label] = value
			last = nil // attribute values are short enough not to wrap
		}
	}
	return devs
}

// compareInventoryText holds the inventory text against ibv_devinfo -v.
func compareInventoryText(text, dir string) comparison {
	var c comparison
	ref, err := readRef(dir, "ref.ibv_devinfo")
	if err != nil {
		c.failf("no ibv_devinfo -v output: %v", err)
		return c
	}
	refDevs := parseDevinfo(ref)
	mine := parseInventoryText(text)
	var names, refNames []string
	for _, d := range mine {
		names = append(names, d.Name)
	}
	byName := map[string]devinfoDevice{}
	for _, rd := range refDevs {
		refNames = append(refNames, rd.Name)
		byName[rd.Name] = rd
	}
	sort.Strings(names)
	sort.Strings(refNames)
	c.eq("inventory text: device names", strings.Join(names, ","), strings.Join(refNames, ","), "ibv_devinfo")
	for _, d := range mine {
		rd, ok := byName[d.Name]
		if !ok {
			continue
		}
		compareTextDevice(&c, d, rd)
	}
	return c
}

func compareTextDevice(c *comparison, d textDevice, rd devinfoDevice) {
	const tool = "ibv_devinfo"
	what := "inventory text: " + d.Name
	c.eq(what+" node GUID", normGUID(d.Attrs["node GUID"]), normGUID(rd.Attrs["node_guid"]), tool)
	if fw := firstField(d.Attrs["firmware"] + " -"); fw != "-" {
		c.both(what+" firmware", fw, rd.Attrs["fw_ver"], tool)
	}
	if n := rd.Attrs["phys_port_cnt"]; n != "" {
		c.eq(what+" port count", strconv.Itoa(len(d.Ports)), n, tool)
	}
	refPorts := map[int]devinfoPort{}
	for _, rp := range rd.Ports {
		refPorts[rp.Num] = rp
	}
	for _, p := range d.Ports {
		rp, ok := refPorts[p.Num]
		if !ok {
			c.failf("%s port %d: shown, but ibv_devinfo has no such port", what, p.Num)
			continue
		}
		compareTextPort(c, fmt.Sprintf("%s port %d", what, p.Num), p, rp)
	}
	for _, a := range d.AddrGIDs {
		compareTextAddr(c, what, a, refPorts[a.Port])
	}
}

func compareTextPort(c *comparison, what string, p textPort, rp devinfoPort) {
	const tool = "ibv_devinfo"
	parts := strings.Split(p.Value, ", ")
	if len(parts) < 3 {
		c.failf("%s: cannot read %q", what, p.Value)
		return
	}
	state, phys, _ := strings.Cut(parts[0], " (")
	c.eq(what+" state", normState(state), normState(rp.Attrs["state"]), tool)
	c.both(what+" phys_state", normState(strings.TrimSuffix(phys, ")")), normState(rp.Attrs["phys_state"]), tool)
	if want, ok := devinfoRate(rp); ok {
		got, ok := leadingFloat(parts[1])
		if ok && got-want < 0.01 && want-got < 0.01 {
			c.agree++
		} else {
			c.failf("%s rate: rdmadoctor %q, ibv_devinfo %s × %s = %g Gb/s", what, parts[1], rp.Attrs["active_width"], rp.Attrs["active_speed"], want)
		}
	}
	c.eq(what+" link_layer", parts[2], rp.Attrs["link_layer"], tool)
	for _, extra := range parts[3:] {
		if mtu, ok := strings.CutPrefix(extra, "active MTU "); ok {
			if ref, ok := leadingFloat(rp.Attrs["active_mtu"]); ok {
				c.eq(what+" active_mtu", mtu, strconv.Itoa(int(ref)), tool)
			}
		}
	}
	if p.LID != "" {
		lid, sm, _ := strings.Cut(p.LID, ", SM LID ")
		c.eq(what+" lid", firstField(lid), rp.Attrs["port_lid"], tool)
		if sm != "" {
			c.eq(what+" sm_lid", firstField(sm), rp.Attrs["sm_lid"], tool)
		}
	}
}

func firstField(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}

// compareTextAddr: the GID index shown for an address is, in ibv_devinfo,
// that address's GID (an IPv4 address as its IPv4-mapped GID), of type
// RoCE v2 where ibv_devinfo prints types.
func compareTextAddr(c *comparison, what string, a textAddr, rp devinfoPort) {
	if a.GIDIdx < 0 {
		return // "no RoCE v2 GID for it": judged by roce.config, not here
	}
	where := fmt.Sprintf("%s port %d address %s", what, a.Port, a.Addr)
	rg, ok := rp.GIDs[a.GIDIdx]
	if !ok {
		c.failf("%s: GID index %d shown, ibv_devinfo has no GID[%d]", where, a.GIDIdx, a.GIDIdx)
		return
	}
	ip, _, err := net.ParseCIDR(a.Addr)
	if err != nil {
		c.failf("%s: not an address", where)
		return
	}
	c.eq(fmt.Sprintf("%s GID[%d]", where, a.GIDIdx), ip.To16().String(), normGID(rg.GID), "ibv_devinfo")
	if rg.Type != "" {
		c.eq(fmt.Sprintf("%s GID[%d] type", where, a.GIDIdx), "RoCE v2", normGIDType(rg.Type), "ibv_devinfo")
	}
}

// inventoryCommand judges `rdmadoctor inventory` as the guest ran it beside
// the reference tools: its JSON inventory field by field as the report's,
// and its text against ibv_devinfo -v.
func inventoryCommand(o *outcome, dir string) {
	raw, err := readRef(dir, "inventory.json")
	if err != nil {
		o.fail("rdmadoctor inventory --format json: no output: %v", err)
	} else {
		var doc struct {
			Schema    string          `json:"schema"`
			Inventory json.RawMessage `json:"inventory"`
		}
		if err := json.Unmarshal([]byte(raw), &doc); err != nil || doc.Schema != "rdmadoctor.inventory/v1" {
			o.fail("rdmadoctor inventory --format json: not an inventory (%v): %s", err, firstLines(raw, 3))
		} else {
			cmp := compareInventory(doc.Inventory, dir)
			for _, f := range cmp.failures {
				o.fail("inventory command (JSON): %s", f)
			}
			o.Extra = append(o.Extra, fmt.Sprintf("`rdmadoctor inventory --format json` vs the reference tools: %d fields agree, %d differ", cmp.agree, len(cmp.failures)))
		}
	}
	text, err := readRef(dir, "inventory.txt")
	if err != nil {
		o.fail("rdmadoctor inventory: no output: %v", err)
		return
	}
	cmp := compareInventoryText(text, dir)
	for _, f := range cmp.failures {
		o.fail("%s", f)
	}
	if cmp.agree == 0 {
		o.fail("inventory text: nothing was compared:\n%s", firstLines(text, 5))
	}
	o.Extra = append(o.Extra, fmt.Sprintf("`rdmadoctor inventory` text vs ibv_devinfo -v: %d values agree, %d differ", cmp.agree, len(cmp.failures)))
}
