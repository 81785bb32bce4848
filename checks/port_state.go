package checks

import (
	"context"
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// IB port states (ports/<n>/state) and physical states (phys_state).
const (
	portStateDown   = 1
	portStateInit   = 2
	portStateArmed  = 3
	portStateActive = 4
	physSleep       = 1
	physPolling     = 2
	physDisabled    = 3
	physLinkUp      = 5
)

func init() {
	register(Check{
		ID: "port.state", Code: 19, Level: 1,
		Title: "every port of every RDMA device is ACTIVE with its link up",
		Needs: []string{"rdma.devices"},
		Explain: Explanation{
			Judges: "Every port of every device under /sys/class/infiniband (never only port 1), by what the port is (the host model: InfiniBand, " +
				"Omni-Path, RoCE, iWARP, EFA): ports/<n>/state must be ACTIVE and phys_state LinkUp. InfiniBand and Omni-Path: LID and SM LID (lid, sm_lid) " +
				"not 0; phys_state Disabled is set only by management (ibportstate, the SM), so it warns — a missing cable reads Polling and fails; " +
				"a port trained 1X (\"50 Gb/sec (1X HDR)\") warns — HCAs train 4X and 2X is how HDR100/NDR200 split ports run. RoCE and iWARP: " +
				"mlx5, bnxt_re and irdma report DOWN/Disabled whenever the netdev has no carrier, so the netdev's admin state and carrier decide the finding " +
				"(admin-down: bring it up; up without carrier: the cable or the switch port). EFA ports have no LID. VF representor ports that are down are " +
				"not judged (they follow the VF's use), nor are the ports of a hypervisor's unused VFs (netdev admin-down or moved to another namespace " +
				"while the PF's netdev is here); a VF handed to this namespace (a pod's SR-IOV VF, its PF's netdev elsewhere) is judged like any port. " +
				"In a virtual machine (the CPU's hypervisor flag) an InfiniBand VF's port (a physfn link, or a ConnectX VF device ID: Azure's HB, HC and ND VMs) " +
				"that no SM configured is judged as a guest's: a VF has no QP0 and the fabric's SM runs outside the VM, so the remedy waits for it, " +
				"checks the platform's agent and redeploys; it never advises starting an SM in the guest, and a Disabled port there is enabled by the " +
				"platform (redeploy, a support case), not by `ibportstate`, which needs QP0. " +
				"A down port whose netdev is in another namespace (a pod that sees the node's devices) fails with a remedy for the node, where the netdev is. With --expect-rate GBPS, a port whose rate is below that fails.",
			Why: "A port that is not ACTIVE carries no RDMA traffic; applications that pick it hang or fail to connect. On InfiniBand the subnet " +
				"manager assigns LIDs and moves ports from INIT to ACTIVE: LID 0 means no SM answered and nothing can be addressed. " +
				"A port that trained on fewer lanes (a bad cable, a 1X link) works, but at a fraction of its rate. A port switched off on purpose " +
				"is not a fault, and a node must not be drained for it.",
		},
		Run: runPortState,
	})
}

// port.state's findings. A port's line names the port and joins every
// finding about it; the fix of each goes to the remedy.
const (
	unusedOffer = " If {port} is unused on purpose (no cable by design), say so in the node's class of the expectations file: " +
		"`{device}/{num}.unused = true` (not judged from then on)."
	portExpectFix = "The port is not as its class says: reseat or replace the cable/transceiver, check the switch port and the firmware's link type; " +
		"if it changed on purpose, update the line of the expectations file the finding names."
)

var (
	portActiveFinding = declare(Finding{ID: "port.state/active", Status: report.Pass,
		When:    "the port is ACTIVE with its link up (InfiniBand: a LID and an SM LID)",
		Message: "{observed}"})
	portUnused = declare(Finding{ID: "port.state/unused", Status: report.Skip,
		When:    "the expectations file says the port is unused on purpose (<device>/<port>.unused = true)",
		Message: "{observed} — unused on purpose ({cite}): not judged"})
	portRepresentor = declare(Finding{ID: "port.state/representor", Status: report.Skip,
		When:    "a VF representor's port is down: its state follows the VF's use",
		Message: "{observed} — a VF representor: its state follows the VF's use; not judged"})
	portNoneInUse = declare(Finding{ID: "port.state/none-in-use", Status: report.Pass,
		When:    "every port is unused on purpose or a representor whose state follows its VF: none is judged, and none that should be up is down",
		Message: "no port in use to judge: {count} not judged (see details)"})
	portPoolVF = declare(Finding{ID: "port.state/pool-vf", Status: report.Skip,
		When: "a VF's port is down while the VF is not in use here: its netdev is admin-down or in another network namespace, and this namespace holds its PF's " +
			"netdev (a hypervisor's pool of VFs for guests and pods)",
		Message: "{observed} — a VF not in use on this host (its netdev {netdev} is {why}): its state follows its use; not judged"})
	portUnreadable = declare(Finding{ID: "port.state/unreadable", Status: report.Error,
		When:    "a port's state or phys_state could not be read",
		Message: "{port} state unknown: {cause}", Fix: portsByHand})
	portDevicesUnreadable = declare(Finding{ID: "port.state/devices-unreadable", Status: report.Error,
		When:    "/sys/class/infiniband could not be listed",
		Message: "could not list RDMA devices: {cause}", Fix: portsByHand})
	portNoDevice = declare(Finding{ID: "port.state/no-device", Status: report.Fail,
		When:    "there is no RDMA device, so no port to judge",
		Message: "no RDMA device: no port to judge", Fix: "Fix the RDMA devices first (see rdma.devices)."})
	portNoPorts = declare(Finding{ID: "port.state/no-ports", Status: report.Fail,
		When:    "a device lists no ports",
		Message: "{device}: no ports under {dir}{problems}",
		Fix:     "{device} lists no ports: read `dmesg` for the driver's errors while it registered the device ({driver})."})
	portInitNoSM = declare(Finding{ID: "port.state/init-no-sm", Status: report.Fail,
		When:    "an InfiniBand or Omni-Path port has its link up but is INIT or ARMED: no subnet manager brought it ACTIVE",
		Message: "{state}: no subnet manager brought it ACTIVE", Fix: "{manager_fix}"})
	portInitNoSMGuest = declare(Finding{ID: "port.state/init-no-sm-guest", Status: report.Fail,
		When: "an InfiniBand port of a virtual function in a virtual machine has its link up but is INIT or ARMED: the fabric's subnet manager, " +
			"which runs outside the guest, has not brought it ACTIVE",
		Message: "{state}: no subnet manager brought it ACTIVE (a VF in a virtual machine: the fabric's subnet manager runs outside it)",
		Fix:     guestSMFix})
	portNoLID = declare(Finding{ID: "port.state/no-lid", Status: report.Fail,
		When:    "an ACTIVE InfiniBand port has LID 0 or SM LID 0: no subnet manager answered",
		Message: "LID {lid}, SM LID {sm_lid}: no subnet manager answered", Fix: "{manager_fix}"})
	portDownLinkUp = declare(Finding{ID: "port.state/down-link-up", Status: report.Fail,
		When:    "the link is up but the port is not ACTIVE (and not waiting for a subnet manager)",
		Message: "{state}", Fix: "{port} is {state_name} with the link up: read `dmesg` for the driver's messages{tools}."})
	portDisabled = declare(Finding{ID: "port.state/disabled", Status: report.Warn,
		When:    "an InfiniBand port is Disabled: only management (ibportstate, the SM, the switch) disables one",
		Message: "{state}: disabled by management (unused on purpose, or switched off)",
		Fix:     "If {port} should carry traffic, enable it: {enable}." + unusedOffer})
	portDisabledInUse = declare(Finding{ID: "port.state/disabled-in-use", Status: report.Fail,
		When:    "an InfiniBand port is Disabled and the expectations file says how it must be (so it is in use)",
		Message: "{state}: disabled by management (unused on purpose, or switched off); the port is expected in use by {cite}",
		Fix:     "If {port} should carry traffic, enable it: {enable}." + unusedOffer})
	portNoLink = declare(Finding{ID: "port.state/no-link", Status: report.Fail,
		When:    "the port has no link (phys Polling or Sleep): no cable, a dead transceiver, or the other end down",
		Message: "{state}: no link",
		Fix:     "{port} has no link ({phys}): check the cable and transceiver are seated and the switch port is up{tools}." + unusedOffer})
	portEthDown = declare(Finding{ID: "port.state/eth-down", Status: report.Fail,
		When:    "a RoCE/iWARP port is down and its netdev is unknown or unreadable",
		Message: "{state}: no link",
		Fix: "{port} is down: `rdma link show {device}/{num}` names its netdev; `ip link show <netdev>` and `ethtool <netdev>` show whether it is down or has no carrier." +
			unusedOffer})
	portEthDownElsewhere = declare(Finding{ID: "port.state/eth-down-netdev-elsewhere", Status: report.Fail,
		When:    "a RoCE port is down and its netdev is in another network namespace (a pod or container sees the node's devices, not its netdevs)",
		Message: "{state}: no link; its netdev {netdev} is in another network namespace",
		Fix: "{port} is down and its netdev {netdev} is not in this network namespace, so nothing here can bring it up: on the node, " +
			"`ip link show {netdev}` and `ethtool {netdev}` tell an admin-down netdev from a missing carrier (cable, transceiver, switch port); " +
			"until the node's port is back, run the workload on another node." + unusedOffer})
	portAdminDown = declare(Finding{ID: "port.state/admin-down", Status: report.Fail,
		When:    "a RoCE/iWARP port is down and its netdev is administratively down",
		Message: "{state}: netdev {netdev} is administratively down",
		Fix:     "`ip link set {netdev} up`, and bring it up at boot in the network configuration." + unusedOffer})
	portNoCarrier = declare(Finding{ID: "port.state/no-carrier", Status: report.Fail,
		When:    "a RoCE/iWARP port is down and its netdev is up without carrier",
		Message: "{state}: netdev {netdev} is up but has no carrier",
		Fix: "{netdev} has no carrier although it is up: the cable, the transceiver or the switch port (`ethtool {netdev}` shows Link detected: no; " +
			"`ethtool -m {netdev}` reads the module; check the switch port is enabled and its speed matches)." + unusedOffer})
	portTraining = declare(Finding{ID: "port.state/training", Status: report.Fail,
		When:    "the link is neither up, polling nor disabled (training, or a state the kernel added)",
		Message: "{state}: link not up",
		Fix:     "{port} is training ({phys}): if it stays there, check the cable and the switch port's speed/width settings{tools}."})
	portLinkLayerDeviates = declare(Finding{ID: "port.state/link-layer-deviates", Status: report.Fail,
		When:    "the port's link layer is not the one the expectations file names",
		Message: "link layer {link_layer}, expected {want} by {cite}", Fix: portExpectFix})
	portRateDeviates = declare(Finding{ID: "port.state/rate-deviates", Status: report.Fail,
		When:    "an ACTIVE port's rate is not the one the expectations file names",
		Message: "rate {gbps} Gb/sec, expected {want} by {cite}", Fix: portExpectFix})
	portWidthDeviates = declare(Finding{ID: "port.state/width-deviates", Status: report.Fail,
		When:    "an ACTIVE port's width is not the one the expectations file names",
		Message: "width {width}, expected {want} by {cite}", Fix: portExpectFix})
	portRateUnknownExpected = declare(Finding{ID: "port.state/rate-unknown-expected", Status: report.Error,
		When:    "the expectations file names a rate or width and the port's rate cannot be read",
		Message: "rate unknown ({cause}), expected by {cite}", Fix: portsByHand})
	portRateUnknown = declare(Finding{ID: "port.state/rate-unknown", Status: report.Error,
		When:    "--expect-rate is given and the port's rate cannot be read",
		Message: "rate unknown: {cause}", Fix: portsByHand})
	portOneLane = declare(Finding{ID: "port.state/one-lane", Status: report.Warn,
		When:    "an InfiniBand port trained 1X: one lane of four",
		Message: "trained at {rate}: 1 lane of 4",
		Fix: "{port} runs on one lane: reseat or replace the cable/transceiver and check the switch port (`iblinkinfo` shows both ends' width); " +
			"the link works at a quarter of its rate."})
	portBelowRate = declare(Finding{ID: "port.state/below-rate", Status: report.Fail,
		When:    "a port's rate is below --expect-rate",
		Message: "rate {rate} below the expected {want} Gb/sec",
		Fix:     "{port} trained at {rate}: reseat or replace the cable/transceiver, check the switch port's speed and width, and the firmware."})
)

// portLabel names a port in messages: "mlx5_0 port 1".
func portLabel(dev string, port int) string { return fmt.Sprintf("%s port %d", dev, port) }

// portNetdev is the netdev that carries a RoCE port: the netdev named by its
// GID table (gid_attrs/ndevs), else a software device's parent, else the
// PCI function's only netdev.
func portNetdev(s *Survey, d sysfs.RDMADevice, p sysfs.RDMAPort) string {
	for _, g := range p.GIDs {
		if g.Netdev != "" {
			return g.Netdev
		}
	}
	if d.Parent != "" {
		return d.Parent
	}
	if d.PCIAddr != "" && p.LinkLayer == "Ethernet" {
		for _, n := range s.NICs {
			if n.Fn.Address == d.PCIAddr && len(n.Fn.Netdevs) == 1 {
				return n.Fn.Netdevs[0]
			}
		}
	}
	return ""
}

// stateText prints a port's state as a person reads it: "ACTIVE",
// "DOWN (phys Polling)".
func stateText(p sysfs.RDMAPort) string {
	st := p.State.String()
	if st == "" {
		st = "unknown"
	}
	if p.PhysState.Code == physLinkUp && p.State.Code == portStateActive {
		return st
	}
	ph := p.PhysState.String()
	if ph == "" {
		ph = "unknown"
	}
	return fmt.Sprintf("%s (phys %s)", st, ph)
}

func runPortState(_ context.Context, env *Env) Result {
	s := env.Survey()
	if s.DevicesErr != nil && !sysfs.IsNotExist(s.DevicesErr) {
		r := portDevicesUnreadable.result("", Slots{"cause": s.DevicesErr.Error()})
		r.Observed, r.Expected = "device list unreadable", "a readable /sys/class/infiniband"
		return r
	}
	if len(s.Devices) == 0 {
		r := portNoDevice.result("", nil)
		r.Observed, r.Expected = "no ports", "every port ACTIVE and LinkUp"
		return r
	}
	pj := newPortJudge(env)
	var vs []verdict
	var ports []any
	for _, d := range env.Model().Devices {
		if len(d.Ports) == 0 {
			vs = append(vs, noPortsVerdict(d.Dev))
			continue
		}
		for _, pm := range d.Ports {
			v := pj.judge(pm)
			vs = append(vs, v)
			ports = append(ports, v.evidence)
		}
	}
	r := combineUnits(vs, "port", "ports")
	r.Details = nil
	for _, v := range vs {
		if len(v.details) == 0 {
			r.Details = append(r.Details, v.line)
		}
		r.Details = append(r.Details, v.details...)
	}
	switch r.Status {
	case report.Pass:
		r.Summary = portsPassSummary(vs)
	case report.Skip:
		// No port is in use: nothing that should be up is down.
		none := portNoneInUse.At("", Slots{"count": fmt.Sprint(len(vs))})
		r.Status, r.Summary, r.Findings = none.Status, none.Message, append(r.Findings, none)
	}
	r.Expected = "every port in use ACTIVE and LinkUp; InfiniBand LID and SM LID ≠ 0, 4X (2X on split ports)"
	if env.Opts.ExpectRate > 0 {
		r.Expected += fmt.Sprintf("; rate ≥ %g Gb/sec", env.Opts.ExpectRate)
	}
	r.Evidence = map[string]any{"ports": ports, "expect_rate_gbps": env.Opts.ExpectRate}
	return r
}

// portsPassSummary says how many ports are up, and how many were not
// judged and why, when none failed.
func portsPassSummary(vs []verdict) string {
	up, skipped := 0, 0
	for _, v := range vs {
		if v.status == report.Skip {
			skipped++
		} else {
			up++
		}
	}
	if skipped == 0 {
		return portsAllUpHead.render(Slots{"count": fmt.Sprint(up)})
	}
	return portsUpHead.render(Slots{"count": fmt.Sprint(up)}) + notJudgedEnd.render(Slots{"count": fmt.Sprint(skipped)})
}

// port.state's headlines: the summary when every port judged is up.
const (
	portsAllUpHead headline = "all {count} ports ACTIVE and LinkUp"
	portsUpHead    headline = "{count} port(s) ACTIVE and LinkUp"
)

func noPortsVerdict(d sysfs.RDMADevice) verdict {
	problems := ""
	if len(d.Problems) > 0 {
		problems = " (" + strings.Join(d.Problems, "; ") + ")"
	}
	v := portNoPorts.unit(d.Name, Slots{"device": d.Name, "dir": sysfs.InfinibandClass + "/" + d.Name + "/ports",
		"problems": problems, "driver": valueOrUnknown(d.Driver)})
	v.severity = sevBroken
	return v
}

// portJudge judges one port at a time with what the whole host offers.
type portJudge struct {
	env     *Env
	netdevs map[string]sysfs.Netdev
	ndErr   error
}

// poolVF says why a VF's port is not in use on this host ("admin-down",
// "in another network namespace"); "" when the VF is in use here or its
// state cannot be told. A VF whose netdev this namespace uses while its
// PF's netdev is elsewhere (a pod's VF) is in use here.
func (pj *portJudge) poolVF(pm *PortModel) string {
	if !pm.IsVF() || pm.Netdev == "" || vfUsedHere(pj.env.Survey(), pm) {
		return ""
	}
	if !pm.NetdevHere {
		return "in another network namespace"
	}
	if nd, ok := pj.netdevs[pm.Netdev]; ok && !nd.AdminUp {
		return "admin-down"
	}
	return ""
}

func newPortJudge(env *Env) *portJudge {
	t := env.Netdevs()
	return &portJudge{env: env, netdevs: t.byName, ndErr: t.err}
}

// portUnit names a port as a finding's unit: "mlx5_0/1".
func portUnit(pm *PortModel) string { return fmt.Sprintf("%s/%d", pm.Device.Dev.Name, pm.Port.Num) }

// portSlots are the slots every finding about a port may use.
func portSlots(pm *PortModel) Slots {
	p := pm.Port
	return Slots{"port": pm.Label, "device": pm.Device.Dev.Name, "num": fmt.Sprint(p.Num), "state": stateText(p),
		"state_name": p.State.String(), "phys": p.PhysState.String(), "rate": p.Rate, "netdev": pm.Netdev}
}

// portObserved is the line that shows a port as it is: state, rate,
// transport, netdev and, on InfiniBand, its LIDs.
func portObserved(pm *PortModel, ib bool) string {
	p := pm.Port
	line := fmt.Sprintf("%s: %s, %s, %s", pm.Label, stateText(p), valueOrUnknown(p.Rate), pm.Transport)
	if pm.Netdev != "" {
		line += ", netdev " + pm.Netdev
	}
	if ib && p.HasLID {
		line += fmt.Sprintf(", LID 0x%x, SM LID 0x%x", p.LID, p.SMLID)
	}
	return line
}

func (pj *portJudge) judge(pm *PortModel) verdict {
	p := pm.Port
	ib := pm.Transport == InfiniBand || pm.Transport == OmniPath
	ev := map[string]any{"device": pm.Device.Dev.Name, "port": p.Num, "state": p.State.String(), "phys_state": p.PhysState.String(),
		"rate": p.Rate, "link_layer": p.LinkLayer, "transport": string(pm.Transport)}
	if pm.Netdev != "" {
		ev["netdev"] = pm.Netdev
	}
	if ib && p.HasLID {
		ev["lid"], ev["sm_lid"] = p.LID, p.SMLID
	}
	unit, line := portUnit(pm), portObserved(pm, ib)
	slots := portSlots(pm).with("observed", line)
	if p.State.Name == "" || p.PhysState.Name == "" {
		v := portUnreadable.unit(unit, slots.with("cause", strings.Join(p.Problems, "; ")))
		v.details, v.evidence = []string{line + " — state unknown"}, ev
		ev["ok"] = false
		return v
	}
	pe := pj.env.Expect.Port(pm.Device.Dev.Name, p.Num)
	if pe.Unused != nil && pe.Unused.V {
		ev["unused"] = true
		v := portUnused.unit(unit, slots.with("cite", pe.Unused.Cite()))
		v.evidence = ev
		return v
	}
	if pm.Representor && !portActive(p) {
		v := portRepresentor.unit(unit, slots)
		v.evidence = ev
		return v
	}
	if why := pj.poolVF(pm); why != "" && !portActive(p) {
		v := portPoolVF.unit(unit, slots.with("why", why))
		v.evidence = ev
		return v
	}
	var fs []report.Finding
	if !portActive(p) {
		fs = append(fs, expectedUp(pj.linkFinding(pm, ib, slots), pe, unit, slots))
	}
	addr := pj.addressFindings(pm, ib, slots)
	fs = append(fs, addr...)
	fs = append(fs, pj.rateFindings(pm, ib, ev, pe, slots)...)
	fs = append(fs, portExpectFindings(pm, pe, slots)...)
	if len(fs) == 0 {
		v := portActiveFinding.unit(unit, slots)
		v.evidence = ev
		ev["ok"] = true
		return v
	}
	v := verdict{status: report.Pass, line: line, evidence: ev, findings: fs}
	if !portActive(p) || len(addr) > 0 {
		// The port does not work (down, or no SM answered): it
		// outranks a port that works slower than asked.
		v.severity = sevBroken
	}
	var texts []string
	for _, f := range fs {
		if worse(f.Status, v.status) {
			v.status = f.Status
		}
		texts = append(texts, f.Message)
		if f.Fix != "" {
			v.remedy = joinRemedy(v.remedy, f.Fix)
		}
	}
	// The summary names the port and what is wrong; Details keep the
	// whole observed line.
	v.details = []string{line + " — " + strings.Join(texts, "; ")}
	v.line = pm.Label + " " + strings.Join(texts, "; ")
	ev["ok"] = v.status == report.Pass
	return v
}

func joinRemedy(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n" + b
}

// linkFinding judges a port that is not ACTIVE with its link up.
func (pj *portJudge) linkFinding(pm *PortModel, ib bool, slots Slots) report.Finding {
	p, unit := pm.Port, portUnit(pm)
	tools := slots.with("tools", linkHint(ib, pm.Netdev))
	switch {
	case p.PhysState.Code == physLinkUp:
		if ib && (p.State.Code == portStateInit || p.State.Code == portStateArmed) {
			if pj.guestVF(pm) {
				return portInitNoSMGuest.At(unit, guestSlots(slots, p))
			}
			return portInitNoSM.At(unit, slots.with("manager_fix", smRemedyFor(pm.Label, p, pm.Transport)))
		}
		return portDownLinkUp.At(unit, tools)
	case ib && p.PhysState.Code == physDisabled:
		// Only management (ibportstate, the SM, the switch) disables an
		// InfiniBand port: a port off on purpose is not a fault.
		enable := enableHint(true, pm.Device.Dev.Name, p.Num, pm.Netdev)
		if pj.guestVF(pm) {
			enable = render(guestEnableHint, guestSlots(slots, p))
		}
		return portDisabled.At(unit, slots.with("enable", enable))
	case !ib && (p.PhysState.Code == physDisabled || p.State.Code == portStateDown):
		return pj.ethernetDown(pm, slots)
	case p.PhysState.Code == physPolling || p.PhysState.Code == physSleep:
		return portNoLink.At(unit, tools)
	}
	return portTraining.At(unit, tools)
}

// ethernetDown judges a RoCE or iWARP port that is down: mlx5, bnxt_re and
// irdma report DOWN/Disabled whenever the netdev has no carrier, so the
// netdev's admin state says whose move it is.
func (pj *portJudge) ethernetDown(pm *PortModel, slots Slots) report.Finding {
	nd, ok := pj.netdevs[pm.Netdev]
	switch {
	case pm.NetdevAway():
		return portEthDownElsewhere.At(portUnit(pm), slots)
	case pm.Netdev == "" || pj.ndErr != nil || !ok:
		return portEthDown.At(portUnit(pm), slots)
	case !nd.AdminUp:
		return portAdminDown.At(portUnit(pm), slots)
	}
	return portNoCarrier.At(portUnit(pm), slots)
}

// expectedUp turns a disabled port's warning into a fault when the
// expectations file says how the port must be (so it is in use).
func expectedUp(f report.Finding, pe expect.PortExpect, unit string, slots Slots) report.Finding {
	cite := firstCite(pe)
	if f.ID != portDisabled.ID || cite == "" {
		return f
	}
	return portDisabledInUse.At(unit, slots.with("cite", cite, "enable", f.Slots["enable"]))
}

// firstCite names the first expectation the class has for a port.
func firstCite(pe expect.PortExpect) string {
	for _, c := range []string{pe.LinkLayer.Cite(), pe.Rate.Cite(), pe.Width.Cite(), pe.MTU.Cite(), pe.PFCPriority.Cite()} {
		if c != "" {
			return c
		}
	}
	return ""
}

// portExpectFindings compares an ACTIVE port with the expectations file:
// its link layer, rate and width; a deviation fails and names the key.
func portExpectFindings(pm *PortModel, pe expect.PortExpect, slots Slots) []report.Finding {
	p, unit := pm.Port, portUnit(pm)
	var fs []report.Finding
	if pe.LinkLayer != nil && !pe.LinkLayer.V.Match(p.LinkLayer) {
		fs = append(fs, portLinkLayerDeviates.At(unit, slots.with("link_layer", valueOrUnknown(p.LinkLayer),
			"want", pe.LinkLayer.V.String(), "cite", pe.LinkLayer.Cite())))
	}
	if p.State.Code != portStateActive || (pe.Rate == nil && pe.Width == nil) {
		return fs
	}
	rate, err := sysfs.ParseRate(p.Rate)
	if err != nil {
		return append(fs, portRateUnknownExpected.At(unit, slots.with("cause", err.Error(), "cite", firstCite(pe))))
	}
	if pe.Rate != nil && rate.Gbps != pe.Rate.V {
		fs = append(fs, portRateDeviates.At(unit, slots.with("gbps", fmt.Sprint(rate.Gbps), "want", fmt.Sprint(pe.Rate.V), "cite", pe.Rate.Cite())))
	}
	if pe.Width != nil && !pe.Width.V.Match(rate.Width) {
		fs = append(fs, portWidthDeviates.At(unit, slots.with("width", valueOrUnknown(rate.Width), "want", pe.Width.V.String(), "cite", pe.Width.Cite())))
	}
	return fs
}

// addressFindings judges an ACTIVE InfiniBand port's LID and SM LID.
func (pj *portJudge) addressFindings(pm *PortModel, ib bool, slots Slots) []report.Finding {
	p := pm.Port
	if !ib || p.State.Code != portStateActive || !p.HasLID || (p.LID != 0 && p.SMLID != 0) {
		return nil
	}
	fix := smRemedyFor(pm.Label, p, pm.Transport)
	if pj.guestVF(pm) {
		fix = render(guestSMFix, guestSlots(slots, p))
	}
	return []report.Finding{portNoLID.At(portUnit(pm), slots.with("lid", fmt.Sprintf("0x%x", p.LID), "sm_lid", fmt.Sprintf("0x%x", p.SMLID),
		"manager_fix", fix))}
}

// rateFindings judges the trained width of an InfiniBand port and the
// rate against --expect-rate. HCAs train 4X; 2X is how HDR100/NDR200
// split ports run; 1X on InfiniBand is a lane or cable fault. On
// Ethernet 1X is simply how a 25 GbE port reads.
func (pj *portJudge) rateFindings(pm *PortModel, ib bool, ev map[string]any, pe expect.PortExpect, slots Slots) []report.Finding {
	p, unit := pm.Port, portUnit(pm)
	if p.State.Code != portStateActive {
		return nil
	}
	rate, err := sysfs.ParseRate(p.Rate)
	if err != nil {
		if pj.env.Opts.ExpectRate > 0 {
			return []report.Finding{portRateUnknown.At(unit, slots.with("cause", err.Error()))}
		}
		return nil
	}
	ev["rate_gbps"] = rate.Gbps
	var fs []report.Finding
	if ib && rate.Width == "1X" && (pe.Width == nil || !pe.Width.V.Match("1X")) {
		fs = append(fs, portOneLane.At(unit, slots))
	}
	if want := pj.env.Opts.ExpectRate; want > 0 && rate.Gbps < want {
		fs = append(fs, portBelowRate.At(unit, slots.with("want", fmt.Sprint(want))))
	}
	return fs
}

// guestVF reports whether a port belongs to a virtual function handed to
// this host as a virtual machine (DeviceModel.GuestVF): no subnet manager
// can run from it, and the guest does not own the fabric. A whole HCA
// passed through to a guest is no VF: it may run a subnet manager, and
// keeps bare metal's advice.
func (pj *portJudge) guestVF(pm *PortModel) bool { return pm.Device.GuestVF }

// guestSMFix is the remedy for an InfiniBand VF port in a virtual machine
// that no subnet manager configured: the guest can neither run the
// fabric's SM nor ask it (sminfo and ibportstate need QP0), so the advice
// is to wait for the fabric, check the VM's platform agent, and redeploy
// or call the provider — never to start a subnet manager in the guest.
const guestSMFix = "{port}: this virtual machine cannot run the fabric's subnet manager: its port is an SR-IOV virtual function, which has no subnet " +
	"management QP (QP0), and the fabric belongs to the platform — its SM runs on a switch or a management node (on Azure, the platform's own), " +
	"so no subnet manager started in this VM can configure the port. A port goes ACTIVE with a LID once that SM configures it, usually within " +
	"minutes of the VM's start: wait and watch `ibstat` (State: Active, a non-zero Base lid). Check that the VM's platform agent runs (on Azure " +
	"the Linux guest agent: `systemctl status walinuxagent` or `waagent`) and that the VM size and image support InfiniBand. If the port stays " +
	"unconfigured, stop (deallocate) and start the VM, or redeploy it, so that it lands on another host; if that does not help, open a case with " +
	"the provider naming the VM and the port GUID ({guid})."

// guestSlots adds what guestSMFix names: the port GUID, or where to read it.
func guestSlots(slots Slots, p sysfs.RDMAPort) Slots {
	guid := portGUID(p)
	if guid == "" {
		guid = "the Port GUID that `ibstat` shows"
	}
	return slots.with("guid", guid)
}

// portsByHand says how to read port states without rdmadoctor.
const portsByHand = "Read the port files by hand: `grep . /sys/class/infiniband/*/ports/*/{state,phys_state,rate}`, or `ibstat` / `rdma link show`."

// smRemedyFor is smRemedy for one port, with the port's GUID when its GID
// table shows it (the interface ID of GID 0 is the port GUID on InfiniBand).
// Omni-Path fabrics are run by the Omni-Path fabric manager (opafm).
func smRemedyFor(label string, p sysfs.RDMAPort, t Transport) string {
	if t == OmniPath {
		return label + ": no fabric manager answered: check that the Omni-Path fabric manager runs (`opainfo` shows the port state and SM LID; " +
			"`systemctl status opafm` on the FM host or the switch's embedded FM); start it on one host only when none runs."
	}
	dev, port := labelParts(label)
	return label + ": no subnet manager answered. " + subnetManagerFixFor(dev, port, portGUID(p))
}

// portGUID is the port GUID as opensm -g takes it ("0x0c42a103002b3c4e"),
// read from GID 0 of an InfiniBand port; "" when unknown.
func portGUID(p sysfs.RDMAPort) string {
	for _, g := range p.GIDs {
		if g.Index != 0 {
			continue
		}
		ip := parseGID(g.GID)
		if ip == nil {
			return ""
		}
		id := ip[8:]
		if strings.Trim(string(id), "\x00") == "" {
			return ""
		}
		return fmt.Sprintf("0x%x", []byte(id))
	}
	return ""
}

// guestEnableHint is how a Disabled port of a VF in a virtual machine is
// enabled: not from the guest — ibportstate sends SMPs, which need the
// subnet-management QP (QP0) a VF does not have — but by the platform
// that disabled it.
const guestEnableHint = "not from this virtual machine — its port is an SR-IOV virtual function, without the subnet management QP (QP0) " +
	"that `ibportstate` needs, and the platform manages the fabric and the port: stop (deallocate) and start the VM, or redeploy it, " +
	"so that it lands on another host; if the port stays Disabled, open a case with the provider naming the VM and the port GUID ({guid})"

// enableHint says how to enable a Disabled port. An InfiniBand port is
// enabled by direct route from this host (it may have no LID while
// disabled), or from the switch side of the link.
func enableHint(ib bool, dev string, port int, nd string) string {
	if ib {
		return fmt.Sprintf("`ibportstate -C %s -P %d -D 0 %d enable`, or enable the switch side of the link", dev, port, port)
	}
	if nd != "" {
		return "`ip link set " + nd + " up`"
	}
	return "`ip link set <netdev> up`"
}

func linkHint(ib bool, nd string) string {
	if ib {
		return " (`ibstat`, `iblinkinfo`)"
	}
	if nd != "" {
		return fmt.Sprintf(" (`ip link show %s`, `ethtool %s`)", nd, nd)
	}
	return " (`ethtool <netdev>`)"
}

// firstBad is the observed value for a failed run: the first bad port.
func firstBad(_ *Survey, bad []string) string {
	if len(bad) == 1 {
		return bad[0]
	}
	return fmt.Sprintf("%s (and %d more)", bad[0], len(bad)-1)
}

func valueOrUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// port.state's flag: the rate a port must reach.
func init() {
	declareKnob(19, func(fs *pflag.FlagSet, o *Options) {
		fs.Float64Var(&o.ExpectRate, "expect-rate", 0, "port.state: fail ports slower than this many Gb/s (0: any rate)")
	}, func(o *Options, _ func(string) bool) error {
		if o.ExpectRate < 0 {
			return fmt.Errorf("--expect-rate %g: a rate is not negative (0: any rate)", o.ExpectRate)
		}
		return nil
	})
}
