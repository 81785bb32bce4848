package checks

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

func init() {
	register(Check{
		ID: "rdma.devices", Code: 14, Level: 1,
		Title: "every RDMA NIC has registered its device in /sys/class/infiniband",
		Needs: []string{"kernel.modules"},
		Explain: Explanation{
			Judges: "For every RDMA NIC function (PFs and VFs; a VF held by vfio-pci is assigned to a VM and not judged) looks for its RDMA device: <function>/infiniband/<dev> " +
				"or a /sys/class/infiniband entry whose device link points at the function. Software devices (rxe, siw) count for themselves. " +
				"A NIC without a device is named with the reason that can be seen: its driver unbound or a passthrough driver bound, its RDMA module (mlx5_ib, bnxt_re, irdma, …) " +
				"or ib_core not loaded, or the modules loaded and the device still not registered. A PF of an mlx5 RoCE LAG has no device of its own — the LAG's mlx5_bond_N, on the first PF, " +
				"serves the bond — and counts as served. A device the kernel registered (its /sys/class/infiniband_verbs/uverbsN names it) that this network namespace " +
				"does not show is said as such, the namespace first.",
			Why: "The NIC's Ethernet or IPoIB side can work while RDMA does not: without the device there is no uverbs node, libibverbs lists " +
				"nothing and every RDMA application fails with \"no devices found\", however healthy the rest looks.",
			Failures: []Failure{
				{report.Fail, "an RDMA NIC's driver is not bound", "Load and bind the driver (`modprobe mlx5_core`); see pci.device."},
				{report.Fail, "an RDMA NIC (a PF) is bound to vfio-pci or another passthrough driver", "If it is meant for a VM, run rdmadoctor there; otherwise give it back to its driver (see pci.device)."},
				{report.Fail, "the RDMA module of a NIC's driver, or ib_core, is not loaded", "`modprobe <module>` (mlx5_ib, bnxt_re, irdma, …); see kernel.modules."},
				{report.Fail, "the modules are loaded but the NIC registered no RDMA device",
					"Read `dmesg` for the driver's messages (firmware errors, a disabled capability); check the firmware " +
						"(`devlink dev info pci/<addr>`, `mlxfwmanager --query`); for mlx5 the devlink parameters `enable_rdma` (false: no RDMA device) and `enable_roce`, " +
						"and for a VF the PF's `devlink port function set <pci/PF/port> roce enable` (kernel 6.2+); for mlx4 the port types in " +
						"/sys/bus/pci/devices/<addr>/mlx4_port<n> (ib, eth, auto). The port link type in firmware (`mlxconfig -d <addr> query | grep LINK_TYPE`) " +
						"only decides InfiniBand or Ethernet ports, never whether the device registers. On exclusive RDMA netns mode the device may live in another namespace."},
				{report.Fail, "the kernel registered the device but this network namespace does not show it (exclusive RDMA netns mode, a container)",
					"Run in the namespace that holds the device (the host's, a pod with hostNetwork, `nsenter -t 1 -n`), or move it: `rdma dev set <dev> netns <namespace>`; `rdma system show` shows the mode."},
				{report.Fail, "no RDMA device at all", "See pci.device and kernel.modules; for tests `rdma link add rxe0 type rxe netdev <if>`."},
				{report.Error, "/sys/class/infiniband could not be listed", "Run where sysfs is mounted and readable."},
				{report.Fail, "with --expect: the device count, a device's firmware (the version part of fw_ver) or its port count differs from the class's; this blocks no other check",
					"Fix the node (its card, its firmware), or update the line of the expectations file the finding names."},
				{report.Warn, "with --expect: a device or port rule of the class matches nothing on this host (a typo in a device glob)",
					"Fix the rule the warning names (did-you-mean gives the nearest device or port), or remove it; `rdmadoctor expect --check FILE` lists them."},
			},
		},
		Run: runRDMADevices,
	})
}

// deviceLookup is what judging one NIC needs beyond the NIC itself.
type deviceLookup struct {
	h      *sysfs.Host
	model  *HostModel
	byAddr map[string][]string // PCI function → its devices, by the device link
	uverbs map[string][]string // PCI function → devices its uverbs nodes name
	mods   *sysfs.Modules
	modErr error
	netns  string
}

