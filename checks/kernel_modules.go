package checks

import (
	"context"
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

func init() {
	register(Check{
		ID: "kernel.modules", Code: 13, Level: 1,
		Title: "the RDMA kernel modules of each driver are loaded",
		Needs: []string{"pci.device"},
		Explain: Explanation{
			Judges: "For each RDMA NIC's driver family, the module set must be loaded or built in: the NIC driver, its RDMA module " +
				"(mlx5_core + mlx5_ib, bnxt_en + bnxt_re, ice + irdma, …), ib_core and ib_uverbs; rdma_rxe/siw for software devices. " +
				"Loaded modules come from /proc/modules, built-ins from modules.builtin and /sys/module/<name>. rdma_cm and rdma_ucm only warn.",
			Why: "The NIC driver alone gives an Ethernet port; without the RDMA module there is no RDMA device, and without ib_uverbs " +
				"no user-space verbs. rdma_cm/rdma_ucm serve librdmacm (MPI, NCCL, NVMe-oF, storage) — verbs work without them, connections by IP do not.",
		},
		Run: runKernelModules,
	})
}

// kernel.modules's findings, about the host: the modules of one kind
// (absent, absent and not installed, of unknown state) are one finding
// whose fix loads them all at once; {modules} lists them ("mlx5_ib,
// ib_uverbs"), {module_args} as modprobe takes them, {module_list} as a
// sentence names them.
var (
	modulesPresent = declare(Finding{ID: "kernel.modules/present", Status: report.Pass,
		When:    "every module the host's RDMA functions need is loaded or built in (and rdma_cm/rdma_ucm where a port connects through them)",
		Message: "{count} RDMA modules present: {modules}"})
	modulesNotLoaded = declare(Finding{ID: "kernel.modules/not-loaded", Status: report.Fail,
		When:    "a required module (the NIC driver, its RDMA module such as mlx5_ib, ib_core, ib_uverbs) is neither loaded nor built in",
		Message: "{modules} not loaded",
		Fix:     "`modprobe -a {module_args}`, then check `dmesg` for errors; to load at boot, add {module_list} to /etc/modules-load.d/rdma.conf."})
	modulesNotInstalled = declare(Finding{ID: "kernel.modules/not-installed", Status: report.Fail,
		When:    "a required module is not loaded and its file is not installed for the running kernel (modules.dep does not list it)",
		Message: "{modules} not loaded, and not installed for the running kernel",
		Fix: "{module_list} is not installed for the running kernel: install the kernel's module package (or rebuild MLNX_OFED/DOCA for this kernel) first, " +
			"then `modprobe -a {module_args}`; to load at boot, add {module_list} to /etc/modules-load.d/rdma.conf."})
	modulesStateUnknown = declare(Finding{ID: "kernel.modules/state-unknown", Status: report.Error,
		When:    "whether a required module is loaded cannot be told: neither /proc/modules nor modules.builtin lists it, and /sys/module/<name> could not be looked at",
		Message: "could not tell whether {modules} is loaded",
		Fix:     "Look by hand: `lsmod | grep -w -e {grep_args}`, `ls -d {sys_module_dirs}` and `grep -e {grep_args} /lib/modules/$(uname -r)/modules.builtin`."})
	modulesCMMissing = declare(Finding{ID: "kernel.modules/rdma-cm-missing", Status: report.Warn,
		When:    "rdma_cm or rdma_ucm is not loaded where a port connects through rdma_cm (InfiniBand, RoCE, iWARP)",
		Message: "{modules} not loaded: verbs work, librdmacm connections (rdma_cm, MPI, NCCL, NVMe-oF) do not",
		Fix:     "`modprobe rdma_ucm` (it loads rdma_cm too); add rdma_ucm to /etc/modules-load.d/rdma.conf to load it at boot."})
	modulesUnreadable = declare(Finding{ID: "kernel.modules/list-unreadable", Status: report.Error,
		When:    "/proc/modules could not be read",
		Message: "could not read the module list: {cause}",
		Fix:     "Run where /proc is mounted and readable; by hand: `lsmod | grep -e ib_ -e rdma -e mlx` and `ls /sys/module`."})
	modulesMalformed = declare(Finding{ID: "kernel.modules/list-malformed", Status: report.Error,
		When:    "/proc/modules was read but not one line of it is a module line, so every module would look absent",
		Message: "could not parse {path}: {count} malformed lines, none a module line (first: {first})",
		Fix:     "Read the module list by hand: `lsmod` or `cat /proc/modules`; a snapshot must carry /proc/modules as the kernel wrote it."})
)

func runKernelModules(_ context.Context, env *Env) Result {
	mods, err := env.Host.ReadModules()
	if err != nil {
		r := modulesUnreadable.result("", Slots{"cause": err.Error()})
		r.Observed, r.Expected = "module list unreadable", "a readable "+env.Host.Display(sysfs.ProcModules)
		return r
	}
	need := requiredModules(env.Survey(), mods)
	mj := moduleJudgement{states: map[string]string{}}
	mj.judgeRequired(mods, need)
	mj.judgeCM(mods, usesRDMACM(env.Model()))
	if len(mods.Loaded) == 0 && len(mods.ParseErrors) > 0 {
		return moduleListMalformed(env.Host, mods)
	}
	mj.details = append(mj.details, parseErrorLines(env.Host, mods)...)
	r := combineFindings(mj.findings(mods, need.order), false)
	r.Observed = observedModules(need.order, mj.states)
	r.Expected = strings.Join(need.order, ", ") + " loaded"
	r.Details, r.Evidence = mj.details, map[string]any{"modules": mj.states, "required": need.order}
	return r
}

// moduleListMalformed is an error: /proc/modules was read but not one line
// of it is a module line, so every module would look absent.
func moduleListMalformed(h *sysfs.Host, mods *sysfs.Modules) Result {
	r := modulesMalformed.result("", Slots{"path": h.Display(sysfs.ProcModules), "count": fmt.Sprint(len(mods.ParseErrors)),
		"first": fmt.Sprint(mods.ParseErrors[0])})
	r.Observed, r.Expected = fmt.Sprintf("%d malformed lines", len(mods.ParseErrors)), "one \"name size refcount deps state address\" line per module"
	return r
}

// parseErrorLines names the first three malformed lines of a module list
// that otherwise parsed, and counts the rest.
func parseErrorLines(h *sysfs.Host, mods *sysfs.Modules) []string {
	var lines []string
	for i, e := range mods.ParseErrors {
		if i == 3 {
			lines = append(lines, fmt.Sprintf("%s: %d more malformed lines", h.Display(sysfs.ProcModules), len(mods.ParseErrors)-3))
			break
		}
		lines = append(lines, fmt.Sprintf("%s: %v", h.Display(sysfs.ProcModules), e))
	}
	return lines
}

// moduleNeeds are the required modules in a stable order (first needed
// first), each with the families that need it.
type moduleNeeds struct {
	order []string
	why   map[string][]string
}

func (n *moduleNeeds) add(mod, who string) {
	if _, ok := n.why[mod]; !ok {
		n.order = append(n.order, mod)
	}
	n.why[mod] = appendUnique(n.why[mod], who)
}

// requiredModules are the modules this host's RDMA functions and software
// devices need, then the RDMA core. A function a passthrough driver holds
// (vfio-pci) needs nothing from the host's RDMA modules.
func requiredModules(s *Survey, mods *sysfs.Modules) moduleNeeds {
	need := moduleNeeds{why: map[string][]string{}}
	for _, n := range s.NICs {
		if n.Driver == nil || n.Foreign != "" {
			continue
		}
		for _, m := range n.Driver.Modules {
			need.add(m, n.Driver.Family)
		}
	}
	loaded := moduleInUse(mods)
	for _, d := range s.SoftwareDevices() {
		drv := softwareDriver(d.Name, loaded)
		need.add(drv.RDMAModule(), drv.Family)
	}
	for _, m := range CoreModules {
		need.add(m, "RDMA core")
	}
	return need
}

// moduleJudgement is what was found of the modules: each one's state, the
// required ones absent or of unknown state, the rdma_cm modules absent
// where a port needs them, and a detail line per module.
type moduleJudgement struct {
	states                      map[string]string
	missing, unknown, cmMissing []string
	details                     []string
}

// judgeRequired notes each required module's state; an absent one is
// missing, one whose state cannot be told is unknown.
func (mj *moduleJudgement) judgeRequired(mods *sysfs.Modules, need moduleNeeds) {
	for _, m := range need.order {
		st := mods.State(m)
		mj.states[m] = st.String()
		mj.details = append(mj.details, fmt.Sprintf("%s: %s (needed by %s)", m, st, strings.Join(need.why[m], ", ")))
		switch st {
		case sysfs.ModuleAbsent:
			mj.missing = append(mj.missing, m)
		case sysfs.ModuleUnknown:
			mj.unknown = append(mj.unknown, m)
		}
	}
}

// judgeCM notes the rdma_cm modules' states; they are missing only when a
// port here connects through rdma_cm.
func (mj *moduleJudgement) judgeCM(mods *sysfs.Modules, cmUsed bool) {
	for _, m := range CMModules {
		st := mods.State(m)
		mj.states[m] = st.String()
		if !cmUsed {
			mj.details = append(mj.details, fmt.Sprintf("%s: %s (not needed: no port here connects through rdma_cm)", m, st))
			continue
		}
		mj.details = append(mj.details, fmt.Sprintf("%s: %s (librdmacm connections)", m, st))
		if st == sysfs.ModuleAbsent {
			mj.cmMissing = append(mj.cmMissing, m)
		}
	}
}

// findings are what was found of the modules: the absent required ones
// (those installed for the running kernel apart from those that are not),
// those of unknown state, the rdma_cm modules absent where a port needs
// them; when there is none of these, that every module is present.
func (mj *moduleJudgement) findings(mods *sysfs.Modules, order []string) []report.Finding {
	var loadable, notInstalled []string
	for _, m := range mj.missing {
		if ok, err := mods.Available(m); err == nil && !ok {
			notInstalled = append(notInstalled, m)
		} else {
			loadable = append(loadable, m)
		}
	}
	var fs []report.Finding
	for _, g := range []struct {
		f    *Finding
		mods []string
	}{{modulesNotLoaded, loadable}, {modulesNotInstalled, notInstalled}, {modulesStateUnknown, mj.unknown}, {modulesCMMissing, mj.cmMissing}} {
		if len(g.mods) > 0 {
			fs = append(fs, g.f.At("", moduleSlots(g.mods)))
		}
	}
	if len(fs) == 0 {
		fs = append(fs, modulesPresent.At("", Slots{"count": fmt.Sprint(len(order)), "modules": strings.Join(order, ", ")}))
	}
	return fs
}

// moduleSlots name a set of modules the ways the findings' templates say them.
func moduleSlots(mods []string) Slots {
	dirs := make([]string, len(mods))
	for i, m := range mods {
		dirs[i] = "/sys/module/" + m
	}
	return Slots{"modules": strings.Join(mods, ", "), "module_args": strings.Join(mods, " "), "module_list": strings.Join(mods, " and "),
		"grep_args": strings.Join(mods, " -e "), "sys_module_dirs": strings.Join(dirs, " ")}
}

func observedModules(order []string, states map[string]string) string {
	var parts []string
	for _, m := range append(append([]string(nil), order...), CMModules...) {
		switch states[m] {
		case sysfs.ModuleAbsent.String():
			parts = append(parts, m+" missing")
		case sysfs.ModuleUnknown.String():
			parts = append(parts, m+" unknown")
		}
	}
	if len(parts) == 0 {
		return "all present"
	}
	return strings.Join(parts, ", ")
}

// usesRDMACM tells whether any port's transport connects through rdma_cm:
// InfiniBand, RoCE and iWARP (whose only connection path it is) do; EFA
// does not — libfabric's efa provider addresses peers by its own address
// handles. A host with no ports yet (devices not registered) counts as
// using it, so the missing modules are still said.
func usesRDMACM(m *HostModel) bool {
	if len(m.Ports) == 0 {
		return true
	}
	return len(m.PortsOf(InfiniBand, RoCE, IWARP, OmniPath)) > 0
}
