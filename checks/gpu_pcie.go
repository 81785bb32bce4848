package checks

import (
	"context"
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
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
				"own link is pci.link's. Where the hypervisor hides the PCIe path (Hyper-V/Azure: each GPU on its own vPCI root bus) the GPU is judged " +
				"against its own max, the only link a guest sees, and a degraded link's fix is the platform's (redeploy, a support case), " +
				"not a reseat or a BIOS setting.",
			Why: "A GPU that trained at x8 or at a lower generation halves what GPUDirect RDMA can move between it and its NIC: the job runs, slowly, " +
				"and nothing else says why.",
		},
		Run: runGPUPCIe,
	})
}

// gpu.pcie's findings, one per GPU (its PCI address). The GPU's link is
// judged by pci.link's own code (judgeLink): {link} is that judgement's
// line, so the words stay pci.link's.
var (
	pciePre      = declareGPUPre("gpu.pcie")
	pcieExpected = declare(Finding{ID: "gpu.pcie/link-expected", Status: report.Pass,
		When:    "the GPU trained at min(its max, its path's max) and no bridge above it is slower",
		Message: "{gpu} {link}"})
	pcieDegraded = declare(Finding{ID: "gpu.pcie/link-degraded", Status: report.Fail,
		When:    "the GPU trained below min(its max, its path's max), or a bridge above it carries less than its link",
		Message: "{gpu} {link}",
		Fix: "Reseat the GPU or its riser/cable with the host powered off, or check the baseboard's PCIe cabling and the BIOS PCIe speed and " +
			"bifurcation settings; compare `lspci -vv -s {gpu_addr} | grep -e LnkCap -e LnkSta`."})
	pcieDegradedGuest = declare(Finding{ID: "gpu.pcie/link-degraded-guest", Status: report.Fail,
		When: "the GPU trained below its max where the hypervisor hides the PCIe path (a Hyper-V/Azure vPCI bus): the slot, riser and " +
			"BIOS are the platform's",
		Message: "{gpu} {link}",
		Fix: "{gpu} ({gpu_addr}) trained below its capability on the platform's host; nothing in this VM can retrain it (the hardware " +
			"under the VM is the cloud provider's): deallocate and start the VM again (a redeploy moves it to another host), and if the " +
			"link stays low open a support case with the provider naming the VM and the GPU's address."})
	pcieSlowBridge = declare(Finding{ID: "gpu.pcie/slow-bridge", Status: report.Warn,
		When:    "a bridge above the GPU trained below its capability without limiting the GPU's link",
		Message: "{gpu} {link}"})
	pcieUnreadable = declare(Finding{ID: "gpu.pcie/link-unreadable", Status: report.Error,
		When:    "the GPU's link attributes, or those of a bridge that may limit it, could not be read",
		Message: "{gpu} {link}"})
	pcieUnknown = declare(Finding{ID: "gpu.pcie/link-unknown", Status: report.Skip,
		When:    "the GPU reports no trained link, or neither it nor its bridges say what it could train at",
		Message: "{gpu} {link}"})
)

// pcieFindings are gpu.pcie's findings by the status of pci.link's judgement.
var pcieFindings = map[report.Status]*Finding{report.Pass: pcieExpected, report.Fail: pcieDegraded, report.Warn: pcieSlowBridge,
	report.Error: pcieUnreadable, report.Skip: pcieUnknown}

// gpu.pcie's headline: the summary when every GPU is at its expected link.
const gpuPCIePassHead headline = "{count} GPU(s) at their expected PCIe link: {links}"

func runGPUPCIe(_ context.Context, env *Env) Result {
	if r, stop := gpuPrecondition(env, pciePre); stop {
		return r
	}
	g := env.GPUs()
	var vs []verdict
	var links []string
	for i, gpu := range g.GPUs {
		// The GPU goes through pci.link's own judgement: one rule, one code.
		j := judgeLink(env.Host, NIC{Fn: gpu.Fn, Product: gpu.Product})
		links = appendUnique(links, j.observed)
		slots := Slots{"gpu": gpu.Name, "gpu_addr": gpu.Fn.Address, "link": j.detail}
		if j.status == report.Fail {
			slots["link"] = j.summary
		}
		f := pcieFindings[j.status]
		if _, hidden := sysfs.HiddenPCIePath(gpu.Fn); hidden && f == pcieDegraded {
			f = pcieDegradedGuest
		}
		v := f.unit(gpu.Fn.Address, slots)
		v.evidence = j.evidence
		if j.status == report.Fail {
			v.details = append(v.details, j.detail)
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
		r.Summary = gpuPCIePassHead.render(Slots{"count": fmt.Sprint(len(g.GPUs)), "links": strings.Join(links, ", ")})
	}
	r.Expected = "each GPU at min(its max, its path's max)"
	if g.hiddenPath() {
		r.Expected = "each GPU at its own max (the hypervisor hides the path above it)"
	}
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
