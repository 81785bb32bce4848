package sysfs

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
)

// InfinibandClass lists the RDMA devices the kernel registered.
const InfinibandClass = "/sys/class/infiniband"

// RDMADevice is one /sys/class/infiniband/<name> entry.
type RDMADevice struct {
	Name     string
	SysPath  string // resolved /sys/devices/... path
	PCIAddr  string // the PCI function behind "device", "" for software devices
	Driver   string // driver bound to that PCI function
	Software bool   // lives under /sys/devices/virtual (rxe, siw)
	Parent   string // netdev a software device sits on ("parent" attribute)
	NodeType string // "1: CA"
	NodeGUID string
	SysGUID  string
	FWVer    string
	HCAType  string
	BoardID  string
	NodeDesc string
	Ports    []RDMAPort
	Problems []string
}

// RDMAPort is one ports/<n> directory.
type RDMAPort struct {
	Num       int
	State     PortState // "4: ACTIVE"
	PhysState PortState // "5: LinkUp"
	Rate      string    // "100 Gb/sec (4X EDR)"
	LinkLayer string    // "InfiniBand" | "Ethernet"
	LID       uint32
	SMLID     uint32
	HasLID    bool
	GIDs      []GID
	Problems  []string
}

// PortState is a numbered state attribute such as "4: ACTIVE".
type PortState struct {
	Code int
	Name string
	Raw  string
}

func (s PortState) String() string {
	if s.Name == "" {
		return s.Raw
	}
	return s.Name
}

// ParsePortState parses "4: ACTIVE" / "5: LinkUp".
func ParsePortState(s string) (PortState, error) {
	s = strings.TrimSpace(s)
	num, name, ok := strings.Cut(s, ":")
	if !ok {
		return PortState{Raw: s}, fmt.Errorf("%q is not \"<n>: <NAME>\"", trimForMsg(s))
	}
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n < 0 || n > 255 {
		return PortState{Raw: s}, fmt.Errorf("%q: bad state number", trimForMsg(s))
	}
	return PortState{Code: n, Name: strings.TrimSpace(name), Raw: s}, nil
}

// GID is one populated GID table entry.
type GID struct {
	Index  int
	GID    string // "fe80:0000:0000:0000:0e42:a1ff:fe2b:3c4d"
	Type   string // "IB/RoCE v1" | "RoCE v2" ("" when unreadable)
	Netdev string // gid_attrs/ndevs/<i>, RoCE only
}

// ZeroGID is an unused GID table entry.
const ZeroGID = "0000:0000:0000:0000:0000:0000:0000:0000"

// RDMADeviceNames lists /sys/class/infiniband.
func (h *Host) RDMADeviceNames() ([]string, error) {
	return h.ReadDir(InfinibandClass)
}

// PortLinkLayers reads only the link layer of every RDMA port ("mlx5_0/1"
// → "InfiniBand"), none of the rest RDMADevices reads (a SoftRoCE port's
// GID table alone is a thousand files): enough to tell whether the host
// has an InfiniBand port at all.
func (h *Host) PortLinkLayers() (map[string]string, error) {
	names, err := h.RDMADeviceNames()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, name := range names {
		dir := path.Join(InfinibandClass, name, "ports")
		ports, err := h.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, p := range ports {
			ll, err := h.ReadAttr(path.Join(dir, p, "link_layer"))
			if err != nil {
				return nil, err
			}
			out[name+"/"+p] = strings.TrimSpace(ll)
		}
	}
	return out, nil
}

// RDMADevices reads every RDMA device. A missing class directory returns an
// empty list and the not-exist error, so callers can tell "none" from
// "could not look".
func (h *Host) RDMADevices() ([]RDMADevice, error) {
	names, err := h.RDMADeviceNames()
	if err != nil {
		return nil, err
	}
	devs := make([]RDMADevice, len(names))
	parallel(len(names), func(i int) { devs[i] = h.RDMADevice(names[i]) })
	return devs, nil
}

