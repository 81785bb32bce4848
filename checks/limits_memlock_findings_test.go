package checks_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// TestLimitsMemlockFindings: each host gives the finding named, about the
// host as a whole (this process, and the jobs it stands for).
func TestLimitsMemlockFindings(t *testing.T) {
	low := func(h *sysfstest.Host) { h.Memlock, h.CapIPCLock = "65536", false }
	noCap := func(mem string) func(h *sysfstest.Host) {
		return func(h *sysfstest.Host) { h.Memlock, h.CapIPCLock = mem, false }
	}
	lowUser := func(h *sysfstest.Host) { h.Memlock, h.CapIPCLock, h.UserMemlock = "134217728", false, "8192" }
	slurmd := func(memlock, conf string) func(h *sysfstest.Host) {
		return func(h *sysfstest.Host) { h.Slurmd = &sysfstest.Slurmd{PID: 2817, Memlock: memlock, Conf: conf} }
	}
	const except = "PropagateResourceLimitsExcept=MEMLOCK\n"
	for _, tc := range []struct {
		name string
		dir  string
		want string
	}{
		{"healthy, CAP_IPC_LOCK", netFixture("cx5-roce-healthy"), "limits.memlock/cap-held"},
		{"unlimited without the capability", memlockHost(t, noCap("unlimited"), func(tr *sysfstest.Tree) { asUser(tr, 1000) }), "limits.memlock/unlimited"},
		{"128 MiB", memlockHost(t, noCap("134217728"), func(tr *sysfstest.Tree) { asUser(tr, 1000) }), "limits.memlock/enough"},
		{"64 KiB", netFixture("memlock-64k"), "limits.memlock/below"},
		{"64 KiB in docker", memlockHost(t, low, func(tr *sysfstest.Tree) { tr.File("/.dockerenv", "") }), "limits.memlock/below-in-container"},
		{"64 KiB in a Slurm job", memlockHost(t, low, func(tr *sysfstest.Tree) {
			asUser(tr, 1000)
			tr.File("/proc/self/cgroup", "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n")
		}), "limits.memlock/below-in-slurm-job"},
		{"limits unreadable", memlockHost(t, nil, func(tr *sysfstest.Tree) { tr.Remove("/proc/self/limits") }), "limits.memlock/unreadable"},
		{"capabilities unreadable", memlockHost(t, low, func(tr *sysfstest.Tree) { tr.Remove("/proc/self/status") }), "limits.memlock/cap-unreadable"},
		{"a user with enough, logins get 8 MiB", memlockHost(t, lowUser, func(tr *sysfstest.Tree) { asUser(tr, 1000) }), "limits.memlock/users-low"},
		{"root exempt, logins get 8 MiB", memlockHost(t, func(h *sysfstest.Host) { h.UserMemlock = "8192" }, nil), "limits.memlock/login-low"},
		{"root exempt, slurmd 64 KiB", memlockHost(t, slurmd("65536", except), nil), "limits.memlock/slurmd-low"},
		{"root exempt, slurmd's hard limit 64 KiB", memlockHost(t, slurmd("65536", "ClusterName=c\n"), nil), "limits.memlock/slurmd-hard-low"},
		{"root exempt, slurmd unreadable", memlockHost(t, slurmd("65536", except), func(tr *sysfstest.Tree) { tr.Remove("/proc/2817/limits") }),
			"limits.memlock/slurmd-unreadable"},
		{"root exempt, propagation, logins 8 MiB", memlockHost(t, func(h *sysfstest.Host) {
			slurmd("unlimited", "PropagateResourceLimits=ALL\n")(h)
			h.UserMemlock = "8192"
		}, nil), "limits.memlock/slurm-shell-low"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRunOne(t, tc.dir, "limits.memlock", checks.Options{})
			if diff := cmp.Diff([]findingRef{{tc.want, ""}}, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
			}
		})
	}
}
