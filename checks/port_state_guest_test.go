package checks_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// Each guest InfiniBand fixture gets the verdict, exit code and finding
// its comment states (sysfs/sysfstest/fixtures_guest_ib.go), and no remedy
// in the report advises opensm, which a VM's VF cannot run.
func TestGuestIBFixtureVerdicts(t *testing.T) {
	names := make([]string, 0, len(sysfstest.GuestIBVerdicts))
	for n := range sysfstest.GuestIBVerdicts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		want := sysfstest.GuestIBVerdicts[name]
		t.Run(name, func(t *testing.T) {
			r := hwRun(t, netFixture(name), checks.Options{})
			statedVerdict(t, r, want.Check, want.Status, want.Finding, want.Exit)
			for _, c := range r.Checks {
				if strings.Contains(strings.ToLower(c.Remedy), "opensm") {
					t.Errorf("%s advises opensm in a VM guest:\n%s", c.ID, c.Remedy)
				}
			}
		})
	}
}

// guestEdited is the Azure HBv3 fixture with its port and tree edited:
// a VM or bare metal, a VF or a whole HCA, INIT or ARMED.
func guestEdited(t *testing.T, edit func(tr *sysfstest.Tree)) string {
	return fixtureEdited(t, "azure-hbv3-ib-init", edit)
}

// bareMetal drops the CPU's hypervisor flag: the same HCA on a host.
func bareMetal(tr *sysfstest.Tree) {
	tr.File("/proc/cpuinfo", strings.ReplaceAll(tr.Files["/proc/cpuinfo"], " hypervisor", ""))
}

// setPCIDevice rewrites the device ID of the function at addr.
func setPCIDevice(t *testing.T, tr *sysfstest.Tree, addr, id string) {
	for p := range tr.Files {
		if strings.HasSuffix(p, "/"+addr+"/device") {
			tr.Attr(p, id)
			return
		}
	}
	t.Fatalf("no PCI function %s in the tree", addr)
}

// TestPortStateGuestFindings: an InfiniBand VF in a VM that no subnet
// manager configured gets the guest's finding; bare metal and a whole HCA
// passed through to a guest keep the opensm advice.
func TestPortStateGuestFindings(t *testing.T) {
	const port = "mlx5_ib0/1"
	for _, tc := range []struct {
		name      string
		dir       string
		want      []findingRef
		opensm    bool // the remedy may advise opensm
		remedyHas string
	}{
		{"VF in a VM, INIT", guestEdited(t, func(*sysfstest.Tree) {}),
			[]findingRef{{"port.state/init-no-sm-guest", port}}, false, "redeploy it"},
		{"VF in a VM, ARMED", guestEdited(t, func(tr *sysfstest.Tree) {
			tr.Attr(sysfstest.PortDir(tr, "mlx5_ib0", 1)+"/state", "3: ARMED")
		}), []findingRef{{"port.state/init-no-sm-guest", port}}, false, "port GUID (0x00155dfffd33ff0c)"},
		{"VF in a VM, ACTIVE with LID 0", guestEdited(t, func(tr *sysfstest.Tree) {
			tr.Attr(sysfstest.PortDir(tr, "mlx5_ib0", 1)+"/state", "4: ACTIVE")
		}), []findingRef{{"port.state/no-lid", port}}, false, "cannot run the fabric's subnet manager"},
		{"VF in a VM, Disabled", guestEdited(t, func(tr *sysfstest.Tree) {
			tr.Attr(sysfstest.PortDir(tr, "mlx5_ib0", 1)+"/state", "1: DOWN")
			tr.Attr(sysfstest.PortDir(tr, "mlx5_ib0", 1)+"/phys_state", "3: Disabled")
		}), []findingRef{{"port.state/disabled", port}}, false, "open a case with the provider naming the VM and the port GUID (0x00155dfffd33ff0c)"},
		{"the same HCA on bare metal", guestEdited(t, bareMetal),
			[]findingRef{{"port.state/init-no-sm", port}}, true, "opensm -g 0x00155dfffd33ff0c"},
		{"a whole HCA passed through to a VM", guestEdited(t, func(tr *sysfstest.Tree) {
			setPCIDevice(t, tr, "0101:00:00.0", "0x101b") // ConnectX-6, no VF
		}), []findingRef{{"port.state/init-no-sm", port}}, true, "Look for the fabric's subnet manager"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRun(t, tc.dir, checks.Options{}, "port.state")
			c := hwResult(t, r, "port.state")
			if diff := cmp.Diff(tc.want, refs(c.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			if got := strings.Contains(c.Remedy, "opensm"); got && !tc.opensm {
				t.Errorf("remedy advises opensm:\n%s", c.Remedy)
			}
			if !strings.Contains(c.Remedy, tc.remedyHas) {
				t.Errorf("remedy lacks %q:\n%s", tc.remedyHas, c.Remedy)
			}
			// ibportstate sends SMPs through QP0, which a VF lacks.
			if strings.Contains(c.Remedy, "ibportstate -C") && !tc.opensm {
				t.Errorf("remedy runs ibportstate from a VF:\n%s", c.Remedy)
			}
		})
	}
}
