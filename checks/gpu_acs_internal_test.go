package checks

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// A pair whose relation was told but whose bridges cannot be (the PCI path
// changed between the survey and the judgement) is an error naming why.
// No host written to disk gets here: the survey reads the same paths.
func TestACSPairPathUnreadable(t *testing.T) {
	g := &gpuSurvey{
		GPUs:   []GPU{{Fn: sysfs.PCIFunction{Address: "0000:1b:00.0", SysPath: "/sys/devices/platform/0000:1b:00.0"}, Name: "GPU0"}},
		NICs:   []NIC{{Fn: sysfs.PCIFunction{Address: "0000:18:00.0", SysPath: "/sys/devices/pci0000:15/0000:15:01.0/0000:18:00.0", RDMADevs: []string{"mlx5_0"}}}},
		Matrix: [][]gpuLink{{{rel: sysfs.RelPIX}}},
		Paired: []int{0},
	}
	v := judgeACSPair(nil, g, 0, map[string]acsRead{})
	if v.status != report.Error || len(v.findings) != 1 || v.findings[0].ID != "gpu.acs/path-unreadable" || v.findings[0].Unit != "0000:1b:00.0" {
		t.Fatalf("%s %q %+v", v.status, v.line, v.findings)
	}
}
