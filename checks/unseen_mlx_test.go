package checks_test

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
)

// Mellanox/NVIDIA host shapes beyond the reference fixtures: each is a
// healthy host, so each exits 0 and each check says what the port is.

func TestUnseenMLXHealthyExitZero(t *testing.T) {
	for _, name := range []string{
		"mlx4-vpi-ib-eth", "cx7-ndr200-split", "mlx5-bond-active-backup", "lag-one-slave-down", "roce-ipv6-only", "roce-macvlan-ip",
		"ib-ipoib-pkey-child", "bf3-subfunctions",
	} {
		t.Run(name, func(t *testing.T) {
			r := hwRun(t, netFixture(name), checks.Options{})
			for _, c := range r.Checks {
				if c.Status == report.Fail || c.Status == report.Error || c.Status == report.Warn {
					t.Errorf("%s %s: %s", c.ID, c.Status, c.Summary)
				}
			}
			if r.ExitCode != 0 {
				t.Fatalf("a healthy %s host exits %d (root cause %s)", name, r.ExitCode, deref(r.RootCause))
			}
		})
	}
}

func TestUnseenMLXRoCEConfig(t *testing.T) {
	ok := func(units ...string) []findingRef {
		var out []findingRef
		for _, u := range units {
			out = append(out, findingRef{"roce.config/ok", u})
		}
		return out
	}
	runNetCases(t, "roce.config", []netCase{
		// A bond that is not a RoCE LAG: each PF keeps its device; the
		// backup slave's port has no GID for bond0's address by design.
		{name: "active-backup bond without LAG", dir: netFixture("mlx5-bond-active-backup"), status: report.Pass,
			findings: ok("mlx5_0/1", "mlx5_1/1"),
			contains: []string{"backup slave of bond0 (active-backup; active slave ens2f0np0)"},
			lacks:    []string{"no RoCE v2 GID for", "no IP address", "mlx5_0 port 1 → bond0"}},
		{name: "IPv6 only", dir: netFixture("roce-ipv6-only"), status: report.Pass,
			findings: ok("mlx5_0/1", "mlx5_1/1"), contains: []string{"2001:db8:10::10/64 on ens1f0np0"}},
		{name: "address on a macvlan", dir: netFixture("roce-macvlan-ip"), status: report.Pass,
			findings: ok("mlx5_0/1", "mlx5_1/1"), contains: []string{"192.0.2.10/24 on mvl0"}},
		// The LAG device stays ACTIVE on the bond while one slave is down.
		{name: "LAG with one slave down", dir: netFixture("lag-one-slave-down"), status: report.Pass,
			findings: ok("mlx5_bond_0/1"), contains: []string{"mlx5_bond_0 port 1 → bond0: up"}},
		// mlx4 VPI: only the Ethernet port is RoCE.
		{name: "mlx4 VPI", dir: netFixture("mlx4-vpi-ib-eth"), status: report.Pass,
			findings: ok("mlx4_0/2")},
	})
}

func TestUnseenMLXDevicesAndPorts(t *testing.T) {
	runNetCases(t, "rdma.devices", []netCase{
		{name: "active-backup bond is no LAG", dir: netFixture("mlx5-bond-active-backup"), status: report.Pass,
			findings: []findingRef{{"rdma.devices/registered", "0000:98:00.0"}, {"rdma.devices/registered", "0000:b1:00.0"}, {"rdma.devices/present", ""}},
			lacks:    []string{"RoCE LAG"}},
		{name: "LAG with one slave down", dir: netFixture("lag-one-slave-down"), status: report.Pass,
			findings: []findingRef{{"rdma.devices/registered", "0000:98:00.0"}, {"rdma.devices/lag-member", "0000:98:00.1"}, {"rdma.devices/present", ""}},
			contains: []string{"mlx5_bond_0 (RoCE LAG over bond0: ens2f0np0, ens2f1np1)"}, lacks: []string{"enable_rdma"}},
	})
	runNetCases(t, "port.state", []netCase{
		{name: "NDR200 2X split passes", dir: netFixture("cx7-ndr200-split"), status: report.Pass,
			findings: []findingRef{{"port.state/active", "mlx5_0/1"}}, contains: []string{"200 Gb/sec (2X NDR)"}, lacks: []string{"lane"}},
		{name: "mlx4 VPI IB and RoCE ports", dir: netFixture("mlx4-vpi-ib-eth"), status: report.Pass,
			findings: []findingRef{{"port.state/active", "mlx4_0/1"}, {"port.state/active", "mlx4_0/2"}}},
	})
	runNetCases(t, "pci.link", []netCase{
		{name: "mlx4 without link files is not judged", dir: netFixture("mlx4-vpi-ib-eth"), status: report.Skip,
			findings: []findingRef{{"pci.link/no-link-status", ""}, {"pci.link/no-link-files", "0000:04:00.0"}}},
	})
}

