package checks

import (
	"context"
	"fmt"
	"path/filepath"
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
				"or ib_core not loaded, or the modules loaded and the device still not registered (on a BlueField seen from its host, the fix is the DPU's Arm OS, " +
				"never a reload on the host). A PF of an mlx5 RoCE LAG has no device of its own — the LAG's mlx5_bond_N, on the first PF, " +
				"serves the bond — and counts as served. A device the kernel registered (its /sys/class/infiniband_verbs/uverbsN names it) that this network namespace " +
				"does not show is said as such, the namespace first; in RDMA netns mode exclusive, when this namespace holds devices of its own (a pod given a VF's " +
				"device by the RDMA CNI), the devices other namespaces hold are listed, not judged.",
			Why: "The NIC's Ethernet or IPoIB side can work while RDMA does not: without the device there is no uverbs node, libibverbs lists " +
				"nothing and every RDMA application fails with \"no devices found\", however healthy the rest looks.",
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
	// uverbsRead: the uverbs class was listed. It is not namespaced, so a
	// function none of its nodes names has no device in any namespace.
	uverbsRead bool
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
		l.uverbsRead = true
		for _, u := range us {
			if u.PCIAddr != "" && u.IBDev != "" {
				l.uverbs[u.PCIAddr] = append(l.uverbs[u.PCIAddr], u.IBDev)
			}
		}
	}
	return l
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

