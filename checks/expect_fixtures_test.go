package checks_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// classFromHost writes the class of a fixture host as `expect --from-host`
// does, writes it out and reads it back, so every test judges what an
// operator's file would hold.
func classFromHost(t *testing.T, dir string) (*expect.Class, string, error) {
	t.Helper()
	h, err := sysfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := checks.ExpectFromHost(checks.NewEnv(h, checks.Options{Level: 1}), "", nil)
	if err != nil {
		return nil, "", err
	}
	var b bytes.Buffer
	if err := expect.Write(&b, c); err != nil {
		t.Fatalf("write: %v", err)
	}
	f, err := expect.Parse("expect.conf", bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatalf("the written class does not parse: %v\n%s", err, b.String())
	}
	back, err := checks.ExpectClassFor(f, h.Hostname())
	if err != nil {
		t.Fatalf("the written class does not match its own host: %v\n%s", err, b.String())
	}
	return back, b.String(), nil
}

func expectClass(t *testing.T, text string) *expect.Class {
	t.Helper()
	f, err := expect.Parse("e.conf", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return f.Classes[0]
}

// A host judged against the class written from it is never judged worse:
// no check that passed, warned or skipped without the file fails or errors
// with it. Every fixture with an RDMA device is such a host.
func TestExpectFromHostNeverFailsItsOwnHost(t *testing.T) {
	for _, name := range sysfstest.Fixtures() {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(hostsDir, name)
			c, text, err := classFromHost(t, dir)
			if err != nil {
				if !strings.Contains(err.Error(), "no RDMA device") {
					t.Fatalf("ExpectFromHost: %v", err)
				}
				return
			}
			without := hwRun(t, dir, checks.Options{})
			with := hwRun(t, dir, checks.Options{Expect: c})
			for i, w := range with.Checks {
				before := without.Checks[i]
				judged := before.Status == report.Pass || before.Status == report.Warn || before.Status == report.Skip
				if judged && (w.Status == report.Fail || w.Status == report.Error) {
					t.Errorf("%s: %s without the file, %s with it: %s\n%s", w.ID, before.Status, w.Status, w.Summary, text)
				}
			}
		})
	}
}

func TestExpectFromHostValues(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		has     []string
		hasNot  []string
	}{
		{"cx5-roce-healthy", []string{
			"[class cx5-node]\nhosts = cx5-node*\ndevices = 2 ", "\nlossless = true ", "\nmlx5_0.fw = 16.35.2000 ", "# fw_ver 16.35.2000 (MT_0000000008)\n",
			"\nmlx5_0.pcie_speed = 8.0 GT/s PCIe\n", "\nmlx5_0.pcie_width = 16\n", "\nmlx5_0.ports = 1\n", "\nmlx5_1/1.link_layer = Ethernet\n",
			"\nmlx5_1/1.rate = 100\n", "\nmlx5_1/1.width = 4X\n", "\nmlx5_0/1.mtu = 9000 ", "# MTU of ens1f0np0", "\nmlx5_0/1.pfc_priority = 3 "},
			[]string{"unused", "gpu_nic_max_distance"}},
		{"cx6-ib-healthy", []string{"mlx5_0/1.link_layer = InfiniBand\n", "mlx5_0/1.rate = 200\n", "mlx5_0.pcie_speed = 16.0 GT/s PCIe\n"},
			[]string{".mtu", "pfc_priority", "lossless", "unused"}},
		{"multiport-one-down", []string{"mlx4_0/1.rate = 56\n", "\n# mlx4_0/2.unused = true ", "# DOWN (phys Polling) when this file was written: uncomment if the port is unused on purpose\n"},
			[]string{"mlx4_0/2.rate", "\nmlx4_0/2.unused"}},
		{"rxe-softroce", []string{"hosts = rxe-dev\n", "rxe0.ports = 1\n", "rxe0/1.mtu = 1500 "}, []string{"pcie", "rxe0.fw"}},
		{"pfc-off", []string{"mlx5_0/1.rate = 100\n"}, []string{"pfc_priority", "lossless"}},
		// A LAG: the bond's MTU, PFC read on the slaves, which agree.
		{"mlx5-roce-lag-bond", []string{"mlx5_bond_0/1.mtu = 9000 ", "# MTU of bond0", "mlx5_bond_0/1.pfc_priority = 3 ", "on ens2f0np0, ens2f1np1"}, nil},
		{"aws-efa", []string{"rdmap0s6/1.link_layer = Unknown\n"}, []string{"mtu", "pfc"}},
		{"cxgb4-iwarp", []string{"cxgb4_0/1.mtu = 9000 "}, []string{"pfc_priority", "lossless"}},
		// GPUs: the farthest pair as gpu.nic_affinity pairs them.
		{"hgx-8gpu-healthy", []string{"\ngpu_nic_max_distance = PIX ", "# the farthest GPU–NIC pair on this host (GPU"}, nil},
		{"gpu4-nics-other-socket", []string{"\ngpu_nic_max_distance = SYS "}, nil},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			_, text, err := classFromHost(t, filepath.Join(hostsDir, tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.has {
				if !strings.Contains(text, s) {
					t.Errorf("no %q in\n%s", s, text)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(text, s) {
					t.Errorf("%q should not be in\n%s", s, text)
				}
			}
		})
	}
	if _, _, err := classFromHost(t, filepath.Join(hostsDir, "no-rdma-nic")); err == nil || !strings.Contains(err.Error(), "no RDMA device") {
		t.Errorf("a host without RDMA devices: %v", err)
	}
}