func newDeviceLookup(env *Env) *deviceLookup {
	s, h := env.Survey(), env.Host
	l := &deviceLookup{h: h, model: env.Model(), byAddr: map[string][]string{}, uverbs: map[string][]string{}}
	l.mods, l.modErr = h.ReadModules()
	if m, err := h.RDMASystem(); err == nil {
		l.netns = m.NetnsMode
	}
	for _, d := range s.Devices {
		if d.PCIAddr != "" {
			l.byAddr[d.PCIAddr] = append(l.byAddr[d.PCIAddr], d.Name)
		}
	}
	if us, err := h.UverbsDevices(); err == nil {
		for _, u := range us {
			if u.PCIAddr != "" && u.IBDev != "" {
				l.uverbs[u.PCIAddr] = append(l.uverbs[u.PCIAddr], u.IBDev)
			}
		}
	}
	return l
}

// nicVerdict judges one RDMA NIC function: its devices, or why it has none.
type nicVerdict struct {
	verdict
	ev      map[string]any
	devs    []string
	missing string   // the NIC's address and reason, when it has no device
	hidden  []string // devices the kernel registered that this namespace does not show
}

func (l *deviceLookup) judgeNIC(n NIC) nicVerdict {
	devs := append([]string(nil), n.Fn.RDMADevs...)
	for _, d := range l.byAddr[n.Fn.Address] {
		devs = appendUnique(devs, d)
	}
	sort.Strings(devs)
	desc := n.Fn.Address + " " + n.Product
	if n.Fn.PhysFn != "" {
		desc += " (VF of " + n.Fn.PhysFn + ")"
	}
	ev := map[string]any{"address": n.Fn.Address, "driver": n.Fn.Driver, "devices": nonNil(devs)}
	v := nicVerdict{devs: devs, ev: ev}
	if len(devs) > 0 {
		v.status, v.line = report.Pass, fmt.Sprintf("%s: %s%s", desc, strings.Join(devs, ", "), l.lagNote(devs))
		return v
	}
	if lag := l.lagMember(n); lag != nil {
		ev["lag"] = lag.Dev.Name
		v.status = report.Pass
		v.line = fmt.Sprintf("%s: in RoCE LAG %s (bond %s) — its RDMA device is the LAG's, as mlx5 does for every PF of a LAG", desc, lag.Dev.Name, lag.LAG.Bond)
		return v
	}
	why, fix := l.whyNoDevice(n)
	if l.netns != "shared" {
		v.hidden = l.uverbs[n.Fn.Address]
	}
	ev["reason"] = why
	v.status, v.remedy = report.Fail, fix
	v.line = fmt.Sprintf("%s: NO RDMA DEVICE — %s", desc, why)
	v.missing = n.Fn.Address + " (" + why + ")"
	return v
}

// lagNote names the bond and slaves behind a LAG device.
func (l *deviceLookup) lagNote(devs []string) string {
	for _, d := range l.model.Devices {
		if d.LAG != nil && len(devs) > 0 && d.Dev.Name == devs[0] {
			return fmt.Sprintf(" (RoCE LAG over %s: %s)", d.LAG.Bond, strings.Join(d.LAG.Slaves, ", "))
		}
	}
	return ""
}

// lagMember finds the LAG device a PF without a device belongs to: one of
// its netdevs is a slave of a LAG device's bond, or — when the bond cannot
// be read — an mlx5_bond device sits on another function of the same card.
func (l *deviceLookup) lagMember(n NIC) *DeviceModel {
	for _, nd := range n.Fn.Netdevs {
		if d := l.model.LAGOf(nd); d != nil {
			return d
		}
	}
	card := strings.TrimSuffix(n.Fn.Address, n.Fn.Address[strings.LastIndex(n.Fn.Address, "."):])
	for _, d := range l.model.Devices {
		if d.LAG != nil && strings.HasPrefix(d.Dev.PCIAddr, card+".") && n.Fn.PhysFn == "" {
			return d
		}
	}
	return nil
}