// RDMADevice reads one device and all of its ports.
func (h *Host) RDMADevice(name string) RDMADevice {
	dir := path.Join(InfinibandClass, name)
	d := RDMADevice{Name: name, SysPath: dir}
	prob := func(err error) { d.Problems = append(d.Problems, err.Error()) }
	if p, err := h.ResolveLink(dir); err == nil {
		d.SysPath = p
		d.Software = strings.HasPrefix(p, "/sys/devices/virtual/")
	}
	if a, err := h.LinkBase(path.Join(dir, "device")); err == nil {
		d.PCIAddr = a
		if drv, err := h.LinkBase(path.Join(dir, "device", "driver")); err == nil {
			d.Driver = drv
		}
	} else if !IsNotExist(err) {
		prob(err)
	}
	attr := func(name string, dst *string, required bool) {
		s, err := h.ReadAttr(path.Join(dir, name))
		if err != nil {
			if required || !IsNotExist(err) {
				prob(err)
			}
			return
		}
		*dst = strings.TrimSpace(s)
	}
	attr("node_type", &d.NodeType, true)
	attr("node_guid", &d.NodeGUID, true)
	attr("sys_image_guid", &d.SysGUID, false)
	attr("fw_ver", &d.FWVer, false)
	attr("hca_type", &d.HCAType, false)
	attr("board_id", &d.BoardID, false)
	attr("node_desc", &d.NodeDesc, false)
	attr("parent", &d.Parent, false)
	ports, err := h.ReadDir(path.Join(dir, "ports"))
	if err != nil {
		prob(err)
	}
	for _, p := range ports {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 255 {
			prob(fmt.Errorf("%s: not a port number", h.Display(path.Join(dir, "ports", p))))
			continue
		}
		d.Ports = append(d.Ports, h.rdmaPort(dir, n))
	}
	sort.Slice(d.Ports, func(i, j int) bool { return d.Ports[i].Num < d.Ports[j].Num })
	return d
}

// maxGIDEntries bounds how many GID table entries are read per port; real
// tables have 16 (rxe: 1024) entries.
const maxGIDEntries = 4096

func (h *Host) rdmaPort(devDir string, n int) RDMAPort {
	dir := path.Join(devDir, "ports", strconv.Itoa(n))
	p := RDMAPort{Num: n}
	prob := func(err error) { p.Problems = append(p.Problems, err.Error()) }
	state := func(name string) PortState {
		s, err := h.ReadAttr(path.Join(dir, name))
		if err != nil {
			prob(err)
			return PortState{}
		}
		ps, err := ParsePortState(s)
		if err != nil {
			prob(fmt.Errorf("%s: %w", h.Display(path.Join(dir, name)), err))
		}
		return ps
	}
	p.State = state("state")
	p.PhysState = state("phys_state")
	if s, err := h.ReadAttr(path.Join(dir, "rate")); err == nil {
		p.Rate = strings.TrimSpace(s)
	} else {
		prob(err)
	}
	if s, err := h.ReadAttr(path.Join(dir, "link_layer")); err == nil {
		p.LinkLayer = strings.TrimSpace(s)
	} else {
		prob(err)
	}
	if s, err := h.ReadAttr(path.Join(dir, "lid")); err == nil {
		if v, err := ParseHex(s, 32); err == nil {
			p.LID, p.HasLID = uint32(v), true
		} else {
			prob(fmt.Errorf("%s: %w", h.Display(path.Join(dir, "lid")), err))
		}
	}
	if s, err := h.ReadAttr(path.Join(dir, "sm_lid")); err == nil {
		if v, err := ParseHex(s, 32); err == nil {
			p.SMLID = uint32(v)
		}
	}
	p.GIDs = h.readGIDs(dir, &p)
	return p
}

func (h *Host) readGIDs(portDir string, p *RDMAPort) []GID {
	names, err := h.ReadDir(path.Join(portDir, "gids"))
	if err != nil {
		if !IsNotExist(err) {
			p.Problems = append(p.Problems, err.Error())
		}
		return nil
	}
	idx := make([]int, 0, len(names))
	for _, n := range names {
		if i, err := strconv.Atoi(n); err == nil && i >= 0 && i < maxGIDEntries {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	// A table has 16 to 1024 (rxe) entries, most of them unused; read
	// them on a few goroutines and keep the populated ones in index order.
	all := make([]GID, len(idx))
	parallel(len(idx), func(k int) {
		i := idx[k]
		is := strconv.Itoa(i)
		s, err := h.ReadAttr(path.Join(portDir, "gids", is))
		if err != nil {
			return // unused entries of some drivers answer EINVAL
		}
		s = strings.TrimSpace(s)
		if s == "" || s == ZeroGID {
			return
		}
		g := GID{Index: i, GID: s}
		if t, err := h.ReadAttr(path.Join(portDir, "gid_attrs", "types", is)); err == nil {
			g.Type = strings.TrimSpace(t)
		}
		if nd, err := h.ReadAttr(path.Join(portDir, "gid_attrs", "ndevs", is)); err == nil {
			g.Netdev = strings.TrimSpace(nd)
		}
		all[k] = g
	})
	var gids []GID
	for _, g := range all {
		if g.GID != "" {
			gids = append(gids, g)
		}
	}
	return gids
}