func TestPCILinkAgainstExpectations(t *testing.T) {
	for _, tc := range []struct {
		name, fixture, class string
		status               report.Status
		want                 []findingRef
		says, remedy         string // the expect.conf line and key cited; a fix the deviation needs
	}{
		{"as expected", "cx5-roce-healthy", "mlx5_*.pcie_speed = 8 GT/s\nmlx5_*.pcie_width = 16\n", report.Pass,
			[]findingRef{pl("expected", "0000:3b:00.0"), pl("expected", "0000:3b:00.1")},
			"as e.conf:3 mlx5_*.pcie_speed = 8 GT/s, e.conf:4 mlx5_*.pcie_width = 16 expects", ""},
		{"narrower than the class", "cx5-roce-healthy", "mlx5_1.pcie_width = 8\n", report.Fail,
			[]findingRef{pl("expected", "0000:3b:00.0"), pl("deviates", "0000:3b:00.1")},
			"expected x8 by e.conf:3 mlx5_1.pcie_width = 8", "not what e.conf:3 mlx5_1.pcie_width = 8 expects"},
		{"slower than the class", "cx5-roce-healthy", "mlx5_*.pcie_speed = 16.0 GT/s PCIe\n", report.Fail,
			[]findingRef{pl("deviates", "0000:3b:00.0"), pl("deviates", "0000:3b:00.1")},
			"expected 16.0 GT/s PCIe by e.conf:3 mlx5_*.pcie_speed = 16.0 GT/s PCIe", ""},
		{"degraded and deviating", "pcie-degraded", "mlx5_*.pcie_width = 16\n", report.Fail,
			[]findingRef{pl("degraded", "0000:3b:00.0"), pl("deviates", "0000:3b:00.0"), pl("degraded", "0000:3b:00.1"), pl("deviates", "0000:3b:00.1")},
			"expected x16 by e.conf:3 mlx5_*.pcie_width = 16", ""},
		{"a rule for other devices", "cx5-roce-healthy", "bnxt_re*.pcie_width = 8\n", report.Pass,
			[]findingRef{pl("expected", "0000:3b:00.0"), pl("expected", "0000:3b:00.1")}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := expectClass(t, "[class c]\nhosts = *\n"+tc.class)
			r := hwRun(t, filepath.Join(hostsDir, tc.fixture), checks.Options{Expect: c}, "pci.link")
			res := hwResult(t, r, "pci.link")
			all := res.Summary + "\n" + strings.Join(res.Details, "\n")
			if res.Status != tc.status || !strings.Contains(all, tc.says) {
				t.Errorf("status %s, want %s; %q not in\n%s", res.Status, tc.status, tc.says, all)
			}
			if diff := cmp.Diff(tc.want, refs(res.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			if tc.status == report.Fail && (r.ExitCode != 11 || !strings.Contains(res.Remedy, tc.remedy)) {
				t.Errorf("exit %d, remedy %q (want exit 11 and %q)", r.ExitCode, res.Remedy, tc.remedy)
			}
		})
	}
}

func TestExpectSkipOnFixture(t *testing.T) {
	dir := filepath.Join(hostsDir, "port-down")
	c := expectClass(t, "[class c]\nhosts = *\nskip = port.state counters.errors\n")
	r := hwRun(t, dir, checks.Options{Expect: c})
	ps := hwResult(t, r, "port.state")
	if ps.Status != report.Skip || ps.Summary != "skipped by e.conf:3 skip = port.state" {
		t.Errorf("port.state: %s %q", ps.Status, ps.Summary)
	}
	if ce := hwResult(t, r, "counters.errors"); ce.Status != report.Skip || !strings.HasPrefix(ce.Summary, "skipped by e.conf:3 skip = counters.errors") {
		t.Errorf("counters.errors: %s %q", ce.Status, ce.Summary)
	}
	// The checks after port.state still judge: a skip blocks nothing.
	if rc := hwResult(t, r, "roce.config"); rc.Status == report.Skip {
		t.Errorf("roce.config was blocked by a skipped port.state: %q", rc.Summary)
	}
	if r.RootCause != nil && *r.RootCause == "port.state" {
		t.Error("a skipped check is the root cause")
	}
}

// The acceptance case: the class written from a healthy host fails a host
// of the same class whose port is down.
func TestHealthyClassFailsPortDown(t *testing.T) {
	c, _, err := classFromHost(t, filepath.Join(hostsDir, "cx5-roce-healthy"))
	if err != nil {
		t.Fatal(err)
	}
	if r := hwRun(t, filepath.Join(hostsDir, "cx5-roce-healthy"), checks.Options{Expect: c}); r.ExitCode != 0 {
		t.Errorf("the healthy host fails its own class: exit %d (%v)", r.ExitCode, *r.RootCause)
	}
	if r := hwRun(t, filepath.Join(hostsDir, "port-down"), checks.Options{Expect: c}); r.ExitCode == 0 {
		t.Error("port-down passes the healthy host's class")
	}
}

// roce_tc is written only when every ACTIVE RoCE port's rdma_cm default
// ToS reads the same.
func TestExpectFromHostTrafficClass(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tos0, tos1 string
		want       string
	}{
		{"both 106", "106", "106", "\nroce_tc = 106 "},
		{"different", "106", "0", ""},
		{"one unreadable", "106", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := sysfstest.CX5RoCE()
			h.RoCETOS = ""
			tr := sysfstest.Build(h)
			sysfstest.SetRoCETOS(tr, "mlx5_0", 1, tc.tos0)
			if tc.tos1 != "" {
				sysfstest.SetRoCETOS(tr, "mlx5_1", 1, tc.tos1)
			}
			_, text, err := classFromHost(t, hwWrite(t, tr))
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" && strings.Contains(text, "roce_tc") || tc.want != "" && !strings.Contains(text, tc.want) {
				t.Errorf("want %q in\n%s", tc.want, text)
			}
		})
	}
}