func runRDMADevices(_ context.Context, env *Env) Result {
	s := env.Survey()
	if s.DevicesErr != nil && !sysfs.IsNotExist(s.DevicesErr) {
		r := errorf("could not list the RDMA devices: %v", s.DevicesErr)
		r.Observed, r.Expected = "/sys/class/infiniband unreadable", "a readable /sys/class/infiniband"
		r.Remedy = "Run where /sys is mounted and readable; by hand: `ls -l /sys/class/infiniband` or `rdma link show`."
		return r
	}
	l := newDeviceLookup(env)
	claimed := map[string]bool{} // device names owned by a NIC
	var (
		details, missing, missingAddrs, remedies, hidden []string
		nicEv                                            []map[string]any
	)
	judged := 0
	for _, n := range s.NICs {
		if n.AssignedVF() {
			details = append(details, fmt.Sprintf("%s %s (VF of %s): bound to %s — assigned to a VM, not judged", n.Fn.Address, n.Product, n.Fn.PhysFn, n.Foreign))
			continue
		}
		judged++
		v := l.judgeNIC(n)
		for _, d := range v.devs {
			claimed[d] = true
		}
		nicEv = append(nicEv, v.ev)
		details = append(details, v.line)
		if v.status == report.Fail {
			missing = append(missing, v.missing)
			missingAddrs = append(missingAddrs, n.Fn.Address)
			remedies = appendUnique(remedies, v.remedy)
			hidden = append(hidden, v.hidden...)
		}
	}
	details = append(details, unclaimedDevices(s, claimed)...)
	var names []string
	for _, d := range s.Devices {
		names = append(names, d.Name)
	}
	ev := map[string]any{"devices": nonNil(names), "nics": nicEv, "missing": nonNil(missingAddrs)}
	if l.netns != "" {
		ev["netns_mode"] = l.netns
	}
	expected := "an RDMA device for every RDMA NIC function"
	var r Result
	switch {
	case len(missing) > 0 && len(hidden) == len(missing):
		// The devices exist; this namespace cannot see them.
		r = fail(fmt.Sprintf("%d RDMA device(s) registered by the kernel but not visible in this network namespace (RDMA netns mode %s): %s",
			len(hidden), valueOrUnknown(l.netns), strings.Join(hidden, ", ")))
		r.Observed = fmt.Sprintf("0 of %d device(s) visible here", len(hidden))
		r.Remedy = strings.Join(remedies, "\n")
	case len(missing) > 0:
		r = fail(fmt.Sprintf("%d of %d RDMA NIC function(s) without an RDMA device: %s", len(missing), judged, strings.Join(missing, "; ")))
		r.Observed = fmt.Sprintf("%d device(s) for %d NIC function(s)", judged-len(missing), judged)
		r.Remedy = strings.Join(remedies, "\n")
	case len(s.Devices) == 0:
		r = fail("no RDMA device in /sys/class/infiniband")
		r.Observed = "none"
		if l.netns == "exclusive" {
			details = append(details, "RDMA netns mode is exclusive: a device is visible only inside its own network namespace")
		}
		r.Remedy = "See pci.device and kernel.modules: the NIC, its driver and its RDMA module come first. " +
			"For a test host without an RDMA NIC: `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <interface>`."
	default:
		r = pass(fmt.Sprintf("%d RDMA device(s): %s", len(s.Devices), strings.Join(names, ", ")))
		r.Observed = fmt.Sprintf("%d device(s)", len(s.Devices))
	}
	r.Expected, r.Details, r.Evidence = expected, details, ev
	return withDeviceExpectations(env, s, r)
}

// withDeviceExpectations adds the expectations file's device findings
// (count, firmware, ports per device): each is a fail that cites its key.
// Such a deviation blocks nothing (BlocksNothing): the devices exist and
// work, so a firmware other than the class's must not hide a DOWN port or
// a failing probe behind "blocked by rdma.devices" — each is its own
// finding. A fault of the hardware itself still blocks. Rules that match
// no device or port of the host are a warning naming their lines.
func withDeviceExpectations(env *Env, s *Survey, r Result) Result {
	if env.Expect == nil || r.Status == report.Error {
		return r
	}
	var finds []string
	if f := judgeDeviceCount(env, len(s.Devices)); f != "" {
		finds = append(finds, f)
	}
	for _, d := range s.Devices {
		finds = append(finds, judgeDeviceExpect(env, d)...)
	}
	r.Expected += "; as the expectations class " + env.Expect.Source() + " says"
	r = withUnmatchedRules(env, r)
	if len(finds) == 0 {
		return r
	}
	if r.Status == report.Fail {
		r.Summary += "; " + strings.Join(finds, "; ")
	} else {
		r.Status, r.Summary, r.Observed, r.BlocksNothing = report.Fail, strings.Join(finds, "; "), finds[0], true
	}
	r.Details = append(r.Details, finds...)
	r.Remedy = joinRemedy(r.Remedy, "The node is not built like its class: fix the node (the card, its firmware: `mlxfwmanager`/the vendor's tool), "+
		"or, if it changed on purpose, update the line of the expectations file the finding names.")
	return r
}

