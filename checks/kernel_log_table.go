package checks

import (
	"regexp"
	"strings"
	"sync"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// kernel.log's findings about a known message, one per device and kind of
// message: the line quoted is the newest of its kind, the count says how
// many there were in what was read.
const knownMsgHead = "{device}: {count} line(s) {since}, the last {when}: \"{line}\""

var (
	klogTxTimeout = declare(Finding{ID: "kernel.log/tx-timeout", Status: report.Fail,
		When: "the netdev watchdog or the driver logged a transmit-queue timeout on an RDMA NIC's netdev",
		Message: knownMsgHead + " — a send queue stopped completing: the NIC or its firmware hung, and the driver reset the " +
			"channel or the function; RDMA traffic on the port stalled meanwhile",
		Fix: "Read the lines around it (`dmesg -T | grep -B5 -A20 {device_word}`) for the driver's recovery: a recurring timeout with no " +
			"cable or link event beside it is the NIC or its firmware — update the firmware to the release NVIDIA/the vendor lists for " +
			"this driver, and replace the card if it recurs; `devlink health show` says whether the tx reporter recovered."})
	klogFWFatal = declare(Finding{ID: "kernel.log/fw-fatal", Status: report.Fail,
		When:    "the mlx5 health poller found the firmware unresponsive or in a fatal state",
		Message: knownMsgHead + " — the adapter's firmware stopped answering or reported a fatal error: the driver tears the device down",
		Fix: "Collect `devlink health dump show pci/{device_word} reporter fw_fatal` and the syndrome lines after it, then reset the adapter " +
			"(`mlxfwreset -d {device_word} reset` or a power cycle of the host); a repeated fatal error is a hardware fault: replace the card."})
	klogSlotPower = declare(Finding{ID: "kernel.log/insufficient-power", Status: report.Warn,
		When:    "mlx5 reported insufficient power on the PCIe slot",
		Message: knownMsgHead + " — the slot advertises less power than the adapter needs, so the firmware may throttle it or power ports down",
		Fix: "Check the slot's power limit (`lspci -vvv -s {device_word} | grep -i SlotPowerLimit`) and the server's riser/slot documentation: " +
			"move the card to a slot that supplies its rated power or fix the slot power limit in the BIOS. Some platforms log it although " +
			"the card runs at full rate: compare the measured bandwidth before replacing anything."})
	klogModuleHot = declare(Finding{ID: "kernel.log/module-high-temperature", Status: report.Fail,
		When:    "mlx5 reported a port module (transceiver) error for high temperature",
		Message: knownMsgHead + " — the optical module overheated and the firmware shut its port down",
		Fix: "Read the module's temperature and thresholds (`ethtool -m {netdev}`), check the chassis airflow at the cage, and replace the " +
			"module (or use a passive DAC where the reach allows): an AOC or optic that runs hot keeps dropping its link."})
	klogModuleError = declare(Finding{ID: "kernel.log/module-error", Status: report.Fail,
		When:    "mlx5 reported another port module error (power budget exceeded, bad or shorted cable, bus stuck, no EEPROM, unknown identifier)",
		Message: knownMsgHead + " — the port's cable or transceiver is faulty or not supported by the adapter",
		Fix: "Reseat the cable or module named; if the error returns, replace it with a part the adapter supports (`ethtool -m {netdev}` " +
			"shows vendor and part). \"Power budget exceeded\": the module draws more than the cage allows — use a lower-power module."})
	klogPCIeLimited = declare(Finding{ID: "kernel.log/pcie-bandwidth-limited", Status: report.Warn,
		When:    "the PCI core logged that the NIC's available PCIe bandwidth is limited by a link on the way",
		Message: knownMsgHead + " — the NIC cannot reach its rated throughput through this PCIe path",
		Fix: "The line names the limiting link: reseat the card or the riser, move it to a slot of the full width and speed, and check " +
			"the BIOS link settings; pci.link judges the link as it is now."})
	klogAERFatal = declare(Finding{ID: "kernel.log/aer-fatal", Status: report.Fail,
		When:    "AER logged an uncorrected fatal PCIe error on an RDMA NIC or a PCIe port above it",
		Message: knownMsgHead + " — the PCIe link lost data and was reset: the device was unusable until recovery",
		Fix: "Reseat the NIC and its riser, check the slot and the switch above it; repeated fatal errors on the same hop mean that " +
			"hop (card, riser, cable or switch port) must be replaced. `pcie.aer` names the hop whose counters grow."})
	klogAERNonFatal = declare(Finding{ID: "kernel.log/aer-nonfatal", Status: report.Warn,
		When:    "AER logged an uncorrected non-fatal PCIe error on an RDMA NIC or a PCIe port above it",
		Message: knownMsgHead + " — a PCIe transaction was lost; the driver recovered, the link stayed up",
		Fix:     "Watch the hop's AER counters (`pcie.aer`): errors that recur point at the card, riser or slot — reseat, then replace the part."})
	klogAERCorrected = declare(Finding{ID: "kernel.log/aer-corrected", Status: report.Pass,
		When:    "AER logged corrected PCIe errors (noted: their rate is pcie.aer's to judge)",
		Message: knownMsgHead + " — corrected by the link layer, nothing lost; pcie.aer judges their rate"})
	klogLinkFlaps = declare(Finding{ID: "kernel.log/link-flaps", Status: report.Warn,
		When:    "three or more carrier-loss messages on one RDMA port's netdev",
		Message: knownMsgHead + " — the link went down {count} times: a flapping link (cable, module or switch port)",
		Fix: "Check the cable and module (`ethtool -m {netdev}`, link.phy for FEC and link-down counters) and the switch port's log; " +
			"replace the cable or module named when the flaps continue."})
	klogLinkDown = declare(Finding{ID: "kernel.log/link-down", Status: report.Pass,
		When:    "one or two carrier-loss messages on one RDMA port's netdev (noted: port.state judges the link as it is now)",
		Message: knownMsgHead + " — the carrier was lost; port.state says whether it is back"})
)

// knownMessage is one kernel message the check knows: the finding it makes,
// the pattern (devN groups capture the device it names), and the kernel
// source that prints it, with its format string.
type knownMessage struct {
	finding *Finding
	// needle is a literal every matching line holds: most lines of a
	// ring hold none, and a substring test is far cheaper than the
	// pattern (a whole ring is read on a first run).
	needle  string
	pattern string
	source  string
}

// knownPatterns are the table's patterns compiled, on first use: a process
// that does not run kernel.log (the verbs child, most subcommands) does
// not compile them.
var knownPatterns = sync.OnceValue(func() []*regexp.Regexp {
	res := make([]*regexp.Regexp, len(knownMessages))
	for i, k := range knownMessages {
		res[i] = regexp.MustCompile(k.pattern)
	}
	return res
})

// pciAddrPattern is a PCI function address as the kernel prints it.
const pciAddrPattern = `[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]`

// knownMessages is the table: each format string was read in the kernel
// source named; the patterns accept the variants the kernel printed over
// the years (named in source).
var knownMessages = []knownMessage{
	{klogTxTimeout, "NETDEV WATCHDOG: ", `NETDEV WATCHDOG: (?P<dev1>\S+) \([^)]*\): transmit queue \d+ timed out`,
		`net/sched/sch_generic.c dev_watchdog: "NETDEV WATCHDOG: %s (%s): transmit queue %u timed out" (until 6.8 with " %u ms" appended)`},
	{klogTxTimeout, "NETDEV WATCHDOG: ", `(?P<dev1>[^\s:]+): NETDEV WATCHDOG: CPU: \d+: transmit queue \d+ timed out`,
		`net/sched/sch_generic.c dev_watchdog, netdev_crit: "NETDEV WATCHDOG: CPU: %d: transmit queue %u timed out %u ms" (6.9, and stable kernels such as Debian's 6.1; "<ifname>: " before it when the netdev has no parent device)`},
	{klogTxTimeout, "TX timeout on queue: ", `(?P<dev1>[^\s:]+): TX timeout on queue: \d+, SQ: 0x`,
		`drivers/net/ethernet/mellanox/mlx5/core/en_main.c (en/reporter_tx.c in later kernels): "TX timeout on queue: %d, SQ: 0x%x, CQ: 0x%x, SQ Cons: 0x%x SQ Prod: 0x%x"`},
	{klogTxTimeout, "TX timeout detected", `(?P<dev1>[^\s:]+): TX timeout detected, starting reset task!`,
		`drivers/net/ethernet/broadcom/bnxt/bnxt.c bnxt_tx_timeout: "TX timeout detected, starting reset task!"`},
	{klogTxTimeout, "tx_timeout recovery level", `(?P<dev1>[^\s:]+): tx_timeout recovery level \d+, txqueue \d+`,
		`drivers/net/ethernet/intel/ice/ice_main.c ice_tx_timeout: "tx_timeout recovery level %d, txqueue %u"`},
	{klogFWFatal, "health compromised", `device's health compromised - reached miss count`,
		`drivers/net/ethernet/mellanox/mlx5/core/health.c poll_health: "device's health compromised - reached miss count"`},
	{klogFWFatal, "Fatal error ", `Fatal error \d+ detected`,
		`drivers/net/ethernet/mellanox/mlx5/core/health.c poll_health: "Fatal error %u detected"`},
	{klogSlotPower, "insufficient power on the PCIe slot", `Detected insufficient power on the PCIe slot \(\d+W\)`,
		`drivers/net/ethernet/mellanox/mlx5/core/events.c mlx5_pcie_event: "Detected insufficient power on the PCIe slot (%uW)."`},
	{klogModuleHot, "Port module event[error]", `Port module event\[error\]: module (?P<module>\d+), [^,]+, High Temperature`,
		`drivers/net/ethernet/mellanox/mlx5/core/events.c port_module: "Port module event[error]: module %u, %s, %s" with "High Temperature"`},
	{klogModuleError, "Port module event[error]", `Port module event\[error\]: module (?P<module>\d+), [^,]+, (?:Power budget exceeded|Bad or shorted cable/module|Bus stuck|No EEPROM/retry timeout|Unknown identifier|Enforce part number list|Long Range for non MLNX cable|One or more network ports have been powered down)`,
		`drivers/net/ethernet/mellanox/mlx5/core/events.c port_module: "Port module event[error]: module %u, %s, %s" (mlx5_pme_error_to_string)`},
	{klogPCIeLimited, "available PCIe bandwidth", `available PCIe bandwidth, limited by \S+ GT/s PCIe x\d+ link at (?P<dev1>` + pciAddrPattern + `|<unknown>)`,
		`drivers/pci/pci.c __pcie_print_link_status: "%u.%03u Gb/s available PCIe bandwidth, limited by %s x%d link at %s (capable of %u.%03u Gb/s with %s x%d link)"`},
	{klogAERFatal, "AER: ", `AER: (?:Multiple )?Uncorrect(?:ed|able) \(Fatal\) error (?:message )?received(?::| from) (?P<dev1>` + pciAddrPattern + `)`,
		`drivers/pci/pcie/aer.c aer_print_port_info: "%s%s error received: %04x:%02x:%02x.%d" ("error message received from" since 6.x)`},
	{klogAERFatal, "PCIe Bus Error: ", `PCIe Bus Error: severity=Uncorrect(?:ed|able) \(Fatal\)`,
		`drivers/pci/pcie/aer.c aer_print_error: "PCIe Bus Error: severity=%s, type=%s, (%s)"`},
	{klogAERNonFatal, "AER: ", `AER: (?:Multiple )?Uncorrect(?:ed|able) \(Non-Fatal\) error (?:message )?received(?::| from) (?P<dev1>` + pciAddrPattern + `)`,
		`drivers/pci/pcie/aer.c aer_print_port_info: "%s%s error received: %04x:%02x:%02x.%d"`},
	{klogAERNonFatal, "PCIe Bus Error: ", `PCIe Bus Error: severity=Uncorrect(?:ed|able) \(Non-Fatal\)`,
		`drivers/pci/pcie/aer.c aer_print_error: "PCIe Bus Error: severity=%s, type=%s, (%s)"`},
	{klogAERCorrected, "AER: ", `AER: (?:Multiple )?Correct(?:ed|able) error (?:message )?received(?::| from) (?P<dev1>` + pciAddrPattern + `)`,
		`drivers/pci/pcie/aer.c aer_print_port_info: "%s%s error received: %04x:%02x:%02x.%d"`},
	{klogAERCorrected, "PCIe Bus Error: ", `PCIe Bus Error: severity=Correct(?:ed|able)`,
		`drivers/pci/pcie/aer.c aer_print_error: "PCIe Bus Error: severity=%s, type=%s, (%s)"`},
	{klogLinkDown, ": Link down", `(?P<dev1>[^\s:]+): Link down$`,
		`drivers/net/ethernet/mellanox/mlx5/core/en_main.c mlx5e_update_carrier: "Link down"`},
	{klogLinkDown, "NIC Link is Down", `(?P<dev1>[^\s:]+): NIC Link is Down$`,
		`drivers/net/ethernet/broadcom/bnxt/bnxt.c bnxt_report_link: "NIC Link is Down" (the Intel drivers print the same words)`},
	{klogLinkDown, "link is not ready", `ADDRCONF\(NETDEV_UP\): (?P<dev1>[^\s:]+): link is not ready`,
		`net/ipv6/addrconf.c addrconf_notify: "ADDRCONF(NETDEV_UP): %s: link is not ready" (pr_info until 4.x, a debug message since)`},
}

// matchKnown finds the first table entry a message matches, and the
// devices the message itself names (its devN groups), in order.
func matchKnown(text string) (*knownMessage, []string) {
	for i := range knownMessages {
		k := &knownMessages[i]
		if !strings.Contains(text, k.needle) {
			continue
		}
		re := knownPatterns()[i]
		m := re.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		var devs []string
		for j, name := range re.SubexpNames() {
			if len(name) > 3 && name[:3] == "dev" && m[j] != "" && m[j] != "<unknown>" {
				devs = append(devs, m[j])
			}
		}
		return k, devs
	}
	return nil, nil
}
