package checks_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// hgxNICs are the HGX H100 node's ConnectX-7 functions (mlx5_0 … mlx5_7).
var hgxNICs = []string{"0000:18:00.0", "0000:40:00.0", "0000:4f:00.0", "0000:5e:00.0", "0000:9a:00.0", "0000:c0:00.0", "0000:ce:00.0", "0000:dc:00.0"}

// aerRefs are the findings of the eight NICs: clean, but the first one's.
func aerRefs(first string) []findingRef {
	out := refsOf("pcie.aer/clean", hgxNICs)
	if first != "" {
		out[0].ID = "pcie.aer/" + first
	}
	return out
}

// aerHost writes the HGX node once for a test; each case then rewrites
// only its AER files (writing the whole node takes seconds).
func aerHost(t *testing.T) func(tr *sysfstest.Tree) string {
	dir := hwWrite(t, sysfstest.AERHealthy())
	return func(tr *sysfstest.Tree) string {
		if err := sysfstest.RewriteAER(dir, tr); err != nil {
			t.Fatal(err)
		}
		return dir
	}
}

func TestPCIeAERFindings(t *testing.T) {
	set := aerHost(t)
	garbage := sysfstest.AERHealthy()
	garbage.File("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/aer_dev_nonfatal", "Undefined x\n")
	for _, tc := range []struct {
		name string
		tree *sysfstest.Tree // the HGX node's AER files, or
		dir  string          // another host
		want []findingRef
	}{
		{"healthy", sysfstest.AERHealthy(), "", aerRefs("")},
		{"non-fatal on the NIC", sysfstest.AERNonFatalOnNIC(), "", aerRefs("uncorrectable-since-boot")},
		{"fatal on the root port", sysfstest.AERHGX(map[string]sysfstest.AERCounts{
			sysfstest.AERRootPort: {Fatal: map[string]uint64{"SDES": 1}}}), "", aerRefs("uncorrectable-since-boot")},
		{"correctable storm since boot", sysfstest.AERHGX(map[string]sysfstest.AERCounts{
			sysfstest.AERSwitchDownstreamPort: {Correctable: map[string]uint64{"RxErr": 200000}}}), "", aerRefs("correctable-storm")},
		{"correctable rising since boot", sysfstest.AERHGX(map[string]sysfstest.AERCounts{
			sysfstest.AERNIC: {Correctable: map[string]uint64{"BadDLLP": 2500, "Timeout": 500}}}), "", aerRefs("correctable-rising")},
		{"correctables that are no link errors", sysfstest.AERHGX(map[string]sysfstest.AERCounts{
			sysfstest.AERNIC: {Correctable: map[string]uint64{"NonFatalErr": 90000, "CorrIntErr": 5}}}), "", aerRefs("")},
		{"a hop without AER files", sysfstest.AERHopWithoutFiles(), "", aerRefs("")},
		{"a file unparsable", garbage, "", aerRefs("unreadable")},
		{"the only AER file unparsable", func() *sysfstest.Tree {
			tr := sysfstest.Build(sysfstest.HGXH100())
			tr.File("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/aer_dev_fatal", "\x00\x01\n")
			return tr
		}(), "", append([]findingRef{{"pcie.aer/unreadable", hgxNICs[0]}}, refsOf("pcie.aer/no-aer-on-path", hgxNICs[1:])...)},
		{"one NIC's path without AER", sysfstest.AERHGX(nil, sysfstest.AERNIC, sysfstest.AERSwitchDownstreamPort,
			sysfstest.AERSwitchUpstreamPort, sysfstest.AERRootPort), "", aerRefs("no-aer-on-path")},
		{"no AER statistics anywhere", nil, netFixture("hgx-8gpu-healthy"), []findingRef{{"pcie.aer/no-aer", ""}}},
		{"a VM's passed-through VF: its virtual root port has no AER", nil, netFixture("gpu-vm-passthrough"), []findingRef{{"pcie.aer/no-aer", ""}}},
		{"only VFs", nil, cx5Edited(t, func(h *sysfstest.Host) {
			for i := range h.NICs {
				h.NICs[i].PhysFn = "0000:3b:00.7"
			}
		}, nil), []findingRef{{"pcie.aer/vfs-only", ""}}},
		{"software RDMA only", nil, netFixture("rxe-softroce"), []findingRef{{"pcie.aer/no-nic", ""}}},
		{"no RDMA NIC", nil, netFixture("gpu-no-rdma-nic"), []findingRef{{"pcie.aer/no-nic", ""}}},
		{"PCI unreadable", nil, gpuPCIUnreadable(t), []findingRef{{"pcie.aer/bus-unreadable", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir
			if tc.tree != nil {
				dir = set(tc.tree)
			}
			r := hwRunOne(t, dir, "pcie.aer", checks.Options{})
			if diff := cmp.Diff(tc.want, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s %s\n%s", diff, r.Status, r.Summary, strings.Join(r.Details, "\n"))
			}
		})
	}
}

// The words that are the point: the hop and the link named, since when,
// the rate and its limit, what to do.
func TestPCIeAERWording(t *testing.T) {
	set := aerHost(t)
	r := hwRunOne(t, set(sysfstest.AERHGX(map[string]sysfstest.AERCounts{
		sysfstest.AERSwitchDownstreamPort: {Correctable: map[string]uint64{"RxErr": 200000}}})), "pcie.aer", checks.Options{})
	for _, want := range []string{
		"mlx5_0 0000:18:00.0: 200000 correctable link errors since boot (10.0 days) on the switch's downstream port 0000:17:00.0 (RxErr 200000) — 833.3/h, above 480/h",
	} {
		if !strings.Contains(r.Summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, r.Summary)
		}
	}
	for _, want := range []string{"the link between the switch's downstream port 0000:17:00.0 and mlx5_0 (0000:18:00.0)", "reseat the NIC", "lspci -vv -s 0000:17:00.0"} {
		if !strings.Contains(r.Remedy, want) {
			t.Errorf("remedy lacks %q:\n%s", want, r.Remedy)
		}
	}
	up := hwRunOne(t, set(sysfstest.AERHGX(map[string]sysfstest.AERCounts{
		sysfstest.AERSwitchUpstreamPort: {Correctable: map[string]uint64{"BadTLP": 5000}}})), "pcie.aer", checks.Options{})
	if want := "the link between the root port 0000:15:01.0 and the switch's upstream port 0000:16:00.0: this link is between a PCIe switch and the CPU"; !strings.Contains(up.Remedy, want) {
		t.Errorf("upstream port's remedy lacks %q:\n%s", want, up.Remedy)
	}
	nf := hwRunOne(t, set(sysfstest.AERNonFatalOnNIC()), "pcie.aer", checks.Options{})
	if want := "mlx5_0 0000:18:00.0: 1 non-fatal uncorrectable AER error message(s) since boot (10.0 days) on mlx5_0 (0000:18:00.0) (CmpltTO 1 since boot)"; !strings.Contains(nf.Summary, want) {
		t.Errorf("non-fatal summary lacks %q:\n%s", want, nf.Summary)
	}
	skip := hwRunOne(t, set(sysfstest.AERHopWithoutFiles()), "pcie.aer", checks.Options{})
	if want := "no AER errors rising on the 32 hop(s) of 8 RDMA NIC(s) to their root ports (1 without AER statistics, not judged)"; skip.Summary != want {
		t.Errorf("summary %q, want %q", skip.Summary, want)
	}
}

// The fixtures' stated verdicts, through the whole level-1 run.
func TestPCIeAERFixtureVerdicts(t *testing.T) {
	set := aerHost(t)
	for _, tc := range []struct {
		name    string
		tree    *sysfstest.Tree
		status  report.Status
		finding string
		exit    int
	}{
		{"healthy", sysfstest.AERHealthy(), report.Pass, "pcie.aer/clean", 0},
		{"non-fatal on the NIC", sysfstest.AERNonFatalOnNIC(), report.Warn, "pcie.aer/uncorrectable-since-boot", 0},
		{"a hop without AER files", sysfstest.AERHopWithoutFiles(), report.Pass, "pcie.aer/clean", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			statedVerdict(t, hwRun(t, set(tc.tree), checks.Options{}), "pcie.aer", string(tc.status), tc.finding, tc.exit)
		})
	}
}