// withUnmatchedRules warns of the class's device and port rules that match
// no device or port here: a typo in a device glob would otherwise judge
// nothing, silently. A warning, not a fault: the host is not broken, the
// file is (expect --check refuses it).
func withUnmatchedRules(env *Env, r Result) Result {
	un := env.Expect.Unmatched(ExpectUnits(env))
	if len(un) == 0 {
		return r
	}
	var lines []string
	for _, u := range un {
		lines = append(lines, u.Error())
	}
	r.Details = append(r.Details, lines...)
	msg := fmt.Sprintf("%d expectations rule(s) match nothing on this host: %s", len(un), strings.Join(lines, "; "))
	if r.Status == report.Pass {
		r.Status, r.Summary, r.Observed = report.Warn, msg, lines[0]
	}
	r.Remedy = joinRemedy(r.Remedy, "Fix the device glob or port of the rule the warning names (`rdmadoctor expect --check FILE` lists them), "+
		"or remove the rule if the class has no such device.")
	return r
}

// unclaimedDevices lists the devices no NIC owns: software devices, and
// devices of drivers outside the table; then every device's read problems.
func unclaimedDevices(s *Survey, claimed map[string]bool) []string {
	var soft, other []string
	for _, d := range s.Devices {
		if claimed[d.Name] {
			continue
		}
		if d.Software || d.PCIAddr == "" {
			name := d.Name + " (software"
			if d.Parent != "" {
				name += " on " + d.Parent
			}
			soft = append(soft, name+")")
			continue
		}
		if pf, ok := subFunctionPF(d); ok {
			other = append(other, fmt.Sprintf("%s: mlx5 sub-function %s of %s", d.Name, d.PCIAddr, pf))
			continue
		}
		drv := d.Driver
		if drv == "" {
			drv = "no driver"
		}
		other = append(other, fmt.Sprintf("%s (%s, %s): an RDMA device of a driver outside the table; not judged", d.Name, d.PCIAddr, drv))
	}
	out := append(soft, other...)
	for _, d := range s.Devices {
		for _, p := range d.Problems {
			out = append(out, d.Name+": "+p)
		}
	}
	return out
}

// elsewhere explains a NIC whose device the kernel registered (its uverbs
// node names it) but that this network namespace does not show: the
// namespace comes first, it is the whole cause.
func (l *deviceLookup) elsewhere(n NIC, devs []string) (string, string) {
	names := strings.Join(devs, ", ")
	why := fmt.Sprintf("registered as %s (its uverbs node names it) but not visible in this network namespace", names)
	if l.netns == "exclusive" {
		why += " (RDMA netns mode exclusive)"
	}
	// One text for every hidden device, so the remedy says it once.
	fix := fmt.Sprintf("The devices exist in another network namespace: the RDMA netns mode is %s, so a device is seen only in the namespace that holds it. "+
		"Run rdmadoctor (and the application) in that namespace — on the host, or in a pod with hostNetwork, or `nsenter -t 1 -n` — "+
		"or move the device here from the namespace that holds it: `rdma dev set <device> netns <namespace>`; "+
		"`rdma system show` shows the mode (`rdma system set netns shared`, the default, shows every device everywhere; set it before devices are moved). "+
		"The devices themselves are not broken.", valueOrUnknown(l.netns))
	return why, fix
}

