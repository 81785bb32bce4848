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
		ID: "verbs.resources", Code: 30, Level: 2,
		Title:      "the verbs objects an application builds can be created on every ACTIVE port: PD, MR, CQ, RC QP",
		Needs:      []string{"libibverbs.devices"},
		Privileges: level2Needs,
		Explain: Explanation{
			Judges: "In a child process, through the real libibverbs, on every ACTIVE port: ibv_open_device, ibv_query_device, ibv_query_port, " +
				"ibv_alloc_pd, ibv_reg_mr on a page-aligned buffer (--probe-size, at least one page), ibv_create_cq (16 entries, within max_cqe) and " +
				"ibv_create_qp (RC, 16 work requests and 1 SGE each way, within max_qp_wr and max_sge; UD on a device without RC QPs, " +
				"EFA, which accepts UD and SRD only), then destroys them in order. " +
				"Each step is reported with its errno and what that errno means at that step.",
			Why: "This is the sequence every RDMA application runs first. When it breaks, the layer that breaks says why: " +
				"EACCES at open is the device node's permissions, ENOMEM at reg_mr is the locked-memory limit, EINVAL at create_qp is " +
				"caps beyond the device's limits or a library that does not match the kernel.",
		},
		Run: func(ctx context.Context, env *Env) Result {
			return runLevel2(ctx, env, probe.Resources, resourcesFrame, judgeResources)
		},
	})
}

const (
	uverbsPermFix = "Let the user open /dev/infiniband/uverbsN. " + uverbsModeFix +
		" In a container pass the node in (`--device=/dev/infiniband/uverbsN`)."
	uverbsMissingFix = "`modprobe ib_uverbs` on the host; in a container pass the node in (`--device=/dev/infiniband/uverbsN`)."
	createQPFix      = "The probe asked for caps within the device's limits, so the refusal is the library's or the kernel's: make rdma-core (or MLNX_OFED/DOCA-OFED) " +
		"match the kernel driver, and compare with `ibv_devinfo -v -d <device>` and " + pingpongGeneric + "."
	genericVerbsFix = "Read `dmesg` for the driver's message at the time of the failure and compare with `ibv_devinfo -v -d <device>`; " +
		"the same calls from " + pingpongGeneric + " fail the same way if the stack is broken."
	// pingpongGeneric is rdma-core's loopback test on one port: a server and,
	// in a second shell, a client that connects to it.
	pingpongGeneric = "`ibv_rc_pingpong -d <device> -i <port> -g <gid index>` and, in a second shell, `ibv_rc_pingpong -d <device> -i <port> -g <gid index> localhost`"
)

// labelParts splits a port label "<device> port <n>" into its device and
// port; placeholders when the label has another form.
func labelParts(label string) (dev, port string) {
	if i := strings.LastIndex(label, " port "); i > 0 {
		return label[:i], label[i+len(" port "):]
	}
	return "<device>", "<port>"
}

// pingpongCmd is rdma-core's ibv_rc_pingpong for the port of label, with the
// GID index the probe used; InfiniBand needs none (the LID addresses the
// port).
func pingpongCmd(label string, a *probe.Addressing) string {
	dev, port := labelParts(label)
	g := " -g <gid index>"
	switch {
	case a != nil && a.LinkLayer == "InfiniBand":
		g = ""
	case a != nil && a.GID != "":
		g = fmt.Sprintf(" -g %d", a.GIDIndex)
	}
	return fmt.Sprintf("ibv_rc_pingpong -d %s -i %s%s", dev, port, g)
}

// pingpong is pingpongGeneric for one port: the server and the client.
func pingpong(label string, a *probe.Addressing) string {
	cmd := pingpongCmd(label, a)
	return fmt.Sprintf("`%s` and, in a second shell, `%s localhost`", cmd, cmd)
}

// createQPFixFor and genericVerbsFixFor are createQPFix and genericVerbsFix
// with the port's own commands.
func createQPFixFor(label string, a *probe.Addressing) string { return forPort(createQPFix, label, a) }

func genericVerbsFixFor(label string, a *probe.Addressing) string {
	return forPort(genericVerbsFix, label, a)
}

