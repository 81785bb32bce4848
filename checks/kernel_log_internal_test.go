package checks

import (
	"errors"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// A kernel that refuses its log (dmesg_restrict without CAP_SYSLOG) makes
// kernel.log skip with the way to grant it; the devlink reporters are
// still judged beside it.
func TestKernelLogUnreadKinds(t *testing.T) {
	dl := devlinkVerdict{summary: "1 devlink health reporter(s) of the RDMA NICs",
		findings: []report.Finding{klogDevlinkError.At("pci/0000:3b:00.0/fw_fatal", Slots{"device": "mlx5_0", "reporter": "fw_fatal",
			"handle": "pci/0000:3b:00.0", "errors": "1", "recovered": "0"})}}
	for _, tc := range []struct {
		err    error
		id     string
		status report.Status
	}{
		{&sysfs.KernelLogError{Err: errors.New("open /dev/kmsg: operation not permitted"), Denied: true}, "kernel.log/no-access", report.Fail},
		{&sysfs.KernelLogError{Err: errors.New("read /dev/kmsg: input/output error")}, "kernel.log/unreadable", report.Fail},
	} {
		r := kernelLogUnread(tc.err, dl)
		if r.Status != tc.status || len(r.Findings) != 2 || r.Findings[0].ID != tc.id || r.Findings[1].ID != "kernel.log/devlink-error" {
			t.Errorf("%v: %s %+v", tc.err, r.Status, r.Findings)
		}
	}
	r := kernelLogUnread(&sysfs.KernelLogError{Err: errors.New("denied"), Denied: true}, devlinkVerdict{summary: "no devlink health reporters"})
	if r.Status != report.Skip || r.Findings[0].ID != "kernel.log/no-access" || r.Remedy == "" {
		t.Errorf("alone: %s %q %q", r.Status, r.Summary, r.Remedy)
	}
}
