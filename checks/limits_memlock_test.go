package checks_test

import (
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
	return netTree(t, tr)
}

func TestLimitsMemlock(t *testing.T) {
	low := func(h *sysfstest.Host) { h.Memlock, h.CapIPCLock = "65536", false }
	runNetCases(t, "limits.memlock", []netCase{
		{name: "cx5-roce-healthy", dir: netFixture("cx5-roce-healthy"), status: report.Pass, contains: []string{"CAP_IPC_LOCK held", "unlimited"}},
		{name: "cx6-ib-healthy", dir: netFixture("cx6-ib-healthy"), status: report.Pass},
		{name: "memlock-64k", dir: netFixture("memlock-64k"), status: report.Fail, exit: 18, rootCause: "limits.memlock",
			contains: []string{"64 KiB", "below 64 MiB", "no CAP_IPC_LOCK", "ENOMEM", "* soft memlock unlimited", "LimitMEMLOCK=infinity", "--ulimit memlock=-1:-1", "IPC_LOCK"}},
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
			status: report.Error, exit: 18, rootCause: "limits.memlock", contains: []string{"proc/self/limits", "no such file"}},
		{name: "binary limits file is an error", dir: memlockHost(t, nil, func(tr *sysfstest.Tree) { tr.File("/proc/self/limits", "\x7fELF\x00\x01garbage") }),
			status: report.Error, exit: 18, rootCause: "limits.memlock", contains: []string{"proc/self/limits"}},
		{name: "low limit and unreadable caps is an error", dir: memlockHost(t, low, func(tr *sysfstest.Tree) { tr.Remove("/proc/self/status") }),
			status: report.Error, exit: 18, rootCause: "limits.memlock", contains: []string{"CAP_IPC_LOCK could not be read"}},
	})
}
