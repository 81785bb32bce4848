package checks

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// logScope is what kernel.log judges: the RDMA NICs' PCI functions, their
// netdevs (and those a software RDMA device runs over), and the PCIe
// bridges above each NIC up to its root port. A message about any other
// device is only noted: a TX timeout on the management NIC does not stop
// RDMA traffic, and the doctor must not drain a node for it.
type logScope struct {
	units    map[string]string // PCI address or netdev name → the label a finding shows
	netdevOf map[string]string // an RDMA NIC's PCI address → its first netdev, for the fixes' commands
	ifindex  map[int]string    // netdev ifindex → name, for DEVICE=n<ifindex>
	pciNames map[string]bool   // the NICs' PCI addresses, for devlink
}

// newLogScope lists the units from the survey and the model.
func newLogScope(env *Env) *logScope {
	sc := &logScope{units: map[string]string{}, netdevOf: map[string]string{}, ifindex: map[int]string{}, pciNames: map[string]bool{}}
	for _, n := range env.Survey().NICs {
		name := nicName(n)
		label := name
		if name != n.Fn.Address {
			label = fmt.Sprintf("%s (%s)", name, n.Fn.Address)
		}
		sc.units[n.Fn.Address] = label
		sc.pciNames[n.Fn.Address] = true
		for i, nd := range n.Fn.Netdevs {
			sc.units[nd] = fmt.Sprintf("%s (netdev of %s)", nd, name)
			if i == 0 {
				sc.netdevOf[n.Fn.Address] = nd
			}
		}
		for _, hop := range upstreamHops(n.Fn.SysPath) {
			if _, ok := sc.units[hop]; !ok {
				sc.units[hop] = fmt.Sprintf("PCIe port %s (above %s)", hop, name)
			}
		}
	}
	for _, p := range env.Model().Ports {
		for _, nd := range p.Carriers() {
			if nd != "" {
				if _, ok := sc.units[nd]; !ok {
					sc.units[nd] = fmt.Sprintf("%s (netdev of %s)", nd, p.Label)
				}
			}
		}
	}
	for _, nd := range env.Netdevs().list {
		sc.ifindex[nd.Index] = nd.Name
	}
	return sc
}

// upstreamHops are the PCI bridges above a function, nearest first, read
// from its /sys/devices path.
func upstreamHops(sysPath string) []string {
	if !strings.HasPrefix(sysPath, "/sys/devices/") {
		return nil
	}
	var hops []string
	for dir := path.Dir(sysPath); dir != "/sys/devices" && dir != "/" && dir != "."; dir = path.Dir(dir) {
		if b := path.Base(dir); sysfs.IsPCIAddress(b) {
			hops = append(hops, b)
		}
	}
	return hops
}

// textPCIRE finds the PCI address a dev_printk line starts with
// ("mlx5_core 0000:3b:00.0: …"), textNetdevRE the netdev of a
// netdev_printk line ("mlx5_core 0000:3b:00.0 ens1f0np0: …"; a dev_printk
// line's device ends with the colon, so "pcieport 0000:3a:00.0: AER: …"
// names no netdev).
var (
	textPCIRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\S+ (` + pciAddrPattern + `)[: ]`) })
	textNetdevRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\S+ \S*[^\s:] ([^\s:]+): `) })
)

// devicesOf lists the devices a record names, most specific first: those
// the message itself names, the record's DEVICE= dictionary entry, then
// the driver prefix of the line.
func (sc *logScope) devicesOf(r sysfs.KernelRecord, named []string) []string {
	devs := append([]string(nil), named...)
	switch d := r.Device; {
	case strings.HasPrefix(d, "+pci:"):
		devs = append(devs, strings.TrimPrefix(d, "+pci:"))
	case strings.HasPrefix(d, "+net:"):
		devs = append(devs, strings.TrimPrefix(d, "+net:"))
	case strings.HasPrefix(d, "n"):
		if i, err := strconv.Atoi(d[1:]); err == nil && sc.ifindex[i] != "" {
			devs = append(devs, sc.ifindex[i])
		}
	}
	if m := textNetdevRE().FindStringSubmatch(r.Text); m != nil {
		devs = append(devs, m[1])
	}
	if m := textPCIRE().FindStringSubmatch(r.Text); m != nil {
		devs = append(devs, m[1])
	}
	return devs
}

// place decides a record's unit: the first device it names that is in
// scope (its label), else the first it names (inScope false), else the
// host as a whole (no device named: judged, it cannot be ruled out).
func (sc *logScope) place(devs []string) (unit, label string, inScope bool) {
	for _, d := range devs {
		if l, ok := sc.units[d]; ok {
			return d, l, true
		}
	}
	if len(devs) > 0 {
		return devs[0], devs[0], false
	}
	return "", "the host (no device named)", true
}

// netdevWord is the netdev a fix's command names for a unit: the unit
// itself when it is one, an RDMA NIC's first netdev, else a placeholder.
func (sc *logScope) netdevWord(unit string) string {
	if nd, ok := sc.netdevOf[unit]; ok {
		return nd
	}
	if _, ok := sc.units[unit]; ok && unit != "" && !sysfs.IsPCIAddress(unit) {
		return unit
	}
	return "<netdev>"
}