// rdma.devices' findings. A NIC function's finding is about its PCI
// address; its line in the report is "<address> <product>: NO RDMA DEVICE
// — <message>". A fix names every function that has the same finding
// ({functions}) and is written once: {addr} is the function's address
// when the finding is about one function, "<address>" when about several
// (shareFixSlots), so two functions with one cause get one fix.
var (
	devicesUnreadable = declare(Finding{ID: "rdma.devices/unreadable", Status: report.Error,
		When:    "/sys/class/infiniband could not be listed",
		Message: "could not list the RDMA devices: {cause}",
		Fix:     "Run where /sys is mounted and readable; by hand: `ls -l /sys/class/infiniband` or `rdma link show`."})
	devicesNone = declare(Finding{ID: "rdma.devices/none", Status: report.Fail,
		When:    "no RDMA device at all, and no RDMA NIC function that lacks one",
		Message: "no RDMA device in /sys/class/infiniband",
		Fix: "See pci.device and kernel.modules: the NIC, its driver and its RDMA module come first. " +
			"For a test host without an RDMA NIC: `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <interface>`."})
	devicesRegistered = declare(Finding{ID: "rdma.devices/registered", Status: report.Pass,
		When:    "an RDMA NIC function has registered its RDMA device (an mlx5 RoCE LAG's device is named with its bond)",
		Message: "{devices}{lag}"})
	devicesLAGMember = declare(Finding{ID: "rdma.devices/lag-member", Status: report.Pass,
		When:    "a PF of an mlx5 RoCE LAG has no device of its own: the LAG's mlx5_bond_N, on the first PF, serves the bond",
		Message: "in RoCE LAG {lag} (bond {bond}) — its RDMA device is the LAG's, as mlx5 does for every PF of a LAG"})
	devicesSoftware = declare(Finding{ID: "rdma.devices/software", Status: report.Pass,
		When:    "a software RDMA device (rxe, siw): it counts for itself",
		Message: "software RDMA device{on}"})
	devicesSubFunction = declare(Finding{ID: "rdma.devices/sub-function", Status: report.Pass,
		When:    "an mlx5 sub-function's RDMA device: it belongs to its PF",
		Message: "mlx5 sub-function {sf} of {pf}"})
	devicesOtherDriver = declare(Finding{ID: "rdma.devices/other-driver", Status: report.Skip,
		When:    "an RDMA device of a PCI driver outside the driver table: not judged",
		Message: "an RDMA device of a driver outside the table ({address}, {driver}); not judged"})
	devicesAssignedVF = declare(Finding{ID: "rdma.devices/assigned-vf", Status: report.Skip,
		When:    "a VF held by vfio-pci (or another passthrough driver) is assigned to a VM: not judged",
		Message: "bound to {foreign} — assigned to a VM, not judged"})
	devicesOtherNetns = declare(Finding{ID: "rdma.devices/other-netns", Status: report.Fail,
		When: "the kernel registered the function's device (its /sys/class/infiniband_verbs/uverbsN names it) but this network namespace " +
			"does not show it (exclusive RDMA netns mode, a container)",
		Message: "registered as {devices} (its uverbs node names it) but not visible in this network namespace{mode}",
		Fix: "The devices exist in another network namespace: the RDMA netns mode is {netns}, so a device is seen only in the namespace that holds it. " +
			"Run rdmadoctor (and the application) in that namespace — on the host, or in a pod with hostNetwork, or `nsenter -t 1 -n` — " +
			"or move the device here from the namespace that holds it: `rdma dev set <device> netns <namespace>` (in Kubernetes the RDMA CNI plugin, " +
			"`rdma` after `sriov` in the network's CNI chain, moves a VF's device into the pod); " +
			"`rdma system show` shows the mode (`rdma system set netns shared`, the default, shows every device everywhere; set it before devices are moved). " +
			"The devices themselves are not broken."})
	devicesHeldElsewhere = declare(Finding{ID: "rdma.devices/held-by-other-netns", Status: report.Skip,
		When: "RDMA netns mode exclusive and this namespace holds RDMA devices of its own: a function whose device another namespace holds " +
			"(its uverbs node names it) belongs to that namespace (the host's, another pod's): not judged",
		Message: "registered as {devices}, held by another network namespace{mode}: not judged here"})
	devicesPassthrough = declare(Finding{ID: "rdma.devices/passthrough", Status: report.Fail,
		When:    "an RDMA NIC function (a PF) is bound to vfio-pci or another passthrough driver",
		Message: "bound to {foreign} (passthrough), not usable on the host",
		Fix: "{functions}: bound to {foreign}, reserved for a VM (or a user-space driver such as DPDK); the host cannot use it for RDMA. " +
			"If that is intended, run rdmadoctor inside the VM instead. Otherwise give it back to {driver}: `driverctl unset-override {addr}` when driverctl set it; " +
			"else `echo {addr} > /sys/bus/pci/devices/{addr}/driver/unbind; echo > /sys/bus/pci/devices/{addr}/driver_override; echo {addr} > /sys/bus/pci/drivers_probe`, " +
			"and remove what binds it at boot (a `vfio-pci.ids={ids}` kernel parameter or an `options vfio-pci ids=` line in /etc/modprobe.d)."})
	devicesUnbound = declare(Finding{ID: "rdma.devices/driver-unbound", Status: report.Fail,
		When:    "an RDMA NIC's driver is not bound",
		Message: "no driver bound ({driver})",
		Fix:     "Bind the driver first: `modprobe {driver}` and read `dmesg` for probe errors (see pci.device)."})
	devicesModuleMissing = declare(Finding{ID: "rdma.devices/module-missing", Status: report.Fail,
		When:    "the RDMA module of the function's driver (mlx5_ib, bnxt_re, irdma, …), or ib_core, is not loaded",
		Message: "module {module} not loaded",
		Fix:     "`modprobe {module}` (and add it to /etc/modules-load.d/rdma.conf); see kernel.modules."})
	devicesNotRegistered = declare(Finding{ID: "rdma.devices/not-registered", Status: report.Fail,
		When:    "the modules are loaded but the function registered no RDMA device",
		Message: notRegisteredMessage,
		Fix:     notRegisteredHead + ") and that RDMA/RoCE is enabled in the NIC's firmware or NVM configuration." + notRegisteredTail})
	devicesNotRegisteredMLX4 = declare(Finding{ID: "rdma.devices/not-registered-mlx4", Status: report.Fail,
		When:    "the same, on an mlx4 function (ConnectX-3): its ports' types decide what registers",
		Message: notRegisteredMessage,
		Fix: notRegisteredHead + ", `mlxfwmanager --query`). mlx4: each port's type is /sys/bus/pci/devices/{addr}/mlx4_port<n> (ib, eth or auto): " +
			"`cat /sys/bus/pci/devices/{addr}/mlx4_port*`, set one with `echo ib > /sys/bus/pci/devices/{addr}/mlx4_port1` (or eth), " +
			"or persistently with mlx4_core's port_type_array module option." + notRegisteredTail})
	devicesNotRegisteredMLX5 = declare(Finding{ID: "rdma.devices/not-registered-mlx5", Status: report.Fail,
		When:    "the same, on an mlx5 function: the devlink parameter enable_rdma decides whether it registers",
		Message: notRegisteredMessage,
		Fix:     notRegisteredHead + mlx5NotRegistered + mlx5LinkType + notRegisteredTail})
	devicesNotRegisteredMLX5VF = declare(Finding{ID: "rdma.devices/not-registered-mlx5-vf", Status: report.Fail,
		When:    "the same, on an mlx5 VF: the PF's owner may have disabled the VF's RoCE capability (kernel 6.2+)",
		Message: notRegisteredMessage,
		Fix: notRegisteredHead + mlx5NotRegistered +
			" For a VF, the PF's owner can have disabled its RoCE capability: `devlink port show` lists the PF {pf}'s VF ports (eswitch in switchdev mode), " +
			"`devlink port function set pci/{pf}/<port index> roce enable` turns it back on (kernel 6.2 or newer; set it while the VF is not bound to mlx5_core)." +
			mlx5LinkType + notRegisteredTail})
	devicesNotRegisteredBlueField = declare(Finding{ID: "rdma.devices/not-registered-bluefield", Status: report.Fail,
		When: "the same, on a BlueField DPU's function seen from its host: in DPU mode the DPU's Arm OS owns the function's capabilities, " +
			"so no reload on this host changes them",
		Message: notRegisteredMessage,
		Fix: "{functions}: this is a BlueField DPU's function. In DPU mode (the default) its Arm OS owns the function: there, " +
			"`devlink port show` lists this host's PF as an external controller's port (c1pf0, netdev pf0hpf) and " +
			"`devlink port function set <that port> roce enable` gives it RoCE back; " +
			"`mlxconfig -d {addr} query INTERNAL_CPU_OFFLOAD_ENGINE` says the mode (0 DPU mode, 1 NIC mode). " +
			"Read `dmesg | grep -i -e {prefix} -e infiniband` on this host for the driver's reason. In NIC mode the host owns the function as a ConnectX: " +
			"see `rdmadoctor explain rdma.devices/not-registered-mlx5`.{netns_fix}"})
	devicesModulesUnknown = declare(Finding{ID: "rdma.devices/not-registered-modules-unknown", Status: report.Fail,
		When:    "the function registered no RDMA device and the loaded modules could not be read to say why",
		Message: "no RDMA device registered (modules unknown: {cause}){netns_note}",
		Fix:     notRegisteredHead + ") and that RDMA/RoCE is enabled in the NIC's firmware or NVM configuration." + notRegisteredTail})

	devicesCountDeviates = declare(Finding{ID: "rdma.devices/count-deviates", Status: report.Fail,
		When:    "with --expect: the number of RDMA devices is not the class's devices; this blocks no other check",
		Message: "{count} RDMA device(s), expected {want} by {cite}", Fix: devicesExpectFix})
	devicesFWDeviates = declare(Finding{ID: "rdma.devices/fw-deviates", Status: report.Fail,
		When:    "with --expect: a device's firmware (the version part of fw_ver) is not the class's fw; this blocks no other check",
		Message: "{device} firmware {fw}, expected {want} by {cite}", Fix: devicesExpectFix})
	devicesFWUnknown = declare(Finding{ID: "rdma.devices/fw-unknown", Status: report.Fail,
		When:    "with --expect: the class names a firmware and the device has no readable fw_ver; this blocks no other check",
		Message: "{device} firmware unknown (no readable fw_ver), expected {want} by {cite}", Fix: devicesExpectFix})
	devicesPortsDeviate = declare(Finding{ID: "rdma.devices/ports-deviate", Status: report.Fail,
		When:    "with --expect: a device's port count is not the class's ports; this blocks no other check",
		Message: "{device} has {ports} port(s), expected {want} by {cite}", Fix: devicesExpectFix})
	devicesPresent = declare(Finding{ID: "rdma.devices/present", Status: report.Pass,
		When:    "no RDMA NIC function lacks its RDMA device, and the host has RDMA devices",
		Message: "{count} RDMA device(s): {devices}"})
	devicesRuleUnmatched = declare(Finding{ID: "rdma.devices/rule-unmatched", Status: report.Warn,
		When:    "with --expect: a device or port rule of the class matches nothing on this host (a typo in a device glob)",
		Message: "{site} {key}: {rule} {reason}{nearest}",
		Fix: "Fix the device glob or port of the rule the warning names (`rdmadoctor expect --check FILE` lists them), " +
			"or remove the rule if the class has no such device."})
)

