package checks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

func init() {
	register(Check{
		ID: "kernel.log", Code: 63, Level: 1,
		Title: "the kernel logged no known driver or PCIe fault of an RDMA NIC, and its devlink health reporters are healthy",
		Privileges: []Need{{Kind: NeedCapability, Cap: CapSyslog, Optional: true,
			For: "reads the kernel's ring (/dev/kmsg) where kernel.dmesg_restrict=1; without it the devlink reporters are still judged"}},
		Explain: Explanation{
			Judges: "Reads the kernel's ring buffer without blocking and without consuming it (/dev/kmsg, else syslog(2)) from the sequence " +
				"number the last run stopped at (kept in --state with the boot_id; a new boot, or a ring whose newest record is older than " +
				"the mark, starts again at the beginning; without a mark: since boot), and matches each record against a table of known " +
				"messages, each read in the kernel source it cites: the netdev watchdog's transmit-queue timeout (net/sched/sch_generic.c), " +
				"mlx5/bnxt_en/ice TX timeouts, mlx5 health poll failures and fatal errors (health.c), insufficient PCIe slot power and port " +
				"module errors (events.c), the PCI core's \"available PCIe bandwidth, limited by\" (drivers/pci/pci.c), AER reports " +
				"(drivers/pci/pcie/aer.c) and carrier-loss messages. A finding names the device — from the message, the record's DEVICE= " +
				"entry or the driver's prefix — and quotes the newest line; only the RDMA NICs, their netdevs and the PCIe ports above " +
				"them are judged, a message about another device is noted. Records the ring overwrote before they were read are counted " +
				"in the details. Then the devlink health reporters of the RDMA NICs (`devlink health show`, generic netlink): a reporter " +
				"in error state fails; an error count that rose since the last run (or, without one, any error since the driver loaded) " +
				"warns. Replaying a snapshot, its kernel.log is judged whole (it has no sequence numbers: every line kept at the capture) " +
				"and its facts give the reporters.",
			Why: "A NIC can keep its port ACTIVE while its driver logs TX timeouts, its firmware dies, or its module overheats: the " +
				"kernel's own complaints are often the first and only sign before jobs hang.",
		},
		Run: runKernelLog,
	})
}

var (
	klogClean = declare(Finding{ID: "kernel.log/clean", Status: report.Pass,
		When:    "no known driver or PCIe fault of an RDMA NIC in the records read, and no devlink reporter in error or with new errors",
		Message: "{records} kernel log record(s) read {since}: no known driver or PCIe fault of the RDMA NICs; {devlink}"})
	klogOtherDevice = declare(Finding{ID: "kernel.log/other-device", Status: report.Pass,
		When: "a known message names a device that is neither an RDMA NIC, its netdev, nor a PCIe port above one (noted only)",
		Message: "{device}: {count} line(s) {since} of a known kind ({kind}) about a device that carries no RDMA traffic — noted only, " +
			"the last: \"{line}\""})
	klogNoLog = declare(Finding{ID: "kernel.log/no-log", Status: report.Skip,
		When:    "the fixture or snapshot root holds no kernel log",
		Message: "no kernel log in this root to judge; {devlink}"})
	klogNoAccess = declare(Finding{ID: "kernel.log/no-access", Status: report.Skip,
		When:    "the kernel refused its log (kernel.dmesg_restrict=1 without CAP_SYSLOG)",
		Message: "the kernel log is not readable by this process ({cause}); {devlink}",
		Fix: "Run rdmadoctor as root with CAP_SYSLOG (a systemd drop-in adding CAP_SYSLOG to AmbientCapabilities= and " +
			"CapabilityBoundingSet=, or `SYSLOG` in the container's capabilities), or set kernel.dmesg_restrict=0."})
	klogUnreadable = declare(Finding{ID: "kernel.log/unreadable", Status: report.Error,
		When:    "the kernel log could not be read for another reason",
		Message: "the kernel log could not be read: {cause}"})
)

// klogNow is the clock of the devlink history; tests replace it.
var klogNow = time.Now

