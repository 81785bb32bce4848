package checks

import (
	"context"
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
)

func init() {
	register(Check{
		ID: "gpu.pcie", Code: 27, Level: 1,
		Title: "each GPU's PCIe link trained at the best its path allows; MaxReadReq and relaxed ordering of the pair shown",
		Privileges: []Need{{Kind: NeedCapability, Cap: CapSysAdmin, Optional: true,
			For: "shows MaxReadReq, MaxPayload and relaxed ordering from the capability list in PCI config space beyond 64 bytes"}},
		Explain: Explanation{
			Judges: "For each GPU, the same rule as pci.link (and the same code): current_link_speed/width of the GPU against min(the GPU's max, every " +
				"bridge's max up to the root port), speed and width separately; a bridge on the way that carries less than the GPU's link fails. " +
				"Where the configuration space's capability list is readable (bytes 64–255: root), the PCI Express capability's Device Control of " +
				"the GPU and its paired NIC is read and shown: Max_Read_Request_Size (bits 14:12), Max_Payload_Size and Enable Relaxed Ordering (bit 4) — " +
				"reported, not judged: the right values are platform guidance (NCCL_IB_PCI_RELAXED_ORDERING, the vendors' tuning guides). The NIC's " +
				"own link is pci.link's.",
			Why: "A GPU that trained at x8 or at a lower generation halves what GPUDirect RDMA can move between it and its NIC: the job runs, slowly, " +
				"and nothing else says why.",
			Failures: []Failure{
				{report.Fail, "a GPU trained below min(its max, its path's max), or a bridge above it carries less",
					"Reseat the GPU or its riser/cable (power off), check the BIOS PCIe speed and bifurcation settings; compare `lspci -vv -s <addr>` LnkCap with LnkSta."},
				{report.Warn, "a bridge above a GPU trained below its capability without limiting it", "Check the bridge's riser or cable when convenient."},
				{report.Error, "a GPU's link attributes could not be read", "Run where /sys is readable; the message names the file."},
				{report.Skip, "no GPU, or no RDMA NIC", "Nothing to do."},
			},
		},
		Run: runGPUPCIe,
	})
}

func runGPUPCIe(_ context.Context, env *Env) Result {
	if r, stop := gpuPrecondition(env, gpuPre{}); stop {
		return r
	}
	g := env.GPUs()
	var vs []verdict
	var links []string
	for i, gpu := range g.GPUs {
		// The GPU goes through pci.link's own judgement: one rule, one code.
		j := judgeLink(env.Host, NIC{Fn: gpu.Fn, Product: gpu.Product})
		v := verdict{status: j.status, line: gpu.Name + " " + j.detail, evidence: j.evidence}
		links = appendUnique(links, j.observed)
		if j.status == report.Fail {
			v.line = gpu.Name + " " + j.summary
			v.details = append(v.details, j.detail)
			v.remedy = "Reseat the GPU or its riser/cable with the host powered off, or check the baseboard's PCIe cabling and the BIOS PCIe speed and " +
				"bifurcation settings; compare `lspci -vv -s " + gpu.Fn.Address + " | grep -e LnkCap -e LnkSta`."
		}
		v.details = append(v.details, devCtlLine(env, gpu.Name, gpu.Fn.Address, j.evidence))
		if k := g.Paired[i]; k >= 0 {
			n := g.NICs[k]
			nev := map[string]any{}
			v.details = append(v.details, devCtlLine(env, nicName(n), n.Fn.Address, nev))
			j.evidence["paired_nic"] = map[string]any{"address": n.Fn.Address, "device_control": nev["device_control"]}
		}
		vs = append(vs, v)
	}
	r := combineUnits(vs, "GPU", "GPUs")
	if r.Status == report.Pass {
		r.Summary = fmt.Sprintf("%d GPU(s) at their expected PCIe link: %s", len(g.GPUs), strings.Join(links, ", "))
	}
	r.Expected = "each GPU at min(its max, its path's max)"
	var units []any
	for _, v := range vs {
		units = append(units, v.evidence)
	}
	r.Evidence = map[string]any{"gpus": units}
	return r
}

// devCtlLine reads a function's PCIe Device Control and says its
// MaxReadReq, MaxPayload and relaxed ordering, or why it cannot; the
// values go into ev["device_control"].
func devCtlLine(env *Env, name, addr string, ev map[string]any) string {
	c, err := env.Host.ReadPCIConfig(addr)
	switch {
	case err != nil:
		return fmt.Sprintf("%s %s: configuration space unreadable: %v", name, addr, err)
	case !c.Standard():
		ev["device_control"] = map[string]any{"readable": false, "config_bytes": c.Size}
		return fmt.Sprintf("%s %s: MaxReadReq and relaxed ordering need root (only %d bytes of configuration space readable)", name, addr, c.Size)
	case c.PCIe == nil:
		return fmt.Sprintf("%s %s: no PCI Express capability", name, addr)
	}
	p := c.PCIe
	ev["device_control"] = map[string]any{"readable": true, "max_read_request": p.MaxReadRequest(), "max_payload": p.MaxPayload(), "relaxed_ordering": p.RelaxedOrdering()}
	ro := "off"
	if p.RelaxedOrdering() {
		ro = "on"
	}
	return fmt.Sprintf("%s %s: MaxReadReq %d bytes, MaxPayload %d bytes, relaxed ordering %s", name, addr, p.MaxReadRequest(), p.MaxPayload(), ro)
}
