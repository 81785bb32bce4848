package checks

import (
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// A link that is down with an extended state (LINKSTATE_GET's
// ext_state/ext_substate, include/uapi/linux/ethtool.h) fails with the
// cause named, and the fix for that cause: what is to be replaced.
const downMsg = "{netdev} ({ports}): link down: {cause}"

var (
	phyDownCable = declare(Finding{ID: "link.phy/down-cable", Status: report.Fail,
		When:    "the link is down and the driver says: no cable, cable issue, bad signal integrity or link training failure",
		Message: downMsg,
		Fix: "{netdev} ({ports}) is down for its cable ({cause}): reseat the cable at both ends; if it stays down, replace the cable (DAC/AOC) or " +
			"the transceivers and the fiber, and check the switch port is up at the same speed. `ethtool {netdev}` shows the cause."})
	phyDownModule = declare(Finding{ID: "link.phy/down-module", Status: report.Fail,
		When:    "the link is down and the driver says the module is not ready or its EEPROM unreadable",
		Message: downMsg,
		Fix: "The transceiver module of {netdev} ({ports}) does not come up ({cause}): reseat it; replace it if it stays down, with a module the NIC " +
			"supports (`ethtool -m {netdev}` shows vendor and part)."})
	phyDownOverheat = declare(Finding{ID: "link.phy/down-overheat", Status: report.Fail,
		When:    "the link is down and the driver says the module overheated",
		Message: downMsg,
		Fix: "The module of {netdev} ({ports}) shut down hot: check the chassis airflow and fans and the module's temperature (`ethtool -m {netdev}`); " +
			"a module that overheats with good airflow is failing: replace it."})
	phyDownPower = declare(Finding{ID: "link.phy/down-power-budget", Status: report.Fail,
		When:    "the link is down and the driver says the module needs more power than the cage allows",
		Message: downMsg,
		Fix: "The module in {netdev} ({ports}) draws more power than the NIC's cage allows ({cause}): use a module of a power class the NIC supports " +
			"(its datasheet; `ethtool -m {netdev}` shows the module's class), e.g. a lower-power optic instead of a high-power AOC."})
	phyDownNegotiation = declare(Finding{ID: "link.phy/down-negotiation", Status: report.Fail,
		When:    "the link is down and the driver says autonegotiation failed or the two ends mismatch (FEC, lanes)",
		Message: downMsg,
		Fix: "The two ends of {netdev} ({ports}) do not agree ({cause}): set the same speed and FEC mode on the NIC and the switch port " +
			"(`ethtool --show-fec {netdev}`, `ethtool --set-fec {netdev} encoding rs`), or autonegotiation on both."})
	phyDownOther = declare(Finding{ID: "link.phy/down-other", Status: report.Fail,
		When:    "the link is down with an extended state this check has no remedy for (calibration failure, a state added later)",
		Message: downMsg,
		Fix:     "{netdev} ({ports}) is down ({cause}): read `ethtool {netdev}` and `dmesg` for the driver's messages, reseat the cable and the module."})
)

// downFinding is the finding of a link that is down for the cause the
// driver names.
func downFinding(state string) *Finding {
	switch state {
	case sysfs.LinkExtNoCable, sysfs.LinkExtCable, sysfs.LinkExtSignal, sysfs.LinkExtTraining:
		return phyDownCable
	case sysfs.LinkExtEEPROM, sysfs.LinkExtModule:
		return phyDownModule
	case sysfs.LinkExtOverheat:
		return phyDownOverheat
	case sysfs.LinkExtPowerBudget:
		return phyDownPower
	case sysfs.LinkExtAutoneg, sysfs.LinkExtLogicalMismatch:
		return phyDownNegotiation
	}
	return phyDownOther
}
