package snapshot_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// A snapshot of a host whose PCIe path throws AER errors carries the AER
// statistics of the NIC and of every bridge above it, so that the snapshot
// shows the same pcie.aer findings elsewhere.
func TestSnapshotCarriesAERStatistics(t *testing.T) {
	src := filepath.Join(t.TempDir(), "host")
	tr := sysfstest.AERHGX(map[string]sysfstest.AERCounts{
		sysfstest.AERNIC:                {NonFatal: map[string]uint64{"CmpltTO": 1}},
		sysfstest.AERSwitchUpstreamPort: {Correctable: map[string]uint64{"BadTLP": 9000}},
	})
	if err := tr.Write(src); err != nil {
		t.Fatal(err)
	}
	s := capture(t, src, false)
	dir := filepath.Join(t.TempDir(), "out")
	if err := s.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	want, got := reportJSON(t, src), reportJSON(t, dir)
	if want != got {
		t.Errorf("report of the snapshot differs from the source's:\n%s", diffLines(want, got))
	}
	for _, id := range []string{`"pcie.aer/uncorrectable-since-boot"`, `"pcie.aer/correctable-rising"`} {
		if !strings.Contains(got, id) {
			t.Errorf("the snapshot's report lacks %s", id)
		}
	}
	hops := "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0"
	for d := hops; d != "sys/devices/pci0000:15"; d = filepath.Dir(d) {
		for _, f := range []string{"aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal"} {
			if _, err := os.Stat(filepath.Join(dir, d, f)); err != nil {
				t.Errorf("the snapshot lacks %s/%s: %v", d, f, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "sys/devices/pci0000:15/0000:15:01.0/aer_rootport_total_err_cor")); err != nil {
		t.Errorf("the snapshot lacks the root port's totals: %v", err)
	}
}
