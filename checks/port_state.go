package checks

import (
	"context"
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/checks/expect"
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
				"not judged (they follow the VF's use). With --expect-rate GBPS, a port whose rate is below that fails.",
			Why: "A port that is not ACTIVE carries no RDMA traffic; applications that pick it hang or fail to connect. On InfiniBand the subnet " +
				"manager assigns LIDs and moves ports from INIT to ACTIVE: LID 0 means no SM answered and nothing can be addressed. " +
				"A port that trained on fewer lanes (a bad cable, a 1X link) works, but at a fraction of its rate. A port switched off on purpose " +
				"is not a fault, and a node must not be drained for it.",
			Failures: []Failure{
				{report.Fail, "a port has no link (phys Polling): no cable, a dead transceiver, or the other end down",
					"Check the cable and transceiver and the switch port (`ibstat` / `iblinkinfo` on InfiniBand, `ethtool <netdev>` on Ethernet). " +
						"A port without a cable by design: `<device>/<port>.unused = true` in the expectations file (offered for every port with no link partner)."},
				{report.Fail, "a RoCE/iWARP port is down and its netdev is administratively down", "`ip link set <netdev> up`, and bring it up at boot in the network configuration."},
				{report.Fail, "a RoCE/iWARP port is down and its netdev is up without carrier",
					"The cable, the transceiver or the switch port: `ethtool <netdev>` (Link detected: no), `ethtool -m <netdev>` reads the module; check the switch port is enabled and its speed matches."},
				{report.Warn, "an InfiniBand port is Disabled (by management)",
					"If the port should carry traffic, enable it by direct route (`ibportstate -C <dev> -P <port> -D 0 <port> enable`) or from the switch side; if it is unused on purpose, say so in the expectations file."},
				{report.Fail, "an InfiniBand port is INIT/ARMED, or its LID or SM LID is 0: no subnet manager answered",
					"No subnet manager answered. " + subnetManagerFix("")},
				{report.Warn, "an InfiniBand port trained 1X: one lane of four", "Reseat or replace the cable/transceiver and check the switch port (`iblinkinfo` shows both ends)."},
				{report.Fail, "a device lists no ports", "Read `dmesg` for the driver's errors while it registered the device."},
				{report.Fail, "a port's rate is below --expect-rate", "Reseat or replace the cable/transceiver; check the switch port's speed and width settings (`ibportstate`, `ethtool`) and the card's firmware."},
				{report.Error, "a port's state, phys_state or rate could not be read",
					"Read them by hand: `grep . /sys/class/infiniband/<dev>/ports/<port>/{state,phys_state,rate}`, `ibstat <dev> <port>` or `rdma link show <dev>/<port>`; run where /sys/class/infiniband is readable."},
			},
		},
		Run: runPortState,
	})
}

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
		r := errorf("could not list RDMA devices: %v", s.DevicesErr)
		r.Observed, r.Expected = "device list unreadable", "a readable /sys/class/infiniband"
		r.Remedy = portsByHand
		return r
	}
	if len(s.Devices) == 0 {
		r := fail("no RDMA device: no port to judge")
		r.Observed, r.Expected = "no ports", "every port ACTIVE and LinkUp"
		r.Remedy = "Fix the RDMA devices first (see rdma.devices)."
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
	if r.Status == report.Pass || r.Status == report.Skip {
		r.Status = report.Pass
		r.Summary = portsPassSummary(vs)
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
		return fmt.Sprintf("all %d ports ACTIVE and LinkUp", up)
	}
	return fmt.Sprintf("%d port(s) ACTIVE and LinkUp; %d not judged (see details)", up, skipped)
}

func noPortsVerdict(d sysfs.RDMADevice) verdict {
	line := fmt.Sprintf("%s: no ports under %s/%s/ports", d.Name, sysfs.InfinibandClass, d.Name)
	if len(d.Problems) > 0 {
		line += " (" + strings.Join(d.Problems, "; ") + ")"
	}
	return verdict{status: report.Fail, line: line, severity: sevBroken,
		remedy: fmt.Sprintf("%s lists no ports: read `dmesg` for the driver's errors while it registered the device (%s).", d.Name, valueOrUnknown(d.Driver))}
}