// A value a line cannot hold (a hostile fw_ver) is left out of the class,
// not written so that it reads back as something else.
func TestExpectFromHostLeavesOutWhatALineCannotHold(t *testing.T) {
	tr := sysfstest.Build(sysfstest.CX5RoCE())
	n := 0
	for p := range tr.Files {
		if strings.HasSuffix(p, "/infiniband/mlx5_0/fw_ver") {
			tr.Attr(p, "16.35.2000 # mlx5_0.fw = 1")
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d fw_ver files of mlx5_0 in the generated tree", n)
	}
	c, text, err := classFromHost(t, hwWrite(t, tr))
	if err != nil {
		t.Fatal(err)
	}
	// Only the version part is a value; the rest of fw_ver is a comment.
	if fw := c.Device("mlx5_0").FW; fw == nil || fw.V.String() != "16.35.2000" || c.Device("mlx5_1").FW == nil {
		t.Errorf("fw of mlx5_0 not its version part, or mlx5_1's lost:\n%s", text)
	}
	tr = sysfstest.Build(sysfstest.CX5RoCE())
	for p := range tr.Files {
		if strings.HasSuffix(p, "/infiniband/mlx5_0/fw_ver") {
			tr.Attr(p, "16.35#2000 (MT_0000000008)")
		}
	}
	if c, text, err = classFromHost(t, hwWrite(t, tr)); err != nil || c.Device("mlx5_0").FW != nil {
		t.Errorf("a fw version a line cannot hold was written (%v):\n%s", err, text)
	}
}
