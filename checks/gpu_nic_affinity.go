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
				"is SYS fails when its own NUMA node has an RDMA NIC (the pairing or the slots are wrong), and warns when its node has none (the " +
				"platform's wiring: the traffic crosses the inter-socket link); one at PHB/NODE warns when other GPUs of the host have a NIC under " +
				"their switch (the platform allows better) and passes otherwise. A class of the expectations file that sets gpu_nic_max_distance " +
				"fails every GPU whose NIC is farther than that class. In a VM (the CPU's hypervisor flag) the topology is the hypervisor's invention and is shown, not judged. " +
				"Where the hypervisor hides the PCIe path altogether (Hyper-V/Azure: each GPU and NIC on its own vPCI root bus below its VMBus " +
				"device) the guest knows only NUMA nodes (numa_node, which pci-hyperv takes from the host) and the pairing the VM publishes for " +
				"NCCL: the topology file /etc/nccl.conf's NCCL_TOPO_FILE names, else the file in /opt/microsoft that lists exactly this VM's GPUs " +
				"(Azure's HPC images install ndv4-topo.xml, ndv5-topo.xml, …), a GPU's k-th place below a virtual bridge pairing it with the k-th " +
				"NIC there. A GPU with its published NIC on its NUMA node passes; one whose published NIC this VM does not have fails with the " +
				"platform's fix (redeploy, a support case); without a published pairing a NIC on the GPU's NUMA node passes and one on another " +
				"node warns. What the path hides (switches, slots) is said, never judged, and a class's gpu_nic_max_distance is not applied there. " +
				"Sources: NVIDIA's GPUDirect RDMA guide (\"the two devices must share the same upstream PCI Express root complex\"), NCCL's " +
				"NCCL_NET_GDR_LEVEL (GPUDirect RDMA is used up to PXB by default, never across SYS), AMD's ROCmRDMA notes (same root complex recommended).",
			Why: "NCCL, UCX and NVSHMEM send each GPU's traffic through the NIC nearest to it. When that NIC is across the socket interconnect, " +
				"GPUDirect RDMA is not used: every byte is staged through host memory and crosses UPI/Infinity Fabric, and the all-reduce bandwidth " +
				"of the whole job drops to that GPU's.",
		},
		Run: runGPUNICAffinity,
	})
}

// gpu.nic_affinity's findings, one per GPU (its PCI address): the pair's
// line names the GPU, its NIC and their relation.
const affinityPair = "{gpu} {gpu_addr} ({product}): {nic} {nic_addr} {relation} ({path})"

