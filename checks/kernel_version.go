package checks

import (
	"context"
	"fmt"
	"regexp"
	"sync"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Kernel thresholds of DESIGN §5: below kernelFloor fails, below
// kernelGood warns. The findings' templates spell them as written here;
// minKernel and goodKernel are the same releases parsed (the tests of
// the thresholds fail if a constant stops parsing).
const (
	kernelFloor = "4.18"
	kernelGood  = "5.4"
)

var (
	minKernel, _  = sysfs.ParseKernelRelease(kernelFloor)
	goodKernel, _ = sysfs.ParseKernelRelease(kernelGood)
)

// backportKernelRE matches the releases of a distribution kernel whose
// version number understates its RDMA stack: RHEL 8 and its rebuilds (Rocky,
// Alma, Oracle's RHCK) ship 4.18 and rebase the RDMA core and drivers in
// every minor release ("4.18.0-513.5.1.el8_9.x86_64").
var backportKernelRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\.el8(_[0-9]+)?(\.|$)`) })

// rhel7KernelRE matches RHEL 7 and its rebuilds ("3.10.0-1160.119.1.el7.x86_64"),
// whose 3.10 carries a backported RDMA stack that vendors' stacks supported.
var rhel7KernelRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\.el7(_[0-9]+)?(\.|$)`) })

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
		},
		Run: runKernelVersion,
	})
}

// kernel.version's findings, each about the host's kernel as a whole.
var (
	kernelRecent = declare(Finding{ID: "kernel.version/recent", Status: report.Pass,
		When:    "the kernel is " + kernelGood + " or newer",
		Message: "kernel {release}"})
	kernelRHEL8 = declare(Finding{ID: "kernel.version/rhel8-backports", Status: report.Pass,
		When:    "a RHEL 8 family kernel (4.18.0-….el8): its 4.18 carries the RDMA core and drivers backported from later kernels",
		Message: "kernel {release}: RHEL 8 family, whose 4.18 carries the RDMA core and drivers backported from later kernels"})
	kernelOlderThanGood = declare(Finding{ID: "kernel.version/older-than-recommended", Status: report.Warn,
		When:    "an upstream-numbered kernel from " + kernelFloor + " to 5.3",
		Message: "kernel {release} works but is older than " + kernelGood,
		Fix: "Upstream 4.18–5.3 lacks the RDMA fixes and driver support merged since; distribution kernels carry backports. " +
			"If this is a distribution's kernel, keep its current update and check the NIC vendor's support for it; otherwise plan an upgrade to 5.4 or newer."})
	kernelOldRunsDevices = declare(Finding{ID: "kernel.version/old-runs-devices", Status: report.Warn,
		When:    "the kernel is older than " + kernelFloor + " but runs the RDMA devices found (Ubuntu 18.04's 4.15)",
		Message: "kernel {release} is older than " + kernelFloor + ", but it runs the {devices} RDMA device(s) found",
		Fix:     oldWorkingKernelFix})
	kernelRHEL7RunsDevices = declare(Finding{ID: "kernel.version/rhel7-runs-devices", Status: report.Warn,
		When:    "a RHEL 7 family kernel (3.10.0-….el7), with its backported RDMA stack, runs the RDMA devices found",
		Message: "kernel {release} is older than " + kernelFloor + " (RHEL 7 family, whose 3.10 carries a backported RDMA stack), but it runs the {devices} RDMA device(s) found",
		Fix:     oldWorkingKernelFix})
	kernelTooOld = declare(Finding{ID: "kernel.version/too-old", Status: report.Fail,
		When:    "the kernel is older than " + kernelFloor + " and registered no RDMA device",
		Message: "kernel {release} is older than " + kernelFloor + " and registered no RDMA device",
		Fix: "Boot a supported kernel (≥ 4.18; 5.4 or newer recommended) — the distribution's current kernel: RHEL/Rocky 8+, Ubuntu 20.04+, Debian 11+. " +
			"Vendor stacks (MLNX_OFED/DOCA) must then be installed for that kernel."})
	kernelReleaseUnreadable = declare(Finding{ID: "kernel.version/release-unreadable", Status: report.Error,
		When:    "/proc/sys/kernel/osrelease could not be read",
		Message: "could not read the kernel release: {cause}",
		Fix:     "Run where /proc is mounted and readable; by hand: `uname -r` (or `cat /proc/sys/kernel/osrelease`)."})
	kernelReleaseUnparsable = declare(Finding{ID: "kernel.version/release-unparsable", Status: report.Error,
		When:    "the release does not read as a kernel version",
		Message: "could not parse the kernel release: {cause}",
		Fix:     "Compare `uname -r` with 4.18 and 5.4 by hand; a snapshot must carry /proc/sys/kernel/osrelease as the kernel wrote it."})
)

// oldWorkingKernelFix is for a kernel below 4.18 that still runs its RDMA
// devices: nothing to do at once, an upgrade to plan.
const oldWorkingKernelFix = "Nothing needs changing now: the kernel runs the RDMA devices found. It lacks years of RDMA fixes and driver support unless its " +
	"distribution backports them; keep it only while the NIC vendor's stack supports it (MLNX_OFED/DOCA list the kernels they support), and plan the move to " +
	"a current distribution kernel (RHEL/Rocky 8+, Ubuntu 20.04+, Debian 11+, 5.4 or newer)."

func runKernelVersion(_ context.Context, env *Env) Result {
	expected := "≥ 4.18 (5.4+ recommended)"
	rel, err := env.Host.KernelRelease()
	if err != nil {
		r := kernelReleaseUnreadable.result("", Slots{"cause": err.Error()})
		r.Observed, r.Expected = "release unreadable", expected
		return r
	}
	v, err := sysfs.ParseKernelRelease(rel)
	if err != nil {
		r := kernelReleaseUnparsable.result("", Slots{"cause": err.Error()})
		r.Observed, r.Expected = fmt.Sprintf("%q", rel), expected
		return r
	}
	ev := map[string]any{"release": rel, "version": v.String(), "minimum": minKernel.String(), "recommended": goodKernel.String(),
		"distribution_backports": backportKernelRE().MatchString(rel)}
	devices := len(env.Survey().Devices)
	if v.Less(minKernel) && devices > 0 {
		ev["rdma_devices"] = devices
	}
	r := kernelFinding(rel, v, devices).result("", Slots{"release": rel, "devices": fmt.Sprint(devices)})
	r.Observed, r.Expected, r.Evidence = rel, expected, ev
	return r
}

// kernelFinding judges a release that parsed. A kernel below the floor
// that runs RDMA devices is old but working (DESIGN §5): failing it would
// cordon a working node.
func kernelFinding(rel string, v sysfs.KernelVersion, devices int) *Finding {
	switch {
	case v.Less(minKernel) && devices > 0 && rhel7KernelRE().MatchString(rel):
		return kernelRHEL7RunsDevices
	case v.Less(minKernel) && devices > 0:
		return kernelOldRunsDevices
	case v.Less(minKernel):
		return kernelTooOld
	case v.Less(goodKernel) && backportKernelRE().MatchString(rel):
		return kernelRHEL8
	case v.Less(goodKernel):
		return kernelOlderThanGood
	}
	return kernelRecent
}
