package checks

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func init() {
	register(Check{
		ID: "probe.destroy_order", Code: 34, Level: 2,
		Title:      "freeing verbs objects in the wrong order is refused, a stale lkey completes in error, the right order frees everything",
		Needs:      []string{"verbs.qp_state"},
		Privileges: level2Needs,
		Explain: Explanation{
			Judges: "On every ACTIVE port, with two connected RC QPs alive: ibv_dealloc_pd must fail with EBUSY, ibv_destroy_cq of a CQ a QP " +
				"uses must fail with EBUSY; an MR is deregistered (which succeeds: nothing ties a QP to an MR) and a SEND whose SGE uses its " +
				"lkey must complete in error (the status is recorded: LOC_QP_OP_ERR on rxe, LOC_PROT_ERR elsewhere). Then QPs → MRs → CQs → " +
				"PD → context are destroyed, each must succeed, and the probe's own objects on the device — counted through the RDMA netlink " +
				"per-object dumps (`rdma resource show qp|cq|mr|pd`) by the probe process's PID, so other processes and kernel users do not " +
				"count — must be back where they were before it opened the device. On a kernel without those dumps the device-wide summary " +
				"(`rdma resource`) is compared instead, and a difference there only warns: anyone may have changed it. iWARP devices are " +
				"skipped: their RC QPs connect only through rdma_cm; so are devices without RC QPs (EFA: UD and SRD only).",
			Why: "A stack that frees a PD or a CQ under a live QP lets a buggy application corrupt kernel state; one that completes a SEND " +
				"through a deregistered key reads freed memory; one whose counts do not come back leaks kernel resources on every job.",
		},
		Run: func(ctx context.Context, env *Env) Result {
			return runLevel2(ctx, env, probe.DestroyOrder, destroyOrderFrame, judgeDestroyOrder)
		},
	})
}

const (
	staleKeyFix = "The device did not check the memory key: a SEND through a deregistered MR's lkey read memory the application had given back. " +
		"Update the firmware and the driver (and the provider), and report it to the vendor with the device, firmware and driver versions."
	countsFix = "Look by hand: `rdma resource show` before and after an application run must give the same counts per device; " +
		"reading them needs the RDMA netlink socket, so run as root (or with CAP_NET_ADMIN) outside a restricted network namespace."
	countsDriftFix = "The device-wide counts are shared by every process and kernel user of the device (IPoIB, NFS or NVMe over RDMA, other jobs), " +
		"so a difference need not be a leak. On an idle host compare `rdma resource show` before and after an application run; " +
		"`rdma resource show qp` (and cq, mr, pd) lists each object with its owner's pid, which shows whose objects stay."
)

const leakFix = "Destroy in the order QPs → MRs/MWs → CQs/SRQs → PD → context (`ibv_destroy_qp`, `ibv_dereg_mr`, `ibv_destroy_cq`, `ibv_dealloc_pd`, " +
	"`ibv_close_device`); ack every async and CQ event first — every ibv_destroy_* waits for those acks. Counts that stay up after the probe closed " +
	"its context mean the kernel driver leaks: read `rdma resource show` and `dmesg`, and update the driver."

// The probe's steps whose failure is judged on its own.
const (
	pdStep    = "ibv_dealloc_pd while QPs use it"
	cqStep    = "ibv_destroy_cq while QP A uses it"
	staleStep = "stale-lkey SEND completes in error"
)

// probe.destroy_order's findings. A port's line names the port and joins
// every finding about it (the failures; the warnings when nothing failed).
var (
	destroyOrderFrame = declareLevel2Frame("probe.destroy_order")
	destroyFreedOwn   = declare(Finding{ID: "probe.destroy_order/freed-own-counts-back", Status: report.Pass,
		When: "frees out of order were refused with EBUSY, the stale-lkey SEND did not succeed, and the teardown in order brought the probe's own resource counts back",
		Message: "{label}: dealloc_pd and destroy_cq under a live QP refused with EBUSY; stale-lkey SEND completed with {stale}; " +
			"teardown in order freed everything (its own resource counts back to baseline)"})
	destroyFreedDevice = declare(Finding{ID: "probe.destroy_order/freed-counts-back", Status: report.Pass,
		When: "as freed-own-counts-back, with the device-wide resource counts back to their baseline",
		Message: "{label}: dealloc_pd and destroy_cq under a live QP refused with EBUSY; stale-lkey SEND completed with {stale}; " +
			"teardown in order freed everything (resource counts back to baseline)"})
	destroyFreed = declare(Finding{ID: "probe.destroy_order/freed", Status: report.Pass,
		When: "as freed-own-counts-back, with no resource counts to compare",
		Message: "{label}: dealloc_pd and destroy_cq under a live QP refused with EBUSY; stale-lkey SEND completed with {stale}; " +
			"teardown in order freed everything"})
	destroyFreedLive = declare(Finding{ID: "probe.destroy_order/freed-under-live-qp", Status: report.Fail,
		When:    "ibv_dealloc_pd or ibv_destroy_cq succeeded under a live QP",
		Message: "{verb} succeeded under a live QP; a correct stack refuses it with EBUSY", Fix: providerStateFix})
	destroyOtherErrno = declare(Finding{ID: "probe.destroy_order/refused-other-errno", Status: report.Warn,
		When:    "a refusal came with another errno than EBUSY",
		Message: "{verb} was refused with errno {errno} instead of EBUSY", Fix: providerStateFix})
	destroyStaleKey = declare(Finding{ID: "probe.destroy_order/stale-key-accepted", Status: report.Fail,
		When: "a SEND through a deregistered MR's lkey completed with IBV_WC_SUCCESS", Message: "{step}", Fix: staleKeyFix})
	destroyLeak = declare(Finding{ID: "probe.destroy_order/teardown-failed", Status: report.Fail,
		When: "a destroy in the right order failed, or the resource counts did not return to their baseline", Message: "{step}", Fix: leakFix})
	destroyCountsUnread = declare(Finding{ID: "probe.destroy_order/counts-unreadable", Status: report.Warn,
		When: "the resource counts could not be read", Message: "resource counts not verified: {cause}", Fix: countsFix})
	destroyCountsDrift = declare(Finding{ID: "probe.destroy_order/counts-drift", Status: report.Warn,
		When:    "only the device-wide counts could be read, and they differ after the probe (other users of the device may have changed them)",
		Message: "{drift}: other users of the device may have changed the counts, so this is not attributed to the probe", Fix: countsDriftFix})
)