func TestUnseenMLXSubFunctionsAndIPoIB(t *testing.T) {
	// mlx5 sub-functions: auxiliary devices below the PF, driven by mlx5
	// (provider mlx5), with no address on the host.
	runNetCases(t, "rdma.devices", []netCase{
		{name: "BlueField-3 SFs", dir: netFixture("bf3-subfunctions"), status: report.Pass,
			findings: []findingRef{{"rdma.devices/registered", "0000:3b:00.0"}, {"rdma.devices/present", ""},
				{"rdma.devices/sub-function", "mlx5_2"}, {"rdma.devices/sub-function", "mlx5_3"}},
			contains: []string{"mlx5_core.sf.2 of 0000:3b:00.0"}},
	})
	runNetCases(t, "libibverbs.install", []netCase{
		{name: "BlueField-3 SFs use the mlx5 provider", dir: netFixture("bf3-subfunctions"), status: report.Pass,
			findings: []findingRef{{"libibverbs.install/provider", "mlx5"}, {"libibverbs.install/ok", "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"}},
			contains: []string{"provider mlx5 for mlx5_0, mlx5_2, mlx5_3"}},
	})
	runNetCases(t, "roce.config", []netCase{
		{name: "BlueField-3 SFs without an address", dir: netFixture("bf3-subfunctions"), status: report.Pass,
			findings: []findingRef{{"roce.config/ok", "mlx5_0/1"}, {"roce.config/ok", "mlx5_2/1"}, {"roce.config/ok", "mlx5_3/1"}},
			contains: []string{"no IP on the host (normal for an mlx5 sub-function"},
			lacks:    []string{"VF or representor"}},
	})
	runNetCases(t, "roce.lossless", []netCase{
		{name: "BlueField-3 SFs' lossless is the PF's", dir: netFixture("bf3-subfunctions"), status: report.Pass,
			// The SFs give no finding of their own: the line saying why is the point.
			findings: []findingRef{{"roce.lossless/lossless", "ens1f0np0"}},
			contains: []string{"mlx5_2 port 1: not judged: an mlx5 sub-function: PFC, trust and ECN are the PF's (0000:3b:00.0)"}},
	})
	// IPoIB netdevs (ib0 and a pkey child) are no RoCE netdevs.
	runNetCases(t, "roce.config", []netCase{
		{name: "IPoIB with a pkey child", dir: netFixture("ib-ipoib-pkey-child"), status: report.Skip,
			findings: []findingRef{{"roce.config/not-roce", ""}}},
		{name: "mlx4 VPI: ib0 beside the RoCE netdev", dir: netFixture("mlx4-vpi-ib-eth"), status: report.Pass,
			findings: []findingRef{{"roce.config/ok", "mlx4_0/2"}}, lacks: []string{"ib0"}},
	})
	runNetCases(t, "port.state", []netCase{
		{name: "IPoIB with a pkey child", dir: netFixture("ib-ipoib-pkey-child"), status: report.Pass,
			findings: []findingRef{{"port.state/active", "mlx5_0/1"}}, lacks: []string{"netdev ib0"}},
	})
}
