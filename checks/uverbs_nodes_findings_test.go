package checks_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// TestUverbsNodesFindingIDs: each change of the healthy ConnectX-5 host
// gives the findings named, device by device (rdma_cm's about itself).
func TestUverbsNodesFindingIDs(t *testing.T) {
	const uv0 = "/dev/infiniband/uverbs0"
	node := func(typ string, minor uint32, open string) func(tr *sysfstest.Tree) {
		return func(tr *sysfstest.Tree) {
			sysfstest.SetDevNode(tr, sysfs.DevNode{Path: uv0, Type: typ, Major: 231, Minor: minor, Mode: "0666", Open: open})
		}
	}
	cm := func(n sysfs.DevNode) func(tr *sysfstest.Tree) {
		return func(tr *sysfstest.Tree) {
			n.Path = "/dev/infiniband/rdma_cm"
			sysfstest.SetDevNode(tr, n)
		}
	}
	ok1 := findingRef{"uverbs.nodes/ok", "mlx5_1"}
	for _, tc := range []struct {
		name string
		mut  func(*sysfstest.Tree)
		want []findingRef
	}{
		{"healthy", func(*sysfstest.Tree) {}, []findingRef{{"uverbs.nodes/ok", "mlx5_0"}, ok1}},
		{"missing on a host", func(tr *sysfstest.Tree) { sysfstest.RemoveDevNode(tr, uv0) }, []findingRef{{"uverbs.nodes/node-missing", "mlx5_0"}, ok1}},
		{"missing in a container", func(tr *sysfstest.Tree) {
			tr.File("/.dockerenv", "")
			sysfstest.RemoveDevNode(tr, "/dev/infiniband")
		}, []findingRef{{"uverbs.nodes/missing-in-container", "mlx5_0"}, {"uverbs.nodes/missing-in-container", "mlx5_1"},
			{"uverbs.nodes/rdma-cm-missing", "rdma_cm"}}},
		{"not a character device", node("file", 0, ""), []findingRef{{"uverbs.nodes/not-char", "mlx5_0"}, ok1}},
		{"stale", node(sysfs.DevChar, 193, "ok"), []findingRef{{"uverbs.nodes/stale", "mlx5_0"}, ok1}},
		{"permission denied", node(sysfs.DevChar, 192, "EACCES"), []findingRef{{"uverbs.nodes/permission-denied", "mlx5_0"}, ok1}},
		{"EPERM in exclusive mode", func(tr *sysfstest.Tree) {
			tr.Facts.RDMASystem = &sysfs.RDMASystem{NetnsMode: "exclusive"}
			node(sysfs.DevChar, 192, "EPERM")(tr)
		}, []findingRef{{"uverbs.nodes/other-netns", "mlx5_0"}, ok1}},
		{"no device behind it", node(sysfs.DevChar, 192, "ENODEV"), []findingRef{{"uverbs.nodes/device-gone", "mlx5_0"}, ok1}},
		{"another errno", node(sysfs.DevChar, 192, "EBUSY"), []findingRef{{"uverbs.nodes/open-fails", "mlx5_0"}, ok1}},
		{"dev nodes not recorded", func(tr *sysfstest.Tree) { tr.Facts.DevNodes = nil },
			[]findingRef{{"uverbs.nodes/node-unreadable", "mlx5_0"}, {"uverbs.nodes/node-unreadable", "mlx5_1"}}},
		{"no uverbs device", func(tr *sysfstest.Tree) { tr.Remove("/sys/class/infiniband_verbs/uverbs0") },
			[]findingRef{{"uverbs.nodes/unregistered", "mlx5_0"}, ok1}},
		{"ib_uverbs not loaded", func(tr *sysfstest.Tree) {
			tr.Remove("/sys/class/infiniband_verbs")
			tr.File(sysfs.ProcModules, strings.ReplaceAll(tr.Files[sysfs.ProcModules], "ib_uverbs ", "xx_gone "))
		}, []findingRef{{"uverbs.nodes/ib-uverbs-missing", "mlx5_0"}, {"uverbs.nodes/ib-uverbs-missing", "mlx5_1"}}},
		{"an entry unreadable", func(tr *sysfstest.Tree) {
			for p := range tr.Files {
				if strings.HasSuffix(p, "/infiniband_verbs/uverbs1/ibdev") {
					tr.Remove(p)
					tr.Dirs[p] = true
				}
			}
		}, []findingRef{{"uverbs.nodes/ok", "mlx5_0"}, {"uverbs.nodes/entry-unreadable", "mlx5_1"}}},
		{"class unreadable", func(tr *sysfstest.Tree) {
			tr.Remove(checks.UverbsClass)
			tr.File(checks.UverbsClass, "not a directory")
		}, []findingRef{{"uverbs.nodes/class-unreadable", ""}}},
		{"rdma_cm missing", func(tr *sysfstest.Tree) { sysfstest.RemoveDevNode(tr, "/dev/infiniband/rdma_cm") },
			[]findingRef{{"uverbs.nodes/ok", "mlx5_0"}, ok1, {"uverbs.nodes/rdma-cm-missing", "rdma_cm"}}},
		{"rdma_cm not a character device", cm(sysfs.DevNode{Type: "file", Mode: "0644"}),
			[]findingRef{{"uverbs.nodes/ok", "mlx5_0"}, ok1, {"uverbs.nodes/rdma-cm-not-char", "rdma_cm"}}},
		{"rdma_cm does not open", cm(sysfs.DevNode{Type: sysfs.DevChar, Major: 10, Minor: 58, Mode: "0600", Open: "EACCES"}),
			[]findingRef{{"uverbs.nodes/ok", "mlx5_0"}, ok1, {"uverbs.nodes/rdma-cm-no-open", "rdma_cm"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := uverbsVariant(t, tc.mut)
			if diff := cmp.Diff(tc.want, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
			}
		})
	}
	none := sysfstest.RXE()
	none.Soft = nil
	r := hwRunOne(t, hwWrite(t, sysfstest.Build(none)), "uverbs.nodes", checks.Options{})
	if diff := cmp.Diff([]findingRef{{"uverbs.nodes/no-device", ""}}, refs(r.Findings)); diff != "" {
		t.Errorf("no device: findings (-want +got):\n%s", diff)
	}
}

// Two nodes missing on a host: udev's fix is said once and gives the
// mknod line of each.
func TestUverbsNodesOneUdevFix(t *testing.T) {
	r := uverbsVariant(t, func(tr *sysfstest.Tree) { sysfstest.RemoveDevNode(tr, "/dev/infiniband") })
	if n := strings.Count(r.Remedy, "udev did not create the node(s)"); n != 1 {
		t.Errorf("udev's fix said %d times:\n%s", n, r.Remedy)
	}
	if !strings.Contains(r.Remedy, "mknod -m 0666 /dev/infiniband/uverbs0 c 231 192 && mknod -m 0666 /dev/infiniband/uverbs1 c 231 193") {
		t.Errorf("remedy lacks both mknod lines:\n%s", r.Remedy)
	}
}
