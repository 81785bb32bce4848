package checks_test

import (
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// pl is a pci.link finding about a PCI function.
func pl(slug, unit string) findingRef { return findingRef{"pci.link/" + slug, unit} }

func TestPCILinkFixtures(t *testing.T) {
	for _, tc := range []struct {
		fixture   string
		status    report.Status
		exit      int
		rootCause string
		want      []findingRef
		says      []string // the speed and width read, in the summary
	}{
		{"cx5-roce-healthy", report.Pass, 0, "", []findingRef{pl("expected", "0000:3b:00.0"), pl("expected", "0000:3b:00.1")}, []string{"8.0 GT/s x16"}},
		{"cx6-ib-healthy", report.Pass, 0, "", []findingRef{pl("expected", "0000:c1:00.0")}, []string{"16.0 GT/s x16"}},
		// a Gen5 card in a Gen4 slot is judged against the slot
		{"gen5-card-gen4-slot", report.Pass, 0, "", []findingRef{pl("expected", "0000:c1:00.0")}, []string{"16.0 GT/s x16"}},
		{"pcie-degraded", report.Fail, 11, "pci.link", []findingRef{pl("degraded", "0000:3b:00.0"), pl("degraded", "0000:3b:00.1")},
			[]string{"x8", "expected 8.0 GT/s x16"}},
		{"rxe-softroce", report.Skip, 0, "", []findingRef{pl("software-only", "")}, nil},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			r := hwRun(t, filepath.Join(hostsDir, tc.fixture), checks.Options{}, "pci.link")
			c := hwResult(t, r, "pci.link")
			if c.Status != tc.status {
				t.Fatalf("status %s (%s), want %s", c.Status, c.Summary, tc.status)
			}
			if diff := cmp.Diff(tc.want, refs(c.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			if r.ExitCode != tc.exit {
				t.Errorf("exit %d, want %d", r.ExitCode, tc.exit)
			}
			if tc.rootCause != "" && (r.RootCause == nil || *r.RootCause != tc.rootCause) {
				t.Errorf("root cause %v, want %s", r.RootCause, tc.rootCause)
			}
			for _, s := range tc.says {
				if !strings.Contains(c.Summary, s) {
					t.Errorf("summary %q does not say %q", c.Summary, s)
				}
			}
			if c.Status == report.Fail && (c.Remedy == "" || c.Observed == "" || c.Expected == "") {
				t.Errorf("a failure needs observed, expected and a remedy: %+v", c)
			}
		})
	}
}

func TestPCILinkGen5CardInGen4SlotIsLimitedByTheSlot(t *testing.T) {
	r := hwRun(t, filepath.Join(hostsDir, "gen5-card-gen4-slot"), checks.Options{}, "pci.link")
	c := hwResult(t, r, "pci.link")
	fns := c.Evidence["functions"].([]map[string]any)
	lim := fns[0]["limited_by"].(map[string]string)
	if fns[0]["max_speed"] != "32.0 GT/s" || fns[0]["expected_speed"] != "16.0 GT/s" || !strings.HasPrefix(lim["speed"], "bridge ") {
		t.Errorf("evidence = %v", fns[0])
	}
	if !strings.Contains(strings.Join(c.Details, "\n"), "speed limited by bridge 0000:c0:01.1") {
		t.Errorf("details do not name the slot's bridge: %v", c.Details)
	}
}

func TestPCILinkBadAttributesAreErrors(t *testing.T) {
	tr := sysfstest.Build(sysfstest.CX5RoCE())
	for _, fn := range []string{"0000:3b:00.0", "0000:3b:00.1"} {
		tr.Attr("/sys/devices/pci0000:3a/0000:3a:00.0/"+fn+"/current_link_speed", "\x00\x01garbage")
	}
	res := hwRunOne(t, hwWrite(t, tr), "pci.link", checks.Options{})
	if diff := cmp.Diff([]findingRef{pl("unreadable", "0000:3b:00.0"), pl("unreadable", "0000:3b:00.1")}, refs(res.Findings)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	if res.Status != report.Error || !strings.Contains(strings.Join(res.Details, " "), "current_link_speed") {
		t.Errorf("%s: %s %v; want error naming the file", res.Status, res.Summary, res.Details)
	}
}

// switchedHost is a ConnectX-5 behind a PCIe switch whose uplink to the
// root port trained at uplinkWidth lanes.
func switchedHost(uplinkWidth string) *sysfstest.Tree {
	t := sysfstest.NewTree()
	root := "/sys/devices/pci0000:00/0000:00:01.0"
	up := root + "/0000:01:00.0"
	down := up + "/0000:02:08.0"
	ep := down + "/0000:03:00.0"
	node := func(dir, class, cs, cw string) {
		t.Attr(dir+"/vendor", "0x8086")
		t.Attr(dir+"/device", "0x347a")
		t.Attr(dir+"/class", class)
		t.Attr(dir+"/current_link_speed", cs)
		t.Attr(dir+"/current_link_width", cw)
		t.Attr(dir+"/max_link_speed", "16.0 GT/s PCIe")
		t.Attr(dir+"/max_link_width", "16")
		t.RelLink(path.Join("/sys/bus/pci/devices", path.Base(dir)), dir)
	}
	node(root, "0x060400", "16.0 GT/s PCIe", uplinkWidth)
	node(up, "0x060400", "16.0 GT/s PCIe", uplinkWidth)
	node(down, "0x060400", "16.0 GT/s PCIe", "16")
	node(ep, "0x020000", "16.0 GT/s PCIe", "16")
	t.Attr(ep+"/vendor", "0x15b3")
	t.Attr(ep+"/device", "0x1017")
	t.Dir("/sys/bus/pci/drivers/mlx5_core")
	t.RelLink(ep+"/driver", "/sys/bus/pci/drivers/mlx5_core")
	return t
}

func TestPCILinkSkipsVFs(t *testing.T) {
	res := hwRunOne(t, hwWrite(t, sysfstest.LargeHost(1, 1, 4)), "pci.link", checks.Options{})
	if res.Status != report.Pass || res.Evidence["vfs_skipped"] != 8 || len(res.Evidence["functions"].([]map[string]any)) != 2 {
		t.Errorf("%s: %s; evidence %v", res.Status, res.Summary, res.Evidence)
	}
}

// A bridge that carries less than the card's link is named, with both
// bandwidths, and its fix is about the bridge.
func TestPCILinkNamesTheLimitingBridge(t *testing.T) {
	res := hwRunOne(t, hwWrite(t, switchedHost("8")), "pci.link", checks.Options{})
	const says = "0000:03:00.0 limited by bridge 0000:01:00.0 link trained at 16.0 GT/s x8 (≈15.8 GB/s) below the card's expected 16.0 GT/s x16 (≈31.5 GB/s)"
	if res.Summary != says || !strings.Contains(res.Remedy, "`lspci -vv -s 0000:01:00.0 | grep -e LnkCap -e LnkSta`") {
		t.Errorf("%s\n%s", res.Summary, res.Remedy)
	}
}
