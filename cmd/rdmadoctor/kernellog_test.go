package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayPointsToTheKernelLog: on a replayed snapshot, a failing check
// whose fix says "dmesg" points to the snapshot's kernel.log (or says why
// there is none) in the text report; the JSON report stays the host's.
func TestReplayPointsToTheKernelLog(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "snap")
	code, out, errOut := runCLI(t, "snapshot", "--root", filepath.Join(hostsDir, "no-ib-device"), "-o", snap)
	if code != 0 && code != 1 {
		t.Fatalf("snapshot: exit %d: %s%s", code, out, errOut)
	}
	if !strings.Contains(out, "kernel log not kept: ") {
		t.Errorf("snapshot does not say its source had no kernel log:\n%s", out)
	}
	_, text, _ := runCLI(t, "--root", snap, "--level", "1", "--no-color")
	if !strings.Contains(text, "kernel log: not in this snapshot") {
		t.Errorf("no word on the missing kernel log:\n%s", text)
	}

	line := "[    5.000000] mlx5_core 0000:3b:00.1: mlx5_ib: device registration failed, err -22"
	os.WriteFile(filepath.Join(snap, "kernel.log"), []byte("[    1.000000] rdma_rxe: loaded\n"+line+"\n"), 0o644)
	t.Setenv("COLUMNS", "200")
	code, text, _ = runCLI(t, "--root", snap, "--level", "1", "--no-color")
	if code != 14 {
		t.Fatalf("exit %d, want 14 (rdma.devices)", code)
	}
	want := "kernel log: 2 RDMA line(s) in the snapshot (kernel.log), read it instead of dmesg; the last: [ 5.000000] mlx5_core 0000:3b:00.1"
	if !strings.Contains(text, want) {
		t.Errorf("text report does not point to the kernel log (%q):\n%s", want, text)
	}
	_, js, _ := runCLI(t, "--root", snap, "--level", "1", "--format", "json")
	if strings.Contains(js, "kernel log:") {
		t.Error("the JSON report of a replay differs from the host's: it has the kernel log pointer")
	}
	_, fixture, _ := runCLI(t, "--root", filepath.Join(hostsDir, "no-ib-device"), "--level", "1", "--no-color")
	if strings.Contains(fixture, "kernel log:") {
		t.Error("a fixture, which never had a kernel log, is said to lack one")
	}
}
