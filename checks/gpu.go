package checks

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// The GPU checks (gpu.*) judge whether a GPU host is ready for GPUDirect
// RDMA: the NIC writing straight into GPU memory over PCIe. They share one
// picture of the host, read once: the GPUs, the RDMA NICs they can pair
// with, the PCIe relation of every pair and the NIC each GPU would use.

// gpuProducts names the GPUs the fixtures and the common fleets carry.
var gpuProducts = map[[2]uint16]string{
	{0x10de, 0x2330}: "H100 SXM5 80GB", {0x10de, 0x2331}: "H100 PCIe", {0x10de, 0x2335}: "H200 SXM5 141GB",
	{0x10de, 0x20b0}: "A100 SXM4 40GB", {0x10de, 0x20b2}: "A100 SXM4 80GB", {0x10de, 0x20b5}: "A100 PCIe 80GB",
	{0x10de, 0x26b9}: "L40S", {0x10de, 0x2901}: "B200",
	{0x1002, 0x74a1}: "Instinct MI300X", {0x1002, 0x740f}: "Instinct MI210", {0x1002, 0x7408}: "Instinct MI250X",
}

// GPU is one GPU function.
type GPU struct {
	Fn      sysfs.PCIFunction
	Name    string // "GPU0", in PCI address order as nvidia-smi and rocm-smi number them
	Product string
}

func gpuProduct(fn sysfs.PCIFunction) string {
	if p, ok := gpuProducts[[2]uint16{fn.Vendor, fn.Device}]; ok {
		return p
	}
	v := "NVIDIA"
	if fn.Vendor == sysfs.VendorAMD {
		v = "AMD"
	}
	return fmt.Sprintf("%s GPU 0x%04x", v, fn.Device)
}

// gpuLink is one GPU–NIC pair and their relation; hidden when one of
// them is on a paravirtual root bus, so the relation is their NUMA nodes
// only.
type gpuLink struct {
	rel    sysfs.PCIRelation
	why    string
	hidden bool
}

// publishedPair is the NIC a GPU's published topology file pairs it with:
// the NIC's address, the virtual bridge the file puts both below, and
// the NIC's index in gpuSurvey.NICs (-1: this host has no such NIC).
type publishedPair struct {
	nic, bridge string
	index       int
}

// gpuSurvey is the GPU picture of the host.
type gpuSurvey struct {
	GPUs   []GPU
	NICs   []NIC       // RDMA NIC functions a GPU can pair with
	Matrix [][]gpuLink // [gpu][nic]
	// Paired is, per GPU, the index in NICs of the NIC it would use, -1
	// when there is none.
	Paired []int
	Virt   sysfs.Virtualization
	// Topology is the GPU–NIC pairing the host publishes for NCCL (read
	// only when the hypervisor hides the PCIe path); TopologyNotes say
	// which files were passed over. Published is, per GPU, the pair the
	// file names, nil when there is no file or it does not list the GPU.
	Topology      *sysfs.NCCLTopology
	TopologyNotes []string
	Published     []*publishedPair
}

// hiddenPath reports whether the hypervisor hides the PCIe path of any
// GPU–NIC pair: the pairs are then judged by NUMA node and the published
// pairing, not by the tree.
func (g *gpuSurvey) hiddenPath() bool {
	for _, row := range g.Matrix {
		for _, l := range row {
			if l.hidden {
				return true
			}
		}
	}
	return false
}

// GPUs returns the host's GPU survey, read once per run.
func (e *Env) GPUs() *gpuSurvey {
	e.gpuOnce.Do(func() { e.gpus = takeGPUSurvey(e.Host, e.Survey()) })
	return e.gpus
}

func takeGPUSurvey(h *sysfs.Host, s *Survey) *gpuSurvey {
	g := &gpuSurvey{}
	for _, fn := range s.PCI {
		if sysfs.IsGPU(fn) {
			g.GPUs = append(g.GPUs, GPU{Fn: fn, Product: gpuProduct(fn)})
		}
	}
	if len(g.GPUs) == 0 {
		return g
	}
	sort.Slice(g.GPUs, func(i, j int) bool { return g.GPUs[i].Fn.Address < g.GPUs[j].Fn.Address })
	for i := range g.GPUs {
		g.GPUs[i].Name = fmt.Sprintf("GPU%d", i)
	}
	g.Virt = h.ReadVirtualization()
	for _, n := range s.NICs {
		// A VF whose PF is on this host shares the PF's place in the tree;
		// a function handed to a VM (vfio-pci) is not this host's to use.
		if n.Bound && n.Fn.PhysFn == "" {
			g.NICs = append(g.NICs, n)
		}
	}
	g.Matrix = make([][]gpuLink, len(g.GPUs))
	for i, gpu := range g.GPUs {
		g.Matrix[i] = make([]gpuLink, len(g.NICs))
		for j, n := range g.NICs {
			rel, why := sysfs.Relation(gpu.Fn, n.Fn)
			_, hg := sysfs.HiddenPCIePath(gpu.Fn)
			_, hn := sysfs.HiddenPCIePath(n.Fn)
			g.Matrix[i][j] = gpuLink{rel, why, hg || hn}
		}
	}
	if g.hiddenPath() {
		g.readPublished(h)
	}
	g.pair()
	return g
}

