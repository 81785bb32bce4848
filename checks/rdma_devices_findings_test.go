package checks_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// TestRDMADevicesFindings: each host gives the findings named, one per NIC
// function and per device no NIC owns, whatever the words. rdma.devices
// runs alone: its prerequisites would block some of these hosts.
func TestRDMADevicesFindings(t *testing.T) {
	build := func(h sysfstest.Host, edit func(h *sysfstest.Host)) string {
		edit(&h)
		return hwWrite(t, sysfstest.Build(h))
	}
	for _, tc := range []struct {
		name, dir string
		want      []findingRef
	}{
		{"healthy", netFixture("cx5-roce-healthy"),
			[]findingRef{{"rdma.devices/registered", "0000:3b:00.0"}, {"rdma.devices/registered", "0000:3b:00.1"}, {"rdma.devices/present", ""}}},
		{"RoCE LAG", netFixture("mlx5-roce-lag-bond"),
			[]findingRef{{"rdma.devices/registered", "0000:98:00.0"}, {"rdma.devices/lag-member", "0000:98:00.1"}, {"rdma.devices/present", ""}}},
		{"software device", netFixture("rxe-softroce"), []findingRef{{"rdma.devices/present", ""}, {"rdma.devices/software", "rxe0"}}},
		{"sub-functions", netFixture("bf3-subfunctions"),
			[]findingRef{{"rdma.devices/registered", "0000:3b:00.0"}, {"rdma.devices/present", ""}, {"rdma.devices/sub-function", "mlx5_2"}, {"rdma.devices/sub-function", "mlx5_3"}}},
		{"a driver outside the table", netFixture("unknown-driver-nic"), []findingRef{{"rdma.devices/present", ""}, {"rdma.devices/other-driver", "ocrdma0"}}},
		{"hidden by the namespace", netFixture("netns-exclusive-container"),
			[]findingRef{{"rdma.devices/other-netns", "0000:3b:00.0"}, {"rdma.devices/other-netns", "0000:3b:00.1"}}},
		{"passthrough", netFixture("mlx5-vfio-passthrough"),
			[]findingRef{{"rdma.devices/passthrough", "0000:3b:00.0"}, {"rdma.devices/registered", "0000:3b:00.1"}}},
		{"module missing", netFixture("mlx5-ib-module-missing"),
			[]findingRef{{"rdma.devices/module-missing", "0000:3b:00.0"}, {"rdma.devices/module-missing", "0000:3b:00.1"}}},
		{"mlx5 registered nothing", netFixture("no-ib-device"),
			[]findingRef{{"rdma.devices/registered", "0000:3b:00.0"}, {"rdma.devices/not-registered-mlx5", "0000:3b:00.1"}}},
		{"bnxt_re registered nothing", build(sysfstest.BCM57508(), func(h *sysfstest.Host) { h.NICs[0].IBDev = "" }),
			[]findingRef{{"rdma.devices/not-registered", h0(sysfstest.BCM57508())}}},
		{"driver unbound", build(sysfstest.CX5RoCE(), func(h *sysfstest.Host) { h.NICs[1].Driver, h.NICs[1].IBDev = "", "" }),
			[]findingRef{{"rdma.devices/registered", "0000:3b:00.0"}, {"rdma.devices/driver-unbound", "0000:3b:00.1"}}},
		{"modules unreadable", fixtureEdited(t, "no-ib-device", func(tr *sysfstest.Tree) { tr.Remove(sysfs.ProcModules) }),
			[]findingRef{{"rdma.devices/registered", "0000:3b:00.0"}, {"rdma.devices/not-registered-modules-unknown", "0000:3b:00.1"}}},
		{"no device at all", build(sysfstest.RXE(), func(h *sysfstest.Host) { h.Soft = nil }), []findingRef{{"rdma.devices/none", ""}}},
		{"device list unreadable", fixtureEdited(t, "cx5-roce-healthy", func(tr *sysfstest.Tree) {
			tr.Remove("/sys/class/infiniband")
			tr.File("/sys/class/infiniband", "not a directory")
		}), []findingRef{{"rdma.devices/unreadable", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRunOne(t, tc.dir, "rdma.devices", checks.Options{})
			if diff := cmp.Diff(tc.want, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
			}
		})
	}
}

// A VF bound to vfio-pci is assigned to a VM: not judged, and not
// counted among the functions that need a device.
func TestRDMADevicesAssignedVF(t *testing.T) {
	tr := sysfstest.LargeHost(1, 1, 2)
	const vf = "/sys/devices/pci0000:10/0000:10:00.0/0000:11:00.3"
	tr.Dir("/sys/bus/pci/drivers/vfio-pci")
	tr.RelLink(vf+"/driver", "/sys/bus/pci/drivers/vfio-pci")
	tr.Remove(vf + "/infiniband")
	tr.Remove("/sys/class/infiniband/mlx5_2")
	r := hwRunOne(t, hwWrite(t, tr), "rdma.devices", checks.Options{})
	var got []findingRef
	for _, f := range refs(r.Findings) {
		if f.ID != "rdma.devices/registered" {
			got = append(got, f)
		}
	}
	if diff := cmp.Diff([]findingRef{{"rdma.devices/assigned-vf", "0000:11:00.3"}, {"rdma.devices/present", ""}}, got); diff != "" || r.Status != report.Pass {
		t.Errorf("%s: %s; findings other than registered (-want +got):\n%s", r.Status, r.Summary, diff)
	}
}

// h0 is the address of a host's first NIC.
func h0(h sysfstest.Host) string { return h.NICs[0].Addr }

// Two functions that registered no device for the same reason get one
// fix, naming both, with "<address>" where a command needs one: a host
// whose kernel is too old said the same paragraph once per function.
func TestRDMADevicesOneFixPerFinding(t *testing.T) {
	r := hwRunOne(t, netFixture("kernel-too-old"), "rdma.devices", checks.Options{})
	want := []findingRef{{"rdma.devices/not-registered-mlx5", "0000:3b:00.0"}, {"rdma.devices/not-registered-mlx5", "0000:3b:00.1"}}
	if diff := cmp.Diff(want, refs(r.Findings)); diff != "" {
		t.Fatalf("findings (-want +got):\n%s", diff)
	}
	if n := strings.Count(r.Remedy, "the RDMA module is loaded and the device still did not register"); n != 1 {
		t.Errorf("the fix is said %d times, want once:\n%s", n, r.Remedy)
	}
	for _, s := range []string{"0000:3b:00.0, 0000:3b:00.1: the RDMA module is loaded", "devlink dev param show pci/<address> name enable_rdma",
		"modprobe -r mlx5_ib && modprobe mlx5_ib"} {
		if !strings.Contains(r.Remedy, s) {
			t.Errorf("remedy lacks %q:\n%s", s, r.Remedy)
		}
	}
	if r.Findings[0].Fix != r.Findings[1].Fix {
		t.Errorf("the two findings have different fixes:\n%s\n%s", r.Findings[0].Fix, r.Findings[1].Fix)
	}
}

// With an expectations class: the device count, a device's firmware and
// its ports are findings that cite the key, and a rule that matches no
// device warns.
func TestRDMADevicesExpectFindings(t *testing.T) {
	for _, tc := range []struct {
		name, class string
		status      report.Status
		want        []findingRef
	}{
		{"as the class says", "devices = 2\nmlx5_*.ports = 1\n", report.Pass,
			[]findingRef{{"rdma.devices/registered", "0000:3b:00.0"}, {"rdma.devices/registered", "0000:3b:00.1"}, {"rdma.devices/present", ""}}},
		{"count, firmware and ports", "devices = 3\nmlx5_0.fw = 99.1.1\nmlx5_1.ports = 2\n", report.Fail,
			[]findingRef{{"rdma.devices/registered", "0000:3b:00.0"}, {"rdma.devices/registered", "0000:3b:00.1"}, {"rdma.devices/present", ""},
				{"rdma.devices/count-deviates", ""}, {"rdma.devices/fw-deviates", "mlx5_0"}, {"rdma.devices/ports-deviate", "mlx5_1"}}},
		{"a rule for no device", "mlx6_*.ports = 1\n", report.Warn,
			[]findingRef{{"rdma.devices/registered", "0000:3b:00.0"}, {"rdma.devices/registered", "0000:3b:00.1"}, {"rdma.devices/present", ""}, {"rdma.devices/rule-unmatched", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRunOne(t, netFixture("cx5-roce-healthy"), "rdma.devices", classOf(t, tc.class))
			if diff := cmp.Diff(tc.want, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			if r.Status != tc.status {
				t.Errorf("status %s, want %s: %s", r.Status, tc.status, r.Summary)
			}
		})
	}
	// No readable fw_ver, and the class names a firmware.
	tr := sysfstest.Build(sysfstest.CX5RoCE())
	tr.Remove(strings.TrimSuffix(sysfstest.PortDir(tr, "mlx5_0", 1), "/ports/1") + "/fw_ver")
	r := hwRunOne(t, hwWrite(t, tr), "rdma.devices", classOf(t, "mlx5_0.fw = 16.35.2000\n"))
	if got := refs(r.Findings); len(got) != 4 || got[3] != (findingRef{"rdma.devices/fw-unknown", "mlx5_0"}) {
		t.Errorf("findings %v, want fw-unknown of mlx5_0 last", got)
	}
}
