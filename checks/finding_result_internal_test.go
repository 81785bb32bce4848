package checks

import (
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// TestResultFaults: a result is only its check's declared findings — at
// least one, each declared under the check (or the runner), its status the
// worst of those not waived.
func TestResultFaults(t *testing.T) {
	ok := losslessOK.At("eth0", Slots{"observed": "eth0: PFC on priority 3"})
	lossy := losslessLossy.At("eth1", Slots{"netdev": "eth1", "prio": "3", "class": "ToS 0", "bitmap": "0,0,0,1,0,0,0,0", "dscp": "0"})
	waivedLossy := lossy
	waivedLossy.Waived = "a lab host (expect.conf:4)"
	for _, tc := range []struct {
		name string
		r    Result
		want string // a fault's words; "" for none
	}{
		{"findings agree", Result{Status: report.Warn, Findings: []report.Finding{ok, lossy}}, ""},
		{"the runner's finding", Result{Status: report.Skip, Findings: []report.Finding{runBlocked.At("", Slots{"check": "roce.config"})}}, ""},
		{"no finding", Result{Status: report.Pass, Summary: "fine"}, "without findings"},
		{"undeclared", Result{Status: report.Pass, Findings: []report.Finding{{ID: "roce.lossless/made-up", Status: report.Pass}}}, "not declared"},
		{"another check's", Result{Status: report.Fail, Findings: []report.Finding{pciUnbound.At("0000:3b:00.0", Slots{"function": "0000:3b:00.0 ConnectX-5", "pci_driver": "mlx5_core"})}}, "another check declares"},
		{"status not the worst", Result{Status: report.Pass, Findings: []report.Finding{ok, lossy}}, "returned status pass, but its worst finding is warn"},
		{"a waived finding does not count", Result{Status: report.Pass, Findings: []report.Finding{ok, waivedLossy}}, ""},
	} {
		got := strings.Join(resultFaults("roce.lossless", tc.r), "\n")
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: faults %q, want %q", tc.name, got, tc.want)
		}
	}
}