var (
	affinityPre    = declareGPUPre("gpu.nic_affinity")
	affinityPaired = declare(Finding{ID: "gpu.nic_affinity/paired", Status: report.Pass,
		When:    "the GPU's NIC is as near as the platform allows (under its switch, or no GPU of the host has better)",
		Message: affinityPair})
	affinityVirtual = declare(Finding{ID: "gpu.nic_affinity/virtual-topology", Status: report.Pass,
		When:    "in a VM: the topology is the hypervisor's invention, shown and not judged",
		Message: affinityPair + " — virtual topology: the hypervisor's placement decides, check it on the host"})
	affinityPublishedPair = declare(Finding{ID: "gpu.nic_affinity/published-pair", Status: report.Pass,
		When: "the hypervisor hides the PCIe path (a Hyper-V/Azure vPCI bus): the GPU's NIC is the one the VM's published NCCL topology " +
			"file pairs it with, on the GPU's NUMA node",
		Message: "{gpu} {gpu_addr} ({product}): {nic} {nic_addr}, paired by {file} (both below its virtual bridge {bridge}), NUMA node {gpu_numa} — " +
			"the hypervisor hides the PCIe path, so the switch between them is the platform's and not judged"})
	affinityPublishedMissing = declare(Finding{ID: "gpu.nic_affinity/published-nic-missing", Status: report.Fail,
		When: "the hypervisor hides the PCIe path and the VM's published NCCL topology file pairs the GPU with a NIC this VM does not have " +
			"(a VF the platform did not attach)",
		Message: "{gpu} {gpu_addr} ({product}): {file} pairs it with the NIC at {published_nic} (below its virtual bridge {bridge}), which this VM " +
			"does not have; it falls back to {nic} {nic_addr} — {path}",
		Fix: "The platform did not attach the VF at {published_nic} (host maintenance, or a VF that failed), and nothing in the guest can attach " +
			"it: deallocate and start the VM again (a redeploy moves it to a healthy host); if the NIC is still missing, open a support case " +
			"with the cloud provider (on Azure a support request, or a report through Guest Health Reporting) naming this VM and the missing address. " +
			"Until then {gpu}'s traffic goes through {nic}, off its rail."})
	affinityGuestSameNUMA = declare(Finding{ID: "gpu.nic_affinity/same-numa-node", Status: report.Pass,
		When: "the hypervisor hides the PCIe path and the VM publishes no pairing: the GPU's NIC is on its NUMA node, the nearest a guest can tell",
		Message: affinityPair + " — the hypervisor hides the PCIe path: same NUMA node {gpu_numa} is what the guest can see; whether they " +
			"share a switch is not judged"})
	affinityGuestOtherNUMA = declare(Finding{ID: "gpu.nic_affinity/guest-other-numa", Status: report.Warn,
		When: "the hypervisor hides the PCIe path: the GPU's NIC is on another NUMA node, where the VM's placement put it",
		Message: "{gpu} {gpu_addr} ({product}) on NUMA node {gpu_numa}: its NIC {nic} ({nic_addr}) is on NUMA node {nic_numa} — {path}; " +
			"its RDMA traffic crosses the inter-socket link",
		Fix: "The hypervisor placed the devices and the guest cannot move them. If this VM size pairs every GPU with a NIC on its NUMA node " +
			"(its published NCCL topology file, the size's documentation), a device is missing or misplaced: deallocate and start the VM " +
			"again (redeploy), and open a support case with the cloud provider if it persists. Otherwise this is the size's wiring: NCCL " +
			"stages {gpu}'s traffic through host memory and its bandwidth is bounded by the inter-socket link."})
	affinityUnknown = declare(Finding{ID: "gpu.nic_affinity/path-unreadable", Status: report.Error,
		When:    "the GPU's or its NIC's PCI path could not be read, so their relation is unknown",
		Message: affinityPair,
		Fix:     "Run where /sys is readable; by hand: `nvidia-smi topo -m` and `lspci -tv`."})
	affinityAcrossSockets = declare(Finding{ID: "gpu.nic_affinity/across-sockets", Status: report.Fail,
		When: "bare metal: the GPU's nearest free RDMA NIC is on another NUMA node (SYS)",
		Message: "{gpu} {gpu_addr} ({product}) on NUMA node {gpu_numa}: nearest free RDMA NIC {nic} ({nic_addr}) is on NUMA node {nic_numa} — " +
			"SYS, {meaning} ({path})",
		Fix: "Put an RDMA NIC under {gpu}'s PCIe switch (or at least on NUMA node {gpu_numa}), as the platform's slot guide pairs GPUs and NICs; " +
			"check `nvidia-smi topo -m` (or `lspci -tv`) after the move. Until then NCCL does not use GPUDirect RDMA across sockets " +
			"(NCCL_NET_GDR_LEVEL) and stages {gpu}'s traffic through host memory."})
	affinityNoNICOnSocket = declare(Finding{ID: "gpu.nic_affinity/no-nic-on-socket", Status: report.Warn,
		When: "bare metal: the GPU's NIC is on another NUMA node (SYS) and the GPU's own node has no RDMA NIC — the platform's wiring",
		Message: "{gpu} {gpu_addr} ({product}) on NUMA node {gpu_numa}, which has no RDMA NIC: its NIC {nic} ({nic_addr}) is on NUMA node {nic_numa} — " +
			"SYS, {meaning} ({path}); its RDMA traffic crosses the inter-socket link (UPI/xGMI) and NCCL does not use GPUDirect RDMA there",
		Fix: "Nothing is misplaced: this platform wires no RDMA NIC to NUMA node {gpu_numa}, so its GPUs reach the network across the " +
			"inter-socket link, staged through host memory (NCCL uses GPUDirect RDMA only up to PXB by default, NCCL_NET_GDR_LEVEL), and their " +
			"bandwidth is bounded by that link. Where the chassis has a free slot on NUMA node {gpu_numa}, an RDMA NIC there gives them a direct " +
			"path; to require one, set gpu_nic_max_distance in the host's class of the expectations file."})
	affinityFartherThanExpected = declare(Finding{ID: "gpu.nic_affinity/farther-than-expected", Status: report.Fail,
		When:    "bare metal: the host's class in the expectations file sets gpu_nic_max_distance and the GPU's NIC is farther",
		Message: affinityPair + " — farther than {expected} ({cite})",
		Fix: "Give {gpu} an RDMA NIC at {expected} or nearer, as its class demands ({cite}): a NIC in a slot of {gpu}'s socket, under " +
			"its PCIe switch where the platform has one, as its slot guide pairs GPUs and NICs; check `nvidia-smi topo -m` after the move. " +
			"If the class is wrong for this host, correct that line."})
	affinityFar = declare(Finding{ID: "gpu.nic_affinity/nic-not-under-switch", Status: report.Warn,
		When:    "bare metal: the GPU's NIC is only at PHB/NODE while other GPUs of the host have one under their switch",
		Message: affinityPair + " — other GPUs here have a NIC at {best}",
		Fix: "Compare the NIC slots and cabling with the platform's GPU–NIC pairing (`nvidia-smi topo -m`): this GPU's rail has no NIC under its switch; " +
			"NCCL uses GPUDirect RDMA up to PXB by default (NCCL_NET_GDR_LEVEL)."})
)

