package checks_test

import (
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// The GPU checks' findings tests share these hosts: the PCI bus
// unreadable, and a GPU moved off the PCI tree (its path cannot be read).

// gpuPCIUnreadable is an HGX node whose /sys/bus/pci/devices is a file.
func gpuPCIUnreadable(t *testing.T) string {
	tr := sysfstest.Build(sysfstest.HGXH100())
	const dir = "/sys/bus/pci/devices"
	tr.Remove(dir)
	tr.File(dir, "not a directory\n")
	return hwWrite(t, tr)
}

// gpuOffPCI is an HGX node whose GPU at addr resolves below
// /sys/devices/platform: not below a PCI host bridge.
func gpuOffPCI(t *testing.T, addr string) string {
	tr := sysfstest.Build(sysfstest.HGXH100())
	old := ""
	for f := range tr.Files {
		if strings.HasSuffix(f, "/"+addr+"/vendor") && strings.HasPrefix(f, "/sys/devices/") {
			old = path.Dir(f)
		}
	}
	if old == "" {
		t.Fatalf("no device directory for %s", addr)
	}
	moved := "/sys/devices/platform/" + addr
	for f, c := range tr.Files {
		if strings.HasPrefix(f, old+"/") {
			delete(tr.Files, f)
			tr.Files[moved+strings.TrimPrefix(f, old)] = c
		}
	}
	for l, target := range tr.Links {
		if strings.HasPrefix(l, old+"/") {
			delete(tr.Links, l)
			tr.Links[moved+strings.TrimPrefix(l, old)] = target
		}
	}
	tr.RelLink("/sys/bus/pci/devices/"+addr, moved)
	return hwWrite(t, tr)
}

// hgxGPUs are the HGX H100 node's GPUs (sysfstest.HGXH100).
var hgxGPUs = []string{"0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0", "0000:9d:00.0", "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0"}

func TestGPUNICAffinityFindings(t *testing.T) {
	paired := func(addrs ...string) []findingRef {
		var out []findingRef
		for _, a := range addrs {
			out = append(out, findingRef{"gpu.nic_affinity/paired", a})
		}
		return out
	}
	// GPU3's NIC below a root port of its own socket, not under its switch.
	sameSocket := func() string {
		h := sysfstest.HGXH100()
		h.GPU.Bridges = append(h.GPU.Bridges, sysfstest.Bridge{Addr: "0000:b0:01.0", HostBridge: "pci0000:b0", PortType: 4, Vendor: 0x8086, Device: 0x352a,
			NUMA: 0, Speed: "32.0 GT/s PCIe", Width: 16})
		h.NICs[3].Addr, h.NICs[3].Parent = "0000:b1:00.0", "0000:b0:01.0"
		return hwWrite(t, sysfstest.Build(h))
	}()
	with := func(i int, f findingRef) []findingRef {
		out := paired(hgxGPUs...)
		out[i] = f
		return out
	}
	for _, tc := range []struct {
		name, dir string
		want      []findingRef
	}{
		{"HGX healthy", netFixture("hgx-8gpu-healthy"), paired(hgxGPUs...)},
		{"VM", netFixture("gpu-vm-passthrough"), []findingRef{{"gpu.nic_affinity/virtual-topology", "0000:01:00.0"}}},
		{"NIC across the socket", netFixture("hgx-nic-across-socket"), with(3, findingRef{"gpu.nic_affinity/across-sockets", "0000:61:00.0"})},
		{"NIC on the same socket, not under the switch", sameSocket, with(3, findingRef{"gpu.nic_affinity/nic-not-under-switch", "0000:61:00.0"})},
		{"GPU path unreadable", gpuOffPCI(t, "0000:df:00.0"), with(7, findingRef{"gpu.nic_affinity/path-unreadable", "0000:df:00.0"})},
		{"no RDMA NIC", netFixture("gpu-no-rdma-nic"), []findingRef{{"gpu.nic_affinity/no-nic", ""}}},
		{"no GPU", netFixture("cx5-roce-healthy"), []findingRef{{"gpu.nic_affinity/no-gpu", ""}}},
		{"PCI unreadable", gpuPCIUnreadable(t), []findingRef{{"gpu.nic_affinity/pci-unreadable", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRunOne(t, tc.dir, "gpu.nic_affinity", checks.Options{})
			if diff := cmp.Diff(tc.want, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s %s", diff, r.Status, r.Summary)
			}
		})
	}
}
