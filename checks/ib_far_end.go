package checks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/mad"
	"github.com/rdmadoctor/rdmadoctor/report"
)

func init() {
	register(Check{
		ID: "ib.far_end", Code: 72, Level: 1,
		Title:      "the node at the other end of each InfiniBand cable, its port's link and its error counters",
		Privileges: []Need{needUmad},
		Explain: Explanation{
			Judges: "Every InfiniBand port libibumad finds whose link is up: directed-route SMPs one hop out through the port " +
				"(NodeInfo, NodeDescription, PortInfo of the neighbour's port the SMP entered by; this port's own PortInfo by an empty route), " +
				"then the neighbour's PMA PortCounters for that port, LID-routed to the neighbour (a switch's LID is its port 0's). " +
				"200 ms a try, two tries. Fails: the neighbour's port not Active, the link trained narrower than both ends enable " +
				"(a degraded cable or a lane down), the neighbour or its port other than the expectations class says (switch = \"leaf-03*\", " +
				"switch_port = 17). The neighbour's error counters are judged as rises across runs, " +
				"with the history pcie.aer and link.phy keep (--state), keyed by the neighbour's node GUID and port (a recabled link is a new " +
				"series; this host's reboot does not reset them, a value lower than the last is a clear and starts a new series): a rise of " +
				"LinkDownedCounter, LocalLinkIntegrityErrors or ExcessiveBufferOverrunErrors fails (NVSentinel treats them as fatal); " +
				"SymbolErrorCounter above 120/h fails (BER 1e-12, the specification's limit), below it warns, as do rises of " +
				"LinkErrorRecoveryCounter, PortRcvErrors and PortXmitDiscards. Without an earlier reading, counts above zero warn as " +
				"errors since the counters were last cleared. A rise that failed stays failing (still-failing) until counters.clean_runs " +
				"clean runs (3 by default), or `rdmadoctor ack ib.far_end` clears it.",
			Why: "The host's own counters never see what the switch receives: a cable that corrupts symbols towards the switch, or a link " +
				"that trained 1X on the switch side, shows only at the other end. A cable on the wrong switch or rail works and passes every " +
				"local check while the job's traffic crosses the fabric the long way.",
		},
		Run: runIBFarEnd,
	})
}

const farEndCableFix = "The link to {neighbour} port {nport} trained narrower than both ends enable: reseat or replace the cable or " +
	"transceiver, and check the switch port (`ibportstate -D 0,{num} query` shows both ends; the switch's own diagnostics the lanes)."

// ib.far_end's findings.
var (
	farFrame = declareMADFrame("ib.far_end")
	farOK    = declare(Finding{ID: "ib.far_end/ok", Status: report.Pass,
		When: "the neighbour answers, its port is Active at the width both ends enable, as the expectations say, and its error counters " +
			"did not rise since the previous run (on a first reading: none above zero), with no failure held",
		Message: "{port}: cabled to {neighbour} ({ntype}, GUID {nguid}) port {nport}, {width} {speed}, Active"})
	farLinkDown = declare(Finding{ID: "ib.far_end/link-down", Status: report.Skip,
		When:    "the port's physical link is not up: there is no far end to ask (port.state judges the link)",
		Message: "{port}: physical link not up ({phys}): no far end to ask"})
	farUnreachable = declare(Finding{ID: "ib.far_end/unreachable", Status: report.Error,
		When:    "a directed-route SMP one hop out got no answer or an error",
		Message: "{port}: the neighbour does not answer directed-route SMPs: {cause}",
		Fix: "Directed-route SMPs need no SM, only the neighbour's agent: a neighbour that does not answer has a management fault " +
			"(a switch whose SMA is busy or hung). Compare with `smpquery -D nodeinfo 0,{num}`."})
	farPortDown = declare(Finding{ID: "ib.far_end/neighbour-port-down", Status: report.Fail,
		When:    "the neighbour's port is not Active (the switch side of the link is down, initialising or armed)",
		Message: "{port}: {neighbour} port {nport} is {nstate} ({nphys}) on its side",
		Fix: "The link is up but the switch side is not Active: if it stays Initialize the SM has not configured it (see ib.sm); " +
			"otherwise check the switch port's state and log."})
	farAwaitingSM = declare(Finding{ID: "ib.far_end/awaiting-sm", Status: report.Skip,
		When: "both ends of the link are Initialize: the cable is up and no subnet manager has configured the link yet — ib.sm says why; " +
			"the far end is not at fault",
		Message: "{port}: {neighbour} port {nport} and this port are both Initialize ({nphys}): the link waits for a subnet manager (ib.sm), not judged"})
	farDegraded = declare(Finding{ID: "ib.far_end/width-degraded", Status: report.Fail,
		When:    "the link trained on fewer lanes than both ends enable (1X where 4X is enabled)",
		Message: "{port}: the link to {neighbour} port {nport} runs {width}, though both ends enable {enabled}", Fix: farEndCableFix})
	farWidthLimited = declare(Finding{ID: "ib.far_end/width-limited", Status: report.Fail,
		When: "the link runs narrower than both ends support because one end enables fewer lanes (a switch port set to 1X): " +
			"a configuration, not a cable, fault",
		Message: "{port}: the link to {neighbour} port {nport} runs {width}: {limited_by} enables only {enabled} of the widths it supports ({supported}), the other end wider",
		Fix: "Enable the full width on {limited_by}: on the switch, its port's link width setting (the switch's CLI or UFM); from this host, " +
			"`ibportstate -D 0,{num} query` shows LinkWidthEnabled on both ends. The port retrains at the new width when its link is reset."})
	farWrongSwitch = declare(Finding{ID: "ib.far_end/wrong-neighbour", Status: report.Fail,
		When:    "the neighbour's node description does not match the expectations class's switch key",
		Message: "{port}: cabled to {neighbour}, not {want_switch} ({cite})",
		Fix: "The cable lands on another switch than the class says (a rail or cabling mistake): move it to {want_switch}, " +
			"or correct the expectations line ({cite}) if the design changed."})
	farWrongPort = declare(Finding{ID: "ib.far_end/wrong-port", Status: report.Fail,
		When:    "the neighbour's port number differs from the expectations class's switch_port key",
		Message: "{port}: cabled to {neighbour} port {nport}, not port {want_port} ({cite})",
		Fix:     "The cable lands on another port of {neighbour} than the class says: move it to port {want_port}, or correct {cite}."})
	farCountersUnread = declare(Finding{ID: "ib.far_end/counters-unread", Status: report.Warn,
		When:    "the neighbour's PMA did not answer PortCounters (the link itself was judged)",
		Message: "{port}: {neighbour} port {nport}: PortCounters not read: {cause}"})
)

