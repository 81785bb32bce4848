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
		r := errorf("could not read the module list: %v", err)
		r.Observed, r.Expected = "module list unreadable", "a readable "+env.Host.Display(sysfs.ProcModules)
		r.Remedy = "Run where /proc is mounted and readable; by hand: `lsmod | grep -e ib_ -e rdma -e mlx` and `ls /sys/module`."
		return r
	}
	s := env.Survey()
	// required module → the families that need it, in a stable order
	var order []string
	why := map[string][]string{}
	need := func(mod, who string) {
		if _, ok := why[mod]; !ok {
			order = append(order, mod)
		}
		why[mod] = appendUnique(why[mod], who)
	}
	for _, n := range s.NICs {
		// A function a passthrough driver holds (vfio-pci) needs nothing
		// from the host's RDMA modules.
		if n.Driver == nil || n.Foreign != "" {
			continue
		}
		for _, m := range n.Driver.Modules {
			need(m, n.Driver.Family)
		}
	}
	loaded := func(m string) bool { st := mods.State(m); return st == sysfs.ModuleLoaded || st == sysfs.ModuleBuiltin }
	for _, d := range s.SoftwareDevices() {
		drv := softwareDriver(d.Name, loaded)
		need(drv.RDMAModule(), drv.Family)
	}
	for _, m := range CoreModules {
		need(m, "RDMA core")
	}
	states := map[string]string{}
	var missing, unknown, details []string
	for _, m := range order {
		st := mods.State(m)
		states[m] = st.String()
		details = append(details, fmt.Sprintf("%s: %s (needed by %s)", m, st, strings.Join(why[m], ", ")))
		switch st {
		case sysfs.ModuleAbsent:
			missing = append(missing, m)
		case sysfs.ModuleUnknown:
			unknown = append(unknown, m)
		}
	}
	var cmMissing []string
	cmUsed := usesRDMACM(env.Model())
	for _, m := range CMModules {
		st := mods.State(m)
		states[m] = st.String()
		if !cmUsed {
			details = append(details, fmt.Sprintf("%s: %s (not needed: no port here connects through rdma_cm)", m, st))
			continue
		}
		details = append(details, fmt.Sprintf("%s: %s (librdmacm connections)", m, st))
		if st == sysfs.ModuleAbsent {
			cmMissing = append(cmMissing, m)
		}
	}
	if len(mods.Loaded) == 0 && len(mods.ParseErrors) > 0 {
		r := errorf("could not parse %s: %d malformed lines, none a module line (first: %v)",
			env.Host.Display(sysfs.ProcModules), len(mods.ParseErrors), mods.ParseErrors[0])
		r.Observed, r.Expected = fmt.Sprintf("%d malformed lines", len(mods.ParseErrors)), "one \"name size refcount deps state address\" line per module"
		r.Remedy = "Read the module list by hand: `lsmod` or `cat /proc/modules`; a snapshot must carry /proc/modules as the kernel wrote it."
		return r
	}
	for i, e := range mods.ParseErrors {
		if i == 3 {
			details = append(details, fmt.Sprintf("%s: %d more malformed lines", env.Host.Display(sysfs.ProcModules), len(mods.ParseErrors)-3))
			break
		}
		details = append(details, fmt.Sprintf("%s: %v", env.Host.Display(sysfs.ProcModules), e))
	}
	ev := map[string]any{"modules": states, "required": order}
	expected := strings.Join(order, ", ") + " loaded"
	var r Result
	switch {
	case len(missing) > 0:
		r = fail(fmt.Sprintf("%s not loaded", strings.Join(missing, ", ")))
		r.Remedy = moduleRemedy(mods, missing)
	case len(unknown) > 0:
		r = errorf("could not tell whether %s is loaded", strings.Join(unknown, ", "))
		r.Remedy = fmt.Sprintf("Look by hand: `lsmod | grep -w -e %s`, `ls -d /sys/module/{%s}` and `grep -e %s /lib/modules/$(uname -r)/modules.builtin`.",
			strings.Join(unknown, " -e "), strings.Join(unknown, ","), strings.Join(unknown, " -e "))
	case len(cmMissing) > 0:
		r = warn(fmt.Sprintf("%s not loaded: verbs work, librdmacm connections (rdma_cm, MPI, NCCL, NVMe-oF) do not", strings.Join(cmMissing, ", ")))
		r.Remedy = "`modprobe rdma_ucm` (it loads rdma_cm too); add rdma_ucm to /etc/modules-load.d/rdma.conf to load it at boot."
	default:
		r = pass(fmt.Sprintf("%d RDMA modules present: %s", len(order), strings.Join(order, ", ")))
	}
	r.Observed = observedModules(order, states)
	r.Expected, r.Details, r.Evidence = expected, details, ev
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