// The parts of the not-registered fixes: what every driver shares, then
// mlx5's devlink parameters and its firmware link type.
const (
	notRegisteredMessage = "{module} is loaded but registered no RDMA device for this function{netns_note}"
	notRegisteredHead    = "{functions}: the RDMA module is loaded and the device still did not register. Read `dmesg | grep -i -e {prefix} -e infiniband` " +
		"for the driver's reason (firmware errors, a capability disabled). Check the firmware (`devlink dev info pci/{addr}`"
	notRegisteredTail = " Reloading the module retries the registration, on a host that carries no traffic: `modprobe -r {module} && modprobe {module}`. " +
		"{reload}{netns_fix}"
	mlx5NotRegistered = ", `mlxfwmanager --query`). mlx5: `devlink dev param show pci/{addr} name enable_rdma` — false means no RDMA device is created " +
		"(`devlink dev param set pci/{addr} name enable_rdma value true cmode driverinit && devlink dev reload pci/{addr}` — the reload restarts the function, " +
		"stopping its Ethernet and RDMA traffic: drain the node first, and never on a bond member); " +
		"with `enable_roce` false an Ethernet port's device has no RoCE (raw Ethernet QPs only)."
	mlx5LinkType = " The port link type in firmware (`mlxconfig -d {addr} query | grep LINK_TYPE`: LINK_TYPE_P<n> 1 = InfiniBand, 2 = Ethernet) " +
		"decides whether a port is InfiniBand or RoCE, never whether the device registers."
	devicesExpectFix = "The node is not built like its class: fix the node (the card, its firmware: `mlxfwmanager`/the vendor's tool), " +
		"or, if it changed on purpose, update the line of the expectations file the finding names."
)

