package checks_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
	for _, s := range []string{"dmesg", "mlxconfig -d 0000:3b:00.1 query | grep LINK_TYPE", "enable_rdma", "enable_roce", "devlink dev reload pci/0000:3b:00.1", "modprobe -r mlx5_ib"} {
		if !strings.Contains(c.Remedy, s) {
			t.Errorf("remedy does not mention %q: %s", s, c.Remedy)
		}
	}
	// The link type never stops a device from registering: it comes after
	// the advice that can (enable_rdma), and names no single port.
	if strings.Index(c.Remedy, "LINK_TYPE") < strings.Index(c.Remedy, "enable_rdma") || strings.Contains(c.Remedy, "LINK_TYPE_P1") {
		t.Errorf("link type advice first or port 1 only: %s", c.Remedy)
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
	if !slices.Contains(refs(res.Findings), findingRef{"rdma.devices/not-registered-mlx5-vf", "0000:11:00.3"}) {
		t.Errorf("no not-registered-mlx5-vf finding for the VF: %v", refs(res.Findings))
	}
	for _, want := range []string{"`devlink port show`", "`devlink port function set pci/0000:11:00.0/<port index> roce enable`", "kernel 6.2"} {
		if !strings.Contains(res.Remedy, want) {
			t.Errorf("a VF without its device: remedy lacks %q: %s", want, res.Remedy)
		}
	}
}

// A ConnectX-3 (mlx4) is told about its port type files, not about mlx5's
// devlink parameters.
func TestRDMADevicesMLX4Advice(t *testing.T) {
	h := sysfstest.CX5RoCE()
	h.Modules = append(h.Modules, "mlx4_core", "mlx4_ib")
	n := &h.NICs[1]
	n.Device, n.Driver, n.IBDev = 0x1007, "mlx4_core", ""
	res := hwRunOne(t, hwWrite(t, sysfstest.Build(h)), "rdma.devices", checks.Options{})
	if res.Status != report.Fail || !strings.Contains(res.Summary, "mlx4_ib is loaded but registered no RDMA device") {
		t.Fatalf("%s: %s", res.Status, res.Summary)
	}
	if diff := cmp.Diff([]findingRef{{"rdma.devices/registered", "0000:3b:00.0"}, {"rdma.devices/not-registered-mlx4", "0000:3b:00.1"}}, refs(res.Findings)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	if !strings.Contains(res.Remedy, "/sys/bus/pci/devices/0000:3b:00.1/mlx4_port<n> (ib, eth or auto)") {
		t.Errorf("no mlx4 port type advice: %s", res.Remedy)
	}
	if strings.Contains(res.Remedy, "enable_rdma") || strings.Contains(res.Remedy, "devlink dev param") {
		t.Errorf("mlx5 advice for an mlx4 function: %s", res.Remedy)
	}
}

// A ConnectX function held by vfio-pci has no device because the host does
// not drive it; run alone, rdma.devices says so instead of suspecting mlx5_ib.
func TestRDMADevicesPassthrough(t *testing.T) {
	res := hwRunOne(t, filepath.Join(hostsDir, "mlx5-vfio-passthrough"), "rdma.devices", checks.Options{})
	if res.Status != report.Fail || !strings.Contains(res.Summary, "0000:3b:00.0 (bound to vfio-pci (passthrough), not usable on the host)") ||
		!strings.Contains(res.Summary, "1 of 2") {
		t.Fatalf("%s: %s", res.Status, res.Summary)
	}
	if !strings.Contains(res.Remedy, "driverctl unset-override 0000:3b:00.0") || strings.Contains(res.Remedy, "enable_rdma") {
		t.Errorf("remedy: %s", res.Remedy)
	}
}
