package checks

import (
	"context"
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// acsRedirectBits are the ACS controls that send peer-to-peer traffic up
// to the root complex instead of across the switch: P2P Request Redirect,
// P2P Completion Redirect and P2P Egress Control.
const acsRedirectBits = sysfs.ACSP2PRequestRedir | sysfs.ACSP2PCompletionRdr | sysfs.ACSP2PEgressControl

func init() {
	register(Check{
		ID: "gpu.acs", Code: 25, Level: 1,
		Title: "no PCIe switch between a GPU and its NIC redirects their peer-to-peer traffic (ACS)",
		Privileges: []Need{{Kind: NeedCapability, Cap: CapSysAdmin,
			For: "reads the ACS control of the switch ports between a GPU and its NIC, in PCI config space beyond 64 bytes (only where they meet under a switch)"}},
		Explain: Explanation{
			Judges: "For each GPU and the NIC it pairs with (gpu.nic_affinity) that meet below the root complex (PIX, PXB), reads the configuration " +
				"space (/sys/bus/pci/devices/<bdf>/config) of every bridge between them and, on root and switch downstream ports, the ACS Control " +
				"register (extended capability 0x000D, offset +6). On bare metal P2P Request Redirect, P2P Completion Redirect or P2P Egress " +
				"Control set fails, naming the bridge and the bits as lspci's ACSCtl prints them. The extended space is readable only with " +
				"CAP_SYS_ADMIN: without it the check is an error that says so, never a guess. Pairs that meet only at the root complex (PHB, NODE, " +
				"SYS) pass through it anyway and are not judged. In a VM the guest's bridges are virtual: ACS and ATS are set on the hypervisor " +
				"host, so the check skips, listing the NIC's ATS state where the guest sees it; where the hypervisor hides the PCIe path altogether " +
				"(Hyper-V/Azure: each GPU and NIC on its own vPCI root bus below its VMBus device) it skips saying that the path is the cloud " +
				"platform's, with no host-side advice the guest cannot carry out. Sources: NCCL troubleshooting \"PCI Access Control " +
				"Services (ACS)\" (disable ACS on PCI switches on bare metal: `setpci -s <bdf> ECAP_ACS+0x6.w=0000`), NVIDIA AI Enterprise " +
				"\"ATS and ACS configuration\" for VMs (ATS on the NIC, ACS allowing translated requests), AMD ROCm's MI300X system " +
				"optimization (ACS off for peer-to-peer).",
			Why: "With ACS redirect on a switch port, every GPUDirect RDMA transfer between a GPU and the NIC beside it climbs to the CPU's root " +
				"complex and back: bandwidth drops to a fraction, and on some platforms the transfer hangs (NCCL's first collective never ends).",
		},
		Run: runGPUACS,
	})
}

// gpu.acs's findings: one per GPU (its PCI address) about the bridges
// between it and its NIC, or one about the host in a VM.
const acsPair = "{gpu} {gpu_addr} ↔ {nic} {nic_addr}"

var (
	acsPre = declareGPUPre("gpu.acs")
	acsVM  = declare(Finding{ID: "gpu.acs/virtual-machine", Status: report.Skip,
		When: "in a VM: the guest's bridges are virtual, ACS and ATS are set on the hypervisor host (the NIC's ATS state is listed)",
		Message: "virtual machine: ACS lives on the hypervisor host's switches, not on the guest's virtual bridges — check it there " +
			"(ATS on the NIC, ACS allowing direct translated P2P)",
		Fix: "On the hypervisor host: enable ATS on the NIC (`mlxconfig -d <dev> set ATS_ENABLED=true`, then reboot the host) and configure ACS " +
			"on its switches to let translated requests go direct, as NVIDIA's \"ATS and ACS configuration\" for VMs describes."})
	acsHiddenPath = declare(Finding{ID: "gpu.acs/hidden-path", Status: report.Skip,
		When: "the hypervisor hides the PCIe path (a Hyper-V/Azure vPCI bus): the switches between the GPUs and their NICs, and their ACS, " +
			"are the cloud platform's",
		Message: "the hypervisor hides the PCIe path: each GPU and NIC sits on its own vPCI root bus, so the switches between them and their " +
			"ACS and ATS settings are the cloud platform's — not visible or settable in this VM; if GPUDirect RDMA bandwidth is low " +
			"(NCCL's all_reduce_perf below the size's published figure), redeploy the VM or ask the cloud provider"})
	acsThroughRoot = declare(Finding{ID: "gpu.acs/through-root-complex", Status: report.Skip,
		When:    "the GPU and its NIC meet only at the root complex (PHB, NODE, SYS): their traffic passes through it anyway",
		Message: acsPair + ": {relation}, through the root complex: ACS redirect does not change the path"})
	acsPathUnreadable = declare(Finding{ID: "gpu.acs/path-unreadable", Status: report.Error,
		When:    "the bridges between the GPU and its NIC could not be told from their PCI paths",
		Message: acsPair + ": {cause}"})
	acsRedirect = declare(Finding{ID: "gpu.acs/redirect", Status: report.Fail,
		When:    "bare metal: a bridge between the GPU and its NIC has ACS P2P Request/Completion Redirect or Egress Control on",
		Message: acsPair + " ({relation}): {bridges} — peer-to-peer traffic is sent up to the root complex",
		Fix: "Turn ACS redirect off on the switch ports between the GPUs and their NICs, as root: `{commands}` " +
			"(not persistent: run it at every boot, e.g. from a systemd unit before the GPU jobs start), or disable ACS / PCIe virtualization in the BIOS " +
			"(NCCL troubleshooting, \"PCI Access Control Services\"). Check with `sudo lspci -vvv | grep ACSCtl`: ReqRedir- CmpltRedir- EgressCtrl-."})
	acsConfigUnreadable = declare(Finding{ID: "gpu.acs/config-unreadable", Status: report.Error,
		When:    "a bridge's extended configuration space is not readable (needs CAP_SYS_ADMIN) or not parsable",
		Message: acsPair + " ({relation}): {bridges}",
		Fix: "Run rdmadoctor as root: the ACS registers are in the extended configuration space, which the kernel shows only to CAP_SYS_ADMIN " +
			"(the shipped systemd unit and DaemonSet grant it; a drop-in or patch that removes it makes this check unknown); by hand: `sudo lspci -vvv | grep ACSCtl`."})
	acsNoRedirect = declare(Finding{ID: "gpu.acs/no-redirect", Status: report.Pass,
		When:    "no bridge between the GPU and its NIC redirects peer-to-peer traffic",
		Message: acsPair + " ({relation}): no ACS redirect on the {count} bridge(s) between them"})
)

// gpu.acs's headlines: the summary when no pair's path is redirected.
const (
	acsPassHead     headline = "no ACS redirect on the {count} bridge(s) between the GPUs and their NICs — {tally}"
	acsNoSwitchHead headline = "every GPU meets its NIC only at the root complex (PHB/NODE/SYS): no switch between them to redirect — {tally}"
)

func runGPUACS(_ context.Context, env *Env) Result {
	if r, stop := gpuPrecondition(env, acsPre); stop {
		return r
	}
	g := env.GPUs()
	if g.hiddenPath() {
		r := acsHiddenPath.result("", nil)
		r.Observed, r.Expected = "PCIe path hidden by the hypervisor", "nothing to judge in the guest"
		r.Evidence = map[string]any{"virtual_machine": g.Virt.Guest(), "pcie_path_hidden": true}
		return r
	}
	if g.Virt.Guest() {
		return acsInVM(env, g)
	}
	var vs []verdict
	configs := map[string]acsRead{}
	for i := range g.GPUs {
		vs = append(vs, judgeACSPair(env.Host, g, i, configs))
	}
	r := combineUnits(vs, "pair", "pairs")
	if r.Status == report.Pass {
		r.Summary = acsPassHead.render(Slots{"count": fmt.Sprint(len(configs)), "tally": r.Observed})
	}
	if r.Status == report.Skip {
		r.Summary = acsNoSwitchHead.render(Slots{"tally": r.Observed})
	}
	r.Expected = "ACS P2P redirect and egress control off on the switch ports between each GPU and its NIC"
	var units []any
	for _, v := range vs {
		units = append(units, v.evidence)
	}
	r.Evidence = map[string]any{"pairs": units}
	return r
}

// acsRead is one bridge's configuration space, read once per run.
type acsRead struct {
	cfg   sysfs.PCIConfig
	err   error
	short string // why the read stopped short of the extended space, when it did
}

// judgeACSPair judges the bridges between one GPU and its NIC.
func judgeACSPair(h *sysfs.Host, g *gpuSurvey, i int, configs map[string]acsRead) verdict {
	gpu, n := g.GPUs[i], g.NICs[g.Paired[i]]
	l := g.Matrix[i][g.Paired[i]]
	slots := Slots{"gpu": gpu.Name, "gpu_addr": gpu.Fn.Address, "nic": nicName(n), "nic_addr": n.Fn.Address, "relation": l.rel.String()}
	ev := map[string]any{"gpu": gpu.Fn.Address, "nic": n.Fn.Address, "relation": l.rel.String()}
	var v verdict
	if l.rel != sysfs.RelPIX && l.rel != sysfs.RelPXB {
		v = acsThroughRoot.unit(gpu.Fn.Address, slots)
		v.evidence = ev
		return v
	}
	bridges, err := sysfs.BridgesBetween(gpu.Fn, n.Fn)
	if err != nil {
		slots["cause"] = err.Error()
		v = acsPathUnreadable.unit(gpu.Fn.Address, slots)
		v.evidence = ev
		return v
	}
	b := readACSBridges(h, bridges, configs)
	ev["bridges"] = b.ev
	switch {
	case len(b.bad) > 0:
		var cmds []string
		for _, bev := range b.ev {
			if bev["redirect"] == true {
				cmds = append(cmds, fmt.Sprintf("setpci -s %s ECAP_ACS+0x6.w=0000", bev["address"]))
			}
		}
		slots["bridges"], slots["commands"] = strings.Join(b.bad, "; "), strings.Join(cmds, "; ")
		v = acsRedirect.unit(gpu.Fn.Address, slots)
	case len(b.unread) > 0:
		slots["bridges"] = strings.Join(b.unread, "; ")
		v = acsConfigUnreadable.unit(gpu.Fn.Address, slots)
	default:
		slots["count"] = fmt.Sprint(len(bridges))
		v = acsNoRedirect.unit(gpu.Fn.Address, slots)
	}
	// A pair that passes is one line; one that does not lists every bridge.
	if len(b.bad)+len(b.unread) > 0 {
		v.details = append(append(append(v.details, b.bad...), b.unread...), b.ok...)
	}
	v.evidence = ev
	return v
}

// acsBridges are the bridges between a GPU and its NIC as judged: the
// notes of those that redirect, could not be read and are fine, and the
// evidence of each.
type acsBridges struct {
	bad, unread, ok []string
	ev              []map[string]any
}

// readACSBridges reads (once per run: configs) and judges each bridge.
func readACSBridges(h *sysfs.Host, bridges []string, configs map[string]acsRead) acsBridges {
	var out acsBridges
	for _, b := range bridges {
		rd, seen := configs[b]
		if !seen {
			rd.cfg, rd.err = h.ReadPCIConfig(b)
			if rd.err == nil && !rd.cfg.Extended() {
				rd.short = configSpaceShort(h, rd.cfg.Size, "ACS")
			}
			configs[b] = rd
		}
		st, note, bev := judgeACSBridge(b, rd)
		out.ev = append(out.ev, bev)
		switch st {
		case report.Fail:
			out.bad = append(out.bad, note)
		case report.Error:
			out.unread = append(out.unread, note)
		default:
			out.ok = append(out.ok, note)
		}
	}
	return out
}

// judgeACSBridge judges one bridge's ACS control: the status, a note for
// the details and the evidence.
func judgeACSBridge(addr string, rd acsRead) (report.Status, string, map[string]any) {
	ev := map[string]any{"address": addr}
	switch {
	case rd.err != nil:
		ev["error"] = rd.err.Error()
		return report.Error, fmt.Sprintf("bridge %s: configuration space unreadable: %v", addr, rd.err), ev
	case !rd.cfg.Extended():
		ev["config_bytes"] = rd.cfg.Size
		return report.Error, fmt.Sprintf("bridge %s: %s", addr, rd.short), ev
	}
	c := rd.cfg
	if c.PCIe != nil {
		ev["port_type"] = portTypeName(c.PCIe.PortType)
	}
	if c.PCIe != nil && c.PCIe.PortType != 4 && c.PCIe.PortType != 6 {
		return report.Pass, fmt.Sprintf("bridge %s (%s): not a routing port for ACS", addr, portTypeName(c.PCIe.PortType)), ev
	}
	if c.ACS == nil {
		ev["acs"] = false
		return report.Pass, fmt.Sprintf("bridge %s: no ACS capability (peer traffic is not redirected)", addr), ev
	}
	ev["acs_cap"], ev["acs_ctl"] = fmt.Sprintf("0x%04x", c.ACS.Cap), fmt.Sprintf("0x%04x", c.ACS.Ctl)
	ev["acs_ctl_bits"] = nonNil(sysfs.ACSNames(c.ACS.Ctl))
	if on := c.ACS.Ctl & acsRedirectBits; on != 0 {
		ev["redirect"] = true
		return report.Fail, fmt.Sprintf("bridge %s ACSCtl 0x%04x: %s on", addr, c.ACS.Ctl, strings.Join(sysfs.ACSNames(on), "+ ")+"+"), ev
	}
	return report.Pass, fmt.Sprintf("bridge %s ACSCtl 0x%04x: no redirect", addr, c.ACS.Ctl), ev
}

func portTypeName(t uint8) string {
	switch t {
	case 0:
		return "endpoint"
	case 4:
		return "root port"
	case 5:
		return "switch upstream port"
	case 6:
		return "switch downstream port"
	}
	return fmt.Sprintf("port type %d", t)
}

// acsInVM skips: a guest's bridges are the hypervisor's emulation; what
// matters (ACS on the host's switches allowing translated requests, ATS on
// the NIC) is set on the host. The NIC's ATS state is listed where seen.
func acsInVM(env *Env, g *gpuSurvey) Result {
	r := acsVM.result("", nil)
	var ats []map[string]any
	for _, n := range g.NICs {
		c, err := env.Host.ReadPCIConfig(n.Fn.Address)
		switch {
		case err != nil:
			r.Details = append(r.Details, fmt.Sprintf("%s %s: configuration space unreadable: %v", nicName(n), n.Fn.Address, err))
		case !c.Extended():
			r.Details = append(r.Details, fmt.Sprintf("%s %s: ATS state needs root (only %d bytes of configuration space readable)", nicName(n), n.Fn.Address, c.Size))
		case c.ATS == nil:
			r.Details = append(r.Details, fmt.Sprintf("%s %s: the guest sees no ATS capability", nicName(n), n.Fn.Address))
		default:
			r.Details = append(r.Details, fmt.Sprintf("%s %s: ATS %s", nicName(n), n.Fn.Address, map[bool]string{true: "enabled", false: "disabled"}[c.ATS.Enabled()]))
			ats = append(ats, map[string]any{"nic": n.Fn.Address, "ats_enabled": c.ATS.Enabled()})
		}
	}
	r.Observed, r.Expected = "virtual machine", "on the host: ATS on the NIC, ACS allowing translated P2P (NVIDIA AI Enterprise VM guide)"
	r.Evidence = map[string]any{"virtual_machine": true, "ats": ats, "sys_vendor": g.Virt.SysVendor}
	return r
}