// judgeDestroyOrder judges probe.destroy_order on one port.
func judgeDestroyOrder(label string, software bool, pr *probe.PortResult) (verdict, bool) {
	r := pr.DestroyOrder
	if r == nil {
		return verdict{}, false
	}
	if r.Skipped != "" {
		return destroyOrderFrame.skippedVerdict(label, &r.Probe), true
	}
	ev := destroyOrderEvidence(r)
	f := destroyFindings{unit: portUnitOf(label)}
	f.judgeRefusal("ibv_dealloc_pd", r.DeallocPDLiveQP, hasStep(&r.Probe, pdStep))
	f.judgeRefusal("ibv_destroy_cq", r.DestroyCQLiveQP, hasStep(&r.Probe, cqStep))
	if st := f.judgeFailedStep(r); st != nil {
		ev["failed_step"] = st
	}
	f.noteStaleSend(r)
	countsOK := f.judgeCounts(r)
	if r.CountsFallback != "" {
		f.details = append(f.details, "the per-process object dumps could not be read ("+r.CountsFallback+"); the device-wide summary was compared")
	}
	return f.verdict(label, r, countsOK, ev), true
}

// destroyOrderEvidence records the errnos, the stale send's outcome and
// the resource counts; how the counts were taken only when it says
// something.
func destroyOrderEvidence(r *probe.DestroyOrderResult) map[string]any {
	ev := map[string]any{
		"dealloc_pd_live_qp_errno": r.DeallocPDLiveQP, "destroy_cq_live_qp_errno": r.DestroyCQLiveQP,
		"stale_post_errno": r.StalePostErrno, "stale_status": r.StaleStatus, "stale_status_code": r.StaleStatusCode,
		"teardown_ok": r.TeardownOK, "counts_before": r.CountsBefore, "counts_during": r.CountsDuring,
		"counts_after": r.CountsAfter, "duration_ms": r.Millis,
	}
	if r.CountsError != "" {
		ev["counts_error"] = r.CountsError
	}
	if r.CountsMethod != "" {
		ev["counts_method"] = r.CountsMethod
	}
	if r.CountsPID != 0 {
		ev["counts_pid"] = r.CountsPID
	}
	if r.CountsFallback != "" {
		ev["counts_fallback"] = r.CountsFallback
	}
	if r.CountsDrift != "" {
		ev["counts_drift"] = r.CountsDrift
	}
	return ev
}

// destroyFindings gathers what one port's probe found. Each finding brings
// its own fix: the provider's state checks, the memory key check, a leak,
// or counts that could not be read.
type destroyFindings struct {
	unit             string
	fails, warns     []report.Finding
	details          []string
	failFix, warnFix []string
}

func (f *destroyFindings) fail(fd *Finding, slots Slots) {
	rf := fd.At(f.unit, slots)
	f.fails = append(f.fails, rf)
	f.failFix = appendUnique(f.failFix, rf.Fix)
}

func (f *destroyFindings) warn(fd *Finding, slots Slots) {
	rf := fd.At(f.unit, slots)
	f.warns = append(f.warns, rf)
	f.warnFix = appendUnique(f.warnFix, rf.Fix)
}

// judgeRefusal judges a destroy that a correct stack refuses with EBUSY
// while a live QP uses the object: success fails, another errno warns; a
// step the probe did not reach says nothing.
func (f *destroyFindings) judgeRefusal(what string, errno int, ran bool) {
	switch {
	case !ran:
	case errno == 0:
		f.fail(destroyFreedLive, Slots{"verb": what})
	case errno != 16:
		f.warn(destroyOtherErrno, Slots{"verb": what, "errno": fmt.Sprint(errno)})
	}
}

