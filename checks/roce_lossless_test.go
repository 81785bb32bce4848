package checks_test

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestRoCELossless(t *testing.T) {
	cx5 := func(tree func(tr *sysfstest.Tree)) string {
		tr := sysfstest.Build(sysfstest.CX5RoCE())
		tree(tr)
		return hwWrite(t, tr)
	}
	strict := checks.Options{ExpectLossless: true}
	rl := func(slug, unit string) findingRef { return findingRef{"roce.lossless/" + slug, unit} }
	ok0, ok1 := rl("lossless", "ens1f0np0"), rl("lossless", "ens1f1np1")
	expected := rl("lossless-expected", "")
	runNetCases(t, "roce.lossless", []netCase{
		{name: "cx5-roce-healthy", dir: netFixture("cx5-roce-healthy"), status: report.Pass, findings: []findingRef{ok0, ok1},
			contains: []string{"ToS 106 (DSCP 26, mlx5_0 port 1 default_roce_tos) → priority 3"}, lacks: []string{"assuming"}},
		{name: "cx5-roce-healthy --expect-lossless", dir: netFixture("cx5-roce-healthy"), opts: strict, status: report.Pass, findings: []findingRef{ok0, ok1}},
		{name: "cx6-ib-healthy", dir: netFixture("cx6-ib-healthy"), status: report.Skip, findings: []findingRef{rl("not-roce", "")},
			contains: []string{"InfiniBand: mlx5_0 port 1"}},
		{name: "rxe-softroce", dir: netFixture("rxe-softroce"), status: report.Skip, findings: []findingRef{rl("none-judged", "")},
			contains: []string{"rxe0 port 1: not judged: software RoCE"}},
		{name: "pfc-off", dir: netFixture("pfc-off"), status: report.Warn,
			findings: []findingRef{rl("lossy", "ens1f0np0"), rl("lossy", "ens1f1np1")},
			contains: []string{"`mlnx_qos -i ens1f0np0 --trust dscp --pfc 0,0,0,1,0,0,0,0`", "`dcb app add dev ens1f1np1 dscp-prio 26:3`"},
			lacks:    []string{"<netdev>"}},
		{name: "pfc-off --expect-lossless", dir: netFixture("pfc-off"), opts: strict, status: report.Fail, exit: 21, rootCause: "roce.lossless",
			findings: []findingRef{rl("lossy", "ens1f0np0"), rl("lossy", "ens1f1np1"), expected}},
		{name: "ecn-off-on-pfc-priority", dir: netFixture("ecn-off-on-pfc-priority"), status: report.Warn,
			findings: []findingRef{ok0, rl("ecn-off", "ens1f1np1")},
			contains: []string{"`echo 1 > /sys/class/net/ens1f1np1/ecn/roce_np/enable/3` and `echo 1 > /sys/class/net/ens1f1np1/ecn/roce_rp/enable/3`"},
			lacks:    []string{"ens1f0np0/ecn"}},
		{name: "ecn-off-on-pfc-priority --expect-lossless", dir: netFixture("ecn-off-on-pfc-priority"), opts: strict, status: report.Fail, exit: 21, rootCause: "roce.lossless",
			findings: []findingRef{ok0, rl("ecn-off", "ens1f1np1"), expected}},
		{name: "driver without DCB skips, even when lossless is expected", dir: cx5(func(tr *sysfstest.Tree) {
			for nd := range tr.Facts.DCB {
				tr.Facts.DCB[nd] = sysfs.DCB{Err: sysfs.ErrNoDCB}
			}
		}), opts: strict, status: report.Skip, findings: []findingRef{rl("no-dcb", "ens1f0np0"), rl("no-dcb", "ens1f1np1")}},
		{name: "trust pcp while DSCP is mapped", dir: cx5(func(tr *sysfstest.Tree) { sysfstest.SetTrust(tr, "ens1f0np0", "pcp") }),
			status: report.Warn, findings: []findingRef{rl("trust-pcp-dscp-mapped", "ens1f0np0"), ok1}},
		{name: "upstream kernel: trust from the APP table, ECN unknown", dir: cx5(func(tr *sysfstest.Tree) {
			for _, nd := range []string{"ens1f0np0", "ens1f1np1"} {
				tr.Remove(sysfstest.NetDir(tr, nd) + "/qos")
				tr.Remove(sysfstest.NetDir(tr, nd) + "/ecn")
			}
		}), status: report.Pass, findings: []findingRef{ok0, ok1},
			contains: []string{"trust dscp (DCB APP table)", "trust matches; ECN not readable (no MLNX_OFED ecn files)"},
			lacks:    []string{"trust and ECN match"}},
		{name: "ECN files on one netdev only", dir: cx5(func(tr *sysfstest.Tree) { tr.Remove(sysfstest.NetDir(tr, "ens1f1np1") + "/ecn") }),
			status: report.Pass, findings: []findingRef{ok0, ok1},
			contains: []string{"trust and ECN match; ECN not readable (no MLNX_OFED ecn files) on ens1f1np1"}},
		{name: "PFC on a priority DSCP 26 does not reach", dir: cx5(func(tr *sysfstest.Tree) { sysfstest.SetPFC(tr, "ens1f1np1", 1<<4) }),
			status: report.Warn, findings: []findingRef{ok0, rl("tos-class-off-pfc", "ens1f1np1")},
			contains: []string{"(PFC is on priority 4)", "`dcb app replace dev ens1f1np1 dscp-prio 26:4`"}},
		{name: "--roce-tc 106 lands on priority 3 without PFC", dir: cx5(func(tr *sysfstest.Tree) { sysfstest.SetPFC(tr, "ens1f1np1", 1<<4) }),
			opts: checks.Options{RoCETC: 106, RoCETCSet: true}, status: report.Warn,
			findings: []findingRef{ok0, rl("expected-class-off-pfc", "ens1f1np1")},
			contains: []string{"`dcb app replace dev ens1f1np1 dscp-prio 26:4`", "`mlnx_qos -i ens1f1np1 --pfc 0,0,0,1,1,0,0,0`"}},
		{name: "no default ToS: the traffic judged is ToS 0, not an assumed DSCP 26", dir: netFixture("roce-tos-default-zero"), status: report.Warn,
			findings: []findingRef{rl("default-class-off-pfc", "ens1f0np0"), rl("default-class-off-pfc", "ens1f1np1")},
			contains: []string{"echo 106 > /sys/kernel/config/rdma_cm/mlx5_1/ports/1/default_roce_tos", "NCCL_IB_TC=106"},
			lacks:    []string{"assuming"}},
		{name: "no default ToS, --roce-tc 106: lossless", dir: netFixture("roce-tos-default-zero"), opts: checks.Options{RoCETC: 106, RoCETCSet: true},
			status: report.Pass, findings: []findingRef{ok0, ok1}, contains: []string{"ToS 106 (DSCP 26, --roce-tc 106) → priority 3"}},
		{name: "mlx5 RoCE LAG: DCB read from the slaves", dir: netFixture("mlx5-roce-lag-bond"), status: report.Pass,
			findings: []findingRef{rl("lossless", "ens2f0np0"), rl("lossless", "ens2f1np1")},
			contains: []string{"ens2f0np0 (mlx5_bond_0 port 1, slave of bond0)"},
			lacks:    []string{"bond0 (mlx5_bond_0", "EOPNOTSUPP"}},
		{name: "mlx5 RoCE LAG without PFC on the slaves", dir: netFixture("mlx5-roce-lag-pfc-off"), status: report.Warn,
			findings: []findingRef{rl("lossy", "ens2f0np0"), rl("lossy", "ens2f1np1")}, contains: []string{"`dcb pfc set dev ens2f0np0 prio-pfc 3:on`"}},
		{name: "iWARP: not RoCE", dir: netFixture("cxgb4-iwarp"), status: report.Skip, findings: []findingRef{rl("iwarp", "")}, contains: []string{"iWARP: cxgb4_0 port 1"}},
		{name: "EFA: not RoCE", dir: netFixture("aws-efa"), status: report.Skip, findings: []findingRef{rl("efa", "")}, contains: []string{"EFA (SRD): rdmap0s6 port 1"}, lacks: []string{"InfiniBand"}},
		{name: "VFs are the PF's", dir: netFixture("sriov-vfs-hypervisor"), status: report.Pass, findings: []findingRef{ok0, ok1},
			contains: []string{"mlx5_2 port 1: not judged: a VF: PFC, trust and ECN are the PF's (0000:3b:00.0)"}},
		{name: "untagged RoCE under trust pcp", dir: cx5(func(tr *sysfstest.Tree) { sysfstest.SetUntaggedPCP(tr, "ens1f0np0") }),
			status: report.Warn, findings: []findingRef{rl("untagged-pcp", "ens1f0np0"), ok1},
			contains: []string{"`dcb app add dev ens1f0np0 dscp-prio 26:3`", "`mlnx_qos -i ens1f0np0 --trust dscp --dscp2prio set,26,3`"}},
		{name: "untagged RoCE under trust pcp --expect-lossless", dir: cx5(func(tr *sysfstest.Tree) { sysfstest.SetUntaggedPCP(tr, "ens1f0np0") }),
			opts: strict, status: report.Fail, exit: 21, rootCause: "roce.lossless", findings: []findingRef{rl("untagged-pcp", "ens1f0np0"), ok1, expected}},
		{name: "trust pcp on a VLAN netdev is tagged", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetUntaggedPCP(tr, "ens1f0np0")
			sysfstest.MarkVLAN(tr, "ens1f0np0")
		}), status: report.Pass, findings: []findingRef{ok0, ok1}, contains: []string{"trust pcp (DCB APP table)", "VLAN netdev"}},
		{name: "trust pcp with PFC on priority 0 is lossless", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetUntaggedPCP(tr, "ens1f0np0")
			sysfstest.SetPFC(tr, "ens1f0np0", 1)
		}), status: report.Pass, findings: []findingRef{ok0, ok1}},
		{name: "rdma_cm default ToS 0 lands on priority 0", dir: cx5(func(tr *sysfstest.Tree) { sysfstest.SetRoCETOS(tr, "mlx5_0", 1, "0") }),
			status: report.Warn, findings: []findingRef{rl("tos-class-off-pfc", "ens1f0np0"), ok1},
			contains: []string{"`echo 106 > /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos`"}},
		{name: "rdma_cm default ToS 106 everywhere: no assumption", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetRoCETOS(tr, "mlx5_0", 1, "106")
			sysfstest.SetRoCETOS(tr, "mlx5_1", 1, "106")
		}), status: report.Pass, findings: []findingRef{ok0, ok1}, contains: []string{"ToS 106 (DSCP 26, mlx5_0 port 1 default_roce_tos)"},
			lacks: []string{"assuming"}},
		{name: "garbage default_roce_tos: judged as the default ToS 0, and said", dir: cx5(func(tr *sysfstest.Tree) { sysfstest.SetRoCETOS(tr, "mlx5_0", 1, "\x00\xffzz") }),
			status: report.Warn, findings: []findingRef{rl("default-class-off-pfc", "ens1f0np0"), ok1},
			contains: []string{"default_roce_tos unreadable", "not a ToS byte"}},
		{name: "port-down: the ACTIVE port is judged, the DOWN one listed", dir: netFixture("port-down"), status: report.Pass, exit: 19, rootCause: "port.state",
			findings: []findingRef{ok0}, contains: []string{"mlx5_1 port 1: not judged: DOWN (phys Polling)"}},
		{name: "DCB not recorded", dir: cx5(func(tr *sysfstest.Tree) { delete(tr.Facts.DCB, "ens1f0np0") }), status: report.Error, exit: report.ExitUnknown,
			rootCause: "roce.lossless", findings: []findingRef{rl("dcb-unreadable", "ens1f0np0"), ok1}, contains: []string{"dcb pfc show dev"}},
	})
}
