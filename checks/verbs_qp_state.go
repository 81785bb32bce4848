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
				"Devices without RC QPs skip it too: EFA (UD and SRD only), whose UD path probe.ud judges.",
			Why: "Connection setup is where most RDMA applications fail in the field: a wrong GID index, a path MTU above the port's, a LID of 0 " +
				"with no subnet manager. A provider that accepts illegal transitions hides application bugs until they corrupt traffic; " +
				"one that cannot recover a QP from ERR forces applications to leak QPs.",
			Failures: []Failure{
				{report.Fail, "INIT→RTR fails (EINVAL): the address vector does not fit the port (GID index, path MTU)", rtrFix},
				{report.Fail, "the port has LID 0 (InfiniBand): no subnet manager", noSMFix},
				{report.Fail, "the port has no GID (RoCE): the netdev has no address", noGIDFix},
				{report.Fail, "the provider accepted RESET→RTS", providerStateFix},
				{report.Warn, "RESET→RTS was refused, but with another errno than EINVAL", providerStateFix},
				{report.Fail, "RTS→ERR→RESET→INIT does not recover the QP", providerStateFix},
				childFailure,
			},
		},
		Run: func(ctx context.Context, env *Env) Result {
			return runLevel2(ctx, env, probe.QPState, nil, judgeQPState)
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

// judgeQPState judges verbs.qp_state on one port.
func judgeQPState(label string, software bool, pr *probe.PortResult) (verdict, bool) {
	r := pr.QPState
	if r == nil {
		return verdict{}, false
	}
	if r.Skipped != "" {
		return skippedVerdict(label, &r.Probe), true
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

	// The refusal of RESET→RTS is judged on its own: a provider that
	// accepts it fails even when everything else works.
	refusal := ""
	var refusalStatus report.Status
	if r.ResetToRTSTried {
		switch {
		case r.ResetToRTSErrno == 0:
			refusal = "the provider accepted RESET→RTS on a fresh QP; a correct stack refuses it with EINVAL"
			refusalStatus = report.Fail
		case r.ResetToRTSErrno != 22:
			refusal = fmt.Sprintf("RESET→RTS was refused with errno %d instead of EINVAL", r.ResetToRTSErrno)
			refusalStatus = report.Warn
		case r.StateAfterRefusal != "" && r.StateAfterRefusal != "RESET":
			refusal = fmt.Sprintf("RESET→RTS was refused but the QP is now %s, not RESET", r.StateAfterRefusal)
			refusalStatus = report.Fail
		}
	}

	st := firstFailure(&r.Probe, "ibv_modify_qp C RESET→RTS", "C is RESET")
	switch {
	case st != nil:
		v := verdict{status: report.Fail, line: fmt.Sprintf("%s: %s", label, stepText(st)), evidence: ev}
		ev["failed_step"] = st
		v.remedy = qpStateRemedy(st, label, r.Addressing)
		if walk != "" {
			v.details = append(v.details, "states read back: "+walk)
		}
		if addr != "" {
			v.details = append(v.details, "addressing: "+addr)
		}
		if refusal != "" {
			v.details = append(v.details, refusal)
		}
		return v, true
	case refusalStatus != "":
		return verdict{status: refusalStatus, line: fmt.Sprintf("%s: %s", label, refusal), evidence: ev,
			remedy: providerStateFix, details: []string{"states read back: " + walk}}, true
	case !r.Recovered:
		return verdict{status: report.Fail, line: fmt.Sprintf("%s: the QP did not recover through RTS→ERR→RESET→INIT", label),
			evidence: ev, remedy: providerStateFix}, true
	}
	v := verdict{status: report.Pass, evidence: ev,
		line: fmt.Sprintf("%s: RESET→INIT→RTR→RTS walked and read back (%s); RESET→RTS refused with EINVAL; RTS→ERR→RESET→INIT recovered", label, addr)}
	v.details = append(v.details, "states read back: "+walk)
	return v, true
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

func qpStateRemedy(st *probe.Step, label string, a *probe.Addressing) string {
	switch {
	case strings.Contains(st.Error, "LID 0"):
		dev, port := labelParts(label)
		return "The port has LID 0: no subnet manager has configured it. " + subnetManagerFixFor(dev, port, "")
	case strings.Contains(st.Error, "has no GID"):
		return noGIDFix
	case strings.Contains(st.Name, "→RTR") || strings.Contains(st.Name, "→RTS"):
		return rtrFixFor(label)
	case strings.HasPrefix(st.Name, "ibv_query_qp") || strings.Contains(st.Name, " is "):
		return providerStateFix
	}
	return resourcesRemedy(st, label, a)
}
