package checks_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// Platforms built around RDMA (EFA instances, cloud RoCE, DPUs, vendor
// NICs): every fixture gets the verdict and exit code its comment states
// (sysfstest.PlatformVerdicts), with the finding named, and the healthy
// ones warn about nothing.
func TestPlatformFixtureVerdicts(t *testing.T) {
	for i, v := range sysfstest.PlatformVerdicts {
		name := fmt.Sprintf("%s/%d-%s", v.Fixture, i, v.Check)
		if v.ExpectLossless {
			name += "/expect-lossless"
		}
		t.Run(name, func(t *testing.T) {
			r := hwRun(t, netFixture(v.Fixture), checks.Options{ExpectLossless: v.ExpectLossless})
			statedVerdict(t, r, v.Check, v.Status, v.Finding, v.Exit)
			if !v.Healthy {
				return
			}
			for _, c := range r.Checks {
				if c.Status == report.Fail || c.Status == report.Error || c.Status == report.Warn {
					t.Errorf("healthy %s: %s %s: %s\n%s", v.Fixture, c.ID, c.Status, c.Summary, c.Remedy)
				}
			}
		})
	}
}

// A VM whose only network functions are one cloud's paravirtual NICs has
// no RDMA by its machine type: pci.device skips, says how such a node gets
// RDMA, and blocks the checks that need an RDMA device. Any other function
// beside them (virtio, an unknown NIC) keeps the plain no-rdma-nic fail.
func TestCloudVNICOnly(t *testing.T) {
	enaOnly := func(h *sysfstest.Host) {
		h.NICs = h.NICs[:1] // the ENA, without the EFA
		h.Modules = []string{"ena"}
	}
	mixed := func(h *sysfstest.Host) {
		enaOnly(h)
		h.NICs = append(h.NICs, sysfstest.NIC{Addr: "0000:00:07.0", Vendor: 0x1af4, Device: 0x1041, Class: 0x020000, Driver: "virtio-pci",
			Ports: []sysfstest.Port{{Netdev: "ens7", MAC: "52:54:00:00:00:07", MTU: 1500, OperUp: true}}})
	}
	for _, tc := range []struct {
		name    string
		edit    func(h *sysfstest.Host)
		status  report.Status
		finding string
		exit    int
		detail  string
	}{
		{"ENA only", enaOnly, report.Skip, "pci.device/cloud-vnic-only", 0, "InterfaceType=efa"},
		{"ENA and virtio", mixed, report.Fail, "pci.device/no-rdma-nic", 10, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := sysfstest.AWSEFA()
			tc.edit(&h)
			r := hwRun(t, hwWrite(t, sysfstest.Build(h)), checks.Options{})
			c := statedVerdict(t, r, "pci.device", string(tc.status), tc.finding, tc.exit)
			if tc.detail != "" && !strings.Contains(strings.Join(c.Details, "\n"), tc.detail) {
				t.Errorf("details lack %q:\n%s", tc.detail, strings.Join(c.Details, "\n"))
			}
			if km := hwResult(t, r, "kernel.modules"); tc.status == report.Skip && km.Summary != "blocked by pci.device" {
				t.Errorf("kernel.modules %s: %s, want blocked by pci.device", km.Status, km.Summary)
			}
		})
	}
}
