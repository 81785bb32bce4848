package fleettest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// One real node-problem-detector runs the shipped monitor config (its
// interval 1s) and the real rdmadoctor plugin while the test changes the
// state file under it: what NPD PATCHes onto the node is asserted for
// each kind of state, in an order that makes every step a transition.
// Both conditions are watched: RDMAProblem (False, True, Unknown) and
// RDMAFault, the --problem-only rule the continuous taint reads, which is
// True in the problem steps and False in every other, unknown included.
func TestNPDPublishesRDMAProblem(t *testing.T) {
	m := readMonitor(t)
	bin := rdmadoctorBinary(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")

	shippedArgs := m.Rules[0].Args
	args := slices.Clone(shippedArgs)
	i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--state=") })
	if i < 0 {
		t.Fatalf("the shipped rule's args %v name no --state=", shippedArgs)
	}
	args[i] = "--state=" + state
	config := m.adapt(t, dir, bin, args, nil)

	healthy := keptReport(t, bin, "cx5-roce-healthy", 0)
	portDown := keptReport(t, bin, "port-down", 19)
	otherDown := keptReport(t, bin, "multiport-one-down", 19)
	// The same host (cx5-node01) after its port came back: a run that
	// checked only kernel.version proves nothing about the port, so the
	// kept state still says port.state; a full run then clears it.
	fixed := filepath.Join(repoRoot, "testdata", "hosts", "cx5-roce-healthy")
	chained := filepath.Join(t.TempDir(), "state.json")
	runKept(t, bin, filepath.Join(repoRoot, "testdata", "hosts", "port-down"), chained, 19)
	partial := runKept(t, bin, fixed, chained, 0, "--check", "kernel.version")
	assertPartial(t, partial, "kernel.version", "port.state")
	fullAfter := runKept(t, bin, fixed, chained, 0)
	// Only errors: a check that could not look (gpu.acs reading 64 bytes of
	// config space) is unknown, never a problem.
	onlyErrors := keptReport(t, bin, errorFixture(t), 4) // exit 4: unknown
	// Partial runs refresh their own check only: the others' records,
	// judged an hour ago, are past --max-age (15m as shipped).
	aged := filepath.Join(t.TempDir(), "state.json")
	replaceFile(t, aged, withRan(t, healthy, time.Now().Add(-time.Hour)))
	agedPartial := runKept(t, bin, fixed, aged, 0, "--check", "kernel.version")
	assertPartial(t, agedPartial, "kernel.version", "pci.device")
	defaultReason, defaultMsg, problemReason := m.Conds[0].Reason, m.Conds[0].Message, m.Rules[0].Reason
	fault := faultWatch{args: m.ruleArgs(1, args), reason: m.Conds[1].Reason, msg: m.Conds[1].Message, problemReason: m.Rules[1].Reason}

	api := newFakeAPIServer(t, nodeName)
	// A monitor the DaemonSet already has, given first: the patch appends
	// rdmadoctor's with a second --config.custom-plugin-monitor.
	other := filepath.Join(dir, "other-monitor.json")
	if err := os.WriteFile(other, []byte(otherMonitor), 0o644); err != nil {
		t.Fatal(err)
	}
	npd := startNPD(t, api, dir, other, config) // the state is missing: no run has kept one yet

	// Each step is a transition NPD must publish: an Unknown always
	// follows a False or a True (NPD keeps an Unknown's first message).
	steps := []stateStep{
		{"missing", nil, corev1.ConditionUnknown, defaultReason, "unknown: no state file (no run has kept one):"},
		{"healthy", healthy, corev1.ConditionFalse, defaultReason, ""},
		{"port down", portDown, corev1.ConditionTrue, problemReason, "port.state/admin-down(19) mlx5_1/1 DOWN"},
		// Message-change updates are on: a new problem replaces the message.
		{"another port down", otherDown, corev1.ConditionTrue, problemReason, "port.state/no-link(19) mlx4_0/2 DOWN"},
		{"port fixed, only kernel.version run since", partial, corev1.ConditionTrue, problemReason, "port.state/admin-down(19) mlx5_1/1 DOWN"},
		{"port fixed, full run since", fullAfter, corev1.ConditionFalse, defaultReason, ""},
		{"only errors", onlyErrors, corev1.ConditionUnknown, defaultReason, "unknown: gpu.acs/config-unreadable(25) all 8 pairs: "},
		{"healthy after errors", healthy, corev1.ConditionFalse, defaultReason, ""},
		{"older than --max-age", agedPartial, corev1.ConditionUnknown, defaultReason, "unknown: rdmadoctor.state/stale(10) older than the max age 15m0s"},
		{"healthy after aging", healthy, corev1.ConditionFalse, defaultReason, ""},
		{"from the future", withRan(t, healthy, time.Now().Add(time.Hour)), corev1.ConditionUnknown, defaultReason, "unknown: rdmadoctor.state/clock-back(10) judged at "},
		{"healthy again", healthy, corev1.ConditionFalse, defaultReason, ""},
		// What earlier versions kept: the last run's report, migrated.
		{"report/v1 state", runReport(t, bin, "port-down", 19), corev1.ConditionTrue, problemReason, "port.state/admin-down(19) mlx5_1/1 DOWN"},
		{"corrupt", healthy[:len(healthy)/2], corev1.ConditionUnknown, defaultReason, "unknown: state is not JSON (truncated):"},
	}
	for n, st := range steps {
		st.publish(t, api, bin, args, state, defaultMsg, fault)
		if n == 0 {
			assertNothingBefore(t, api, corev1.ConditionUnknown)
		}
	}

	// NPD changes an Unknown condition's message only when its status
	// changes: a second unknown cause keeps the first one's message.
	replaceFile(t, state, agedPartial)
	time.Sleep(3 * time.Second) // three plugin runs
	if c, _ := api.condition(rdmaProblem); !strings.HasPrefix(c.Message, "unknown: state is not JSON") {
		t.Errorf("Unknown → Unknown: NPD now publishes the new message %q; docs/kubernetes.md says it keeps the first", c.Message)
	}

	// Neither an error nor an aged or future record ever made the node
	// True: only the port faults did. RDMAFault was never Unknown either:
	// the continuous taint never saw a blind spot.
	_, patches, _, _ := api.snapshot()
	var faultTrue bool
	for i, p := range patches {
		for _, c := range p.Status.Conditions {
			if (c.Type == rdmaProblem || c.Type == rdmaFault) && c.Status == corev1.ConditionTrue && !strings.HasPrefix(c.Message, "port.state/") {
				t.Errorf("patch %d published %s True for %q: only a port fault is a problem here", i, c.Type, c.Message)
			}
			if c.Type == rdmaFault && c.Status == corev1.ConditionUnknown {
				t.Errorf("patch %d published RDMAFault Unknown (%q): the rdma-fault rule would taint the node for it", i, c.Message)
			}
			faultTrue = faultTrue || (c.Type == rdmaFault && c.Status == corev1.ConditionTrue)
		}
	}
	if !faultTrue {
		t.Error("no patch published RDMAFault True: the port-down steps never reached the continuous taint")
	}

	npd.stop(t)
	assertTraffic(t, api, m.Source, problemReason)
}

// stateStep is one state put under the plugin and the condition NPD must
// publish for it.
type stateStep struct {
	name   string
	state  []byte // nil: no state file
	want   corev1.ConditionStatus
	reason string
	prefix string // of the plugin's line; unused for False
}

// faultWatch is what the RDMAFault rule is expected to publish: its args
// (the test's, with --problem-only), default reason and message, and its
// problem reason.
type faultWatch struct {
	args                       []string
	reason, msg, problemReason string
}

// publish puts the step's state in place and waits for NPD to publish it:
// the message is the plugin's own line for that state, as NPD runs it, or
// for False the config's default message. RDMAFault must then be True for
// a True step, with the same line, and False for the others: healthy, and
// unknown too.
func (st stateStep) publish(t *testing.T, api *fakeAPIServer, bin string, args []string, state, defaultMsg string, fault faultWatch) {
	t.Helper()
	if st.state == nil {
		os.Remove(state)
	} else {
		replaceFile(t, state, st.state)
	}
	wantMsg := defaultMsg
	if st.want != corev1.ConditionFalse {
		line, code := pluginLine(t, bin, args)
		if !strings.HasPrefix(line, st.prefix) {
			t.Fatalf("%s: the plugin prints %q (exit %d), want a line starting %q", st.name, line, code, st.prefix)
		}
		wantMsg = line
	}
	c := waitCondition(t, api, 15*time.Second, st.name, func(c corev1.NodeCondition) bool {
		return c.Status == st.want && c.Message == wantMsg
	})
	if c.Reason != st.reason {
		t.Errorf("%s: reason %q, want %q", st.name, c.Reason, st.reason)
	}
	checkMessage(t, c.Message)
	t.Logf("%s: RDMAProblem %s, reason %s, message %q", st.name, c.Status, c.Reason, c.Message)

	faultWant, faultReason, faultMsg := corev1.ConditionFalse, fault.reason, fault.msg
	line, code := pluginLine(t, bin, fault.args)
	switch {
	case st.want == corev1.ConditionTrue:
		faultWant, faultReason, faultMsg = corev1.ConditionTrue, fault.problemReason, line
		if code != 1 || line != c.Message {
			t.Errorf("%s: the RDMAFault rule's plugin prints %q (exit %d), want exit 1 and RDMAProblem's %q", st.name, line, code, c.Message)
		}
	case code != 0:
		t.Errorf("%s: the RDMAFault rule's plugin exits %d (%q), want 0: RDMAProblem is %s", st.name, code, line, st.want)
	}
	f := waitConditionOf(t, api, rdmaFault, 15*time.Second, st.name+" (RDMAFault)", func(c corev1.NodeCondition) bool {
		return c.Status == faultWant && c.Message == faultMsg
	})
	if f.Reason != faultReason {
		t.Errorf("%s: RDMAFault reason %q, want %q", st.name, f.Reason, faultReason)
	}
	t.Logf("%s: RDMAFault %s, reason %s, message %q", st.name, f.Status, f.Reason, f.Message)
}

// assertTraffic checks what NPD sent over the whole run: only requests the
// fake server knows, the other monitor's condition kept beside ours, the
// kubelet's condition untouched, and the events of the transitions.
func assertTraffic(t *testing.T, api *fakeAPIServer, source, problemReason string) {
	t.Helper()
	reqs, patches, events, unexpected := api.snapshot()
	t.Logf("node-problem-detector made %d requests: %s", len(reqs), summary(reqs))
	for _, u := range unexpected {
		t.Errorf("unexpected request: %s", u)
	}
	if c, ok := api.condition("OtherProblem"); !ok || c.Status != corev1.ConditionFalse {
		t.Errorf("the monitor given first was dropped by the second --config.custom-plugin-monitor: %+v", c)
	}
	if ready, ok := api.condition(corev1.NodeReady); !ok || ready.Status != corev1.ConditionTrue {
		t.Errorf("the kubelet's Ready condition was changed: %+v", ready)
	}
	assertPatchesOnlyTheMonitors(t, patches)
	assertEvents(t, events, source, problemReason)
}

// assertNothingBefore checks that no patch published RDMAProblem with a
// status other than first before the first plugin result
// (skip_initial_status: NPD's in-memory default is False, "healthy").
func assertNothingBefore(t *testing.T, api *fakeAPIServer, first corev1.ConditionStatus) {
	t.Helper()
	_, patches, _, _ := api.snapshot()
	for i, p := range patches {
		for _, c := range p.Status.Conditions {
			if c.Type != rdmaProblem {
				continue
			}
			if c.Status != first {
				t.Errorf("patch %d published RDMAProblem %s before the first plugin result (%s)", i, c.Status, first)
			}
			return
		}
	}
}

// otherMonitor stands for a monitor an NPD DaemonSet already runs.
const otherMonitor = `{
  "plugin": "custom",
  "pluginConfig": {"invoke_interval": "10s", "timeout": "5s"},
  "source": "other-plugin",
  "conditions": [{"type": "OtherProblem", "reason": "OtherIsFine", "message": "other is fine"}],
  "rules": [{"type": "permanent", "condition": "OtherProblem", "reason": "OtherIsBroken", "path": "/bin/true"}]
}`

// assertPatchesOnlyTheMonitors checks that NPD writes only the
// conditions its monitors own, with their times.
func assertPatchesOnlyTheMonitors(t *testing.T, patches []statusPatch) {
	t.Helper()
	if len(patches) == 0 {
		t.Fatal("no status PATCH was received")
	}
	for i, p := range patches {
		for _, c := range p.Status.Conditions {
			if c.Type != rdmaProblem && c.Type != rdmaFault && c.Type != "OtherProblem" {
				t.Errorf("patch %d carries condition %s", i, c.Type)
			}
			if c.LastHeartbeatTime.IsZero() || c.LastTransitionTime.IsZero() {
				t.Errorf("patch %d: condition without heartbeat or transition time: %+v", i, c)
			}
		}
	}
}

// assertEvents checks the events NPD posted for the transitions: from the
// monitor's source, about this node, and one for the port-down problem
// ("Node condition RDMAProblem is now: True, reason: …, message: "…"").
func assertEvents(t *testing.T, events []corev1.Event, source, problemReason string) {
	t.Helper()
	var problem, fault bool
	for _, e := range events {
		if e.Source.Component != source || e.InvolvedObject.Kind != "Node" || e.InvolvedObject.Name != nodeName {
			t.Errorf("event from %q about %s %s, want from %q about Node %s", e.Source.Component,
				e.InvolvedObject.Kind, e.InvolvedObject.Name, source, nodeName)
		}
		problem = problem || (e.Reason == problemReason && strings.Contains(e.Message, `message: "port.state/admin-down(19) mlx5_1/1 DOWN`))
		fault = fault || (e.Reason == problemReason && strings.Contains(e.Message, "Node condition RDMAFault is now: True"))
	}
	if !problem {
		t.Errorf("no %s event for the port-down state among %d events", problemReason, len(events))
	}
	if !fault {
		t.Errorf("no %s event for RDMAFault True among %d events", problemReason, len(events))
	}
}
