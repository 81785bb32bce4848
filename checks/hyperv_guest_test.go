package checks_test

import (
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// guestUnfit are remedies a Hyper-V/Azure guest cannot carry out: BIOS,
// slots and switch ACS are the platform's, a VF runs no subnet manager
// and sends no SMPs, and the guest has no PF to configure.
var guestUnfit = regexp.MustCompile(`(?i)bios|reseat|\bslot\b|setpci|mlxconfig|opensm|ibportstate|riser`)

// Each Hyper-V guest fixture gets the verdict, exit code and finding its
// comment states (sysfs/sysfstest/fixtures_hyperv.go); a healthy one has
// no warn, and no remedy in any report advises what a guest cannot do.
func TestHypervFixtureVerdicts(t *testing.T) {
	names := make([]string, 0, len(sysfstest.HypervVerdicts))
	for n := range sysfstest.HypervVerdicts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		want := sysfstest.HypervVerdicts[name]
		t.Run(name, func(t *testing.T) {
			r := hwRun(t, netFixture(name), checks.Options{})
			statedVerdict(t, r, want.Check, want.Status, want.Finding, want.Exit)
			for _, c := range r.Checks {
				if want.Exit == 0 && c.Status == report.Warn {
					t.Errorf("healthy guest warns: %s %s", c.ID, c.Summary)
				}
				if c.Status == report.Error {
					t.Errorf("%s could not judge a guest: %s", c.ID, c.Summary)
				}
				if m := guestUnfit.FindString(c.Remedy); m != "" {
					t.Errorf("%s advises %q in a guest:\n%s", c.ID, m, c.Remedy)
				}
			}
		})
	}
}

// ndv5Edited is the healthy ND H100 v5 fixture edited.
func ndv5Edited(t *testing.T, edit func(tr *sysfstest.Tree)) string {
	return fixtureEdited(t, "azure-ndv5-h100", edit)
}

// noPublishedTopology removes what publishes the VM's pairing: a
// Marketplace image without Azure's HPC additions.
func noPublishedTopology(tr *sysfstest.Tree) {
	for p := range tr.Files {
		if strings.HasPrefix(p, "/opt/microsoft/") || p == "/etc/nccl.conf" {
			tr.Remove(p)
		}
	}
	for p := range tr.Links {
		if strings.HasPrefix(p, "/opt/microsoft/") {
			tr.Remove(p)
		}
	}
}

// setNUMA rewrites the numa_node of the function at addr.
func setNUMA(t *testing.T, tr *sysfstest.Tree, addr, node string) {
	for p := range tr.Files {
		if strings.HasSuffix(p, "/"+addr+"/numa_node") {
			tr.Attr(p, node)
			return
		}
	}
	t.Fatalf("no PCI function %s in the tree", addr)
}

// affinityRefs are gpu.nic_affinity's finding IDs, one per GPU, by GPU.
func affinityIDs(c report.CheckResult) map[string]string {
	out := map[string]string{}
	for _, f := range c.Findings {
		out[f.Unit] = f.ID
	}
	return out
}

// TestGPUNICAffinityHiddenPath: where the hypervisor hides the PCIe path,
// gpu.nic_affinity judges the published pairing, else the NUMA nodes —
// never an error, and a GPU whose published NIC is gone fails with the
// platform's fix.
func TestGPUNICAffinityHiddenPath(t *testing.T) {
	const f = "gpu.nic_affinity/"
	all := func(id string) map[string]string {
		out := map[string]string{}
		for _, g := range []string{"0001", "0002", "0003", "0008", "0009", "000a", "000b", "000c"} {
			out[g+":00:00.0"] = f + id
		}
		return out
	}
	with := func(m map[string]string, unit, id string) map[string]string {
		m[unit] = f + id
		return m
	}
	for _, tc := range []struct {
		name      string
		dir       string
		status    report.Status
		want      map[string]string
		remedyHas string
	}{
		{"published pairing", ndv5Edited(t, func(*sysfstest.Tree) {}), report.Pass, all("published-pair"), ""},
		{"no nccl.conf: the directory's file that lists this VM's GPUs", ndv5Edited(t, func(tr *sysfstest.Tree) {
			tr.Remove("/etc/nccl.conf")
		}), report.Pass, all("published-pair"), ""},
		{"no published pairing: NUMA nodes", ndv5Edited(t, noPublishedTopology), report.Pass, all("same-numa-node"), ""},
		{"no published pairing, a NIC on the other node", ndv5Edited(t, func(tr *sysfstest.Tree) {
			noPublishedTopology(tr)
			setNUMA(t, tr, "0101:00:00.0", "1")
		}), report.Warn, with(all("same-numa-node"), "0008:00:00.0", "guest-other-numa"), "redeploy"},
		{"no NUMA node reported", ndv5Edited(t, func(tr *sysfstest.Tree) {
			noPublishedTopology(tr)
			for _, a := range []string{"0001", "0002", "0003", "0008", "0009", "000a", "000b", "000c"} {
				setNUMA(t, tr, a+":00:00.0", "-1")
			}
		}), report.Pass, all("virtual-topology"), ""},
		{"a published NIC missing", netFixture("azure-ndv5-h100-vf-missing"), report.Fail,
			with(all("published-pair"), "0009:00:00.0", "published-nic-missing"), "deallocate and start the VM again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hwResult(t, hwRun(t, tc.dir, checks.Options{}, "gpu.nic_affinity"), "gpu.nic_affinity")
			if c.Status != tc.status {
				t.Errorf("status %s, want %s: %s", c.Status, tc.status, c.Summary)
			}
			if diff := cmp.Diff(tc.want, affinityIDs(c)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			if !strings.Contains(c.Remedy, tc.remedyHas) {
				t.Errorf("remedy lacks %q:\n%s", tc.remedyHas, c.Remedy)
			}
		})
	}
}

// TestGuestPCIChecksOnHiddenPath: the checks that walk the PCIe tree judge
// only what a guest sees where the hypervisor hides it.
func TestGuestPCIChecksOnHiddenPath(t *testing.T) {
	r := hwRun(t, netFixture("azure-ndv5-h100"), checks.Options{})
	for id, finding := range map[string]string{
		"gpu.acs":  "gpu.acs/hidden-path",
		"pci.link": "pci.link/vfs-only",
		"gpu.pcie": "gpu.pcie/link-expected",
	} {
		if c := hwResult(t, r, id); !c.HasFinding(finding) {
			t.Errorf("%s: findings %v lack %s", id, refs(c.Findings), finding)
		}
	}
}

// TestGPUPCIeDegradedInGuest: a GPU that trained narrow in a VM whose
// hypervisor hides the path gets the platform's fix, not a reseat.
func TestGPUPCIeDegradedInGuest(t *testing.T) {
	dir := ndv5Edited(t, func(tr *sysfstest.Tree) {
		for p := range tr.Files {
			if strings.HasSuffix(p, "/0002:00:00.0/current_link_width") {
				tr.Attr(p, "8")
			}
		}
	})
	c := hwResult(t, hwRun(t, dir, checks.Options{}, "gpu.pcie"), "gpu.pcie")
	if c.Status != report.Fail || !c.HasFinding("gpu.pcie/link-degraded-guest") {
		t.Fatalf("%s %v: %s", c.Status, refs(c.Findings), c.Summary)
	}
	if m := guestUnfit.FindString(c.Remedy); m != "" || !strings.Contains(c.Remedy, "support case") {
		t.Errorf("remedy is not the platform's (%q):\n%s", m, c.Remedy)
	}
}
