package checks

import (
	"context"
	"fmt"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Kernel thresholds of DESIGN §5: below minKernel fails, below goodKernel warns.
var (
	minKernel  = sysfs.KernelVersion{Major: 4, Minor: 18}
	goodKernel = sysfs.KernelVersion{Major: 5, Minor: 4}
)

func init() {
	register(Check{
		ID: "kernel.version", Code: 12, Level: 1,
		Title: "the running kernel is recent enough for the RDMA stack",
		Explain: Explanation{
			Judges: "Reads the running kernel's release from /proc/sys/kernel/osrelease: below 4.18 fails, below 5.4 warns.",
			Why: "The in-kernel RDMA core, the uverbs ioctl ABI and the drivers evolve with the kernel; current rdma-core " +
				"and vendor stacks (MLNX_OFED/DOCA) no longer support kernels older than 4.18, and 5.4+ carries years of RDMA fixes.",
			Failures: []Failure{
				{report.Fail, "kernel older than 4.18", "Boot a supported kernel (the distribution's current one: RHEL/Rocky 8+, Ubuntu 20.04+, Debian 11+)."},
				{report.Warn, "kernel older than 5.4", "Plan an upgrade to a 5.4 or newer kernel."},
				{report.Error, "the release could not be read or parsed", "Run where /proc is mounted."},
			},
		},
		Run: runKernelVersion,
	})
}

func runKernelVersion(_ context.Context, env *Env) Result {
	rel, err := env.Host.KernelRelease()
	if err != nil {
		return errorf("could not read the kernel release: %v", err)
	}
	v, err := sysfs.ParseKernelRelease(rel)
	if err != nil {
		return errorf("could not parse the kernel release: %v", err)
	}
	ev := map[string]any{"release": rel, "version": v.String(), "minimum": minKernel.String(), "recommended": goodKernel.String()}
	var r Result
	switch {
	case v.Less(minKernel):
		r = fail(fmt.Sprintf("kernel %s is older than %d.%d", rel, minKernel.Major, minKernel.Minor))
		r.Remedy = "Boot a supported kernel (≥ 4.18; 5.4 or newer recommended) — the distribution's current kernel: RHEL/Rocky 8+, Ubuntu 20.04+, Debian 11+. " +
			"Vendor stacks (MLNX_OFED/DOCA) must then be installed for that kernel."
	case v.Less(goodKernel):
		r = warn(fmt.Sprintf("kernel %s works but is older than %d.%d", rel, goodKernel.Major, goodKernel.Minor))
		r.Remedy = "Plan an upgrade to a 5.4 or newer kernel; older kernels lack years of RDMA core and driver fixes."
	default:
		r = pass("kernel " + rel)
	}
	r.Observed, r.Expected, r.Evidence = rel, "≥ 4.18 (5.4+ recommended)", ev
	return r
}
