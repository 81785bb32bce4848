package checks

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// UverbsClass lists the user-verbs devices the kernel created (ib_uverbs).
const UverbsClass = "/sys/class/infiniband_verbs"

func init() {
	register(Check{
		ID: "uverbs.nodes", Code: 15, Level: 1,
		Title:      "each RDMA device has its uverbs device and a /dev/infiniband node this user can open",
		Needs:      []string{"rdma.devices"},
		Privileges: []Need{needUverbsNodes},
		Explain: Explanation{
			Judges: "For every RDMA device finds its /sys/class/infiniband_verbs/uverbsN (the one whose ibdev names it), then checks " +
				"/dev/infiniband/uverbsN: it exists, is a character device, carries the device number the kernel gave uverbsN (its \"dev\" " +
				"attribute), and opens read-write for the running user (opened and closed at once; no verbs resources are created). " +
				"In a fixture or snapshot the node facts come from the facts file's dev_nodes. /dev/infiniband/rdma_cm is checked the same way when rdma_ucm is loaded (warn only).",
			Why: "libibverbs talks to the kernel only through /dev/infiniband/uverbsN. Without the node — the common case in a container " +
				"the device was not passed into — or without permission to open it, ibv_get_device_list returns an empty list and every " +
				"application reports \"no RDMA devices\" although the kernel has them.",
		},
		Run: runUverbsNodes,
	})
}

// uverbsModeFix is the fix for a uverbs node the user cannot open. The
// kernel creates /dev/infiniband/uverbsN with mode 0666 (ib_uverbs'
// uverbs_devnode), so a tighter mode is a local udev rule's doing.
const uverbsModeFix = "The kernel creates /dev/infiniband/uverbsN with mode 0666; a tighter mode means a local udev rule overrode it: " +
	"find the rule that tightened it (`grep -rn uverbs /etc/udev/rules.d /usr/lib/udev/rules.d`) or add " +
	"`SUBSYSTEM==\"infiniband_verbs\", KERNEL==\"uverbs*\", MODE=\"0666\"` (or `GROUP=\"rdma\", MODE=\"0660\"` with the user in that group) " +
	"in /etc/udev/rules.d/90-rdma-uverbs.rules, then `udevadm control --reload && udevadm trigger --subsystem-match=infiniband_verbs`."

// uverbsUnregisteredFix is the fix for an RDMA device without a uverbs
// device although ib_uverbs is loaded: first the log and a second look (a
// device still registering gets it within seconds), and only then, on a
// host that carries no traffic, re-registering the device (step, from
// reregisterStep). Reloading ib_uverbs would not do: the drivers' RDMA
// modules use it, so modprobe -r refuses.
func uverbsUnregisteredFix(step string) string {
	return "Read the kernel log (`dmesg | grep -i -e uverbs -e infiniband`) and run the check again: a device that is still registering gets its uverbsN within seconds. " +
		"If it stays without one and the host carries no traffic, " + step
}

// uverbsGoneFix is the fix for a uverbs node whose device went away (a
// firmware reset, a hot-unplug, a driver reset in progress).
func uverbsGoneFix(step string) string {
	return "The device behind the node went away: read `dmesg` for a firmware reset, a health recovery or a hot-unplug; mlx5 and most drivers register the device " +
		"again when their recovery ends, and udev recreates the node — run the check again. If it does not come back and the host carries no traffic, " + step
}

// genericReregister is reregisterStep when the device is not known.
var genericReregister = "re-register the device: reload the driver's RDMA module (mlx5_ib, bnxt_re, irdma, …), or for a software device " +
	"`rdma link delete <dev>` and `rdma link add <dev> type rxe|siw netdev <netdev>`. " + reloadInterrupts("")

