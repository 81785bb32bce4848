package checks

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

func init() {
	register(Check{
		ID: "link.phy", Code: 60, Level: 1,
		Title: "the physical layer of every RoCE/Ethernet port: no uncorrectable FEC blocks, pre-FEC BER within the standard's limit, no flaps, no pause storm",
		Needs: []string{"rdma.devices"},
		Explain: Explanation{
			Judges: "Every netdev that carries an RDMA port (on an mlx5 RoCE LAG each slave of the bond; a software device's parent), through the " +
				"ethtool netlink API over one socket per run: FEC_GET with statistics (the active FEC mode; corrected and uncorrectable blocks and " +
				"corrected bits, per lane where the driver gives them), LINKSTATE_GET (link, extended state and substate when down, link-down " +
				"events) and LINKMODES_GET (speed and lanes: 25G NRZ lanes and 50G+ PAM4 lanes use different RS-FECs), and the driver's " +
				"statistics through the SIOCETHTOOL ioctl (`ethtool -S`: mlx5's rx_corrected_bits_phy, rx_bits_phy, rx_symbol_err_phy, " +
				"link_down_events_phy, tx_pause_storm_*_events; bnxt_en's rx_corrected_bits, rx_bits, rx_fec_uncorrectable_blocks, " +
				"link_down_events), with /sys/class/net/<if>/carrier_down_count where the driver counts no link-down events. Every counter is " +
				"judged as a rise: with --state since the previous run (a new boot or a lower value starts a new baseline), else since boot. " +
				"Uncorrectable FEC blocks rising since the previous run fail; pre-FEC BER (corrected bits over received bits, or over speed × time) " +
				"above the limit of the active FEC warns (RS(544,514) on PAM4 lanes 2.4e-4, RS(528,514) on 25G lanes 5e-5: docs/link-health.md); " +
				"rx_symbol_err_phy above 120/h warns; link-down events: 3 in a day warn, 5 fail; pause-storm error events fail, warnings warn. " +
				"A link that is down with an extended state fails naming the cause (cable, module, overheat, power budget, negotiation). A " +
				"driver with no FEC and no PHY statistics (dummy, virtio_net, veth) answers EOPNOTSUPP: skip, never fail. With --state a counter " +
				"whose rise failed stays failing (still-failing) until it has had counters.clean_runs clean runs (3 by default), or " +
				"`rdmadoctor ack link.phy` clears it.",
			Why: "A cable or transceiver that degrades shows first in the FEC counters: the link still looks ACTIVE while FEC corrects more and more, " +
				"then frames the FEC cannot correct are dropped — on RoCE every drop costs a retransmission timeout, and a link that flaps takes every " +
				"RDMA connection over it down with it. Reading them tells which cable or module to replace before the job fails.",
		},
		Run: runLinkPHY,
	})
}

// link.phy's findings: one unit per netdev (its RDMA ports named in the
// message), judged by judgePHY, combined with the shared precedence.
const (
	phyByHand  = "Look by hand: `ethtool -I --show-fec {netdev}`, `ethtool {netdev}` (link and extended state) and `ethtool -S {netdev} | grep _phy`."
	phyReplace = "Reseat the cable at both ends; if the errors go on, replace the cable (DAC/AOC) or the transceivers and clean or replace the fiber, " +
		"then compare the switch port's own FEC counters: errors that stay with the port after a cable swap point at the NIC or the switch port."
	sinceBootFix = "Run again with `--state FILE` (e.g. from a timer): link.phy then judges the rise since this run. Meanwhile " +
		"`ethtool -I --show-fec {netdev}` and `ethtool -S {netdev}` show the counters."
)

