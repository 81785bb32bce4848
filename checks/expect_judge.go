package checks

import (
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// The judging of the expectations file that is not a port's: the class's
// device count, each device's firmware and port count, and each function's
// PCIe link. Every finding cites the line that demanded the value, so an
// operator sees which key of which file the host deviates from.

// ExpectClassFor picks the class of f that judges hostname, after checking
// that every skip names a check of the catalog (by ID: a code could be
// renumbered in a file's reader's mind, an ID cannot) and every waive a
// declared finding.
func ExpectClassFor(f *expect.File, hostname string) (*expect.Class, error) {
	if err := f.CheckIDs(catalogIDs()); err != nil {
		return nil, err
	}
	if err := f.FindingIDs(FindingIDs()); err != nil {
		return nil, err
	}
	return f.Match(hostname)
}

// catalogIDs are the IDs skip and fail_on_warn may name, in catalog order.
func catalogIDs() []string {
	var ids []string
	for _, c := range Catalog() {
		ids = append(ids, c.ID)
	}
	return ids
}

// ExpectUnits is what the class's device and port rules are matched
// against: every RDMA device the host shows, with its port numbers.
func ExpectUnits(env *Env) []expect.Unit {
	var units []expect.Unit
	for _, d := range env.Survey().Devices {
		u := expect.Unit{Device: d.Name}
		for _, p := range d.Ports {
			u.Ports = append(u.Ports, p.Num)
		}
		units = append(units, u)
	}
	return units
}

// judgeDeviceCount compares the number of RDMA devices with the class's
// devices key: the finding, about the host, when it differs; none when it
// matches or nothing is expected.
func judgeDeviceCount(env *Env, n int) []report.Finding {
	want := env.Expect.ExpectedDevices()
	if want == nil || want.V == n {
		return nil
	}
	return []report.Finding{devicesCountDeviates.At("", Slots{"count": fmt.Sprint(n), "want": fmt.Sprint(want.V), "cite": want.Cite()})}
}

// judgeDeviceExpect compares one RDMA device's firmware and port count with
// the class's device keys; each finding is about the device and cites the key.
func judgeDeviceExpect(env *Env, d sysfs.RDMADevice) []report.Finding {
	e := env.Expect.Device(d.Name)
	var out []report.Finding
	if e.FW != nil {
		// MatchFW compares the version part: mlx5's fw_ver carries the
		// board's PSID in parentheses, which a class need not name.
		slots := Slots{"device": d.Name, "want": e.FW.V.String(), "cite": e.FW.Cite()}
		switch fw := strings.TrimSpace(d.FWVer); {
		case fw == "":
			out = append(out, devicesFWUnknown.At(d.Name, slots))
		case !e.FW.V.MatchFW(fw):
			out = append(out, devicesFWDeviates.At(d.Name, slots.with("fw", fw)))
		}
	}
	if e.Ports != nil && len(d.Ports) != e.Ports.V {
		out = append(out, devicesPortsDeviate.At(d.Name, Slots{"device": d.Name, "ports": fmt.Sprint(len(d.Ports)),
			"want": fmt.Sprint(e.Ports.V), "cite": e.Ports.Cite()}))
	}
	return out
}

// pcieExpect is what the class expects of one PCI function's link: the
// pcie_speed and pcie_width of the RDMA devices it carries (a function
// with no RDMA device registered cannot be matched to a device glob).
type pcieExpect struct {
	speed    *expect.Value[string] // the pattern as the file spells it, for messages
	speedPat expect.Pattern
	width    *expect.Value[int]
}

func pcieExpectOf(env *Env, n NIC) pcieExpect {
	var pe pcieExpect
	names := append([]string(nil), n.Fn.RDMADevs...)
	for _, d := range env.Survey().DevicesOf(n.Fn.Address) {
		names = appendUnique(names, d.Name)
	}
	for _, name := range names {
		d := pcieExpectFrom(env.Expect.Device(name))
		if d.speed != nil && pe.speed == nil {
			pe.speed, pe.speedPat = d.speed, d.speedPat
		}
		if d.width != nil && pe.width == nil {
			pe.width = d.width
		}
	}
	return pe
}

// pcieExpectFrom takes one device's pcie keys; the speed pattern is kept
// apart from its text, which messages print.
func pcieExpectFrom(e expect.DeviceExpect) pcieExpect {
	pe := pcieExpect{width: e.PCIeWidth}
	if v := e.PCIeSpeed; v != nil {
		pe.speed = &expect.Value[string]{V: v.V.String(), Key: v.Key, Line: v.Line, File: v.File, Comment: v.Comment}
		pe.speedPat = v.V
	}
	return pe
}

// judgePCIeExpect compares a function's trained link with the class's
// pcie_speed and pcie_width: any difference, faster as much as slower, is
// a deviation from the file (a different card or slot than the class's).
// It returns the findings and the cited keys that deviate.
func judgePCIeExpect(pe pcieExpect, cur sysfs.LinkSpeed, width int) (findings, keys []string) {
	if pe.speed != nil {
		if !pe.speedPat.MatchPCIeSpeed(cur.GTs, cur.Raw, cur.Short()) {
			findings = append(findings, fmt.Sprintf("speed %s, expected %s by %s", cur.Short(), pe.speed.V, pe.speed.Cite()))
			keys = append(keys, pe.speed.Cite())
		}
	}
	if pe.width != nil && width != pe.width.V {
		findings = append(findings, fmt.Sprintf("width x%d, expected x%d by %s", width, pe.width.V, pe.width.Cite()))
		keys = append(keys, pe.width.Cite())
	}
	return findings, keys
}
