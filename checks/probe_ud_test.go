package checks

import (
	"path"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// The recorded rxe0 run (SoftRoCE in the VM) is the healthy UD port; each
// case breaks it the way a provider or a port can.
func TestJudgeUD(t *testing.T) {
	ud := func(slug string) []unitFinding { return onlyFinding("probe.ud/"+slug, "rxe0/1") }
	runVerdictCases(t, judgeUD, []verdictCase{
		{name: "healthy rxe", software: true, status: report.Pass, findings: ud("arrived-grh"),
			// the measured values the recorded run gives
			contains: []string{"byte_len 1064", "200 round trips: min"}},
		{name: "address handle refused", status: report.Fail, remedy: "/sys/class/infiniband/rxe0/ports/1/gid_attrs/types",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.UD.Probe, "ibv_create_ah"), 22, "EINVAL", "ibv_create_ah: EINVAL (invalid argument)", "")
			},
			findings: ud("ah-refused"), contains: []string{"ibv_create_ah: EINVAL"}},
		{name: "nothing arrives on rxe", software: true, status: report.Fail, remedy: "drops UDP port 4791",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.UD.Probe, "ibv_poll_cq B (receive completion)"), 0, "", "no completion within 2s", "the UD SEND never arrived")
			},
			findings: ud("no-delivery-rxe"), contains: []string{"no completion within 2s"}},
		{name: "nothing arrives names the UD pingpong", status: report.Fail,
			remedy: "`ibv_ud_pingpong -d rxe0 -i 1 -g 1 -s 1024` and, in a second shell, `ibv_ud_pingpong -d rxe0 -i 1 -g 1 -s 1024 localhost`",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.UD.Probe, "ibv_poll_cq B (receive completion)"), 0, "", "no completion within 2s", "")
			},
			findings: ud("no-delivery")},
		{name: "send completes in error", status: report.Fail, remedy: "LOC_QP_OP_ERR — the work request is not valid for UD",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.UD.Probe, "send completion IBV_WC_SUCCESS"), 0, "", "send completed with IBV_WC_LOC_QP_OP_ERR (vendor error 0x0)", "")
			},
			findings: ud("completion-error"), contains: []string{"IBV_WC_LOC_QP_OP_ERR"}},
		{name: "a wrong byte_len fails", status: report.Fail, remedy: "the first 40 bytes of a UD receive buffer are the GRH area",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.UD.Probe, "receive byte_len = payload + 40 (GRH area)"), 0, "", "byte_len 512, expected 1064", "")
			},
			findings: ud("layout-wrong"), contains: []string{"byte_len 512, expected 1064"}},
		{name: "byte_len without the GRH area warns", status: report.Warn, remedy: "reads 40 bytes short",
			edit: func(pr *probe.PortResult) {
				st := step(t, &pr.UD.Probe, "receive byte_len = payload + 40 (GRH area)")
				failStep(st, 0, "", "byte_len 1024 counts the 1024-byte payload alone", "")
				st.Want = "byte_len = payload + 40"
			},
			findings: ud("byte-len-short")},
		{name: "no GRH flag on RoCE warns", status: report.Warn, remedy: "ibv_init_ah_from_wc",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.UD.Probe, "IBV_WC_GRH set (RoCE always carries a GRH)"), 0, "", "wc_flags 0 lack IBV_WC_GRH", "")
			},
			findings: ud("no-grh-flag"), contains: []string{"wc_flags 0 lack IBV_WC_GRH"}},
		{name: "device without UD skips", status: report.Skip,
			edit: func(pr *probe.PortResult) {
				pr.UD = &probe.UDResult{Probe: probe.Probe{Name: probe.UD, Skipped: qedrNoUD}}
			},
			// the skip's reason is the plan's own words
			findings: ud("skipped"), contains: []string{"qedr offers applications RC queue pairs only"}},
		{name: "payload at offset 0", status: report.Fail, remedy: "update rdma-core",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.UD.Probe, "payload at offset 40"), 0, "", "the payload starts at offset 0 of the receive buffer", "")
			},
			findings: ud("layout-wrong"), contains: []string{"offset 0"}},
		{name: "wrong Q_Key delivered warns", status: report.Warn, remedy: "Q_Keys do not keep UD applications apart",
			edit: func(pr *probe.PortResult) {
				pr.UD.WrongQKey = "delivered"
				failStep(step(t, &pr.UD.Probe, "SEND with the wrong Q_Key dropped"), 0, "", "B completed a receive for a SEND with qkey 0x22222222", "")
			},
			findings: ud("wrong-qkey-delivered"), contains: []string{"qkey 0x22222222"}},
		{name: "no GRH room dropped silently warns", status: report.Warn, remedy: "Post UD receives of payload + 40 bytes",
			edit: func(pr *probe.PortResult) {
				pr.UD.NoGRHRoom = "no completion"
				failStep(step(t, &pr.UD.Probe, "receive without room for the GRH completes in error"), 0, "", "no completion within 500ms", "")
			},
			findings: ud("no-grh-room-accepted")},
		{name: "a broken data path outranks a mistake not caught", status: report.Fail, remedy: "LOC_QP_OP_ERR",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.UD.Probe, "SEND with the wrong Q_Key dropped"), 0, "", "delivered", "")
				failStep(step(t, &pr.UD.Probe, "send completion IBV_WC_SUCCESS — to C"), 0, "", "send completed with IBV_WC_LOC_QP_OP_ERR", "")
			},
			findings: ud("completion-error"), contains: []string{"send completion IBV_WC_SUCCESS — to C"}},
		{name: "iWARP skips", status: report.Skip,
			edit: func(pr *probe.PortResult) {
				pr.UD = &probe.UDResult{Probe: probe.Probe{Name: probe.UD, Skipped: "iWARP has no UD queue pairs (RC over TCP only)"}}
			},
			findings: ud("skipped"), contains: []string{"iWARP has no UD queue pairs"}},
	})
}

