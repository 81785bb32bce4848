package checks_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// The ConnectX-5 host's two functions and the root port above them.
const (
	cx5Fn0      = "0000:3b:00.0"
	cx5Fn1      = "0000:3b:00.1"
	cx5RootPort = "/sys/devices/pci0000:3a/0000:3a:00.0"
)

// TestPCILinkFindings: each host gives the findings named, function by
// function (its PCI address), or about the host when none can be judged.
func TestPCILinkFindings(t *testing.T) {
	both := func(id string) []findingRef { return []findingRef{{id, cx5Fn0}, {id, cx5Fn1}} }
	// A Gen4 card behind a switch whose uplink trained Gen5 x8: narrower
	// than the card's x16, as fast in bandwidth.
	gen5Uplink := switchedHost("8")
	for _, dir := range []string{"/sys/devices/pci0000:00/0000:00:01.0", "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"} {
		gen5Uplink.Attr(dir+"/current_link_speed", "32.0 GT/s PCIe")
		gen5Uplink.Attr(dir+"/max_link_speed", "32.0 GT/s PCIe")
	}
	for _, tc := range []struct {
		name string
		dir  string
		opts checks.Options
		want []findingRef
	}{
		{"healthy", netFixture("cx5-roce-healthy"), checks.Options{}, both("pci.link/expected")},
		{"trained x8 in an x16 slot", netFixture("pcie-degraded"), checks.Options{}, both("pci.link/degraded")},
		{"degraded and narrower than the class", netFixture("pcie-degraded"), classOf(t, "mlx5_*.pcie_width = 16\n"),
			[]findingRef{{"pci.link/degraded", cx5Fn0}, {"pci.link/deviates", cx5Fn0}, {"pci.link/degraded", cx5Fn1}, {"pci.link/deviates", cx5Fn1}}},
		{"wider than the class", netFixture("cx5-roce-healthy"), classOf(t, "mlx5_1.pcie_width = 8\n"),
			[]findingRef{{"pci.link/expected", cx5Fn0}, {"pci.link/deviates", cx5Fn1}}},
		// An x16 card in an x8 slot is expected at x8; a switch's uplink
		// counts as much as the card's own link.
		{"an x16 card in an x8 slot", cx5Edited(t, func(h *sysfstest.Host) {
			for i := range h.NICs {
				h.NICs[i].Width, h.NICs[i].BridgeWidth = 8, 8
			}
		}, nil), checks.Options{}, both("pci.link/expected")},
		{"a switch uplink at x16", hwWrite(t, switchedHost("16")), checks.Options{}, []findingRef{{"pci.link/expected", "0000:03:00.0"}}},
		{"a switch uplink at x8", hwWrite(t, switchedHost("8")), checks.Options{}, []findingRef{{"pci.link/limited-by-bridge", "0000:03:00.0"}}},
		{"a switch uplink at Gen5 x8", hwWrite(t, gen5Uplink), checks.Options{}, []findingRef{{"pci.link/slow-bridge", "0000:03:00.0"}}},
		{"link files unreadable", cx5Edited(t, nil, func(tr *sysfstest.Tree) {
			for _, fn := range []string{cx5Fn0, cx5Fn1} {
				tr.Attr(cx5RootPort+"/"+fn+"/current_link_speed", "\x00\x01garbage")
			}
		}), checks.Options{}, both("pci.link/unreadable")},
		{"degraded below an unreadable bridge", cx5Edited(t, func(h *sysfstest.Host) { h.NICs[0].Speed = "2.5 GT/s PCIe" }, func(tr *sysfstest.Tree) {
			tr.Attr(cx5RootPort+"/current_link_speed", "\x00\x01garbage")
		}), checks.Options{}, []findingRef{{"pci.link/bridge-unreadable", cx5Fn0}, {"pci.link/expected", cx5Fn1}}},
		{"no link files (mlx4)", cx5Edited(t, func(h *sysfstest.Host) {
			for i := range h.NICs {
				h.NICs[i].Speed = ""
			}
		}, nil), checks.Options{}, append([]findingRef{{"pci.link/no-link-status", ""}}, both("pci.link/no-link-files")...)},
		{"one function not trained", cx5Edited(t, func(h *sysfstest.Host) { h.NICs[0].Speed = "Unknown" }, nil), checks.Options{},
			[]findingRef{{"pci.link/not-trained", cx5Fn0}, {"pci.link/expected", cx5Fn1}}},
		{"no max_link_* anywhere", cx5Edited(t, nil, func(tr *sysfstest.Tree) {
			for p := range tr.Files {
				if strings.HasSuffix(p, "/max_link_speed") || strings.HasSuffix(p, "/max_link_width") {
					delete(tr.Files, p)
				}
			}
		}), checks.Options{}, append([]findingRef{{"pci.link/no-link-status", ""}}, both("pci.link/no-expectation")...)},
		{"only VFs", cx5Edited(t, func(h *sysfstest.Host) {
			for i := range h.NICs {
				h.NICs[i].PhysFn = "0000:3b:00.7"
			}
		}, nil), checks.Options{}, []findingRef{{"pci.link/vfs-only", ""}}},
		{"no RDMA NIC", netFixture("no-rdma-nic"), checks.Options{}, []findingRef{{"pci.link/no-nic", ""}}},
		{"software RDMA only", netFixture("rxe-softroce"), checks.Options{}, []findingRef{{"pci.link/software-only", ""}}},
		{"PCI bus unreadable", cx5Edited(t, nil, func(tr *sysfstest.Tree) { tr.Remove("/sys/bus/pci") }), checks.Options{}, []findingRef{{"pci.link/bus-unreadable", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRunOne(t, tc.dir, "pci.link", tc.opts)
			if diff := cmp.Diff(tc.want, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s: %s\n%s", diff, r.Status, r.Summary, strings.Join(r.Details, "\n"))
			}
			// What was seen and what was wanted, always; what to do for
			// all but a pass and a skip.
			if r.Status != report.Pass && (r.Observed == "" || r.Expected == "") {
				t.Errorf("%s without observed/expected: %q %q", r.Status, r.Observed, r.Expected)
			}
			if r.Status != report.Pass && r.Status != report.Skip && r.Remedy == "" {
				t.Errorf("%s without a remedy", r.Status)
			}
		})
	}
}
