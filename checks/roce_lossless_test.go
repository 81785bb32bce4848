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
	runNetCases(t, "roce.lossless", []netCase{
		{name: "cx5-roce-healthy", dir: netFixture("cx5-roce-healthy"), status: report.Pass,
			contains: []string{"ens1f0np0 (mlx5_0 port 1): PFC on priority 3, trust dscp (qos/trust), ECN on for every priority",
				"trust and ECN match", "ToS 106 (DSCP 26, mlx5_0 port 1 default_roce_tos) → priority 3"}, lacks: []string{"assuming"}},
		{name: "cx5-roce-healthy --expect-lossless", dir: netFixture("cx5-roce-healthy"), opts: strict, status: report.Pass},
		{name: "cx6-ib-healthy", dir: netFixture("cx6-ib-healthy"), status: report.Skip, contains: []string{"no RoCE port (InfiniBand: mlx5_0 port 1)"}},
		{name: "rxe-softroce", dir: netFixture("rxe-softroce"), status: report.Skip, contains: []string{"rxe0 port 1: not judged: software RoCE"}},
		{name: "pfc-off", dir: netFixture("pfc-off"), status: report.Warn,
			contains: []string{"PFC off on every priority: RoCE runs lossy", "`mlnx_qos -i ens1f0np0 --trust dscp --pfc 0,0,0,1,0,0,0,0`",
				"`dcb pfc set dev ens1f1np1 prio-pfc 3:on`", "`dcb app add dev ens1f1np1 dscp-prio 26:3`", "--expect-lossless makes this fail",
				"ToS 106 (DSCP 26, mlx5_0 port 1 default_roce_tos)"},
			lacks: []string{"<netdev>", "turn ECN on"}},
		{name: "pfc-off --expect-lossless", dir: netFixture("pfc-off"), opts: strict, status: report.Fail, exit: 21, rootCause: "roce.lossless"},
		{name: "ecn-off-on-pfc-priority", dir: netFixture("ecn-off-on-pfc-priority"), status: report.Warn,
			contains: []string{"PFC on priority 3 but ECN off there (roce_np, roce_rp)", "off for 3",
				"`echo 1 > /sys/class/net/ens1f1np1/ecn/roce_np/enable/3` and `echo 1 > /sys/class/net/ens1f1np1/ecn/roce_rp/enable/3`"},
			lacks: []string{"ens1f0np0/ecn"}},
		{name: "ecn-off-on-pfc-priority --expect-lossless", dir: netFixture("ecn-off-on-pfc-priority"), opts: strict, status: report.Fail, exit: 21, rootCause: "roce.lossless"},
		{name: "driver without DCB skips, even when lossless is expected", dir: cx5(func(tr *sysfstest.Tree) {
			for nd := range tr.Facts.DCB {
				tr.Facts.DCB[nd] = sysfs.DCB{Err: sysfs.ErrNoDCB}
			}
		}), opts: strict, status: report.Skip, contains: []string{"driver has no DCB (EOPNOTSUPP)"}},
		{name: "trust pcp while DSCP is mapped", dir: cx5(func(tr *sysfstest.Tree) { sysfstest.SetTrust(tr, "ens1f0np0", "pcp") }),
			status: report.Warn, contains: []string{"trust pcp while the APP table maps DSCP"}},
		{name: "upstream kernel: trust from the APP table, ECN unknown", dir: cx5(func(tr *sysfstest.Tree) {
			for _, nd := range []string{"ens1f0np0", "ens1f1np1"} {
				tr.Remove(sysfstest.NetDir(tr, nd) + "/qos")
				tr.Remove(sysfstest.NetDir(tr, nd) + "/ecn")
			}
		}), status: report.Pass, contains: []string{"trust dscp (DCB APP table)", "ECN unknown", "trust matches; ECN not readable (no MLNX_OFED ecn files)"},
			lacks: []string{"trust and ECN match"}},
		{name: "ECN files on one netdev only", dir: cx5(func(tr *sysfstest.Tree) { tr.Remove(sysfstest.NetDir(tr, "ens1f1np1") + "/ecn") }),
			status: report.Pass, contains: []string{"trust and ECN match; ECN not readable (no MLNX_OFED ecn files) on ens1f1np1"}},
		{name: "PFC on a priority DSCP 26 does not reach", dir: cx5(func(tr *sysfstest.Tree) { sysfstest.SetPFC(tr, "ens1f1np1", 1<<4) }),
			status: report.Warn, contains: []string{"ToS 106 (DSCP 26, mlx5_1 port 1 default_roce_tos) lands on priority 3, which has no PFC (PFC is on priority 4)",
				"`dcb app replace dev ens1f1np1 dscp-prio 26:4`"}},
		{name: "--roce-tc 106 lands on priority 3 without PFC", dir: cx5(func(tr *sysfstest.Tree) { sysfstest.SetPFC(tr, "ens1f1np1", 1<<4) }),
			opts: checks.Options{RoCETC: 106, RoCETCSet: true}, status: report.Warn,
			contains: []string{"ToS 106 (DSCP 26, --roce-tc 106) lands on priority 3", "`dcb app replace dev ens1f1np1 dscp-prio 26:4`", "`mlnx_qos -i ens1f1np1 --dscp2prio set,26,4`",
				"`dcb pfc set dev ens1f1np1 prio-pfc 3:on`", "`mlnx_qos -i ens1f1np1 --pfc 0,0,0,1,1,0,0,0`"}},
		{name: "no default ToS: the traffic judged is ToS 0, not an assumed DSCP 26", dir: netFixture("roce-tos-default-zero"), status: report.Warn,
			contains: []string{"ToS 0 (DSCP 0, nothing sets a class) lands on priority 0, which has no PFC (PFC is on priority 3)",
				"Applications send ToS 0 unless told", "echo 106 > /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos",
				"echo 106 > /sys/kernel/config/rdma_cm/mlx5_1/ports/1/default_roce_tos", "NCCL_IB_TC=106", "UCX_IB_TRAFFIC_CLASS=106", "--tclass=106", "--roce-tc N"},
			lacks: []string{"assuming"}},
		{name: "no default ToS, --roce-tc 106: lossless", dir: netFixture("roce-tos-default-zero"), opts: checks.Options{RoCETC: 106, RoCETCSet: true},
			status: report.Pass, contains: []string{"ToS 106 (DSCP 26, --roce-tc 106) → priority 3"}},
		{name: "mlx5 RoCE LAG: DCB read from the slaves", dir: netFixture("mlx5-roce-lag-bond"), status: report.Pass,
			contains: []string{"ens2f0np0 (mlx5_bond_0 port 1, slave of bond0): PFC on priority 3", "ens2f1np1 (mlx5_bond_0 port 1, slave of bond0)", "2 netdev(s) lossless"},
			lacks:    []string{"bond0 (mlx5_bond_0", "EOPNOTSUPP"}},
		{name: "mlx5 RoCE LAG without PFC on the slaves", dir: netFixture("mlx5-roce-lag-pfc-off"), status: report.Warn,
			contains: []string{"ens2f0np0: PFC off on every priority", "ens2f1np1: PFC off on every priority", "`dcb pfc set dev ens2f0np0 prio-pfc 3:on`"}},
		{name: "iWARP: not RoCE", dir: netFixture("cxgb4-iwarp"), status: report.Skip, contains: []string{"no RoCE port (iWARP: cxgb4_0 port 1)", "iWARP runs over TCP"}},
		{name: "EFA: not RoCE", dir: netFixture("aws-efa"), status: report.Skip, contains: []string{"no RoCE port (EFA (SRD): rdmap0s6 port 1)"}, lacks: []string{"InfiniBand"}},
		{name: "VFs are the PF's", dir: netFixture("sriov-vfs-hypervisor"), status: report.Pass,
			contains: []string{"mlx5_2 port 1: not judged: a VF: PFC, trust and ECN are the PF's (0000:3b:00.0)", "2 netdev(s) lossless"}},
		{name: "untagged RoCE under trust pcp", dir: cx5(func(tr *sysfstest.Tree) { sysfstest.SetUntaggedPCP(tr, "ens1f0np0") }),
			status: report.Warn, contains: []string{"trust pcp (DCB APP table)", "untagged RoCE with trust pcp goes to priority 0, which has no PFC (PFC is on priority 3)",
				"`dcb app add dev ens1f0np0 dscp-prio 26:3`", "`mlnx_qos -i ens1f0np0 --trust dscp --dscp2prio set,26,3`"}},
		{name: "untagged RoCE under trust pcp --expect-lossless", dir: cx5(func(tr *sysfstest.Tree) { sysfstest.SetUntaggedPCP(tr, "ens1f0np0") }),
			opts: strict, status: report.Fail, exit: 21, rootCause: "roce.lossless", contains: []string{"untagged RoCE with trust pcp goes to priority 0"}},
		{name: "trust pcp on a VLAN netdev is tagged", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetUntaggedPCP(tr, "ens1f0np0")
			sysfstest.MarkVLAN(tr, "ens1f0np0")
		}), status: report.Pass, contains: []string{"trust pcp (DCB APP table)", "VLAN netdev"}},
		{name: "trust pcp with PFC on priority 0 is lossless", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetUntaggedPCP(tr, "ens1f0np0")
			sysfstest.SetPFC(tr, "ens1f0np0", 1)
		}), status: report.Pass},
		{name: "rdma_cm default ToS 0 lands on priority 0", dir: cx5(func(tr *sysfstest.Tree) { sysfstest.SetRoCETOS(tr, "mlx5_0", 1, "0") }),
			status: report.Warn, contains: []string{"ToS 0 (DSCP 0, mlx5_0 port 1 default_roce_tos) lands on priority 0, which has no PFC",
				"`echo 106 > /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos`"}},
		{name: "rdma_cm default ToS 106 everywhere: no assumption", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetRoCETOS(tr, "mlx5_0", 1, "106")
			sysfstest.SetRoCETOS(tr, "mlx5_1", 1, "106")
		}), status: report.Pass, contains: []string{"ToS 106 (DSCP 26, mlx5_0 port 1 default_roce_tos)"},
			lacks: []string{"assuming"}},
		{name: "garbage default_roce_tos: judged as the default ToS 0, and said", dir: cx5(func(tr *sysfstest.Tree) { sysfstest.SetRoCETOS(tr, "mlx5_0", 1, "\x00\xffzz") }),
			status: report.Warn, contains: []string{"default_roce_tos unreadable", "not a ToS byte", "ToS 0 (DSCP 0, nothing sets a class)"}},
		{name: "port-down: the ACTIVE port is judged, the DOWN one listed", dir: netFixture("port-down"), status: report.Pass, exit: 19, rootCause: "port.state",
			contains: []string{"1 netdev(s) lossless", "mlx5_1 port 1: not judged: DOWN (phys Polling)", "1 line(s) not judged"}},
		{name: "DCB not recorded", dir: cx5(func(tr *sysfstest.Tree) { delete(tr.Facts.DCB, "ens1f0np0") }), status: report.Error, exit: report.ExitUnknown,
			rootCause: "roce.lossless", contains: []string{"dcb of ens1f0np0 unknown", "dcb pfc show dev"}},
	})
}
