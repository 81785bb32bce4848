package checks

import "github.com/rdmadoctor/rdmadoctor/report"

// counters.errors' findings. Three kinds:
//
//   - about the host: no device, the device list or the second sample of
//     --interval could not be had;
//   - about a counter set (a port, or a device's own hw_counters/; unit
//     "mlx5_0/1", "mlx5_0/device"): clean, unreadable, not judged;
//   - about one error counter of a counter set. A count beyond its
//     threshold is named by the counter's family (symbol-errors,
//     link-downed, …): that is what an expectations file waives when a
//     class of hosts carries a known count ("a batch of marginal cables").
//     What happens now — a rise during --interval or across runs — has its
//     own IDs (rising, rate-exceeded, …), so waiving a family's old count
//     never hides the same counter rising today. Nonzero counts below
//     their threshold, saturated counters and counts that did not rise
//     warn under IDs of their own.
//
// A counter set's line joins its counters' messages; the messages of the
// counter findings name no unit, the line does.

// historyFix is the fix of a counter that fails across runs (--state).
const historyFix = risingFix + " After a repair, `rdmadoctor ack counters.errors --unit {unit} --reason TEXT` accepts the present level as the new baseline."

// The host.
var (
	ctrDevicesUnreadable = declare(Finding{ID: "counters.errors/devices-unreadable", Status: report.Error,
		When:    "/sys/class/infiniband could not be listed",
		Message: "could not list RDMA devices: {cause}", Fix: countersByHand})
	ctrNoDevice = declare(Finding{ID: "counters.errors/no-device", Status: report.Error,
		When:    "there is no RDMA device to read counters from",
		Message: "no RDMA device to read counters from", Fix: countersByHand})
	ctrIntervalStopped = declare(Finding{ID: "counters.errors/interval-stopped", Status: report.Error,
		When:    "the run was stopped while waiting between the two samples of --interval",
		Message: "stopped while waiting {window} between the two counter samples: {cause}", Fix: countersByHand})
)

// A counter set as a whole.
var (
	ctrZero = declare(Finding{ID: "counters.errors/zero", Status: report.Pass,
		When:    "every readable error counter of a port (or of a device's own hw_counters/) is zero",
		Message: "{label}: {readable} error counters read, all zero{statistics}"})
	ctrNoneRising = declare(Finding{ID: "counters.errors/none-rising", Status: report.Pass,
		When:    "with --state: no error counter of a port (or of a device) rises, or is beyond its threshold, since its baseline",
		Message: "{label}: {readable} error counters read, none rising or beyond its threshold since its baseline{statistics}"})
	ctrUnreadableNoPMA = declare(Finding{ID: "counters.errors/unreadable-no-pma", Status: report.Error,
		When: "none of an ACTIVE port's error counters could be read: the driver's management agent did not answer (\"N/A (no PMA)\" or EINVAL); " +
			"whether the port is clean could not be determined",
		Message: "{label}: none of its {count} error counters could be read ({reasons}): whether it is clean could not be determined",
		Fix:     noPMAFix + countersByHand})
	ctrVFUnreadable = declare(Finding{ID: "counters.errors/vf-unreadable", Status: report.Error,
		When: "none of an SR-IOV VF's error counters could be read (\"N/A (no PMA)\" or EINVAL): a VF's management agent often serves no " +
			"PortCounters; the link's errors are counted on the PF",
		Message: "{label}: none of its {count} error counters could be read ({reasons}): whether it is clean could not be determined",
		Fix: noPMAFix + "{device} is an SR-IOV VF of {pf}: the physical link's errors are counted on the PF's port — read them there. " +
			countersByHand})
	ctrUnreadable = declare(Finding{ID: "counters.errors/unreadable", Status: report.Error,
		When:    "none of an ACTIVE port's error counters could be read, for another reason (permissions, values that are no counter)",
		Message: "{label}: none of its {count} error counters could be read ({reasons}): whether it is clean could not be determined",
		Fix: "The files exist but could not be read as counters (see the reasons above): run as a user who may read them, or look at the driver. " +
			countersByHand})
	ctrDownUnreadable = declare(Finding{ID: "counters.errors/port-down-unreadable", Status: report.Skip,
		When: "none of a port's error counters could be read and the port is not ACTIVE: a port that is down has nothing to count " +
			"(port.state judges the port)",
		Message: "{label}: none of its {count} error counters could be read ({reasons}) and the port is not ACTIVE ({state}): nothing to judge"})
	ctrReadFailed = declare(Finding{ID: "counters.errors/read-failed", Status: report.Error,
		When:    "a counter directory could not be read",
		Message: "{label}: {cause}", Fix: countersByHand})
	ctrStatisticsOnly = declare(Finding{ID: "counters.errors/statistics-only", Status: report.Skip,
		When: "a port's (or a device's) counters are statistics only, none an error counter (cxgb4's TCP statistics, mana's device counters); " +
			"nothing to do on the host: watch the switch port's counters for the same link",
		Message: "{label}: {driver} exposes no error counters here (its {dirs} hold statistics only)"})
	ctrNotInTable = declare(Finding{ID: "counters.errors/not-in-table", Status: report.Skip,
		When: "none of a port's (or a device's) counters is an error counter in rdmadoctor's table (a driver it does not know, or one whose " +
			"names are not judged: hfi1, erdma)",
		Message: "{label}: {driver} exposes no error counters here (none of its {dirs} files is an error counter in rdmadoctor's table ({source}))"})
	ctrNoCounters = declare(Finding{ID: "counters.errors/no-counters", Status: report.Skip,
		When: "the driver exposes no counters in sysfs at all (siw, qedr): no counters/ or hw_counters/ on the device or its ports; " +
			"nothing to do on the host: watch the switch port's counters for the same link",
		Message: "{device}: {driver} exposes no error counters in sysfs (no counters/ or hw_counters/ on its ports or the device)"})
)

