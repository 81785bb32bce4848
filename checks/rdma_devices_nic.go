package checks

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// nicUnit is rdma.devices' judgement of one RDMA NIC function: the
// finding about it, the slots it is rendered from, and what the check's
// evidence and summary need.
type nicUnit struct {
	addr    string // the unit: the function's PCI address
	desc    string // "<address> <product>", "(VF of <PF>)" for a VF
	f       *Finding
	slots   Slots
	finding report.Finding // f rendered, once the fix slots are shared
	ev      map[string]any
	devs    []string // the function's RDMA devices
	hidden  []string // devices the kernel registered that this namespace does not show
}

// line is the function's line in the details.
func (u nicUnit) line() string {
	if u.f.Status == report.Fail {
		return u.desc + ": NO RDMA DEVICE — " + u.finding.Message
	}
	return u.desc + ": " + u.finding.Message
}

func (l *deviceLookup) judgeNIC(n NIC) nicUnit {
	devs := append([]string(nil), n.Fn.RDMADevs...)
	for _, d := range l.byAddr[n.Fn.Address] {
		devs = appendUnique(devs, d)
	}
	sort.Strings(devs)
	u := nicUnit{addr: n.Fn.Address, desc: n.Fn.Address + " " + n.Product, devs: devs,
		slots: Slots{"addr": n.Fn.Address, "functions": n.Fn.Address}}
	if n.Fn.PhysFn != "" {
		u.desc += " (VF of " + n.Fn.PhysFn + ")"
	}
	u.ev = map[string]any{"address": n.Fn.Address, "driver": n.Fn.Driver, "devices": nonNil(devs)}
	switch lag := l.lagMember(n); {
	case n.AssignedVF():
		u.f, u.slots = devicesAssignedVF, u.slots.with("foreign", n.Foreign)
	case len(devs) > 0:
		u.f, u.slots = devicesRegistered, u.slots.with("devices", strings.Join(devs, ", "), "lag", l.lagNote(devs))
	case lag != nil:
		u.ev["lag"] = lag.Dev.Name
		u.f, u.slots = devicesLAGMember, u.slots.with("lag", lag.Dev.Name, "bond", lag.LAG.Bond)
	default:
		u.f, u.slots = l.whyNoDevice(n, u.slots)
		if u.f == devicesOtherNetns && l.netns == "exclusive" && len(l.byAddr) > 0 {
			// Exclusive mode with a device of its own here (a pod's VF
			// moved in by the RDMA CNI): the others are the host's and
			// other pods', seen here only by their uverbs nodes.
			u.f = devicesHeldElsewhere
		}
		if u.f == devicesOtherNetns {
			u.hidden = l.uverbs[n.Fn.Address]
		}
		u.ev["reason"] = render(u.f.Message, u.slots)
	}
	return u
}

// shareFixSlots makes the functions that have the same finding with the
// same fix share one rendered fix: {functions} names them all, and {addr}
// and {pf} stay the function's own only where all of them agree —
// "<address>" and "<PF>" otherwise. The remedy then says each fix once.
func shareFixSlots(units []nicUnit) {
	groups := map[string][]int{}
	var order []string
	for i, u := range units {
		generic := u.slots.with("addr", "<address>", "pf", "<PF>", "functions", "")
		key := u.f.ID + "\x00" + render(u.f.Fix, generic)
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], i)
	}
	for _, key := range order {
		idx := groups[key]
		var addrs []string
		pf := units[idx[0]].slots["pf"]
		for _, i := range idx {
			addrs = append(addrs, units[i].addr)
			if units[i].slots["pf"] != pf {
				pf = "<PF>"
			}
		}
		addr := addrs[0]
		if len(addrs) > 1 {
			addr = "<address>"
		}
		for _, i := range idx {
			units[i].slots = units[i].slots.with("functions", strings.Join(addrs, ", "), "addr", addr, "pf", pf)
		}
	}
}

// whyNoDevice tells why a NIC has no RDMA device: the finding and its
// slots (slots carries the function's own).
func (l *deviceLookup) whyNoDevice(n NIC, slots Slots) (*Finding, Slots) {
	addr := n.Fn.Address
	if devs := l.uverbs[addr]; len(devs) > 0 && l.netns != "shared" {
		// Only a namespace hides a registered device, and only in
		// exclusive mode (or where the mode could not be read).
		mode := ""
		if l.netns == "exclusive" {
			mode = " (RDMA netns mode exclusive)"
		}
		return devicesOtherNetns, slots.with("devices", strings.Join(devs, ", "), "mode", mode, "netns", valueOrUnknown(l.netns))
	}
	drv := "its driver"
	if n.Driver != nil {
		drv = n.Driver.PCIDriver
	}
	switch {
	case n.Foreign != "":
		return devicesPassthrough, slots.with("foreign", n.Foreign, "driver", drv, "ids", fmt.Sprintf("%04x:%04x", n.Fn.Vendor, n.Fn.Device))
	case !n.Bound || n.Driver == nil:
		// A function is bound only to a driver of the table, so a
		// bound one always has its family.
		return devicesUnbound, slots.with("driver", drv)
	}
	if l.modErr == nil {
		for _, m := range []string{"ib_core", n.Driver.RDMAModule()} {
			if l.mods.State(m) == sysfs.ModuleAbsent {
				return devicesModuleMissing, slots.with("module", m)
			}
		}
	}
	return l.notRegistered(n, slots)
}

// notRegistered is the finding about a function whose driver and RDMA
// module are there and that still registered no device: the fix is its
// driver family's.
func (l *deviceLookup) notRegistered(n NIC, slots Slots) (*Finding, Slots) {
	mod := n.Driver.RDMAModule()
	netnsNote, netnsFix := "", ""
	if l.netns == "exclusive" && !l.uverbsRead {
		// The uverbs class (not namespaced) could not tell whether the
		// device exists elsewhere.
		netnsNote = "; RDMA netns mode is exclusive, so the device may exist in another network namespace"
		netnsFix = " RDMA netns mode is exclusive: a device moved to another namespace (`rdma dev set <dev> netns <ns>`) is invisible here; " +
			"run in that namespace or use `rdma system set netns shared`."
	}
	slots = slots.with("module", mod, "prefix", strings.TrimSuffix(n.Driver.DevPrefix, "_"), "reload", reloadInterrupts(mod),
		"netns_note", netnsNote, "netns_fix", netnsFix, "pf", n.Fn.PhysFn)
	switch {
	case l.modErr != nil:
		return devicesModulesUnknown, slots.with("cause", l.modErr.Error())
	case n.Driver.PCIDriver == "mlx4_core":
		return devicesNotRegisteredMLX4, slots
	case n.Fn.Vendor == 0x15b3 && strings.HasPrefix(mellanoxProducts[n.Fn.Device], "BlueField"):
		return devicesNotRegisteredBlueField, slots
	case n.Driver.Vendor == 0x15b3 && n.Fn.PhysFn != "":
		return devicesNotRegisteredMLX5VF, slots
	case n.Driver.Vendor == 0x15b3:
		return devicesNotRegisteredMLX5, slots
	}
	return devicesNotRegistered, slots
}
