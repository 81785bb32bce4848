package checks_test

import (
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// GPU hosts (sysfs/sysfstest/fixtures_gpu.go): the healthy HGX H100 and
// MI300X nodes and the VM pass every GPU check; each failure fixture fails
// one check, which is the run's root cause, with its remedy.

var gpuIDs = []string{"gpu.nic_affinity", "gpu.peer_memory", "gpu.acs", "gpu.iommu", "gpu.pcie"}

func TestGPUHealthyHostsExitZero(t *testing.T) {
	for _, name := range []string{"hgx-8gpu-healthy", "amd-mi300x", "gpu-vm-passthrough"} {
		t.Run(name, func(t *testing.T) {
			r := hwRun(t, netFixture(name), checks.Options{})
			for _, c := range r.Checks {
				if c.Status == report.Fail || c.Status == report.Error || c.Status == report.Warn {
					t.Errorf("%s %s: %s", c.ID, c.Status, c.Summary)
				}
			}
			if r.ExitCode != 0 {
				t.Fatalf("exit %d (root cause %s)", r.ExitCode, deref(r.RootCause))
			}
			if len(r.Inventory.GPUs) == 0 || len(r.Inventory.GPUNICMatrix) != len(r.Inventory.GPUs)*countNICs(r) {
				t.Fatalf("inventory: %d GPUs, %d matrix entries", len(r.Inventory.GPUs), len(r.Inventory.GPUNICMatrix))
			}
		})
	}
}

func countNICs(r *report.Report) int {
	n := 0
	for _, f := range r.Inventory.PCIFunctions {
		if f.PhysFn == "" {
			n++
		}
	}
	return n
}

func TestGPUHealthyHGXSaysWhy(t *testing.T) {
	runNetCases(t, "gpu.nic_affinity", []netCase{
		{name: "HGX: every GPU PIX to its own NIC", dir: netFixture("hgx-8gpu-healthy"), status: report.Pass,
			findings: refsOf("gpu.nic_affinity/paired", hgxGPUs),
			contains: []string{"GPU0 0000:1b:00.0 (H100 SXM5 80GB): mlx5_0 0000:18:00.0 PIX", "GPU0  PIX*"}},
		{name: "VM: virtual topology shown, not judged", dir: netFixture("gpu-vm-passthrough"), status: report.Pass,
			findings: []findingRef{{"gpu.nic_affinity/virtual-topology", "0000:01:00.0"}}},
	})
	runNetCases(t, "gpu.peer_memory", []netCase{
		{name: "HGX: both paths", dir: netFixture("hgx-8gpu-healthy"), status: report.Pass,
			findings: []findingRef{{"gpu.peer_memory/available", ""}},
			contains: []string{"nvidia_peermem loaded", "DMA-BUF (NVIDIA open kernel modules 550.90.07"}},
		{name: "MI300X: DMA-BUF through amdgpu", dir: netFixture("amd-mi300x"), status: report.Pass,
			findings: []findingRef{{"gpu.peer_memory/available", ""}}, contains: []string{"AMD GPUs: DMA-BUF (amdgpu exports GPU memory"}},
	})
	runNetCases(t, "gpu.iommu", []netCase{
		{name: "HGX: passthrough", dir: netFixture("hgx-8gpu-healthy"), status: report.Pass,
			findings: []findingRef{{"gpu.iommu/passthrough", ""}}, contains: []string{"GPU0 0000:1b:00.0: IOMMU group 32, identity"}},
		{name: "VM without guest IOMMU", dir: netFixture("gpu-vm-passthrough"), status: report.Pass,
			findings: []findingRef{{"gpu.iommu/guest-no-iommu", ""}}},
	})
	runNetCases(t, "gpu.acs", []netCase{
		{name: "VM skips with the NIC's ATS", dir: netFixture("gpu-vm-passthrough"), status: report.Skip,
			findings: []findingRef{{"gpu.acs/virtual-machine", ""}}, contains: []string{"mlx5_0 0000:02:00.0: ATS enabled"}},
	})
	runNetCases(t, "gpu.pcie", []netCase{
		{name: "HGX: Gen5 x16 and the pair's Device Control", dir: netFixture("hgx-8gpu-healthy"), status: report.Pass,
			findings: refsOf("gpu.pcie/link-expected", hgxGPUs),
			contains: []string{"32.0 GT/s x16", "mlx5_0 0000:18:00.0: MaxReadReq 4096 bytes, MaxPayload 256 bytes, relaxed ordering on"}},
	})
}

func TestGPUFailureFixtures(t *testing.T) {
	runNetCases(t, "gpu.peer_memory", []netCase{
		{name: "no nvidia_peermem, proprietary driver", dir: netFixture("hgx-no-peermem"), status: report.Fail, exit: 24, rootCause: "gpu.peer_memory",
			findings: []findingRef{{"gpu.peer_memory/no-path", ""}, {"gpu.peer_memory/nvidia-no-path", "nvidia"}},
			contains: []string{"535.154.05 is the proprietary kernel module", "`modprobe nvidia-peermem`"}},
	})
	runNetCases(t, "gpu.acs", []netCase{
		{name: "ACS redirect on GPU2's switch", dir: netFixture("hgx-acs-redirect"), status: report.Fail, exit: 25, rootCause: "gpu.acs",
			findings: refsWith(refsOf("gpu.acs/no-redirect", hgxGPUs), 2, findingRef{"gpu.acs/redirect", "0000:52:00.0"}),
			contains: []string{"bridge 0000:4e:01.0 ACSCtl 0x001d: ReqRedir+ CmpltRedir+ on",
				"`setpci -s 0000:4e:01.0 ECAP_ACS+0x6.w=0000; setpci -s 0000:4e:00.0 ECAP_ACS+0x6.w=0000`"},
			lacks: []string{"0000:17:01.0 ECAP_ACS"}},
	})
	runNetCases(t, "gpu.nic_affinity", []netCase{
		{name: "GPU3's NIC on the other socket", dir: netFixture("hgx-nic-across-socket"), status: report.Fail, exit: 23, rootCause: "gpu.nic_affinity",
			findings: refsWith(refsOf("gpu.nic_affinity/paired", hgxGPUs), 3, findingRef{"gpu.nic_affinity/across-sockets", "0000:61:00.0"}),
			contains: []string{"nearest free RDMA NIC mlx5_3 (0000:b1:00.0) is on NUMA node 1", "under GPU3's PCIe switch (or at least on NUMA node 0)"}},
	})
}

// refsWith is refs with its i-th finding replaced by f: one unit differs
// from the rest.
func refsWith(refs []findingRef, i int, f findingRef) []findingRef {
	refs[i] = f
	return refs
}

// A GPU host without RDMA NIC: the pair checks skip saying so, the
// inventory still lists the GPUs; every other fixture has no GPU and
// every GPU check skips there.
func TestGPUChecksSkip(t *testing.T) {
	r := hwRun(t, netFixture("gpu-no-rdma-nic"), checks.Options{})
	for _, id := range gpuIDs {
		if c := hwResult(t, r, id); c.Status != report.Skip || !strings.Contains(c.Summary, "4 GPU(s) but no RDMA NIC") {
			t.Errorf("%s: %s %s", id, c.Status, c.Summary)
		}
	}
	if len(r.Inventory.GPUs) != 4 || r.Inventory.GPUs[0].Product != "L40S" || r.ExitCode != 10 {
		t.Errorf("inventory GPUs %+v, exit %d", r.Inventory.GPUs, r.ExitCode)
	}
	for _, name := range []string{"cx5-roce-healthy", "cx6-ib-healthy", "aws-efa", "rxe-softroce", "mlx5-vfio-passthrough"} {
		r := hwRun(t, netFixture(name), checks.Options{})
		for _, id := range gpuIDs {
			if c := hwResult(t, r, id); c.Status != report.Skip || !strings.HasPrefix(c.Summary, "no GPU on this host") {
				t.Errorf("%s %s: %s %s", name, id, c.Status, c.Summary)
			}
		}
	}
}

// Without CAP_SYS_ADMIN the kernel shows 64 bytes of configuration space:
// the ACS registers are unknown, and the check says it needs root.
func TestGPUUnprivilegedConfigNeedsRoot(t *testing.T) {
	h := sysfstest.HGXH100()
	h.GPU.Unprivileged = true
	dir := hwWrite(t, sysfstest.Build(h))
	r := hwRun(t, dir, checks.Options{})
	c := hwResult(t, r, "gpu.acs")
	if c.Status != report.Error || !strings.Contains(c.Summary, "only 64 bytes of configuration space readable — reading ACS needs root") ||
		!strings.Contains(c.Remedy, "Run rdmadoctor as root") || r.ExitCode != report.ExitUnknown {
		t.Fatalf("%s %s\n%s (exit %d)", c.Status, c.Summary, c.Remedy, r.ExitCode)
	}
	p := hwResult(t, r, "gpu.pcie")
	if p.Status != report.Pass || !strings.Contains(strings.Join(p.Details, "\n"), "MaxReadReq and relaxed ordering need root") {
		t.Fatalf("gpu.pcie %s %v", p.Status, p.Details)
	}
}

// A translating IOMMU on bare metal fails; the same in a VM's guest warns.
func TestGPUIOMMUTranslated(t *testing.T) {
	h := sysfstest.HGXH100()
	h.GPU.GroupType = "DMA-FQ"
	h.GPU.Cmdline = "BOOT_IMAGE=/boot/vmlinuz-5.15.0-1042-nvidia ro intel_iommu=on"
	c := hwRunOne(t, hwWrite(t, sysfstest.Build(h)), "gpu.iommu", checks.Options{})
	if c.Status != report.Fail || !strings.Contains(c.Summary, "GPU0 0000:1b:00.0 (group") || !strings.Contains(c.Summary, "DMA-FQ") ||
		!strings.Contains(c.Remedy, "`iommu=pt`") {
		t.Fatalf("%s %s\n%s", c.Status, c.Summary, c.Remedy)
	}
	v := sysfstest.GPUVM()
	v.GPU.IOMMUUnits, v.GPU.GroupType = []string{"dmar0"}, "DMA"
	c = hwRunOne(t, hwWrite(t, sysfstest.Build(v)), "gpu.iommu", checks.Options{})
	if c.Status != report.Warn || !strings.Contains(c.Summary, "virtual machine whose own IOMMU translates") {
		t.Fatalf("VM: %s %s", c.Status, c.Summary)
	}
}

// DMA-BUF alone is a path: no nvidia_peermem with the open modules passes
// (NVIDIA recommends DMA-BUF); an old rdma-core takes that path away.
func TestGPUPeerMemoryDMABUFOnly(t *testing.T) {
	h := sysfstest.HGXH100()
	h.Modules = without(h.Modules, "nvidia_peermem")
	c := hwRunOne(t, hwWrite(t, sysfstest.Build(h)), "gpu.peer_memory", checks.Options{})
	if c.Status != report.Pass || !strings.Contains(c.Summary, "DMA-BUF") || !strings.Contains(strings.Join(c.Details, "\n"), "missing: nvidia_peermem not loaded") {
		t.Fatalf("%s %s %v", c.Status, c.Summary, c.Details)
	}
	h.Kernel = "5.4.0-150-generic"
	c = hwRunOne(t, hwWrite(t, sysfstest.Build(h)), "gpu.peer_memory", checks.Options{})
	if c.Status != report.Fail || !strings.Contains(c.Summary, "kernel 5.4.0-150-generic < 5.12") {
		t.Fatalf("old kernel: %s %s", c.Status, c.Summary)
	}
}

func without(s []string, drop string) []string {
	var out []string
	for _, v := range s {
		if v != drop {
			out = append(out, v)
		}
	}
	return out
}

// With nvidia_peermem absent and the NVIDIA driver's version unreadable,
// DMA-BUF cannot be told: an error, not a fault.
func TestGPUPeerMemoryUnknownDriverIsError(t *testing.T) {
	h := sysfstest.HGXH100()
	h.Modules = without(h.Modules, "nvidia_peermem")
	tree := sysfstest.Build(h)
	tree.Remove("/proc/driver/nvidia/version")
	c := hwRunOne(t, hwWrite(t, tree), "gpu.peer_memory", checks.Options{})
	if c.Status != report.Error || !strings.Contains(c.Summary, "could not be told") || !strings.Contains(c.Remedy, "`modprobe nvidia-peermem`") {
		t.Fatalf("%s %s\n%s", c.Status, c.Summary, c.Remedy)
	}
}
