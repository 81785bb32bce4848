package checks_test

import (
	"path"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestRoCEConfig(t *testing.T) {
	rc := func(slug, unit string) findingRef { return findingRef{"roce.config/" + slug, unit} }
	ok0, ok1 := rc("ok", "mlx5_0/1"), rc("ok", "mlx5_1/1")
	runNetCases(t, "roce.config", []netCase{
		{name: "cx5-roce-healthy", dir: netFixture("cx5-roce-healthy"), status: report.Pass, findings: []findingRef{ok0, ok1},
			// the RoCE MTU is computed from the netdev's
			contains: []string{"ens1f0np0: up, MTU 9000, 192.0.2.10/24 on ens1f0np0 (RoCE active MTU 4096)"}},
		{name: "no rdma_cm configfs entry: mode judged from the GID types", dir: netFixture("roce-tos-default-zero"), status: report.Pass, findings: []findingRef{ok0, ok1},
			contains: []string{"default_roce_mode unknown (no rdma_cm configfs entry), judged from GID types"}},
		{name: "address only on a VLAN of the port's netdev", dir: netFixture("roce-vlan-ip"), status: report.Pass, findings: []findingRef{ok0, ok1},
			contains: []string{"192.0.2.10/24 on ens1f0np0.100"}},
		{name: "LAG: the bond's address and GIDs", dir: netFixture("mlx5-roce-lag-bond"), status: report.Pass, findings: []findingRef{rc("ok", "mlx5_bond_0/1")},
			contains: []string{"mlx5_bond_0 port 1 → bond0", "192.0.2.40/24 on bond0"}},
		{name: "VFs without an IP on the host, one in a pod", dir: netFixture("sriov-vfs-hypervisor"), status: report.Pass,
			findings: []findingRef{ok0, ok1, rc("ok", "mlx5_2/1"), rc("netdev-elsewhere", "mlx5_3/1")},
			contains: []string{"no IP on the host (normal for a VF"}},
		{name: "switchdev representors without an IP", dir: netFixture("sriov-switchdev-representors"), status: report.Pass,
			findings: []findingRef{ok0, rc("ok", "mlx5_0/2"), rc("ok", "mlx5_0/3"), ok1},
			contains: []string{"mlx5_0 port 2 → ens1f0npf0vf0", "normal for a VF or representor"}},
		{name: "iWARP is not RoCE", dir: netFixture("cxgb4-iwarp"), status: report.Skip, findings: []findingRef{rc("iwarp", "")},
			contains: []string{"cxgb4_0 port 1"}, lacks: []string{"RoCE v1", "ConnectX"}},
		{name: "EFA is not RoCE", dir: netFixture("aws-efa"), status: report.Skip, findings: []findingRef{rc("efa", "")},
			contains: []string{"rdmap0s6 port 1"}, lacks: []string{"InfiniBand only"}},
		{name: "Intel E810 RoCE", dir: netFixture("irdma-e810-roce"), status: report.Pass, findings: []findingRef{rc("ok", "irdma0/1")},
			contains: []string{"irdma0 port 1 → ens801f0"}},
		{name: "Broadcom RoCE", dir: netFixture("bnxt-re-roce"), status: report.Pass, findings: []findingRef{rc("ok", "bnxt_re0/1")},
			contains: []string{"bnxt_re0 port 1 → ens3f0np0"}},
		{name: "rxe-softroce", dir: netFixture("rxe-softroce"), status: report.Pass, findings: []findingRef{rc("ok", "rxe0/1")},
			contains: []string{"rxe0 port 1 → enp0s3", "RoCE active MTU 1024"}},
		{name: "cx6-ib-healthy", dir: netFixture("cx6-ib-healthy"), status: report.Skip, findings: []findingRef{rc("not-roce", "")},
			contains: []string{"InfiniBand: mlx5_0 port 1"}},
		{name: "roce-no-ip", dir: netFixture("roce-no-ip"), status: report.Fail, exit: 20, rootCause: "roce.config",
			findings: []findingRef{rc("no-ip", "mlx5_0/1"), ok1}, contains: []string{"ens1f0np0"}},
		{name: "roce-v1-default", dir: netFixture("roce-v1-default"), status: report.Fail, exit: 20, rootCause: "roce.config",
			findings: []findingRef{rc("mode-v1", "mlx5_0/1"), ok1},
			contains: []string{`echo "RoCE v2" > /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_mode`}},
		{name: "netdev down", dir: cx5Edited(t, nil, func(tr *sysfstest.Tree) {
			tr.Facts.Netdevs[2].AdminUp, tr.Facts.Netdevs[2].OperState = false, "down"
		}), status: report.Fail, exit: 20, rootCause: "roce.config",
			findings: []findingRef{ok0, rc("netdev-down", "mlx5_1/1")}, contains: []string{"ip link set ens1f1np1 up"}},
		{name: "only RoCE v1 GIDs", dir: cx5Edited(t, nil, func(tr *sysfstest.Tree) {
			for p := range tr.Files {
				if strings.Contains(p, "mlx5_1/ports/1/gid_attrs/types/") {
					tr.Files[p] = "IB/RoCE v1\n"
				}
			}
		}), status: report.Fail, exit: 20, rootCause: "roce.config",
			findings: []findingRef{ok0, rc("only-v1", "mlx5_1/1")}, contains: []string{"0 RoCE v2, 4 v1"}},
		{name: "empty GID table", dir: cx5Edited(t, nil, func(tr *sysfstest.Tree) {
			// The device link as the kernel writes it, so that the port's
			// netdev is found through its PCI function when no GID names it.
			tr.Link(path.Join(sysfstest.PortDir(tr, "mlx5_1", 1), "../../device"), "../../../0000:3b:00.1")
			gids := sysfstest.PortDir(tr, "mlx5_1", 1) + "/gids/"
			for p := range tr.Files {
				if strings.HasPrefix(p, gids) {
					tr.Files[p] = sysfs.ZeroGID + "\n"
				}
			}
		}), status: report.Fail, exit: 20, rootCause: "roce.config",
			findings: []findingRef{ok0, rc("no-gid", "mlx5_1/1")}, contains: []string{"bring ens1f1np1 up and give it an address"}},
		// One DOWN port blocks neither the other ports' RoCE judgement nor roce.lossless.
		{name: "port-down: the ACTIVE port is judged, the DOWN one listed", dir: netFixture("port-down"), status: report.Pass, exit: 19, rootCause: "port.state",
			findings: []findingRef{ok0, rc("port-down", "mlx5_1/1")}, contains: []string{"DOWN (phys Polling)"}},
		{name: "every RoCE port DOWN skips", dir: cx5Edited(t, func(h *sysfstest.Host) {
			for i := range h.NICs {
				p := &h.NICs[i].Ports[0]
				p.State, p.PhysState, p.OperUp = "1: DOWN", "2: Polling", false
			}
		}, nil), status: report.Skip, exit: 19, rootCause: "port.state",
			findings: []findingRef{rc("none-active", ""), rc("port-down", "mlx5_0/1"), rc("port-down", "mlx5_1/1")}},
		{name: "small MTU warns", dir: cx5Edited(t, func(h *sysfstest.Host) { h.NICs[0].Ports[0].MTU = 1000 }, nil), status: report.Warn,
			findings: []findingRef{rc("small-mtu", "mlx5_0/1"), ok1}, contains: []string{"MTU 1000 allows a RoCE MTU of only 512"}},
		{name: "garbage default_roce_mode is unknown", dir: cx5Edited(t, nil, func(tr *sysfstest.Tree) {
			tr.Attr(sysfs.RoCEModePath("mlx5_0", 1), "\x00\xff")
		}), status: report.Pass,
			findings: []findingRef{ok0, ok1}, contains: []string{"not a mode rdma_cm writes: unknown"}},
		{name: "netdev not listed", dir: cx5Edited(t, nil, func(tr *sysfstest.Tree) {
			var keep []sysfs.Netdev
			for _, nd := range tr.Facts.Netdevs {
				if nd.Name != "ens1f1np1" {
					keep = append(keep, nd)
				}
			}
			tr.Facts.Netdevs = keep
		}), status: report.Fail, exit: 20, rootCause: "roce.config",
			findings: []findingRef{ok0, rc("netdev-missing", "mlx5_1/1")}, contains: []string{"ip link show ens1f1np1"}},
		{name: "netdev facts missing", dir: cx5Edited(t, nil, func(tr *sysfstest.Tree) { tr.Facts.Netdevs = nil }), status: report.Error, exit: report.ExitUnknown,
			rootCause: "roce.config",
			findings:  []findingRef{rc("netdev-unreadable", "mlx5_0/1"), rc("netdev-unreadable", "mlx5_1/1")}},
	})
	if got := checks.RoCEActiveMTU(1500); got != 1024 {
		t.Errorf("RoCEActiveMTU(1500) = %d", got)
	}
}