// reregisterStep says how to make the kernel register d again: a software
// device (rxe, siw) is deleted and added again with rdma link — reloading
// its module would delete it for good; a NIC's by reloading its driver's
// RDMA module, with what that interrupts.
func reregisterStep(d sysfs.RDMADevice, mods *sysfs.Modules) string {
	drv := driverOfDevice(d, mods)
	switch {
	case drv == nil:
		return genericReregister
	case drv.Software:
		netdev := d.Parent
		if netdev == "" {
			netdev = "<netdev>"
		}
		return fmt.Sprintf("re-create the software device: `rdma link delete %s && rdma link add %s type %s netdev %s` — "+
			"its connections and registered memory end; the netdev and its IP traffic stay.", d.Name, d.Name, drv.Provider, netdev)
	}
	m := drv.RDMAModule()
	return fmt.Sprintf("re-register the device by reloading %s (`modprobe -r %s && modprobe %s`). %s", m, m, m, reloadInterrupts(m))
}

// uverbs.nodes' findings, each about an RDMA device (the unit) or, for
// rdma_cm, the node. The container's and udev's fixes name every missing
// node at once ({device_flags}, {mknod}), so they are said once however
// many nodes are missing.
var (
	uverbsNoDevice = declare(Finding{ID: "uverbs.nodes/no-device", Status: report.Fail,
		When:    "there is no RDMA device, so no uverbs device to open",
		Message: "no RDMA device, so no uverbs device to open",
		Fix:     "See rdma.devices: the RDMA device comes first; ib_uverbs then creates its uverbsN."})
	uverbsClassUnreadable = declare(Finding{ID: "uverbs.nodes/class-unreadable", Status: report.Error,
		When:    "/sys/class/infiniband_verbs could not be listed",
		Message: "could not list the uverbs devices: {cause}",
		Fix:     "Run where /sys is mounted and readable; by hand: `ls -l {class}` and `ls -l /dev/infiniband`."})
	uverbsEntryUnreadable = declare(Finding{ID: "uverbs.nodes/entry-unreadable", Status: report.Error,
		When:    "the class's entries could not be read, so the device's uverbs device cannot be told",
		Message: "its uverbs device cannot be told: {cause}", Fix: uverbsByHand})
	uverbsModuleMissing = declare(Finding{ID: "uverbs.nodes/ib-uverbs-missing", Status: report.Fail,
		When:    "an RDMA device has no uverbs device: ib_uverbs is not loaded",
		Message: "no uverbs device in {class}: ib_uverbs is not loaded",
		Fix:     "`modprobe ib_uverbs` and add ib_uverbs to /etc/modules-load.d/rdma.conf so it loads at boot."})
	uverbsUnregistered = declare(Finding{ID: "uverbs.nodes/unregistered", Status: report.Fail,
		When: "an RDMA device has no uverbs device although ib_uverbs is loaded",
		Message: "no uverbs device in {class} although ib_uverbs is loaded " +
			"(the device is still registering, or ib_uverbs failed to add it: see dmesg)",
		Fix: uverbsUnregisteredFix("{reregister}")})
	uverbsNodeOK = declare(Finding{ID: "uverbs.nodes/ok", Status: report.Pass,
		When:    "the node is a character device with the kernel's number and opens read-write",
		Message: "char {dev}, mode {mode}, opens for {user}"})
	uverbsNodeUnreadable = declare(Finding{ID: "uverbs.nodes/node-unreadable", Status: report.Error,
		When:    "the node, or the facts file's dev_nodes in a snapshot, could not be read",
		Message: "could not look at the node: {cause}", Fix: uverbsByHand})
	uverbsContainerMissing = declare(Finding{ID: "uverbs.nodes/missing-in-container", Status: report.Fail,
		When:    "/dev/infiniband/uverbsN is missing in a container",
		Message: "missing in this container",
		Fix: "This runs in a container without the RDMA device nodes. Pass them in: `docker run {device_flags} --device=/dev/infiniband/rdma_cm …` " +
			"(or `--device=/dev/infiniband` for all), together with `--cap-add=IPC_LOCK --ulimit memlock=-1` " +
			"for memory registration; on Kubernetes request the devices through an RDMA device plugin (e.g. k8s-rdma-shared-dev-plugin) " +
			"or mount /dev/infiniband into a privileged pod.{netns_note}"})
	uverbsNodeMissing = declare(Finding{ID: "uverbs.nodes/node-missing", Status: report.Fail,
		When:    "/dev/infiniband/uverbsN is missing on the host although the kernel has the uverbs device",
		Message: "{node} is missing although the kernel has {uverbs} ({dev})",
		Fix: "udev did not create the node(s): `udevadm trigger --subsystem-match=infiniband_verbs` (check that systemd-udevd runs: " +
			"`systemctl status systemd-udevd`). Nothing needs reloading: the kernel's uverbs devices exist, only their nodes are missing.{mknod}"})
	uverbsNotChar = declare(Finding{ID: "uverbs.nodes/not-char", Status: report.Fail,
		When:    "the node is not a character device",
		Message: "{node} is a {type}, not a character device",
		Fix:     "Remove {node} and let udev recreate it (`udevadm trigger --subsystem-match=infiniband_verbs`); in a container pass the host's node with `--device`."})
	uverbsStale = declare(Finding{ID: "uverbs.nodes/stale", Status: report.Fail,
		When:    "the node has another device number than the kernel's uverbsN (a stale node)",
		Message: "{node} is char {got} but the kernel's {uverbs} is {dev}: a stale node, it reaches another device or none",
		Fix: "Remove the stale node and let udev recreate it (`udevadm trigger --subsystem-match=infiniband_verbs`); " +
			"in a container, pass the host's current node instead of a copied /dev."})
	uverbsOtherNetns = declare(Finding{ID: "uverbs.nodes/other-netns", Status: report.Fail,
		When:    "the node does not open (EPERM) while the RDMA subsystem is in exclusive netns mode: the device belongs to another network namespace",
		Message: "{node} does not open for {user}: EPERM — the RDMA subsystem is in exclusive netns mode and {device} belongs to another network namespace",
		Fix:     exclusiveNetnsFix("{device}")})
	uverbsDenied = declare(Finding{ID: "uverbs.nodes/permission-denied", Status: report.Fail,
		When:    "the node does not open for this user (permission denied)",
		Message: "{node} does not open for {user}: permission denied (mode {mode}, owner {owner})",
		Fix:     uverbsModeFix + " In a container the node's permissions come from the host (and from the device cgroup: `--device` grants rw)."})
	uverbsGone = declare(Finding{ID: "uverbs.nodes/device-gone", Status: report.Fail,
		When:    "the node does not open: no live device behind it (ENXIO, ENODEV, EIO)",
		Message: "{node} does not open: {errno} (no live device behind it)",
		Fix:     uverbsGoneFix("{reregister}")})
	uverbsOpenFails = declare(Finding{ID: "uverbs.nodes/open-fails", Status: report.Fail,
		When:    "the node does not open for another reason",
		Message: "{node} does not open for {user}: {errno}",
		Fix:     "Read `dmesg` for uverbs errors; check the node's permissions and, in a container, its device cgroup (`--device`)."})
	uverbsCMMissing = declare(Finding{ID: "uverbs.nodes/rdma-cm-missing", Status: report.Warn,
		When:    "rdma_ucm is loaded but /dev/infiniband/rdma_cm is missing",
		Message: "{node} is missing (rdma_ucm is loaded): librdmacm connections fail", Fix: rdmaCMFix})
	uverbsCMNotChar = declare(Finding{ID: "uverbs.nodes/rdma-cm-not-char", Status: report.Warn,
		When:    "rdma_ucm is loaded but /dev/infiniband/rdma_cm is not a character device",
		Message: "{node} is a {type}, not a character device", Fix: rdmaCMFix})
	uverbsCMNoOpen = declare(Finding{ID: "uverbs.nodes/rdma-cm-no-open", Status: report.Warn,
		When:    "rdma_ucm is loaded but /dev/infiniband/rdma_cm does not open",
		Message: "{node} does not open for {user}: {errno}", Fix: rdmaCMFix})
)

