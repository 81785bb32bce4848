package sysfs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

const vmbus = "/sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/"

// A function on a Hyper-V vPCI root bus has a hidden PCIe path: its
// relation to another is their NUMA nodes, never unknown; Intel VMD's
// root bus, below a PCI function the host sees, is no hidden path.
func TestHiddenPCIePath(t *testing.T) {
	fn := func(p string, numa int) sysfs.PCIFunction {
		return sysfs.PCIFunction{SysPath: p, NUMANode: numa, HasNUMA: numa >= 0}
	}
	gpu := fn(vmbus+"00000010-0001-0000-3130-444532304235/pci0001:00/0001:00:00.0", 0)
	if where, ok := sysfs.HiddenPCIePath(gpu); !ok || where != "pci0001:00 below 00000010-0001-0000-3130-444532304235" {
		t.Fatalf("HiddenPCIePath = %q %v", where, ok)
	}
	vmd := fn("/sys/devices/pci0000:00/0000:00:0e.0/pci10000:00/10000:00:01.0/10000:01:00.0", 0)
	if _, ok := sysfs.HiddenPCIePath(vmd); ok {
		t.Fatal("a VMD domain below a PCI function is not hidden")
	}
	for _, tc := range []struct {
		name string
		nic  sysfs.PCIFunction
		want sysfs.PCIRelation
		why  string
	}{
		{"same NUMA node", fn(vmbus+"00000100-0101-0000-3130-444532304235/pci0101:00/0101:00:00.0", 0), sysfs.RelNODE, "both on NUMA node 0"},
		{"other NUMA node", fn(vmbus+"00000105-0105-0000-3130-444532304235/pci0105:00/0105:00:00.0", 1), sysfs.RelSYS, "NUMA nodes 0 and 1"},
		{"no NUMA node", fn(vmbus+"00000100-0101-0000-3130-444532304235/pci0101:00/0101:00:00.0", -1), sysfs.RelNODE, "no NUMA node reported"},
		{"a host-bridge NIC", fn("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0", 0), sysfs.RelNODE, "hides the PCIe path"},
	} {
		got, why := sysfs.Relation(gpu, tc.nic)
		if got != tc.want || !strings.Contains(why, tc.why) || !strings.Contains(why, "the hypervisor hides the PCIe path") {
			t.Errorf("%s: %s (%s), want %s saying %q", tc.name, got, why, tc.want, tc.why)
		}
	}
	br, err := sysfs.BridgesBetween(gpu, fn(vmbus+"00000100-0101-0000-3130-444532304235/pci0101:00/0101:00:00.0", 0))
	if err != nil || len(br) != 0 {
		t.Fatalf("bridges between vPCI functions: %v %v", br, err)
	}
	if _, err := sysfs.TreePathOf(vmbus + "00000010-0001-0000-3130-444532304235/net/eth0"); err == nil {
		t.Fatal("a VMBus device without a root bus has no PCI path")
	}
}

// Azure's ND A100 v4 layout: two GPUs and two NICs below each bridge.
const ndv4Topo = `<system version="1">
  <cpu numaid="0" affinity="00000000,00000000,00ffffff" arch="x86_64" vendor="AuthenticAMD" familyid="23" modelid="49">
    <pci busid="ffff:ff:01.0" class="0x060400" link_speed="16 GT/s" link_width="16">
      <pci busid="0003:00:00.0" class="0x030200" link_speed="16 GT/s" link_width="16"/>
      <pci busid="0103:00:00.0" class="0x020700" link_speed="16 GT/s" link_width="16"/>
      <pci busid="0004:00:00.0" class="0x030200" link_speed="16 GT/s" link_width="16"/>
      <pci busid="0104:00:00.0" class="0x020700" link_speed="16 GT/s" link_width="16"/>
    </pci>
  </cpu>
  <cpu numaid="1" arch="x86_64" vendor="AuthenticAMD">
    <pci busid="ffff:ff:02.0" class="0x060400" link_speed="16 GT/s" link_width="16">
      <pci busid="0001:00:00.0" class="0x030200" link_speed="16 GT/s" link_width="16"/>
      <pci busid="0101:00:00.0" class="0x020700" link_speed="16 GT/s" link_width="16"/>
    </pci>
  </cpu>
</system>
`

func TestParseNCCLTopology(t *testing.T) {
	top, err := sysfs.ParseNCCLTopology([]byte(ndv4Topo))
	if err != nil {
		t.Fatal(err)
	}
	g, k, ok := top.GroupOf("0004:00:00.0")
	if !ok || k != 1 || g.NUMA != 0 || g.Bridge != "ffff:ff:01.0" || strings.Join(g.NICs, " ") != "0103:00:00.0 0104:00:00.0" {
		t.Fatalf("GroupOf 0004: %+v %d %v", g, k, ok)
	}
	if g, _, ok := top.GroupOf("0001:00:00.0"); !ok || g.NUMA != 1 {
		t.Fatalf("GroupOf 0001: %+v %v", g, ok)
	}
	for _, bad := range []string{"", "<cpu/>", "<system><cpu numaid=\"0\"></cpu></system>", "<system><pci busid=\"x\">"} {
		if _, err := sysfs.ParseNCCLTopology([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// ReadNCCLTopology takes /etc/nccl.conf's NCCL_TOPO_FILE, else the file in
// /opt/microsoft that lists exactly this machine's GPUs.
func TestReadNCCLTopology(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("opt/microsoft/ndv4-topo.xml", ndv4Topo)
	write("opt/microsoft/other-topo.xml", strings.ReplaceAll(ndv4Topo, "0004:00:00.0", "0005:00:00.0"))
	h, err := sysfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	gpus := []string{"0001:00:00.0", "0003:00:00.0", "0004:00:00.0"}
	top, found, notes := h.ReadNCCLTopology(gpus)
	if !found || top.File != "/opt/microsoft/ndv4-topo.xml" {
		t.Fatalf("found %v %q, notes %v", found, top.File, notes)
	}
	write("etc/nccl.conf", "NCCL_IB_PCI_RELAXED_ORDERING=1\nNCCL_TOPO_FILE=/opt/microsoft/other-topo.xml\n")
	if _, found, notes := h.ReadNCCLTopology(gpus); found || len(notes) != 1 || !strings.Contains(notes[0], "not this machine's") {
		t.Fatalf("nccl.conf's file lists other GPUs, yet found %v (notes %v)", found, notes)
	}
}
