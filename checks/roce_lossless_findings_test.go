package checks_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// TestRoCELosslessFindings: each host gives the findings named, netdev by
// netdev, whatever the words.
func TestRoCELosslessFindings(t *testing.T) {
	cx5 := func(tree func(tr *sysfstest.Tree)) string {
		tr := sysfstest.Build(sysfstest.CX5RoCE())
		tree(tr)
		return hwWrite(t, tr)
	}
	strict := checks.Options{ExpectLossless: true}
	ok0, ok1 := findingRef{"roce.lossless/lossless", "ens1f0np0"}, findingRef{"roce.lossless/lossless", "ens1f1np1"}
	for _, tc := range []struct {
		name string
		dir  string
		opts checks.Options
		want []findingRef
	}{
		{"healthy", netFixture("cx5-roce-healthy"), checks.Options{}, []findingRef{ok0, ok1}},
		{"PFC off, lossless expected", netFixture("pfc-off"), strict,
			[]findingRef{{"roce.lossless/lossy", "ens1f0np0"}, {"roce.lossless/lossy", "ens1f1np1"}, {"roce.lossless/lossless-expected", ""}}},
		{"PFC off, ECN off on its priority", cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetPFC(tr, "ens1f0np0", 0)
			tr.Attr(sysfstest.NetDir(tr, "ens1f0np0")+"/ecn/roce_np/enable/3", "0")
		}), checks.Options{}, []findingRef{{"roce.lossless/lossy-ecn-off", "ens1f0np0"}, ok1}},
		{"ECN off on the PFC priority", netFixture("ecn-off-on-pfc-priority"), checks.Options{}, []findingRef{ok0, {"roce.lossless/ecn-off", "ens1f1np1"}}},
		{"no DCB", cx5(func(tr *sysfstest.Tree) {
			for nd := range tr.Facts.DCB {
				tr.Facts.DCB[nd] = sysfs.DCB{Err: sysfs.ErrNoDCB}
			}
		}), checks.Options{}, []findingRef{{"roce.lossless/no-dcb", "ens1f0np0"}, {"roce.lossless/no-dcb", "ens1f1np1"}}},
		{"DCB not recorded", cx5(func(tr *sysfstest.Tree) { delete(tr.Facts.DCB, "ens1f0np0") }), checks.Options{},
			[]findingRef{{"roce.lossless/dcb-unreadable", "ens1f0np0"}, ok1}},
		{"DCB answers an error", cx5(func(tr *sysfstest.Tree) { tr.Facts.DCB["ens1f0np0"] = sysfs.DCB{Err: "EIO"} }), checks.Options{},
			[]findingRef{{"roce.lossless/dcb-error", "ens1f0np0"}, ok1}},
		{"trust pcp while DSCP is mapped", cx5(func(tr *sysfstest.Tree) { sysfstest.SetTrust(tr, "ens1f0np0", "pcp") }), checks.Options{},
			[]findingRef{{"roce.lossless/trust-pcp-dscp-mapped", "ens1f0np0"}, ok1}},
		{"default_roce_tos on a priority without PFC", cx5(func(tr *sysfstest.Tree) { sysfstest.SetPFC(tr, "ens1f1np1", 1<<4) }), checks.Options{},
			[]findingRef{ok0, {"roce.lossless/tos-class-off-pfc", "ens1f1np1"}}},
		{"--roce-tc on a priority without PFC", cx5(func(tr *sysfstest.Tree) { sysfstest.SetPFC(tr, "ens1f1np1", 1<<4) }), checks.Options{RoCETC: 106, RoCETCSet: true},
			[]findingRef{ok0, {"roce.lossless/expected-class-off-pfc", "ens1f1np1"}}},
		{"ToS 0 on a priority without PFC", netFixture("roce-tos-default-zero"), checks.Options{},
			[]findingRef{{"roce.lossless/default-class-off-pfc", "ens1f0np0"}, {"roce.lossless/default-class-off-pfc", "ens1f1np1"}}},
		{"untagged RoCE under trust pcp", cx5(func(tr *sysfstest.Tree) { sysfstest.SetUntaggedPCP(tr, "ens1f0np0") }), checks.Options{},
			[]findingRef{{"roce.lossless/untagged-pcp", "ens1f0np0"}, ok1}},
		{"PFC priority other than the class says", netFixture("cx5-roce-healthy"), classOf(t, "mlx5_0/1.pfc_priority = 4\n"),
			[]findingRef{{"roce.lossless/pfc-deviates", "ens1f0np0"}, ok1}},
		{"software RoCE", netFixture("rxe-softroce"), checks.Options{}, []findingRef{{"roce.lossless/none-judged", ""}}},
		{"InfiniBand", netFixture("cx6-ib-healthy"), checks.Options{}, []findingRef{{"roce.lossless/not-roce", ""}}},
		{"iWARP", netFixture("cxgb4-iwarp"), checks.Options{}, []findingRef{{"roce.lossless/iwarp", ""}}},
		{"EFA", netFixture("aws-efa"), checks.Options{}, []findingRef{{"roce.lossless/efa", ""}}},
		{"usNIC", netFixture("usnic-cisco-vic"), checks.Options{}, []findingRef{{"roce.lossless/usnic", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hwResult(t, hwRun(t, tc.dir, tc.opts), "roce.lossless")
			if diff := cmp.Diff(tc.want, refs(c.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, c.Summary)
			}
		})
	}
	r := hwRunOne(t, netFixture("no-rdma-nic"), "roce.lossless", checks.Options{})
	if diff := cmp.Diff([]findingRef{{"roce.lossless/no-rdma-port", ""}}, refs(r.Findings)); diff != "" {
		t.Errorf("no RDMA port: findings (-want +got):\n%s\n%s", diff, r.Summary)
	}
}