// uverbsByHand says how to look at the class and the nodes without rdmadoctor.
const uverbsByHand = "Run where /dev and /sys are readable; a snapshot must record dev_nodes for /dev/infiniband. " +
	"By hand: `grep . /sys/class/infiniband_verbs/uverbs*/{ibdev,dev}` and `ls -l /dev/infiniband` (each uverbsN a character device with the same major:minor)."

// rdmaCMFix is the fix for an unusable /dev/infiniband/rdma_cm.
const rdmaCMFix = "librdmacm needs /dev/infiniband/rdma_cm: let udev create it (`udevadm trigger`), pass it into a container (`--device=/dev/infiniband/rdma_cm`), " +
	"or give the user access (udev rule `KERNEL==\"rdma_cm\", MODE=\"0666\"`)."

// uverbsEntry is one /sys/class/infiniband_verbs/uverbsN.
type uverbsEntry struct {
	name, ibdev, dev string
}

func runUverbsNodes(_ context.Context, env *Env) Result {
	s := env.Survey()
	h := env.Host
	if len(s.Devices) == 0 {
		r := uverbsNoDevice.result("", nil)
		r.Observed, r.Expected = "no RDMA device", "a uverbs node per RDMA device"
		return r
	}
	byDev, classProblems, err := readUverbsClass(h)
	if err != nil {
		r := uverbsClassUnreadable.result("", Slots{"cause": err.Error(), "class": UverbsClass})
		r.Observed, r.Expected = h.Display(UverbsClass)+" unreadable", "a readable "+UverbsClass
		return r
	}
	j := &uverbsJudge{h: h, classProblems: classProblems}
	j.mods, _ = h.ReadModules()
	j.nctx = nodeContext{container: h.Container(), user: h.DevNodeUser()}
	if h.Live() {
		j.nctx.user = sysfs.CurrentUser()
	}
	if m, err := h.RDMASystem(); err == nil {
		j.nctx.netns = m.NetnsMode
	}
	for _, d := range s.Devices {
		j.device(d, byDev[d.Name])
	}
	j.render()
	cm := j.rdmaCMNode()
	return j.result(s, byDev, cm)
}

