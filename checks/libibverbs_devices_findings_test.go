package checks_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// TestLibibverbsDevicesFindingIDs: the snapshot's answer, or the lack of
// one, gives the findings named: the comparison's about each device, what
// could not be looked at about the host.
func TestLibibverbsDevicesFindingIDs(t *testing.T) {
	edit := func(mut func(tr *sysfstest.Tree)) string {
		tr := sysfstest.Build(sysfstest.CX5RoCE())
		mut(tr)
		return hwWrite(t, tr)
	}
	for _, tc := range []struct {
		name, dir string
		want      []findingRef
	}{
		{"healthy", netFixture("cx5-roce-healthy"),
			[]findingRef{{"libibverbs.devices/listed", "mlx5_0"}, {"libibverbs.devices/listed", "mlx5_1"}}},
		{"provider missing", netFixture("provider-missing"),
			[]findingRef{{"libibverbs.devices/not-listed", "mlx5_0"}, {"libibverbs.devices/not-listed", "mlx5_1"}}},
		{"not recorded", edit(func(tr *sysfstest.Tree) { tr.Facts.Libibverbs = nil }), []findingRef{{"libibverbs.devices/not-recorded", ""}}},
		{"child killed", edit(func(tr *sysfstest.Tree) {
			tr.Facts.Libibverbs = &sysfs.VerbsEnumeration{ChildError: "killed after 10s", Devices: []sysfs.VerbsDevice{}}
		}), []findingRef{{"libibverbs.devices/child-failed", ""}}},
		{"kernel's list unreadable", edit(func(tr *sysfstest.Tree) {
			tr.Remove("/sys/class/infiniband")
			tr.File("/sys/class/infiniband", "not a directory")
		}), []findingRef{{"libibverbs.devices/kernel-unreadable", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRunOne(t, tc.dir, "libibverbs.devices", checks.Options{})
			if diff := cmp.Diff(tc.want, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s: %s", diff, r.Status, r.Summary)
			}
		})
	}
}

// Two devices whose provider did not load: the provider is installed once.
func TestLibibverbsDevicesOneProviderFix(t *testing.T) {
	r := hwRunOne(t, netFixture("provider-missing"), "libibverbs.devices", checks.Options{})
	for _, s := range []string{"Install the providers", "IBV_SHOW_WARNINGS=1"} {
		if n := strings.Count(r.Remedy, s); n != 1 {
			t.Errorf("remedy says %q %d times, want once:\n%s", s, n, r.Remedy)
		}
	}
}
