package checks_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// uv is a uverbs.nodes finding about a device (or rdma_cm).
func uv(slug, unit string) findingRef { return findingRef{"uverbs.nodes/" + slug, unit} }

func TestUverbsNodesFixtures(t *testing.T) {
	for _, tc := range []struct {
		fixture   string
		status    report.Status
		exit      int
		rootCause string
		want      []findingRef
	}{
		{"cx5-roce-healthy", report.Pass, 0, "", []findingRef{uv("ok", "mlx5_0"), uv("ok", "mlx5_1")}},
		{"cx6-ib-healthy", report.Pass, 0, "", []findingRef{uv("ok", "mlx5_0")}},
		{"rxe-softroce", report.Pass, 0, "", []findingRef{uv("ok", "rxe0")}},
		{"uverbs-node-missing", report.Fail, 15, "uverbs.nodes",
			[]findingRef{uv("missing-in-container", "mlx5_0"), uv("missing-in-container", "mlx5_1"), uv("rdma-cm-missing", "rdma_cm")}},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			r := hwRun(t, filepath.Join(hostsDir, tc.fixture), checks.Options{}, "uverbs.nodes")
			c := hwResult(t, r, "uverbs.nodes")
			if c.Status != tc.status {
				t.Fatalf("%s: %s; want %s", c.Status, c.Summary, tc.status)
			}
			if diff := cmp.Diff(tc.want, refs(c.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			if r.ExitCode != tc.exit || (tc.rootCause != "" && *r.RootCause != tc.rootCause) {
				t.Errorf("exit %d root cause %v, want %d %s", r.ExitCode, r.RootCause, tc.exit, tc.rootCause)
			}
		})
	}
	r := hwRun(t, filepath.Join(hostsDir, "uverbs-node-missing"), checks.Options{}, "uverbs.nodes")
	c := hwResult(t, r, "uverbs.nodes")
	// Every missing node is passed to the container by name.
	for _, s := range []string{"--device=/dev/infiniband/uverbs0", "--device=/dev/infiniband/uverbs1"} {
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

// TestUverbsNodesRemedies: the remedy's commands, in order, for each fault;
// the words of the summary only where they carry a number or a name.
func TestUverbsNodesRemedies(t *testing.T) {
	uv0 := "/dev/infiniband/uverbs0"
	ok1 := uv("ok", "mlx5_1")
	for _, tc := range []struct {
		name         string
		mut          func(*sysfstest.Tree)
		status       report.Status
		want         []findingRef
		says, remedy string
		// more must be in the remedy in this order; lacks must not be in it.
		more, lacks []string
	}{
		{"missing on a host", func(tr *sysfstest.Tree) { sysfstest.RemoveDevNode(tr, uv0) }, report.Fail, []findingRef{uv("node-missing", "mlx5_0"), ok1},
			"uverbs0 (231:192)", "udevadm trigger --subsystem-match=infiniband_verbs",
			// creating the node is enough: nothing is reloaded
			[]string{"mknod -m 0666 /dev/infiniband/uverbs0 c 231 192"}, []string{"modprobe -r", "Reloading"}},
		{"permission denied", func(tr *sysfstest.Tree) {
			tr.Facts.DevNodes.User = "uid=1000 gid=1000"
			sysfstest.SetDevNode(tr, sysfs.DevNode{Path: uv0, Type: sysfs.DevChar, Major: 231, Minor: 192, Mode: "0600", Open: "EACCES"})
		}, report.Fail, []findingRef{uv("permission-denied", "mlx5_0"), ok1},
			"for uid=1000 gid=1000: permission denied (mode 0600, owner 0:0)", "`grep -rn uverbs /etc/udev/rules.d /usr/lib/udev/rules.d`", nil, nil},
		{"regular file", func(tr *sysfstest.Tree) {
			sysfstest.SetDevNode(tr, sysfs.DevNode{Path: uv0, Type: "file", Mode: "0644"})
		}, report.Fail, []findingRef{uv("not-char", "mlx5_0"), ok1}, "", "udevadm trigger", nil, nil},
		{"stale device number", func(tr *sysfstest.Tree) {
			sysfstest.SetDevNode(tr, sysfs.DevNode{Path: uv0, Type: sysfs.DevChar, Major: 231, Minor: 193, Mode: "0666", Open: "ok"})
		}, report.Fail, []findingRef{uv("stale", "mlx5_0"), ok1}, "is char 231:193 but the kernel's uverbs0 is 231:192", "", nil, nil},
		{"no device behind the node", func(tr *sysfstest.Tree) {
			sysfstest.SetDevNode(tr, sysfs.DevNode{Path: uv0, Type: sysfs.DevChar, Major: 231, Minor: 192, Mode: "0666", Open: "ENXIO"})
		}, report.Fail, []findingRef{uv("device-gone", "mlx5_0"), ok1}, "", "dmesg",
			// wait for the driver's recovery first; reload mlx5_ib only on an idle host, saying what it breaks
			[]string{"run the check again", "`modprobe -r mlx5_ib && modprobe mlx5_ib`", "Drain the node first"},
			[]string{"modprobe -r ib_uverbs"}},
		{"EPERM in exclusive netns mode", func(tr *sysfstest.Tree) {
			tr.Facts.RDMASystem = &sysfs.RDMASystem{NetnsMode: "exclusive"}
			sysfstest.SetDevNode(tr, sysfs.DevNode{Path: uv0, Type: sysfs.DevChar, Major: 231, Minor: 192, Mode: "0666", Open: "EPERM"})
		}, report.Fail, []findingRef{uv("other-netns", "mlx5_0"), ok1}, "",
			"The RDMA subsystem is in exclusive network-namespace mode (`rdma system` shows `netns exclusive`): mlx5_0 is visible",
			[]string{"nsenter --net", "do not switch it to shared"},
			[]string{"udev rule", "MODE="}},
		{"EPERM in shared mode is the device cgroup or the mode", func(tr *sysfstest.Tree) {
			sysfstest.SetDevNode(tr, sysfs.DevNode{Path: uv0, Type: sysfs.DevChar, Major: 231, Minor: 192, Mode: "0666", Open: "EPERM"})
		}, report.Fail, []findingRef{uv("permission-denied", "mlx5_0"), ok1}, "", "device cgroup", nil, []string{"exclusive"}},
		{"no uverbs device although ib_uverbs is loaded", func(tr *sysfstest.Tree) {
			tr.Remove("/sys/class/infiniband_verbs/uverbs0")
		}, report.Fail, []findingRef{uv("unregistered", "mlx5_0"), ok1}, "", "dmesg",
			[]string{"run the check again", "`modprobe -r mlx5_ib && modprobe mlx5_ib`", "Drain the node first"},
			[]string{"modprobe -r ib_uverbs"}},
		{"rdma_cm missing", func(tr *sysfstest.Tree) { sysfstest.RemoveDevNode(tr, "/dev/infiniband/rdma_cm") }, report.Warn,
			[]findingRef{uv("ok", "mlx5_0"), ok1, uv("rdma-cm-missing", "rdma_cm")}, "", "librdmacm", nil, nil},
		{"dev nodes not recorded", func(tr *sysfstest.Tree) { tr.Facts.DevNodes = nil }, report.Error,
			[]findingRef{uv("node-unreadable", "mlx5_0"), uv("node-unreadable", "mlx5_1")}, "", "ls -l /dev/infiniband", nil, nil},
		{"ib_uverbs not loaded", func(tr *sysfstest.Tree) {
			tr.Remove("/sys/class/infiniband_verbs")
			tr.File(sysfs.ProcModules, strings.ReplaceAll(tr.Files[sysfs.ProcModules], "ib_uverbs ", "xx_gone "))
		}, report.Fail, []findingRef{uv("ib-uverbs-missing", "mlx5_0"), uv("ib-uverbs-missing", "mlx5_1")}, "", "modprobe ib_uverbs", nil, nil},
		{"kubernetes pod", func(tr *sysfstest.Tree) {
			tr.File("/proc/1/cgroup", "0::/kubepods.slice/kubepods-besteffort.slice/cri-containerd-1234.scope\n")
			sysfstest.RemoveDevNode(tr, "/dev/infiniband")
		}, report.Fail, []findingRef{uv("missing-in-container", "mlx5_0"), uv("missing-in-container", "mlx5_1"), uv("rdma-cm-missing", "rdma_cm")},
			// how the container was known is said in words only
			"container (kubepods: /proc/1/cgroup names it)", "device plugin", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := uverbsVariant(t, tc.mut)
			if res.Status != tc.status || !strings.Contains(res.Summary, tc.says) {
				t.Fatalf("%s: %s; want %s saying %q", res.Status, res.Summary, tc.status, tc.says)
			}
			if diff := cmp.Diff(tc.want, refs(res.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
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
	if diff := cmp.Diff([]findingRef{uv("ok", "mlx5_0"), uv("entry-unreadable", "mlx5_1")}, refs(res.Findings)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
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
	if diff := cmp.Diff([]findingRef{uv("unregistered", "rxe0")}, refs(res.Findings)); diff != "" {
		t.Fatalf("findings (-want +got):\n%s", diff)
	}
	if !strings.Contains(res.Remedy, "re-create the software device: `rdma link delete rxe0 && rdma link add rxe0 type rxe netdev enp0s3`") ||
		strings.Contains(res.Remedy, "modprobe -r") {
		t.Errorf("remedy: %s", res.Remedy)
	}
}