// readUverbsClass lists /sys/class/infiniband_verbs by the RDMA device
// each uverbsN serves; entries whose attributes cannot be read are
// returned as problems. A missing class is no error: ib_uverbs is not loaded.
func readUverbsClass(h *sysfs.Host) (map[string][]uverbsEntry, []string, error) {
	names, err := h.ReadDir(UverbsClass)
	if err != nil && !sysfs.IsNotExist(err) {
		return nil, nil, err
	}
	byDev := map[string][]uverbsEntry{}
	var problems []string
	for _, n := range names {
		if !strings.HasPrefix(n, "uverbs") {
			continue
		}
		dir := path.Join(UverbsClass, n)
		e := uverbsEntry{name: n}
		v, err := h.ReadAttr(path.Join(dir, "ibdev"))
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		e.ibdev = strings.TrimSpace(v)
		if v, err := h.ReadAttr(path.Join(dir, "dev")); err == nil {
			e.dev = strings.TrimSpace(v)
		} else {
			problems = append(problems, err.Error())
		}
		byDev[e.ibdev] = append(byDev[e.ibdev], e)
	}
	return byDev, problems, nil
}

// uverbsUnit is one finding of uverbs.nodes before it is rendered: the
// container's and udev's fixes wait for every missing node.
type uverbsUnit struct {
	device string // the unit
	prefix string // "mlx5_0: <class entry> → <node>" for the detail line
	node   string // the /dev node, for the shared fixes
	dev    string // the kernel's major:minor
	f      *Finding
	slots  Slots
}

