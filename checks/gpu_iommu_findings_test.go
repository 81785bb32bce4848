package checks_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestGPUIOMMUFindings(t *testing.T) {
	hgx := func(edit func(g *sysfstest.GPUHost), noTypes bool) string {
		h := sysfstest.HGXH100()
		edit(h.GPU)
		tr := sysfstest.Build(h)
		if noTypes {
			for f := range tr.Files {
				if strings.HasPrefix(f, "/sys/kernel/iommu_groups/") && strings.HasSuffix(f, "/type") {
					delete(tr.Files, f)
				}
			}
		}
		return hwWrite(t, tr)
	}
	vm := func(units []string, groupType string) string {
		h := sysfstest.GPUVM()
		h.GPU.IOMMUUnits, h.GPU.GroupType = units, groupType
		return hwWrite(t, sysfstest.Build(h))
	}
	const noPT = "BOOT_IMAGE=/boot/vmlinuz-5.15.0-1042-nvidia ro intel_iommu=on"
	for _, tc := range []struct {
		name, dir string
		want      string
	}{
		{"HGX: identity groups", netFixture("hgx-8gpu-healthy"), "passthrough"},
		{"translating groups", hgx(func(g *sysfstest.GPUHost) { g.GroupType, g.Cmdline = "DMA-FQ", noPT }, false), "translated"},
		{"no IOMMU", hgx(func(g *sysfstest.GPUHost) { g.IOMMUUnits, g.GroupType, g.Cmdline = nil, "", noPT }, false), "no-iommu"},
		{"IOMMU off", hgx(func(g *sysfstest.GPUHost) { g.IOMMUUnits, g.GroupType, g.Cmdline = nil, "", "ro intel_iommu=off" }, false), "off"},
		{"types unreadable, iommu=pt", hgx(func(g *sysfstest.GPUHost) {}, true), "passthrough-by-cmdline"},
		{"types unreadable, no passthrough", hgx(func(g *sysfstest.GPUHost) { g.Cmdline = noPT }, true), "mode-unknown"},
		{"VM without guest IOMMU", netFixture("gpu-vm-passthrough"), "guest-no-iommu"},
		{"VM, guest IOMMU translating", vm([]string{"dmar0"}, "DMA"), "guest-translates"},
		{"VM, guest IOMMU in passthrough", vm([]string{"dmar0"}, "identity"), "guest-passthrough"},
		{"no RDMA NIC", netFixture("gpu-no-rdma-nic"), "no-nic"},
		{"no GPU", netFixture("cx5-roce-healthy"), "no-gpu"},
		{"PCI unreadable", gpuPCIUnreadable(t), "pci-unreadable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRunOne(t, tc.dir, "gpu.iommu", checks.Options{})
			if diff := cmp.Diff([]findingRef{{"gpu.iommu/" + tc.want, ""}}, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s %s", diff, r.Status, r.Summary)
			}
		})
	}
}