// whyNoDevice tells why a NIC has no RDMA device, and the fix for that reason.
func (l *deviceLookup) whyNoDevice(n NIC) (string, string) {
	addr := n.Fn.Address
	mods, modErr, netns := l.mods, l.modErr, l.netns
	if devs := l.uverbs[addr]; len(devs) > 0 && l.netns != "shared" {
		// Only a namespace hides a registered device, and only in
		// exclusive mode (or where the mode could not be read).
		return l.elsewhere(n, devs)
	}
	if n.Foreign != "" {
		return "bound to " + n.Foreign + " (passthrough), not usable on the host", passthroughFix(n)
	}
	if !n.Bound {
		drv := "its driver"
		if n.Driver != nil {
			drv = n.Driver.PCIDriver
		}
		return "no driver bound (" + drv + ")", fmt.Sprintf("Bind the driver first: `modprobe %s` and read `dmesg` for probe errors (see pci.device).", drv)
	}
	if n.Driver == nil {
		return "driver " + n.Fn.Driver + " is not an RDMA driver", "Bind the function to its RDMA-capable driver."
	}
	if modErr == nil {
		for _, m := range append([]string{"ib_core"}, n.Driver.RDMAModule()) {
			switch mods.State(m) {
			case sysfs.ModuleAbsent:
				return "module " + m + " not loaded", fmt.Sprintf("`modprobe %s` (and add it to /etc/modules-load.d/rdma.conf); see kernel.modules.", m)
			}
		}
	}
	mod := n.Driver.RDMAModule()
	why := mod + " is loaded but registered no RDMA device for this function"
	if modErr != nil {
		why = "no RDMA device registered (modules unknown: " + modErr.Error() + ")"
	}
	var fix strings.Builder
	fmt.Fprintf(&fix, "%s: the RDMA module is loaded and the device still did not register. Read `dmesg | grep -i -e %s -e infiniband` for the driver's reason "+
		"(firmware errors, a capability disabled). Check the firmware (`devlink dev info pci/%s`", addr, strings.TrimSuffix(n.Driver.DevPrefix, "_"), addr)
	switch {
	case n.Driver.PCIDriver == "mlx4_core":
		fix.WriteString(", `mlxfwmanager --query`). ")
		fmt.Fprintf(&fix, "mlx4: each port's type is /sys/bus/pci/devices/%s/mlx4_port<n> (ib, eth or auto): `cat /sys/bus/pci/devices/%s/mlx4_port*`, "+
			"set one with `echo ib > /sys/bus/pci/devices/%s/mlx4_port1` (or eth), or persistently with mlx4_core's port_type_array module option.", addr, addr, addr)
	case n.Driver.Vendor == 0x15b3:
		fmt.Fprintf(&fix, ", `mlxfwmanager --query`). "+
			"mlx5: `devlink dev param show pci/%s name enable_rdma` — false means no RDMA device is created "+
			"(`devlink dev param set pci/%s name enable_rdma value true cmode driverinit && devlink dev reload pci/%s` — the reload restarts the function, "+
			"stopping its Ethernet and RDMA traffic: drain the node first, and never on a bond member); "+
			"with `enable_roce` false an Ethernet port's device has no RoCE (raw Ethernet QPs only).", addr, addr, addr)
		if n.Fn.PhysFn != "" {
			fmt.Fprintf(&fix, " For a VF, the PF's owner can have disabled its RoCE capability: `devlink port show` lists the PF %s's VF ports (eswitch in switchdev mode), "+
				"`devlink port function set pci/%s/<port index> roce enable` turns it back on (kernel 6.2 or newer; set it while the VF is not bound to mlx5_core).",
				n.Fn.PhysFn, n.Fn.PhysFn)
		}
		fmt.Fprintf(&fix, " The port link type in firmware (`mlxconfig -d %s query | grep LINK_TYPE`: LINK_TYPE_P<n> 1 = InfiniBand, 2 = Ethernet) "+
			"decides whether a port is InfiniBand or RoCE, never whether the device registers.", addr)
	default:
		fix.WriteString(") and that RDMA/RoCE is enabled in the NIC's firmware or NVM configuration.")
	}
	fmt.Fprintf(&fix, " Reloading the module retries the registration, on a host that carries no traffic: `modprobe -r %s && modprobe %s`. %s", mod, mod, reloadInterrupts(mod))
	if netns == "exclusive" {
		why += "; RDMA netns mode is exclusive, so the device may exist in another network namespace"
		fix.WriteString(" RDMA netns mode is exclusive: a device moved to another namespace (`rdma dev set <dev> netns <ns>`) is invisible here; run in that namespace or use `rdma system set netns shared`.")
	}
	return why, fix.String()
}
