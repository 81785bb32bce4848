package checks_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestKernelModules(t *testing.T) {
	r := hwRun(t, filepath.Join(hostsDir, "mlx5-ib-module-missing"), checks.Options{}, "kernel.modules")
	c := hwResult(t, r, "kernel.modules")
	if c.Status != report.Fail || !strings.Contains(c.Summary, "mlx5_ib not loaded") || r.ExitCode != 13 {
		t.Fatalf("%s: %s, exit %d", c.Status, c.Summary, r.ExitCode)
	}
	if c.Observed != "mlx5_ib missing" || !strings.Contains(c.Remedy, "modprobe -a mlx5_ib") {
		t.Errorf("observed %q remedy %q", c.Observed, c.Remedy)
	}

	// A card held by vfio-pci needs nothing from the host's RDMA modules:
	// with mlx5 unloaded, only the other port's driver family counts.
	tr, _ := sysfstest.Fixture("mlx5-vfio-passthrough")
	res := hwRunOne(t, hwWrite(t, tr), "kernel.modules", checks.Options{})
	if res.Status != report.Pass {
		t.Errorf("vfio host: %s: %s", res.Status, res.Summary)
	}
	h := sysfstest.CX5RoCE()
	h.Modules = []string{"vfio_pci", "vfio", "ib_uverbs", "ib_core", "rdma_ucm", "rdma_cm"}
	for i := range h.NICs {
		h.NICs[i].Driver, h.NICs[i].IBDev, h.NICs[i].Ports = "vfio-pci", "", nil
	}
	res = hwRunOne(t, hwWrite(t, sysfstest.Build(h)), "kernel.modules", checks.Options{})
	if res.Status != report.Pass || strings.Contains(res.Expected, "mlx5") {
		t.Errorf("all cards passed through: %s: %s (expected %s)", res.Status, res.Summary, res.Expected)
	}

	// Errors say what was seen, what was wanted and how to look by hand.
	tr = sysfstest.Build(sysfstest.CX5RoCE())
	tr.File(sysfs.ProcModules, "garbage\nmore garbage\n")
	res = hwRunOne(t, hwWrite(t, tr), "kernel.modules", checks.Options{})
	if res.Status != report.Error || !strings.Contains(res.Observed, "malformed") || res.Expected == "" || !strings.Contains(res.Remedy, "lsmod") {
		t.Errorf("malformed: %s: %s / %q %q %q", res.Status, res.Summary, res.Observed, res.Expected, res.Remedy)
	}
	tr = sysfstest.Build(sysfstest.CX5RoCE())
	tr.Remove(sysfs.ProcModules)
	res = hwRunOne(t, hwWrite(t, tr), "kernel.modules", checks.Options{})
	if res.Status != report.Error || res.Observed == "" || res.Expected == "" || !strings.Contains(res.Remedy, "lsmod") {
		t.Errorf("unreadable: %s: %s / %q %q %q", res.Status, res.Summary, res.Observed, res.Expected, res.Remedy)
	}
}