// gpu.nic_affinity's headlines: the summary when every GPU is well paired.
const (
	affinityPassHead    headline = "{count} GPU(s), each paired with an RDMA NIC: {tally}"
	affinityVirtualHead          = affinityPassHead + " (virtual topology, not judged)"
	// Where the hypervisor hides the PCIe path the relations are NUMA
	// nodes only: the heads say what was judged.
	affinityPublishedHead headline = "{count} GPU(s), each paired with the RDMA NIC {file} names for it, on its NUMA node " +
		"(the hypervisor hides the PCIe path)"
	affinityHiddenHead headline = "{count} GPU(s), each paired with an RDMA NIC on its NUMA node (the hypervisor hides the PCIe path; " +
		"no published pairing found, so switch placement is not judged)"
)

func runGPUNICAffinity(_ context.Context, env *Env) Result {
	if r, stop := gpuPrecondition(env, affinityPre); stop {
		return r
	}
	g := env.GPUs()
	best := sysfs.RelUnknown
	for i := range g.GPUs {
		if j := g.Paired[i]; j >= 0 && g.Matrix[i][j].rel < best {
			best = g.Matrix[i][j].rel
		}
	}
	limit := affinityLimitOf(env)
	var vs []verdict
	for i := range g.GPUs {
		vs = append(vs, judgeAffinity(g, i, best, limit))
	}
	r := combineUnits(vs, "GPU", "GPUs")
	hidden := g.hiddenPath()
	if r.Status == report.Pass {
		head := affinityPassHead
		switch {
		case hidden && g.Topology != nil:
			head = affinityPublishedHead
		case hidden:
			head = affinityHiddenHead
		case g.Virt.Guest():
			head = affinityVirtualHead
		}
		r.Summary = head.render(Slots{"count": fmt.Sprint(len(g.GPUs)), "tally": g.pairedTally(), "file": g.topologyFile()})
	}
	r.Details = append(r.Details, g.matrixLines()...)
	r.Expected = "each GPU's NIC under its PCIe switch (PIX/PXB), never across sockets (SYS) where the GPU's socket has an RDMA NIC"
	if hidden {
		r.Details = append(r.Details, g.TopologyNotes...)
		r.Expected = "the hypervisor hides the PCIe path: each GPU's NIC on its NUMA node, the one the VM's published topology pairs it with"
	}
	if limit.set {
		r.Expected += "; at most " + limit.rel.String() + " (" + limit.cite + ")"
	}
	var units []any
	for _, v := range vs {
		units = append(units, v.evidence)
	}
	r.Evidence = map[string]any{"gpus": units, "virtual_machine": g.Virt.Guest(), "nics": len(g.NICs)}
	if hidden {
		r.Evidence["pcie_path_hidden"], r.Evidence["published_topology"] = true, g.topologyFile()
	}
	return r
}

// topologyFile is the published topology file read, "" when none.
func (g *gpuSurvey) topologyFile() string {
	if g.Topology == nil {
		return ""
	}
	return g.Topology.File
}

// affinityLimit is the farthest pair the host's class accepts
// (gpu_nic_max_distance) and the line that says so; set is false when the
// class says nothing.
type affinityLimit struct {
	rel  sysfs.PCIRelation
	cite string
	set  bool
}

