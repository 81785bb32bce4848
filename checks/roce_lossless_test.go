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
		return netTree(t, tr)
	}
	strict := checks.Options{ExpectLossless: true}
	runNetCases(t, "roce.lossless", []netCase{
		{name: "cx5-roce-healthy", dir: netFixture("cx5-roce-healthy"), status: report.Pass,
			contains: []string{"ens1f0np0 (mlx5_0 port 1): PFC on priority 3, trust dscp (qos/trust), ECN on for every priority"}},
		{name: "cx5-roce-healthy --expect-lossless", dir: netFixture("cx5-roce-healthy"), opts: strict, status: report.Pass},
		{name: "cx6-ib-healthy", dir: netFixture("cx6-ib-healthy"), status: report.Skip, contains: []string{"no Ethernet ports"}},
		{name: "rxe-softroce", dir: netFixture("rxe-softroce"), status: report.Skip, contains: []string{"only software RoCE"}},
		{name: "pfc-off", dir: netFixture("pfc-off"), status: report.Warn,
			contains: []string{"PFC off on every priority: RoCE runs lossy", "mlnx_qos -i <netdev> --trust dscp --pfc 0,0,0,1,0,0,0,0", "--expect-lossless makes this fail"}},
		{name: "pfc-off --expect-lossless", dir: netFixture("pfc-off"), opts: strict, status: report.Fail, exit: 21, rootCause: "roce.lossless"},
		{name: "ecn-off-on-pfc-priority", dir: netFixture("ecn-off-on-pfc-priority"), status: report.Warn,
			contains: []string{"PFC on priority 3 but ECN off there (roce_np, roce_rp)", "off for 3"}},
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
		}), status: report.Pass, contains: []string{"trust dscp (DCB APP table)", "ECN unknown"}},
		{name: "PFC on a priority DSCP 26 does not reach", dir: cx5(func(tr *sysfstest.Tree) { sysfstest.SetPFC(tr, "ens1f1np1", 1<<4) }),
			status: report.Warn, contains: []string{"RoCE's DSCP 26 maps to priority 3, which has no PFC"}},
		{name: "DCB not recorded", dir: cx5(func(tr *sysfstest.Tree) { delete(tr.Facts.DCB, "ens1f0np0") }), status: report.Error, exit: 21,
			rootCause: "roce.lossless", contains: []string{"dcb of ens1f0np0 unknown"}},
	})
}
