package checks_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestGPUACSFindings(t *testing.T) {
	each := func(id string) []findingRef {
		var out []findingRef
		for _, a := range hgxGPUs {
			out = append(out, findingRef{"gpu.acs/" + id, a})
		}
		return out
	}
	with := func(i int, f findingRef) []findingRef {
		out := each("no-redirect")
		out[i] = f
		return out
	}
	unprivileged := func() string {
		h := sysfstest.HGXH100()
		h.GPU.Unprivileged = true
		return hwWrite(t, sysfstest.Build(h))
	}()
	for _, tc := range []struct {
		name, dir string
		want      []findingRef
	}{
		{"HGX healthy", netFixture("hgx-8gpu-healthy"), each("no-redirect")},
		{"ACS redirect on GPU2's switch", netFixture("hgx-acs-redirect"), with(2, findingRef{"gpu.acs/redirect", "0000:52:00.0"})},
		{"GPU3's NIC across the socket", netFixture("hgx-nic-across-socket"), with(3, findingRef{"gpu.acs/through-root-complex", "0000:61:00.0"})},
		{"without root", unprivileged, each("config-unreadable")},
		{"VM", netFixture("gpu-vm-passthrough"), []findingRef{{"gpu.acs/virtual-machine", ""}}},
		{"no RDMA NIC", netFixture("gpu-no-rdma-nic"), []findingRef{{"gpu.acs/no-nic", ""}}},
		{"no GPU", netFixture("cx5-roce-healthy"), []findingRef{{"gpu.acs/no-gpu", ""}}},
		{"PCI unreadable", gpuPCIUnreadable(t), []findingRef{{"gpu.acs/pci-unreadable", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRunOne(t, tc.dir, "gpu.acs", checks.Options{})
			if diff := cmp.Diff(tc.want, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s %s", diff, r.Status, r.Summary)
			}
		})
	}
}
