package checks_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestKernelVersion(t *testing.T) {
	r := hwRun(t, filepath.Join(hostsDir, "kernel-too-old"), checks.Options{}, "kernel.version")
	if c := hwResult(t, r, "kernel.version"); c.Status != report.Fail || r.ExitCode != 12 || r.RootCause == nil || *r.RootCause != "kernel.version" {
		t.Fatalf("kernel-too-old: %s %s, exit %d", c.Status, c.Summary, r.ExitCode)
	}
	for _, tc := range []struct {
		release      string
		status       report.Status
		says, remedy string
		notRemedy    string
		noDevices    bool // no RDMA device registered
	}{
		{"6.1.0-18-amd64", report.Pass, "kernel 6.1.0-18-amd64", "", "", false},
		// An old kernel that runs its devices warns; one that registered
		// none fails (DESIGN §5: fail only what cannot run the devices).
		{"4.15.0-213-generic", report.Warn, "4.15.0-213-generic is older than 4.18, but it runs the 2 RDMA device(s) found", "Nothing needs changing now", "Boot", false},
		{"3.10.0-1160.119.1.el7.x86_64", report.Warn, "older than 4.18 (RHEL 7 family, whose 3.10 carries a backported RDMA stack), but it runs", "MLNX_OFED/DOCA list the kernels", "", false},
		{"4.15.0-213-generic", report.Fail, "4.15.0-213-generic is older than 4.18 and registered no RDMA device", "RHEL/Rocky 8+", "Nothing needs changing", true},
		{"5.3.18-custom", report.Warn, "older than 5.4", "Upstream 4.18–5.3 lacks", "years of", false},
		// RHEL 8's 4.18 carries the RDMA stack of later kernels.
		{"4.18.0-513.5.1.el8_9.x86_64", report.Pass, "RHEL 8 family", "", "", false},
		{"4.18.0-80.el8.x86_64", report.Pass, "backported", "", "", false},
		{"not-a-version", report.Error, "could not parse", "uname -r", "", false},
	} {
		t.Run(tc.release, func(t *testing.T) {
			h := sysfstest.CX5RoCE()
			h.Kernel = tc.release
			if tc.noDevices {
				for i := range h.NICs {
					h.NICs[i].IBDev = ""
				}
			}
			res := hwRunOne(t, hwWrite(t, sysfstest.Build(h)), "kernel.version", checks.Options{})
			if res.Status != tc.status || !strings.Contains(res.Summary, tc.says) {
				t.Fatalf("%s: %s; want %s saying %q", res.Status, res.Summary, tc.status, tc.says)
			}
			if !strings.Contains(res.Remedy, tc.remedy) || (tc.notRemedy != "" && strings.Contains(res.Remedy, tc.notRemedy)) {
				t.Errorf("remedy %q (want %q, not %q)", res.Remedy, tc.remedy, tc.notRemedy)
			}
			if res.Observed == "" || res.Expected == "" {
				t.Errorf("observed %q expected %q", res.Observed, res.Expected)
			}
		})
	}
	tr := sysfstest.Build(sysfstest.CX5RoCE())
	tr.Remove("/proc/sys/kernel/osrelease")
	res := hwRunOne(t, hwWrite(t, tr), "kernel.version", checks.Options{})
	if res.Status != report.Error || res.Remedy == "" || res.Observed == "" || res.Expected == "" {
		t.Errorf("unreadable release: %+v", res)
	}
}