// forPort fills a remedy's ibv_rc_pingpong and ibv_devinfo in for one port.
func forPort(fix, label string, a *probe.Addressing) string {
	dev, _ := labelParts(label)
	fix = strings.ReplaceAll(fix, pingpongGeneric, pingpong(label, a))
	return strings.ReplaceAll(fix, "ibv_devinfo -v -d <device>", "ibv_devinfo -v -d "+dev)
}

// verbs.resources's findings: the objects were created, or the first step
// that failed, by what its verb and errno say of the cause.
var (
	resourcesFrame   = declareLevel2Frame("verbs.resources")
	resourcesCreated = declare(Finding{ID: "verbs.resources/created", Status: report.Pass,
		When: "PD, MR, CQ and QP were created on the port and destroyed in order",
		Message: "{label}: PD, MR ({mr}, page aligned), CQ ({cqe_asked} asked, {cqe_granted} granted), {qp_type} QP " +
			"(send/recv {send_wr}/{recv_wr} work requests granted) created and destroyed"})
	resourcesOpenDenied = declare(Finding{ID: "verbs.resources/open-denied", Status: report.Fail,
		When:    "ibv_open_device fails with EACCES/EPERM: the device node's permissions",
		Message: "{label}: {step}", Fix: uverbsPermFix})
	resourcesNoNode = declare(Finding{ID: "verbs.resources/no-device-node", Status: report.Fail,
		When:    "ibv_open_device fails with ENOENT/ENODEV/ENXIO: no uverbs device node",
		Message: "{label}: {step}", Fix: uverbsMissingFix})
	resourcesMemlock = declare(Finding{ID: "verbs.resources/memlock", Status: report.Fail,
		When:    "ibv_reg_mr fails with ENOMEM: the locked-memory limit",
		Message: "{label}: {step}", Fix: memlockFix})
	resourcesQueueMemlock = declare(Finding{ID: "verbs.resources/queue-memlock", Status: report.Fail,
		When:    "ibv_create_cq or ibv_create_qp fails with ENOMEM",
		Message: "{label}: {step}", Fix: queueMemlockFix})
	resourcesCreateQPRefused = declare(Finding{ID: "verbs.resources/create-qp-refused", Status: report.Fail,
		When:    "ibv_create_qp fails with EINVAL although the caps are within ibv_query_device's limits",
		Message: "{label}: {step}", Fix: portTemplate(createQPFix)})
	resourcesStepFailed = declare(Finding{ID: "verbs.resources/step-failed", Status: report.Fail,
		When:    "another step fails",
		Message: "{label}: {step}", Fix: portTemplate(genericVerbsFix)})
)

// queueMemlockFix is for a CQ or QP the provider could not pin.
const queueMemlockFix = "The provider pins the queues' memory: the same locked-memory fix as for ibv_reg_mr. " + memlockFix

// portTemplate turns a fix written for any port (forPort fills it in) into
// a template: {device} and {pingpong_cmd} are slots (portFixSlots).
func portTemplate(fix string) string {
	return strings.NewReplacer(pingpongGeneric, "`{pingpong_cmd}` and, in a second shell, `{pingpong_cmd} localhost`",
		"ibv_devinfo -v -d <device>", "ibv_devinfo -v -d {device}").Replace(fix)
}

// portFixSlots are the slots portTemplate's fixes take for the port of label.
func portFixSlots(label string, a *probe.Addressing) Slots {
	dev, _ := labelParts(label)
	return Slots{"device": dev, "pingpong_cmd": pingpongCmd(label, a)}
}

// judgeResources judges verbs.resources on one port.
func judgeResources(label string, software bool, pr *probe.PortResult) (verdict, bool) {
	r := pr.Resources
	if r == nil {
		return verdict{}, false
	}
	if r.Skipped != "" {
		return resourcesFrame.skippedVerdict(label, &r.Probe), true
	}
	ev := resourcesEvidence(r, software)
	st := r.Failed()
	if st == nil {
		return resourcesPass(label, software, r, ev), true
	}
	ev["failed_step"] = st
	v := resourcesFailure(st).unit(portUnitOf(label), portFixSlots(label, nil).with("label", label, "step", stepText(st)))
	v.evidence = ev
	v.details = append(v.details, stepsDone(&r.Probe))
	return v, true
}

