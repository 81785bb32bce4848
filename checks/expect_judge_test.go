package checks

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

func parseClass(t *testing.T, text string) *expect.Class {
	t.Helper()
	f, err := expect.Parse("/etc/rdmadoctor/expect.conf", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return f.Classes[0]
}

const judgeClass = `[class c]
hosts = *
devices = 2
mlx5_*.fw = 16.35.2000
mlx5_*.ports = 1
mlx5_1.ports = 2
`

// judged is a finding as these tests see it: which, about what, and the
// words (which cite the key of the file).
type judged struct{ ID, Unit, Message string }

func judgedOf(fs []report.Finding) []judged {
	var out []judged
	for _, f := range fs {
		out = append(out, judged{f.ID, f.Unit, f.Message})
	}
	return out
}

func TestJudgeDeviceCount(t *testing.T) {
	env := &Env{Expect: parseClass(t, judgeClass)}
	if got := judgeDeviceCount(env, 2); got != nil {
		t.Errorf("2 devices as expected: %v", got)
	}
	want := []judged{{"rdma.devices/count-deviates", "", "1 RDMA device(s), expected 2 by expect.conf:3 devices = 2"}}
	if diff := cmp.Diff(want, judgedOf(judgeDeviceCount(env, 1))); diff != "" {
		t.Errorf("judgeDeviceCount(1) (-want +got):\n%s", diff)
	}
	if got := judgeDeviceCount(&Env{}, 7); got != nil {
		t.Errorf("no class judges nothing, got %v", got)
	}
	if got := judgeDeviceCount(&Env{Expect: parseClass(t, "[class c]\nhosts = *\n")}, 7); got != nil {
		t.Errorf("a class without devices judges nothing, got %v", got)
	}
}

func TestJudgeDeviceExpect(t *testing.T) {
	env := &Env{Expect: parseClass(t, judgeClass)}
	port := sysfs.RDMAPort{Num: 1}
	for _, tc := range []struct {
		name string
		dev  sysfs.RDMADevice
		want []judged
	}{
		{"as expected", sysfs.RDMADevice{Name: "mlx5_0", FWVer: "16.35.2000\n", Ports: []sysfs.RDMAPort{port}}, nil},
		{"old firmware", sysfs.RDMADevice{Name: "mlx5_0", FWVer: "16.31.1014", Ports: []sysfs.RDMAPort{port}},
			[]judged{{"rdma.devices/fw-deviates", "mlx5_0", "mlx5_0 firmware 16.31.1014, expected 16.35.2000 by expect.conf:4 mlx5_*.fw = 16.35.2000"}}},
		{"unreadable firmware", sysfs.RDMADevice{Name: "mlx5_0", Ports: []sysfs.RDMAPort{port}},
			[]judged{{"rdma.devices/fw-unknown", "mlx5_0", "mlx5_0 firmware unknown (no readable fw_ver), expected 16.35.2000 by expect.conf:4 mlx5_*.fw = 16.35.2000"}}},
		{"a later specific line", sysfs.RDMADevice{Name: "mlx5_1", FWVer: "16.35.2000", Ports: []sysfs.RDMAPort{port}},
			[]judged{{"rdma.devices/ports-deviate", "mlx5_1", "mlx5_1 has 1 port(s), expected 2 by expect.conf:6 mlx5_1.ports = 2"}}},
		{"both", sysfs.RDMADevice{Name: "mlx5_2", FWVer: "x", Ports: []sysfs.RDMAPort{port, port}},
			[]judged{{"rdma.devices/fw-deviates", "mlx5_2", "mlx5_2 firmware x, expected 16.35.2000 by expect.conf:4 mlx5_*.fw = 16.35.2000"},
				{"rdma.devices/ports-deviate", "mlx5_2", "mlx5_2 has 2 port(s), expected 1 by expect.conf:5 mlx5_*.ports = 1"}}},
		{"no rule for the device", sysfs.RDMADevice{Name: "rxe0"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, judgedOf(judgeDeviceExpect(env, tc.dev))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if got := judgeDeviceExpect(&Env{}, sysfs.RDMADevice{Name: "mlx5_0"}); got != nil {
		t.Errorf("no class judges nothing, got %v", got)
	}
}

func TestJudgePCIeExpect(t *testing.T) {
	c := parseClass(t, "[class c]\nhosts = *\nmlx5_*.pcie_speed = 16.0 GT/s PCIe\nmlx5_*.pcie_width = 16\n")
	e := c.Device("mlx5_0")
	pe := pcieExpectFrom(e)
	gen4, _ := sysfs.ParseLinkSpeed("16 GT/s")
	gen3, _ := sysfs.ParseLinkSpeed("8.0 GT/s PCIe")
	gen5, _ := sysfs.ParseLinkSpeed("32.0 GT/s PCIe")
	if f, k := judgePCIeExpect(pe, gen4, 16); f != nil || k != nil {
		t.Errorf("16 GT/s x16 (written without .0) is as expected: %q", f)
	}
	f, k := judgePCIeExpect(pe, gen3, 8)
	want := "speed 8.0 GT/s, expected 16.0 GT/s PCIe by expect.conf:3 mlx5_*.pcie_speed = 16.0 GT/s PCIe|width x8, expected x16 by expect.conf:4 mlx5_*.pcie_width = 16"
	if strings.Join(f, "|") != want || len(k) != 2 {
		t.Errorf("slower and narrower: %q %q", f, k)
	}
	// Faster than the class is a deviation too: another card than the class's.
	if f, k := judgePCIeExpect(pe, gen5, 16); len(f) != 1 || k[0] != "expect.conf:3 mlx5_*.pcie_speed = 16.0 GT/s PCIe" {
		t.Errorf("faster: %q %q", f, k)
	}
}

func TestExpectSkipBlocksNothing(t *testing.T) {
	ran := map[string]bool{}
	mk := func(id string, code int, needs ...string) *Check {
		return fakeCheck(id, code, needs, func(context.Context, *Env) Result {
			ran[id] = true
			return Result{Status: report.Pass, Summary: id}
		})
	}
	env := NewEnv(nil, Options{Level: 1, Expect: parseClass(t, "[class c]\nhosts = *\nskip = a.first\n")})
	res := Run(context.Background(), env, []*Check{mk("a.first", 10), mk("b.second", 11, "a.first")})
	if res[0].Status != report.Skip || res[0].Summary != "skipped by expect.conf:3 skip = a.first" || ran["a.first"] {
		t.Errorf("a.first: %s %q (ran %v)", res[0].Status, res[0].Summary, ran["a.first"])
	}
	if res[1].Status != report.Pass || !ran["b.second"] {
		t.Errorf("a skipped prerequisite blocked b.second: %s %q", res[1].Status, res[1].Summary)
	}
}

func TestExpectClassForChecksSkipIDs(t *testing.T) {
	f, err := expect.Parse("e.conf", strings.NewReader("[class c]\nhosts = n*\nskip = counters.errors\n[class d]\nhosts = m*\nskip = counters.eros\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ExpectClassFor(f, "n1"); err == nil || err.Error() != `e.conf:6: skip: "counters.eros" is not a check ID (did you mean counters.errors?) (rdmadoctor list shows them)` {
		t.Errorf("a misspelt skip in any class must be refused: %v", err)
	}
	f.Classes = f.Classes[:1]
	if c, err := ExpectClassFor(f, "n1"); err != nil || c.Name != "c" {
		t.Errorf("ExpectClassFor(n1) = %v, %v", c, err)
	}
}

func TestExpectDefaults(t *testing.T) {
	for _, tc := range []struct{ host, class, glob string }{
		{"cx5-node01", "cx5-node", "cx5-node*"},
		{"cx5-node01.example.com", "cx5-node", "cx5-node*.example.com"},
		{"gpu-a-17", "gpu-a", "gpu-a-*"},
		{"login", "login", "login"},
		{"1234", "node", "1234"},
		{"node_ü7", "node_-", "node_ü*"},
	} {
		class, hosts, err := ExpectDefaults(tc.host)
		if err != nil || class != tc.class || len(hosts) != 1 || hosts[0] != tc.glob {
			t.Errorf("ExpectDefaults(%q) = %q %q %v; want %q [%q]", tc.host, class, hosts, err, tc.class, tc.glob)
		}
		if _, err := expect.NewClass(class, hosts); err != nil {
			t.Errorf("ExpectDefaults(%q) gives a class the format refuses: %v", tc.host, err)
		}
	}
	if _, _, err := ExpectDefaults(""); err == nil {
		t.Error("an empty host name must not give a class that matches every host")
	}
}
