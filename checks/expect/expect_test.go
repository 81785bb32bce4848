package expect

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// example is the format's documented example.
const example = `# rdmadoctor expectations, format 1
[class cx5-roce]
hosts = cx5-node* cx5-spare-??        # space-separated globs on the host name
devices = 2
skip = counters.errors probe.cq_overflow
roce_tc = 106
lossless = true
mlx5_*.fw = 16.35.2000
mlx5_*.pcie_speed = 8.0 GT/s PCIe
mlx5_*.pcie_width = 16
mlx5_*.ports = 1
mlx5_*/1.link_layer = Ethernet
mlx5_*/1.rate = 100
mlx5_*/1.width = 4X
mlx5_*/1.mtu = 9000
mlx5_*/1.pfc_priority = 3
mlx5_1/1.unused = true                # cabled later

[class ib]
hosts = ib-*
mlx5_*/*.link_layer = infiniband
mlx5_*/*.rate = 200
mlx5_4/*.rate = 100
mlx5_*/*.rate = 400
mlx5_5/1.rate = 25.78125
`

func mustParse(t *testing.T, text string) *File {
	t.Helper()
	f, err := Parse("/etc/rdmadoctor/expect.conf", strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return f
}

func TestParseExample(t *testing.T) {
	f := mustParse(t, example)
	if len(f.Classes) != 2 {
		t.Fatalf("%d classes, want 2", len(f.Classes))
	}
	c := f.Classes[0]
	if c.Name != "cx5-roce" || c.Line != 2 || strings.Join(c.Hosts, ",") != "cx5-node*,cx5-spare-??" {
		t.Errorf("class = %s line %d hosts %v", c.Name, c.Line, c.Hosts)
	}
	if c.Devices.V != 2 || c.RoCETC.V != 106 || !c.Lossless.V || len(c.Skip) != 2 || c.Skip[1].V != "probe.cq_overflow" {
		t.Errorf("class keys: devices %v tc %v lossless %v skip %v", c.Devices, c.RoCETC, c.Lossless, c.Skip)
	}
	if s := c.Skipped("counters.errors"); s == nil || s.Cite() != "expect.conf:5 skip = counters.errors" {
		t.Errorf("Skipped(counters.errors) = %v", s.Cite())
	}
	d := c.Device("mlx5_0")
	if d.FW.V.String() != "16.35.2000" || d.PCIeSpeed.V.String() != "8.0 GT/s PCIe" || d.PCIeWidth.V != 16 || d.Ports.V != 1 {
		t.Errorf("Device(mlx5_0) = %+v", d)
	}
	if got := d.PCIeSpeed.Cite(); got != "expect.conf:9 mlx5_*.pcie_speed = 8.0 GT/s PCIe" {
		t.Errorf("Cite = %q", got)
	}
	p := c.Port("mlx5_0", 1)
	if p.LinkLayer.V.String() != "Ethernet" || p.Rate.V != 100 || p.Width.V.String() != "4X" || p.MTU.V != 9000 || p.PFCPriority.V != 3 || p.Unused != nil {
		t.Errorf("Port(mlx5_0, 1) = %+v", p)
	}
	if got := p.Rate.Cite(); got != "expect.conf:13 mlx5_*/1.rate = 100" {
		t.Errorf("Cite = %q", got)
	}
	if u := c.Port("mlx5_1", 1).Unused; u == nil || !u.V || u.Comment != "cabled later" {
		t.Errorf("mlx5_1 port 1 unused = %+v", u)
	}
	if p2 := c.Port("mlx5_0", 2); p2.Rate != nil {
		t.Errorf("port 2 has no rule, got rate %v", p2.Rate.Cite())
	}
	if d := c.Device("rxe0"); d.FW != nil {
		t.Errorf("rxe0 matches no rule, got %+v", d)
	}
}

func TestLaterLineWins(t *testing.T) {
	ib := mustParse(t, example).Classes[1]
	for _, tc := range []struct {
		dev  string
		port int
		rate float64
		line int
	}{
		{"mlx5_0", 1, 400, 24},      // the general rule's last line
		{"mlx5_4", 2, 400, 24},      // its own rule (line 23) came before line 24
		{"mlx5_5", 1, 25.78125, 25}, // a specific line after the general one
		{"mlx5_5", 2, 400, 24},
	} {
		p := ib.Port(tc.dev, tc.port)
		if p.Rate == nil || p.Rate.V != tc.rate || p.Rate.Line != tc.line {
			t.Errorf("Port(%s, %d).Rate = %+v, want %v from line %d", tc.dev, tc.port, p.Rate, tc.rate, tc.line)
		}
	}
	if ll := ib.Port("mlx5_9", 3).LinkLayer; ll == nil || ll.V.String() != "InfiniBand" {
		t.Errorf("link_layer is not canonical InfiniBand: %+v", ll)
	}
	f := mustParse(t, "[class a]\nhosts = x\nhosts = y\ndevices = 1\ndevices = 3\nskip = a.b c.d\nskip = e.f\n")
	c := f.Classes[0]
	if strings.Join(c.Hosts, " ") != "y" || c.Devices.V != 3 || c.Devices.Line != 5 || len(c.Skip) != 1 || c.Skip[0].V != "e.f" {
		t.Errorf("later class lines do not win: hosts %v devices %+v skip %v", c.Hosts, c.Devices, c.Skip)
	}
}

func TestBOMAndBracketGlobs(t *testing.T) {
	f := mustParse(t, "\ufeff[class a]\nhosts = [a-c]x*\n[m]lx5_?.fw = 1.2\n[m]lx5_?/*.width = 2x\n")
	c, err := f.Match("bx1")
	if err != nil {
		t.Fatal(err)
	}
	if fw := c.Device("mlx5_3").FW; fw == nil || fw.V.String() != "1.2" {
		t.Errorf("a device glob starting with [ is a key: %+v", fw)
	}
	if w := c.Port("mlx5_3", 2).Width; w == nil || w.V.String() != "2X" {
		t.Errorf("width is not canonical 2X: %+v", w)
	}
}

func TestNilClassExpectsNothing(t *testing.T) {
	var c *Class
	if d := c.Device("mlx5_0"); d != (DeviceExpect{}) {
		t.Errorf("nil class Device = %+v", d)
	}
	if p := c.Port("mlx5_0", 1); p != (PortExpect{}) {
		t.Errorf("nil class Port = %+v", p)
	}
	var v *Value[int]
	if c.Skipped("a.b") != nil || v.Cite() != "" || c.Source() != "" || c.ExpectedDevices() != nil || c.ExpectedRoCETC() != nil || c.ExpectedLossless() != nil {
		t.Error("nil class or value is not empty")
	}
}

func TestParseErrors(t *testing.T) {
	long := "[class a]\nhosts = x\n# " + strings.Repeat("y", MaxLine) + "\n"
	for _, tc := range []struct {
		name, text, want string
	}{
		{"key before section", "hosts = x\n", "expect.conf:1: hosts: key before the first [class NAME] section"},
		{"unknown class key", "[class a]\nhosts = x\nhost = y\n", "expect.conf:3: host: unknown key"},
		{"unknown device key", "[class a]\nhosts = x\nmlx5_0.firmware = 1\n", `expect.conf:3: mlx5_0.firmware: unknown device key "firmware"`},
		{"unknown port key", "[class a]\nhosts = x\nmlx5_0/1.speed = 1\n", `expect.conf:3: mlx5_0/1.speed: unknown port key "speed"`},
		{"no equals", "[class a]\nhosts = x\ndevices 2\n", "expect.conf:3: want KEY = VALUE"},
		{"no value", "[class a]\nhosts = x\ndevices =  # none\n", "expect.conf:3: devices: no value"},
		{"bad int", "[class a]\nhosts = x\ndevices = two\n", `expect.conf:3: devices: "two" is not a whole number`},
		{"negative", "[class a]\nhosts = x\ndevices = -1\n", "expect.conf:3: devices: -1 is out of range 0..4096"},
		{"tc range", "[class a]\nhosts = x\nroce_tc = 256\n", "expect.conf:3: roce_tc: 256 is out of range 0..255"},
		{"bool", "[class a]\nhosts = x\nlossless = yes\n", `expect.conf:3: lossless: "yes": want true or false`},
		{"gpu nic distance", "[class a]\nhosts = x\ngpu_nic_max_distance = near\n", `expect.conf:3: gpu_nic_max_distance: "near": want one of PIX PXB PHB NODE SYS`},
		{"gpu nic distances", "[class a]\nhosts = x\ngpu_nic_max_distance = PIX PXB\n", `gpu_nic_max_distance: "PIX PXB": want one of`},
		{"pkey word", "[class a]\nhosts = x\npkeys = [\"default\"]\n", `expect.conf:3: pkeys: "default" is not a P_Key`},
		{"pkey zero", "[class a]\nhosts = x\npkeys = 0x8000\n", `expect.conf:3: pkeys: "0x8000" is not a P_Key`},
		{"skip id", "[class a]\nhosts = x\nskip = counters\n", `expect.conf:3: skip: "counters" is not a check ID`},
		{"bad host glob", "[class a]\nhosts = node[\n", `expect.conf:2: hosts: host glob "node[": bad pattern`},
		{"bad device glob", "[class a]\nhosts = x\nmlx5_[.fw = 1\n", `expect.conf:3: mlx5_[.fw: device glob "mlx5_[": bad pattern`},
		{"empty device glob", "[class a]\nhosts = x\n.fw = 1\n", `expect.conf:3: .fw: device glob "": empty`},
		{"bad port", "[class a]\nhosts = x\nmlx5_0/0.rate = 1\n", `expect.conf:3: mlx5_0/0.rate: port "0": want a port number`},
		{"rate word", "[class a]\nhosts = x\nmlx5_0/1.rate = fast\n", `expect.conf:3: mlx5_0/1.rate: "fast" is not a rate in Gb/s`},
		{"rate NaN", "[class a]\nhosts = x\nmlx5_0/1.rate = NaN\n", `is not a rate in Gb/s`},
		{"rate zero", "[class a]\nhosts = x\nmlx5_0/1.rate = 0\n", `out of range`},
		{"width", "[class a]\nhosts = x\nmlx5_0/1.width = 3X\n", `expect.conf:3: mlx5_0/1.width: "3X": want one of 1X, 2X, 4X, 8X, 12X`},
		{"link layer", "[class a]\nhosts = x\nmlx5_0/1.link_layer = RoCE\n", `want one of InfiniBand, Ethernet, Unknown`},
		{"mtu", "[class a]\nhosts = x\nmlx5_0/1.mtu = 100\n", `expect.conf:3: mlx5_0/1.mtu: 100 is out of range 256..65535`},
		{"pfc", "[class a]\nhosts = x\nmlx5_0/1.pfc_priority = 8\n", `out of range 0..7`},
		{"pcie speed", "[class a]\nhosts = x\nmlx5_0.pcie_speed = Gen4\n", `expect.conf:3: mlx5_0.pcie_speed: "Gen4" is not a PCIe link speed`},
		{"pcie width", "[class a]\nhosts = x\nmlx5_0.pcie_width = 6\n", `expect.conf:3: mlx5_0.pcie_width: 6 is not a PCIe link width`},
		{"duplicate class", "[class a]\nhosts = x\n[class a]\nhosts = y\n", `expect.conf:3: class "a" already defined at line 1`},
		{"unknown section", "[node a]\n", `expect.conf:1: unknown section "[node a]"`},
		{"unclosed section", "[class a\n", `expect.conf:1: section header "[class a" does not end with ]`},
		{"bad class name", "[class a/b]\n", `expect.conf:1: class name "a/b"`},
		{"no hosts", "[class a]\ndevices = 1\n[class b]\nhosts = x\n", "expect.conf:1: [class a] has no hosts key"},
		{"empty hosts", "[class a]\nhosts = # later\n", "expect.conf:2: hosts: no value"},
		{"control char", "[class a]\nhosts = x\x1b[31m\n", `expect.conf:2: control character "\x1b" at column 10`},
		{"not utf8", "[class a]\nhosts = \xff\n", "expect.conf:2: not UTF-8 text"},
		{"long line", long, "expect.conf:3: line longer than 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("/etc/rdmadoctor/expect.conf", strings.NewReader(tc.text))
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line == 0 || !strings.HasPrefix(err.Error(), "/etc/rdmadoctor/expect.conf:") {
				t.Errorf("error %q does not name FILE:LINE", err)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	exactly := "[class a]\nhosts = x\n#" + strings.Repeat("y", MaxLine-1) + "\n"
	if _, err := Parse("f", strings.NewReader(exactly)); err != nil {
		t.Errorf("a line of exactly %d bytes: %v", MaxLine, err)
	}
	var big strings.Builder
	big.WriteString("[class a]\nhosts = x\n")
	for big.Len() <= MaxFile {
		big.WriteString("# " + strings.Repeat("z", 1000) + "\n")
	}
	_, err := Parse("big.conf", strings.NewReader(big.String()))
	if err == nil || !strings.Contains(err.Error(), "big.conf: larger than the 1048576 bytes") {
		t.Errorf("huge file: %v", err)
	}
	// An endless stream without newlines (a device file) ends at the line limit.
	_, err = Parse("/dev/zero", zeroReader{})
	if err == nil || !strings.Contains(err.Error(), "/dev/zero:1: line longer") {
		t.Errorf("endless input: %v", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "expect.conf")
	if err := os.WriteFile(good, []byte(example), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(good)
	if err != nil || len(f.Classes) != 2 || f.Name != good {
		t.Fatalf("Load = %v, %v", f, err)
	}
	if _, err := Load(filepath.Join(dir, "missing.conf")); err == nil || !strings.Contains(err.Error(), "missing.conf") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
	// A named pipe nobody writes does not hang the run.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err == nil {
		if _, err := Load(fifo); err == nil || !strings.Contains(err.Error(), fifo+": nothing to read") {
			t.Errorf("fifo: %v", err)
		}
	}
	huge := filepath.Join(dir, "huge.conf")
	if err := os.WriteFile(huge, bytes.Repeat([]byte("#\n"), MaxFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(huge); err == nil || !strings.Contains(err.Error(), "huge.conf") {
		t.Errorf("huge file: %v", err)
	}
}

func TestMatch(t *testing.T) {
	f := mustParse(t, example)
	for host, want := range map[string]string{"cx5-node01": "cx5-roce", "cx5-spare-07": "cx5-roce", "ib-17": "ib"} {
		c, err := f.Match(host)
		if err != nil || c.Name != want {
			t.Errorf("Match(%s) = %v, %v; want %s", host, c, err, want)
		}
	}
	_, err := f.Match("gpu-01")
	if err == nil || !strings.Contains(err.Error(), `no class matches host "gpu-01"`) || !strings.Contains(err.Error(), "cx5-roce [cx5-node* cx5-spare-??], ib [ib-*]") {
		t.Errorf("no match: %v", err)
	}
	if _, err := f.Match(""); err == nil || !strings.Contains(err.Error(), "host name is unknown") {
		t.Errorf("empty host name: %v", err)
	}
	empty := mustParse(t, "# nothing yet\n")
	if _, err := empty.Match("x"); err == nil || !strings.Contains(err.Error(), "no [class] section") {
		t.Errorf("empty file: %v", err)
	}
	// The first class that matches wins, even when a later one also does.
	two := mustParse(t, "[class first]\nhosts = n*\n[class second]\nhosts = n1\n")
	if c, _ := two.Match("n1"); c == nil || c.Name != "first" {
		t.Errorf("Match(n1) = %v, want first", c)
	}
}

func TestCheckIDs(t *testing.T) {
	f := mustParse(t, example+"[class x]\nhosts = x*\nfail_on_warn = [\"port.stat\", \"counters.errors\"]\n")
	err := f.CheckIDs([]string{"counters.errors", "port.state"})
	want := "/etc/rdmadoctor/expect.conf:5: skip: \"probe.cq_overflow\" is not a check ID (rdmadoctor list shows them)\n" +
		"/etc/rdmadoctor/expect.conf:28: fail_on_warn: \"port.stat\" is not a check ID (did you mean port.state?) (rdmadoctor list shows them)"
	if err == nil || err.Error() != want {
		t.Errorf("CheckIDs =\n%v\nwant\n%s", err, want)
	}
	if err := f.CheckIDs([]string{"counters.errors", "probe.cq_overflow", "port.stat"}); err != nil {
		t.Errorf("CheckIDs with all known: %v", err)
	}
}

// semantics prints what a class expects of a set of devices and ports, to
// compare two classes by meaning rather than by line numbers.
func semantics(c *Class) string {
	var b strings.Builder
	b.WriteString(c.Name + " " + strings.Join(c.Hosts, ",") + "\n")
	for _, v := range []any{c.Devices, c.RoCETC, c.Lossless} {
		b.WriteString(val(v) + "\n")
	}
	for _, s := range c.Skip {
		b.WriteString("skip " + s.V + "\n")
	}
	b.WriteString("fail_on_warn " + strings.Join(c.FailOnWarnChecks(), ",") + "\n")
	for _, dev := range []string{"mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "rxe0", "x"} {
		d := c.Device(dev)
		b.WriteString(dev + " " + val(d.FW) + val(d.PCIeSpeed) + val(d.PCIeWidth) + val(d.Ports) + "\n")
		for port := 1; port <= 3; port++ {
			p := c.Port(dev, port)
			b.WriteString(" " + val(p.LinkLayer) + val(p.Rate) + val(p.Width) + val(p.MTU) + val(p.PFCPriority) + val(p.Unused) + "\n")
		}
	}
	return b.String()
}

func val(v any) string {
	switch x := v.(type) {
	case *Value[int]:
		if x != nil {
			return "[" + formatValue(x.V) + "]"
		}
	case *Value[string]:
		if x != nil {
			return "[" + x.V + "]"
		}
	case *Value[Pattern]:
		if x != nil {
			return "[" + strings.Join(x.V, "|") + "]"
		}
	case *Value[float64]:
		if x != nil {
			return "[" + formatValue(x.V) + "]"
		}
	case *Value[bool]:
		if x != nil {
			return "[" + formatValue(x.V) + "]"
		}
	}
	return "[-]"
}

// gpu_nic_max_distance takes nvidia-smi topo -m's class bare or quoted, in
// any case, keeps the upper-case spelling, and Write writes it back.
func TestGPUNICMaxDistanceKey(t *testing.T) {
	for _, v := range []string{"NODE", `"node"`, "Node"} {
		c := mustParse(t, "[class a]\nhosts = x\ngpu_nic_max_distance = "+v+"  # rails\n").Classes[0]
		got := c.ExpectedGPUNICMaxDistance()
		if got == nil || got.V != "NODE" || got.Line != 3 {
			t.Fatalf("%s: read %+v, want NODE from line 3", v, got)
		}
		if cite := got.Cite(); cite != "expect.conf:3 gpu_nic_max_distance = NODE" {
			t.Errorf("%s: cited as %q", v, cite)
		}
		var b bytes.Buffer
		if err := Write(&b, c); err != nil || !strings.Contains(b.String(), "gpu_nic_max_distance = NODE  # rails") {
			t.Fatalf("Write: %v\n%s", err, b.String())
		}
		back, err := Parse("written.conf", &b)
		if err != nil || back.Classes[0].ExpectedGPUNICMaxDistance().V != "NODE" {
			t.Fatalf("written class reads back as %v (%v)", back, err)
		}
	}
	if (*Class)(nil).ExpectedGPUNICMaxDistance() != nil {
		t.Error("a nil class has a distance")
	}
}

func TestWriteRoundTrip(t *testing.T) {
	f := mustParse(t, example)
	for _, c := range f.Classes {
		var b bytes.Buffer
		if err := Write(&b, c); err != nil {
			t.Fatalf("Write(%s): %v", c.Name, err)
		}
		if !strings.HasPrefix(b.String(), Header+"\n[class "+c.Name+"]\nhosts = ") {
			t.Errorf("Write output starts wrong:\n%s", b.String())
		}
		back, err := Parse("written.conf", &b)
		if err != nil {
			t.Fatalf("written class does not parse: %v", err)
		}
		if got, want := semantics(back.Classes[0]), semantics(c); got != want {
			t.Errorf("round trip of %s changed its meaning:\ngot\n%s\nwant\n%s", c.Name, got, want)
		}
	}
	var b bytes.Buffer
	if err := Write(&b, f.Classes[0]); err != nil || !strings.Contains(b.String(), "mlx5_1/1.unused = true") || !strings.Contains(b.String(), "# cabled later") {
		t.Errorf("Write lost a value or its comment:\n%s", b.String())
	}
}

func TestSetAndWriteRefuse(t *testing.T) {
	c := &Class{Name: "gen", Hosts: []string{"n*"}}
	for _, kv := range [][2]string{{"devices", "1"}, {"mlx5_0.fw", "1.2.3"}, {"mlx5_0/1.rate", "100"}, {"mlx5_0/1.unused", "true"}} {
		if err := c.Set(kv[0], kv[1], ""); err != nil {
			t.Fatalf("Set(%s): %v", kv[0], err)
		}
	}
	if err := c.Set("mlx5_0/1.rate", "fast", ""); err == nil {
		t.Error("Set accepted a bad rate")
	}
	for _, v := range []string{"16.35 # x", "1\x1b[2J", "a\nb", " "} {
		if err := c.Set("mlx5_0.fw", v, ""); err == nil {
			t.Errorf("Set accepted fw %q, which a line cannot hold", v)
		}
	}
	if c.Port("mlx5_0", 1).Rate.V != 100 {
		t.Error("a refused Set replaced the good value")
	}
	var b bytes.Buffer
	if err := Write(&b, c); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := Write(&b, &Class{Name: "nohosts"}); err == nil || !strings.Contains(err.Error(), "has no hosts") {
		t.Errorf("Write of a class without hosts: %v", err)
	}
	bad := &Class{Name: "bad", Hosts: []string{"n*"}, DeviceRules: []*DeviceRule{{Glob: "mlx5_0", DeviceExpect: DeviceExpect{FW: &Value[Pattern]{V: Pattern{"1#2"}}}}}}
	if err := Write(&b, bad); err == nil {
		t.Error("Write wrote a value that does not read back")
	}
}

// ParseKnown reports every fault of a file in one pass, in line order: the
// lines that do not parse and the check and finding IDs nothing declares.
// (Parse alone leaves the IDs to the caller; then a file with a misspelt
// key and a misspelt check ID took two rounds to fix.)
func TestParseKnownReportsEveryFaultAtOnce(t *testing.T) {
	text := "[class x]\nhosts = x*\nskip = counters.eror\ndevices = two\n" +
		"waive = [\"port.state/no-lnk\"]\nwaive_reason = \"optics\"\nbogus = 1\nfail_on_warn = [\"port.stat\"]\n"
	known := Known{Checks: []string{"counters.errors", "port.state"}, Findings: []string{"port.state/no-link"}}
	_, err := ParseKnown("e.conf", strings.NewReader(text), known)
	var lines []string
	var pes ParseErrors
	if !errors.As(err, &pes) {
		t.Fatalf("ParseKnown: %v, want ParseErrors", err)
	}
	for _, pe := range pes {
		lines = append(lines, pe.Key+"@"+itoa(pe.Line))
	}
	want := "skip@3 devices@4 waive@5 bogus@7 fail_on_warn@8"
	if got := strings.Join(lines, " "); got != want {
		t.Errorf("faults %s, want %s:\n%v", got, want, err)
	}
	// Without known lists, the IDs are not judged: Parse's behaviour.
	_, err = Parse("e.conf", strings.NewReader(text))
	if !errors.As(err, &pes) || len(pes) != 2 {
		t.Errorf("Parse: %v, want the two lines that do not parse", err)
	}
	if f, err := ParseKnown("e.conf", strings.NewReader("[class x]\nhosts = x*\nskip = port.state\n"), known); err != nil || len(f.Classes) != 1 {
		t.Errorf("a clean file: %v", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestPKeysKey(t *testing.T) {
	f, err := Parse("expect.conf", strings.NewReader("[class a]\nhosts = x\npkeys = [\"0x8001\", \"0x7fff\", 32770]\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := f.Classes[0]
	var got []uint16
	for _, k := range c.ExpectedPKeys() {
		got = append(got, uint16(k.V))
	}
	if cite := c.ExpectedPKeys()[2].Cite(); cite != "expect.conf:3 pkeys = 0x8002" {
		t.Errorf("cite %q", cite)
	}
	if want := []uint16{0x8001, 0x7fff, 0x8002}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pkeys = %#x, want %#x", got, want)
	}
	if (*Class)(nil).ExpectedPKeys() != nil {
		t.Error("a nil class has pkeys")
	}
}

func TestSwitchKeys(t *testing.T) {
	f, err := Parse("expect.conf", strings.NewReader("[class a]\nhosts = x\nswitch = \"leaf-03*\"\nswitch_port = 17\nib_peers = 0x2c90300a1b2c3\n"))
	if err != nil {
		t.Fatal(err)
	}
	sw, port := f.Classes[0].ExpectedSwitch()
	if sw == nil || !sw.V.Match("leaf-03 SX6036") || sw.V.Match("leaf-04") || port == nil || port.V != 17 {
		t.Errorf("switch %v port %v", sw, port)
	}
	if peers := f.Classes[0].ExpectedIBPeers(); len(peers) != 1 || peers[0].Cite() != "expect.conf:5 ib_peers = 0x0002c90300a1b2c3" {
		t.Errorf("ib_peers %v", peers)
	}
	if s, p := (*Class)(nil).ExpectedSwitch(); s != nil || p != nil || (*Class)(nil).ExpectedIBPeers() != nil {
		t.Error("a nil class has a switch")
	}
}

// ib_peers takes node descriptions (literal or globs) beside port GUIDs;
// an item that reads as a number is a GUID, and a bad one says why.
func TestIBPeersByName(t *testing.T) {
	f, err := Parse("expect.conf", strings.NewReader("[class a]\nhosts = x\n"+
		`ib_peers = ["0x0002c90300a1b2c3", "storage-0[12] HCA-1", "Hca4"]`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range f.Classes[0].ExpectedIBPeers() {
		got = append(got, fmt.Sprintf("%v:%s", p.V.ByName(), p.V))
	}
	if want := []string{"false:0x0002c90300a1b2c3", "true:storage-0[12] HCA-1", "true:Hca4"}; !reflect.DeepEqual(got, want) {
		t.Errorf("peers %v, want %v", got, want)
	}
	if p := f.Classes[0].ExpectedIBPeers()[1].V; !p.Node.Match("storage-02 HCA-1") || p.Node.Match("storage-03 HCA-1") {
		t.Errorf("the glob %v matches wrongly", p)
	}
	for _, bad := range []string{`ib_peers = "0xzz"`, `ib_peers = 0`, `ib_peers = "gpu[1"`, `ib_peers = []`,
		`ib_peers = "` + strings.Repeat("x", 65) + `"`} {
		if _, err := Parse("expect.conf", strings.NewReader("[class a]\nhosts = x\n"+bad+"\n")); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
