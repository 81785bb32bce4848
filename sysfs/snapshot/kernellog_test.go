package snapshot_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/snapshot"
)

// copyFixture copies a fixture host into a temporary directory (cp -a
// keeps its relative symlinks).
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("cp", "-a", filepath.Join(hostsDir, name), dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return dst
}

// TestSnapshotKeepsTheKernelLog: a snapshot of a root that has a kernel log
// keeps it, written at the top beside the facts and the manifest, and the
// replayed root reads it back.
func TestSnapshotKeepsTheKernelLog(t *testing.T) {
	src := copyFixture(t, "no-ib-device")
	log := "[    5.000000] mlx5_core 0000:3b:00.1: mlx5_ib: device registration failed, err -22\n"
	os.WriteFile(filepath.Join(src, sysfs.KernelLogFile), []byte(log), 0o644)
	s := capture(t, src, false)
	if string(s.KernelLog) != log || s.Manifest.KernelLog == nil || s.Manifest.KernelLog.Lines != 1 {
		t.Fatalf("kernel log %q, manifest %+v", s.KernelLog, s.Manifest.KernelLog)
	}
	if s.Tree.Lookup(sysfs.KernelLogFile) != nil {
		t.Error("kernel.log copied into the tree too: the archive would hold it twice")
	}
	archive := filepath.Join(t.TempDir(), "s.tar.gz")
	if _, err := s.WriteTarGzFile(archive); err != nil {
		t.Fatal(err)
	}
	dir, remove, err := snapshot.UnpackFile(t.Context(), archive, snapshot.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	lines, err := openHost(t, dir).KernelLog()
	if err != nil || len(lines) != 1 || lines[0]+"\n" != log {
		t.Errorf("replayed kernel log %q, %v", lines, err)
	}
}

// TestSnapshotSaysWhyItHasNoKernelLog: a source without one is named in
// the facts' unavailable list, and no kernel.log is written.
func TestSnapshotSaysWhyItHasNoKernelLog(t *testing.T) {
	s := capture(t, filepath.Join(hostsDir, "cx5-roce-healthy"), false)
	if s.KernelLog != nil || s.Manifest.KernelLog != nil {
		t.Fatalf("a kernel log from nowhere: %q", s.KernelLog)
	}
	if r := s.Facts.Unavailable["kernel_log"]; !strings.Contains(r, "kernel.log") || s.Manifest.FactsUnavailable["kernel_log"] != r {
		t.Errorf("unavailable %q, manifest %q", r, s.Manifest.FactsUnavailable["kernel_log"])
	}
	dir := t.TempDir()
	if err := s.WriteDir(filepath.Join(dir, "s")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "s", sysfs.KernelLogFile)); err == nil {
		t.Error("kernel.log written for a source that had none")
	}
}

// TestRedactedKernelLog: --redact rewrites the kernel log with the rest,
// consistently: the MAC and address of the fixture's netdev become the same
// replacements as in the copied files.
func TestRedactedKernelLog(t *testing.T) {
	src := copyFixture(t, "cx5-roce-healthy")
	log := "[   12.000000] mlx5_core 0000:3b:00.0 ens1f0np0: Link up, MAC 0c:42:a1:2b:3c:4c, 192.0.2.10 on cx5-node01\n"
	os.WriteFile(filepath.Join(src, sysfs.KernelLogFile), []byte(log), 0o644)
	s := capture(t, src, true)
	got := string(s.KernelLog)
	// (192.0.2.10 is in the first documentation /24 and may map to itself.)
	for _, secret := range []string{"0c:42:a1:2b:3c:4c", "cx5-node01"} {
		if strings.Contains(got, secret) {
			t.Errorf("redacted kernel log still holds %s: %q", secret, got)
		}
	}
	var mac, addr string
	for _, nd := range s.Facts.Netdevs {
		if nd.Name == "ens1f0np0" && len(nd.Addresses) > 0 {
			mac, addr = nd.MAC, nd.Addresses[0]
		}
	}
	addr, _, _ = strings.Cut(addr, "/")
	if mac == "" || addr == "" || !strings.Contains(got, "MAC "+mac+", "+addr+" on redacted-host") {
		t.Errorf("kernel log %q does not carry the facts' redacted MAC %q and address %q", got, mac, addr)
	}
}