// uverbsJudge gathers the findings of uverbs.nodes over all devices.
type uverbsJudge struct {
	h             *sysfs.Host
	mods          *sysfs.Modules
	nctx          nodeContext
	classProblems []string

	units    []uverbsUnit
	findings []report.Finding
	details  []string
	devEv    []map[string]any
}

func (j *uverbsJudge) modState(m string) sysfs.ModuleState {
	if j.mods == nil {
		return sysfs.ModuleUnknown
	}
	return j.mods.State(m)
}

// device judges one RDMA device: its uverbs class entries, then each node.
func (j *uverbsJudge) device(d sysfs.RDMADevice, ents []uverbsEntry) {
	ev := map[string]any{"device": d.Name}
	j.devEv = append(j.devEv, ev)
	slots := Slots{"device": d.Name, "class": j.h.Display(UverbsClass), "user": orUnknown(j.nctx.user), "reregister": reregisterStep(d, j.mods)}
	if len(ents) == 0 {
		u := uverbsUnit{device: d.Name, prefix: d.Name, slots: slots}
		switch {
		case len(j.classProblems) > 0:
			u.f, u.slots = uverbsEntryUnreadable, slots.with("cause", strings.Join(j.classProblems, "; "))
		case j.modState("ib_uverbs") == sysfs.ModuleAbsent:
			u.f = uverbsModuleMissing
		default:
			u.f = uverbsUnregistered
		}
		ev["problem"] = render(u.f.Message, u.slots)
		j.units = append(j.units, u)
		return
	}
	var nodes []map[string]any
	for _, e := range ents {
		j.nctx.device = d.Name
		nev, f, nodeSlots := judgeUverbsNode(j.h, e, j.nctx)
		nodes = append(nodes, nev)
		unitSlots := slots.with()
		for k, v := range nodeSlots {
			unitSlots[k] = v
		}
		j.units = append(j.units, uverbsUnit{device: d.Name, prefix: fmt.Sprintf("%s: %s → %s", d.Name, path.Join(UverbsClass, e.name), nev["path"]),
			node: path.Join(sysfs.DevInfiniband, e.name), dev: e.dev, f: f, slots: unitSlots})
	}
	ev["uverbs"] = nodes
}

// render renders every unit's finding once the shared fixes know every
// missing node: the container's names each as a --device flag, udev's
// gives the mknod line of each.
func (j *uverbsJudge) render() {
	var flags, mknods []string
	for _, u := range j.units {
		switch {
		case u.f == uverbsContainerMissing:
			flags = append(flags, "--device="+u.node)
		case u.f == uverbsNodeMissing && u.dev != "":
			mknods = append(mknods, fmt.Sprintf("mknod -m 0666 %s c %s", u.node, strings.Replace(u.dev, ":", " ", 1)))
		}
	}
	mknod, netnsNote := "", ""
	if len(mknods) > 0 {
		mknod = " By hand: `mkdir -p /dev/infiniband && " + strings.Join(mknods, " && ") + "`."
	}
	if j.nctx.netns == "exclusive" {
		netnsNote = " The RDMA subsystem is in exclusive network-namespace mode (`rdma system`): the device must also belong to this " +
			"container's network namespace (`rdma dev set <dev> netns <ns>`, done by an RDMA CNI), or its nodes open with EPERM."
	}
	for _, u := range j.units {
		f := u.f.At(u.device, u.slots.with("device_flags", strings.Join(flags, " "), "mknod", mknod, "netns_note", netnsNote))
		j.findings = append(j.findings, f)
		j.details = append(j.details, u.prefix+": "+f.Message)
	}
	j.details = append(j.details, j.classProblems...)
}

