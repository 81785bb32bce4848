package checks_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestKernelModules(t *testing.T) {
	r := hwRun(t, filepath.Join(hostsDir, "mlx5-ib-module-missing"), checks.Options{}, "kernel.modules")
	c := hwResult(t, r, "kernel.modules")
	if c.Status != report.Fail || c.Summary != "mlx5_ib not loaded" || r.ExitCode != 13 {
		t.Fatalf("%s: %s, exit %d", c.Status, c.Summary, r.ExitCode)
	}
	if c.Observed != "mlx5_ib missing" || !strings.HasPrefix(c.Remedy, "`modprobe -a mlx5_ib`, then check `dmesg`") {
		t.Errorf("observed %q remedy %q", c.Observed, c.Remedy)
	}

	// A card held by vfio-pci needs nothing from the host's RDMA modules:
	// with every card passed through, no driver family is asked for.
	h := sysfstest.CX5RoCE()
	h.Modules = []string{"vfio_pci", "vfio", "ib_uverbs", "ib_core", "rdma_ucm", "rdma_cm"}
	for i := range h.NICs {
		h.NICs[i].Driver, h.NICs[i].IBDev, h.NICs[i].Ports = "vfio-pci", "", nil
	}
	res := hwRunOne(t, hwWrite(t, sysfstest.Build(h)), "kernel.modules", checks.Options{})
	if res.Status != report.Pass || strings.Contains(res.Expected, "mlx5") {
		t.Errorf("all cards passed through: %s: %s (expected %s)", res.Status, res.Summary, res.Expected)
	}
}

// modulesHost is the ConnectX-5 RoCE host with its module list edited and
// its tree edited after.
func modulesHost(t *testing.T, edit func(h *sysfstest.Host), tree func(tr *sysfstest.Tree)) string {
	t.Helper()
	h := sysfstest.CX5RoCE()
	if edit != nil {
		edit(&h)
	}
	tr := sysfstest.Build(h)
	if tree != nil {
		tree(tr)
	}
	return hwWrite(t, tr)
}

func withoutModules(mods []string, drop ...string) []string {
	var out []string
	for _, m := range mods {
		keep := true
		for _, d := range drop {
			keep = keep && m != d
		}
		if keep {
			out = append(out, m)
		}
	}
	return out
}

// TestKernelModulesFindings: each host gives the findings named, about
// the host; the modules of one kind are one finding, loaded by one fix.
func TestKernelModulesFindings(t *testing.T) {
	drop := func(mods ...string) func(h *sysfstest.Host) {
		return func(h *sysfstest.Host) { h.Modules = withoutModules(h.Modules, mods...) }
	}
	// modules.dep of the running kernel lists every module but those left out.
	dep := func(missing ...string) func(tr *sysfstest.Tree) {
		return func(tr *sysfstest.Tree) {
			var b strings.Builder
			for _, m := range []string{"mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs", "rdma_cm", "rdma_ucm"} {
				if len(withoutModules([]string{m}, missing...)) == 1 {
					b.WriteString("kernel/drivers/" + m + ".ko.xz:\n")
				}
			}
			tr.File("/lib/modules/6.1.0-18-amd64/modules.dep", b.String())
		}
	}
	for _, tc := range []struct {
		name string
		dir  string
		want []string
	}{
		{"healthy", netFixture("cx5-roce-healthy"), []string{"kernel.modules/present"}},
		{"vfio passthrough of one card", netFixture("mlx5-vfio-passthrough"), []string{"kernel.modules/present"}},
		{"mlx5_ib missing", netFixture("mlx5-ib-module-missing"), []string{"kernel.modules/not-loaded"}},
		{"mlx5_ib missing and not installed, ib_uverbs missing", modulesHost(t, drop("mlx5_ib", "ib_uverbs"), dep("mlx5_ib")),
			[]string{"kernel.modules/not-loaded", "kernel.modules/not-installed"}},
		{"rdma_cm and rdma_ucm missing", modulesHost(t, drop("rdma_cm", "rdma_ucm"), nil), []string{"kernel.modules/rdma-cm-missing"}},
		{"/sys/module unreadable, mlx5_ib not listed", modulesHost(t, drop("mlx5_ib"), func(tr *sysfstest.Tree) {
			tr.Remove("/sys/module")
			tr.File("/sys/module", "not a directory\n")
		}), []string{"kernel.modules/state-unknown"}},
		{"module list malformed", modulesHost(t, nil, func(tr *sysfstest.Tree) { tr.File(sysfs.ProcModules, "garbage\nmore garbage\n") }),
			[]string{"kernel.modules/list-malformed"}},
		{"module list unreadable", modulesHost(t, nil, func(tr *sysfstest.Tree) { tr.Remove(sysfs.ProcModules) }),
			[]string{"kernel.modules/list-unreadable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := hwRunOne(t, tc.dir, "kernel.modules", checks.Options{})
			var want []findingRef
			for _, id := range tc.want {
				want = append(want, findingRef{id, ""})
			}
			if diff := cmp.Diff(want, refs(res.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s: %s", diff, res.Status, res.Summary)
			}
			// Every verdict but a pass says what was seen, what was wanted
			// and what to do (for an error: how to look by hand).
			if res.Status != report.Pass && (res.Observed == "" || res.Expected == "" || res.Remedy == "") {
				t.Errorf("%s: observed %q expected %q remedy %q", res.Status, res.Observed, res.Expected, res.Remedy)
			}
		})
	}
}

// The modules of one finding are loaded by one command, and one that is
// not installed says so before modprobe is tried.
func TestKernelModulesRemedy(t *testing.T) {
	h := sysfstest.CX5RoCE()
	h.Modules = withoutModules(h.Modules, "mlx5_ib", "ib_uverbs")
	res := hwRunOne(t, hwWrite(t, sysfstest.Build(h)), "kernel.modules", checks.Options{})
	if res.Summary != "mlx5_ib, ib_uverbs not loaded" ||
		!strings.Contains(res.Remedy, "`modprobe -a mlx5_ib ib_uverbs`") || !strings.Contains(res.Remedy, "add mlx5_ib and ib_uverbs to") {
		t.Errorf("%q / %q", res.Summary, res.Remedy)
	}
}
