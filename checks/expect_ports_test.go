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
func TestExpectationsJudgePorts(t *testing.T) {
	runNetCases(t, "port.state", []netCase{
		{name: "a port unused on purpose is not judged", dir: netFixture("port-down"), opts: classOf(t, "mlx5_1/1.unused = true\n"), status: report.Pass,
			contains: []string{"mlx5_1 port 1: DOWN (phys Polling)", "unused on purpose (expect.conf:3 mlx5_1/1.unused = true): not judged", "1 not judged"}},
		{name: "every port unused on purpose passes on the host's finding", dir: netFixture("port-down"), opts: classOf(t, "mlx5_*/*.unused = true\n"), status: report.Pass,
			contains: []string{"no port in use to judge: 2 not judged (see details)"}},
		{name: "a disabled IB port the class uses fails", dir: netFixture("ib-port-disabled"), opts: classOf(t, "mlx5_0/*.link_layer = InfiniBand\n"),
			status: report.Fail, exit: 19, rootCause: "port.state", contains: []string{"expected in use by expect.conf:3 mlx5_0/*.link_layer = InfiniBand"}},
		{name: "a disabled IB port unused on purpose", dir: netFixture("ib-port-disabled"), opts: classOf(t, "mlx5_0/2.unused = true\n"), status: report.Pass},
		{name: "1X against the class's width fails", dir: netFixture("ib-link-degraded-1x"), opts: classOf(t, "mlx5_*/1.width = 4X\nmlx5_*/1.rate = 200\n"),
			status: report.Fail, exit: 19, rootCause: "port.state",
			contains: []string{"width 1X, expected 4X by expect.conf:3 mlx5_*/1.width = 4X", "rate 50 Gb/sec, expected 200 by expect.conf:4 mlx5_*/1.rate = 200"}},
		{name: "a 1X port the class expects passes", dir: netFixture("ib-link-degraded-1x"), opts: classOf(t, "mlx5_*/1.width = 1X\n"), status: report.Pass},
		{name: "link layer", dir: netFixture("cx5-roce-healthy"), opts: classOf(t, "mlx5_*/1.link_layer = InfiniBand\n"), status: report.Fail, exit: 19, rootCause: "port.state",
			contains: []string{"link layer Ethernet, expected InfiniBand by expect.conf:3"}},
	})
	runNetCases(t, "roce.config", []netCase{
		{name: "MTU", dir: netFixture("cx5-roce-healthy"), opts: classOf(t, "mlx5_0/1.mtu = 4200\n"), status: report.Fail, exit: 20, rootCause: "roce.config",
			contains: []string{"netdev ens1f0np0 MTU 9000, expected 4200 by expect.conf:3 mlx5_0/1.mtu = 4200", "ip link set ens1f0np0 mtu 4200"}},
	})
	runNetCases(t, "roce.lossless", []netCase{
		{name: "PFC priority", dir: netFixture("cx5-roce-healthy"), opts: classOf(t, "mlx5_*/1.pfc_priority = 4\n"), status: report.Fail, exit: 21, rootCause: "roce.lossless",
			contains: []string{"PFC off on priority 4, expected on by expect.conf:3 mlx5_*/1.pfc_priority = 4", "`dcb pfc set dev ens1f0np0 prio-pfc 4:on`"}},
		{name: "roce_tc from the class", dir: netFixture("roce-tos-default-zero"), opts: classOf(t, "roce_tc = 106\n"), status: report.Pass,
			contains: []string{"ToS 106 (DSCP 26, expect.conf:3 roce_tc = 106) → priority 3"}},
		{name: "lossless from the class", dir: netFixture("pfc-off"), opts: classOf(t, "lossless = true\n"), status: report.Fail, exit: 21, rootCause: "roce.lossless",
			contains: []string{"lossless expected: expect.conf:3 lossless = true"}},
	})
	runNetCases(t, "rdma.devices", []netCase{
		{name: "device count and firmware", dir: netFixture("cx5-roce-healthy"), opts: classOf(t, "devices = 3\nmlx5_0.fw = 16.99.9999\n"), status: report.Fail, exit: 14, rootCause: "rdma.devices",
			contains: []string{"2 RDMA device(s), expected 3 by expect.conf:3 devices = 3", "mlx5_0 firmware 16.35.2000 (MT_0000000008), expected 16.99.9999 by expect.conf:4"}},
	})
}
