package checks_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestUverbsNodesFixtures(t *testing.T) {
	for _, tc := range []struct {
		fixture   string
		status    report.Status
		exit      int
		rootCause string
		says      string
	}{
		{"cx5-roce-healthy", report.Pass, 0, "", "2 uverbs node(s) present and openable: uverbs0, uverbs1"},
		{"cx6-ib-healthy", report.Pass, 0, "", "uverbs0"},
		{"rxe-softroce", report.Pass, 0, "", "uverbs0"},
		{"uverbs-node-missing", report.Fail, 15, "uverbs.nodes", "container (docker: /.dockerenv exists)"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			r := hwRun(t, filepath.Join(hostsDir, tc.fixture), checks.Options{}, "uverbs.nodes")
			c := hwResult(t, r, "uverbs.nodes")
			if c.Status != tc.status || !strings.Contains(c.Summary, tc.says) {
				t.Fatalf("%s: %s; want %s saying %q", c.Status, c.Summary, tc.status, tc.says)
			}
			if r.ExitCode != tc.exit || (tc.rootCause != "" && *r.RootCause != tc.rootCause) {
				t.Errorf("exit %d root cause %v, want %d %s", r.ExitCode, r.RootCause, tc.exit, tc.rootCause)
			}
		})
	}
	r := hwRun(t, filepath.Join(hostsDir, "uverbs-node-missing"), checks.Options{}, "uverbs.nodes")
	c := hwResult(t, r, "uverbs.nodes")
	for _, s := range []string{"--device=/dev/infiniband/uverbs0", "--device=/dev/infiniband/uverbs1", "IPC_LOCK", "device plugin"} {
		if !strings.Contains(c.Remedy, s) {
			t.Errorf("remedy does not mention %q: %s", s, c.Remedy)
		}
	}
	// The container is said once, with every missing node listed.
	if n := strings.Count(c.Summary, "container"); n != 1 ||
		!strings.Contains(c.Summary, "/dev/infiniband/uverbs0 (mlx5_0), /dev/infiniband/uverbs1 (mlx5_1) missing") {
		t.Errorf("container named %d times, or nodes not listed: %s", n, c.Summary)
	}
	if c.Observed == "" || c.Expected == "" {
		t.Errorf("observed %q expected %q", c.Observed, c.Expected)
	}
}

// uverbsVariant builds the healthy ConnectX-5 host, changes it and runs
// uverbs.nodes on it.
func uverbsVariant(t *testing.T, mut func(*sysfstest.Tree)) checks.Result {
	t.Helper()
	tr := sysfstest.Build(sysfstest.CX5RoCE())
	mut(tr)
	return hwRunOne(t, hwWrite(t, tr), "uverbs.nodes", checks.Options{})
}