// judgeFailedStep fails on the first failed step other than the two
// refusals (judged above): a stale-lkey SEND that succeeded is the memory
// key check, anything else a leak or a destroy out of order. It returns
// the step, for the evidence.
func (f *destroyFindings) judgeFailedStep(r *probe.DestroyOrderResult) *probe.Step {
	st := firstFailure(&r.Probe, pdStep, cqStep)
	if st == nil {
		return nil
	}
	fd := destroyLeak
	if st.Name == staleStep {
		fd = destroyStaleKey
	}
	f.fail(fd, Slots{"step": stepText(st)})
	return st
}

// noteStaleSend says how the SEND through the deregistered MR's lkey ended.
func (f *destroyFindings) noteStaleSend(r *probe.DestroyOrderResult) {
	switch {
	case r.StaleStatus != "":
		f.details = append(f.details, fmt.Sprintf("SEND through the deregistered MR's lkey completed with %s (%d)", r.StaleStatus, r.StaleStatusCode))
	case r.StalePostErrno != 0:
		f.details = append(f.details, fmt.Sprintf("SEND through the deregistered MR's lkey was refused at post (errno %d)", r.StalePostErrno))
	}
}

// judgeCounts judges the resource counts around the probe: unreadable
// counts warn, and so do device-wide counts that drifted, since other users
// of the device may have moved them. It reports whether the counts were
// read and came back to their baseline.
func (f *destroyFindings) judgeCounts(r *probe.DestroyOrderResult) bool {
	counts := countsWhose(r) + ": before " + fmtCounts(r.CountsBefore) + "; during " + fmtCounts(r.CountsDuring) + "; after " + fmtCounts(r.CountsAfter)
	switch {
	case r.CountsError != "":
		f.warn(destroyCountsUnread, Slots{"cause": r.CountsError})
	case r.CountsDrift != "":
		f.warn(destroyCountsDrift, Slots{"drift": r.CountsDrift})
		f.details = append(f.details, counts)
	case r.CountsAfter != nil:
		f.details = append(f.details, counts)
		return true
	}
	return false
}

// countsWhose names whose resource counts were compared: the probe's own
// objects, or the whole device's.
func countsWhose(r *probe.DestroyOrderResult) string {
	switch r.CountsMethod {
	case probe.CountsProcess:
		return fmt.Sprintf("rdma resource counts of the probe's own objects (pid %d)", r.CountsPID)
	case probe.CountsDevice:
		return "rdma resource counts, device-wide"
	}
	return "rdma resource counts"
}

// verdict is the port's verdict: any failure fails it, with the warnings'
// fixes after the failures'; else any warning warns; else it passes.
func (f *destroyFindings) verdict(label string, r *probe.DestroyOrderResult, countsOK bool, ev map[string]any) verdict {
	if len(f.fails) == 0 && len(f.warns) == 0 {
		v := destroyOrderPass(label, r, countsOK)
		v.evidence, v.details = ev, f.details
		return v
	}
	v := verdict{evidence: ev, details: f.details, findings: append(append([]report.Finding{}, f.fails...), f.warns...)}
	switch {
	case len(f.fails) > 0:
		v.status = report.Fail
		v.line = fmt.Sprintf("%s: %s", label, findingMessages(f.fails))
		v.remedy = strings.Join(append(f.failFix, f.warnFix...), "\n")
		if len(f.warns) > 0 {
			v.details = append(v.details, "also: "+findingMessages(f.warns))
		}
	default:
		v.status = report.Warn
		v.line = fmt.Sprintf("%s: %s", label, findingMessages(f.warns))
		v.remedy = strings.Join(f.warnFix, "\n")
	}
	return v
}

// findingMessages joins the findings' messages: "a; b".
func findingMessages(fs []report.Finding) string {
	texts := make([]string, len(fs))
	for i, f := range fs {
		texts[i] = f.Message
	}
	return strings.Join(texts, "; ")
}

// destroyOrderPass says what a clean run showed, and whose counts came
// back to their baseline when they were read.
func destroyOrderPass(label string, r *probe.DestroyOrderResult, countsOK bool) verdict {
	stale := r.StaleStatus
	if stale == "" {
		stale = "a refused post"
	}
	slots := Slots{"label": label, "stale": stale}
	switch {
	case countsOK && r.CountsMethod == probe.CountsProcess:
		return destroyFreedOwn.unit(portUnitOf(label), slots)
	case countsOK:
		return destroyFreedDevice.unit(portUnitOf(label), slots)
	}
	return destroyFreed.unit(portUnitOf(label), slots)
}

func hasStep(p *probe.Probe, name string) bool {
	for _, s := range p.Steps {
		if s.Name == name {
			return true
		}
	}
	return false
}

func fmtCounts(m map[string]uint64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
