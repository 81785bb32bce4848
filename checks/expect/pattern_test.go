package expect

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestPatternValues(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Pattern
		text string // as Write spells it
	}{
		{"mlx5_0.fw = 16.35.2000", Pattern{"16.35.2000"}, "16.35.2000"},
		{`mlx5_0.fw = "16.35.*"`, Pattern{"16.35.*"}, "16.35.*"},
		{`mlx5_0.fw = ["16.35.*", "16.36.2000"]`, Pattern{"16.35.*", "16.36.2000"}, `["16.35.*", "16.36.2000"]`},
		{`mlx5_0.fw = [16.35.*, 16.36.2000,]`, Pattern{"16.35.*", "16.36.2000"}, `["16.35.*", "16.36.2000"]`},
		{`mlx5_0.fw = ["16.35.2000 (MT_0000000008)"]`, Pattern{"16.35.2000 (MT_0000000008)"}, "16.35.2000 (MT_0000000008)"},
		{`mlx5_0.fw = "[12]6.*"`, Pattern{"[12]6.*"}, `[12]6.*`},
		{`mlx5_0.fw = [12]6.*`, Pattern{"[12]6.*"}, `[12]6.*`},
		{`mlx5_0.fw = "[12]"`, Pattern{"[12]"}, `[12]`},
		{`mlx5_0.fw = "[a,b]"`, Pattern{"[a,b]"}, `"[a,b]"`},
		{`mlx5_0/1.width = ["2x", "4X"]`, Pattern{"2X", "4X"}, `["2X", "4X"]`},
		{`mlx5_0/1.width = [24]X`, Pattern{"[24]X"}, `[24]X`},
		{`mlx5_0/1.link_layer = [infiniband, Ethernet]`, Pattern{"InfiniBand", "Ethernet"}, `["InfiniBand", "Ethernet"]`},
		{`mlx5_0.pcie_speed = ["8.0 GT/s PCIe", "16 GT/s"]`, Pattern{"8.0 GT/s PCIe", "16 GT/s"}, `["8.0 GT/s PCIe", "16 GT/s"]`},
	} {
		t.Run(tc.line, func(t *testing.T) {
			c := mustParse(t, "[class a]\nhosts = *\n"+tc.line+"\n").Classes[0]
			var got *Value[Pattern]
			if d := c.Device("mlx5_0"); d.FW != nil {
				got = d.FW
			} else if d.PCIeSpeed != nil {
				got = d.PCIeSpeed
			} else if p := c.Port("mlx5_0", 1); p.Width != nil {
				got = p.Width
			} else {
				got = p.LinkLayer
			}
			if got == nil || !reflect.DeepEqual(got.V, tc.want) || got.V.String() != tc.text {
				t.Fatalf("got %#v (%v), want %#v written %s", got, got.Cite(), tc.want, tc.text)
			}
			var b bytes.Buffer
			if err := Write(&b, c); err != nil {
				t.Fatal(err)
			}
			if back := mustParse(t, b.String()).Classes[0]; semantics(back) != semantics(c) {
				t.Errorf("round trip changed the meaning:\n%s", b.String())
			}
		})
	}
}

