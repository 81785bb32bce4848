package checks_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestKernelVersion(t *testing.T) {
	r := hwRun(t, filepath.Join(hostsDir, "kernel-too-old"), checks.Options{}, "kernel.version")
	if c := hwResult(t, r, "kernel.version"); c.Status != report.Fail || r.ExitCode != 12 || r.RootCause == nil || *r.RootCause != "kernel.version" {
		t.Fatalf("kernel-too-old: %s %s, exit %d", c.Status, c.Summary, r.ExitCode)
	}
	// The release as the summary shows it; the findings test below says
	// which finding each release gives.
	h := sysfstest.CX5RoCE()
	h.Kernel = "3.10.0-1160.119.1.el7.x86_64"
	res := hwRunOne(t, hwWrite(t, sysfstest.Build(h)), "kernel.version", checks.Options{})
	const says = "kernel 3.10.0-1160.119.1.el7.x86_64 is older than 4.18 (RHEL 7 family, whose 3.10 carries a backported RDMA stack), but it runs the 2 RDMA device(s) found"
	if res.Summary != says || !strings.Contains(res.Remedy, "MLNX_OFED/DOCA list the kernels") {
		t.Errorf("RHEL 7: %q / %q", res.Summary, res.Remedy)
	}
}

// TestKernelVersionFindings: each release gives the finding named, about
// the host; an old kernel that runs its devices warns, one that
// registered none fails (DESIGN §5: fail only what cannot run the devices).
func TestKernelVersionFindings(t *testing.T) {
	build := func(release string, noDevices bool) string {
		h := sysfstest.CX5RoCE()
		h.Kernel = release
		if noDevices {
			for i := range h.NICs {
				h.NICs[i].IBDev = ""
			}
		}
		return hwWrite(t, sysfstest.Build(h))
	}
	unreadable := func() string {
		tr := sysfstest.Build(sysfstest.CX5RoCE())
		tr.Remove("/proc/sys/kernel/osrelease")
		return hwWrite(t, tr)
	}()
	for _, tc := range []struct {
		name, dir, want string
	}{
		{"6.1", build("6.1.0-18-amd64", false), "kernel.version/recent"},
		{"4.15 with devices", build("4.15.0-213-generic", false), "kernel.version/old-runs-devices"},
		{"RHEL 7 with devices", build("3.10.0-1160.119.1.el7.x86_64", false), "kernel.version/rhel7-runs-devices"},
		{"4.15 without devices", build("4.15.0-213-generic", true), "kernel.version/too-old"},
		{"fixture kernel-too-old", netFixture("kernel-too-old"), "kernel.version/too-old"},
		{"upstream 5.3", build("5.3.18-custom", false), "kernel.version/older-than-recommended"},
		// RHEL 8's 4.18 carries the RDMA stack of later kernels.
		{"RHEL 8.9", build("4.18.0-513.5.1.el8_9.x86_64", false), "kernel.version/rhel8-backports"},
		{"RHEL 8.0", build("4.18.0-80.el8.x86_64", false), "kernel.version/rhel8-backports"},
		{"not a version", build("not-a-version", false), "kernel.version/release-unparsable"},
		{"release unreadable", unreadable, "kernel.version/release-unreadable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := hwRunOne(t, tc.dir, "kernel.version", checks.Options{})
			if diff := cmp.Diff([]findingRef{{tc.want, ""}}, refs(res.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, res.Summary)
			}
			if res.Observed == "" || res.Expected == "" {
				t.Errorf("observed %q expected %q", res.Observed, res.Expected)
			}
			if res.Status != report.Pass && res.Remedy == "" {
				t.Errorf("%s without a remedy: %s", res.Status, res.Summary)
			}
		})
	}
}
