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

// rhel7KernelRE matches RHEL 7 and its rebuilds ("3.10.0-1160.119.1.el7.x86_64"),
// whose 3.10 carries a backported RDMA stack that vendors' stacks supported.
var rhel7KernelRE = regexp.MustCompile(`\.el7(_[0-9]+)?(\.|$)`)

func init() {
	register(Check{
		ID: "kernel.version", Code: 12, Level: 1,
		Title: "the running kernel is recent enough for the RDMA stack",
		Explain: Explanation{
			Judges: "Reads the running kernel's release from /proc/sys/kernel/osrelease. Below 4.18 it fails only when the kernel registered no RDMA device: " +
				"an old kernel that runs the RDMA devices found (RHEL 7's 3.10.0-….el7, Ubuntu 18.04's 4.15) warns. 4.18 to 5.3 warns, " +
				"except a RHEL 8 family kernel (4.18.0-….el8), which carries the RDMA core and drivers backported from later kernels and passes.",
			Why: "The in-kernel RDMA core, the uverbs interface and the drivers evolve with the kernel. The floor is 4.18, RHEL/Rocky 8's kernel; " +
				"an upstream 4.18–5.3 kernel lacks the RDMA fixes and driver support merged since, while distribution kernels carry backports, " +
				"so for them the version number alone says little.",
			Failures: []Failure{
				{report.Fail, "kernel older than 4.18 and no RDMA device registered", "Boot a supported kernel (the distribution's current one: RHEL/Rocky 8+, Ubuntu 20.04+, Debian 11+)."},
				{report.Warn, "kernel older than 4.18 that runs the RDMA devices found", oldWorkingKernelFix},
				{report.Warn, "an upstream-numbered kernel from 4.18 to 5.3",
					"Upstream 4.18–5.3 lacks the RDMA fixes and driver support merged since; distribution kernels carry backports. Keep the distribution's " +
						"current kernel and check the NIC vendor's support for it, or plan an upgrade to 5.4 or newer."},
				{report.Error, "the release could not be read or parsed", "Run where /proc is mounted; by hand: `uname -r`."},
			},
		},
		Run: runKernelVersion,
	})
}

// oldWorkingKernelFix is for a kernel below 4.18 that still runs its RDMA
// devices: nothing to do at once, an upgrade to plan.
const oldWorkingKernelFix = "Nothing needs changing now: the kernel runs the RDMA devices found. It lacks years of RDMA fixes and driver support unless its " +
	"distribution backports them; keep it only while the NIC vendor's stack supports it (MLNX_OFED/DOCA list the kernels they support), and plan the move to " +
	"a current distribution kernel (RHEL/Rocky 8+, Ubuntu 20.04+, Debian 11+, 5.4 or newer)."

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
	case v.Less(minKernel) && len(env.Survey().Devices) > 0:
		// The kernel runs RDMA devices: old, but working (DESIGN §5).
		// Failing it would cordon a working node.
		s := env.Survey()
		ev["rdma_devices"] = len(s.Devices)
		what := ""
		if rhel7KernelRE.MatchString(rel) {
			what = " (RHEL 7 family, whose 3.10 carries a backported RDMA stack)"
		}
		r = warn(fmt.Sprintf("kernel %s is older than %d.%d%s, but it runs the %d RDMA device(s) found", rel, minKernel.Major, minKernel.Minor, what, len(s.Devices)))
		r.Remedy = oldWorkingKernelFix
	case v.Less(minKernel):
		r = fail(fmt.Sprintf("kernel %s is older than %d.%d and registered no RDMA device", rel, minKernel.Major, minKernel.Minor))
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
