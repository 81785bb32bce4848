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

// Every link.phy fixture gets the verdict its comment states.
func TestLinkPHYFixtureVerdicts(t *testing.T) {
	for _, v := range sysfstest.LinkPHYVerdicts {
		t.Run(v.Fixture, func(t *testing.T) {
			r := hwRun(t, netFixture(v.Fixture), checks.Options{})
			statedVerdict(t, r, "link.phy", v.Status, v.Finding, v.Exit)
		})
	}
}

// virtioStats is `ethtool -S` of a virtio_net netdev (its queue counters,
// drivers/net/virtio_net.c virtnet_rq_stats_desc/virtnet_sq_stats_desc):
// no PHY counter among them.
const virtioStats = `NIC statistics:
     rx_packets: 5021
     rx_bytes: 7712338
     tx_packets: 4460
     tx_bytes: 512331
     rx_kicks: 4885
     tx_kicks: 19252
     tx_tx_timeouts: 0
`

// linkPHYOn runs level 1 on the ConnectX-7 link-down fixture with the
// down port's ethtool answer edited, and returns link.phy's result.
func linkPHYOn(t *testing.T, fixture string, edit func(a *sysfs.EthtoolAnswer)) report.CheckResult {
	t.Helper()
	dir := fixtureEdited(t, fixture, func(tr *sysfstest.Tree) {
		a := tr.Facts.Ethtool["ens1f0np0"]
		edit(&a)
		tr.Facts.Ethtool["ens1f0np0"] = a
	})
	return hwResult(t, hwRun(t, dir, checks.Options{}), "link.phy")
}

// A down link's extended state names its cause, and the cause picks the
// finding: what to replace or set.
func TestLinkPHYDownCauses(t *testing.T) {
	cases := []struct {
		state, sub, want string
	}{
		{sysfs.LinkExtSignal, "Large number of physical errors", "link.phy/down-cable"},
		{sysfs.LinkExtModule, "CMIS module is not in ModuleReady state", "link.phy/down-module"},
		{sysfs.LinkExtOverheat, "", "link.phy/down-overheat"},
		{sysfs.LinkExtPowerBudget, "", "link.phy/down-power-budget"},
		{sysfs.LinkExtLogicalMismatch, "RS FEC is not locked", "link.phy/down-negotiation"},
		{sysfs.LinkExtCalibration, "", "link.phy/down-other"},
		{"", "", "link.phy/down-no-cause"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			c := linkPHYOn(t, "cx7-roce-link-down-cable", func(a *sysfs.EthtoolAnswer) {
				a.Link.ExtState, a.Link.ExtSubstate = tc.state, tc.sub
			})
			want := []findingRef{{tc.want, "ens1f0np0"}, {"link.phy/healthy", "ens1f1np1"}}
			if d := cmp.Diff(want, refs(c.Findings)); d != "" {
				t.Errorf("-want +got\n%s", d)
			}
			if tc.sub != "" && !strings.Contains(c.Summary, tc.state+" ("+tc.sub+")") {
				t.Errorf("summary does not name the cause: %s", c.Summary)
			}
		})
	}
}

// Counters judged by their rate since boot, without --state: symbol
// errors above 120/h and three link-down events in a day warn.
func TestLinkPHYRatesSinceBoot(t *testing.T) {
	c := linkPHYOn(t, "cx7-roce-phy-healthy", func(a *sysfs.EthtoolAnswer) {
		setStat(a, "rx_symbol_err_phy", 50000) // 208/h over ten days
	})
	if d := cmp.Diff([]findingRef{{"link.phy/symbol-errors", "ens1f0np0"}, {"link.phy/healthy", "ens1f1np1"}}, refs(c.Findings)); d != "" {
		t.Errorf("symbol errors: -want +got\n%s", d)
	}
	dir := fixtureEdited(t, "cx7-roce-flapping", func(tr *sysfstest.Tree) {
		a := tr.Facts.Ethtool["ens1f1np1"]
		three := uint32(3)
		a.Link.DownEvents = &three
		tr.Facts.Ethtool["ens1f1np1"] = a
	})
	c = hwResult(t, hwRun(t, dir, checks.Options{}), "link.phy")
	if d := cmp.Diff([]findingRef{{"link.phy/healthy", "ens1f0np0"}, {"link.phy/flapping", "ens1f1np1"}}, refs(c.Findings)); d != "" {
		t.Errorf("three flaps: -want +got\n%s", d)
	}
	if !strings.Contains(c.Summary, "link went down 3 times since boot (20.0 h) (link-down events)") {
		t.Errorf("summary: %s", c.Summary)
	}
	c = linkPHYOn(t, "cx7-roce-phy-healthy", func(a *sysfs.EthtoolAnswer) { setStat(a, "tx_pause_storm_error_events", 2) })
	if d := cmp.Diff([]findingRef{{"link.phy/since-boot", "ens1f0np0"}, {"link.phy/healthy", "ens1f1np1"}}, refs(c.Findings)); d != "" {
		t.Errorf("pause storm since boot: -want +got\n%s", d)
	}
}

