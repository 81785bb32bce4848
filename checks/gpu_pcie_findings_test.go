package checks_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestGPUPCIeFindings(t *testing.T) {
	// hgx edits GPU0 (0000:1b:00.0) and, in the tree, the attribute of a
	// device directory named by its address.
	type attr struct{ addr, name, value string }
	hgx := func(edit func(g *sysfstest.GPUDev), attrs ...attr) string {
		h := sysfstest.HGXH100()
		edit(&h.GPU.GPUs[0])
		tr := sysfstest.Build(h)
		for _, a := range attrs {
			found := false
			for f := range tr.Files {
				if strings.HasPrefix(f, "/sys/devices/") && strings.HasSuffix(f, "/"+a.addr+"/"+a.name) {
					if a.value == "" {
						delete(tr.Files, f)
						tr.Dir(f)
					} else {
						tr.Attr(f, a.value)
					}
					found = true
				}
			}
			if !found {
				t.Fatalf("no %s of %s", a.name, a.addr)
			}
		}
		return hwWrite(t, tr)
	}
	gpu0 := func(id string) []findingRef {
		var out []findingRef
		for i, a := range hgxGPUs {
			f := findingRef{"gpu.pcie/link-expected", a}
			if i == 0 {
				f.ID = "gpu.pcie/" + id
			}
			out = append(out, f)
		}
		return out
	}
	const gen4 = "16.0 GT/s PCIe"
	for _, tc := range []struct {
		name, dir string
		want      []findingRef
	}{
		{"HGX healthy", netFixture("hgx-8gpu-healthy"), gpu0("link-expected")},
		{"GPU0 trained x8", hgx(func(g *sysfstest.GPUDev) { g.Width = 8 }), gpu0("link-degraded")},
		// A Gen4 GPU below Gen5 bridges: its switch's downstream port at
		// Gen5 x8 carries as much, slower in width only.
		{"GPU0's bridge narrower, not limiting", hgx(func(g *sysfstest.GPUDev) { g.Speed, g.MaxSpeed = gen4, gen4 },
			attr{"0000:17:01.0", "current_link_width", "8"}), gpu0("slow-bridge")},
		{"GPU0's link status unreadable", hgx(func(g *sysfstest.GPUDev) {},
			attr{"0000:1b:00.0", "current_link_speed", ""}, attr{"0000:1b:00.0", "current_link_width", ""}), gpu0("link-unreadable")},
		{"GPU0 not trained", hgx(func(g *sysfstest.GPUDev) {}, attr{"0000:1b:00.0", "current_link_width", "0"}), gpu0("link-unknown")},
		{"no RDMA NIC", netFixture("gpu-no-rdma-nic"), []findingRef{{"gpu.pcie/no-nic", ""}}},
		{"no GPU", netFixture("cx5-roce-healthy"), []findingRef{{"gpu.pcie/no-gpu", ""}}},
		{"PCI unreadable", gpuPCIUnreadable(t), []findingRef{{"gpu.pcie/pci-unreadable", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRunOne(t, tc.dir, "gpu.pcie", checks.Options{})
			if diff := cmp.Diff(tc.want, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s %s\n%s", diff, r.Status, r.Summary, strings.Join(r.Details, "\n"))
			}
		})
	}
}
