package checks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sort"
	"strconv"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// ExpectFromHost writes down what a known-good host shows as an
// expectations class: the number of RDMA devices, each device's firmware,
// PCIe link and port count, each ACTIVE port's link layer, rate, width,
// netdev MTU (RoCE) and PFC priority (when PFC is on exactly one), rdma_cm's
// default traffic class when every RoCE port has the same, and lossless
// when roce.lossless passes. A port that is not ACTIVE is written as a
// commented `unused = true` candidate: down at capture may be unused on
// purpose or broken, which only the operator knows, so the file neither
// expects it ACTIVE nor silences it until the line is uncommented. Every value
// goes through the parser's validation, so the class writes and reads back.
func ExpectFromHost(env *Env, className string, hosts []string) (*expect.Class, error) {
	s := env.Survey()
	if s.DevicesErr != nil && !sysfs.IsNotExist(s.DevicesErr) {
		return nil, fmt.Errorf("could not list the RDMA devices: %w", s.DevicesErr)
	}
	if len(s.Devices) == 0 {
		return nil, errors.New("the host shows no RDMA device: there is nothing to expect")
	}
	if className == "" || len(hosts) == 0 {
		defClass, defHosts, err := ExpectDefaults(env.Host.Hostname())
		if err != nil {
			return nil, err
		}
		className = cmp.Or(className, defClass)
		if len(hosts) == 0 {
			hosts = defHosts
		}
	}
	c, err := expect.NewClass(className, hosts)
	if err != nil {
		return nil, err
	}
	set := func(key, value, comment string) {
		// A value the format cannot say (an odd link layer) is left out:
		// the file expects less rather than something the host is not.
		_ = c.Set(key, value, comment)
	}
	set("devices", strconv.Itoa(len(s.Devices)), "written by rdmadoctor expect --from-host on "+cmp.Or(env.Host.Hostname(), "a host without a name")+"; review before use")
	expectTrafficClass(env, set)
	expectGPUNICDistance(env, set)
	if r := registry["roce.lossless"]; r != nil && r.Run(context.Background(), env).Status == report.Pass {
		set("lossless", "true", "roce.lossless passed on this host")
	}
	devs := append([]*DeviceModel(nil), env.Model().Devices...)
	sort.Slice(devs, func(i, j int) bool { return devs[i].Dev.Name < devs[j].Dev.Name })
	for _, dm := range devs {
		expectDevice(env, dm.Dev, set)
		for _, pm := range dm.Ports {
			expectPort(env, pm, set, func(key, value, comment string) { _ = c.SetCandidate(key, value, comment) })
		}
	}
	return c, nil
}

// expectGPUNICDistance proposes gpu_nic_max_distance: the farthest of the
// host's GPU–NIC pairs as gpu.nic_affinity pairs them, so that a node of
// the class whose NIC lands farther (a misplaced card, a rail on the other
// socket) fails. Nothing is proposed where a GPU has no NIC or a path could
// not be read (a VM guest): the class would expect what the host does not show.
func expectGPUNICDistance(env *Env, set setter) {
	g := env.GPUs()
	if len(g.GPUs) == 0 || len(g.NICs) == 0 {
		return
	}
	worst, at := sysfs.RelPIX, ""
	for i, gpu := range g.GPUs {
		j := g.Paired[i]
		if j < 0 || g.Matrix[i][j].rel == sysfs.RelUnknown {
			return
		}
		if rel := g.Matrix[i][j].rel; rel >= worst {
			worst, at = rel, gpu.Name+"–"+nicName(g.NICs[j])
		}
	}
	set("gpu_nic_max_distance", worst.String(), fmt.Sprintf("the farthest GPU–NIC pair on this host (%s, of %d GPUs)", at, len(g.GPUs)))
}

// setter adds one key of a generated class.
type setter func(key, value, comment string)

func expectDevice(env *Env, d sysfs.RDMADevice, set setter) {
	if d.FWVer != "" {
		// The version part: a class names the firmware a fleet rolls
		// out; the PSID mlx5 appends identifies the board, kept as a
		// comment (append it to the value to pin the board too).
		comment := ""
		if v := expect.FWVersion(d.FWVer); v != strings.TrimSpace(d.FWVer) {
			comment = "fw_ver " + strings.TrimSpace(d.FWVer)
		}
		set(d.Name+".fw", expect.FWVersion(d.FWVer), comment)
	}
	if fn, ok := physicalFunction(env.Survey(), d.PCIAddr); ok {
		if l := env.Host.PCIPathOf(fn).Function; l.HasCur && l.Cur.Known() && l.CurWidth > 0 {
			speed := l.Cur.Raw
			if expect.PCIeGTs(speed) != l.Cur.GTs {
				speed = l.Cur.Short()
			}
			set(d.Name+".pcie_speed", speed, "")
			set(d.Name+".pcie_width", strconv.Itoa(l.CurWidth), "")
		}
	}
	set(d.Name+".ports", strconv.Itoa(len(d.Ports)), "")
}

