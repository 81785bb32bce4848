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
	runNetCases(t, "port.state", []netCase{
		{name: "cx5-roce-healthy", dir: netFixture("cx5-roce-healthy"), status: report.Pass, contains: []string{"all 2 ports ACTIVE", "mlx5_1 port 1: ACTIVE"}},
		{name: "cx6-ib-healthy", dir: netFixture("cx6-ib-healthy"), status: report.Pass, contains: []string{"LID 0x1a, SM LID 0x1"}},
		{name: "rxe-softroce", dir: netFixture("rxe-softroce"), status: report.Pass, contains: []string{"rxe0 port 1: ACTIVE"}},
		{name: "port-down", dir: netFixture("port-down"), status: report.Fail, exit: 19, rootCause: "port.state",
			contains: []string{"DOWN (phys Polling)", "mlx5_1 port 1", "netdev ens1f1np1 is administratively down", "`ip link set ens1f1np1 up`"}},
		{name: "ib-no-sm", dir: netFixture("ib-no-sm"), status: report.Fail, exit: 19, rootCause: "port.state",
			contains: []string{"INIT (phys LinkUp)", "no subnet manager answered",
				"Look for the fabric's subnet manager before starting one", "`sminfo`", "cat /sys/class/infiniband/mlx5_0/ports/1/sm_lid", "Never start a second SM",
				"`opensm -g 0xb83fd20300a12c6e`"}},
		{name: "multiport-one-down", dir: netFixture("multiport-one-down"), status: report.Fail, exit: 19, rootCause: "port.state",
			contains: []string{"2 ports: 1 fail, 1 pass", "mlx4_0 port 1: ACTIVE", "mlx4_0 port 2: DOWN (phys Polling)", "no link"}},
		{name: "ACTIVE with SM LID 0", dir: ib(func(p *sysfstest.Port) { p.SMLID = 0 }), status: report.Fail, exit: 19, rootCause: "port.state",
			contains: []string{"SM LID 0x0: no subnet manager answered"}},
		// Only management disables an InfiniBand port: a warning, never a drain.
		{name: "disabled port", dir: ib(func(p *sysfstest.Port) { p.State, p.PhysState = "1: DOWN", "3: Disabled" }), status: report.Warn, exit: 0,
			contains: []string{"DOWN (phys Disabled): disabled by management", "`ibportstate -C mlx5_0 -P 1 -D 0 1 enable`", "switch side", "unused = true"}},
		{name: "a device with no ports is not counted as a port", dir: func() string {
			tr := sysfstest.Build(sysfstest.CX5RoCE())
			tr.Remove(sysfstest.PortDir(tr, "mlx5_1", 1))
			return hwWrite(t, tr)
		}(), status: report.Fail, exit: 19, rootCause: "port.state",
			contains: []string{"2 ports: 1 fail, 1 pass", "mlx5_1: no ports", "mlx5_1 lists no ports", "dmesg"}},
		{name: "slower than --expect-rate", dir: netFixture("cx5-roce-healthy"), opts: checks.Options{ExpectRate: 200}, status: report.Fail, exit: 19,
			rootCause: "port.state", contains: []string{"rate 100 Gb/sec (4X EDR) below the expected 200 Gb/sec", "≥ 200 Gb/sec"}},
		{name: "at --expect-rate", dir: netFixture("cx5-roce-healthy"), opts: checks.Options{ExpectRate: 100}, status: report.Pass},
		{name: "unparsable rate with --expect-rate", dir: ib(func(p *sysfstest.Port) { p.Rate = "fast" }), opts: checks.Options{ExpectRate: 100},
			status: report.Error, exit: report.ExitUnknown, rootCause: "port.state", contains: []string{"rate", "fast"}},
		{name: "state file missing", dir: func() string {
			tr := sysfstest.Build(sysfstest.CX6IB())
			tr.Remove(sysfstest.PortDir(tr, "mlx5_0", 1) + "/state")
			return hwWrite(t, tr)
		}(), status: report.Error, exit: report.ExitUnknown, rootCause: "port.state", contains: []string{"ports/1/state", "no such file", "1 port: 1 error", "state unknown", "grep . /sys/class/infiniband"}},
		{name: "garbage state", dir: ib(func(p *sysfstest.Port) { p.State = "\x00\xffbinary" }), status: report.Error, exit: report.ExitUnknown, rootCause: "port.state"},
	})
}
