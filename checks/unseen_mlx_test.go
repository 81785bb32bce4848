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
	runNetCases(t, "roce.config", []netCase{
		// A bond that is not a RoCE LAG: each PF keeps its device; the
		// backup slave's port has no GID for bond0's address by design.
		{name: "active-backup bond without LAG", dir: netFixture("mlx5-bond-active-backup"), status: report.Pass,
			contains: []string{"mlx5_0 port 1 → ens2f0np0: up, MTU 9000, 192.0.2.40/24 on bond0",
				"mlx5_1 port 1 → ens3f0np0: up, MTU 9000, backup slave of bond0 (active-backup; active slave ens2f0np0)"},
			lacks: []string{"no RoCE v2 GID for", "no IP address", "mlx5_0 port 1 → bond0"}},
		{name: "IPv6 only", dir: netFixture("roce-ipv6-only"), status: report.Pass,
			contains: []string{"2001:db8:10::10/64 on ens1f0np0", "2001:db8:11::10/64 on ens1f1np1"}, lacks: []string{"no IP address"}},
		{name: "address on a macvlan", dir: netFixture("roce-macvlan-ip"), status: report.Pass,
			contains: []string{"mlx5_0 port 1 → ens1f0np0", "192.0.2.10/24 on mvl0"}, lacks: []string{"no IP address"}},
		// The LAG device stays ACTIVE on the bond while one slave is down.
		{name: "LAG with one slave down", dir: netFixture("lag-one-slave-down"), status: report.Pass,
			contains: []string{"mlx5_bond_0 port 1 → bond0: up"}},
		// mlx4 VPI: only the Ethernet port is RoCE.
		{name: "mlx4 VPI", dir: netFixture("mlx4-vpi-ib-eth"), status: report.Pass,
			contains: []string{"mlx4_0 port 2 → enp4s0d1", "InfiniBand: mlx4_0 port 1"}},
	})
}

func TestUnseenMLXDevicesAndPorts(t *testing.T) {
	runNetCases(t, "rdma.devices", []netCase{
		{name: "active-backup bond is no LAG", dir: netFixture("mlx5-bond-active-backup"), status: report.Pass,
			contains: []string{"2 RDMA device(s): mlx5_0, mlx5_1"}, lacks: []string{"RoCE LAG"}},
		{name: "LAG with one slave down", dir: netFixture("lag-one-slave-down"), status: report.Pass,
			contains: []string{"mlx5_bond_0 (RoCE LAG over bond0: ens2f0np0, ens2f1np1)"}, lacks: []string{"NO RDMA DEVICE", "enable_rdma"}},
	})
	runNetCases(t, "port.state", []netCase{
		{name: "NDR200 2X split passes", dir: netFixture("cx7-ndr200-split"), status: report.Pass, contains: []string{"200 Gb/sec (2X NDR)"}, lacks: []string{"lane"}},
		{name: "mlx4 VPI IB and RoCE ports", dir: netFixture("mlx4-vpi-ib-eth"), status: report.Pass, contains: []string{"mlx4_0 port 1", "mlx4_0 port 2"}},
	})
	runNetCases(t, "pci.link", []netCase{
		{name: "mlx4 without link files is not judged", dir: netFixture("mlx4-vpi-ib-eth"), status: report.Skip, contains: []string{"current_link_* absent"}},
	})
}

func TestUnseenMLXSubFunctionsAndIPoIB(t *testing.T) {
	// mlx5 sub-functions: auxiliary devices below the PF, driven by mlx5
	// (provider mlx5), with no address on the host.
	runNetCases(t, "rdma.devices", []netCase{
		{name: "BlueField-3 SFs", dir: netFixture("bf3-subfunctions"), status: report.Pass,
			contains: []string{"mlx5_2: mlx5 sub-function mlx5_core.sf.2 of 0000:3b:00.0"}, lacks: []string{"outside the table"}},
	})
	runNetCases(t, "libibverbs.install", []netCase{
		{name: "BlueField-3 SFs use the mlx5 provider", dir: netFixture("bf3-subfunctions"), status: report.Pass,
			contains: []string{"provider mlx5 for mlx5_0, mlx5_2, mlx5_3"}, lacks: []string{"no known provider"}},
	})
	runNetCases(t, "roce.config", []netCase{
		{name: "BlueField-3 SFs without an address", dir: netFixture("bf3-subfunctions"), status: report.Pass,
			contains: []string{"mlx5_2 port 1 → enp59s0f0s88: up, MTU 1500; no IP on the host (normal for an mlx5 sub-function"},
			lacks:    []string{"VF or representor"}},
	})
	runNetCases(t, "roce.lossless", []netCase{
		{name: "BlueField-3 SFs' lossless is the PF's", dir: netFixture("bf3-subfunctions"), status: report.Pass,
			contains: []string{"mlx5_2 port 1: not judged: an mlx5 sub-function: PFC, trust and ECN are the PF's (0000:3b:00.0)"}},
	})
	// IPoIB netdevs (ib0 and a pkey child) are no RoCE netdevs.
	runNetCases(t, "roce.config", []netCase{
		{name: "IPoIB with a pkey child", dir: netFixture("ib-ipoib-pkey-child"), status: report.Skip,
			contains: []string{"no RoCE port (InfiniBand: mlx5_0 port 1)"}},
		{name: "mlx4 VPI: ib0 beside the RoCE netdev", dir: netFixture("mlx4-vpi-ib-eth"), status: report.Pass,
			contains: []string{"mlx4_0 port 2 → enp4s0d1: up"}, lacks: []string{"ib0"}},
	})
	runNetCases(t, "port.state", []netCase{
		{name: "IPoIB with a pkey child", dir: netFixture("ib-ipoib-pkey-child"), status: report.Pass,
			contains: []string{"mlx5_0 port 1: ACTIVE, 200 Gb/sec (4X HDR), InfiniBand, LID 0x1a"}, lacks: []string{"netdev ib0"}},
	})
}