// noPMAFix begins the fix of counters the driver's management agent did
// not serve.
const noPMAFix = "The driver did not answer these reads (\"N/A (no PMA)\" or EINVAL: its management agent did not answer the PerfMgt query, " +
	"e.g. when the firmware does not serve PortCounters). "

// familyMessage is the message of a count beyond its threshold, whatever
// its family.
const familyMessage = "{counter} = {value}, beyond the threshold {threshold}: {meaning}"

// family declares the finding of one family of error counters: a count
// beyond its threshold (since boot, the driver's load or the last reset).
func family(slug, counters string) *Finding {
	return declare(Finding{ID: "counters.errors/" + slug, Status: report.Fail,
		When:    counters + " is beyond its threshold (a count since boot or the last reset; without --state, and not steady during --interval)",
		Message: familyMessage, Fix: judgeByMeaning})
}

// The families of error counters (counterSpec.family).
var (
	famSymbolErrors     = family("symbol-errors", "symbol_error (minor link errors on the physical lanes)")
	famLinkDowned       = family("link-downed", "link_downed (the link went down; rxe's hw_counters link_downed: the netdev went down)")
	famLinkRecovery     = family("link-recovery", "link_error_recovery (the link retrained after errors)")
	famRcvErrors        = family("rcv-errors", "port_rcv_errors (packets received with errors)")
	famRemoteErrors     = family("remote-errors", "port_rcv_remote_physical_errors or port_rcv_switch_relay_errors (faults elsewhere in the fabric)")
	famXmitDiscards     = family("xmit-discards", "port_xmit_discards (outbound packets discarded)")
	famConstraintErrors = family("constraint-errors", "port_xmit_constraint_errors or port_rcv_constraint_errors (partition or raw-packet constraints)")
	famLinkIntegrity    = family("link-integrity", "local_link_integrity_errors (the local link passed its physical error threshold)")
	famBufferOverrun    = family("buffer-overrun", "excessive_buffer_overrun_errors (flow control on the link is not working)")
	famVL15Dropped      = family("vl15-dropped", "VL15_dropped (subnet management packets dropped)")
	famCorruptPackets   = family("corrupt-packets", "a driver's count of packets received corrupt (mlx5 rx_icrc_encapsulated, irdma ip4InTruncatedPkts/ip6InTruncatedPkts, bnxt_re rx_roce_errors)")
	famDiscards         = family("discards", "a driver's count of packets discarded (irdma ip4InDiscards/ip6InDiscards/rxVlanErrors, bnxt_re rx_roce_discards, rxe send_err)")
	famTCPErrors        = family("tcp-errors", "irdma's iWARP TCP segments with errors (tcpInProtoErrors, tcpInOptErrors)")
	famRxQueueDrops     = family("rx-queue-drops", "a driver's count of packets dropped for want of a posted receive buffer (mlx5 out_of_buffer, EFA rx_drops, bnxt_re rx_out_of_buffer)")
	famDeviceFaults     = family("device-faults", "a driver's count of faults of the device itself (EFA no_completion_cmds, bnxt_re res_tx_pci_err/res_rx_pci_err, mana general_hw_error)")
)

// One error counter, without --state.
var (
	ctrNonzero = declare(Finding{ID: "counters.errors/nonzero", Status: report.Warn,
		When:    "an error counter is nonzero, below its threshold",
		Message: "{counter} = {value} (threshold {threshold}): {meaning}{sampled}", Fix: judgeByMeaning})
	ctrSaturated = declare(Finding{ID: "counters.errors/saturated", Status: report.Warn,
		When: "a legacy PortCounters counter is at its maximum (link_downed 255, 16-bit 65535, 32-bit 4294967295): pinned there it cannot " +
			"show a fault of today",
		Message: "{counter} = {value}, saturated (the real count is higher; threshold {threshold}): {meaning}{sampled}", Fix: judgeByMeaning})
	ctrNotRising = declare(Finding{ID: "counters.errors/not-rising", Status: report.Warn,
		When:    "an error counter is beyond its threshold but did not rise during --interval: history",
		Message: "{counter} = {value}, beyond the threshold {threshold}: {meaning}; it did not rise in {window}", Fix: judgeByMeaning})
	ctrRising = declare(Finding{ID: "counters.errors/rising", Status: report.Fail,
		When:    "an error counter rose during --interval: the fault is happening now",
		Message: "{counter} rose by {delta} in {window} ({first} → {second}): {meaning}{history}", Fix: risingFix})
)

