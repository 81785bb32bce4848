package checks_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// level1 runs every level-1 check and the inventory once, as
// `rdmadoctor --level 1` does.
func level1(b *testing.B, dir string) {
	h, err := sysfs.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	sel, err := checks.Select(nil)
	if err != nil {
		b.Fatal(err)
	}
	env := checks.NewEnv(h, checks.Options{Level: 1})
	r := &report.Report{Checks: checks.Run(context.Background(), env, sel)}
	r.Inventory = checks.Inventory(env)
	r.Finish(false)
	if r.ExitCode != 0 {
		b.Fatalf("level 1 on %s: exit %d (root cause %v)", dir, r.ExitCode, *r.RootCause)
	}
}

// BenchmarkLevel1Healthy is level 1 on the healthy dual-port ConnectX-5 fixture.
func BenchmarkLevel1Healthy(b *testing.B) {
	dir := filepath.Join(hostsDir, "cx5-roce-healthy")
	b.ReportAllocs()
	for b.Loop() {
		level1(b, dir)
	}
}

// BenchmarkLevel1HGX is level 1 on the healthy 8-GPU, 8-NIC HGX H100
// fixture: the GPU checks read every GPU's and NIC's path, 24 bridges'
// configuration spaces and the IOMMU groups.
func BenchmarkLevel1HGX(b *testing.B) {
	dir := filepath.Join(hostsDir, "hgx-8gpu-healthy")
	b.ReportAllocs()
	for b.Loop() {
		level1(b, dir)
	}
}

var (
	largeMu   sync.Mutex
	largeTmp  string                // removed by TestMain after the run
	largeDirs = map[[3]int]string{} // generated hosts by size, written once per test binary
)

// largeHostDir writes the generated large host once per test binary: 8
// dual-function cards (16 PFs with 2 ports each) and 64 SR-IOV VFs per PF,
// each VF with its own RDMA device — 1040 RDMA devices in all.
func largeHostDir(b *testing.B) string { return generatedHostDir(b, 8, 2, 64) }

// generatedHostDir writes sysfstest.LargeHost(cards, portsPerPF, vfsPerPF) once per
// test binary, under largeTmp.
func generatedHostDir(b *testing.B, cards, portsPerPF, vfsPerPF int) string {
	largeMu.Lock()
	defer largeMu.Unlock()
	size := [3]int{cards, portsPerPF, vfsPerPF}
	if d, ok := largeDirs[size]; ok {
		return d
	}
	if largeTmp == "" {
		d, err := os.MkdirTemp("", "rdmadoctor-large-host-")
		if err != nil {
			b.Fatal(err)
		}
		largeTmp = d
	}
	dir := filepath.Join(largeTmp, fmt.Sprintf("host-%d-%d-%d", cards, portsPerPF, vfsPerPF))
	if err := sysfstest.LargeHost(cards, portsPerPF, vfsPerPF).Write(dir); err != nil {
		b.Fatal(err)
	}
	largeDirs[size] = dir
	return dir
}

// BenchmarkLevel1LargeHostVFs is level 1 on the generated large host
// (16 PFs × 2 ports + 1024 VFs, each with its RDMA device and netdev).
func BenchmarkLevel1LargeHostVFs(b *testing.B) {
	dir := largeHostDir(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		level1(b, dir)
	}
}

// BenchmarkLevel1QuarterHostVFs is level 1 on a quarter of the large host
// (4 PFs + 256 VFs = 260 RDMA devices): against BenchmarkLevel1LargeHostVFs
// it shows whether the cost grows linearly with the devices.
func BenchmarkLevel1QuarterHostVFs(b *testing.B) {
	dir := generatedHostDir(b, 2, 2, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		level1(b, dir)
	}
}

// TestLargeHostPassesLevel1 keeps the generated large host a healthy host,
// so the benchmark measures the full pipeline rather than a short cut.
func TestLargeHostPassesLevel1(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a large host; skipped with -short")
	}
	dir := hwWrite(t, sysfstest.LargeHost(1, 2, 8))
	r := hwRun(t, dir, checks.Options{})
	for _, c := range r.Checks {
		if c.Status != report.Pass && c.Status != report.Skip {
			t.Errorf("%s: %s: %s", c.ID, c.Status, c.Summary)
		}
	}
	if got := len(r.Inventory.RDMADevices); got != 2+16 {
		t.Errorf("inventory has %d RDMA devices, want 18", got)
	}
	vfs := 0
	for _, p := range r.Inventory.PCIFunctions {
		if p.PhysFn != "" {
			vfs++
		}
	}
	if vfs != 16 {
		t.Errorf("inventory has %d VFs, want 16", vfs)
	}
}

// BenchmarkCountersErrorsLargeHost is counters.errors alone on the large
// host: a thousand VFs' ports, each with its counters and hw_counters.
func BenchmarkCountersErrorsLargeHost(b *testing.B) {
	dir := largeHostDir(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if r := hwRunOne(b, dir, "counters.errors", checks.Options{}); r.Status != report.Pass {
			b.Fatalf("%s %s", r.Status, r.Summary)
		}
	}
}

// BenchmarkGPUChecksHGX is the five GPU checks alone on the HGX fixture
// (with the survey they share), to tell their share of a level-1 run.
func BenchmarkGPUChecksHGX(b *testing.B) {
	dir := filepath.Join(hostsDir, "hgx-8gpu-healthy")
	b.ReportAllocs()
	for b.Loop() {
		h, err := sysfs.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		sel, err := checks.Select(gpuIDs)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range checks.Run(context.Background(), checks.NewEnv(h, checks.Options{Level: 1}), sel) {
			if r.Status != report.Pass {
				b.Fatalf("%s %s: %s", r.ID, r.Status, r.Summary)
			}
		}
		h.Close()
	}
}

// BenchmarkLinkPHYShare is level 1 on the healthy ConnectX-7 fixture (two
// netdevs, their answers from the facts file) with and without link.phy:
// the difference is what link.phy adds to a run (the survey and the host
// model it uses are shared with the other checks). BenchmarkLiveEthtool in
// sysfs times the live requests per netdev.
func BenchmarkLinkPHYShare(b *testing.B) {
	dir := filepath.Join(hostsDir, "cx7-roce-phy-healthy")
	all, err := checks.Select(nil)
	if err != nil {
		b.Fatal(err)
	}
	var without []string
	for _, c := range all {
		if c.ID != "link.phy" && c.Level == 1 {
			without = append(without, c.ID)
		}
	}
	for _, bc := range []struct {
		name string
		ids  []string
	}{{"with", append(append([]string(nil), without...), "link.phy")}, {"without", without}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := hwRun(b, dir, checks.Options{}, bc.ids...)
				if r.ExitCode != 0 {
					b.Fatalf("exit %d", r.ExitCode)
				}
			}
		})
	}
}
