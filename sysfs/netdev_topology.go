package sysfs

import (
	"path"
	"sort"
	"strings"
)

// NetdevTopology is how one interface stacks with others, as the kernel
// shows it in sysfs: net/core/dev.c links every adjacent device as
// upper_<name> / lower_<name> in the interface's directory, and a bond or
// team slave also gets a "master" link; a bond master has bonding/slaves.
type NetdevTopology struct {
	Name   string
	Exists bool     // /sys/class/net/<name> is in this namespace
	Uppers []string // devices stacked on this one: VLAN, macvlan, bond master, IPoIB child
	Lowers []string // devices this one sits on
	Master string   // the bond/team/bridge this one is enslaved to, "" when none
	Bond   bool     // a bonding master (bonding/ exists)
	VLAN   bool     // an 802.1Q VLAN device (/proc/net/vlan/<name>)
	// PhysPortName is the switch-port name a driver gives its ports
	// ("p0", "pf0vf3" for a VF representor); "" when the driver has none.
	PhysPortName string
}

// Representor reports whether the interface is an eswitch representor of a
// VF or sub-function (phys_port_name "pf0vf3", "pf0sf1", "c1pf0vf3"), or of
// a PCI PF — a DPU's representor of its host's PF, an external
// controller's port ("c1pf0"; devlink's __devlink_port_phys_port_name_get
// prints a PCI_PF port "pf%u", with "c%u" before it for an external
// controller). An uplink ("p0") is none.
func (t NetdevTopology) Representor() bool {
	n := t.PhysPortName
	if strings.Contains(n, "vf") || strings.Contains(n, "sf") {
		return true
	}
	if i := strings.Index(n, "pf"); i >= 0 && isDigits(n[i+2:]) && (i == 0 || n[0] == 'c' && isDigits(n[1:i])) {
		return true
	}
	return false
}

// validIfname rejects names that cannot be an interface's and would walk
// out of /sys/class/net.
func validIfname(name string) bool {
	return name != "" && name != "." && name != ".." && len(name) < 64 && !strings.ContainsAny(name, "/\x00")
}

// NetdevTopology reads the stacking of one interface. A missing interface
// is not an error: Exists is false (it may live in another namespace).
func (h *Host) NetdevTopology(name string) (NetdevTopology, error) {
	t := NetdevTopology{Name: name}
	if !validIfname(name) {
		return t, nil
	}
	dir := path.Join(NetClass, name)
	entries, err := h.ReadDir(dir)
	if err != nil {
		if IsNotExist(err) {
			return t, nil
		}
		return t, err
	}
	t.Exists = true
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e, "upper_"):
			t.Uppers = append(t.Uppers, strings.TrimPrefix(e, "upper_"))
		case strings.HasPrefix(e, "lower_"):
			t.Lowers = append(t.Lowers, strings.TrimPrefix(e, "lower_"))
		case e == "master":
			if m, err := h.LinkBase(path.Join(dir, "master")); err == nil {
				t.Master = m
			}
		case e == "bonding":
			t.Bond = true
		case e == "phys_port_name":
			// Drivers without switch ports answer EOPNOTSUPP: no name.
			if s, err := h.ReadAttr(path.Join(dir, e)); err == nil {
				t.PhysPortName = strings.TrimSpace(s)
			}
		}
	}
	sort.Strings(t.Uppers)
	sort.Strings(t.Lowers)
	if vlan, err := h.IsVLAN(name); err == nil {
		t.VLAN = vlan
	}
	return t, nil
}

// BondSlaves lists a bond master's slaves in bonding/slaves order; the
// lower_ links when the file cannot be read.
func (h *Host) BondSlaves(bond string) ([]string, error) {
	if !validIfname(bond) {
		return nil, nil
	}
	s, err := h.ReadAttr(path.Join(NetClass, bond, "bonding", "slaves"))
	if err == nil {
		return strings.Fields(s), nil
	}
	t, terr := h.NetdevTopology(bond)
	if terr != nil || len(t.Lowers) == 0 {
		return nil, err
	}
	return t.Lowers, nil
}

// BondActiveSlave reads a bond master's mode (bonding/mode, "active-backup
// 1") and its active slave (bonding/active_slave; empty in modes without
// one, such as 802.3ad).
func (h *Host) BondActiveSlave(bond string) (mode, active string, err error) {
	if !validIfname(bond) {
		return "", "", nil
	}
	m, err := h.ReadAttr(path.Join(NetClass, bond, "bonding", "mode"))
	if err != nil {
		return "", "", err
	}
	a, _ := h.ReadAttr(path.Join(NetClass, bond, "bonding", "active_slave"))
	return strings.TrimSpace(m), strings.TrimSpace(a), nil
}