// The observations are the steps with a Want (the GRH flag on RoCE and the
// two classic mistakes): the recorded run has all three, and a correct
// stack passes them.
func TestRecordedUDObservesTheMistakes(t *testing.T) {
	u := healthyPort(t).UD
	var wants []string
	for _, st := range u.Steps {
		if st.Want != "" {
			wants = append(wants, st.Name)
			if !st.OK {
				t.Errorf("%s: %s", st.Name, st.Error)
			}
		}
	}
	if len(wants) != 3 || u.WrongQKey != "dropped" || u.NoGRHRoom == "" || u.NoGRHRoom == "IBV_WC_SUCCESS" {
		t.Fatalf("observations %q, wrong Q_Key %q, no GRH room %q", wants, u.WrongQKey, u.NoGRHRoom)
	}
	if u.ByteLen != uint32(u.Payload+40) || u.PayloadOffset != 40 || !u.GRHFlag || u.SrcQP != u.SenderQPN {
		t.Fatalf("recorded receive: byte_len %d, offset %d, grh %v, src_qp %d/%d", u.ByteLen, u.PayloadOffset, u.GRHFlag, u.SrcQP, u.SenderQPN)
	}
}

func TestRCCapable(t *testing.T) {
	for _, c := range []struct {
		driver, nodeType string
		rc               bool
		why              string
	}{
		{"efa", "7: UNSPECIFIED", false, "EFA has no RC queue pairs (UD and SRD only); probe.ud probes it"},
		{"efa", "", false, "EFA has no RC"},
		{"", "7: UNSPECIFIED\n", false, "EFA has no RC"},
		{"usnic_verbs", "5: usNIC", false, "usNIC has no RC"},
		{"", "6: usNIC UDP", false, "usNIC has no RC"},
		{"mlx5_core", "1: CA", true, ""},
		{"cxgb4", "4: RNIC", true, ""},
		{"", "", true, ""},
		{"", "garbage", true, ""},
	} {
		rc, why := rcCapable(c.driver, c.nodeType)
		if rc != c.rc || (c.why == "") != (why == "") || !strings.HasPrefix(why, c.why) {
			t.Errorf("rcCapable(%q, %q) = %v, %q", c.driver, c.nodeType, rc, why)
		}
	}
}

