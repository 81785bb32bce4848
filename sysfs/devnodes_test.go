package sysfs_test

import (
	"os"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestDevNodesFromFacts(t *testing.T) {
	tr := sysfstest.NewTree()
	tr.Facts = &sysfs.Facts{Schema: sysfs.FactsSchema, DevNodes: &sysfs.DevNodeFacts{
		User: "uid=1000 gid=1000",
		Dirs: []string{"/dev/infiniband"},
		Nodes: []sysfs.DevNode{
			{Path: "/dev/infiniband", Type: "dir", Mode: "0755"},
			{Path: "/dev/infiniband/uverbs0", Type: sysfs.DevChar, Major: 231, Minor: 192, Mode: "0600", Open: "EACCES"},
			{Path: "/dev/infiniband/rdma_cm", Type: sysfs.DevChar, Major: 10, Minor: 122, Mode: "0666", Open: "ok"},
		}}}
	h := writeTree(t, tr)
	n, err := h.DevNode("/dev/infiniband/uverbs0")
	if err != nil || n.DevNumber() != "231:192" || n.Open != "EACCES" {
		t.Fatalf("uverbs0 = %+v, %v", n, err)
	}
	if _, err := h.DevNode("/dev/infiniband/uverbs1"); !sysfs.IsNotExist(err) || !strings.Contains(err.Error(), "uverbs1") {
		t.Errorf("a node missing from a listed directory must not exist: %v", err)
	}
	if _, err := h.DevNode("/dev/null"); err == nil || sysfs.IsNotExist(err) {
		t.Errorf("a node outside the recorded directories is unknown, not absent: %v", err)
	}
	nodes, err := h.DevNodes("/dev/infiniband")
	if err != nil || len(nodes) != 2 || nodes[0].Path != "/dev/infiniband/rdma_cm" {
		t.Errorf("listing = %+v, %v", nodes, err)
	}
	if h.DevNodeUser() != "uid=1000 gid=1000" {
		t.Errorf("user = %q", h.DevNodeUser())
	}

	// Without a dev_nodes section the facts are unknown.
	tr.Facts.DevNodes = nil
	h2 := writeTree(t, tr)
	if _, err := h2.DevNode("/dev/infiniband/uverbs0"); err == nil || sysfs.IsNotExist(err) || !strings.Contains(err.Error(), "dev_nodes") {
		t.Errorf("no dev_nodes: %v", err)
	}
}

func TestDevNodeLive(t *testing.T) {
	if _, err := os.Stat("/dev/null"); err != nil {
		t.Skip("no /dev/null")
	}
	h := sysfs.OpenLive()
	n, err := h.DevNode("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	if n.Type != sysfs.DevChar || n.DevNumber() != "1:3" || n.Open != sysfs.DevOpenOK || n.Mode != "0666" {
		t.Errorf("/dev/null = %+v", n)
	}
	if _, err := h.DevNode("/dev/infiniband-does-not-exist/uverbs0"); !sysfs.IsNotExist(err) {
		t.Errorf("missing node: %v", err)
	}
	f, err := os.CreateTemp(t.TempDir(), "plain")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if n, err := h.DevNode(f.Name()); err != nil || n.Type != "file" || n.Open != "" {
		t.Errorf("a plain file = %+v, %v (never opened)", n, err)
	}
	df := sysfs.CaptureDevNodes("/dev", "/dev/infiniband-does-not-exist")
	if len(df.Dirs) != 2 || len(df.Nodes) == 0 || !strings.HasPrefix(df.User, "uid=") {
		t.Errorf("capture = %+v", df)
	}
}

func TestParseDevNumber(t *testing.T) {
	if ma, mi, err := sysfs.ParseDevNumber("231:192\n"); err != nil || ma != 231 || mi != 192 {
		t.Errorf("ParseDevNumber = %d:%d, %v", ma, mi, err)
	}
	for _, in := range []string{"", "231", "a:b", "231:-1", "1:2:3", "99999999999:1"} {
		if _, _, err := sysfs.ParseDevNumber(in); err == nil {
			t.Errorf("ParseDevNumber(%q) accepted", in)
		}
	}
}

func FuzzParseDevNumber(f *testing.F) {
	f.Add("231:192")
	f.Add("10:122\n")
	f.Add(":")
	f.Fuzz(func(t *testing.T, s string) {
		ma, mi, err := sysfs.ParseDevNumber(s)
		if err == nil {
			n := sysfs.DevNode{Major: ma, Minor: mi}
			if a, b, err := sysfs.ParseDevNumber(n.DevNumber()); err != nil || a != ma || b != mi {
				t.Fatalf("%q does not round-trip: %d:%d", s, a, b)
			}
		}
	})
}
