package checks

import (
	"fmt"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// devlinkSeriesPrefix keys the devlink error counts in the check's part of
// the state (state.KernelLogState.Devlink, counter series as
// counters.errors keeps them): "kernel.log/devlink/pci/0000:3b:00.0/tx/error_count".
const devlinkSeriesPrefix = "kernel.log/devlink/"

const devlinkHead = "{device}: devlink health reporter {reporter}"

var (
	klogDevlinkError = declare(Finding{ID: "kernel.log/devlink-error", Status: report.Fail,
		When:    "a devlink health reporter of an RDMA NIC is in error state (the driver did not recover it)",
		Message: devlinkHead + " is in error state ({errors} error(s) since the driver loaded, {recovered} recovered)",
		Fix: "Read what it saw: `devlink health diagnose {handle} reporter {reporter}` and `devlink health dump show {handle} reporter " +
			"{reporter}`; recover it with `devlink health recover {handle} reporter {reporter}`, and reset or replace the adapter when it " +
			"falls into error again."})
	klogDevlinkRising = declare(Finding{ID: "kernel.log/devlink-errors-rising", Status: report.Warn,
		When:    "a devlink health reporter's error count rose since the last run",
		Message: devlinkHead + ": {new} new error(s) since the last run ({errors} since the driver loaded, {recovered} recovered)",
		Fix: "`devlink health diagnose {handle} reporter {reporter}` says what failed; the driver recovered it, but errors that keep " +
			"rising mean the NIC, its firmware or its link keeps failing — check the kernel log around them and update the firmware."})
	klogDevlinkSinceBoot = declare(Finding{ID: "kernel.log/devlink-errors-since-boot", Status: report.Warn,
		When:    "a devlink health reporter counted errors since the driver loaded, with no earlier reading to compare with",
		Message: devlinkHead + ": {errors} error(s) since the driver loaded, {recovered} recovered (no earlier reading: run with --state to judge their rise)",
		Fix:     "`devlink health diagnose {handle} reporter {reporter}` says what failed; with --state the next runs report only new errors."})
)

// devlinkVerdict is the judgement of the RDMA NICs' reporters.
type devlinkVerdict struct {
	findings []report.Finding
	details  []string
	summary  string // one phrase for the check's summary
}

// judgeDevlink judges the reporters of the NICs in scope, and records
// their error counts in the check's history.
func judgeDevlink(env *Env, sc *logScope) devlinkVerdict {
	dh, err := env.Host.DevlinkHealth()
	if err != nil && !env.Host.Live() {
		// A fixture, or a snapshot taken before devlink health was kept.
		return devlinkVerdict{summary: "devlink health not recorded in this root"}
	}
	if err != nil {
		return devlinkVerdict{summary: "devlink health reporters unknown", details: []string{"devlink health: " + err.Error()}}
	}
	if dh.Absent != "" {
		return devlinkVerdict{summary: "no devlink health reporters", details: []string{"devlink health: " + dh.Absent}}
	}
	var v devlinkVerdict
	bootID, _ := env.Host.BootID()
	judged, other := 0, 0
	for _, r := range dh.Reporters {
		if r.Bus != "pci" || !sc.pciNames[r.Device] {
			other++
			continue
		}
		judged++
		if f, ok := judgeReporter(env.Opts.State, r, sc.units[r.Device], bootID); ok {
			v.findings = append(v.findings, f)
		}
		v.details = append(v.details, fmt.Sprintf("devlink %s reporter %s: %s, %d error(s), %d recovered", r.Handle(), r.Name, r.State, r.ErrorCount, r.RecoverCount))
	}
	if other > 0 {
		v.details = append(v.details, fmt.Sprintf("devlink: %d reporter(s) of devices that are not RDMA NICs, not judged", other))
	}
	v.summary = fmt.Sprintf("%d devlink health reporter(s) of the RDMA NICs", judged)
	if judged == 0 {
		v.summary = "no devlink health reporter on the RDMA NICs"
	}
	return v
}

// judgeReporter judges one reporter against its history and adds this
// reading to it; ok is false when the reporter is healthy with no new error.
func judgeReporter(st *state.State, r sysfs.DevlinkReporter, label, bootID string) (report.Finding, bool) {
	slots := Slots{"device": label, "reporter": r.Name, "handle": r.Handle(), "errors": fmt.Sprint(r.ErrorCount),
		"recovered": fmt.Sprint(r.RecoverCount)}
	var prev *state.CounterSample
	key := devlinkSeriesPrefix + r.Handle() + "/" + r.Name + "/error_count"
	if st != nil {
		if cs := kernelLogState(st).Series(key); cs != nil && len(cs.Samples) > 0 {
			prev = &cs.Samples[len(cs.Samples)-1]
		}
	}
	// The count restarts when the driver loads: a reading of another boot,
	// or a higher one (a reload), is no baseline.
	comparable := prev != nil && prev.BootID == bootID && prev.Value <= r.ErrorCount
	rose := comparable && r.ErrorCount > prev.Value || !comparable && r.ErrorCount > 0
	if st != nil {
		kernelLogState(st).AddSample(key, state.CounterSample{Value: r.ErrorCount, At: klogNow().UTC(), BootID: bootID, Rose: rose})
	}
	unit := r.Handle() + "/" + r.Name
	switch {
	case r.State == "error":
		return klogDevlinkError.At(unit, slots), true
	case comparable && rose:
		return klogDevlinkRising.At(unit, slots.with("new", fmt.Sprint(r.ErrorCount-prev.Value))), true
	case !comparable && rose:
		return klogDevlinkSinceBoot.At(unit, slots), true
	}
	return report.Finding{}, false
}
