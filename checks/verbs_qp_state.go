package checks

import (
	"context"
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func init() {
	register(Check{
		ID: "verbs.qp_state", Code: 31, Level: 2,
		Title:      "RC queue pairs walk RESET→INIT→RTR→RTS, refuse RESET→RTS, and recover from ERR",
		Needs:      []string{"verbs.resources"},
		Privileges: level2Needs,
		Explain: Explanation{
			Judges: "On every ACTIVE port: a fresh RC QP is moved RESET→RTS with every RTS attribute set; a correct stack refuses with EINVAL and " +
				"the QP stays RESET. Two RC QPs are then connected to each other — RoCE: is_global with a RoCE v2 GID of the port " +
				"(IPv4-mapped first), InfiniBand: dlid = the port's LID — RESET→INIT→RTR→RTS, read back with ibv_query_qp after each step. " +
				"One is then moved RTS→ERR→RESET→INIT, which must work. retry_cnt and rnr_retry are 3 (7 would retry forever). " +
				"iWARP devices (RNIC: siw, cxgb4, irdma in iWARP mode) skip it: their RC QPs connect only through rdma_cm, not ibv_modify_qp. " +
				"Devices without RC QPs skip it too: EFA (UD and SRD only), whose UD path probe.ud judges. A port with LID 0 fails; on an " +
				"InfiniBand VF in a virtual machine (Azure's HB, HC and ND VMs, the host model's guest VF) the remedy waits for the platform's " +
				"subnet manager and redeploys, since a VF has no QP0 and cannot run one.",
			Why: "Connection setup is where most RDMA applications fail in the field: a wrong GID index, a path MTU above the port's, a LID of 0 " +
				"with no subnet manager. A provider that accepts illegal transitions hides application bugs until they corrupt traffic; " +
				"one that cannot recover a QP from ERR forces applications to leak QPs.",
		},
		Run: func(ctx context.Context, env *Env) Result {
			return runLevel2(ctx, env, probe.QPState, qpStateFrame, qpStateJudge(guestVFPorts(env)))
		},
	})
}

const (
	rtrFix = "RoCE: use a GID index whose type is \"RoCE v2\" and whose netdev is up — list them with `ibv_devinfo -v -d <dev> -i <port>` or " +
		"`grep . /sys/class/infiniband/<dev>/ports/<port>/gid_attrs/types/*` (and gid_attrs/ndevs/* for the netdevs) — and a path MTU not above " +
		"the port's active MTU (the netdev's MTU minus RoCE headers). InfiniBand: dlid must be a LID the subnet manager assigned."
	noGIDFix = "RoCE GIDs come from the netdev's addresses: bring the port's netdev up and give it an IP address " +
		"(`ip link set <if> up; ip addr add <addr> dev <if>`); the RoCE v2 GID appears in gids/ and gid_attrs/types/."
	providerStateFix = "The provider does not follow the InfiniBand QP state machine (the kernel's qp_state_table allows only RESET→INIT from RESET). " +
		"Update the provider (rdma-core or MLNX_OFED/DOCA-OFED) and the firmware; report it to the vendor with the failing transition."
)

// noSMFix is the remedy for an InfiniBand port with LID 0: the shared
// subnet-manager remedy, which looks for the fabric's SM before it
// advises starting one.
var noSMFix = "The port has LID 0: no subnet manager has configured it. " + subnetManagerFix("")

// rtrFixFor is rtrFix with the port's device and number filled in; label is
// "<device> port <n>".
func rtrFixFor(label string) string {
	dev, port := labelParts(label)
	return strings.NewReplacer("<dev>", dev, "<port>", port).Replace(rtrFix)
}

// rtrFixTemplate is rtrFix as a template: {device} and {num} (rtrSlots).
var rtrFixTemplate = strings.NewReplacer("<dev>", "{device}", "<port>", "{num}").Replace(rtrFix)

// rtrSlots are the slots of rtrFixTemplate for the port of label.
func rtrSlots(label string) Slots {
	dev, port := labelParts(label)
	return Slots{"device": dev, "num": port}
}

// verbsStepFixWhen is the When of a probe's finding for a failed step whose
// fix is verbs.resources's for that verb and errno ({verbs_fix}).
const verbsStepFixWhen = "another verbs step fails (the fix is the one verbs.resources gives for that verb and errno: device node, locked memory, caps, or the driver)"

// verbs.qp_state's findings.
var (
	qpStateFrame  = declareLevel2Frame("verbs.qp_state")
	qpStateWalked = declare(Finding{ID: "verbs.qp_state/walked", Status: report.Pass,
		When:    "the QPs walked RESET→INIT→RTR→RTS, RESET→RTS was refused with EINVAL, and RTS→ERR→RESET→INIT recovered",
		Message: "{label}: RESET→INIT→RTR→RTS walked and read back ({addressing}); RESET→RTS refused with EINVAL; RTS→ERR→RESET→INIT recovered"})
	qpStateNoLID = declare(Finding{ID: "verbs.qp_state/no-lid", Status: report.Fail,
		When:    "the port has LID 0 (InfiniBand): no subnet manager",
		Message: "{label}: {step}", Fix: "The port has LID 0: no subnet manager has configured it. {manager_fix}"})
	qpStateNoLIDGuest = declare(Finding{ID: "verbs.qp_state/no-lid-guest", Status: report.Fail,
		When:    "the port has LID 0 (InfiniBand) and is a VF in a virtual machine: the platform's subnet manager, outside the guest, has not configured it",
		Message: "{label}: {step}", Fix: "The port has LID 0: no subnet manager has configured it. " + guestSMFix})
	qpStateNoGID = declare(Finding{ID: "verbs.qp_state/no-gid", Status: report.Fail,
		When:    "the port has no GID (RoCE): the netdev has no address",
		Message: "{label}: {step}", Fix: noGIDFix})
	qpStateRTRRefused = declare(Finding{ID: "verbs.qp_state/rtr-refused", Status: report.Fail,
		When:    "INIT→RTR or RTR→RTS fails (EINVAL): the address vector does not fit the port (GID index, path MTU)",
		Message: "{label}: {step}", Fix: rtrFixTemplate})
	qpStateReadBack = declare(Finding{ID: "verbs.qp_state/state-wrong", Status: report.Fail,
		When:    "ibv_query_qp fails, or reads back another state than the transition set",
		Message: "{label}: {step}", Fix: providerStateFix})
	qpStateStepFailed = declare(Finding{ID: "verbs.qp_state/step-failed", Status: report.Fail,
		When: verbsStepFixWhen, Message: "{label}: {step}", Fix: "{verbs_fix}"})
	qpStateAccepted = declare(Finding{ID: "verbs.qp_state/reset-to-rts-accepted", Status: report.Fail,
		When:    "the provider accepted RESET→RTS",
		Message: "{label}: the provider accepted RESET→RTS on a fresh QP; a correct stack refuses it with EINVAL", Fix: providerStateFix})
	qpStateOtherErrno = declare(Finding{ID: "verbs.qp_state/reset-to-rts-errno", Status: report.Warn,
		When:    "RESET→RTS was refused, but with another errno than EINVAL",
		Message: "{label}: RESET→RTS was refused with errno {errno} instead of EINVAL", Fix: providerStateFix})
	qpStateLeftReset = declare(Finding{ID: "verbs.qp_state/refusal-left-reset", Status: report.Fail,
		When:    "RESET→RTS was refused, but the QP is no longer RESET",
		Message: "{label}: RESET→RTS was refused but the QP is now {state}, not RESET", Fix: providerStateFix})
	qpStateNotRecovered = declare(Finding{ID: "verbs.qp_state/not-recovered", Status: report.Fail,
		When:    "RTS→ERR→RESET→INIT does not recover the QP",
		Message: "{label}: the QP did not recover through RTS→ERR→RESET→INIT", Fix: providerStateFix})
)

// qpRefusal judges the refusal of RESET→RTS on its own: a provider that
// accepts it fails even when everything else works. It returns the text
// for the details, and the finding with its slots; nil when all is well.
func qpRefusal(r *probe.QPStateResult) (string, *Finding, Slots) {
	switch {
	case !r.ResetToRTSTried:
	case r.ResetToRTSErrno == 0:
		return "the provider accepted RESET→RTS on a fresh QP; a correct stack refuses it with EINVAL", qpStateAccepted, nil
	case r.ResetToRTSErrno != 22:
		return fmt.Sprintf("RESET→RTS was refused with errno %d instead of EINVAL", r.ResetToRTSErrno), qpStateOtherErrno,
			Slots{"errno": fmt.Sprint(r.ResetToRTSErrno)}
	case r.StateAfterRefusal != "" && r.StateAfterRefusal != "RESET":
		return fmt.Sprintf("RESET→RTS was refused but the QP is now %s, not RESET", r.StateAfterRefusal), qpStateLeftReset,
			Slots{"state": r.StateAfterRefusal}
	}
	return "", nil, nil
}

// guestPorts says, for a probed port's label, whether the port is an
// InfiniBand VF of a virtual machine and the slots of the guest's
// subnet-manager fix; nil knows of none.
type guestPorts func(label string) (Slots, bool)

// guestVFPorts finds the host model's guest VF ports by label.
func guestVFPorts(env *Env) guestPorts {
	return func(label string) (Slots, bool) {
		for _, pm := range env.Model().Ports {
			if pm.Label == label && pm.Device.GuestVF {
				return guestSlots(Slots{"port": label}, pm.Port), true
			}
		}
		return nil, false
	}
}

// qpStateJudge judges verbs.qp_state on one port; guest tells a VF in a
// virtual machine, whose LID-0 remedy is the platform's.
func qpStateJudge(guest guestPorts) probeJudge {
	return func(label string, software bool, pr *probe.PortResult) (verdict, bool) {
		return judgeQPState(label, pr, guest)
	}
}

// judgeQPState judges verbs.qp_state on one port.
func judgeQPState(label string, pr *probe.PortResult, guest guestPorts) (verdict, bool) {
	r := pr.QPState
	if r == nil {
		return verdict{}, false
	}
	if r.Skipped != "" {
		return qpStateFrame.skippedVerdict(label, &r.Probe), true
	}
	ev := map[string]any{
		"reset_to_rts_errno": r.ResetToRTSErrno, "state_after_refusal": r.StateAfterRefusal,
		"walk": r.Walk, "recovered": r.Recovered, "duration_ms": r.Millis,
	}
	if r.Addressing != nil {
		ev["addressing"] = r.Addressing
	}
	addr := addressingText(r.Addressing)
	walk := strings.Join(r.Walk, "→")
	unit := portUnitOf(label)
	refusal, refusalFinding, refusalSlots := qpRefusal(r)

	st := firstFailure(&r.Probe, "ibv_modify_qp C RESET→RTS", "C is RESET")
	var v verdict
	switch {
	case st != nil:
		v = qpStepFinding(st, label, r.Addressing, guest)
		ev["failed_step"] = st
		if walk != "" {
			v.details = append(v.details, "states read back: "+walk)
		}
		if addr != "" {
			v.details = append(v.details, "addressing: "+addr)
		}
		if refusal != "" {
			v.details = append(v.details, refusal)
		}
	case refusalFinding != nil:
		v = refusalFinding.unit(unit, Slots{"label": label}.with(slotPairs(refusalSlots)...))
		v.details = []string{"states read back: " + walk}
	case !r.Recovered:
		v = qpStateNotRecovered.unit(unit, Slots{"label": label})
	default:
		v = qpStateWalked.unit(unit, Slots{"label": label, "addressing": addr})
		v.details = append(v.details, "states read back: "+walk)
	}
	v.evidence = ev
	return v, true
}

// slotPairs lists slots as key, value pairs for Slots.with.
func slotPairs(s Slots) []string {
	var kv []string
	for k, v := range s {
		kv = append(kv, k, v)
	}
	return kv
}

// qpStepFinding is the verdict for a failed step, by what the step and its
// error say: no LID, no GID, the address vector, the provider's states, or
// verbs.resources's fix for the verb and errno.
func qpStepFinding(st *probe.Step, label string, a *probe.Addressing, guest guestPorts) verdict {
	unit, slots := portUnitOf(label), Slots{"label": label, "step": stepText(st)}
	switch {
	case strings.Contains(st.Error, "LID 0"):
		if guest != nil {
			if g, ok := guest(label); ok {
				return qpStateNoLIDGuest.unit(unit, slots.with(slotPairs(g)...))
			}
		}
		dev, port := labelParts(label)
		return qpStateNoLID.unit(unit, slots.with("manager_fix", subnetManagerFixFor(dev, port, "")))
	case strings.Contains(st.Error, "has no GID"):
		return qpStateNoGID.unit(unit, slots)
	case strings.Contains(st.Name, "→RTR") || strings.Contains(st.Name, "→RTS"):
		return qpStateRTRRefused.unit(unit, slots.with(slotPairs(rtrSlots(label))...))
	case strings.HasPrefix(st.Name, "ibv_query_qp") || strings.Contains(st.Name, " is "):
		return qpStateReadBack.unit(unit, slots)
	}
	return qpStateStepFailed.unit(unit, slots.with("verbs_fix", resourcesRemedy(st, label, a)))
}

// firstFailure is the first step that failed, ignoring the named steps
// (judged on their own).
func firstFailure(p *probe.Probe, ignore ...string) *probe.Step {
	for i := range p.Steps {
		st := &p.Steps[i]
		if st.OK {
			continue
		}
		skip := false
		for _, n := range ignore {
			if st.Name == n {
				skip = true
			}
		}
		if !skip {
			return st
		}
	}
	return nil
}

func addressingText(a *probe.Addressing) string {
	if a == nil {
		return ""
	}
	if a.LinkLayer == "Ethernet" {
		return fmt.Sprintf("RoCE, GID index %d %s (%s), path MTU %d", a.GIDIndex, a.GID, a.GIDType, a.PathMTU)
	}
	return fmt.Sprintf("InfiniBand, dlid 0x%x, path MTU %d", a.DLID, a.PathMTU)
}
