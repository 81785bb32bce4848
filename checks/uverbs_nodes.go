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
			Failures: []Failure{
				{report.Fail, "an RDMA device has no uverbs device (ib_uverbs not loaded)", "`modprobe ib_uverbs`; add it to /etc/modules-load.d/rdma.conf."},
				{report.Fail, "/dev/infiniband/uverbsN is missing in a container",
					"Pass the nodes in: `docker run --device=/dev/infiniband/uverbs0 --device=/dev/infiniband/rdma_cm …` (or `--device=/dev/infiniband`), " +
						"with `--cap-add=IPC_LOCK --ulimit memlock=-1`; on Kubernetes request them through an RDMA device plugin."},
				{report.Fail, "/dev/infiniband/uverbsN is missing on the host", udevNodeFix},
				{report.Fail, "an RDMA device has no uverbs device although ib_uverbs is loaded", uverbsUnregisteredFix(genericReregister)},
				{report.Fail, "the node is not a character device, or has another device number than the kernel's uverbsN (a stale node)", "Remove it and let udev recreate it (`udevadm trigger`); in a container, pass the host's node."},
				{report.Fail, "the node does not open (EPERM) while the RDMA subsystem is in exclusive netns mode: the device belongs to another network namespace",
					exclusiveNetnsFix("")},
				{report.Fail, "the node does not open for this user (permission denied)", uverbsModeFix},
				{report.Fail, "the node does not open: no live device behind it (ENXIO, ENODEV, EIO)", uverbsGoneFix(genericReregister)},
				{report.Warn, "rdma_ucm is loaded but /dev/infiniband/rdma_cm is missing or does not open", "Same fixes as for uverbsN; librdmacm needs it."},
				{report.Error, "the class or the node facts could not be read",
					"Run where /sys and /dev are readable (a snapshot must record dev_nodes); by hand: `grep . /sys/class/infiniband_verbs/uverbs*/{ibdev,dev}` and `ls -l /dev/infiniband`."},
			},
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

// udevNodeFix is the fix for a /dev/infiniband/uverbsN that udev did not
// create although the kernel has the uverbs device: creating the node is
// enough — nothing needs reloading.
const udevNodeFix = "udev did not create the node: `udevadm trigger --subsystem-match=infiniband_verbs` (check that systemd-udevd runs: `systemctl status systemd-udevd`); " +
	"udev creates /dev/infiniband/uverbsN from the kernel's uverbsN. Nothing needs reloading: the kernel's uverbs device exists, only its node is missing. " +
	"By hand: `mknod -m 0666 /dev/infiniband/uverbsN c <major> <minor>` with the numbers in /sys/class/infiniband_verbs/uverbsN/dev."

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

// Remedy keys for missing nodes: the text, which names every missing node,
// is written once after all devices are judged.
const (
	fixContainer = "\x00container"
	fixUdev      = "\x00udev"
)

// uverbsEntry is one /sys/class/infiniband_verbs/uverbsN.
type uverbsEntry struct {
	name, ibdev, dev string
}

