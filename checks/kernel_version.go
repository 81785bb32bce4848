package checks

import (
	"context"
	"fmt"
	"regexp"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Kernel thresholds of DESIGN §5: below minKernel fails, below goodKernel warns.
var (
	minKernel  = sysfs.KernelVersion{Major: 4, Minor: 18}
	goodKernel = sysfs.KernelVersion{Major: 5, Minor: 4}
)

// backportKernelRE matches the releases of a distribution kernel whose
// version number understates its RDMA stack: RHEL 8 and its rebuilds (Rocky,
// Alma, Oracle's RHCK) ship 4.18 and rebase the RDMA core and drivers in
// every minor release ("4.18.0-513.5.1.el8_9.x86_64").
var backportKernelRE = regexp.MustCompile(`\.el8(_[0-9]+)?(\.|$)`)

func init() {
	register(Check{
		ID: "kernel.version", Code: 12, Level: 1,
		Title: "the running kernel is recent enough for the RDMA stack",
		Explain: Explanation{
			Judges: "Reads the running kernel's release from /proc/sys/kernel/osrelease: below 4.18 fails; 4.18 to 5.3 warns, " +
				"except a RHEL 8 family kernel (4.18.0-….el8), which carries the RDMA core and drivers backported from later kernels and passes.",
			Why: "The in-kernel RDMA core, the uverbs interface and the drivers evolve with the kernel. The floor is 4.18, RHEL/Rocky 8's kernel; " +
				"an upstream 4.18–5.3 kernel lacks the RDMA fixes and driver support merged since, while distribution kernels carry backports, " +
				"so for them the version number alone says little.",
			Failures: []Failure{
				{report.Fail, "kernel older than 4.18", "Boot a supported kernel (the distribution's current one: RHEL/Rocky 8+, Ubuntu 20.04+, Debian 11+)."},
				{report.Warn, "an upstream-numbered kernel from 4.18 to 5.3",
					"Upstream 4.18–5.3 lacks the RDMA fixes and driver support merged since; distribution kernels carry backports. Keep the distribution's " +
						"current kernel and check the NIC vendor's support for it, or plan an upgrade to 5.4 or newer."},
				{report.Error, "the release could not be read or parsed", "Run where /proc is mounted; by hand: `uname -r`."},
			},
		},
		Run: runKernelVersion,
	})
}

func runKernelVersion(_ context.Context, env *Env) Result {
	expected := "≥ 4.18 (5.4+ recommended)"
	rel, err := env.Host.KernelRelease()
	if err != nil {
		r := errorf("could not read the kernel release: %v", err)
		r.Observed, r.Expected = "release unreadable", expected
		r.Remedy = "Run where /proc is mounted and readable; by hand: `uname -r` (or `cat /proc/sys/kernel/osrelease`)."
		return r
	}
	v, err := sysfs.ParseKernelRelease(rel)
	if err != nil {
		r := errorf("could not parse the kernel release: %v", err)
		r.Observed, r.Expected = fmt.Sprintf("%q", rel), expected
		r.Remedy = "Compare `uname -r` with 4.18 and 5.4 by hand; a snapshot must carry /proc/sys/kernel/osrelease as the kernel wrote it."
		return r
	}
	backports := backportKernelRE.MatchString(rel)
	ev := map[string]any{"release": rel, "version": v.String(), "minimum": minKernel.String(), "recommended": goodKernel.String(),
		"distribution_backports": backports}
	var r Result
	switch {
	case v.Less(minKernel):
		r = fail(fmt.Sprintf("kernel %s is older than %d.%d", rel, minKernel.Major, minKernel.Minor))
		r.Remedy = "Boot a supported kernel (≥ 4.18; 5.4 or newer recommended) — the distribution's current kernel: RHEL/Rocky 8+, Ubuntu 20.04+, Debian 11+. " +
			"Vendor stacks (MLNX_OFED/DOCA) must then be installed for that kernel."
	case v.Less(goodKernel) && backports:
		r = pass(fmt.Sprintf("kernel %s: RHEL 8 family, whose 4.18 carries the RDMA core and drivers backported from later kernels", rel))
	case v.Less(goodKernel):
		r = warn(fmt.Sprintf("kernel %s works but is older than %d.%d", rel, goodKernel.Major, goodKernel.Minor))
		r.Remedy = "Upstream 4.18–5.3 lacks the RDMA fixes and driver support merged since; distribution kernels carry backports. " +
			"If this is a distribution's kernel, keep its current update and check the NIC vendor's support for it; otherwise plan an upgrade to 5.4 or newer."
	default:
		r = pass("kernel " + rel)
	}
	r.Observed, r.Expected, r.Evidence = rel, expected, ev
	return r
}