var (
	phyHealthy = declare(Finding{ID: "link.phy/healthy", Status: report.Pass,
		When:    "the link is up, no uncorrectable FEC block rose, the pre-FEC BER is within its limit, no flaps, no pause storm",
		Message: "{netdev} ({ports}): {observed}"})
	phyNotApplicable = declare(Finding{ID: "link.phy/no-phy-stats", Status: report.Skip,
		When:    "the netdev's driver has no FEC and no PHY statistics (dummy, virtio_net, veth, rxe's parent in a VM): the kernel answers EOPNOTSUPP",
		Message: "{netdev} ({ports}): {driver} has no FEC or PHY statistics (FEC_GET: {errno}): not judged"})
	phyNoPort = declare(Finding{ID: "link.phy/no-port", Status: report.Skip,
		When:    "no RDMA port has a netdev in this network namespace (InfiniBand ports, or every netdev elsewhere)",
		Message: "no RDMA port with an Ethernet netdev here: {why}"})
	phyNotRecorded = declare(Finding{ID: "link.phy/not-recorded", Status: report.Skip,
		When:    "a snapshot or fixture holds no ethtool answers (taken by a version without link.phy)",
		Message: "{cause}: nothing to judge (a capture taken before ethtool answers were recorded)"})
	phyEthtoolFailed = declare(Finding{ID: "link.phy/ethtool-unavailable", Status: report.Error,
		When:    "neither the ethtool netlink family nor the SIOCETHTOOL ioctl could be asked",
		Message: "ethtool could not be asked: {cause}",
		Fix:     "Look by hand: `ethtool -I --show-fec <netdev>` and `ethtool -S <netdev>` for each RDMA netdev."})
	phyUnreadable = declare(Finding{ID: "link.phy/unreadable", Status: report.Error,
		When:    "a request about the netdev failed with something other than EOPNOTSUPP",
		Message: "{netdev} ({ports}): {request} failed: {cause}", Fix: phyByHand})
	phyDownNoCause = declare(Finding{ID: "link.phy/down-no-cause", Status: report.Skip,
		When:    "the link is down and the driver gives no extended state: port.state judges the port",
		Message: "{netdev} ({ports}): link down, the driver names no cause (port.state judges the port)"})
	phyUncorrectable = declare(Finding{ID: "link.phy/fec-uncorrectable", Status: report.Fail,
		When:    "uncorrectable FEC blocks rose since the previous run (--state): frames were lost on the wire",
		Message: "{netdev} ({ports}): {count} uncorrectable FEC blocks {over}{lanes} (FEC {fec}): frames lost on the wire",
		Fix:     "{netdev} ({ports}) loses frames its FEC cannot correct: the signal is beyond what FEC repairs. " + phyReplace})
	phySinceBoot = declare(Finding{ID: "link.phy/since-boot", Status: report.Warn,
		When:    "without an earlier reading, a counter that fails when it rises is nonzero since boot (uncorrectable FEC blocks, pause-storm errors)",
		Message: "{netdev} ({ports}): {count} {what} {over}; whether they still rise needs a second run with --state",
		Fix:     sinceBootFix})
	phyHighBER = declare(Finding{ID: "link.phy/pre-fec-ber", Status: report.Warn,
		When:    "the pre-FEC bit error ratio over the interval is above the limit of the active FEC (docs/link-health.md)",
		Message: "{netdev} ({ports}): pre-FEC BER {ber} {over} ({bits_from}), above {limit} for {fec_kind}",
		Fix: "{netdev} ({ports}) still delivers frames (FEC corrects them) but with little margin left: plan to replace its cable or transceivers " +
			"before it loses frames; clean the fiber connectors, and compare with the pre-FEC BER the switch port reports."})
	phySymbolErrors = declare(Finding{ID: "link.phy/symbol-errors", Status: report.Warn,
		When:    "rx_symbol_err_phy (frames dropped for symbol errors) rises faster than 120/h",
		Message: "{netdev} ({ports}): {count} symbol errors {over} ({rate}/h, above 120/h)",
		Fix:     "{netdev} ({ports}) drops frames for symbol errors. " + phyReplace})
	phyFlapping = declare(Finding{ID: "link.phy/flapping", Status: report.Warn,
		When:    "the link went down 3 or 4 times in a day (link-down events, or carrier drops where the driver counts none)",
		Message: "{netdev} ({ports}): link went down {count} times {over} ({counter})",
		Fix: "{netdev}'s link goes down and up, taking every RDMA connection over it down: reseat or replace the cable and transceivers and read " +
			"the switch port's log for the same flaps; if it goes on, drain the node."})
	phyFlappingDrain = declare(Finding{ID: "link.phy/flapping-drain", Status: report.Fail,
		When:    "the link went down 5 times or more in a day",
		Message: "{netdev} ({ports}): link went down {count} times {over} ({counter}): flapping",
		Fix: "Drain the node: {netdev}'s link flaps and every RDMA connection over it fails. Replace the cable and transceivers of {netdev} and " +
			"read the switch port's log; a link that flaps with a new cable points at the NIC or the switch port."})
	phyPauseStorm = declare(Finding{ID: "link.phy/pause-storm", Status: report.Fail,
		When:    "tx_pause_storm_error_events rose since the previous run: the NIC sent pause frames so long that it stopped (the host stalled its receive path)",
		Message: "{netdev} ({ports}): {count} pause-storm error events {over}: the NIC stopped sending pause frames",
		Fix: "The host did not take frames off {netdev}'s receive buffer for longer than the NIC's pause-storm timeout, and the pauses it sent " +
			"stalled the fabric: read `dmesg` for the driver's messages (TX timeout, health) and look for what stalls the host (CPU, PCIe); " +
			"`ethtool --get-tunable {netdev} pfc-prevention-tout` shows the timeout."})
	phyStillFailing = declare(Finding{ID: "link.phy/still-failing", Status: report.Fail,
		When: "with --state, a counter whose rise failed (uncorrectable FEC blocks, flapping, pause-storm errors) has not failed since but has " +
			"had fewer clean runs than it needs to pass again (3, or counters.clean_runs in the expectations file), and `rdmadoctor ack link.phy` " +
			"has not cleared it",
		Message: "{netdev} ({ports}): {what} since {failing_since}, not this run; still failing: passes again after {clean_runs} clean runs ({clean_so_far} so far)",
		Fix:     "As for the failure held: {fix} After a repair, `rdmadoctor ack link.phy --unit {netdev} --reason TEXT` ends the wait for clean runs."})
	phyPauseWarning = declare(Finding{ID: "link.phy/pause-storm-warning", Status: report.Warn,
		When:    "tx_pause_storm_warning_events rose since the previous run: the NIC sent pause frames for long stretches",
		Message: "{netdev} ({ports}): {count} pause-storm warning events {over}",
		Fix:     "{netdev}'s receive path falls behind: read `dmesg` and the host's load; a pause storm that reaches the error watermark stalls the fabric."})
)