func TestUverbsNodesFindings(t *testing.T) {
	uv0 := "/dev/infiniband/uverbs0"
	for _, tc := range []struct {
		name         string
		mut          func(*sysfstest.Tree)
		status       report.Status
		says, remedy string
		// more must be in the remedy in this order; lacks must not be in it.
		more, lacks []string
	}{
		{"missing on a host", func(tr *sysfstest.Tree) { sysfstest.RemoveDevNode(tr, uv0) }, report.Fail,
			uv0 + " is missing although the kernel has uverbs0 (231:192)", "udevadm trigger --subsystem-match=infiniband_verbs",
			// creating the node is enough: nothing is reloaded
			[]string{"Nothing needs reloading", "mknod -m 0666 /dev/infiniband/uverbs0 c 231 192"}, []string{"modprobe -r", "Reloading"}},
		{"permission denied", func(tr *sysfstest.Tree) {
			tr.Facts.DevNodes.User = "uid=1000 gid=1000"
			sysfstest.SetDevNode(tr, sysfs.DevNode{Path: uv0, Type: sysfs.DevChar, Major: 231, Minor: 192, Mode: "0600", Open: "EACCES"})
		}, report.Fail, "does not open for uid=1000 gid=1000: permission denied (mode 0600, owner 0:0)", "a tighter mode means a local udev rule overrode it: " +
			"find the rule that tightened it (`grep -rn uverbs /etc/udev/rules.d /usr/lib/udev/rules.d`) or add `SUBSYSTEM==\"infiniband_verbs\", KERNEL==\"uverbs*\", MODE=\"0666\"`", nil, nil},
		{"regular file", func(tr *sysfstest.Tree) {
			sysfstest.SetDevNode(tr, sysfs.DevNode{Path: uv0, Type: "file", Mode: "0644"})
		}, report.Fail, "is a file, not a character device", "udevadm trigger", nil, nil},
		{"stale device number", func(tr *sysfstest.Tree) {
			sysfstest.SetDevNode(tr, sysfs.DevNode{Path: uv0, Type: sysfs.DevChar, Major: 231, Minor: 193, Mode: "0666", Open: "ok"})
		}, report.Fail, "is char 231:193 but the kernel's uverbs0 is 231:192", "stale node", nil, nil},
		{"no device behind the node", func(tr *sysfstest.Tree) {
			sysfstest.SetDevNode(tr, sysfs.DevNode{Path: uv0, Type: sysfs.DevChar, Major: 231, Minor: 192, Mode: "0666", Open: "ENXIO"})
		}, report.Fail, "ENXIO", "dmesg",
			// wait for the driver's recovery first; reload mlx5_ib only on an idle host, saying what it breaks
			[]string{"run the check again", "the host carries no traffic", "reloading mlx5_ib (`modprobe -r mlx5_ib && modprobe mlx5_ib`)", "Reloading mlx5_ib interrupts the host", "IPoIB", "mlx5_bond_N", "Drain the node first"},
			[]string{"modprobe -r ib_uverbs"}},
		{"EPERM in exclusive netns mode", func(tr *sysfstest.Tree) {
			tr.Facts.RDMASystem = &sysfs.RDMASystem{NetnsMode: "exclusive"}
			sysfstest.SetDevNode(tr, sysfs.DevNode{Path: uv0, Type: sysfs.DevChar, Major: 231, Minor: 192, Mode: "0666", Open: "EPERM"})
		}, report.Fail, "EPERM — the RDMA subsystem is in exclusive netns mode and mlx5_0 belongs to another network namespace",
			"The RDMA subsystem is in exclusive network-namespace mode (`rdma system` shows `netns exclusive`): mlx5_0 is visible",
			[]string{"Run the check and the applications in the device's namespace", "nsenter --net", "do not switch it to shared"},
			[]string{"udev rule", "MODE="}},
		{"EPERM in shared mode is the device cgroup or the mode", func(tr *sysfstest.Tree) {
			sysfstest.SetDevNode(tr, sysfs.DevNode{Path: uv0, Type: sysfs.DevChar, Major: 231, Minor: 192, Mode: "0666", Open: "EPERM"})
		}, report.Fail, "permission denied", "device cgroup", nil, []string{"exclusive"}},
		{"no uverbs device although ib_uverbs is loaded", func(tr *sysfstest.Tree) {
			tr.Remove("/sys/class/infiniband_verbs/uverbs0")
		}, report.Fail, "/sys/class/infiniband_verbs although ib_uverbs is loaded (the device is still registering", "dmesg",
			[]string{"run the check again", "the host carries no traffic", "`modprobe -r mlx5_ib && modprobe mlx5_ib`", "Drain the node first"},
			[]string{"modprobe -r ib_uverbs"}},
		{"rdma_cm missing", func(tr *sysfstest.Tree) { sysfstest.RemoveDevNode(tr, "/dev/infiniband/rdma_cm") }, report.Warn,
			"rdma_cm is missing (rdma_ucm is loaded)", "librdmacm", nil, nil},
		{"dev nodes not recorded", func(tr *sysfstest.Tree) { tr.Facts.DevNodes = nil }, report.Error, "dev_nodes", "ls -l /dev/infiniband", nil, nil},
		{"ib_uverbs not loaded", func(tr *sysfstest.Tree) {
			tr.Remove("/sys/class/infiniband_verbs")
			tr.File(sysfs.ProcModules, strings.ReplaceAll(tr.Files[sysfs.ProcModules], "ib_uverbs ", "xx_gone "))
		}, report.Fail, "ib_uverbs is not loaded", "modprobe ib_uverbs", nil, nil},
		{"kubernetes pod", func(tr *sysfstest.Tree) {
			tr.File("/proc/1/cgroup", "0::/kubepods.slice/kubepods-besteffort.slice/cri-containerd-1234.scope\n")
			sysfstest.RemoveDevNode(tr, "/dev/infiniband")
		}, report.Fail, "container (kubepods: /proc/1/cgroup names it)", "device plugin", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := uverbsVariant(t, tc.mut)
			if res.Status != tc.status || !strings.Contains(res.Summary, tc.says) {
				t.Fatalf("%s: %s; want %s saying %q", res.Status, res.Summary, tc.status, tc.says)
			}
			if !strings.Contains(res.Remedy, tc.remedy) {
				t.Errorf("remedy %q does not say %q", res.Remedy, tc.remedy)
			}
			at := strings.Index(res.Remedy, tc.remedy)
			for _, w := range tc.more {
				i := strings.Index(res.Remedy, w)
				if i < 0 || i < at {
					t.Errorf("remedy lacks %q, or says it out of order:\n%s", w, res.Remedy)
				}
				at = i
			}
			for _, w := range tc.lacks {
				if strings.Contains(res.Remedy, w) {
					t.Errorf("remedy must not say %q:\n%s", w, res.Remedy)
				}
			}
			if res.Observed == "" || res.Expected == "" {
				t.Errorf("observed %q, expected %q", res.Observed, res.Expected)
			}
		})
	}
}