// rdmaCMNode checks librdmacm's node, needed only when rdma_ucm is loaded,
// and returns its finding (nil when fine or not needed).
func (j *uverbsJudge) rdmaCMNode() *report.Finding {
	if st := j.modState("rdma_ucm"); st != sysfs.ModuleLoaded && st != sysfs.ModuleBuiltin {
		return nil
	}
	p := path.Join(sysfs.DevInfiniband, "rdma_cm")
	n, err := j.h.DevNode(p)
	slots := Slots{"node": p, "user": orUnknown(j.nctx.user)}
	var f *Finding
	switch {
	case sysfs.IsNotExist(err):
		f = uverbsCMMissing
	case err != nil:
		j.details = append(j.details, p+": "+err.Error())
	case n.Type != sysfs.DevChar:
		f, slots = uverbsCMNotChar, slots.with("type", n.Type)
	case n.Open != sysfs.DevOpenOK:
		f, slots = uverbsCMNoOpen, slots.with("errno", n.Open)
	default:
		j.details = append(j.details, fmt.Sprintf("%s: char %s, mode %s, opens", p, n.DevNumber(), n.Mode))
	}
	if f == nil {
		return nil
	}
	rf := f.At("rdma_cm", slots)
	j.details = append(j.details, rf.Message)
	return &rf
}

// result turns the findings into the check's result: failures first, then
// what could not be looked at, then rdma_cm. The nodes missing in a
// uverbs.nodes's headlines: the container's missing nodes, and the
// summary when every node is there and opens.
const (
	uverbsContainerHead headline = "this runs in a container ({container}) that was not given the RDMA device nodes: {nodes} missing"
	uverbsPassHead      headline = "{count} uverbs node(s) present and openable: {nodes}"
)

// container are said in one sentence.
func (j *uverbsJudge) result(s *Survey, byDev map[string][]uverbsEntry, cm *report.Finding) Result {
	ev := map[string]any{"devices": j.devEv}
	if j.nctx.container != "" {
		ev["container"] = j.nctx.container
	}
	if j.nctx.user != "" {
		ev["user"] = j.nctx.user
	}
	if v, err := j.h.ReadAttr(path.Join(UverbsClass, "abi_version")); err == nil {
		ev["abi_version"] = strings.TrimSpace(v)
	}
	var fails, errs, inContainer, remedies []string
	for i, f := range j.findings {
		switch {
		case f.ID == uverbsContainerMissing.ID:
			inContainer = append(inContainer, fmt.Sprintf("%s (%s)", j.units[i].node, f.Unit))
		case f.Status == report.Fail:
			fails = append(fails, f.Unit+": "+f.Message)
		case f.Status == report.Error:
			errs = append(errs, f.Unit+": "+f.Message)
		}
		if f.Status != report.Pass {
			remedies = appendUnique(remedies, f.Fix)
		}
	}
	if len(inContainer) > 0 {
		fails = append([]string{uverbsContainerHead.render(Slots{"container": j.nctx.container, "nodes": strings.Join(inContainer, ", ")})}, fails...)
	}
	r := Result{Findings: j.findings}
	switch {
	case len(fails) > 0:
		r.Status, r.Summary = report.Fail, strings.Join(fails, "; ")
		r.Observed = fmt.Sprintf("%d problem(s)", len(fails))
		r.Remedy = j.failRemedy(remedies)
	case len(errs) > 0:
		r.Status, r.Summary = report.Error, strings.Join(errs, "; ")
		r.Observed = fmt.Sprintf("%d node(s) or class entries unreadable", len(errs))
		r.Remedy = uverbsByHand
	case cm != nil:
		r.Status, r.Summary, r.Observed, r.Remedy = cm.Status, cm.Message, "rdma_cm unusable", cm.Fix
	default:
		var ns []string
		for _, d := range s.Devices {
			for _, e := range byDev[d.Name] {
				ns = append(ns, e.name)
			}
		}
		sort.Strings(ns)
		r.Status, r.Summary = report.Pass, uverbsPassHead.render(Slots{"count": fmt.Sprint(len(ns)), "nodes": strings.Join(ns, ", ")})
		r.Observed = fmt.Sprintf("%d openable", len(ns))
	}
	if cm != nil {
		r.Findings = append(r.Findings, *cm)
	}
	r.Expected = "/dev/infiniband/uverbsN for every RDMA device: a character device with the kernel's number, openable read-write"
	r.Details, r.Evidence = j.details, ev
	return r
}