func runRDMADevices(_ context.Context, env *Env) Result {
	s := env.Survey()
	if s.DevicesErr != nil && !sysfs.IsNotExist(s.DevicesErr) {
		r := devicesUnreadable.result("", Slots{"cause": s.DevicesErr.Error()})
		r.Observed, r.Expected = "/sys/class/infiniband unreadable", "a readable /sys/class/infiniband"
		return r
	}
	l := newDeviceLookup(env)
	var units []nicUnit
	for _, n := range s.NICs {
		units = append(units, l.judgeNIC(n))
	}
	shareFixSlots(units)
	claimed := map[string]bool{} // device names owned by a NIC
	for i := range units {
		for _, d := range units[i].devs {
			claimed[d] = true
		}
		units[i].finding = units[i].f.At(units[i].addr, units[i].slots)
	}
	r := devicesResult(s, l, units)
	other, details := unclaimedDevices(s, claimed)
	r.Findings = append(r.Findings, other...)
	r.Details = append(r.Details, details...)
	return withDeviceExpectations(env, s, r)
}

// rdma.devices's headlines: the summary over the NIC functions judged.
const (
	devicesHiddenHead    headline = "{count} RDMA device(s) registered by the kernel but not visible in this network namespace (RDMA netns mode {mode}): {devices}"
	devicesMissingHead   headline = "{count} of {judged} RDMA NIC function(s) without an RDMA device: {missing}"
	devicesUnmatchedHead headline = "{count} expectations rule(s) match nothing on this host: {rules}"
)