// portJudge judges one port at a time with what the whole host offers.
type portJudge struct {
	env     *Env
	netdevs map[string]sysfs.Netdev
	ndErr   error
}

func newPortJudge(env *Env) *portJudge {
	t := env.Netdevs()
	return &portJudge{env: env, netdevs: t.byName, ndErr: t.err}
}

// portFinding is one thing wrong with a port, with its status and fix.
type portFinding struct {
	status report.Status
	text   string
	fix    string
}

func (pj *portJudge) judge(pm *PortModel) verdict {
	p := pm.Port
	ib := pm.Transport == InfiniBand || pm.Transport == OmniPath
	ev := map[string]any{"device": pm.Device.Dev.Name, "port": p.Num, "state": p.State.String(), "phys_state": p.PhysState.String(),
		"rate": p.Rate, "link_layer": p.LinkLayer, "transport": string(pm.Transport)}
	line := fmt.Sprintf("%s: %s, %s, %s", pm.Label, stateText(p), valueOrUnknown(p.Rate), pm.Transport)
	if pm.Netdev != "" {
		line += ", netdev " + pm.Netdev
		ev["netdev"] = pm.Netdev
	}
	if ib && p.HasLID {
		line += fmt.Sprintf(", LID 0x%x, SM LID 0x%x", p.LID, p.SMLID)
		ev["lid"], ev["sm_lid"] = p.LID, p.SMLID
	}
	v := verdict{status: report.Pass, line: line, evidence: ev}
	if p.State.Name == "" || p.PhysState.Name == "" {
		v.status, v.line = report.Error, pm.Label+" state unknown: "+strings.Join(p.Problems, "; ")
		v.details = []string{line + " — state unknown"}
		v.remedy = portsByHand
		ev["ok"] = false
		return v
	}
	pe := pj.env.Expect.Port(pm.Device.Dev.Name, p.Num)
	if pe.Unused != nil && pe.Unused.V {
		v.status, v.line = report.Skip, line+" — unused on purpose ("+pe.Unused.Cite()+"): not judged"
		ev["unused"] = true
		return v
	}
	if pm.Representor && !portActive(p) {
		v.status, v.line = report.Skip, line+" — a VF representor: its state follows the VF's use; not judged"
		return v
	}
	var fs []portFinding
	if !portActive(p) {
		fs = append(fs, expectedUp(pj.linkFinding(pm, ib), pe))
	}
	addr := pj.addressFindings(pm, ib)
	fs = append(fs, addr...)
	if !portActive(p) || len(addr) > 0 {
		// The port does not work (down, or no SM answered): it
		// outranks a port that works slower than asked.
		v.severity = sevBroken
	}
	fs = append(fs, pj.rateFindings(pm, ib, ev, pe)...)
	fs = append(fs, portExpectFindings(pm, pe)...)
	var texts []string
	for _, f := range fs {
		if worse(f.status, v.status) {
			v.status = f.status
		}
		texts = append(texts, f.text)
		if f.fix != "" {
			v.remedy = joinRemedy(v.remedy, f.fix)
		}
	}
	if len(texts) > 0 {
		// The summary names the port and what is wrong; Details keep the
		// whole observed line.
		v.details = []string{v.line + " — " + strings.Join(texts, "; ")}
		v.line = pm.Label + " " + strings.Join(texts, "; ")
	}
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
func (pj *portJudge) linkFinding(pm *PortModel, ib bool) portFinding {
	p, label, nd := pm.Port, pm.Label, pm.Netdev
	switch {
	case p.PhysState.Code == physLinkUp:
		if ib && (p.State.Code == portStateInit || p.State.Code == portStateArmed) {
			return portFinding{report.Fail, stateText(p) + ": no subnet manager brought it ACTIVE", smRemedyFor(label, p, pm.Transport)}
		}
		return portFinding{report.Fail, stateText(p),
			fmt.Sprintf("%s is %s with the link up: read `dmesg` for the driver's messages%s.", label, p.State, linkHint(ib, nd))}
	case ib && p.PhysState.Code == physDisabled:
		// Only management (ibportstate, the SM, the switch) disables an
		// InfiniBand port: a port off on purpose is not a fault.
		return portFinding{status: report.Warn, text: stateText(p) + ": disabled by management (unused on purpose, or switched off)",
			fix: fmt.Sprintf("If %s should carry traffic, enable it: %s.", label, enableHint(true, pm.Device.Dev.Name, p.Num, nd)) + unusedHint(pm)}
	case !ib && (p.PhysState.Code == physDisabled || p.State.Code == portStateDown):
		return pj.ethernetDown(pm)
	case p.PhysState.Code == physPolling || p.PhysState.Code == physSleep:
		return portFinding{status: report.Fail, text: stateText(p) + ": no link",
			fix: fmt.Sprintf("%s has no link (%s): check the cable and transceiver are seated and the switch port is up%s.", label, p.PhysState, linkHint(ib, nd)) + unusedHint(pm)}
	}
	return portFinding{report.Fail, stateText(p) + ": link not up",
		fmt.Sprintf("%s is training (%s): if it stays there, check the cable and the switch port's speed/width settings%s.", label, p.PhysState, linkHint(ib, nd))}
}

// ethernetDown judges a RoCE or iWARP port that is down: mlx5, bnxt_re and
// irdma report DOWN/Disabled whenever the netdev has no carrier, so the
// netdev's admin state says whose move it is.
func (pj *portJudge) ethernetDown(pm *PortModel) portFinding {
	p, label, name := pm.Port, pm.Label, pm.Netdev
	nd, ok := pj.netdevs[name]
	switch {
	case name == "" || pj.ndErr != nil || !ok:
		return portFinding{status: report.Fail, text: stateText(p) + ": no link",
			fix: fmt.Sprintf("%s is down: `rdma link show %s/%d` names its netdev; `ip link show <netdev>` and `ethtool <netdev>` show whether it is down or has no carrier.",
				label, pm.Device.Dev.Name, p.Num) + unusedHint(pm)}
	case !nd.AdminUp:
		return portFinding{status: report.Fail, text: fmt.Sprintf("%s: netdev %s is administratively down", stateText(p), name),
			fix: fmt.Sprintf("`ip link set %s up`, and bring it up at boot in the network configuration.", name) + unusedHint(pm)}
	}
	return portFinding{status: report.Fail, text: fmt.Sprintf("%s: netdev %s is up but has no carrier", stateText(p), name),
		fix: fmt.Sprintf("%s has no carrier although it is up: the cable, the transceiver or the switch port (`ethtool %s` shows Link detected: no; "+
			"`ethtool -m %s` reads the module; check the switch port is enabled and its speed matches).", name, name, name) + unusedHint(pm)}
}

// unusedHint is the remedy's offer for a port with no link partner
// (Polling, Disabled, no carrier): a port without a cable by design is not
// a fault, and the expectations file is how an operator says so — for
// every such port, not only an InfiniBand port disabled by management.
func unusedHint(pm *PortModel) string {
	return fmt.Sprintf(" If %s is unused on purpose (no cable by design), say so in the node's class of the expectations file: `%s/%d.unused = true` (not judged from then on).",
		pm.Label, pm.Device.Dev.Name, pm.Port.Num)
}

// expectedUp turns a disabled port's warning into a fault when the
// expectations file says how the port must be (so it is in use).
func expectedUp(f portFinding, pe expect.PortExpect) portFinding {
	cite := firstCite(pe)
	if f.status != report.Warn || cite == "" {
		return f
	}
	f.status = report.Fail
	f.text += "; the port is expected in use by " + cite
	return f
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
func portExpectFindings(pm *PortModel, pe expect.PortExpect) []portFinding {
	p := pm.Port
	const fix = "The port is not as its class says: reseat or replace the cable/transceiver, check the switch port and the firmware's link type; " +
		"if it changed on purpose, update the line of the expectations file the finding names."
	var fs []portFinding
	if pe.LinkLayer != nil && !pe.LinkLayer.V.Match(p.LinkLayer) {
		fs = append(fs, portFinding{report.Fail, fmt.Sprintf("link layer %s, expected %s by %s", valueOrUnknown(p.LinkLayer), pe.LinkLayer.V, pe.LinkLayer.Cite()), fix})
	}
	if p.State.Code != portStateActive || (pe.Rate == nil && pe.Width == nil) {
		return fs
	}
	rate, err := sysfs.ParseRate(p.Rate)
	if err != nil {
		return append(fs, portFinding{report.Error, fmt.Sprintf("rate unknown (%v), expected by %s", err, firstCite(pe)), portsByHand})
	}
	if pe.Rate != nil && rate.Gbps != pe.Rate.V {
		fs = append(fs, portFinding{report.Fail, fmt.Sprintf("rate %g Gb/sec, expected %g by %s", rate.Gbps, pe.Rate.V, pe.Rate.Cite()), fix})
	}
	if pe.Width != nil && !pe.Width.V.Match(rate.Width) {
		fs = append(fs, portFinding{report.Fail, fmt.Sprintf("width %s, expected %s by %s", valueOrUnknown(rate.Width), pe.Width.V, pe.Width.Cite()), fix})
	}
	return fs
}

// addressFindings judges an ACTIVE InfiniBand port's LID and SM LID.
func (pj *portJudge) addressFindings(pm *PortModel, ib bool) []portFinding {
	p := pm.Port
	if !ib || p.State.Code != portStateActive || !p.HasLID || (p.LID != 0 && p.SMLID != 0) {
		return nil
	}
	return []portFinding{{report.Fail, fmt.Sprintf("LID 0x%x, SM LID 0x%x: no subnet manager answered", p.LID, p.SMLID), smRemedyFor(pm.Label, p, pm.Transport)}}
}

// rateFindings judges the trained width of an InfiniBand port and the
// rate against --expect-rate. HCAs train 4X; 2X is how HDR100/NDR200
// split ports run; 1X on InfiniBand is a lane or cable fault. On
// Ethernet 1X is simply how a 25 GbE port reads.
func (pj *portJudge) rateFindings(pm *PortModel, ib bool, ev map[string]any, pe expect.PortExpect) []portFinding {
	p := pm.Port
	if p.State.Code != portStateActive {
		return nil
	}
	rate, err := sysfs.ParseRate(p.Rate)
	if err != nil {
		if pj.env.Opts.ExpectRate > 0 {
			return []portFinding{{report.Error, fmt.Sprintf("rate unknown: %v", err), portsByHand}}
		}
		return nil
	}
	ev["rate_gbps"] = rate.Gbps
	var fs []portFinding
	if ib && rate.Width == "1X" && (pe.Width == nil || !pe.Width.V.Match("1X")) {
		fs = append(fs, portFinding{report.Warn, fmt.Sprintf("trained at %s: 1 lane of 4", p.Rate),
			fmt.Sprintf("%s runs on one lane: reseat or replace the cable/transceiver and check the switch port (`iblinkinfo` shows both ends' width); "+
				"the link works at a quarter of its rate.", pm.Label)})
	}
	if want := pj.env.Opts.ExpectRate; want > 0 && rate.Gbps < want {
		fs = append(fs, portFinding{report.Fail, fmt.Sprintf("rate %s below the expected %g Gb/sec", p.Rate, want),
			fmt.Sprintf("%s trained at %s: reseat or replace the cable/transceiver, check the switch port's speed and width, and the firmware.", pm.Label, p.Rate)})
	}
	return fs
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