// failRemedy is the failures' fixes, each once; a fix of a node that
// could not be read is left to the error it is.
func (j *uverbsJudge) failRemedy(fixes []string) string {
	var out []string
	for _, f := range fixes {
		if f != uverbsByHand {
			out = append(out, f)
		}
	}
	return strings.Join(out, "\n")
}

// nodeContext is what judging a node needs beyond the node: where this
// process runs and which device and driver the node serves.
type nodeContext struct {
	container, user string
	netns           string // RDMA netns mode: "shared", "exclusive", "" unknown
	device          string // the RDMA device
}

// driverOfDevice is the driver family of d: by its PCI driver, or for a
// software device by its name and the loaded modules; nil when unknown.
func driverOfDevice(d sysfs.RDMADevice, mods *sysfs.Modules) *Driver {
	if d.Software || d.PCIAddr == "" {
		return softwareDriver(d.Name, func(m string) bool {
			if mods == nil {
				return false
			}
			st := mods.State(m)
			return st == sysfs.ModuleLoaded || st == sysfs.ModuleBuiltin
		})
	}
	return legacyX722(DriverByPCI(d.Driver), d.Name, moduleInUse(mods))
}

// judgeUverbsNode checks one /dev/infiniband/uverbsN against its class
// entry. It returns the node's evidence, the finding and the slots the
// finding is rendered from.
func judgeUverbsNode(h *sysfs.Host, e uverbsEntry, c nodeContext) (map[string]any, *Finding, Slots) {
	p := path.Join(sysfs.DevInfiniband, e.name)
	ev := map[string]any{"name": e.name, "path": p, "sysfs_dev": e.dev}
	slots := Slots{"node": p, "uverbs": e.name, "dev": e.dev}
	n, err := h.DevNode(p)
	if err != nil {
		if !sysfs.IsNotExist(err) {
			ev["error"] = err.Error()
			return ev, uverbsNodeUnreadable, slots.with("cause", err.Error())
		}
		ev["exists"] = false
		if c.container != "" {
			return ev, uverbsContainerMissing, slots
		}
		return ev, uverbsNodeMissing, slots
	}
	ev["exists"], ev["type"], ev["mode"], ev["uid"], ev["gid"], ev["open"] = true, n.Type, n.Mode, n.UID, n.GID, n.Open
	slots = slots.with("type", n.Type, "mode", n.Mode, "owner", fmt.Sprintf("%d:%d", n.UID, n.GID), "errno", n.Open)
	if n.Type != sysfs.DevChar {
		return ev, uverbsNotChar, slots
	}
	ev["dev"] = n.DevNumber()
	if e.dev != "" && n.DevNumber() != e.dev {
		return ev, uverbsStale, slots.with("got", n.DevNumber())
	}
	switch n.Open {
	case sysfs.DevOpenOK:
		return ev, uverbsNodeOK, slots
	case "EPERM", "EACCES":
		if c.netns == "exclusive" && n.Open == "EPERM" {
			// ib_uverbs refuses an open from another network namespace
			// with EPERM; the mode bits are not the cause.
			return ev, uverbsOtherNetns, slots
		}
		return ev, uverbsDenied, slots
	case "ENXIO", "ENODEV", "EIO":
		return ev, uverbsGone, slots
	}
	return ev, uverbsOpenFails, slots
}

func orUnknown(s string) string {
	if s == "" {
		return "this user"
	}
	return s
}