func TestUverbsNodesManyDevices(t *testing.T) {
	res := hwRunOne(t, hwWrite(t, sysfstest.LargeHost(1, 1, 6)), "uverbs.nodes", checks.Options{})
	if res.Status != report.Pass || !strings.HasPrefix(res.Summary, "14 uverbs node(s)") {
		t.Errorf("%s: %s", res.Status, res.Summary)
	}
}

func TestUverbsNodesUnreadableClassIsAnError(t *testing.T) {
	res := uverbsVariant(t, func(tr *sysfstest.Tree) {
		for p := range tr.Files {
			if strings.HasSuffix(p, "/infiniband_verbs/uverbs1/ibdev") {
				tr.Remove(p)
				tr.Dirs[p] = true // a directory where the attribute should be
			}
		}
	})
	if res.Status != report.Error || !strings.Contains(res.Summary, "uverbs1/ibdev") {
		t.Errorf("%s: %s; want error naming the file", res.Status, res.Summary)
	}
}

// A software device is re-created with rdma link: reloading rdma_rxe would
// delete it for good.
func TestUverbsNodesSoftwareDeviceIsReAdded(t *testing.T) {
	tr := sysfstest.Build(sysfstest.RXE())
	tr.Remove("/sys/class/infiniband_verbs/uverbs0")
	res := hwRunOne(t, hwWrite(t, tr), "uverbs.nodes", checks.Options{})
	if res.Status != report.Fail || !strings.Contains(res.Summary, "rxe0: no uverbs device") {
		t.Fatalf("%s: %s", res.Status, res.Summary)
	}
	if !strings.Contains(res.Remedy, "re-create the software device: `rdma link delete rxe0 && rdma link add rxe0 type rxe netdev enp0s3`") ||
		strings.Contains(res.Remedy, "modprobe -r") {
		t.Errorf("remedy: %s", res.Remedy)
	}
}
