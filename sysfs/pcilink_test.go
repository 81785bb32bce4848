package sysfs_test

import (
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestParseLinkSpeed(t *testing.T) {
	for _, tc := range []struct {
		in    string
		gts   float64
		gen   int
		isErr bool
	}{
		{"16.0 GT/s PCIe", 16, 4, false},
		{"2.5 GT/s PCIe\n", 2.5, 1, false},
		{"8 GT/s", 8, 3, false}, // kernels before 4.19
		{"5 GT/s", 5, 2, false},
		{"32.0 GT/s PCIe", 32, 5, false},
		{"64.0 GT/s PCIe", 64, 6, false},
		{"128.0 GT/s PCIe", 128, 0, false}, // a future generation still parses
		{"Unknown", 0, 0, false},
		{"Unknown speed", 0, 0, false},
		{"", 0, 0, true},
		{"fast", 0, 0, true},
		{"16.0 Gb/s", 0, 0, true},
		{"-8 GT/s", 0, 0, true},
		{"NaN GT/s", 0, 0, true},
		{"Inf GT/s PCIe", 0, 0, true},
		{"16.0 GT/s PCIe extra", 0, 0, true},
	} {
		s, err := sysfs.ParseLinkSpeed(tc.in)
		if (err != nil) != tc.isErr {
			t.Errorf("ParseLinkSpeed(%q) error = %v, want error %v", tc.in, err, tc.isErr)
			continue
		}
		if s.GTs != tc.gts || s.Gen() != tc.gen {
			t.Errorf("ParseLinkSpeed(%q) = %v GT/s Gen%d, want %v Gen%d", tc.in, s.GTs, s.Gen(), tc.gts, tc.gen)
		}
	}
	g4, _ := sysfs.ParseLinkSpeed("16.0 GT/s PCIe")
	if got := g4.String(); got != "16.0 GT/s (Gen4)" {
		t.Errorf("String() = %q", got)
	}
	// x16 Gen3 ≈ 15.75 GB/s, x16 Gen1 = 4 GB/s.
	g3, _ := sysfs.ParseLinkSpeed("8.0 GT/s PCIe")
	g1, _ := sysfs.ParseLinkSpeed("2.5 GT/s PCIe")
	if bw := 16 * g3.LaneGBps(); math.Abs(bw-15.75) > 0.01 {
		t.Errorf("Gen3 x16 = %.2f GB/s", bw)
	}
	if bw := 16 * g1.LaneGBps(); math.Abs(bw-4) > 0.001 {
		t.Errorf("Gen1 x16 = %.2f GB/s", bw)
	}
}

func TestParseLinkWidth(t *testing.T) {
	for in, want := range map[string]int{"16": 16, "8\n": 8, "x4": 4, "0": 0, " 32 ": 32} {
		if got, err := sysfs.ParseLinkWidth(in); err != nil || got != want {
			t.Errorf("ParseLinkWidth(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "+4", "256", "sixteen", "1e3"} {
		if _, err := sysfs.ParseLinkWidth(in); err == nil {
			t.Errorf("ParseLinkWidth(%q) accepted", in)
		}
	}
}

// switchTree is a function behind a PCIe switch: root port → switch
// upstream port → switch downstream port → endpoint, each with its link.
func switchTree(uplinkWidth string) *sysfstest.Tree {
	t := sysfstest.NewTree()
	root := "/sys/devices/pci0000:00/0000:00:01.0"
	up := root + "/0000:01:00.0"
	down := up + "/0000:02:08.0"
	ep := down + "/0000:03:00.0"
	link := func(dir, cs, cw, ms, mw string) {
		t.Attr(dir+"/current_link_speed", cs)
		t.Attr(dir+"/current_link_width", cw)
		t.Attr(dir+"/max_link_speed", ms)
		t.Attr(dir+"/max_link_width", mw)
	}
	link(root, "16.0 GT/s PCIe", uplinkWidth, "16.0 GT/s PCIe", "16")
	link(up, "16.0 GT/s PCIe", uplinkWidth, "16.0 GT/s PCIe", "16")
	link(down, "16.0 GT/s PCIe", "16", "32.0 GT/s PCIe", "16")
	link(ep, "16.0 GT/s PCIe", "16", "32.0 GT/s PCIe", "16")
	for _, d := range []string{root, up, down, ep} {
		t.RelLink(path.Join(sysfs.PCIDevicesDir, path.Base(d)), d)
	}
	return t
}

func writeTree(t *testing.T, tr *sysfstest.Tree) *sysfs.Host {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "host")
	if err := tr.Write(dir); err != nil {
		t.Fatal(err)
	}
	h, err := sysfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func TestPCIPathWalksEveryBridgeToTheRootPort(t *testing.T) {
	h := writeTree(t, switchTree("8"))
	fn := h.PCIFunction("0000:03:00.0")
	p := h.PCIPathOf(fn)
	if !p.Function.HasCur || p.Function.CurWidth != 16 || p.Function.Max.GTs != 32 {
		t.Fatalf("function link = %+v", p.Function)
	}
	var addrs []string
	for _, b := range p.Upstream {
		addrs = append(addrs, b.Address)
	}
	if got := strings.Join(addrs, " "); got != "0000:02:08.0 0000:01:00.0 0000:00:01.0" {
		t.Fatalf("upstream = %s, want the downstream port, the upstream port, the root port", got)
	}
	if p.Upstream[1].CurWidth != 8 || p.Upstream[2].Max.GTs != 16 {
		t.Errorf("bridges read wrong: %+v", p.Upstream)
	}
}

func TestPCIPathReportsUnreadableAndMissingLinks(t *testing.T) {
	tr := switchTree("16")
	ep := "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0"
	tr.Attr(ep+"/current_link_speed", "garbage")
	tr.Remove("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/current_link_speed")
	tr.Remove("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/current_link_width")
	tr.Remove("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/max_link_speed")
	tr.Remove("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/max_link_width")
	h := writeTree(t, tr)
	p := h.PCIPathOf(h.PCIFunction("0000:03:00.0"))
	if p.Function.HasCur || len(p.Function.Problems) != 1 || !strings.Contains(p.Function.Problems[0], "current_link_speed") {
		t.Errorf("a malformed speed must be a problem naming the file: %+v", p.Function)
	}
	if up := p.Upstream[1]; up.Exposed() || up.HasCur || len(up.Problems) != 0 {
		t.Errorf("a bridge without link files is not exposed and has no problem: %+v", up)
	}
}

func TestPCIPathOnThisHost(t *testing.T) {
	if _, err := os.Stat(sysfs.PCIDevicesDir); err != nil {
		t.Skip("no PCI bus visible")
	}
	h := sysfs.OpenLive()
	fns, err := h.PCIFunctions()
	if err != nil {
		t.Skip(err)
	}
	for _, fn := range fns {
		p := h.PCIPathOf(fn)
		if p.Function.Address != fn.Address {
			t.Errorf("%s: path of %s", fn.Address, p.Function.Address)
		}
		for _, b := range p.Upstream {
			if !sysfs.IsPCIAddress(b.Address) || !strings.HasSuffix(b.SysPath, "/"+b.Address) {
				t.Errorf("%s: bad bridge %+v", fn.Address, b)
			}
		}
	}
}

func FuzzParseLinkSpeed(f *testing.F) {
	for _, s := range []string{"16.0 GT/s PCIe", "8 GT/s", "Unknown", "Unknown speed", "2.5 GT/s PCIe\n", "1e308 GT/s", "x16", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := sysfs.ParseLinkSpeed(s)
		if err == nil && sp.Known() && (sp.GTs <= 0 || math.IsNaN(sp.GTs) || math.IsInf(sp.GTs, 0) || sp.LaneGBps() <= 0) {
			t.Fatalf("ParseLinkSpeed(%q) = %+v", s, sp)
		}
		_ = sp.String()
		if w, err := sysfs.ParseLinkWidth(s); err == nil && (w < 0 || w > 255) {
			t.Fatalf("ParseLinkWidth(%q) = %d", s, w)
		}
	})
}