func runIBFarEnd(ctx context.Context, env *Env) Result {
	madMu.Lock()
	defer madMu.Unlock()
	t, ports, done := farFrame.ibPorts(env)
	if done != nil {
		return *done
	}
	defer t.Close()
	c := madClient(t)
	hr := newRiseRun(env)
	var fs []report.Finding
	var details []string
	for _, p := range ports {
		f, d := judgeFarEnd(ctx, env, hr, c, p)
		fs = append(fs, f...)
		details = append(details, d...)
	}
	r := combineFindings(fs, false)
	r.Details = details
	return r
}

// farEnd is what one port's neighbour said.
type farEnd struct {
	node     mad.NodeInfo
	desc     string
	port     mad.PortInfo // the neighbour's port the SMP entered by
	own      mad.PortInfo // this port, as its own agent says
	counters *mad.PortCounters
	pmaLID   uint16 // the LID the PMA query went to
	pmaErr   error
}

// judgeFarEnd judges one port's neighbour: the link from its side, the
// expectations, its counters.
func judgeFarEnd(ctx context.Context, env *Env, hr *historyRun, c *mad.Client, p mad.Port) ([]report.Finding, []string) {
	unit := p.Name()
	slots := Slots{"port": unit, "num": fmt.Sprint(p.Num), "phys": mad.PhysStateName(uint8(p.PhysState))}
	if p.PhysState != physLinkUp {
		return []report.Finding{farLinkDown.At(unit, slots)}, nil
	}
	fe, err := askFarEnd(ctx, c, p)
	if f, ok := farFrame.callFailed(unit, err); ok {
		return []report.Finding{f}, nil
	}
	if err != nil {
		return []report.Finding{farUnreachable.At(unit, slots.with("cause", err.Error()))}, nil
	}
	slots = slots.with("neighbour", fmt.Sprintf("%q", fe.desc), "ntype", mad.NodeTypeName(fe.node.NodeType),
		"nguid", fmt.Sprintf("0x%016x", fe.node.NodeGUID), "nport", fmt.Sprint(fe.node.LocalPortNum),
		"nstate", mad.PortStateName(fe.port.PortState), "nphys", mad.PhysStateName(fe.port.PhysState),
		"width", mad.WidthName(fe.port.LinkWidthActive), "speed", fe.port.SpeedName())
	fs := farLinkFindings(unit, slots, fe)
	fs = append(fs, farExpectFindings(env, unit, slots, fe)...)
	var notes []string
	if fe.counters != nil || len(fs) == 0 || fs[0].ID != farAwaitingSM.ID {
		// A link that waits for an SM has no LID to send the PMA query to:
		// that says nothing of the far end.
		var cf []report.Finding
		cf, notes = farCounterFindings(hr, unit, slots, fe)
		fs = append(fs, cf...)
	}
	if len(fs) == 0 {
		fs = append(fs, farOK.At(unit, slots))
	}
	detail := fmt.Sprintf("%s: neighbour %s %s port %d, LID %d, width %s (enabled %s), speed %s",
		unit, slots["neighbour"], slots["nguid"], fe.node.LocalPortNum, fe.port.LID, slots["width"],
		widthsName(fe.port.LinkWidthEnabled), slots["speed"])
	if len(notes) > 0 {
		detail += "; counters: " + strings.Join(notes, "; ")
	}
	return fs, []string{detail}
}

