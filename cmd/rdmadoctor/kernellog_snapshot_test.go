package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// TestKernelLogSnapshotReplay: a snapshot of a host whose log holds an
// mlx5 TX timeout, and whose fw_fatal reporter is in error, replays both
// findings: the kernel.log and the devlink answer travel with it, and the
// replay says what the source said.
func TestKernelLogSnapshotReplay(t *testing.T) {
	tr := sysfstest.KernelLogTxTimeout()
	tr.Facts.DevlinkHealth.Reporters[1].State = "error"
	src := filepath.Join(t.TempDir(), "host")
	if err := tr.Write(src); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "node.tar.gz")
	if code, out, errOut := runSnapshot(t, "--root", src, "-o", file); code != 0 {
		t.Fatalf("snapshot: exit %d: %s%s", code, out, errOut)
	}
	host, cleanup, err := openRoot(file)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	wantCode, want := level1JSON(t, src)
	gotCode, got := level1JSON(t, host.Root())
	want = strings.ReplaceAll(want, "ROOT/", "/")
	if wantCode != gotCode || want != got {
		t.Errorf("replay differs from the source (exit %d vs %d):\n%s\n----\n%s", wantCode, gotCode, want, got)
	}
	var rep struct {
		Checks []struct {
			ID, Status string
			Findings   []struct{ ID, Unit string }
		}
	}
	json.Unmarshal([]byte(got), &rep)
	var ids []string
	for _, c := range rep.Checks {
		if c.ID == "kernel.log" {
			for _, f := range c.Findings {
				ids = append(ids, f.ID+" "+f.Unit)
			}
		}
	}
	for _, w := range []string{"kernel.log/tx-timeout ens1f0np0", "kernel.log/devlink-error pci/0000:3b:00.0/fw_fatal"} {
		if !strings.Contains(strings.Join(ids, "\n"), w) {
			t.Errorf("the replay lacks %s: %v", w, ids)
		}
	}
}