// readPublished reads the pairing the host publishes for NCCL and gives
// each GPU it lists the NIC the file pairs it with: the GPU's k-th place
// among its bridge's GPUs is the k-th NIC there (one each on ND H100 v5;
// two GPUs and two NICs per bridge on ND A100 v4).
func (g *gpuSurvey) readPublished(h *sysfs.Host) {
	t, found, notes := h.ReadNCCLTopology(gpuAddresses(g))
	g.TopologyNotes = notes
	if !found {
		return
	}
	g.Topology = &t
	g.Published = make([]*publishedPair, len(g.GPUs))
	for i, gpu := range g.GPUs {
		grp, k, ok := t.GroupOf(gpu.Fn.Address)
		if !ok || k >= len(grp.NICs) {
			continue
		}
		p := &publishedPair{nic: grp.NICs[k], bridge: grp.Bridge, index: -1}
		for j, n := range g.NICs {
			if n.Fn.Address == p.nic {
				p.index = j
			}
		}
		g.Published[i] = p
	}
}

// pair gives each GPU the NIC it would use, nearest pairs first across
// the whole host, each NIC shared by at most ceil(GPUs/NICs) GPUs — the
// one-NIC-per-GPU rails of an HGX node, or two GPUs per NIC where there
// are half as many. A GPU whose own switch-local NIC is gone gets what is
// left, which is how a misplaced NIC shows.
func (g *gpuSurvey) pair() {
	g.Paired = make([]int, len(g.GPUs))
	for i := range g.Paired {
		g.Paired[i] = -1
	}
	if len(g.NICs) == 0 {
		return
	}
	capacity := (len(g.GPUs) + len(g.NICs) - 1) / len(g.NICs)
	type cand struct{ gpu, nic int }
	var cands []cand
	for i := range g.GPUs {
		for j := range g.NICs {
			cands = append(cands, cand{i, j})
		}
	}
	sort.SliceStable(cands, func(a, b int) bool {
		return g.Matrix[cands[a].gpu][cands[a].nic].rel < g.Matrix[cands[b].gpu][cands[b].nic].rel
	})
	used := make([]int, len(g.NICs))
	for i, p := range g.Published {
		if p != nil && p.index >= 0 {
			g.Paired[i] = p.index
			used[p.index]++
		}
	}
	for _, c := range cands {
		if g.Paired[c.gpu] < 0 && used[c.nic] < capacity {
			g.Paired[c.gpu] = c.nic
			used[c.nic]++
		}
	}
}

// nicName is how the matrix names a NIC: its RDMA device, else its address.
func nicName(n NIC) string {
	if len(n.Fn.RDMADevs) > 0 {
		return n.Fn.RDMADevs[0]
	}
	return n.Fn.Address
}

// gpuPre are a GPU check's findings about what it needs before judging:
// a readable PCI bus, a GPU, an RDMA NIC to pair with. Every GPU check
// declares its own (declareGPUPre), under its own ID.
type gpuPre struct {
	pciUnreadable, noGPU, noNIC *Finding
}

const gpuPCIByHand = "Run where sysfs is mounted and readable; by hand: `lspci -d 10de: ; lspci -d 1002:` and `nvidia-smi topo -m`."

// declareGPUPre declares check's precondition findings.
func declareGPUPre(check string) gpuPre {
	return gpuPre{
		pciUnreadable: declare(Finding{ID: check + "/pci-unreadable", Status: report.Error,
			When:    "the PCI functions (/sys/bus/pci/devices) could not be listed",
			Message: "could not list PCI functions: {cause}", Fix: gpuPCIByHand}),
		noGPU: declare(Finding{ID: check + "/no-gpu", Status: report.Skip,
			When:    "the host has no GPU: GPUDirect RDMA does not apply",
			Message: "no GPU on this host (no NVIDIA 0x10de or AMD 0x1002 display, 3D or processing-accelerator function)"}),
		noNIC: declare(Finding{ID: check + "/no-nic", Status: report.Skip,
			When:    "the host has GPUs but no RDMA NIC it can use: no pair to judge",
			Message: "{gpus} GPU(s) but no RDMA NIC this host can use: GPUDirect RDMA has no NIC to pair with"}),
	}
}

