package checks_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// findingRef is what a test says of a finding: which, about what. The
// sentences are the renderer's; golden reports show them.
type findingRef struct{ ID, Unit string }

func refs(fs []report.Finding) []findingRef {
	var out []findingRef
	for _, f := range fs {
		out = append(out, findingRef{f.ID, f.Unit})
	}
	return out
}

// TestPortStateFindings: each host gives the findings named, unit by unit,
// whatever the words.
func TestPortStateFindings(t *testing.T) {
	port := func(h sysfstest.Host, edit func(p *sysfstest.Port)) string {
		edit(&h.NICs[0].Ports[0])
		return hwWrite(t, sysfstest.Build(h))
	}
	for _, tc := range []struct {
		name string
		dir  string
		opts checks.Options
		want []findingRef
	}{
		{"healthy RoCE", netFixture("cx5-roce-healthy"), checks.Options{},
			[]findingRef{{"port.state/active", "mlx5_0/1"}, {"port.state/active", "mlx5_1/1"}}},
		{"admin down", netFixture("port-down"), checks.Options{},
			[]findingRef{{"port.state/active", "mlx5_0/1"}, {"port.state/admin-down", "mlx5_1/1"}}},
		{"no SM", netFixture("ib-no-sm"), checks.Options{}, []findingRef{{"port.state/init-no-sm", "mlx5_0/1"}}},
		{"IB link up, port DOWN", port(sysfstest.CX6IB(), func(p *sysfstest.Port) { p.State = "1: DOWN" }), checks.Options{},
			[]findingRef{{"port.state/down-link-up", "mlx5_0/1"}}},
		{"IB training", port(sysfstest.CX6IB(), func(p *sysfstest.Port) { p.State, p.PhysState = "1: DOWN", "4: PortConfigurationTraining" }), checks.Options{},
			[]findingRef{{"port.state/training", "mlx5_0/1"}}},
		{"RoCE down, netdev in another namespace", port(sysfstest.CX5RoCE(), func(p *sysfstest.Port) {
			p.State, p.PhysState, p.Away = "1: DOWN", "3: Disabled", true
		}), checks.Options{}, []findingRef{{"port.state/eth-down-netdev-elsewhere", "mlx5_0/1"}, {"port.state/active", "mlx5_1/1"}}},
		{"RoCE down, netdev not listed by netlink", fixtureEdited(t, "cx5-roce-healthy", func(tr *sysfstest.Tree) {
			tr.Attr(sysfstest.PortDir(tr, "mlx5_0", 1)+"/state", "1: DOWN")
			tr.Attr(sysfstest.PortDir(tr, "mlx5_0", 1)+"/phys_state", "3: Disabled")
			var keep []sysfs.Netdev
			for _, nd := range tr.Facts.Netdevs {
				if nd.Name != "ens1f0np0" {
					keep = append(keep, nd)
				}
			}
			tr.Facts.Netdevs = keep
		}), checks.Options{}, []findingRef{{"port.state/eth-down", "mlx5_0/1"}, {"port.state/active", "mlx5_1/1"}}},
		{"a down representor is not judged", fixtureEdited(t, "sriov-switchdev-representors", func(tr *sysfstest.Tree) {
			tr.Attr(sysfstest.PortDir(tr, "mlx5_0", 2)+"/state", "1: DOWN")
			tr.Attr(sysfstest.PortDir(tr, "mlx5_0", 2)+"/phys_state", "3: Disabled")
		}), checks.Options{},
			[]findingRef{{"port.state/active", "mlx5_0/1"}, {"port.state/representor", "mlx5_0/2"}, {"port.state/active", "mlx5_0/3"}, {"port.state/active", "mlx5_1/1"}}},
		{"a rate the class names cannot be read", port(sysfstest.CX6IB(), func(p *sysfstest.Port) { p.Rate = "fast" }), classOf(t, "mlx5_*/1.rate = 200\n"),
			[]findingRef{{"port.state/rate-unknown-expected", "mlx5_0/1"}}},
		{"two findings on one port", port(sysfstest.CX6IB(), func(p *sysfstest.Port) { p.Rate = "50 Gb/sec (1X HDR)" }), checks.Options{ExpectRate: 100},
			[]findingRef{{"port.state/one-lane", "mlx5_0/1"}, {"port.state/below-rate", "mlx5_0/1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hwResult(t, hwRun(t, tc.dir, tc.opts), "port.state")
			if diff := cmp.Diff(tc.want, refs(c.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

// The findings about the device list come before any port: port.state
// alone (its prerequisite would block it in a whole run).
func TestPortStateDeviceFindings(t *testing.T) {
	notADir := cx5FileForDir(t, "/sys/class/infiniband")
	for _, tc := range []struct {
		name, dir string
		want      []findingRef
	}{
		{"no device", netFixture("no-rdma-nic"), []findingRef{{"port.state/no-device", ""}}},
		{"device list unreadable", notADir, []findingRef{{"port.state/devices-unreadable", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRunOne(t, tc.dir, "port.state", checks.Options{})
			if diff := cmp.Diff(tc.want, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
			}
		})
	}
}

// A class waives one finding by ID, with a reason: the finding stays in
// the report, marked, and no longer counts; the check judges what is left.
func TestWaiveOneFinding(t *testing.T) {
	waived := classOf(t, "waive = [\"port.state/admin-down\"]\nwaive_reason = \"second port cabled next week\"\n")
	r := hwRun(t, netFixture("port-down"), waived)
	c := hwResult(t, r, "port.state")
	if c.Status != report.Pass || r.ExitCode != 0 {
		t.Fatalf("port.state %s, exit %d, want pass and 0: %s", c.Status, r.ExitCode, c.Summary)
	}
	var got []string
	for _, f := range c.Findings {
		got = append(got, f.ID+" "+f.Waived)
	}
	want := []string{"port.state/active ", "port.state/admin-down second port cabled next week (expect.conf:3 waive = port.state/admin-down)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	// Waiving another finding changes nothing here.
	other := classOf(t, "waive = port.state/no-carrier\nwaive_reason = \"x\"\n")
	if c := hwResult(t, hwRun(t, netFixture("port-down"), other), "port.state"); c.Status != report.Fail {
		t.Errorf("an unrelated waiver made port.state %s", c.Status)
	}
}