// physicalFunction finds the PF behind addr: pci.link judges PFs only (a
// VF's link is its PF's), so a VF gets no PCIe keys.
func physicalFunction(s *Survey, addr string) (sysfs.PCIFunction, bool) {
	for _, n := range s.NICs {
		if addr != "" && n.Fn.Address == addr && n.Fn.PhysFn == "" {
			return n.Fn, true
		}
	}
	return sysfs.PCIFunction{}, false
}

// expectPort writes one port's keys; the MTU is its own netdev's (the
// bond's on a LAG), the PFC priority is read where DCB lives (a LAG's
// slaves, which must agree).
func expectPort(env *Env, pm *PortModel, set, candidate setter) {
	p := pm.Port
	unit := fmt.Sprintf("%s/%d", pm.Device.Dev.Name, p.Num)
	if p.State.Code != portStateActive {
		candidate(unit+".unused", "true", fmt.Sprintf("%s when this file was written: uncomment if the port is unused on purpose", stateText(p)))
		return
	}
	set(unit+".link_layer", p.LinkLayer, "")
	if r, err := sysfs.ParseRate(p.Rate); err == nil {
		set(unit+".rate", strconv.FormatFloat(r.Gbps, 'f', -1, 64), "")
		if r.Width != "" {
			set(unit+".width", r.Width, "")
		}
	}
	if p.LinkLayer != "Ethernet" || pm.Netdev == "" {
		return // an IB port's active MTU is not in sysfs
	}
	if mtu, ok := netdevMTU(env, pm.Netdev); ok {
		set(unit+".mtu", strconv.Itoa(mtu), "MTU of "+pm.Netdev)
	}
	if prio, ok := onePFCPriority(env.Host, pm.DCBNetdevs); ok && pm.Transport == RoCE {
		set(unit+".pfc_priority", strconv.Itoa(prio), "PFC is on this priority only, on "+strings.Join(pm.DCBNetdevs, ", "))
	}
	expectModule(env, pm, unit, candidate) // link_optics.go
}

// onePFCPriority is the priority PFC is on when it is on exactly one, the
// same on every netdev given (a LAG's slaves); false when any differs or
// cannot be read.
func onePFCPriority(h *sysfs.Host, netdevs []string) (int, bool) {
	prio := -1
	for _, nd := range netdevs {
		dcb, err := h.DCB(nd)
		if err != nil || dcb.Err != "" || bits.OnesCount8(dcb.PFCEn) != 1 {
			return 0, false
		}
		p := bits.TrailingZeros8(dcb.PFCEn)
		if prio >= 0 && p != prio {
			return 0, false
		}
		prio = p
	}
	return prio, prio >= 0
}

func netdevMTU(env *Env, name string) (int, bool) {
	nd, ok := env.Netdevs().byName[name]
	return nd.MTU, ok && nd.MTU > 0
}

// expectTrafficClass writes roce_tc when every ACTIVE RoCE port's rdma_cm
// default_roce_tos is readable and the same.
func expectTrafficClass(env *Env, set setter) {
	tos, seen := -1, 0
	for _, d := range env.Survey().Devices {
		for _, p := range d.Ports {
			if p.LinkLayer != "Ethernet" || p.State.Code != portStateActive {
				continue
			}
			v, err := env.Host.DefaultRoCETOS(d.Name, p.Num)
			if err != nil || (seen > 0 && int(v) != tos) {
				return
			}
			tos, seen = int(v), seen+1
		}
	}
	if seen > 0 {
		set("roce_tc", strconv.Itoa(tos), "rdma_cm's default_roce_tos on every RoCE port; set the class your applications use if they set their own")
	}
}

// ExpectDefaults derives a class name and a hosts glob from a host name:
// cx5-node01.example.com gives class cx5-node and hosts cx5-node*.example.com
// (the first label's trailing digits become *), so the file fits the
// node's siblings. An empty host name gives an error: a class that
// matched every host would be a guess (and a name of digits only is kept).
func ExpectDefaults(hostname string) (class string, hosts []string, err error) {
	if hostname == "" {
		return "", nil, errors.New("the host name is unknown: give --class and --hosts")
	}
	label, rest, dotted := strings.Cut(hostname, ".")
	stem := strings.TrimRight(label, "0123456789")
	glob := label
	if stem != label && stem != "" { // a name of digits only stays itself, not "*"
		glob = stem + "*"
	}
	if dotted {
		glob += "." + rest
	}
	class = strings.Map(func(r rune) rune {
		if r < 0x80 && (r == '-' || r == '_' || r == '.' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return r
		}
		return '-'
	}, strings.TrimRight(stem, "-_."))
	if class == "" || !isAlnum(class[0]) {
		class = "node" + class
	}
	return class[:min(len(class), 64)], []string{glob}, nil
}

func isAlnum(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}
