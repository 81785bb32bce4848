package expect

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Header is the first line Write puts in a file.
const Header = "# rdmadoctor expectations, format 1"

// entry is one line Write emits.
type entry struct {
	line         int
	key, value   string
	comment      string
	sectionOrder int // class keys first, then rules, each in line order
	commented    bool
}

// Write writes one class in the file format, the header comment first.
// Values are written in the order of the lines that set them, so a later
// line still wins when the output is read back. The text is parsed back
// before it is written: what Write produces, Parse reads.
func Write(w io.Writer, c *Class) error {
	if c == nil {
		return fmt.Errorf("expect: no class to write")
	}
	if len(c.Hosts) == 0 {
		return fmt.Errorf("expect: class %s has no hosts", c.Name)
	}
	es := append(classEntries(c), entry{key: "hosts", value: strings.Join(c.Hosts, " ")})
	for _, e := range es {
		if strings.ContainsAny(e.key+e.value, "#\r\n") || strings.TrimSpace(e.value) != e.value {
			return fmt.Errorf("expect: class %s: %s = %q cannot be written (a '#', a line break or blanks at an end)", c.Name, e.key, e.value)
		}
	}
	es = es[:len(es)-1]
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n[class %s]\n", Header, c.Name)
	fmt.Fprintf(&b, "hosts = %s\n", strings.Join(c.Hosts, " "))
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].sectionOrder != es[j].sectionOrder {
			return es[i].sectionOrder < es[j].sectionOrder
		}
		return es[i].line < es[j].line
	})
	width := 0
	for _, e := range es {
		n := len(e.key) + 3 + len(e.value)
		if e.commented {
			n += 2
		}
		width = max(width, n)
	}
	for _, e := range es {
		line := e.key + " = " + e.value
		if e.commented {
			line = "# " + line
		}
		if e.comment != "" {
			line = fmt.Sprintf("%-*s  # %s", width, line, oneLine(e.comment))
		}
		b.WriteString(line + "\n")
	}
	if _, err := Parse(c.Name, bytes.NewReader(b.Bytes())); err != nil {
		return fmt.Errorf("expect: class %s would not read back: %w", c.Name, err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// oneLine keeps a comment on its line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func classEntries(c *Class) []entry {
	var es []entry
	add := func(order int, line int, key, value, comment string) {
		es = append(es, entry{line: line, key: key, value: value, comment: comment, sectionOrder: order})
	}
	if v := c.Devices; v != nil {
		add(0, v.Line, "devices", formatValue(v.V), v.Comment)
	}
	words := func(ws []string) string { return strings.Join(ws, " ") }
	list := func(ws []string) string { return Pattern(ws).list() }
	es = listEntry(es, c.Skip, "skip", words, func(v string) string { return v })
	es = listEntry(es, c.FailOnWarnIDs, "fail_on_warn", list, func(v string) string { return v })
	es = listEntry(es, c.Waive, "waive", list, func(v string) string { return v })
	if v := c.WaiveReason; v != nil {
		add(0, v.Line, "waive_reason", `"`+v.V+`"`, v.Comment)
	}
	if v := c.RoCETC; v != nil {
		add(0, v.Line, "roce_tc", formatValue(v.V), v.Comment)
	}
	if v := c.Lossless; v != nil {
		add(0, v.Line, "lossless", formatValue(v.V), v.Comment)
	}
	es = listEntry(es, c.PKeys, "pkeys", list, PKey.String)
	es = listEntry(es, c.IBPeers, "ib_peers", list, IBPeer.String)
	if v := c.Switch; v != nil {
		add(0, v.Line, "switch", v.V.String(), v.Comment)
	}
	if v := c.SwitchPort; v != nil {
		add(0, v.Line, "switch_port", formatValue(v.V), v.Comment)
	}
	if v := c.GPUNICMaxDistance; v != nil {
		add(0, v.Line, "gpu_nic_max_distance", v.V, v.Comment)
	}
	for _, r := range c.DeviceRules {
		es = appendValue(es, r.FW, r.Glob+".fw")
		es = appendValue(es, r.PCIeSpeed, r.Glob+".pcie_speed")
		es = appendValue(es, r.PCIeWidth, r.Glob+".pcie_width")
		es = appendValue(es, r.Ports, r.Glob+".ports")
	}
	for _, r := range c.PortRules {
		unit := fmt.Sprintf("%s/%d", r.Glob, r.Port)
		if r.Port == 0 {
			unit = r.Glob + "/*"
		}
		es = appendValue(es, r.LinkLayer, unit+".link_layer")
		es = appendValue(es, r.Rate, unit+".rate")
		es = appendValue(es, r.Width, unit+".width")
		es = appendValue(es, r.MTU, unit+".mtu")
		es = appendValue(es, r.PFCPriority, unit+".pfc_priority")
		es = appendValue(es, r.Unused, unit+".unused")
		es = appendValue(es, r.ModuleVendor, unit+".module_vendor")
		es = appendValue(es, r.ModulePart, unit+".module_part")
		es = appendValue(es, r.ModuleFirmware, unit+".module_firmware")
	}
	es = appendCounterEntries(es, c) // counters.go
	for _, k := range c.Candidates {
		es = append(es, entry{line: k.Line, key: k.Key, value: k.Value, comment: k.Comment, sectionOrder: 1, commented: true})
	}
	return es
}

// listEntry adds a key whose value is a list, at its first value's line
// with its comment; none when the list is empty.
func listEntry[T any](es []entry, vs []*Value[T], key string, format func([]string) string, str func(T) string) []entry {
	if len(vs) == 0 {
		return es
	}
	ws := make([]string, len(vs))
	for i, v := range vs {
		ws[i] = str(v.V)
	}
	return append(es, entry{line: vs[0].Line, key: key, value: format(ws), comment: vs[0].Comment})
}

// appendValue adds a rule's value under its canonical key (the key the
// rule's glob and port spell, whatever the value's Key says).
func appendValue[T any](es []entry, v *Value[T], key string) []entry {
	if v == nil {
		return es
	}
	return append(es, entry{line: v.Line, key: key, value: formatValue(v.V), comment: v.Comment, sectionOrder: 1})
}
