package checks

import (
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func TestJudgeResources(t *testing.T) {
	vr := func(slug string) []unitFinding { return onlyFinding("verbs.resources/"+slug, "rxe0/1") }
	runVerdictCases(t, judgeResources, []verdictCase{
		{name: "healthy rxe", findings: vr("created"), software: true, status: report.Pass,
			contains: []string{"CQ (16 asked, 31 granted)"}},
		{name: "memlock", findings: vr("memlock"), status: report.Fail, remedy: "LimitMEMLOCK=infinity",
			edit: func(pr *probe.PortResult) {
				*pr = *recordedPort(t, "rxe0-memlock64k.json")
			},
			// the bytes pinned and the limit, from the recorded run
			contains: []string{"pinning 262144 bytes exceeds RLIMIT_MEMLOCK (max locked memory is 64 KiB"}},
		{name: "device node permissions", findings: vr("open-denied"), status: report.Fail, remedy: "grep -rn uverbs /etc/udev/rules.d /usr/lib/udev/rules.d",
			edit: func(pr *probe.PortResult) {
				p := &pr.Resources.Probe
				failStep(step(t, p, "ibv_open_device"), 13, "EACCES", "ibv_open_device: EACCES (permission denied)", "no permission to open /dev/infiniband/uverbs0")
				p.Steps = p.Steps[:1]
			},
			contains: []string{"/dev/infiniband/uverbs0"}},
		{name: "caps beyond limits", findings: vr("create-qp-refused"), status: report.Fail, remedy: "match the kernel driver",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.Resources.Probe, "ibv_create_qp RC"), 22, "EINVAL", "ibv_create_qp: EINVAL (invalid argument)",
					"the QP's caps against the device limits: asked max_send_wr 16")
			},
			contains: []string{"asked max_send_wr 16"}},
		{name: "CQ memory", findings: vr("queue-memlock"), status: report.Fail, remedy: "pins the queues' memory",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.Resources.Probe, "ibv_create_cq"), 12, "ENOMEM", "ibv_create_cq: ENOMEM (cannot allocate memory)", "")
			}},
		{name: "a destroy fails", findings: vr("step-failed"), status: report.Fail, remedy: "`ibv_rc_pingpong -d rxe0 -i 1 -g <gid index>` and, in a second shell, `ibv_rc_pingpong -d rxe0 -i 1 -g <gid index> localhost`",
			edit: func(pr *probe.PortResult) {
				failStep(step(t, &pr.Resources.Probe, "ibv_destroy_qp RC"), 16, "EBUSY", "ibv_destroy_qp: EBUSY (device or resource busy)", "")
			},
			contains: []string{"ibv_destroy_qp RC: EBUSY"}},
		{name: "blocked", findings: vr("skipped"), status: report.Skip,
			edit: func(pr *probe.PortResult) { pr.Resources.Skipped = "blocked by something" }},
	})
	if _, ok := judgeResources("x", false, &probe.PortResult{}); ok {
		t.Fatal("a verdict without a result")
	}
}

func TestVerbsRemediesSayWhoSetTheMode(t *testing.T) {
	if strings.Contains(uverbsPermFix, "rdma-core's default") || !strings.Contains(uverbsPermFix, "The kernel creates /dev/infiniband/uverbsN with mode 0666") ||
		!strings.Contains(uverbsPermFix, `SUBSYSTEM=="infiniband_verbs", KERNEL=="uverbs*", MODE="0666"`) {
		t.Errorf("permission remedy: %s", uverbsPermFix)
	}
	ib := pingpongCmd("mlx5_0 port 1", &probe.Addressing{LinkLayer: "InfiniBand", DLID: 3})
	if ib != "ibv_rc_pingpong -d mlx5_0 -i 1" {
		t.Errorf("InfiniBand pingpong: %s", ib)
	}
	if d, p := labelParts("odd"); d != "<device>" || p != "<port>" {
		t.Errorf("labelParts(odd) = %s %s", d, p)
	}
}

func TestStepText(t *testing.T) {
	st := &probe.Step{Name: "ibv_reg_mr", Error: "ibv_reg_mr: ENOMEM (cannot allocate memory)", Cause: "memlock"}
	if s := stepText(st); s != "ibv_reg_mr: ENOMEM (cannot allocate memory) — memlock" {
		t.Fatal(s)
	}
	st = &probe.Step{Name: "resolve loopback address", Error: "port 1 has LID 0"}
	if s := stepText(st); s != "resolve loopback address: port 1 has LID 0" {
		t.Fatal(s)
	}
	if s := stepText(&probe.Step{Name: "x"}); s != "x failed" {
		t.Fatal(s)
	}
}
