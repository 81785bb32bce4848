package checks_test

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestPortState(t *testing.T) {
	ib := func(edit func(p *sysfstest.Port)) string {
		h := sysfstest.CX6IB()
		edit(&h.NICs[0].Ports[0])
		return hwWrite(t, sysfstest.Build(h))
	}
	ps := func(slug, unit string) findingRef { return findingRef{"port.state/" + slug, unit} }
	active0, active1 := ps("active", "mlx5_0/1"), ps("active", "mlx5_1/1")
	runNetCases(t, "port.state", []netCase{
		{name: "cx5-roce-healthy", dir: netFixture("cx5-roce-healthy"), status: report.Pass, findings: []findingRef{active0, active1}},
		{name: "cx6-ib-healthy", dir: netFixture("cx6-ib-healthy"), status: report.Pass, findings: []findingRef{active0}, contains: []string{"LID 0x1a, SM LID 0x1"}},
		{name: "rxe-softroce", dir: netFixture("rxe-softroce"), status: report.Pass, findings: []findingRef{ps("active", "rxe0/1")}},
		{name: "port-down", dir: netFixture("port-down"), status: report.Fail, exit: 19, rootCause: "port.state",
			findings: []findingRef{active0, ps("admin-down", "mlx5_1/1")}, contains: []string{"`ip link set ens1f1np1 up`"}},
		{name: "ib-no-sm", dir: netFixture("ib-no-sm"), status: report.Fail, exit: 19, rootCause: "port.state",
			findings: []findingRef{ps("init-no-sm", "mlx5_0/1")}, contains: []string{"Never start a second SM", "`opensm -g 0xb83fd20300a12c6e`"}},
		{name: "multiport-one-down", dir: netFixture("multiport-one-down"), status: report.Fail, exit: 19, rootCause: "port.state",
			findings: []findingRef{ps("active", "mlx4_0/1"), ps("no-link", "mlx4_0/2")}},
		{name: "ACTIVE with SM LID 0", dir: ib(func(p *sysfstest.Port) { p.SMLID = 0 }), status: report.Fail, exit: 19, rootCause: "port.state",
			findings: []findingRef{ps("no-lid", "mlx5_0/1")}, contains: []string{"SM LID 0x0"}},
		// Only management disables an InfiniBand port: a warning, never a drain.
		{name: "disabled port", dir: ib(func(p *sysfstest.Port) { p.State, p.PhysState = "1: DOWN", "3: Disabled" }), status: report.Warn, exit: 0,
			findings: []findingRef{ps("disabled", "mlx5_0/1")}, contains: []string{"`ibportstate -C mlx5_0 -P 1 -D 0 1 enable`", "unused = true"}},
		{name: "a device with no ports is not counted as a port", dir: func() string {
			tr := sysfstest.Build(sysfstest.CX5RoCE())
			tr.Remove(sysfstest.PortDir(tr, "mlx5_1", 1))
			return hwWrite(t, tr)
		}(), status: report.Fail, exit: 19, rootCause: "port.state",
			findings: []findingRef{active0, ps("no-ports", "mlx5_1")}, contains: []string{"dmesg"}},
		{name: "slower than --expect-rate", dir: netFixture("cx5-roce-healthy"), opts: checks.Options{ExpectRate: 200}, status: report.Fail, exit: 19,
			rootCause: "port.state", findings: []findingRef{ps("below-rate", "mlx5_0/1"), ps("below-rate", "mlx5_1/1")},
			contains: []string{"rate 100 Gb/sec (4X EDR) below the expected 200 Gb/sec"}},
		{name: "at --expect-rate", dir: netFixture("cx5-roce-healthy"), opts: checks.Options{ExpectRate: 100}, status: report.Pass, findings: []findingRef{active0, active1}},
		{name: "unparsable rate with --expect-rate", dir: ib(func(p *sysfstest.Port) { p.Rate = "fast" }), opts: checks.Options{ExpectRate: 100},
			status: report.Error, exit: report.ExitUnknown, rootCause: "port.state", findings: []findingRef{ps("rate-unknown", "mlx5_0/1")}, contains: []string{"fast"}},
		{name: "state file missing", dir: func() string {
			tr := sysfstest.Build(sysfstest.CX6IB())
			tr.Remove(sysfstest.PortDir(tr, "mlx5_0", 1) + "/state")
			return hwWrite(t, tr)
		}(), status: report.Error, exit: report.ExitUnknown, rootCause: "port.state", findings: []findingRef{ps("unreadable", "mlx5_0/1")},
			contains: []string{"ports/1/state", "grep . /sys/class/infiniband"}},
		{name: "garbage state", dir: ib(func(p *sysfstest.Port) { p.State = "\x00\xffbinary" }), status: report.Error, exit: report.ExitUnknown, rootCause: "port.state",
			findings: []findingRef{ps("unreadable", "mlx5_0/1")}},
	})
}