// One error counter judged across runs (--state, counters_history.go).
var (
	ctrSinceBootRate = declare(Finding{ID: "counters.errors/since-boot-rate", Status: report.Fail,
		When:    "with --state, a counter's first reading (no earlier one): its average rate since boot is above its rate per hour",
		Message: "{counter} = {value} since boot (no earlier reading): {rate}/h over {uptime}, above {limit}/h ({limit_from}): {meaning}; {failing}",
		Fix:     historyFix})
	ctrSinceBoot = declare(Finding{ID: "counters.errors/since-boot", Status: report.Warn,
		When:    "with --state, a counter's first reading is nonzero, below its absolute threshold and its rate",
		Message: "{counter} = {value} since boot (no earlier reading; absolute {absolute}), {rate_since_boot}: {meaning}", Fix: judgeByMeaning})
	ctrSinceBootBeyond = declare(Finding{ID: "counters.errors/since-boot-beyond-absolute", Status: report.Warn,
		When: "with --state, a counter's first reading is beyond its absolute threshold at a rate within its limit (or an unknown rate: " +
			"uptime unreadable): the next run tells whether it still rises",
		Message: "{counter} = {value} since boot (no earlier reading), beyond the absolute {absolute} ({absolute_from}), {rate_since_boot}: " +
			"whether it still rises shows on the next run: {meaning}",
		Fix: judgeByMeaning})
	ctrSinceBootSaturated = declare(Finding{ID: "counters.errors/since-boot-saturated", Status: report.Warn,
		When:    "with --state, a counter's first reading is saturated: whether it still rises cannot be told",
		Message: "{counter} = {value} since boot (no earlier reading), saturated (the real count is higher): whether it still rises cannot be told: {meaning}",
		Fix:     judgeByMeaning})
	ctrSteadySaturated = declare(Finding{ID: "counters.errors/steady-saturated", Status: report.Warn,
		When:    "with --state, a counter is saturated and reads as the previous run: whether it still rises cannot be told",
		Message: "{counter} = {value}, saturated (the real count is higher): whether it still rises cannot be told: {meaning}", Fix: judgeByMeaning})
	ctrSteady = declare(Finding{ID: "counters.errors/steady", Status: report.Warn,
		When:    "with --state, a counter is nonzero since its baseline, within its absolute threshold, and did not rise since the previous run",
		Message: "{counter} = {value}, {since} {baseline} (absolute {absolute}), not rising since {previous_at}: {meaning}", Fix: judgeByMeaning})
	ctrSteadyBeyond = declare(Finding{ID: "counters.errors/steady-beyond-absolute", Status: report.Warn,
		When: "with --state, a counter is beyond its absolute threshold since its baseline but did not rise since the previous run: " +
			"history, never a failure",
		Message: "{counter} = {value}, {since} {baseline}, beyond the absolute {absolute} ({absolute_from}), but not rising since {previous_at}: {meaning}",
		Fix:     judgeByMeaning})
	ctrRateExceeded = declare(Finding{ID: "counters.errors/rate-exceeded", Status: report.Fail,
		When:    "with --state, a counter rose since the previous run faster than its rate per hour (symbol_error 120/h; link_downed and a few others any rise)",
		Message: "{counter} rose by {delta} since {previous_at} ({rate}/h{saturated}, above {limit}/h: {limit_from}): {meaning}; {failing}",
		Fix:     historyFix})
	ctrBeyondAbsolute = declare(Finding{ID: "counters.errors/beyond-absolute", Status: report.Fail,
		When:    "with --state, a counter rose since the previous run, within its rate, and its count since the baseline is now beyond its absolute threshold",
		Message: "{counter} rose by {delta} since {previous_at} ({rate}/h{saturated}): {since} {baseline}, beyond the absolute {absolute} ({absolute_from}): {meaning}; {failing}",
		Fix:     historyFix})
	ctrRisingWithin = declare(Finding{ID: "counters.errors/rising-within-rate", Status: report.Warn,
		When:    "with --state, a counter rose since the previous run, within its rate and its absolute threshold",
		Message: "{counter} rose by {delta} since {previous_at} ({rate}/h{saturated}, within {limit}/h): {since} {baseline} (absolute {absolute}): {meaning}",
		Fix:     judgeByMeaning})
	ctrStillFailing = declare(Finding{ID: "counters.errors/still-failing", Status: report.Fail,
		When: "with --state, a counter that failed has had fewer clean runs since than it needs to pass again (3, or counters.clean_runs " +
			"in the expectations file)",
		Message: "{now}; still failing: {failing}; passes again after {clean_runs} clean runs ({clean_so_far} so far)",
		Fix:     historyFix})
)
