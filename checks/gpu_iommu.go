package checks

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

func init() {
	register(Check{
		ID: "gpu.iommu", Code: 26, Level: 1,
		Title: "the IOMMU is off or in passthrough for the GPUs and NICs (bare metal)",
		Explain: Explanation{
			Judges: "Reads the IOMMU units (/sys/class/iommu: dmar*, ivhd*, smmu*), the kernel command line's IOMMU parameters (intel_iommu=, amd_iommu=, " +
				"iommu=pt, iommu.passthrough=) and, for every GPU and paired NIC, its iommu_group and the group's default domain type " +
				"(/sys/kernel/iommu_groups/<n>/type: identity = passthrough, DMA or DMA-FQ = translated). On bare metal: no IOMMU unit or no group, " +
				"or identity groups, pass; a GPU or NIC in a translating group fails; groups without a readable type are judged from the " +
				"command line (iommu=pt or iommu.passthrough=1 pass) and are an error when it does not tell. In a VM (the CPU's hypervisor flag) " +
				"the hypervisor's IOMMU does the translation: no guest IOMMU passes, a guest IOMMU translating the devices warns. Sources: " +
				"NVIDIA's GPUDirect RDMA guide (IOMMUs translating other than 1:1 must be disabled or set to pass-through for GPUDirect RDMA), " +
				"ROCm's ROCmRDMA notes and MI300X system optimization guide (IOMMU disabled or iommu=pt), NVIDIA AI Enterprise VM guide (ATS/ACS in VMs).",
			Why: "GPUDirect RDMA relies on the GPU's BAR addresses being the same for the NIC as for the CPU. An IOMMU that translates the NIC's " +
				"DMA breaks that: registrations fail or peer traffic is redirected through the root complex, and NCCL falls back or hangs.",
		},
		Run: runGPUIOMMU,
	})
}

// iommuMember is one device judged for its IOMMU group.
type iommuMember struct {
	name, addr string
	group      sysfs.IOMMUGroup
	err        error
}

func runGPUIOMMU(_ context.Context, env *Env) Result {
	if r, stop := gpuPrecondition(env, iommuPre); stop {
		return r
	}
	h, g := env.Host, env.GPUs()
	st := h.ReadIOMMU()
	var members []iommuMember
	for i, gpu := range g.GPUs {
		members = append(members, readMember(h, gpu.Name, gpu.Fn.Address))
		if j := g.Paired[i]; j >= 0 {
			members = append(members, readMember(h, nicName(g.NICs[j]), g.NICs[j].Fn.Address))
		}
	}
	members = uniqueMembers(members)
	ev := map[string]any{"units": nonNil(st.Units), "cmdline_params": nonNil(st.Params), "virtual_machine": g.Virt.Guest(), "groups": memberEvidence(members)}
	translated, unknown := classifyMembers(members)
	var r Result
	if g.Virt.Guest() {
		r = judgeIOMMUGuest(st, translated)
	} else {
		r = judgeIOMMUBareMetal(st, translated, unknown)
	}
	r.Details = append(r.Details, memberLines(members)...)
	if len(st.Params) > 0 {
		r.Details = append(r.Details, "command line: "+strings.Join(st.Params, " "))
	}
	r.Evidence = ev
	return r
}

func readMember(h *sysfs.Host, name, addr string) iommuMember {
	grp, err := h.IOMMUGroupOf(addr)
	return iommuMember{name: name, addr: addr, group: grp, err: err}
}

func uniqueMembers(ms []iommuMember) []iommuMember {
	seen := map[string]bool{}
	var out []iommuMember
	for _, m := range ms {
		if !seen[m.addr] {
			seen[m.addr] = true
			out = append(out, m)
		}
	}
	return out
}

// classifyMembers names the devices in translating groups and those whose
// group's type could not be read.
func classifyMembers(ms []iommuMember) (translated, unknown []string) {
	for _, m := range ms {
		switch {
		case m.err != nil:
			unknown = append(unknown, m.name)
		case m.group.Type == "DMA" || m.group.Type == "DMA-FQ":
			translated = append(translated, fmt.Sprintf("%s %s (group %s: %s)", m.name, m.addr, m.group.ID, m.group.Type))
		}
	}
	return translated, unknown
}

