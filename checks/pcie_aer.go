package checks

import (
	"context"
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

func init() {
	register(Check{
		ID: "pcie.aer", Code: 62, Level: 1,
		Title: "no PCIe link between an RDMA NIC and its root port accumulates AER errors",
		Explain: Explanation{
			Judges: "For every RDMA NIC function (PFs; a VF shares its PF's link) and every PCI bridge above it up to the root port — the path pci.link " +
				"walks — reads the kernel's AER statistics (aer_dev_correctable, aer_dev_nonfatal, aer_dev_fatal; on a root port also " +
				"aer_rootport_total_err_*, kept as evidence: drivers/pci/pcie/aer.c, Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats). " +
				"Counts are judged as rises: with --state, since the previous run (keys pcie.aer/<address>/<file>/<name>); without, or on a first run, " +
				"the count since boot at its average rate over the uptime. Any rise of TOTAL_ERR_FATAL or TOTAL_ERR_NONFATAL since the previous run fails; " +
				"a count of them since boot warns (it does not say when they happened, as counters.errors judges a count since boot). The correctable " +
				"errors of the link (RxErr, BadTLP, BadDLLP, Timeout, Rollover) warn above " + aerWarnRateText + " and fail above " + aerFailRateText +
				"; NonFatalErr, CorrIntErr and HeaderOF say nothing about the link and are only listed. The hop where a count grows is named with " +
				"the link its errors point at: a port counts what its receiver saw, so a downstream or root port's errors are on the link below it, a NIC's " +
				"or an upstream port's on the link above it. A hop without the files (no AER capability, AER off, a kernel without CONFIG_PCIEAER) is not " +
				"judged, and said; when no hop has them the check skips. With --state a hop that failed stays failing (still-failing) until " +
				"it has had counters.clean_runs clean runs (3 by default), or `rdmadoctor ack pcie.aer` clears it.",
			Why: "A PCIe link that throws correctable errors is replaying TLPs: bandwidth to the NIC drops and latency jitters long before anything fails, " +
				"and a link that keeps doing so usually ends in an uncorrectable error — the driver resets the function (non-fatal) or the link goes down " +
				"(fatal), and every RDMA job on the NIC fails. The AER counters are the only place where this shows before it happens.",
		},
		Run: runPCIeAER,
	})
}

// Thresholds for the correctable errors of a link (docs/link-health.md).
// Both are rates of the sum of RxErr, BadTLP, BadDLLP, Timeout and
// Rollover on one hop.
const (
	// aerFailPerHour is 8 per minute: NVIDIA DCGM's limit for a GPU's PCIe
	// replay rate (dcgm_gpu_hardware_limits.h, DCGM_LIMIT_MAX_PCIREPLAY_RATE,
	// "the maximum recommended by RM"); each of these errors is a replay or
	// the cause of one.
	aerFailPerHour  = 480.0
	aerFailRateText = "480/h (8 per minute, NVIDIA DCGM's PCIe replay-rate limit)"
	// aerWarnPerHour is rdmadoctor's rule of thumb: a healthy link shows
	// none for days; more than one every six minutes is no one-off.
	aerWarnPerHour  = 10.0
	aerWarnRateText = "10/h (rdmadoctor's rule of thumb: a healthy link shows none)"
)

// pcie.aer's findings: about each RDMA physical function (its PCI
// address) and the hops on its path, or about the host.
const (
	aerUncorrectableFix = "Uncorrectable errors lose transactions: the driver resets the function (non-fatal) or the link is reset (fatal), and the " +
		"RDMA jobs on the NIC fail. Drain the node; read `dmesg | grep -i -e AER -e 'PCIe Bus Error'` for the first error and its TLP header, and " +
		"`lspci -vv -s {hop} | grep -e UESta -e CESta`. Then {action}"
	aerCorrectableFix = "The errors grow on {link}: {action} Confirm with `dmesg | grep -i -e AER -e 'PCIe Bus Error'` and " +
		"`lspci -vv -s {hop} | grep -e CESta -e LnkSta`; after a repair, run with --state to see the rate fall to zero."
	aerUnitLine = "{nic} {address}"
)

var (
	aerFatal = declare(Finding{ID: "pcie.aer/fatal", Status: report.Fail,
		When:    "TOTAL_ERR_FATAL rose on a hop of the NIC's path since the previous run (--state)",
		Message: aerUnitLine + ": {count} fatal AER error message(s) {since} on {hop_name} ({kinds}), on {link}",
		Fix:     aerUncorrectableFix})
	aerNonFatal = declare(Finding{ID: "pcie.aer/nonfatal", Status: report.Fail,
		When:    "TOTAL_ERR_NONFATAL rose on a hop of the NIC's path since the previous run (--state)",
		Message: aerUnitLine + ": {count} non-fatal uncorrectable AER error message(s) {since} on {hop_name} ({kinds}), on {link}",
		Fix:     aerUncorrectableFix})
	aerUncorrectableSinceBoot = declare(Finding{ID: "pcie.aer/uncorrectable-since-boot", Status: report.Warn,
		When: "a first reading (no --state, or no earlier run): TOTAL_ERR_FATAL or TOTAL_ERR_NONFATAL is nonzero since boot — when it " +
			"happened is unknown; the next run with --state fails if it rises again",
		Message: aerUnitLine + ": {count} {severity} uncorrectable AER error message(s) {since} on {hop_name} ({kinds}), on {link}; " +
			"run with --state to see whether more follow",
		Fix: "Find when it happened: `journalctl -k | grep -i -e AER -e 'PCIe Bus Error'` (the first error kind and its TLP header are logged). " +
			"Run with --state (the shipped timer and DaemonSet do): later runs judge only new errors and fail on one. If they recur, {action}"})
	aerCorrectableStorm = declare(Finding{ID: "pcie.aer/correctable-storm", Status: report.Fail,
		When:    "the link's correctable errors (RxErr, BadTLP, BadDLLP, Timeout, Rollover) on a hop rose faster than " + aerFailRateText,
		Message: aerUnitLine + ": {count} correctable link errors {since} on {hop_name} ({kinds}) — {rate}/h, above {limit}",
		Fix:     aerCorrectableFix})
	aerCorrectableRising = declare(Finding{ID: "pcie.aer/correctable-rising", Status: report.Warn,
		When:    "the link's correctable errors on a hop rose faster than " + aerWarnRateText + " but not beyond the fail rate",
		Message: aerUnitLine + ": {count} correctable link errors {since} on {hop_name} ({kinds}) — {rate}/h, above {limit}",
		Fix:     aerCorrectableFix})
	aerStillFailing = declare(Finding{ID: "pcie.aer/still-failing", Status: report.Fail,
		When: "with --state, a hop whose AER errors failed (a fatal or non-fatal rise, a correctable storm) has had fewer clean runs since " +
			"than it needs to pass again (3, or counters.clean_runs in the expectations file), and `rdmadoctor ack pcie.aer` has not cleared it",
		Message: aerUnitLine + ": AER errors on {hop_name} failing since {failing_since}, none failing this run; still failing on {link}: " +
			"passes again after {clean_runs} clean runs ({clean_so_far} so far)",
		Fix: "The errors on {link} may come back: {action} Confirm with `dmesg | grep -i -e AER -e 'PCIe Bus Error'` and " +
			"`lspci -vv -s {hop} | grep -e UESta -e CESta -e LnkSta`. After a repair, `rdmadoctor ack pcie.aer --unit {hop} --reason TEXT` " +
			"ends the wait for clean runs."})
	aerUnreadable = declare(Finding{ID: "pcie.aer/unreadable", Status: report.Error,
		When:    "an AER statistics file is there but could not be read or parsed, and no other hop fails",
		Message: aerUnitLine + ": AER statistics unreadable on {hops}",
		Fix:     "Run where /sys is readable; the details name the file. By hand: `cat /sys/bus/pci/devices/{address}/aer_dev_*` and the same for each bridge above it (`lspci -tv`)."})
	aerClean = declare(Finding{ID: "pcie.aer/clean", Status: report.Pass,
		When:    "no AER error count rises on any hop of the NIC's path that shows AER statistics",
		Message: aerUnitLine + ": no AER errors rising on {judged} hop(s) to the root port{not_judged}"})
	aerNoStatsOnPath = declare(Finding{ID: "pcie.aer/no-aer-on-path", Status: report.Skip,
		When:    "no hop of this NIC's path shows AER statistics, while another NIC's does",
		Message: aerUnitLine + ": no AER statistics on its {hops} hop(s) (no AER capability or AER off): not judged"})
	aerNoStats = declare(Finding{ID: "pcie.aer/no-aer", Status: report.Skip,
		When: "no hop of any RDMA NIC's path shows AER statistics: a kernel without CONFIG_PCIEAER (or before 4.19), AER off (pci=noaer), " +
			"devices without the AER capability, or a VM's virtual devices",
		Message: "no AER statistics on the {hops} hop(s) of {count} RDMA NIC(s): the kernel does not count PCIe errors here (CONFIG_PCIEAER, pci=noaer, no AER capability)",
		Fix:     "On bare metal, a kernel built with CONFIG_PCIEAER=y (every major distribution's is) and without pci=noaer on its command line counts them; firmware-first platforms may keep them in the BMC's log instead."})
	aerNoNIC = declare(Finding{ID: "pcie.aer/no-nic", Status: report.Skip,
		When:    "the host has no RDMA NIC function (software RDMA only, or none)",
		Message: "no RDMA NIC function: no PCIe link to judge"})
	aerVFsOnly = declare(Finding{ID: "pcie.aer/vfs-only", Status: report.Skip,
		When:    "the host shows only SR-IOV VFs (a VM): the physical link is the PF's, which the host does not show",
		Message: "only SR-IOV VFs: their PCIe link is the PF's, judged on the hypervisor host"})
	aerBusUnreadable = declare(Finding{ID: "pcie.aer/bus-unreadable", Status: report.Error,
		When:    "the PCI bus (/sys/bus/pci/devices) could not be listed",
		Message: "could not list PCI functions: {cause}",
		Fix:     "Run where sysfs is mounted and readable; by hand: `grep . /sys/bus/pci/devices/*/aer_dev_*`."})
)

// pcie.aer's headline when every NIC judged passes.
const aerPassHead headline = "no AER errors rising on the {hops} hop(s) of {count} RDMA NIC(s) to their root ports{not_judged}"

func runPCIeAER(_ context.Context, env *Env) Result {
	s := env.Survey()
	if s.PCIErr != nil {
		r := aerBusUnreadable.result("", Slots{"cause": s.PCIErr.Error()})
		r.Observed, r.Expected = "PCI bus unreadable", "a readable "+sysfs.PCIDevicesDir
		return r
	}
	var pfs []NIC
	vfs := 0
	for _, n := range s.NICs {
		if n.Fn.PhysFn != "" {
			vfs++
			continue
		}
		pfs = append(pfs, n)
	}
	if len(pfs) == 0 {
		f := aerNoNIC
		if vfs > 0 {
			f = aerVFsOnly
		}
		return f.result("", nil)
	}
	run := aerRun{hr: newRiseRun(env), hops: map[string]*aerHopJudgement{}}
	var units []aerUnit
	for _, n := range pfs {
		units = append(units, run.judgeNIC(env.Host, n))
	}
	judged := 0
	for _, j := range run.hops {
		if j.exposed {
			judged++
		}
	}
	r := combineAER(units, len(run.hops), judged)
	r.Details = append(r.Details, run.hr.notes...)
	if vfs > 0 {
		r.Details = append(r.Details, fmt.Sprintf("%d SR-IOV VF(s) not judged: a VF shares its PF's link", vfs))
	}
	return r
}

// aerUnit is one NIC with its path: the findings about it, the hops
// judged and not, the lines for the details and the evidence.
type aerUnit struct {
	findings []report.Finding
	hops     int // on the path, the NIC included
	judged   int // with AER statistics
	details  []string
	evidence map[string]any
}

// combineAER folds the NICs' findings with the shared precedence; hops and
// judged count the distinct hops (a root port above two NICs is one).
// When no hop of any NIC shows AER statistics the check skips as a whole.
func combineAER(units []aerUnit, hops, judged int) Result {
	var fs []report.Finding
	var details []string
	var ev []map[string]any
	for _, u := range units {
		fs = append(fs, u.findings...)
		details = append(details, u.details...)
		ev = append(ev, u.evidence)
	}
	slots := Slots{"hops": fmt.Sprint(hops), "count": fmt.Sprint(len(units)), "not_judged": ""}
	var r Result
	if judged == 0 {
		r = aerNoStats.result("", slots)
		r.Observed, r.Expected = "no AER statistics", "aer_dev_* on the NICs and their bridges"
	} else {
		r = combineFindings(fs, true)
		r.Observed = fmt.Sprintf("%d of %d hop(s) with AER statistics", judged, hops)
		r.Expected = "no fatal or non-fatal AER error, correctable link errors below " + aerWarnRateText
		if r.Status == report.Pass {
			if judged < hops {
				slots["not_judged"] = fmt.Sprintf(" (%d without AER statistics, not judged)", hops-judged)
			}
			r.Summary = aerPassHead.render(slots)
		}
	}
	if judged > 0 {
		// With no statistics anywhere each hop would only repeat the summary.
		r.Details = details
	}
	r.Evidence = map[string]any{"nics": ev}
	return r
}

// aerUnitSlots are the slots every finding about a NIC has.
func aerUnitSlots(n NIC) Slots {
	return Slots{"nic": nicName(n), "address": n.Fn.Address}
}

// joinOr is a list for a message, "none" when empty.
func joinOr(xs []string, none string) string {
	if len(xs) == 0 {
		return none
	}
	return strings.Join(xs, ", ")
}