func runUverbsNodes(_ context.Context, env *Env) Result {
	s := env.Survey()
	h := env.Host
	if len(s.Devices) == 0 {
		r := fail("no RDMA device, so no uverbs device to open")
		r.Observed, r.Expected = "no RDMA device", "a uverbs node per RDMA device"
		r.Remedy = "See rdma.devices: the RDMA device comes first; ib_uverbs then creates its uverbsN."
		return r
	}
	byDev, classProblems, err := readUverbsClass(h)
	if err != nil {
		r := errorf("could not list the uverbs devices: %v", err)
		r.Observed, r.Expected = h.Display(UverbsClass)+" unreadable", "a readable "+UverbsClass
		r.Remedy = "Run where /sys is mounted and readable; by hand: `ls -l " + UverbsClass + "` and `ls -l /dev/infiniband`."
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
	j.details = append(j.details, classProblems...)
	if len(j.containerMissing) > 0 {
		j.fails = append([]string{fmt.Sprintf("this runs in a container (%s) that was not given the RDMA device nodes: %s missing",
			j.nctx.container, strings.Join(j.containerMissing, ", "))}, j.fails...)
	}
	cmWarn := j.rdmaCMNode()
	return j.result(s, byDev, cmWarn)
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

// uverbsJudge gathers the findings of uverbs.nodes over all devices.
type uverbsJudge struct {
	h             *sysfs.Host
	mods          *sysfs.Modules
	nctx          nodeContext
	classProblems []string

	details, fails, errs, remedies         []string
	devEv                                  []map[string]any
	missingNodes, mknods, containerMissing []string
}

func (j *uverbsJudge) modState(m string) sysfs.ModuleState {
	if j.mods == nil {
		return sysfs.ModuleUnknown
	}
	return j.mods.State(m)
}

func (j *uverbsJudge) addRemedy(r string) { j.remedies = appendUnique(j.remedies, r) }

// device judges one RDMA device: its uverbs class entries, then each node.
func (j *uverbsJudge) device(d sysfs.RDMADevice, ents []uverbsEntry) {
	ev := map[string]any{"device": d.Name}
	j.devEv = append(j.devEv, ev)
	if len(ents) == 0 {
		why := "its uverbs device cannot be told: " + strings.Join(j.classProblems, "; ")
		switch {
		case len(j.classProblems) > 0:
			j.errs = append(j.errs, d.Name+": "+why)
		case j.modState("ib_uverbs") == sysfs.ModuleAbsent:
			why = "no uverbs device in " + j.h.Display(UverbsClass) + ": ib_uverbs is not loaded"
			j.addRemedy("`modprobe ib_uverbs` and add ib_uverbs to /etc/modules-load.d/rdma.conf so it loads at boot.")
			j.fails = append(j.fails, d.Name+": "+why)
		default:
			why = "no uverbs device in " + j.h.Display(UverbsClass) + " although ib_uverbs is loaded (the device is still registering, or ib_uverbs failed to add it: see dmesg)"
			j.addRemedy(uverbsUnregisteredFix(reregisterStep(d, j.mods)))
			j.fails = append(j.fails, d.Name+": "+why)
		}
		ev["problem"] = why
		j.details = append(j.details, d.Name+": "+why)
		return
	}
	var nodes []map[string]any
	for _, e := range ents {
		j.nctx.device, j.nctx.reregister = d.Name, reregisterStep(d, j.mods)
		nev, problem, isErr, fix := judgeUverbsNode(j.h, e, j.nctx)
		nodes = append(nodes, nev)
		line := fmt.Sprintf("%s: %s → %s", d.Name, path.Join(UverbsClass, e.name), nev["path"])
		node := path.Join(sysfs.DevInfiniband, e.name)
		switch {
		case isErr:
			j.errs = append(j.errs, d.Name+": "+problem)
		case fix == fixContainer:
			// One sentence for all of them, after the loop.
			j.containerMissing = append(j.containerMissing, fmt.Sprintf("%s (%s)", nev["path"], d.Name))
			j.missingNodes = append(j.missingNodes, node)
			j.addRemedy(fix)
		case problem != "":
			j.fails = append(j.fails, d.Name+": "+problem)
			j.addRemedy(fix)
			if fix == fixUdev && e.dev != "" {
				j.mknods = append(j.mknods, fmt.Sprintf("mknod -m 0666 %s c %s", node, strings.Replace(e.dev, ":", " ", 1)))
			}
		default:
			line += fmt.Sprintf(": char %s, mode %s, opens for %s", e.dev, nev["mode"], orUnknown(j.nctx.user))
		}
		if problem != "" {
			line += ": " + problem
		}
		j.details = append(j.details, line)
	}
	ev["uverbs"] = nodes
}

// rdmaCMNode checks librdmacm's node, needed only when rdma_ucm is loaded,
// and returns the warning ("" when fine or not needed).
func (j *uverbsJudge) rdmaCMNode() string {
	if st := j.modState("rdma_ucm"); st != sysfs.ModuleLoaded && st != sysfs.ModuleBuiltin {
		return ""
	}
	p := path.Join(sysfs.DevInfiniband, "rdma_cm")
	n, err := j.h.DevNode(p)
	var cmWarn string
	switch {
	case sysfs.IsNotExist(err):
		cmWarn = p + " is missing (rdma_ucm is loaded): librdmacm connections fail"
	case err != nil:
		j.details = append(j.details, p+": "+err.Error())
	case n.Type != sysfs.DevChar:
		cmWarn = fmt.Sprintf("%s is a %s, not a character device", p, n.Type)
	case n.Open != sysfs.DevOpenOK:
		cmWarn = fmt.Sprintf("%s does not open for %s: %s", p, orUnknown(j.nctx.user), n.Open)
	default:
		j.details = append(j.details, fmt.Sprintf("%s: char %s, mode %s, opens", p, n.DevNumber(), n.Mode))
	}
	if cmWarn != "" {
		j.details = append(j.details, cmWarn)
	}
	return cmWarn
}

// result turns the findings into the check's result: failures first, then
// what could not be looked at, then rdma_cm.
func (j *uverbsJudge) result(s *Survey, byDev map[string][]uverbsEntry, cmWarn string) Result {
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
	var r Result
	switch {
	case len(j.fails) > 0:
		r = fail(strings.Join(j.fails, "; "))
		r.Observed = fmt.Sprintf("%d problem(s)", len(j.fails))
		r.Remedy = j.failRemedy()
	case len(j.errs) > 0:
		r = errorf("%s", strings.Join(j.errs, "; "))
		r.Observed = fmt.Sprintf("%d node(s) or class entries unreadable", len(j.errs))
		r.Remedy = "Run where /dev and /sys are readable; a snapshot must record dev_nodes for /dev/infiniband. " +
			"By hand: `grep . /sys/class/infiniband_verbs/uverbs*/{ibdev,dev}` and `ls -l /dev/infiniband` (each uverbsN a character device with the same major:minor)."
	case cmWarn != "":
		r = warn(cmWarn)
		r.Observed = "rdma_cm unusable"
		r.Remedy = "librdmacm needs /dev/infiniband/rdma_cm: let udev create it (`udevadm trigger`), pass it into a container (`--device=/dev/infiniband/rdma_cm`), or give the user access (udev rule `KERNEL==\"rdma_cm\", MODE=\"0666\"`)."
	default:
		var ns []string
		for _, d := range s.Devices {
			for _, e := range byDev[d.Name] {
				ns = append(ns, e.name)
			}
		}
		sort.Strings(ns)
		r = pass(fmt.Sprintf("%d uverbs node(s) present and openable: %s", len(ns), strings.Join(ns, ", ")))
		r.Observed = fmt.Sprintf("%d openable", len(ns))
	}
	r.Expected = "/dev/infiniband/uverbsN for every RDMA device: a character device with the kernel's number, openable read-write"
	r.Details, r.Evidence = j.details, ev
	return r
}

// failRemedy writes out the remedies, the container's and udev's naming
// every missing node once.
func (j *uverbsJudge) failRemedy() string {
	out := append([]string(nil), j.remedies...)
	for i, rm := range out {
		switch rm {
		case fixContainer:
			var devs []string
			for _, n := range j.missingNodes {
				devs = append(devs, "--device="+n)
			}
			out[i] = "This runs in a container without the RDMA device nodes. Pass them in: `docker run " + strings.Join(devs, " ") +
				" --device=/dev/infiniband/rdma_cm …` (or `--device=/dev/infiniband` for all), together with `--cap-add=IPC_LOCK --ulimit memlock=-1` " +
				"for memory registration; on Kubernetes request the devices through an RDMA device plugin (e.g. k8s-rdma-shared-dev-plugin) " +
				"or mount /dev/infiniband into a privileged pod."
			if j.nctx.netns == "exclusive" {
				out[i] += " The RDMA subsystem is in exclusive network-namespace mode (`rdma system`): the device must also belong to this " +
					"container's network namespace (`rdma dev set <dev> netns <ns>`, done by an RDMA CNI), or its nodes open with EPERM."
			}
		case fixUdev:
			out[i] = "udev did not create the node(s): `udevadm trigger --subsystem-match=infiniband_verbs` (check that systemd-udevd runs: " +
				"`systemctl status systemd-udevd`). Nothing needs reloading: the kernel's uverbs devices exist, only their nodes are missing."
			if len(j.mknods) > 0 {
				out[i] += " By hand: `mkdir -p /dev/infiniband && " + strings.Join(j.mknods, " && ") + "`."
			}
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
	reregister      string // how to make the kernel register it again
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

// judgeUverbsNode checks one /dev/infiniband/uverbsN against its class entry.
// It returns the node's evidence, the problem ("" when fine), whether the
// problem is "could not look", and the fix.
func judgeUverbsNode(h *sysfs.Host, e uverbsEntry, c nodeContext) (map[string]any, string, bool, string) {
	container, user := c.container, c.user
	p := path.Join(sysfs.DevInfiniband, e.name)
	ev := map[string]any{"name": e.name, "path": p, "sysfs_dev": e.dev}
	n, err := h.DevNode(p)
	if err != nil {
		if !sysfs.IsNotExist(err) {
			ev["error"] = err.Error()
			return ev, "could not look at the node: " + err.Error(), true, ""
		}
		ev["exists"] = false
		if container != "" {
			return ev, "missing in this container", false, fixContainer
		}
		return ev, p + " is missing although the kernel has " + e.name + " (" + e.dev + ")", false, fixUdev
	}
	ev["exists"], ev["type"], ev["mode"], ev["uid"], ev["gid"], ev["open"] = true, n.Type, n.Mode, n.UID, n.GID, n.Open
	if n.Type == sysfs.DevChar {
		ev["dev"] = n.DevNumber()
	}
	if n.Type != sysfs.DevChar {
		return ev, fmt.Sprintf("%s is a %s, not a character device", p, n.Type), false,
			"Remove " + p + " and let udev recreate it (`udevadm trigger --subsystem-match=infiniband_verbs`); in a container pass the host's node with `--device`."
	}
	if e.dev != "" && n.DevNumber() != e.dev {
		return ev, fmt.Sprintf("%s is char %s but the kernel's %s is %s: a stale node, it reaches another device or none", p, n.DevNumber(), e.name, e.dev), false,
			"Remove the stale node and let udev recreate it (`udevadm trigger --subsystem-match=infiniband_verbs`); in a container, pass the host's current node instead of a copied /dev."
	}
	if n.Open != sysfs.DevOpenOK {
		who := orUnknown(user)
		switch n.Open {
		case "EPERM", "EACCES":
			if c.netns == "exclusive" && n.Open == "EPERM" {
				// ib_uverbs refuses an open from another network namespace
				// with EPERM; the mode bits are not the cause.
				return ev, fmt.Sprintf("%s does not open for %s: EPERM — the RDMA subsystem is in exclusive netns mode and %s belongs to another network namespace",
					p, who, c.device), false, exclusiveNetnsFix(c.device)
			}
			return ev, fmt.Sprintf("%s does not open for %s: permission denied (mode %s, owner %d:%d)", p, who, n.Mode, n.UID, n.GID), false,
				uverbsModeFix + " In a container the node's permissions come from the host (and from the device cgroup: `--device` grants rw)."
		case "ENXIO", "ENODEV", "EIO":
			return ev, fmt.Sprintf("%s does not open: %s (no live device behind it)", p, n.Open), false, uverbsGoneFix(c.reregister)
		}
		return ev, fmt.Sprintf("%s does not open for %s: %s", p, who, n.Open), false,
			"Read `dmesg` for uverbs errors; check the node's permissions and, in a container, its device cgroup (`--device`)."
	}
	return ev, "", false, ""
}

func orUnknown(s string) string {
	if s == "" {
		return "this user"
	}
	return s
}