func memberLines(ms []iommuMember) []string {
	var out []string
	for _, m := range ms {
		switch {
		case m.err != nil:
			out = append(out, fmt.Sprintf("%s %s: IOMMU group unreadable: %v", m.name, m.addr, m.err))
		case m.group.ID == "":
			out = append(out, fmt.Sprintf("%s %s: no IOMMU group (not translated)", m.name, m.addr))
		default:
			out = append(out, fmt.Sprintf("%s %s: IOMMU group %s, %s", m.name, m.addr, m.group.ID, m.group.Type))
		}
	}
	return out
}

func memberEvidence(ms []iommuMember) []map[string]any {
	var out []map[string]any
	for _, m := range ms {
		e := map[string]any{"device": m.addr, "group": m.group.ID, "type": m.group.Type}
		if m.err != nil {
			e["error"] = m.err.Error()
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i]["device"].(string) < out[j]["device"].(string) })
	return out
}

// cmdlinePassthrough reports whether the command line asks for passthrough:
// iommu=pt, or iommu.passthrough=1/on/y.
func cmdlinePassthrough(st sysfs.IOMMUState) bool {
	if v, ok := st.Param("iommu"); ok && v == "pt" {
		return true
	}
	v, ok := st.Param("iommu.passthrough")
	return ok && (v == "1" || v == "y" || v == "on")
}

// cmdlineOff reports whether the command line turns the IOMMU off.
func cmdlineOff(st sysfs.IOMMUState) bool {
	for _, p := range []string{"intel_iommu", "amd_iommu", "iommu"} {
		if v, ok := st.Param(p); ok && v == "off" {
			return true
		}
	}
	return false
}

const iommuPTFix = "Put the IOMMU in passthrough for the host's own devices: add `iommu=pt` to the kernel command line (keep `intel_iommu=on` / `amd_iommu=on` " +
	"where SR-IOV or VFIO needs the IOMMU), e.g. in GRUB_CMDLINE_LINUX of /etc/default/grub, then `update-grub` (or `grub2-mkconfig -o /boot/grub2/grub.cfg`) " +
	"and reboot; or disable VT-d / AMD-Vi in the BIOS on a node that needs neither. NVIDIA's GPUDirect RDMA guide and AMD's ROCm guides require 1:1 " +
	"(passthrough) mappings for peer-to-peer DMA."