func TestUDCapable(t *testing.T) {
	for _, c := range []struct {
		driver, nodeType string
		why              string
	}{
		{"cxgb4", "4: RNIC", iwarpNoUD},
		{"qede", "1: CA", qedrNoUD},
		{"mana", "1: CA", manaNoUD},
		{"efa", "7: UNSPECIFIED", ""},
		{"mlx5_core", "1: CA", ""},
		{"bnxt_en", "1: CA", ""},
		{"", "", ""},
	} {
		ud, why := udCapable(c.driver, c.nodeType)
		if ud != (c.why == "") || why != c.why {
			t.Errorf("udCapable(%q, %q) = %v, %q", c.driver, c.nodeType, ud, why)
		}
	}
}

// The probe plan marks a device without RC (here a ConnectX whose
// node_type reads as EFA's) so its child runs UD instead; the others keep
// their RC probes.
func TestPlanMarksDevicesWithoutRC(t *testing.T) {
	tree, err := sysfstest.Fixture("cx5-roce-healthy")
	if err != nil {
		t.Fatal(err)
	}
	tree = tree.Clone()
	var nodeType string
	for p := range tree.Files {
		if strings.HasSuffix(p, "/infiniband/mlx5_0/node_type") {
			nodeType = p
		}
	}
	if nodeType == "" {
		t.Fatal("no mlx5_0 node_type in the fixture")
	}
	tree.Attr(nodeType, "7: UNSPECIFIED")
	dir := path.Join(t.TempDir(), "host")
	if err := tree.Write(dir); err != nil {
		t.Fatal(err)
	}
	h, err := sysfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	plan := planProbes(NewEnv(h, Options{Level: 2}))
	var marked []string
	for _, tg := range plan.targets {
		if tg.NoRC != "" {
			marked = append(marked, tg.Device+": "+tg.NoRC)
		}
	}
	if len(marked) != 1 || marked[0] != "mlx5_0: "+efaNoRC {
		t.Fatalf("targets %+v", plan.targets)
	}
	for _, tg := range plan.targets {
		if tg.NoUD != "" {
			t.Errorf("%s marked without UD: %s", tg.Device, tg.NoUD)
		}
	}
}

// verbs.resources says which QP it created and why it is not RC.
func TestResourcesUDQPOnDeviceWithoutRC(t *testing.T) {
	pr := healthyPort(t)
	pr.Resources.QPType, pr.Resources.NoRC = "UD", efaNoRC
	v, _ := judgeResources("efa_0 port 1", false, pr)
	text := v.line + "\n" + strings.Join(v.details, "\n")
	// The finding is the same for any QP type: which one, and why, is in the words.
	if v.status != report.Pass || !cmp.Equal(onlyFinding("verbs.resources/created", "efa_0/1"), unitFindings(v.findings)) ||
		!strings.Contains(text, "UD QP (send/recv") || !strings.Contains(text, "EFA has no RC queue pairs") {
		t.Fatalf("%s: %s", v.status, text)
	}
}

// The RC probes skip a device without RC with the reason, not a failure.
func TestRCProbesSkipWithoutRC(t *testing.T) {
	pr := healthyPort(t)
	pr.SendPoll = &probe.SendPollResult{Probe: probe.Probe{Name: probe.SendPoll, Skipped: efaNoRC}}
	v, _ := judgeSendPoll("efa_0 port 1", false, pr)
	if v.status != report.Skip || !cmp.Equal(onlyFinding("probe.send_poll/skipped", "efa_0/1"), unitFindings(v.findings)) ||
		!strings.Contains(v.line, "UD and SRD only") {
		t.Fatalf("%s: %s", v.status, v.line)
	}
}