func setStat(a *sysfs.EthtoolAnswer, name string, v uint64) {
	for i := range a.Stats {
		if a.Stats[i].Name == name {
			a.Stats[i].Value = v
			return
		}
	}
	a.Stats = append(a.Stats, sysfs.EthtoolStat{Name: name, Value: v})
}

// Netdevs link.phy cannot judge: a driver without FEC or PHY counters is
// skipped with the kernel's answer; a request that failed otherwise is an
// error naming it; hosts without Ethernet RDMA ports or without recorded
// answers are skipped; a capture that could not ask is an error.
func TestLinkPHYCannotJudge(t *testing.T) {
	virtio := linkPHYOn(t, "cx7-roce-phy-healthy", func(a *sysfs.EthtoolAnswer) {
		*a = sysfs.EthtoolAnswer{FECErr: sysfs.ErrNotSupported, LinkErr: "", Link: a.Link,
			ModesErr: sysfs.ErrNotSupported, Stats: sysfs.ParseEthtoolStatsListing(virtioStats)}
	})
	if d := cmp.Diff([]findingRef{{"link.phy/no-phy-stats", "ens1f0np0"}, {"link.phy/healthy", "ens1f1np1"}}, refs(virtio.Findings)); d != "" {
		t.Errorf("virtio: -want +got\n%s", d)
	}
	if virtio.Status != report.Pass || !strings.Contains(strings.Join(findingMessages(virtio), "\n"), "FEC_GET: EOPNOTSUPP") {
		t.Errorf("virtio: %s %v", virtio.Status, findingMessages(virtio))
	}
	eio := linkPHYOn(t, "cx7-roce-phy-healthy", func(a *sysfs.EthtoolAnswer) { a.Link, a.LinkErr = nil, "EIO" })
	if eio.Status != report.Error || !strings.Contains(eio.Summary, "ens1f0np0 (mlx5_0 port 1): LINKSTATE_GET failed: EIO") {
		t.Errorf("EIO: %s %s", eio.Status, eio.Summary)
	}
	for _, tc := range []struct {
		dir, want string
		status    report.Status
	}{
		{netFixture("cx6-ib-healthy"), "link.phy/no-port", report.Skip},
		{netFixture("cx5-roce-healthy"), "link.phy/not-recorded", report.Skip},
		{fixtureEdited(t, "cx7-roce-phy-healthy", func(tr *sysfstest.Tree) {
			tr.Facts.Ethtool = nil
			tr.Facts.Unavailable = map[string]string{"ethtool": "netlink (generic): permission denied"}
		}), "link.phy/ethtool-unavailable", report.Error},
	} {
		c := hwResult(t, hwRun(t, tc.dir, checks.Options{}), "link.phy")
		if c.Status != tc.status || !c.HasFinding(tc.want) {
			t.Errorf("%s: %s %v, want %s %s", tc.dir, c.Status, refs(c.Findings), tc.status, tc.want)
		}
	}
}

func findingMessages(c report.CheckResult) []string {
	out := make([]string, len(c.Findings))
	for i, f := range c.Findings {
		out[i] = f.Message
	}
	return out
}

// On a hypervisor's PF with VFs: the PFs are judged, the VF here answers
// EOPNOTSUPP as a VF does (its PF owns the PHY) and is skipped saying so,
// the VF moved into a pod is named in the details.
func TestLinkPHYVirtualFunctions(t *testing.T) {
	up := true
	pf := sysfs.EthtoolAnswer{FEC: &sysfs.FECState{Active: "RS", Uncorrectable: &sysfs.FECCounter{}},
		Link: &sysfs.LinkState{Up: &up}, Modes: &sysfs.LinkModes{SpeedMbps: 100000, Lanes: 4}}
	dir := fixtureEdited(t, "sriov-vfs-hypervisor", func(tr *sysfstest.Tree) {
		tr.Facts.Ethtool = map[string]sysfs.EthtoolAnswer{"ens1f0np0": pf, "ens1f1np1": pf,
			"ens1f0v0": {FECErr: sysfs.ErrNotSupported, Link: &sysfs.LinkState{Up: &up}, Stats: []sysfs.EthtoolStat{{Name: "rx_packets", Value: 12}}}}
	})
	c := hwResult(t, hwRun(t, dir, checks.Options{}), "link.phy")
	want := []findingRef{{"link.phy/healthy", "ens1f0np0"}, {"link.phy/no-phy-stats", "ens1f0v0"}, {"link.phy/healthy", "ens1f1np1"}}
	if d := cmp.Diff(want, refs(c.Findings)); d != "" {
		t.Errorf("-want +got\n%s", d)
	}
	text := strings.Join(findingMessages(c), "\n") + "\n" + strings.Join(c.Details, "\n")
	for _, w := range []string{"on a virtual function (its PF owns the PHY)", "ens1f0v1: in another network namespace: not judged here"} {
		if !strings.Contains(text, w) {
			t.Errorf("lacks %q:\n%s", w, text)
		}
	}
}
