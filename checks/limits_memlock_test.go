package checks_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func memlockHost(t *testing.T, edit func(h *sysfstest.Host), tree func(t *sysfstest.Tree)) string {
	h := sysfstest.CX5RoCE()
	if edit != nil {
		edit(&h)
	}
	tr := sysfstest.Build(h)
	if tree != nil {
		tree(tr)
	}
	return hwWrite(t, tr)
}

func TestLimitsMemlock(t *testing.T) {
	low := func(h *sysfstest.Host) { h.Memlock, h.CapIPCLock = "65536", false }
	runNetCases(t, "limits.memlock", []netCase{
		{name: "cx5-roce-healthy", dir: netFixture("cx5-roce-healthy"), status: report.Pass, contains: []string{"CAP_IPC_LOCK held", "unlimited"}},
		{name: "cx6-ib-healthy", dir: netFixture("cx6-ib-healthy"), status: report.Pass},
		{name: "memlock-64k", dir: netFixture("memlock-64k"), status: report.Fail, exit: 18, rootCause: "limits.memlock",
			contains: []string{"64 KiB", "below 64 MiB", "no CAP_IPC_LOCK", "ENOMEM", "* soft memlock unlimited", "LimitMEMLOCK=infinity", "--ulimit memlock=-1:-1", "IPC_LOCK",
				// the fixture runs as root under a `*` line that cannot reach it
				"This process runs as root", "rdma.conf:2", "`*` lines never apply to root (limits.conf(5))",
				"for root add `root soft memlock unlimited` / `root hard memlock unlimited`",
				"slurmd.service", "systemctl daemon-reexec"}},
		{name: "root with a root line: the starter is named, not the root rule", dir: memlockHost(t, low, func(tr *sysfstest.Tree) {
			tr.File("/etc/security/limits.d/root.conf", "root soft memlock unlimited\nroot hard memlock unlimited\n")
			tr.File("/proc/self/cgroup", "0::/system.slice/rdma-check.service\n")
		}), status: report.Fail, exit: 18, rootCause: "limits.memlock",
			contains: []string{"root.conf:1 already allows enough, but this process has less", "systemd unit rdma-check.service", "systemctl edit rdma-check.service"}},
		{name: "a user under slurmd", dir: memlockHost(t, low, func(tr *sysfstest.Tree) {
			asUser(tr, 1000)
			tr.File("/proc/self/cgroup", "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n")
		}), status: report.Fail, exit: 18, rootCause: "limits.memlock",
			contains: []string{"rdma.conf:2 already allows enough", "started by slurmd", "LimitMEMLOCK=infinity` in slurmd.service"}},
		{name: "a user, starter unknown: every cause listed", dir: memlockHost(t, low, func(tr *sysfstest.Tree) { asUser(tr, 1000) }),
			status: report.Fail, exit: 18, rootCause: "limits.memlock",
			contains: []string{"already allows enough", "a systemd unit, in a container, by slurmd, or in a session opened before the change"}},
		{name: "a user whose limits.d is low gets no excuse", dir: memlockHost(t, func(h *sysfstest.Host) { low(h); h.UserMemlock = "64" }, func(tr *sysfstest.Tree) { asUser(tr, 1000) }),
			status: report.Fail, exit: 18, rootCause: "limits.memlock", lacks: []string{"already allows enough", "This process runs as root"}},
		{name: "64k with CAP_IPC_LOCK passes", dir: memlockHost(t, func(h *sysfstest.Host) { low(h); h.CapIPCLock = true }, nil),
			status: report.Pass, contains: []string{"CAP_IPC_LOCK held", "soft 64 KiB"}},
		{name: "128 MiB without the capability passes", dir: memlockHost(t, func(h *sysfstest.Host) { h.Memlock, h.CapIPCLock = "134217728", false }, nil),
			status: report.Pass, contains: []string{"128 MiB ≥ 64 MiB"}},
		{name: "--min-memlock 32KiB lets 64 KiB pass", dir: memlockHost(t, low, nil), opts: checks.Options{MinMemlock: 32 << 10},
			status: report.Pass},
		{name: "hard limit higher than soft: say ulimit -l", dir: memlockHost(t, low, func(tr *sysfstest.Tree) {
			tr.File("/proc/self/limits", "Limit                     Soft Limit           Hard Limit           Units     \nMax locked memory         65536                unlimited            bytes     \n")
		}), status: report.Fail, exit: 18, rootCause: "limits.memlock", contains: []string{"ulimit -l"}},
		{name: "users' default below the threshold warns", dir: memlockHost(t, func(h *sysfstest.Host) { h.UserMemlock = "8192" }, nil),
			status: report.Warn, contains: []string{"users' jobs get less", "8 MiB", "rdma.conf:2"}},
		{name: "no users' default configured warns", dir: memlockHost(t, func(h *sysfstest.Host) { h.UserMemlock = "none" }, nil),
			status: report.Warn, contains: []string{"no memlock default is configured"}},
		{name: "systemd default below the threshold warns", dir: memlockHost(t, nil, func(tr *sysfstest.Tree) {
			tr.File("/etc/systemd/system.conf", "[Manager]\n#DefaultLimitMEMLOCK=\nDefaultLimitMEMLOCK=8M\n")
		}), status: report.Warn, contains: []string{"DefaultLimitMEMLOCK=8M", "system.conf:3"}},
		{name: "systemd drop-in raises it", dir: memlockHost(t, nil, func(tr *sysfstest.Tree) {
			tr.File("/etc/systemd/system.conf", "[Manager]\nDefaultLimitMEMLOCK=8M\n")
			tr.File("/etc/systemd/system.conf.d/rdma.conf", "[Manager]\nDefaultLimitMEMLOCK=infinity\n")
		}), status: report.Pass, contains: []string{"DefaultLimitMEMLOCK=infinity"}},
		{name: "only a group is raised", dir: memlockHost(t, func(h *sysfstest.Host) { h.UserMemlock = "none" }, func(tr *sysfstest.Tree) {
			tr.File("/etc/security/limits.conf", "@rdma - memlock unlimited\n")
		}), status: report.Pass, contains: []string{"only these users/groups", "@rdma"}},
		{name: "limits file missing is an error with the path", dir: memlockHost(t, nil, func(tr *sysfstest.Tree) { tr.Remove("/proc/self/limits") }),
			status: report.Error, exit: 18, rootCause: "limits.memlock", contains: []string{"proc/self/limits", "no such file", "ulimit -l"}},
		{name: "binary limits file is an error", dir: memlockHost(t, nil, func(tr *sysfstest.Tree) { tr.File("/proc/self/limits", "\x7fELF\x00\x01garbage") }),
			status: report.Error, exit: 18, rootCause: "limits.memlock", contains: []string{"proc/self/limits"}},
		{name: "low limit and unreadable caps is an error", dir: memlockHost(t, low, func(tr *sysfstest.Tree) { tr.Remove("/proc/self/status") }),
			status: report.Error, exit: 18, rootCause: "limits.memlock", contains: []string{"CAP_IPC_LOCK could not be read", "grep CapEff"}},
		{name: "systemd default not set is a detail, not a warning", dir: netFixture("cx5-roce-healthy"), status: report.Pass,
			contains: []string{"DefaultLimitMEMLOCK not set", "reported, not judged"}},
	})
}

// asUser makes the fixture's process run as an ordinary user.
func asUser(tr *sysfstest.Tree, uid int) {
	st := tr.Files["/proc/self/status"]
	tr.File("/proc/self/status", strings.Replace(st, "Uid:\t0\t0\t0\t0", fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d", uid, uid, uid, uid), 1))
}
