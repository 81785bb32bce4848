package checks

import (
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func TestQPStateRemediesNameNoMLNXOnlyTools(t *testing.T) {
	for _, s := range []string{rtrFix, rtrFixFor("mlx5_0 port 2"), noSMFix} {
		if strings.Contains(s, "show_gids") || strings.Contains(s, "rdma link") {
			t.Errorf("remedy names a tool that shows no GIDs or is MLNX_OFED-only: %s", s)
		}
	}
	if !strings.Contains(rtrFixFor("mlx5_0 port 2"), "/sys/class/infiniband/mlx5_0/ports/2/gid_attrs/types/*") {
		t.Errorf("device and port not filled in: %s", rtrFixFor("mlx5_0 port 2"))
	}
	if !strings.HasSuffix(noSMFix, subnetManagerFix("")) || !strings.HasPrefix(noSMFix, "The port has LID 0") {
		t.Errorf("the LID-0 remedy is not the shared subnet-manager wording: %s", noSMFix)
	}
}

func TestJudgeQPState(t *testing.T) {
	qs := func(slug string) []unitFinding { return onlyFinding("verbs.qp_state/"+slug, "rxe0/1") }
	runVerdictCases(t, qpStateJudge(nil), []verdictCase{
		{name: "healthy rxe", findings: qs("walked"), status: report.Pass,
			// the addressing read from the port, and the walk as it went
			contains: []string{"RoCE, GID index 1 0000:0000:0000:0000:0000:ffff:c000:0201 (RoCE v2)", "RESET→INIT→RTR→RTS→ERR→RESET→INIT"}},
		{name: "provider accepts RESET→RTS", findings: qs("reset-to-rts-accepted"), status: report.Fail, remedy: "qp_state_table",
			edit: func(pr *probe.PortResult) {
				r := pr.QPState
				r.ResetToRTSErrno, r.StateAfterRefusal = 0, "RTS"
				st := step(t, &r.Probe, "ibv_modify_qp C RESET→RTS")
				st.OK, st.Errno, st.ErrnoName, st.Error = false, 0, "", "ibv_modify_qp C RESET→RTS succeeded; a correct stack refuses it with EINVAL"
				failStep(step(t, &r.Probe, "C is RESET"), 0, "", "ibv_query_qp says C is RTS, expected RESET", "")
			}},
		{name: "refused with another errno", findings: qs("reset-to-rts-errno"), status: report.Warn, remedy: "Update the provider",
			edit: func(pr *probe.PortResult) {
				pr.QPState.ResetToRTSErrno = 95
				failStep(step(t, &pr.QPState.Probe, "ibv_modify_qp C RESET→RTS"), 95, "EOPNOTSUPP", "ibv_modify_qp: EOPNOTSUPP", "")
			},
			contains: []string{"errno 95 instead of EINVAL"}},
		{name: "RTR refused", findings: qs("rtr-refused"), status: report.Fail, remedy: "`ibv_devinfo -v -d rxe0 -i 1` or `grep . /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/*`",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.QPState.Probe, "ibv_modify_qp A INIT→RTR"), 22, "EINVAL", "ibv_modify_qp: EINVAL (invalid argument)",
					"the attributes or the attribute mask do not fit this transition")
				pr.QPState.Walk = []string{"RESET", "INIT"}
				pr.QPState.Recovered = false
			},
			contains: []string{"ibv_modify_qp A INIT→RTR: EINVAL (invalid argument)", "states read back: RESET→INIT"}},
		{name: "no SM", findings: qs("no-lid"), status: report.Fail, remedy: "`sminfo`",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.QPState.Probe, "resolve loopback address"), 0, "", "port 1 has LID 0", "no subnet manager has configured the port")
				pr.QPState.Addressing = nil
			}},
		{name: "no GID", findings: qs("no-gid"), status: report.Fail, remedy: "give it an IP address",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.QPState.Probe, "resolve loopback address"), 0, "", "port 1 has no GID", "RoCE GIDs come from the netdev's addresses")
			}},
		{name: "query disagrees", findings: qs("state-wrong"), status: report.Fail, remedy: "state machine",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.QPState.Probe, "A is RTR"), 0, "", "ibv_query_qp says A is INIT, expected RTR", "")
			},
			contains: []string{"says A is INIT"}},
		{name: "no recovery", findings: qs("not-recovered"), status: report.Fail, remedy: "state machine",
			edit: func(pr *probe.PortResult) { pr.QPState.Recovered = false }},
		{name: "InfiniBand addressing", findings: qs("walked"), status: report.Pass,
			edit: func(pr *probe.PortResult) {
				pr.QPState.Addressing = &probe.Addressing{LinkLayer: "InfiniBand", DLID: 0x1a, PathMTU: 4096}
			},
			contains: []string{"InfiniBand, dlid 0x1a, path MTU 4096"}},
	})
}

// TestJudgeQPStateGuestVF: on an InfiniBand VF of a virtual machine a port
// with LID 0 gets the guest's remedy (wait for the platform's SM,
// redeploy), never opensm, which a VF cannot run; the same port on a host
// keeps the subnet-manager remedy.
func TestJudgeQPStateGuestVF(t *testing.T) {
	noLID := func(pr *probe.PortResult) {
		failStep(step(t, &pr.QPState.Probe, "resolve loopback address"), 0, "", "port 1 has LID 0", "no subnet manager has configured the port")
		pr.QPState.Addressing = nil
	}
	guest := func(label string) (Slots, bool) {
		return Slots{"port": label, "guid": "0x00155dfffe342000"}, label == "mlx5_ib0 port 1"
	}
	for _, tc := range []struct {
		label, finding, has, hasNot string
	}{
		{"mlx5_ib0 port 1", "verbs.qp_state/no-lid-guest", "redeploy it", "opensm"},
		{"mlx5_0 port 1", "verbs.qp_state/no-lid", "opensm -g", "redeploy"},
	} {
		t.Run(tc.label, func(t *testing.T) {
			pr := healthyPort(t)
			noLID(pr)
			v, ok := qpStateJudge(guest)(tc.label, false, pr)
			if !ok {
				t.Fatal("no verdict")
			}
			if len(v.findings) != 1 || v.findings[0].ID != tc.finding {
				t.Fatalf("findings %v, want %s", unitFindings(v.findings), tc.finding)
			}
			if !strings.Contains(v.remedy, tc.has) || strings.Contains(v.remedy, tc.hasNot) {
				t.Errorf("remedy should say %q and not %q:\n%s", tc.has, tc.hasNot, v.remedy)
			}
		})
	}
	if !strings.Contains(render(qpStateNoLIDGuest.Fix, Slots{"port": "mlx5_ib0 port 1", "guid": "0x1"}), "(0x1)") {
		t.Error("the guest fix does not name the port GUID")
	}
}