// devicesResult combines the NIC functions' findings: the functions
// without a device fail the check, the summary names each with its
// reason; with none missing, the devices are counted.
func devicesResult(s *Survey, l *deviceLookup, units []nicUnit) Result {
	var (
		r                             Result
		missing, missingAddrs, remedy []string
		hidden                        []string
		nicEv                         []map[string]any
	)
	judged := 0
	for _, u := range units {
		r.Findings = append(r.Findings, u.finding)
		r.Details = append(r.Details, u.line())
		if u.f.Status == report.Skip {
			continue
		}
		judged++
		nicEv = append(nicEv, u.ev)
		if u.f.Status == report.Fail {
			missing = append(missing, u.addr+" ("+u.finding.Message+")")
			missingAddrs = append(missingAddrs, u.addr)
			remedy = appendUnique(remedy, u.finding.Fix)
			hidden = append(hidden, u.hidden...)
		}
	}
	var names []string
	for _, d := range s.Devices {
		names = append(names, d.Name)
	}
	r.Evidence = map[string]any{"devices": nonNil(names), "nics": nicEv, "missing": nonNil(missingAddrs)}
	if l.netns != "" {
		r.Evidence["netns_mode"] = l.netns
	}
	r.Expected = "an RDMA device for every RDMA NIC function"
	switch {
	case len(missing) > 0 && len(hidden) == len(missing):
		// The devices exist; this namespace cannot see them.
		r.Status, r.Summary = report.Fail, devicesHiddenHead.render(Slots{"count": fmt.Sprint(len(hidden)),
			"mode": valueOrUnknown(l.netns), "devices": strings.Join(hidden, ", ")})
		r.Observed = fmt.Sprintf("0 of %d device(s) visible here", len(hidden))
	case len(missing) > 0:
		r.Status, r.Summary = report.Fail, devicesMissingHead.render(Slots{"count": fmt.Sprint(len(missing)), "judged": fmt.Sprint(judged), "missing": strings.Join(missing, "; ")})
		r.Observed = fmt.Sprintf("%d device(s) for %d NIC function(s)", judged-len(missing), judged)
	case len(s.Devices) == 0:
		none := devicesNone.At("", nil)
		r.Findings = append(r.Findings, none)
		r.Status, r.Summary, r.Observed, remedy = none.Status, none.Message, "none", []string{none.Fix}
		if l.netns == "exclusive" {
			r.Details = append(r.Details, "RDMA netns mode is exclusive: a device is visible only inside its own network namespace")
		}
	default:
		// The devices are the verdict: the functions' own findings may
		// all be skips (assigned VFs, drivers outside the table).
		present := devicesPresent.At("", Slots{"count": fmt.Sprint(len(s.Devices)), "devices": strings.Join(names, ", ")})
		r.Findings = append(r.Findings, present)
		r.Status, r.Summary = present.Status, present.Message
		r.Observed = fmt.Sprintf("%d device(s)", len(s.Devices))
	}
	r.Remedy = strings.Join(remedy, "\n")
	return r
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
	finds := judgeDeviceCount(env, len(s.Devices))
	for _, d := range s.Devices {
		finds = append(finds, judgeDeviceExpect(env, d)...)
	}
	r.Expected += "; as the expectations class " + env.Expect.Source() + " says"
	r = withUnmatchedRules(env, r)
	if len(finds) == 0 {
		return r
	}
	var texts []string
	for _, f := range finds {
		texts = append(texts, f.Message)
	}
	if r.Status == report.Fail {
		r.Summary += "; " + strings.Join(texts, "; ")
	} else {
		r.Status, r.Summary, r.Observed, r.BlocksNothing = report.Fail, strings.Join(texts, "; "), texts[0], true
	}
	r.Findings = append(r.Findings, finds...)
	r.Details = append(r.Details, texts...)
	r.Remedy = joinRemedy(r.Remedy, devicesExpectFix)
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
		where := "expectations"
		if u.File != "" {
			where = filepath.Base(u.File)
		}
		nearest := ""
		if u.Nearest != "" {
			nearest = " (did you mean " + u.Nearest + "?)"
		}
		f := devicesRuleUnmatched.At("", Slots{"site": fmt.Sprintf("%s:%d", where, u.Line), "key": u.Key, "rule": u.Rule,
			"reason": u.Reason, "nearest": nearest})
		r.Findings = append(r.Findings, f)
		lines = append(lines, f.Message)
	}
	r.Details = append(r.Details, lines...)
	if r.Status == report.Pass {
		r.Status, r.Observed = report.Warn, lines[0]
		r.Summary = devicesUnmatchedHead.render(Slots{"count": fmt.Sprint(len(un)), "rules": strings.Join(lines, "; ")})
	}
	r.Remedy = joinRemedy(r.Remedy, devicesRuleUnmatched.Fix)
	return r
}

// unclaimedDevices judges the devices no NIC owns: software devices, mlx5
// sub-functions, and devices of drivers outside the table (not judged);
// the detail lines add every device's read problems.
func unclaimedDevices(s *Survey, claimed map[string]bool) ([]report.Finding, []string) {
	var soft, other []report.Finding
	for _, d := range s.Devices {
		if claimed[d.Name] {
			continue
		}
		if d.Software || d.PCIAddr == "" {
			on := ""
			if d.Parent != "" {
				on = " on " + d.Parent
			}
			soft = append(soft, devicesSoftware.At(d.Name, Slots{"on": on}))
			continue
		}
		if pf, ok := subFunctionPF(d); ok {
			other = append(other, devicesSubFunction.At(d.Name, Slots{"sf": d.PCIAddr, "pf": pf}))
			continue
		}
		drv := d.Driver
		if drv == "" {
			drv = "no driver"
		}
		other = append(other, devicesOtherDriver.At(d.Name, Slots{"address": d.PCIAddr, "driver": drv}))
	}
	fs := append(soft, other...)
	var out []string
	for _, f := range fs {
		out = append(out, f.Unit+": "+f.Message)
	}
	for _, d := range s.Devices {
		for _, p := range d.Problems {
			out = append(out, d.Name+": "+p)
		}
	}
	return fs, out
}
