package sysfs

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
)

// NCCL reads its configuration from /etc/nccl.conf (KEY=VALUE lines);
// NCCL_TOPO_FILE there names an XML description of the machine that NCCL
// loads instead of (or before) its own detection. Clouds whose VMs hide
// the PCIe tree publish the GPU–NIC pairing of each VM size this way:
// Azure's HPC images install /opt/microsoft/<size>-topo.xml for every ND
// size and name the size's file in /etc/nccl.conf.
const (
	NCCLConf = "/etc/nccl.conf"
	// PublishedTopologyDir is where Azure's HPC images install the
	// topology files, looked at when /etc/nccl.conf names none.
	PublishedTopologyDir = "/opt/microsoft"
)

// NCCLTopology is the GPU–NIC pairing a topology file publishes: the
// functions below each (virtual) bridge of each NUMA node.
type NCCLTopology struct {
	File   string // the file read, as /etc/nccl.conf or the directory names it
	Groups []NCCLTopoGroup
}

// NCCLTopoGroup is one bridge of a topology file and the GPUs and NICs
// below it, by PCI address, in the file's order.
type NCCLTopoGroup struct {
	Bridge string // the bridge's busid ("ffff:ff:01.0")
	NUMA   int    // the enclosing <cpu>'s numaid, -1 when absent
	GPUs   []string
	NICs   []string
}

// GroupOf is the group that lists the GPU at addr, and its place among
// the group's GPUs.
func (t NCCLTopology) GroupOf(addr string) (NCCLTopoGroup, int, bool) {
	for _, g := range t.Groups {
		for i, a := range g.GPUs {
			if a == addr {
				return g, i, true
			}
		}
	}
	return NCCLTopoGroup{}, 0, false
}

// gpus is every GPU address the file lists, sorted.
func (t NCCLTopology) gpus() []string {
	var out []string
	for _, g := range t.Groups {
		out = append(out, g.GPUs...)
	}
	sort.Strings(out)
	return out
}

// ReadNCCLTopology finds the topology file that describes this machine's
// GPUs (gpus: their PCI addresses): the one /etc/nccl.conf's
// NCCL_TOPO_FILE names, else one of the files in PublishedTopologyDir. A
// file describes the machine when it lists exactly its GPUs; the images
// carry the files of every size, so the others are passed over. found is
// false when no file matches; notes say which files were passed over and
// why.
func (h *Host) ReadNCCLTopology(gpus []string) (t NCCLTopology, found bool, notes []string) {
	want := append([]string(nil), gpus...)
	sort.Strings(want)
	var candidates []string
	if f := h.ncclConfTopoFile(); f != "" {
		candidates = append(candidates, f)
	} else if names, err := h.ReadDir(PublishedTopologyDir); err == nil {
		for _, n := range names {
			if strings.HasSuffix(n, "topo.xml") {
				candidates = append(candidates, path.Join(PublishedTopologyDir, n))
			}
		}
	}
	for _, f := range candidates {
		data, err := h.ReadFile(f)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		t, err := ParseNCCLTopology(data)
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		t.File = f
		if got := t.gpus(); strings.Join(got, " ") != strings.Join(want, " ") {
			notes = append(notes, fmt.Sprintf("%s lists GPUs %s, not this machine's", f, strings.Join(got, " ")))
			continue
		}
		return t, true, notes
	}
	return NCCLTopology{}, false, notes
}

// ncclConfTopoFile is NCCL_TOPO_FILE of /etc/nccl.conf, "" when unset.
func (h *Host) ncclConfTopoFile() string {
	data, err := h.ReadFile(NCCLConf)
	if err != nil {
		return ""
	}
	file := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "NCCL_TOPO_FILE" {
			file = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	if !path.IsAbs(file) {
		return ""
	}
	return path.Clean(file)
}

// topoNode is an element of an NCCL topology file: <system>, <cpu>, <pci>
// (a bridge when it has children), <nic>, <nvlink>, ….
type topoNode struct {
	XMLName  xml.Name
	NUMAID   string     `xml:"numaid,attr"`
	BusID    string     `xml:"busid,attr"`
	Class    string     `xml:"class,attr"`
	Children []topoNode `xml:",any"`
}

// ParseNCCLTopology reads an NCCL topology file: each <pci> whose
// children are PCI functions is a group, its GPUs (class 0x03xxxx or
// 0x12xxxx) and NICs (0x02xxxx) below it; the NUMA node is the enclosing
// <cpu>'s numaid.
func ParseNCCLTopology(data []byte) (NCCLTopology, error) {
	var root topoNode
	if err := xml.Unmarshal(data, &root); err != nil {
		return NCCLTopology{}, fmt.Errorf("not an NCCL topology file: %w", err)
	}
	if root.XMLName.Local != "system" {
		return NCCLTopology{}, fmt.Errorf("not an NCCL topology file: top element <%s>, want <system>", root.XMLName.Local)
	}
	var t NCCLTopology
	var walk func(n topoNode, numa, depth int)
	walk = func(n topoNode, numa, depth int) {
		if depth > maxPCIDepth {
			return
		}
		if n.XMLName.Local == "cpu" {
			numa = -1
			if v, err := strconv.Atoi(n.NUMAID); err == nil {
				numa = v
			}
		}
		g := NCCLTopoGroup{Bridge: n.BusID, NUMA: numa}
		for _, c := range n.Children {
			if c.XMLName.Local != "pci" || len(c.Children) > 0 {
				walk(c, numa, depth+1)
				continue
			}
			switch addr := strings.ToLower(c.BusID); {
			case strings.HasPrefix(c.Class, "0x03") || strings.HasPrefix(c.Class, "0x12"):
				g.GPUs = append(g.GPUs, addr)
			case strings.HasPrefix(c.Class, "0x02"):
				g.NICs = append(g.NICs, addr)
			}
		}
		if n.XMLName.Local == "pci" && len(g.GPUs)+len(g.NICs) > 0 {
			t.Groups = append(t.Groups, g)
		}
	}
	walk(root, -1, 0)
	if len(t.Groups) == 0 {
		return NCCLTopology{}, fmt.Errorf("no bridge with a GPU or NIC below it")
	}
	return t, nil
}
