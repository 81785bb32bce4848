package checks_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestGPUPeerMemoryFindings(t *testing.T) {
	build := func(edit func(h *sysfstest.Host), treeEdit func(tr *sysfstest.Tree)) string {
		h := sysfstest.HGXH100()
		if edit != nil {
			edit(&h)
		}
		tr := sysfstest.Build(h)
		if treeEdit != nil {
			treeEdit(tr)
		}
		return hwWrite(t, tr)
	}
	noNVIDIA := build(func(h *sysfstest.Host) {
		h.GPU.NVIDIAVersion = ""
		for _, m := range []string{"nvidia_peermem", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia"} {
			h.Modules = without(h.Modules, m)
		}
	}, nil)
	amdOldKernel := func() string {
		h := sysfstest.MI300X()
		h.Kernel = "5.4.0-150-generic"
		return hwWrite(t, sysfstest.Build(h))
	}()
	oldKernel := build(func(h *sysfstest.Host) {
		h.Modules = without(h.Modules, "nvidia_peermem")
		h.Kernel = "5.4.0-150-generic"
	}, nil)
	unknownDriver := build(func(h *sysfstest.Host) { h.Modules = without(h.Modules, "nvidia_peermem") },
		func(tr *sysfstest.Tree) { tr.Remove("/proc/driver/nvidia/version") })
	modulesUnreadable := build(nil, func(tr *sysfstest.Tree) {
		tr.Remove(sysfs.ProcModules)
		tr.Dir(sysfs.ProcModules)
	})
	kernelUnreadable := build(nil, func(tr *sysfstest.Tree) { tr.Remove(sysfs.OSReleasePath) })
	for _, tc := range []struct {
		name, dir string
		want      []findingRef
	}{
		{"HGX: both paths", netFixture("hgx-8gpu-healthy"), []findingRef{{"gpu.peer_memory/available", ""}}},
		{"MI300X: DMA-BUF", netFixture("amd-mi300x"), []findingRef{{"gpu.peer_memory/available", ""}}},
		{"no nvidia_peermem, proprietary driver", netFixture("hgx-no-peermem"),
			[]findingRef{{"gpu.peer_memory/no-path", ""}, {"gpu.peer_memory/nvidia-no-path", "nvidia"}}},
		{"DMA-BUF taken away by an old kernel", oldKernel, []findingRef{{"gpu.peer_memory/no-path", ""}, {"gpu.peer_memory/nvidia-no-path", "nvidia"}}},
		{"NVIDIA driver version unknown", unknownDriver,
			[]findingRef{{"gpu.peer_memory/path-unknown", ""}}},
		{"NVIDIA driver not loaded", noNVIDIA, []findingRef{{"gpu.peer_memory/no-path", ""}, {"gpu.peer_memory/nvidia-driver-missing", "nvidia"}}},
		{"AMD on an old kernel", amdOldKernel, []findingRef{{"gpu.peer_memory/no-path", ""}, {"gpu.peer_memory/amd-no-path", "amdgpu"}}},
		{"module list unreadable", modulesUnreadable, []findingRef{{"gpu.peer_memory/modules-unreadable", ""}}},
		{"kernel release unreadable", kernelUnreadable, []findingRef{{"gpu.peer_memory/kernel-unreadable", ""}}},
		{"no RDMA NIC", netFixture("gpu-no-rdma-nic"), []findingRef{{"gpu.peer_memory/no-nic", ""}}},
		{"no GPU", netFixture("cx5-roce-healthy"), []findingRef{{"gpu.peer_memory/no-gpu", ""}}},
		{"PCI unreadable", gpuPCIUnreadable(t), []findingRef{{"gpu.peer_memory/pci-unreadable", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRunOne(t, tc.dir, "gpu.peer_memory", checks.Options{})
			if diff := cmp.Diff(tc.want, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s %s", diff, r.Status, r.Summary)
			}
		})
	}
	// Unknown, the vendor's cause is no finding, but its fix still
	// follows path-unknown's "Otherwise:".
	r := hwRunOne(t, unknownDriver, "gpu.peer_memory", checks.Options{})
	if !strings.Contains(r.Remedy, "Otherwise:\nLoad the peer-memory module: `modprobe nvidia-peermem`") {
		t.Errorf("path unknown: remedy lacks the NVIDIA fix after \"Otherwise:\":\n%s", r.Remedy)
	}
}