func resourcesEvidence(r *probe.ResourcesResult, software bool) map[string]any {
	ev := map[string]any{
		"mr_bytes": r.MRBytes, "cqe_asked": r.CQEAsked, "cqe_granted": r.CQEGranted,
		"qp_caps_asked": r.QPAsked, "qp_caps_granted": r.QPGranted, "qp_type": r.QPType, "memlock_bytes": r.MemlockBytes,
		"software_device": software, "duration_ms": r.Millis,
	}
	if r.Device != nil {
		ev["device"] = r.Device
	}
	if r.Port != nil {
		ev["port"] = r.Port
	}
	if r.NoRC != "" {
		ev["no_rc"] = r.NoRC
	}
	return ev
}

// resourcesPass is the verdict of a port where every object was created.
func resourcesPass(label string, software bool, r *probe.ResourcesResult, ev map[string]any) verdict {
	qpType := r.QPType
	if qpType == "" {
		qpType = "RC"
	}
	v := resourcesCreated.unit(portUnitOf(label), Slots{"label": label, "mr": fmtBytes(r.MRBytes),
		"cqe_asked": fmt.Sprint(r.CQEAsked), "cqe_granted": fmt.Sprint(r.CQEGranted), "qp_type": qpType,
		"send_wr": fmt.Sprint(r.QPGranted.MaxSendWR), "recv_wr": fmt.Sprint(r.QPGranted.MaxRecvWR)})
	v.evidence = ev
	if r.NoRC != "" {
		v.details = append(v.details, "a UD QP, not RC: "+r.NoRC)
	}
	if r.Port != nil {
		v.details = append(v.details, fmt.Sprintf("port %s, %s, active MTU %d", r.Port.State, r.Port.LinkLayer, r.Port.ActiveMTU))
	}
	if software {
		v.details = append(v.details, "software device"+softwareNote(true))
	}
	return v
}

// resourcesFailure picks verbs.resources's finding for a failed step by
// the verb and errno, as resourcesRemedy picks the fix.
func resourcesFailure(st *probe.Step) *Finding {
	switch resourcesCause(st) {
	case causeOpenDenied:
		return resourcesOpenDenied
	case causeNoNode:
		return resourcesNoNode
	case causeMemlock:
		return resourcesMemlock
	case causeQueueMemlock:
		return resourcesQueueMemlock
	case causeCreateQP:
		return resourcesCreateQPRefused
	}
	return resourcesStepFailed
}

// What a failed verbs step says of its cause, by its verb and errno.
const (
	causeOther = iota
	causeOpenDenied
	causeNoNode
	causeMemlock
	causeQueueMemlock
	causeCreateQP
)

func resourcesCause(st *probe.Step) int {
	verb := strings.Fields(st.Name)[0]
	switch {
	case verb == "ibv_open_device" && (st.ErrnoName == "EACCES" || st.ErrnoName == "EPERM"):
		return causeOpenDenied
	case verb == "ibv_open_device" && (st.ErrnoName == "ENOENT" || st.ErrnoName == "ENODEV" || st.ErrnoName == "ENXIO"):
		return causeNoNode
	case verb == "ibv_reg_mr" && st.ErrnoName == "ENOMEM":
		return causeMemlock
	case (verb == "ibv_create_cq" || verb == "ibv_create_qp") && st.ErrnoName == "ENOMEM":
		return causeQueueMemlock
	case verb == "ibv_create_qp" && st.ErrnoName == "EINVAL":
		return causeCreateQP
	}
	return causeOther
}

// resourcesRemedy picks the fix for a failed step by the verb and errno;
// label and a (may be nil) fill in the port's commands.
func resourcesRemedy(st *probe.Step, label string, a *probe.Addressing) string {
	switch resourcesCause(st) {
	case causeOpenDenied:
		return uverbsPermFix
	case causeNoNode:
		return uverbsMissingFix
	case causeMemlock:
		return memlockFix
	case causeQueueMemlock:
		return queueMemlockFix
	case causeCreateQP:
		return createQPFixFor(label, a)
	}
	return genericVerbsFixFor(label, a)
}

// stepsDone lists the steps that worked before the failure.
func stepsDone(p *probe.Probe) string {
	var ok []string
	for _, s := range p.Steps {
		if !s.OK {
			break
		}
		ok = append(ok, s.Name)
	}
	if len(ok) == 0 {
		return "no step succeeded before it"
	}
	return "succeeded before it: " + strings.Join(ok, ", ")
}

func fmtBytes(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
