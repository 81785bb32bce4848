package sysfs

import "strconv"

// The extended link states, as include/uapi/linux/ethtool.h enumerates
// them (enum ethtool_link_ext_state and the enum ethtool_link_ext_substate_*
// of each), named as `ethtool <if>` prints them ("Link detected: no
// (Cable issue, Unsupported cable)", ethtool's netlink/settings.c).

// Extended states: the index is the kernel's value.
var linkExtStates = []string{
	"Autoneg",               // ETHTOOL_LINK_EXT_STATE_AUTONEG
	"Link training failure", // _LINK_TRAINING_FAILURE
	"Logical mismatch",      // _LINK_LOGICAL_MISMATCH
	"Bad signal integrity",  // _BAD_SIGNAL_INTEGRITY
	"No cable",              // _NO_CABLE
	"Cable issue",           // _CABLE_ISSUE
	"EEPROM issue",          // _EEPROM_ISSUE
	"Calibration failure",   // _CALIBRATION_FAILURE
	"Power budget exceeded", // _POWER_BUDGET_EXCEEDED
	"Overheat",              // _OVERHEAT
	"Module",                // _MODULE (5.15+)
}

// The kernel's values of the states link.phy names a cause for.
const (
	LinkExtAutoneg         = "Autoneg"
	LinkExtTraining        = "Link training failure"
	LinkExtLogicalMismatch = "Logical mismatch"
	LinkExtSignal          = "Bad signal integrity"
	LinkExtNoCable         = "No cable"
	LinkExtCable           = "Cable issue"
	LinkExtEEPROM          = "EEPROM issue"
	LinkExtCalibration     = "Calibration failure"
	LinkExtPowerBudget     = "Power budget exceeded"
	LinkExtOverheat        = "Overheat"
	LinkExtModule          = "Module"
)

// linkExtSubstates are the substates of each state that has them, by the
// state's value; the index is the substate's value (0 is unused).
var linkExtSubstates = map[int][]string{
	0: {"", "No partner detected", "Ack not received", "Next page exchange failed",
		"No partner detected during force mode", "FEC mismatch during override", "No HCD"},
	1: {"", "KR frame lock not acquired", "KR link inhibit timeout",
		"KR Link partner did not set receiver ready", "Remote side is not ready yet"},
	2: {"", "PCS did not acquire block lock", "PCS did not acquire AM lock", "PCS did not get align_status",
		"FC FEC is not locked", "RS FEC is not locked"},
	3: {"", "Large number of physical errors", "Unsupported rate", "Serdes reference clock lost",
		"Serdes ALOS"},
	5:  {"", "Unsupported cable", "Cable test failure"},
	10: {"", "CMIS module is not in ModuleReady state"},
}

// LinkExtStateName names an extended link state; a value this table does
// not know is "state <n>".
func LinkExtStateName(v int) string {
	if v >= 0 && v < len(linkExtStates) {
		return linkExtStates[v]
	}
	return "state " + strconv.Itoa(v)
}

// LinkExtSubstateName names a substate of state; "" for 0 (none given) and
// "substate <n>" for one this table does not know.
func LinkExtSubstateName(state, sub int) string {
	if sub == 0 {
		return ""
	}
	if names, ok := linkExtSubstates[state]; ok && sub < len(names) {
		return names[sub]
	}
	return "substate " + strconv.Itoa(sub)
}
