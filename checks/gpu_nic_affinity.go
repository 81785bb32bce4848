package checks

import (
	"context"
	"fmt"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

func init() {
	register(Check{
		ID: "gpu.nic_affinity", Code: 23, Level: 1,
		Title: "each GPU has an RDMA NIC close to it on PCIe (same switch where the platform has one)",
		Explain: Explanation{
			Judges: "Finds the NVIDIA (0x10de) and AMD (0x1002) GPUs by PCI class (VGA 0x0300, 3D 0x0302, display 0x0380, processing accelerator 0x1200) " +
				"and computes, for every GPU and RDMA NIC, their relation from the resolved /sys/bus/pci/devices paths in the classes of " +
				"`nvidia-smi topo -m`: PIX (one PCIe switch: a common bridge with at most one bridge below it on each side), PXB (several switches), " +
				"PHB (same host bridge, different root ports), NODE (different host bridges, same numa_node), SYS (different numa_node). Each GPU is " +
				"paired with the nearest NIC left, nearest pairs first, a NIC shared by at most ceil(GPUs/NICs) GPUs. On bare metal a GPU whose NIC " +
				"is SYS fails; one at PHB/NODE warns when other GPUs of the host have a NIC under their switch (the platform allows better) and " +
				"passes otherwise. In a VM (the CPU's hypervisor flag) the topology is the hypervisor's invention and is shown, not judged. " +
				"Sources: NVIDIA's GPUDirect RDMA guide (\"the two devices must share the same upstream PCI Express root complex\"), NCCL's " +
				"NCCL_NET_GDR_LEVEL (GPUDirect RDMA is used up to PXB by default, never across SYS), AMD's ROCmRDMA notes (same root complex recommended).",
			Why: "NCCL, UCX and NVSHMEM send each GPU's traffic through the NIC nearest to it. When that NIC is across the socket interconnect, " +
				"GPUDirect RDMA is not used: every byte is staged through host memory and crosses UPI/Infinity Fabric, and the all-reduce bandwidth " +
				"of the whole job drops to that GPU's.",
			Failures: []Failure{
				{report.Fail, "a GPU's nearest free RDMA NIC is on another NUMA node (SYS)",
					"Move the NIC (or the GPU) so that each GPU has a NIC under its own PCIe switch, as the platform's slot guide pairs them; until then " +
						"NCCL stages that GPU's traffic through host memory."},
				{report.Warn, "a GPU's NIC is only at PHB/NODE while other GPUs have one under their switch",
					"Check the cabling and slot plan against the platform's (nvidia-smi topo -m shows the same classes)."},
				{report.Error, "a GPU's or NIC's PCI path could not be read", "Run where /sys is readable; by hand: `nvidia-smi topo -m` and `lspci -tv`."},
				{report.Skip, "no GPU, or no RDMA NIC", "Nothing to do."},
			},
		},
		Run: runGPUNICAffinity,
	})
}

func runGPUNICAffinity(_ context.Context, env *Env) Result {
	if r, stop := gpuPrecondition(env, true); stop {
		return r
	}
	g := env.GPUs()
	best := sysfs.RelUnknown
	for i := range g.GPUs {
		if j := g.Paired[i]; j >= 0 && g.Matrix[i][j].rel < best {
			best = g.Matrix[i][j].rel
		}
	}
	var vs []verdict
	for i := range g.GPUs {
		vs = append(vs, judgeAffinity(g, i, best))
	}
	r := combineUnits(vs, "GPU", "GPUs")
	if r.Status == report.Pass {
		r.Summary = fmt.Sprintf("%d GPU(s), each paired with an RDMA NIC: %s", len(g.GPUs), g.pairedTally())
		if g.Virt.Guest() {
			r.Summary += " (virtual topology, not judged)"
		}
	}
	r.Details = append(r.Details, g.matrixLines()...)
	r.Expected = "each GPU's NIC under its PCIe switch (PIX/PXB), never across sockets (SYS)"
	var units []any
	for _, v := range vs {
		units = append(units, v.evidence)
	}
	r.Evidence = map[string]any{"gpus": units, "virtual_machine": g.Virt.Guest(), "nics": len(g.NICs)}
	return r
}

// judgeAffinity judges one GPU's pairing; best is the nearest pairing any
// GPU of the host has, which says what the platform allows.
func judgeAffinity(g *gpuSurvey, i int, best sysfs.PCIRelation) verdict {
	gpu := g.GPUs[i]
	n := g.NICs[g.Paired[i]]
	l := g.Matrix[i][g.Paired[i]]
	name := fmt.Sprintf("%s %s (%s)", gpu.Name, gpu.Fn.Address, gpu.Product)
	v := verdict{line: fmt.Sprintf("%s: %s %s %s (%s)", name, nicName(n), n.Fn.Address, l.rel, l.why)}
	v.evidence = map[string]any{"gpu": gpu.Fn.Address, "nic": n.Fn.Address, "rdma_device": nicName(n), "relation": l.rel.String(), "path": l.why}
	switch {
	case l.rel == sysfs.RelUnknown:
		v.status = report.Error
		v.remedy = "Run where /sys is readable; by hand: `nvidia-smi topo -m` and `lspci -tv`."
	case g.Virt.Guest():
		v.status = report.Pass
		v.line += " — virtual topology: the hypervisor's placement decides, check it on the host"
	case l.rel == sysfs.RelSYS:
		v.status = report.Fail
		v.line = fmt.Sprintf("%s on NUMA node %d: nearest free RDMA NIC %s (%s) is on NUMA node %d — SYS, %s (%s)",
			name, gpu.Fn.NUMANode, nicName(n), n.Fn.Address, n.Fn.NUMANode, l.rel.Meaning(), l.why)
		v.remedy = fmt.Sprintf("Put an RDMA NIC under %s's PCIe switch (or at least on NUMA node %d), as the platform's slot guide pairs GPUs and NICs; "+
			"check `nvidia-smi topo -m` (or `lspci -tv`) after the move. Until then NCCL does not use GPUDirect RDMA across sockets "+
			"(NCCL_NET_GDR_LEVEL) and stages %s's traffic through host memory.", gpu.Name, gpu.Fn.NUMANode, gpu.Name)
	case l.rel > sysfs.RelPXB && best <= sysfs.RelPXB:
		v.status = report.Warn
		v.line += fmt.Sprintf(" — other GPUs here have a NIC at %s", best)
		v.remedy = "Compare the NIC slots and cabling with the platform's GPU–NIC pairing (`nvidia-smi topo -m`): this GPU's rail has no NIC under its switch; " +
			"NCCL uses GPUDirect RDMA up to PXB by default (NCCL_NET_GDR_LEVEL)."
	default:
		v.status = report.Pass
	}
	return v
}
