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
			c := statedVerdict(t, r, v.Check, v.Status, v.Finding, v.Exit)
			text := c.Summary + "\n" + strings.Join(c.Details, "\n") + "\n" + c.Remedy
			for _, want := range v.Says {
				if !strings.Contains(text, want) {
					t.Errorf("%s does not say %q:\n%s", v.Check, want, text)
				}
			}
			for _, never := range v.Never {
				if strings.Contains(text, never) {
					t.Errorf("%s says %q, which cannot be done on this host:\n%s", v.Check, never, text)
				}
			}
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

// bnxt_re's congestion control is read from debugfs where root can list
// it; a cc_config that cannot be listed leaves ECN unknown and says why,
// with no ECN finding; tos_ecn 0 (no ECT) is ECN off too.
func TestBnxtCCFromDebugfs(t *testing.T) {
	const dir = "/sys/kernel/debug/bnxt_re/0000:b1:00.0/cc_config"
	for _, tc := range []struct {
		name    string
		edit    func(tr *sysfstest.Tree)
		finding string
		detail  string
	}{
		{"readable, on", func(*sysfstest.Tree) {}, "roce.lossless/lossless", "ECN on (bnxt_re congestion control: enable_cc 1, tos_ecn 1)"},
		{"no ECT", func(tr *sysfstest.Tree) { tr.Attr(dir+"/tos_ecn", "0") }, "roce.lossless/ecn-off", "tos_ecn 0: RoCE packets carry no ECT"},
		{"not listable", func(tr *sysfstest.Tree) {
			tr.Remove(dir)
			tr.File(dir, "not a directory\n")
		}, "roce.lossless/lossless", "ECN unknown (bnxt_re congestion control in " + dir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRunOne(t, fixtureEdited(t, "bnxt-thor2-roce-cc", tc.edit), "roce.lossless", checks.Options{})
			if len(r.Findings) != 1 || r.Findings[0].ID != tc.finding {
				t.Errorf("findings %v, want one %s", refs(r.Findings), tc.finding)
			}
			if text := strings.Join(r.Details, "\n") + r.Summary; !strings.Contains(text, tc.detail) {
				t.Errorf("roce.lossless lacks %q:\n%s", tc.detail, text)
			}
		})
	}
}
