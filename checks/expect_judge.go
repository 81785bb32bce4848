package checks

import (
	"fmt"
	"math"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// The judging of the expectations file that is not a port's: the class's
// device count, each device's firmware and port count, and each function's
// PCIe link. Every finding cites the line that demanded the value, so an
// operator sees which key of which file the host deviates from.

// ExpectClassFor picks the class of f that judges hostname, after checking
// that every skip names a check of the catalog (by ID: a code could be
// renumbered in a file's reader's mind, an ID cannot).
func ExpectClassFor(f *expect.File, hostname string) (*expect.Class, error) {
	if err := f.CheckSkips(func(id string) bool { _, ok := registry[id]; return ok }); err != nil {
		return nil, err
	}
	return f.Match(hostname)
}

// judgeDeviceCount compares the number of RDMA devices with the class's
// devices key: "" when it matches or nothing is expected, else the finding.
func judgeDeviceCount(env *Env, n int) string {
	want := env.Expect.ExpectedDevices()
	if want == nil || want.V == n {
		return ""
	}
	return fmt.Sprintf("%d RDMA device(s), expected %d by %s", n, want.V, want.Cite())
}

// judgeDeviceExpect compares one RDMA device's firmware and port count with
// the class's device keys; each finding names the device and the key.
func judgeDeviceExpect(env *Env, d sysfs.RDMADevice) []string {
	e := env.Expect.Device(d.Name)
	var out []string
	if e.FW != nil {
		switch fw := strings.TrimSpace(d.FWVer); {
		case fw == "":
			out = append(out, fmt.Sprintf("%s firmware unknown (no readable fw_ver), expected %s by %s", d.Name, e.FW.V, e.FW.Cite()))
		case fw != e.FW.V:
			out = append(out, fmt.Sprintf("%s firmware %s, expected %s by %s", d.Name, fw, e.FW.V, e.FW.Cite()))
		}
	}
	if e.Ports != nil && len(d.Ports) != e.Ports.V {
		out = append(out, fmt.Sprintf("%s has %d port(s), expected %d by %s", d.Name, len(d.Ports), e.Ports.V, e.Ports.Cite()))
	}
	return out
}

// pcieExpect is what the class expects of one PCI function's link: the
// pcie_speed and pcie_width of the RDMA devices it carries (a function
// with no RDMA device registered cannot be matched to a device glob).
type pcieExpect struct {
	speed *expect.Value[string]
	width *expect.Value[int]
}

func pcieExpectOf(env *Env, n NIC) pcieExpect {
	var pe pcieExpect
	names := append([]string(nil), n.Fn.RDMADevs...)
	for _, d := range env.Survey().DevicesOf(n.Fn.Address) {
		names = appendUnique(names, d.Name)
	}
	for _, name := range names {
		e := env.Expect.Device(name)
		if e.PCIeSpeed != nil && pe.speed == nil {
			pe.speed = e.PCIeSpeed
		}
		if e.PCIeWidth != nil && pe.width == nil {
			pe.width = e.PCIeWidth
		}
	}
	return pe
}

// judgePCIeExpect compares a function's trained link with the class's
// pcie_speed and pcie_width: any difference, faster as much as slower, is
// a deviation from the file (a different card or slot than the class's).
// It returns the findings and the cited keys that deviate.
func judgePCIeExpect(pe pcieExpect, cur sysfs.LinkSpeed, width int) (findings, keys []string) {
	if pe.speed != nil {
		if want := expect.PCIeGTs(pe.speed.V); math.Abs(cur.GTs-want) > 0.01 {
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
