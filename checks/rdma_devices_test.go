package checks_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// dv is an rdma.devices finding about a unit (a PCI function, a device).
func dv(slug, unit string) findingRef { return findingRef{"rdma.devices/" + slug, unit} }

func TestRDMADevicesFixtures(t *testing.T) {
	for _, tc := range []struct {
		fixture   string
		status    report.Status
		exit      int
		rootCause string
		want      []findingRef
	}{
		{"cx5-roce-healthy", report.Pass, 0, "", []findingRef{dv("registered", "0000:3b:00.0"), dv("registered", "0000:3b:00.1"), dv("present", "")}},
		{"cx6-ib-healthy", report.Pass, 0, "", []findingRef{dv("registered", "0000:c1:00.0"), dv("present", "")}},
		{"rxe-softroce", report.Pass, 0, "", []findingRef{dv("present", ""), dv("software", "rxe0")}},
		{"no-ib-device", report.Fail, 14, "rdma.devices", []findingRef{dv("registered", "0000:3b:00.0"), dv("not-registered-mlx5", "0000:3b:00.1")}},
		// The missing module is kernel.modules' finding; rdma.devices waits.
		{"mlx5-ib-module-missing", report.Skip, 13, "kernel.modules", []findingRef{{"rdmadoctor.run/blocked", ""}}},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			r := hwRun(t, filepath.Join(hostsDir, tc.fixture), checks.Options{}, "rdma.devices")
			c := hwResult(t, r, "rdma.devices")
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
}

func TestRDMADevicesNoDeviceNamesTheWayOut(t *testing.T) {
	r := hwRun(t, filepath.Join(hostsDir, "no-ib-device"), checks.Options{})
	if km := hwResult(t, r, "kernel.modules"); km.Status != report.Pass {
		t.Fatalf("kernel.modules must pass on no-ib-device: %s %s", km.Status, km.Summary)
	}
	c := hwResult(t, r, "rdma.devices")
	// The commands of the remedy, each naming the function without its device.
	for _, s := range []string{"mlxconfig -d 0000:3b:00.1 query | grep LINK_TYPE", "devlink dev reload pci/0000:3b:00.1"} {
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
	// The function that has its device is shown as well.
	if diff := cmp.Diff([]findingRef{dv("registered", "0000:3b:00.0"), dv("not-registered-mlx5", "0000:3b:00.1")}, refs(c.Findings)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}

func TestRDMADevicesReasons(t *testing.T) {
	// The check's own judgement, without the prerequisites that would block it.
	moduleMissing := hwRunOne(t, filepath.Join(hostsDir, "mlx5-ib-module-missing"), "rdma.devices", checks.Options{})
	wantRefs(t, "module missing", moduleMissing, []findingRef{dv("module-missing", "0000:3b:00.0"), dv("module-missing", "0000:3b:00.1")})
	if !strings.Contains(moduleMissing.Remedy, "modprobe mlx5_ib") {
		t.Errorf("module missing: remedy %s", moduleMissing.Remedy)
	}

	// In exclusive netns mode the finding is the same as without, and
	// the words do not hedge: the uverbs class is not namespaced (a pod in
	// exclusive mode still lists the host's uverbsN), so a function none of
	// its nodes names has no device in any namespace.
	tr, _ := sysfstest.Fixture("no-ib-device")
	tr.Facts.RDMASystem = &sysfs.RDMASystem{NetnsMode: "exclusive"}
	excl := hwRunOne(t, hwWrite(t, tr), "rdma.devices", checks.Options{})
	wantRefs(t, "exclusive netns", excl, []findingRef{dv("registered", "0000:3b:00.0"), dv("not-registered-mlx5", "0000:3b:00.1")})
	if strings.Contains(excl.Summary, "another network namespace") || strings.Contains(excl.Remedy, "rdma system set netns shared") {
		t.Errorf("exclusive netns: %s / %s", excl.Summary, excl.Remedy)
	}

	h := sysfstest.CX5RoCE()
	h.NICs[1].Driver, h.NICs[1].IBDev = "", ""
	unbound := hwRunOne(t, hwWrite(t, sysfstest.Build(h)), "rdma.devices", checks.Options{})
	wantRefs(t, "unbound", unbound, []findingRef{dv("registered", "0000:3b:00.0"), dv("driver-unbound", "0000:3b:00.1")})

	none := sysfstest.RXE()
	none.Soft = nil
	noDev := hwRunOne(t, hwWrite(t, sysfstest.Build(none)), "rdma.devices", checks.Options{})
	wantRefs(t, "no device at all", noDev, []findingRef{dv("none", "")})
}

// wantRefs wants r's findings to be want, whole.
func wantRefs(t *testing.T, what string, r checks.Result, want []findingRef) {
	t.Helper()
	if diff := cmp.Diff(want, refs(r.Findings)); diff != "" {
		t.Errorf("%s: %s %q: findings (-want +got):\n%s", what, r.Status, r.Summary, diff)
	}
}

func TestRDMADevicesUnlistableClassIsAnError(t *testing.T) {
	tr := sysfstest.Build(sysfstest.CX5RoCE())
	tr.Remove("/sys/class/infiniband")
	tr.File("/sys/class/infiniband", "not a directory")
	res := hwRunOne(t, hwWrite(t, tr), "rdma.devices", checks.Options{})
	wantRefs(t, "unlistable", res, []findingRef{dv("unreadable", "")})
	if !strings.Contains(res.Summary, "sys/class/infiniband") {
		t.Errorf("%s: %s; want error naming the path", res.Status, res.Summary)
	}
}

func TestRDMADevicesCountsVFs(t *testing.T) {
	tr := sysfstest.LargeHost(1, 1, 3)
	// The second VF of the first PF registered no device.
	tr.Remove("/sys/class/infiniband/mlx5_2")
	tr.Remove("/sys/devices/pci0000:10/0000:10:00.0/0000:11:00.3/infiniband")
	res := hwRunOne(t, hwWrite(t, tr), "rdma.devices", checks.Options{})
	var want []findingRef
	for fn := 0; fn < 8; fn++ {
		want = append(want, dv("registered", fmt.Sprintf("0000:11:00.%d", fn)))
	}
	want[3] = dv("not-registered-mlx5-vf", "0000:11:00.3")
	wantRefs(t, "a VF without its device", res, want)
	// The devlink command names the VF's PF.
	if cmd := "`devlink port function set pci/0000:11:00.0/<port index> roce enable`"; !strings.Contains(res.Remedy, cmd) {
		t.Errorf("a VF without its device: remedy lacks %q: %s", cmd, res.Remedy)
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
	wantRefs(t, "passthrough", res, []findingRef{dv("passthrough", "0000:3b:00.0"), dv("registered", "0000:3b:00.1")})
	if !strings.Contains(res.Remedy, "driverctl unset-override 0000:3b:00.0") || strings.Contains(res.Remedy, "enable_rdma") {
		t.Errorf("remedy: %s", res.Remedy)
	}
}