// gpuPrecondition is the result of a GPU check that cannot judge: no GPU,
// an unreadable PCI bus, or no RDMA NIC to pair with; the findings are
// the check's own (pre).
func gpuPrecondition(env *Env, pre gpuPre) (Result, bool) {
	s := env.Survey()
	if s.PCIErr != nil {
		r := pre.pciUnreadable.result("", Slots{"cause": s.PCIErr.Error()})
		r.Observed, r.Expected = "PCI bus unreadable", "a readable "+sysfs.PCIDevicesDir
		return r, true
	}
	g := env.GPUs()
	if len(g.GPUs) == 0 {
		r := pre.noGPU.result("", nil)
		r.Observed, r.Expected = "no GPU", "a GPU, for GPUDirect RDMA to apply"
		return r, true
	}
	if len(g.NICs) == 0 {
		r := pre.noNIC.result("", Slots{"gpus": fmt.Sprint(len(g.GPUs))})
		r.Observed, r.Expected = fmt.Sprintf("%d GPU(s), no RDMA NIC", len(g.GPUs)), "an RDMA NIC for the GPUs"
		r.Evidence = map[string]any{"gpus": gpuAddresses(g)}
		return r, true
	}
	return Result{}, false
}

func gpuAddresses(g *gpuSurvey) []string {
	var out []string
	for _, gpu := range g.GPUs {
		out = append(out, gpu.Fn.Address)
	}
	return out
}

// matrixLines draws the GPU×NIC matrix as nvidia-smi topo -m does: a
// header of NIC names, one row per GPU, the paired NIC's cell marked *.
func (g *gpuSurvey) matrixLines() []string {
	w := 6
	for _, n := range g.NICs {
		w = max(w, len(nicName(n))+1)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-6s", "")
	for _, n := range g.NICs {
		fmt.Fprintf(&b, "%-*s", w, nicName(n))
	}
	lines := []string{"matrix (* = the NIC the GPU pairs with): " + strings.TrimRight(b.String(), " ")}
	for i, gpu := range g.GPUs {
		b.Reset()
		fmt.Fprintf(&b, "%-6s", gpu.Name)
		for j := range g.NICs {
			cell := g.Matrix[i][j].rel.String()
			if g.Paired[i] == j {
				cell += "*"
			}
			fmt.Fprintf(&b, "%-*s", w, cell)
		}
		lines = append(lines, "  "+strings.TrimRight(b.String(), " "))
	}
	return lines
}

// inventoryGPUs describes the GPUs and the matrix for the JSON inventory.
func inventoryGPUs(env *Env, inv *report.Inventory) {
	g := env.GPUs()
	for i, gpu := range g.GPUs {
		fn := gpu.Fn
		ig := report.GPU{Name: gpu.Name, Address: fn.Address, VendorID: fmt.Sprintf("0x%04x", fn.Vendor),
			DeviceID: fmt.Sprintf("0x%04x", fn.Device), Class: fmt.Sprintf("0x%06x", fn.Class), Product: gpu.Product, Driver: fn.Driver}
		if fn.HasNUMA {
			v := fn.NUMANode
			ig.NUMANode = &v
		}
		ig.Link = pciLink(env.Host, fn.Address)
		if j := g.Paired[i]; j >= 0 {
			ig.PairedNIC = nicName(g.NICs[j])
		}
		inv.GPUs = append(inv.GPUs, ig)
		for j, n := range g.NICs {
			l := g.Matrix[i][j]
			inv.GPUNICMatrix = append(inv.GPUNICMatrix, report.GPUNICPair{GPU: fn.Address, NIC: n.Fn.Address, RDMADevice: nicName(n),
				Relation: l.rel.String(), Meaning: l.rel.Meaning(), Path: l.why, Paired: g.Paired[i] == j})
		}
	}
}

// pairedTally counts the GPUs' pairings by relation: "8 PIX" or "6 PIX, 2 NODE".
func (g *gpuSurvey) pairedTally() string {
	n := map[sysfs.PCIRelation]int{}
	for i, j := range g.Paired {
		if j >= 0 {
			n[g.Matrix[i][j].rel]++
		}
	}
	var parts []string
	for rel := sysfs.RelPIX; rel <= sysfs.RelUnknown; rel++ {
		if n[rel] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[rel], rel))
		}
	}
	return strings.Join(parts, ", ")
}