// phyUnit is one netdev judged, with the RDMA ports it carries.
type phyUnit struct {
	netdev string
	ports  []string
	vf     bool   // a VF's or sub-function's netdev: its PF owns the PHY
	driver string // the PCI function's driver; "" for a software device's parent
}

func runLinkPHY(_ context.Context, env *Env) Result {
	units, elsewhere := phyUnits(env)
	if len(units) == 0 {
		why := "no RDMA port has an Ethernet netdev (InfiniBand ports are judged by counters.errors)"
		if len(elsewhere) > 0 {
			why = "the netdevs " + strings.Join(elsewhere, ", ") + " are in another network namespace"
		}
		return phyNoPort.result("", Slots{"why": why})
	}
	names := make([]string, len(units))
	for i, u := range units {
		names[i] = u.netdev
	}
	answers, err := env.Host.Ethtool(names)
	switch {
	case errors.Is(err, sysfs.ErrEthtoolNotRecorded):
		return phyNotRecorded.result("", Slots{"cause": err.Error()})
	case err != nil:
		return phyEthtoolFailed.result("", Slots{"cause": err.Error()})
	}
	hr := newRiseRun(env)
	var fs []report.Finding
	var details []string
	for _, u := range units {
		j := &phyJudge{env: env, hr: hr, netdev: u.netdev, vf: u.vf, pciDriver: u.driver, ans: answers[u.netdev],
			slots: Slots{"netdev": u.netdev, "ports": strings.Join(u.ports, ", ")}}
		fs = append(fs, j.judge()...)
		if ack := hr.ackNote("link.phy", u.netdev); ack != "" {
			j.notes = append(j.notes, ack) // after the pass line took its notes: the details only
		}
		if len(j.notes) > 0 {
			details = append(details, u.netdev+": "+strings.Join(j.notes, "; "))
		}
	}
	for _, nd := range elsewhere {
		details = append(details, nd+": in another network namespace: not judged here")
	}
	r := combineFindings(fs, false)
	r.Details = details
	r.Observed = tallyFindings(fs)
	r.Expected = "no uncorrectable FEC blocks, pre-FEC BER within the limit, no flaps, no pause storm"
	return r
}

// phyUnits lists the netdevs that carry RDMA ports here, each with its
// ports, and the netdevs of ports whose netdev is in another namespace.
func phyUnits(env *Env) (units []phyUnit, elsewhere []string) {
	byName := map[string]int{}
	for _, pm := range env.Model().Ports {
		if pm.Netdev == "" || pm.Representor || pm.Transport == InfiniBand || pm.Transport == OmniPath {
			continue
		}
		if !pm.NetdevHere {
			elsewhere = appendUnique(elsewhere, pm.Netdev)
			continue
		}
		nds := pm.DCBNetdevs
		if len(nds) == 0 {
			nds = []string{pm.Netdev}
		}
		for _, nd := range nds {
			i, ok := byName[nd]
			if !ok {
				i = len(units)
				byName[nd] = i
				units = append(units, phyUnit{netdev: nd})
			}
			units[i].ports = appendUnique(units[i].ports, pm.Label)
			units[i].vf, units[i].driver = pm.IsVF(), pciDriverOf(env, pm)
		}
	}
	sort.Slice(units, func(a, b int) bool { return units[a].netdev < units[b].netdev })
	return units, elsewhere
}

// pciDriverOf is the driver of the PCI function a port's device sits on;
// "" for a software device (rxe, siw), whose netdev is another driver's.
func pciDriverOf(env *Env, pm *PortModel) string {
	if pm.Device.Function == SoftwareDevice || pm.Device.Dev.PCIAddr == "" {
		return ""
	}
	for _, n := range env.Survey().NICs {
		if n.Fn.Address == pm.Device.Dev.PCIAddr {
			return n.Fn.Driver
		}
	}
	return ""
}

// tallyFindings says how many units got each status: "2 pass, 1 skip".
func tallyFindings(fs []report.Finding) string {
	n := map[report.Status]int{}
	units := map[report.Status]map[string]bool{}
	for _, f := range fs {
		if units[f.Status] == nil {
			units[f.Status] = map[string]bool{}
		}
		if !units[f.Status][f.Unit] {
			units[f.Status][f.Unit] = true
			n[f.Status]++
		}
	}
	var parts []string
	for _, st := range []report.Status{report.Fail, report.Error, report.Warn, report.Pass, report.Skip} {
		if n[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[st], st))
		}
	}
	return strings.Join(parts, ", ") + " (netdevs)"
}