// gpu.iommu's findings: the host's IOMMU mode for its GPUs and their
// NICs (unit ""), on bare metal and in a VM's guest.
var (
	iommuPre        = declareGPUPre("gpu.iommu")
	iommuTranslated = declare(Finding{ID: "gpu.iommu/translated", Status: report.Fail,
		When:    "bare metal: a GPU or NIC sits in an IOMMU group that translates (DMA, DMA-FQ)",
		Message: "bare metal with the IOMMU translating DMA of {devices}: GPUDirect RDMA needs passthrough (1:1) mappings", Fix: iommuPTFix})
	iommuNone = declare(Finding{ID: "gpu.iommu/no-iommu", Status: report.Pass,
		When:    "bare metal: no IOMMU registered",
		Message: "no IOMMU registered (/sys/class/iommu is empty): DMA addresses are physical"})
	iommuOff = declare(Finding{ID: "gpu.iommu/off", Status: report.Pass,
		When:    "bare metal: no IOMMU registered, the command line turns it off",
		Message: "IOMMU off on the command line: DMA addresses are physical"})
	iommuPassthrough = declare(Finding{ID: "gpu.iommu/passthrough", Status: report.Pass,
		When:    "bare metal: the GPUs and their NICs are in identity groups, or in none",
		Message: "IOMMU ({units}) in passthrough for the GPUs and their NICs (identity groups, or none)"})
	iommuPassthroughCmdline = declare(Finding{ID: "gpu.iommu/passthrough-by-cmdline", Status: report.Pass,
		When:    "bare metal: a group's type could not be read, and the command line sets passthrough (iommu=pt, iommu.passthrough=1)",
		Message: "IOMMU in passthrough by the command line ({params}); the groups' type could not be read"})
	iommuModeUnknown = declare(Finding{ID: "gpu.iommu/mode-unknown", Status: report.Error,
		When:    "bare metal: a group's type could not be read and nothing on the command line tells the IOMMU mode",
		Message: "cannot tell the IOMMU mode of {devices}: their group type is unreadable and the command line sets no passthrough",
		Fix:     "By hand: `cat /proc/cmdline` and `cat /sys/kernel/iommu_groups/*/type` (identity = passthrough). " + iommuPTFix})
	iommuGuestTranslates = declare(Finding{ID: "gpu.iommu/guest-translates", Status: report.Warn,
		When:    "in a VM: the guest has its own IOMMU translating the devices",
		Message: "virtual machine whose own IOMMU translates {devices}: a second translation in the guest",
		Fix: "Remove the guest's virtual IOMMU or boot the guest with `iommu=pt`; the hypervisor's IOMMU and ATS on the NIC " +
			"are what GPUDirect RDMA needs in a VM (NVIDIA AI Enterprise \"ATS and ACS configuration\")."})
	iommuGuestNone = declare(Finding{ID: "gpu.iommu/guest-no-iommu", Status: report.Pass,
		When:    "in a VM without a guest IOMMU: the hypervisor's IOMMU maps the passed-through devices",
		Message: "virtual machine without a guest IOMMU: the hypervisor's IOMMU maps the passed-through devices (judge ATS/ACS on the host)"})
	iommuGuestPassthrough = declare(Finding{ID: "gpu.iommu/guest-passthrough", Status: report.Pass,
		When:    "in a VM whose guest IOMMU does not translate the GPUs and NICs",
		Message: "virtual machine: guest IOMMU ({units}) in passthrough for the GPUs and NICs"})
)

func judgeIOMMUBareMetal(st sysfs.IOMMUState, translated, unknown []string) Result {
	var r Result
	units := len(st.Units)
	switch {
	case len(translated) > 0:
		r = iommuTranslated.result("", Slots{"devices": strings.Join(translated, ", ")})
	case units == 0 && len(unknown) == 0 && cmdlineOff(st):
		r = iommuOff.result("", nil)
	case units == 0 && len(unknown) == 0:
		r = iommuNone.result("", nil)
	case len(unknown) == 0:
		r = iommuPassthrough.result("", Slots{"units": unitList(st.Units)})
	case cmdlinePassthrough(st):
		r = iommuPassthroughCmdline.result("", Slots{"params": strings.Join(st.Params, " ")})
	default:
		r = iommuModeUnknown.result("", Slots{"devices": strings.Join(unknown, ", ")})
	}
	r.Observed = fmt.Sprintf("%d IOMMU unit(s); %d translated device(s)", units, len(translated))
	r.Expected = "IOMMU off, or passthrough (identity groups, iommu=pt) for the GPUs and NICs"
	return r
}

func judgeIOMMUGuest(st sysfs.IOMMUState, translated []string) Result {
	var r Result
	switch {
	case len(translated) > 0:
		r = iommuGuestTranslates.result("", Slots{"devices": strings.Join(translated, ", ")})
	case len(st.Units) == 0:
		r = iommuGuestNone.result("", nil)
	default:
		r = iommuGuestPassthrough.result("", Slots{"units": unitList(st.Units)})
	}
	r.Observed = fmt.Sprintf("VM; %d guest IOMMU unit(s)", len(st.Units))
	r.Expected = "no guest IOMMU translation; ATS and ACS set on the host"
	return r
}

// unitList names IOMMU units shortly: "dmar0, dmar1" or "dmar0 … dmar7, 8 units".
func unitList(units []string) string {
	if len(units) <= 2 {
		return strings.Join(units, ", ")
	}
	return fmt.Sprintf("%s … %s, %d units", units[0], units[len(units)-1], len(units))
}
