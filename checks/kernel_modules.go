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
			Failures: []Failure{
				{report.Fail, "a required module (e.g. mlx5_ib, ib_uverbs) is not loaded",
					"`modprobe <module>`; to load it at boot add it to /etc/modules-load.d/rdma.conf. If modprobe cannot find it, install the module package for the running kernel (or rebuild MLNX_OFED/DOCA for it)."},
				{report.Warn, "rdma_cm / rdma_ucm not loaded", "`modprobe rdma_ucm` (it pulls rdma_cm) for librdmacm users."},
				{report.Error, "/proc/modules could not be read", "Run where /proc is mounted."},
			},
		},
		Run: runKernelModules,
	})
}

func runKernelModules(_ context.Context, env *Env) Result {
	mods, err := env.Host.ReadModules()
	if err != nil {
		return moduleListUnreadable(env.Host, err)
	}
	need := requiredModules(env.Survey(), mods)
	mj := moduleJudgement{states: map[string]string{}}
	mj.judgeRequired(mods, need)
	mj.judgeCM(mods, usesRDMACM(env.Model()))
	if len(mods.Loaded) == 0 && len(mods.ParseErrors) > 0 {
		return moduleListMalformed(env.Host, mods)
	}
	mj.details = append(mj.details, parseErrorLines(env.Host, mods)...)
	r := mj.result(mods, need.order)
	r.Observed = observedModules(need.order, mj.states)
	r.Expected = strings.Join(need.order, ", ") + " loaded"
	r.Details, r.Evidence = mj.details, map[string]any{"modules": mj.states, "required": need.order}
	return r
}

// moduleListUnreadable is an error: without /proc/modules nothing can be
// judged; the remedy says how to look by hand.
func moduleListUnreadable(h *sysfs.Host, err error) Result {
	r := errorf("could not read the module list: %v", err)
	r.Observed, r.Expected = "module list unreadable", "a readable "+h.Display(sysfs.ProcModules)
	r.Remedy = "Run where /proc is mounted and readable; by hand: `lsmod | grep -e ib_ -e rdma -e mlx` and `ls /sys/module`."
	return r
}

// moduleListMalformed is an error: /proc/modules was read but not one line
// of it is a module line, so every module would look absent.
func moduleListMalformed(h *sysfs.Host, mods *sysfs.Modules) Result {
	r := errorf("could not parse %s: %d malformed lines, none a module line (first: %v)",
		h.Display(sysfs.ProcModules), len(mods.ParseErrors), mods.ParseErrors[0])
	r.Observed, r.Expected = fmt.Sprintf("%d malformed lines", len(mods.ParseErrors)), "one \"name size refcount deps state address\" line per module"
	r.Remedy = "Read the module list by hand: `lsmod` or `cat /proc/modules`; a snapshot must carry /proc/modules as the kernel wrote it."
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

// result is the check's status and remedy: a missing required module
// fails, one of unknown state is an error, missing rdma_cm modules only
// warn (verbs work without them), else it passes.
func (mj *moduleJudgement) result(mods *sysfs.Modules, order []string) Result {
	var r Result
	switch {
	case len(mj.missing) > 0:
		r = fail(fmt.Sprintf("%s not loaded", strings.Join(mj.missing, ", ")))
		r.Remedy = moduleRemedy(mods, mj.missing)
	case len(mj.unknown) > 0:
		u := mj.unknown
		r = errorf("could not tell whether %s is loaded", strings.Join(u, ", "))
		r.Remedy = fmt.Sprintf("Look by hand: `lsmod | grep -w -e %s`, `ls -d /sys/module/{%s}` and `grep -e %s /lib/modules/$(uname -r)/modules.builtin`.",
			strings.Join(u, " -e "), strings.Join(u, ","), strings.Join(u, " -e "))
	case len(mj.cmMissing) > 0:
		r = warn(fmt.Sprintf("%s not loaded: verbs work, librdmacm connections (rdma_cm, MPI, NCCL, NVMe-oF) do not", strings.Join(mj.cmMissing, ", ")))
		r.Remedy = "`modprobe rdma_ucm` (it loads rdma_cm too); add rdma_ucm to /etc/modules-load.d/rdma.conf to load it at boot."
	default:
		r = pass(fmt.Sprintf("%d RDMA modules present: %s", len(order), strings.Join(order, ", ")))
	}
	return r
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

// moduleRemedy prints the modprobe line and, when the module file is not
// installed for the running kernel, says that modprobe will not find it.
func moduleRemedy(mods *sysfs.Modules, missing []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "`modprobe -a %s`, then check `dmesg` for errors; to load at boot, add %s to /etc/modules-load.d/rdma.conf.",
		strings.Join(missing, " "), strings.Join(missing, " and "))
	var absent []string
	for _, m := range missing {
		if ok, err := mods.Available(m); err == nil && !ok {
			absent = append(absent, m)
		}
	}
	if len(absent) > 0 {
		fmt.Fprintf(&b, "\n%s is not installed for the running kernel: install the kernel's module package "+
			"(or rebuild MLNX_OFED/DOCA for this kernel) first.", strings.Join(absent, ", "))
	}
	return b.String()
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
