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

func TestRDMADevicesFixtures(t *testing.T) {
	for _, tc := range []struct {
		fixture   string
		status    report.Status
		exit      int
		rootCause string
		says      string
	}{
		{"cx5-roce-healthy", report.Pass, 0, "", "2 RDMA device(s): mlx5_0, mlx5_1"},
		{"cx6-ib-healthy", report.Pass, 0, "", "mlx5_0"},
		{"rxe-softroce", report.Pass, 0, "", "rxe0"},
		{"no-ib-device", report.Fail, 14, "rdma.devices", "0000:3b:00.1 (mlx5_ib is loaded but registered no RDMA device"},
		// The missing module is kernel.modules' finding; rdma.devices waits.
		{"mlx5-ib-module-missing", report.Skip, 13, "kernel.modules", "blocked by kernel.modules"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			r := hwRun(t, filepath.Join(hostsDir, tc.fixture), checks.Options{}, "rdma.devices")
			c := hwResult(t, r, "rdma.devices")
			if c.Status != tc.status || !strings.Contains(c.Summary, tc.says) {
				t.Fatalf("%s: %s; want %s saying %q", c.Status, c.Summary, tc.status, tc.says)
			}
			if r.ExitCode != tc.exit || (tc.rootCause != "" && *r.RootCause != tc.rootCause) {
				t.Errorf("exit %d root cause %v, want %d %s", r.ExitCode, r.RootCause, tc.exit, tc.rootCause)
			}
		})
	}
}

func TestRDMADevicesNoDeviceNamesTheWayOut(t *testing.T) {
	r := hwRun(t, filepath.Join(hostsDir, "no-ib-device"), checks.Options{})
	if km := hwResult(t, r, "kernel.modules"); km.Status != report.Pass {
		t.Fatalf("kernel.modules must pass on no-ib-device: %s %s", km.Status, km.Summary)
	}
	c := hwResult(t, r, "rdma.devices")
	for _, s := range []string{"dmesg", "LINK_TYPE_P1", "enable_rdma", "enable_roce", "devlink dev reload pci/0000:3b:00.1", "modprobe -r mlx5_ib"} {
		if !strings.Contains(c.Remedy, s) {
			t.Errorf("remedy does not mention %q: %s", s, c.Remedy)
		}
	}
	if m := c.Evidence["missing"].([]string); len(m) != 1 || m[0] != "0000:3b:00.1" {
		t.Errorf("evidence missing = %v", m)
	}
	if !strings.Contains(strings.Join(c.Details, "\n"), "0000:3b:00.0 ConnectX-5: mlx5_0") {
		t.Errorf("details do not show the function that has its device: %v", c.Details)
	}
}

func TestRDMADevicesReasons(t *testing.T) {
	// The check's own judgement, without the prerequisites that would block it.
	moduleMissing := hwRunOne(t, filepath.Join(hostsDir, "mlx5-ib-module-missing"), "rdma.devices", checks.Options{})
	if moduleMissing.Status != report.Fail || !strings.Contains(moduleMissing.Summary, "module mlx5_ib not loaded") ||
		!strings.Contains(moduleMissing.Remedy, "modprobe mlx5_ib") {
		t.Errorf("module missing: %s: %s / %s", moduleMissing.Status, moduleMissing.Summary, moduleMissing.Remedy)
	}

	tr, _ := sysfstest.Fixture("no-ib-device")
	tr.Facts.RDMASystem = &sysfs.RDMASystem{NetnsMode: "exclusive"}
	excl := hwRunOne(t, hwWrite(t, tr), "rdma.devices", checks.Options{})
	if !strings.Contains(excl.Summary, "another network namespace") || !strings.Contains(excl.Remedy, "rdma system set netns shared") {
		t.Errorf("exclusive netns: %s / %s", excl.Summary, excl.Remedy)
	}

	h := sysfstest.CX5RoCE()
	h.NICs[1].Driver, h.NICs[1].IBDev = "", ""
	unbound := hwRunOne(t, hwWrite(t, sysfstest.Build(h)), "rdma.devices", checks.Options{})
	if unbound.Status != report.Fail || !strings.Contains(unbound.Summary, "no driver bound (mlx5_core)") {
		t.Errorf("unbound: %s: %s", unbound.Status, unbound.Summary)
	}

	none := sysfstest.RXE()
	none.Soft = nil
	noDev := hwRunOne(t, hwWrite(t, sysfstest.Build(none)), "rdma.devices", checks.Options{})
	if noDev.Status != report.Fail || !strings.Contains(noDev.Summary, "no RDMA device") {
		t.Errorf("no device at all: %s: %s", noDev.Status, noDev.Summary)
	}
}

func TestRDMADevicesUnlistableClassIsAnError(t *testing.T) {
	tr := sysfstest.Build(sysfstest.CX5RoCE())
	tr.Remove("/sys/class/infiniband")
	tr.File("/sys/class/infiniband", "not a directory")
	res := hwRunOne(t, hwWrite(t, tr), "rdma.devices", checks.Options{})
	if res.Status != report.Error || !strings.Contains(res.Summary, "sys/class/infiniband") {
		t.Errorf("%s: %s; want error naming the path", res.Status, res.Summary)
	}
}

func TestRDMADevicesCountsVFs(t *testing.T) {
	tr := sysfstest.LargeHost(1, 1, 3)
	// The second VF of the first PF registered no device.
	tr.Remove("/sys/class/infiniband/mlx5_2")
	tr.Remove("/sys/devices/pci0000:10/0000:10:00.0/0000:11:00.3/infiniband")
	res := hwRunOne(t, hwWrite(t, tr), "rdma.devices", checks.Options{})
	if res.Status != report.Fail || !strings.Contains(res.Summary, "1 of 8") {
		t.Errorf("%s: %s", res.Status, res.Summary)
	}
	if !strings.Contains(res.Remedy, "For a VF") {
		t.Errorf("a VF without its device: remedy should mention the PF's devlink port function: %s", res.Remedy)
	}
}
