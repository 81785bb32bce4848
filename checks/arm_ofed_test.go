package checks_test

import (
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// Arm64 hosts and MLNX_OFED's global traffic class: every fixture gets the
// verdict and exit code its comment states (sysfstest.ArmOFEDVerdicts),
// with the finding named.
func TestArmOFEDFixtureVerdicts(t *testing.T) {
	for _, v := range sysfstest.ArmOFEDVerdicts {
		name := v.Fixture
		if v.ExpectLossless {
			name += "/expect-lossless"
		}
		t.Run(name, func(t *testing.T) {
			r := hwRun(t, netFixture(v.Fixture), checks.Options{ExpectLossless: v.ExpectLossless})
			statedVerdict(t, r, v.Check, v.Status, v.Finding, v.Exit)
		})
	}
}

// The healthy arm64 and MLNX_OFED hosts warn about nothing they can act on.
func TestArmOFEDHealthyNoWarn(t *testing.T) {
	for _, name := range []string{"gh200-dmabuf-no-peermem", "ampere-altra-roce", "kunpeng920-rocky9-aarch64", "mlnx-ofed-global-tclass"} {
		t.Run(name, func(t *testing.T) {
			r := hwRun(t, netFixture(name), checks.Options{ExpectLossless: true})
			for _, c := range r.Checks {
				if c.Status == report.Fail || c.Status == report.Error || c.Status == report.Warn {
					t.Errorf("%s %s: %s", c.ID, c.Status, c.Summary)
				}
			}
		})
	}
}

// The rdma-core release is read from the aarch64 entry, and the class
// judged is named with where it came from.
func TestArmOFEDWhatIsJudged(t *testing.T) {
	r := hwRun(t, netFixture("gh200-dmabuf-no-peermem"), checks.Options{})
	pm := hwResult(t, r, "gpu.peer_memory")
	if got := pm.Evidence["libibverbs"]; got != "/usr/lib/aarch64-linux-gnu/libibverbs.so.1.14.50.0" {
		t.Errorf("gpu.peer_memory read rdma-core from %v", got)
	}
	if !strings.Contains(pm.Summary, "DMA-BUF") {
		t.Errorf("summary %q does not name DMA-BUF", pm.Summary)
	}
	for _, name := range []string{"ampere-altra-roce", "kunpeng920-rocky9-aarch64"} {
		lib := hwResult(t, hwRun(t, netFixture(name), checks.Options{}), "libibverbs.install")
		if lib.Evidence["abi"] != "aarch64" {
			t.Errorf("%s: libibverbs.install judged ABI %v, want aarch64", name, lib.Evidence["abi"])
		}
	}
	rl := hwResult(t, hwRun(t, netFixture("mlnx-ofed-tclass-pfc-elsewhere"), checks.Options{}), "roce.lossless")
	for _, want := range []string{"ToS 106 (DSCP 26, mlx5_0 port 1 MLNX_OFED global tclass", "echo tclass=130 > /sys/class/infiniband/mlx5_0/tc/1/traffic_class", "mlnx_qos -i ens1f0np0 --pfc 0,0,0,1,1,0,0,0"} {
		if !strings.Contains(rl.Summary+"\n"+rl.Remedy, want) {
			t.Errorf("roce.lossless lacks %q:\n%s\n%s", want, rl.Summary, rl.Remedy)
		}
	}
}

// MLNX_OFED's global class overrides rdma_cm's default_roce_tos: a host
// whose default_roce_tos (0) lands off PFC is lossless once the global
// class 106 is set; a traffic_class file that cannot be parsed is named in
// the details and default_roce_tos is judged.
func TestOFEDGlobalClassOverridesRoCETOS(t *testing.T) {
	build := func(tc string) string {
		h := sysfstest.CX5RoCE()
		h.RoCETOS = "0"
		tr := sysfstest.Build(h)
		for _, dev := range []string{"mlx5_0", "mlx5_1"} {
			switch tc {
			case "106":
				sysfstest.SetOFEDTrafficClass(tr, dev, 1, 106)
			case "garbage":
				tr.Attr(path.Join(path.Dir(path.Dir(sysfstest.PortDir(tr, dev, 1))), "tc", "1", "traffic_class"), "Global tclass=abc")
			}
		}
		return hwWrite(t, tr)
	}
	for _, tc := range []struct {
		name, tclass string
		want         []findingRef
		details      string
	}{
		{"default_roce_tos alone", "", []findingRef{{"roce.lossless/tos-class-off-pfc", "ens1f0np0"}, {"roce.lossless/tos-class-off-pfc", "ens1f1np1"}}, ""},
		{"global tclass overrides it", "106", []findingRef{{"roce.lossless/lossless", "ens1f0np0"}, {"roce.lossless/lossless", "ens1f1np1"}}, ""},
		{"unparsable traffic_class", "garbage", []findingRef{{"roce.lossless/tos-class-off-pfc", "ens1f0np0"}, {"roce.lossless/tos-class-off-pfc", "ens1f1np1"}},
			"mlx5_0 port 1: tc traffic_class unreadable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRunOne(t, build(tc.tclass), "roce.lossless", checks.Options{})
			if d := cmp.Diff(tc.want, refs(r.Findings)); d != "" {
				t.Errorf("findings (-want +got):\n%s", d)
			}
			if tc.details != "" && !strings.Contains(strings.Join(r.Details, "\n"), tc.details) {
				t.Errorf("details lack %q:\n%s", tc.details, strings.Join(r.Details, "\n"))
			}
		})
	}
	// --roce-tc names a class no packet carries where the global class
	// replaces it on every port: the global class is judged, and the
	// details say why the expected one is not.
	r := hwRunOne(t, build("106"), "roce.lossless", checks.Options{RoCETC: 0, RoCETCSet: true})
	if d := cmp.Diff([]findingRef{{"roce.lossless/lossless", "ens1f0np0"}, {"roce.lossless/lossless", "ens1f1np1"}}, refs(r.Findings)); d != "" {
		t.Errorf("--roce-tc 0 under a global tclass (-want +got):\n%s", d)
	}
	if want := "(ToS 0) not judged on ens1f0np0: MLNX_OFED's global tclass overrides"; !strings.Contains(strings.Join(r.Details, "\n"), want) {
		t.Errorf("details lack %q:\n%s", want, strings.Join(r.Details, "\n"))
	}
}