func affinityLimitOf(env *Env) affinityLimit {
	v := env.Expect.ExpectedGPUNICMaxDistance()
	if v == nil {
		return affinityLimit{}
	}
	for r := sysfs.RelPIX; r < sysfs.RelUnknown; r++ {
		if r.String() == v.V {
			return affinityLimit{rel: r, cite: v.Cite(), set: true}
		}
	}
	return affinityLimit{}
}

// nicOnNode reports whether an RDMA NIC of the host is on NUMA node node.
func (g *gpuSurvey) nicOnNode(node int) bool {
	for _, n := range g.NICs {
		if n.Fn.HasNUMA && n.Fn.NUMANode == node {
			return true
		}
	}
	return false
}

// judgeAffinity judges one GPU's pairing; best is the nearest pairing any
// GPU of the host has, which says what the platform allows, and limit the
// farthest its class accepts.
func judgeAffinity(g *gpuSurvey, i int, best sysfs.PCIRelation, limit affinityLimit) verdict {
	gpu := g.GPUs[i]
	n := g.NICs[g.Paired[i]]
	l := g.Matrix[i][g.Paired[i]]
	slots := Slots{"gpu": gpu.Name, "gpu_addr": gpu.Fn.Address, "product": gpu.Product, "nic": nicName(n), "nic_addr": n.Fn.Address,
		"relation": l.rel.String(), "path": l.why}
	// The NUMA nodes are named only by the findings about them: slots are
	// part of the report.
	numa := func(s Slots) Slots {
		return s.with("gpu_numa", fmt.Sprint(gpu.Fn.NUMANode), "nic_numa", fmt.Sprint(n.Fn.NUMANode), "meaning", l.rel.Meaning())
	}
	var v verdict
	switch {
	case l.rel == sysfs.RelUnknown:
		v = affinityUnknown.unit(gpu.Fn.Address, slots)
	case l.hidden:
		v = judgeHiddenAffinity(g, i, numa(slots))
	case g.Virt.Guest():
		v = affinityVirtual.unit(gpu.Fn.Address, slots)
	case l.rel == sysfs.RelSYS && g.nicOnNode(gpu.Fn.NUMANode):
		v = affinityAcrossSockets.unit(gpu.Fn.Address, numa(slots))
	case limit.set && l.rel > limit.rel:
		v = affinityFartherThanExpected.unit(gpu.Fn.Address, slots.with("expected", limit.rel.String(), "cite", limit.cite))
	case l.rel == sysfs.RelSYS:
		v = affinityNoNICOnSocket.unit(gpu.Fn.Address, numa(slots))
	case l.rel > sysfs.RelPXB && best <= sysfs.RelPXB:
		slots["best"] = best.String()
		v = affinityFar.unit(gpu.Fn.Address, slots)
	default:
		v = affinityPaired.unit(gpu.Fn.Address, slots)
	}
	v.evidence = map[string]any{"gpu": gpu.Fn.Address, "nic": n.Fn.Address, "rdma_device": nicName(n), "relation": l.rel.String(), "path": l.why}
	return v
}

// judgeHiddenAffinity judges a GPU whose PCIe path to its NIC the
// hypervisor hides (Hyper-V's vPCI): on what a guest can see, the pairing
// the VM publishes for NCCL and the NUMA nodes. Nothing here can be fixed
// in the guest, so the fixes are the platform's: redeploy, ask the
// provider.
func judgeHiddenAffinity(g *gpuSurvey, i int, slots Slots) verdict {
	gpu, n := g.GPUs[i], g.NICs[g.Paired[i]]
	l := g.Matrix[i][g.Paired[i]]
	var p *publishedPair
	if g.Published != nil {
		p = g.Published[i]
	}
	switch {
	case p != nil && p.index < 0:
		return affinityPublishedMissing.unit(gpu.Fn.Address, slots.with("file", g.Topology.File, "published_nic", p.nic, "bridge", p.bridge))
	case !gpu.Fn.HasNUMA || !n.Fn.HasNUMA:
		return affinityVirtual.unit(gpu.Fn.Address, slots)
	case l.rel == sysfs.RelSYS:
		return affinityGuestOtherNUMA.unit(gpu.Fn.Address, slots)
	case p != nil && p.index == g.Paired[i]:
		return affinityPublishedPair.unit(gpu.Fn.Address, slots.with("file", g.Topology.File, "bridge", p.bridge))
	}
	return affinityGuestSameNUMA.unit(gpu.Fn.Address, slots)
}