// runKernelLog reads the log since the mark, judges its records, then the
// devlink health reporters, and combines both.
func runKernelLog(_ context.Context, env *Env) Result {
	sc := newLogScope(env)
	dl := judgeDevlink(env, sc)
	rd, since, err := readKernelLogSinceMark(env)
	if err != nil {
		return kernelLogUnread(err, dl)
	}
	// The reading keeps only what a snapshot keeps (the RDMA stack's and the
	// link-health messages; sysfs.IsKeptKernelMessage): every message of the
	// table is among them, and a live run and the replay of its snapshot
	// count and say the same.
	recs := rd.Records
	hits := collectHits(sc, recs)
	var fs []report.Finding
	for _, h := range hits {
		fs = append(fs, h.finding(sc, since))
	}
	fs = append(fs, dl.findings...)
	if worst := worstStatus(fs); worst == "" || worst == report.Pass {
		clean := klogClean.At("", Slots{"records": fmt.Sprint(len(recs)), "since": since, "devlink": dl.summary})
		fs = append([]report.Finding{clean}, fs...)
	}
	r := combineFindings(fs, false)
	if r.Status == report.Pass {
		r.Summary = fs[0].Message
	}
	r.Details = append(readingDetails(rd, len(recs), since), hitDetails(hits)...)
	r.Details = append(r.Details, dl.details...)
	r.Observed = fmt.Sprintf("%d RDMA or link record(s) %s, %d known message(s) about the RDMA NICs; %s", len(recs), since, inScopeCount(hits), dl.summary)
	r.Expected = "no transmit timeout, firmware fault, module or PCIe error logged for an RDMA NIC; devlink reporters healthy"
	r.Evidence = map[string]any{"since": since, "records": len(recs), "lost": rd.Lost}
	return r
}

// kernelLogUnread is the result when the log could not be read: a skip
// or an error about the log, beside the devlink reporters' verdicts.
func kernelLogUnread(err error, dl devlinkVerdict) Result {
	slots := Slots{"cause": err.Error(), "devlink": dl.summary}
	var f report.Finding
	var kle *sysfs.KernelLogError
	switch {
	case errors.Is(err, sysfs.ErrNoKernelLog):
		f = klogNoLog.At("", slots)
	case errors.As(err, &kle) && kle.Denied:
		f = klogNoAccess.At("", slots)
	default:
		f = klogUnreadable.At("", slots)
	}
	fs := append([]report.Finding{f}, dl.findings...)
	r := combineFindings(fs, false)
	if worse(f.Status, r.Status) || f.Status == r.Status {
		r.Summary = f.Message
	}
	if f.Status == report.Skip && f.Fix != "" {
		// A skip's fix is no remedy to combine, but the way to let the
		// check read the log is worth saying.
		r.Remedy = strings.TrimSpace(f.Fix + "\n" + r.Remedy)
	}
	r.Details = dl.details
	return r
}

// readKernelLogSinceMark reads the log from the state's mark and moves the
// mark; since says from where the records run, in words.
func readKernelLogSinceMark(env *Env) (*sysfs.KmsgReading, string, error) {
	st := env.Opts.State
	bootID, _ := env.Host.BootID()
	var from uint64
	// A replay and a live run without a mark read the same lines (a
	// snapshot keeps what the ring held of the RDMA NICs and their links)
	// and say the same: a replay judges the host as it was.
	since := "since boot (no mark: all the ring held; with --state a live run reads only what is new)"
	var mark *state.KernelLogMark
	if st != nil && st.KernelLog != nil {
		mark = st.KernelLog.Mark
	}
	switch {
	case !env.Host.Live():
	case st == nil:
	case mark == nil:
		since = "since boot (the first run with this state)"
	case mark.BootID != bootID:
		since = "since boot (the host booted since the last run)"
	default:
		from, since = mark.Seq, "since the last run"
	}
	rd, err := env.Host.KernelLogSince(from)
	if err != nil {
		return nil, "", err
	}
	switch {
	case !env.Host.Live():
	case !rd.Sequenced:
		since = "since boot (read through syslog(2), which has no sequence numbers)"
	case rd.Restarted:
		since = "since boot (the ring's newest record is older than the last run's mark)"
	}
	if st != nil && env.Host.Live() && rd.Sequenced {
		kernelLogState(st).Mark = &state.KernelLogMark{BootID: bootID, Seq: rd.Next}
	}
	return rd, since, nil
}

// readingDetails says what was read and what was lost since the mark.
// Where the records came from (the ring, a snapshot) is left out on
// purpose: a replay says what the live run said.
func readingDetails(rd *sysfs.KmsgReading, n int, since string) []string {
	out := []string{fmt.Sprintf("%d RDMA or link record(s) of the kernel log %s", n, since)}
	if rd.Lost > 0 && rd.From > 0 {
		out = append(out, fmt.Sprintf("%d record(s) were overwritten in the ring after the last run and before this one could read them (sequence %d to %d): what they said is unknown",
			rd.Lost, rd.From, rd.From+rd.Lost-1))
	}
	if rd.Overrun > 0 {
		out = append(out, fmt.Sprintf("the ring overwrote %d record(s) while it was being read", rd.Overrun))
	}
	return out
}

// kernelLogState is the check's part of the state, made on first use.
// Only kernel.log writes it: checks run at once, and the counter history
// is counters.errors'.
func kernelLogState(st *state.State) *state.KernelLogState {
	if st.KernelLog == nil {
		st.KernelLog = &state.KernelLogState{}
	}
	return st.KernelLog
}