func TestPatternMatch(t *testing.T) {
	fw := Pattern{"16.35.*", "16.36.2000"}
	for _, tc := range []struct {
		p    Pattern
		fw   string
		want bool
	}{
		{Pattern{"16.35.2000"}, "16.35.2000 (MT_0000000008)", true}, // the PSID mlx5 adds
		{Pattern{"16.35.2000"}, "16.35.2000", true},
		{Pattern{"16.35.2000"}, "16.35.2001 (MT_0000000008)", false},
		{Pattern{"16.35.2000 (MT_0000000008)"}, "16.35.2000 (MT_0000000008)", true}, // pinning the board too
		{Pattern{"16.35.2000 (MT_0000000008)"}, "16.35.2000 (MT_0000000009)", false},
		{Pattern{"16.35.2000"}, "16.35.2000(MT_0000000008)", true},
		{fw, "16.35.1012 (MT_0000000008)", true},
		{fw, "16.36.2000", true},
		{fw, "16.36.1000", false},
		{Pattern{"16.35.2000"}, "", false},
	} {
		if got := tc.p.MatchFW(tc.fw); got != tc.want {
			t.Errorf("%v.MatchFW(%q) = %v, want %v", tc.p, tc.fw, got, tc.want)
		}
	}
	for _, tc := range []struct {
		p          Pattern
		gts        float64
		raw, short string
		want       bool
	}{
		{Pattern{"8.0 GT/s PCIe"}, 8, "8.0 GT/s PCIe", "8.0 GT/s", true},
		{Pattern{"8 GT/s"}, 8, "8 GT/s", "8.0 GT/s", true},
		{Pattern{"16.0 GT/s PCIe", "32.0 GT/s PCIe"}, 8, "8.0 GT/s PCIe", "8.0 GT/s", false},
		{Pattern{"16.0 GT/s PCIe", "32.0 GT/s PCIe"}, 32, "32.0 GT/s PCIe", "32.0 GT/s", true},
		{Pattern{"16*"}, 16, "16.0 GT/s PCIe", "16.0 GT/s", true},
		{Pattern{"16*"}, 8, "8.0 GT/s PCIe", "8.0 GT/s", false},
		{Pattern{"8.0 GT/s*"}, 8, "8.0 GT/s PCIe", "8.0 GT/s", true}, // '*' crosses no '/' in path.Match; here it does
	} {
		if got := tc.p.MatchPCIeSpeed(tc.gts, tc.raw, tc.short); got != tc.want {
			t.Errorf("%v.MatchPCIeSpeed(%v) = %v, want %v", tc.p, tc.gts, got, tc.want)
		}
	}
	for in, want := range map[string]string{"16.35.2000 (MT_0000000008)": "16.35.2000", " 2.42.5000\n": "2.42.5000", "1.2(x)": "1.2", "": ""} {
		if got := FWVersion(in); got != want {
			t.Errorf("FWVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPatternErrors(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`mlx5_0.fw = []`, `expect.conf:3: mlx5_0.fw: empty list: give at least one value`},
		{`mlx5_0.fw = ["a", ]`, ``},
		{`mlx5_0.fw = ["a" "b"]`, `expect.conf:3: mlx5_0.fw: want ',' between list items, got "\"b\""`},
		{`mlx5_0.fw = ["a", "b]`, `expect.conf:3: mlx5_0.fw: unterminated quote in "\"b"`},
		{`mlx5_0.fw = "a`, `expect.conf:3: mlx5_0.fw: unterminated quote in "\"a"`},
		{`mlx5_0.fw = "a" b`, `expect.conf:3: mlx5_0.fw: text after the closing quote: "b"`},
		{`mlx5_0.fw = ["a", , "b"]`, `expect.conf:3: mlx5_0.fw: empty item in the list`},
		{`mlx5_0.fw = ""`, `expect.conf:3: mlx5_0.fw: an empty value`},
		{`mlx5_0.fw = ["16.[35"]`, `expect.conf:3: mlx5_0.fw: "16.[35": bad glob`},
		{`mlx5_0/1.width = ["4X", "3X"]`, `expect.conf:3: mlx5_0/1.width: "3X": want one of 1X, 2X, 4X, 8X, 12X`},
		{`mlx5_0/1.width = 9*`, `expect.conf:3: mlx5_0/1.width: "9*" matches none of 1X, 2X, 4X, 8X, 12X`},
		{`mlx5_0.pcie_speed = ["8 GT/s", "Gen4"]`, `expect.conf:3: mlx5_0.pcie_speed: "Gen4" is not a PCIe link speed`},
		{`fail_on_warn = ["port"]`, `expect.conf:3: fail_on_warn: "port" is not a check ID such as counters.errors`},
		{`hosts = ["a", "b c"]`, `expect.conf:3: hosts: host glob "b c": contains a space`},
	} {
		t.Run(tc.line, func(t *testing.T) {
			_, err := Parse("expect.conf", strings.NewReader("[class a]\nhosts = *\n"+tc.line+"\n"))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tc.want == "" && err != nil || !strings.HasPrefix(got, tc.want) {
				t.Errorf("error %q, want %q", got, tc.want)
			}
		})
	}
}

// Every faulty line is reported, in line order, each with its line: the
// keys under a faulty section header too, and a class without hosts.
func TestParseReportsEveryError(t *testing.T) {
	text := "[class a]\nhosts = x\ndevices = two\nmlx5_0.speed = 1\n[class a]\nroce_tc = 300\n[class b]\nlossless = yes\n"
	_, err := Parse("e.conf", strings.NewReader(text))
	var pes ParseErrors
	if !errors.As(err, &pes) {
		t.Fatalf("err %v is not ParseErrors", err)
	}
	var got []string
	for _, e := range pes {
		got = append(got, e.Error())
	}
	want := []string{
		`e.conf:3: devices: "two" is not a whole number`,
		`e.conf:4: mlx5_0.speed: unknown device key "speed"; valid: fw, pcie_speed, pcie_width, ports (a port key needs <device glob>/<port>.)`,
		`e.conf:5: class "a" already defined at line 1`,
		`e.conf:6: roce_tc: 300 is out of range 0..255`,
		`e.conf:7: [class b] has no hosts key: say which host names it applies to, e.g. hosts = node*`,
		`e.conf:8: lossless: "yes": want true or false`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 3 {
		t.Errorf("errors.As finds %+v, want the first (line 3)", pe)
	}
	// A binary file stops after 50 errors.
	_, err = Parse("bin", strings.NewReader("[class a]\nhosts = x\n"+strings.Repeat("junk\n", 500)))
	if !errors.As(err, &pes) || len(pes) != 51 || pes[50].Msg != "stopped after 50 errors" {
		t.Errorf("%d errors, last %v", len(pes), pes[len(pes)-1])
	}
}

func TestFailOnWarn(t *testing.T) {
	f := mustParse(t, "[class a]\nhosts = a*\nfail_on_warn = [\"port.state\", \"pci.link\"]\n[class b]\nhosts = b*\nfail_on_warn = counters.errors\n[class c]\nhosts = c*\n")
	for _, tc := range []struct {
		class string
		ids   []string
		port  bool
	}{
		{"a", []string{"port.state", "pci.link"}, true},
		{"b", []string{"counters.errors"}, false},
		{"c", nil, false},
	} {
		c, _ := f.Match(tc.class + "1")
		if got := c.FailOnWarnChecks(); !reflect.DeepEqual(got, tc.ids) || c.FailOnWarn("port.state") != tc.port {
			t.Errorf("class %s: FailOnWarnChecks %v FailOnWarn(port.state) %v; want %v %v", tc.class, got, c.FailOnWarn("port.state"), tc.ids, tc.port)
		}
	}
	var nilClass *Class
	if nilClass.FailOnWarn("port.state") || nilClass.FailOnWarnChecks() != nil {
		t.Error("a nil class fails on a warning")
	}
	var b bytes.Buffer
	if err := Write(&b, f.Classes[0]); err != nil || !strings.Contains(b.String(), "\nfail_on_warn = [\"port.state\", \"pci.link\"]\n") {
		t.Errorf("Write: %v\n%s", err, b.String())
	}
}

func TestUnmatched(t *testing.T) {
	units := []Unit{{"mlx5_0", []int{1}}, {"mlx5_1", []int{1}}, {"mlx4_0", []int{1, 2}}}
	c := mustParse(t, "[class a]\nhosts = *\n"+
		"mlx5_*.fw = 16.35.2000\n"+ // matches
		"mlx5-*.ports = 1\n"+ // a typo: '-' for '_'
		"bnxt_re0.fw = 1\n"+ // nothing near
		"mlx5_0/2.rate = 100\n"+ // the device has port 1 only
		"mlx4_0/2.unused = true\n"+ // matches
		"mlx5_3/*.mtu = 9000\n"+ // no such device
		"mlx5_*/*.rate = 100\n").Classes[0]
	got := c.Unmatched(units)
	want := []Unmatched{
		{Rule: "mlx5-*", Key: "mlx5-*.ports", File: "/etc/rdmadoctor/expect.conf", Line: 4, Reason: "matches no RDMA device on this host", Nearest: "mlx5_0"},
		{Rule: "bnxt_re0", Key: "bnxt_re0.fw", File: "/etc/rdmadoctor/expect.conf", Line: 5, Reason: "matches no RDMA device on this host"},
		{Rule: "mlx5_0/2", Key: "mlx5_0/2.rate", File: "/etc/rdmadoctor/expect.conf", Line: 6, Reason: "matches no port: no device mlx5_0 matches has a port 2", Nearest: "mlx5_0/1"},
		{Rule: "mlx5_3/*", Key: "mlx5_3/*.mtu", File: "/etc/rdmadoctor/expect.conf", Line: 8, Reason: "matches no RDMA device on this host", Nearest: "mlx5_0/1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Unmatched =\n%#v\nwant\n%#v", got, want)
	}
	if s := got[0].Error(); s != "expect.conf:4 mlx5-*.ports: mlx5-* matches no RDMA device on this host (did you mean mlx5_0?)" {
		t.Errorf("Error() = %q", s)
	}
	if u := c.Unmatched(nil); len(u) != 7 {
		t.Errorf("a host without devices: %d unmatched rules, want every one of 7", len(u))
	}
	var nilClass *Class
	if nilClass.Unmatched(units) != nil {
		t.Error("a nil class has unmatched rules")
	}
}

func TestNearest(t *testing.T) {
	cands := []string{"port.state", "pci.link", "counters.errors", "mlx5_0"}
	for in, want := range map[string]string{"port.stat": "port.state", "counter.errors": "counters.errors", "pci.lnk": "pci.link", "gpu.acs": "", "mlx5_*": "mlx5_0", "x": ""} {
		if got := Nearest(in, cands); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", in, got, want)
		}
	}
}

// A candidate is written commented out; uncommented, it parses.
func TestCandidates(t *testing.T) {
	c, err := NewClass("n", []string{"n*"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set("mlx5_0/1.rate", "100", ""); err != nil {
		t.Fatal(err)
	}
	if err := c.SetCandidate("mlx5_1/1.unused", "true", "DOWN (phys Polling) at capture"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetCandidate("mlx5_1/1.unused", "maybe", ""); err == nil {
		t.Error("SetCandidate accepted a value Parse refuses")
	}
	var b bytes.Buffer
	if err := Write(&b, c); err != nil {
		t.Fatal(err)
	}
	want := Header + "\n[class n]\nhosts = n*\nmlx5_0/1.rate = 100\n# mlx5_1/1.unused = true  # DOWN (phys Polling) at capture\n"
	if b.String() != want {
		t.Errorf("Write =\n%s\nwant\n%s", b.String(), want)
	}
	if u := mustParse(t, b.String()).Classes[0].Port("mlx5_1", 1).Unused; u != nil {
		t.Errorf("a commented candidate was read as a value: %+v", u)
	}
	back := mustParse(t, strings.Replace(b.String(), "# mlx5_1", "mlx5_1", 1)).Classes[0]
	if u := back.Port("mlx5_1", 1).Unused; u == nil || !u.V {
		t.Errorf("the uncommented candidate does not read: %+v", u)
	}
}
