package checks_test

import (
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/report"
)

// classOf parses an expectations file whose one class matches every host.
func classOf(t *testing.T, body string) checks.Options {
	t.Helper()
	f, err := expect.Parse("expect.conf", strings.NewReader("[class c]\nhosts = *\n"+body))
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.Match("any-host")
	if err != nil {
		t.Fatal(err)
	}
	return checks.Options{Expect: c}
}

// With an expectations file, a deviation fails and names the key; a port
// unused on purpose is not judged.
//
// The file, line and key a deviation cites are the point of each case: the
// words keep them; the findings say what was judged of which port.
func TestExpectationsJudgePorts(t *testing.T) {
	ps := func(slug, unit string) findingRef { return findingRef{"port.state/" + slug, unit} }
	rl := func(slug, unit string) findingRef { return findingRef{"roce.lossless/" + slug, unit} }
	runNetCases(t, "port.state", []netCase{
		{name: "a port unused on purpose is not judged", dir: netFixture("port-down"), opts: classOf(t, "mlx5_1/1.unused = true\n"), status: report.Pass,
			findings: []findingRef{ps("active", "mlx5_0/1"), ps("unused", "mlx5_1/1")}, contains: []string{"expect.conf:3 mlx5_1/1.unused = true"}},
		{name: "every port unused on purpose passes on the host's finding", dir: netFixture("port-down"), opts: classOf(t, "mlx5_*/*.unused = true\n"), status: report.Pass,
			findings: []findingRef{ps("unused", "mlx5_0/1"), ps("unused", "mlx5_1/1"), ps("none-in-use", "")}},
		{name: "a disabled IB port the class uses fails", dir: netFixture("ib-port-disabled"), opts: classOf(t, "mlx5_0/*.link_layer = InfiniBand\n"),
			status: report.Fail, exit: 19, rootCause: "port.state",
			findings: []findingRef{ps("active", "mlx5_0/1"), ps("disabled-in-use", "mlx5_0/2")}, contains: []string{"expect.conf:3 mlx5_0/*.link_layer = InfiniBand"}},
		{name: "a disabled IB port unused on purpose", dir: netFixture("ib-port-disabled"), opts: classOf(t, "mlx5_0/2.unused = true\n"), status: report.Pass,
			findings: []findingRef{ps("active", "mlx5_0/1"), ps("unused", "mlx5_0/2")}},
		{name: "1X against the class's width fails", dir: netFixture("ib-link-degraded-1x"), opts: classOf(t, "mlx5_*/1.width = 4X\nmlx5_*/1.rate = 200\n"),
			status: report.Fail, exit: 19, rootCause: "port.state",
			findings: []findingRef{ps("one-lane", "mlx5_0/1"), ps("rate-deviates", "mlx5_0/1"), ps("width-deviates", "mlx5_0/1")},
			contains: []string{"expect.conf:3 mlx5_*/1.width = 4X", "expect.conf:4 mlx5_*/1.rate = 200"}},
		{name: "a 1X port the class expects passes", dir: netFixture("ib-link-degraded-1x"), opts: classOf(t, "mlx5_*/1.width = 1X\n"), status: report.Pass,
			findings: []findingRef{ps("active", "mlx5_0/1")}},
		{name: "link layer", dir: netFixture("cx5-roce-healthy"), opts: classOf(t, "mlx5_*/1.link_layer = InfiniBand\n"), status: report.Fail, exit: 19, rootCause: "port.state",
			findings: []findingRef{ps("link-layer-deviates", "mlx5_0/1"), ps("link-layer-deviates", "mlx5_1/1")}, contains: []string{"expected InfiniBand by expect.conf:3"}},
	})
	runNetCases(t, "roce.config", []netCase{
		{name: "MTU", dir: netFixture("cx5-roce-healthy"), opts: classOf(t, "mlx5_0/1.mtu = 4200\n"), status: report.Fail, exit: 20, rootCause: "roce.config",
			findings: []findingRef{{"roce.config/mtu-deviates", "mlx5_0/1"}, {"roce.config/ok", "mlx5_1/1"}},
			contains: []string{"expect.conf:3 mlx5_0/1.mtu = 4200", "ip link set ens1f0np0 mtu 4200"}},
	})
	runNetCases(t, "roce.lossless", []netCase{
		{name: "PFC priority", dir: netFixture("cx5-roce-healthy"), opts: classOf(t, "mlx5_*/1.pfc_priority = 4\n"), status: report.Fail, exit: 21, rootCause: "roce.lossless",
			findings: []findingRef{rl("pfc-deviates", "ens1f0np0"), rl("pfc-deviates", "ens1f1np1")},
			contains: []string{"expect.conf:3 mlx5_*/1.pfc_priority = 4", "`dcb pfc set dev ens1f0np0 prio-pfc 4:on`"}},
		{name: "roce_tc from the class", dir: netFixture("roce-tos-default-zero"), opts: classOf(t, "roce_tc = 106\n"), status: report.Pass,
			findings: []findingRef{rl("lossless", "ens1f0np0"), rl("lossless", "ens1f1np1")},
			// the DSCP and priority computed from the class's ToS
			contains: []string{"ToS 106 (DSCP 26, expect.conf:3 roce_tc = 106) → priority 3"}},
		{name: "lossless from the class", dir: netFixture("pfc-off"), opts: classOf(t, "lossless = true\n"), status: report.Fail, exit: 21, rootCause: "roce.lossless",
			findings: []findingRef{rl("lossy", "ens1f0np0"), rl("lossy", "ens1f1np1"), rl("lossless-expected", "")},
			contains: []string{"expect.conf:3 lossless = true"}},
	})
	runNetCases(t, "rdma.devices", []netCase{
		{name: "device count and firmware", dir: netFixture("cx5-roce-healthy"), opts: classOf(t, "devices = 3\nmlx5_0.fw = 16.99.9999\n"), status: report.Fail, exit: 14, rootCause: "rdma.devices",
			findings: []findingRef{{"rdma.devices/registered", "0000:3b:00.0"}, {"rdma.devices/registered", "0000:3b:00.1"}, {"rdma.devices/present", ""},
				{"rdma.devices/count-deviates", ""}, {"rdma.devices/fw-deviates", "mlx5_0"}},
			contains: []string{"expected 3 by expect.conf:3 devices = 3", "expected 16.99.9999 by expect.conf:4"}},
	})
}