// askFarEnd asks the neighbour through a directed route one hop out.
func askFarEnd(ctx context.Context, c *mad.Client, p mad.Port) (farEnd, error) {
	var fe farEnd
	var err error
	out := mad.Route{Path: []uint8{uint8(p.Num)}}
	if fe.node, err = c.NodeInfo(ctx, p, out); err != nil {
		return fe, err
	}
	if fe.desc, err = c.NodeDesc(ctx, p, out); err != nil {
		return fe, err
	}
	if fe.port, err = c.PortInfo(ctx, p, out, fe.node.LocalPortNum); err != nil {
		return fe, err
	}
	if fe.own, err = c.PortInfo(ctx, p, mad.Route{Path: []uint8{}}, uint8(p.Num)); err != nil {
		return fe, err
	}
	// The PMA is a general service: LID routed, to the neighbour's LID (a
	// switch's is its management port 0's).
	lid := fe.port.LID
	if fe.node.NodeType == mad.NodeSwitch {
		sw, err := c.PortInfo(ctx, p, out, 0)
		if err != nil {
			fe.pmaErr = err
			return fe, nil
		}
		lid = sw.LID
	}
	if lid == 0 {
		fe.pmaErr = errors.New("the neighbour has no LID yet (no SM has configured it)")
		return fe, nil
	}
	fe.pmaLID = lid
	pc, err := c.PortCounters(ctx, p, lid, fe.node.LocalPortNum)
	if err != nil {
		fe.pmaErr = err
		return fe, nil
	}
	fe.counters = &pc
	return fe, nil
}

// farLinkFindings judges the link from the neighbour's side: Active, as
// wide as both ends enable (a lane lost), and as wide as both support (a
// port configured narrower).
func farLinkFindings(unit string, slots Slots, fe farEnd) []report.Finding {
	const stateInit, stateActive = 2, 4
	if fe.port.PortState == stateInit && fe.own.PortState == stateInit {
		return []report.Finding{farAwaitingSM.At(unit, slots)}
	}
	if fe.port.PortState != stateActive {
		return []report.Finding{farPortDown.At(unit, slots)}
	}
	active := mad.WidthLanes(fe.port.LinkWidthActive)
	both := fe.port.LinkWidthEnabled & fe.port.LinkWidthSupported & fe.own.LinkWidthEnabled & fe.own.LinkWidthSupported
	if widest := widestLanes(both); widest > 0 && active < widest {
		return []report.Finding{farDegraded.At(unit, slots.with("enabled", widthsName(both)))}
	}
	if f, ok := widthLimited(unit, slots, fe, active); ok {
		return []report.Finding{f}
	}
	return nil
}

// farExpectFindings compares the neighbour with the class's switch and
// switch_port keys.
func farExpectFindings(env *Env, unit string, slots Slots, fe farEnd) []report.Finding {
	sw, port := env.Expect.ExpectedSwitch()
	var fs []report.Finding
	if sw != nil && !sw.V.Match(fe.desc) {
		fs = append(fs, farWrongSwitch.At(unit, slots.with("want_switch", sw.V.String(), "cite", sw.Cite())))
	}
	if port != nil && port.V != int(fe.node.LocalPortNum) {
		fs = append(fs, farWrongPort.At(unit, slots.with("want_port", fmt.Sprint(port.V), "cite", port.Cite())))
	}
	return fs
}

// widthLimited finds a link that runs narrower because one end enables
// fewer widths than it supports (a switch port set to 1X) while the other
// end enables wider: a configuration fault, not a cable's.
func widthLimited(unit string, slots Slots, fe farEnd, active int) (report.Finding, bool) {
	ownCap := widestLanes(fe.own.LinkWidthEnabled & fe.own.LinkWidthSupported)
	farCap := widestLanes(fe.port.LinkWidthEnabled & fe.port.LinkWidthSupported)
	narrowed := func(p mad.PortInfo) bool { return widestLanes(p.LinkWidthEnabled) < widestLanes(p.LinkWidthSupported) }
	var by string
	var p mad.PortInfo
	switch {
	case narrowed(fe.port) && active < ownCap:
		by, p = fmt.Sprintf("%s port %d", slots["neighbour"], fe.node.LocalPortNum), fe.port
	case narrowed(fe.own) && active < farCap:
		by, p = "this port", fe.own
	default:
		return report.Finding{}, false
	}
	return farWidthLimited.At(unit, slots.with("limited_by", by, "enabled", widthsName(p.LinkWidthEnabled), "supported", widthsName(p.LinkWidthSupported))), true
}

// widestLanes is the most lanes among the widths a LinkWidth mask holds.
func widestLanes(mask uint8) int {
	n := 0
	for bit := uint8(1); bit != 0 && bit <= 16; bit <<= 1 {
		if mask&bit != 0 {
			n = max(n, mad.WidthLanes(bit))
		}
	}
	return n
}

// widthsName spells a LinkWidth mask: "1X or 4X".
func widthsName(mask uint8) string {
	var out []string
	for bit := uint8(1); bit != 0 && bit <= 16; bit <<= 1 {
		if mask&bit != 0 {
			out = append(out, mad.WidthName(bit))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, " or ")
}
