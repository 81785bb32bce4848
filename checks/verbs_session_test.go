package checks

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// recordedPort loads a port result recorded from a real run on rxe0
// (SoftRoCE in the test VM); each test mutates its own copy.
func recordedPort(t *testing.T, file string) *probe.PortResult {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "verbs", "probe", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var res probe.Results
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	d := res.Devices["rxe0"]
	if d == nil || d.Port(1) == nil {
		t.Fatalf("%s has no rxe0 port 1", file)
	}
	return d.Port(1)
}

func healthyPort(t *testing.T) *probe.PortResult { return recordedPort(t, "rxe0-level2.json") }

// verdictCase is one judgement expectation.
type verdictCase struct {
	name     string
	software bool
	edit     func(pr *probe.PortResult)
	status   report.Status
	findings []unitFinding // every finding of the verdict; nil = not compared
	contains []string      // words that are the point: a count, an errno, a step the probe names
	remedy   string
}

func runVerdictCases(t *testing.T, judge probeJudge, cases []verdictCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pr := healthyPort(t)
			if c.edit != nil {
				c.edit(pr)
			}
			v, ok := judge("rxe0 port 1", c.software, pr)
			if !ok {
				t.Fatal("no verdict")
			}
			if v.status != c.status {
				t.Fatalf("status %s, want %s: %s", v.status, c.status, v.line)
			}
			if c.findings != nil {
				if diff := cmp.Diff(c.findings, unitFindings(v.findings)); diff != "" {
					t.Errorf("findings (-want +got):\n%s", diff)
				}
			}
			text := v.line + "\n" + strings.Join(v.details, "\n")
			for _, w := range c.contains {
				if !strings.Contains(text, w) {
					t.Errorf("verdict does not say %q:\n%s", w, text)
				}
			}
			if c.remedy != "" && !strings.Contains(v.remedy, c.remedy) {
				t.Errorf("remedy %q does not say %q", v.remedy, c.remedy)
			}
			if (v.status == report.Fail || v.status == report.Warn) && v.remedy == "" {
				t.Errorf("a %s without a remedy", v.status)
			}
			if _, err := json.Marshal(v.evidence); err != nil {
				t.Errorf("evidence does not marshal: %v", err)
			}
		})
	}
}

// step returns the named step of p for editing.
func step(t *testing.T, p *probe.Probe, name string) *probe.Step {
	t.Helper()
	for i := range p.Steps {
		if p.Steps[i].Name == name {
			return &p.Steps[i]
		}
	}
	t.Fatalf("no step %q in %s", name, p.Name)
	return nil
}

func failStep(st *probe.Step, errno int, name, msg, cause string) {
	st.OK, st.Errno, st.ErrnoName, st.Error, st.Cause = false, errno, name, msg, cause
}

func TestCombine(t *testing.T) {
	r := combine([]verdict{
		{status: report.Pass, line: "a port 1: fine"},
		{status: report.Fail, line: "a port 2: broken", remedy: "fix it"},
		{status: report.Error, line: "b port 1: child died", remedy: "look"},
		{status: report.Fail, line: "b port 2: broken too", remedy: "fix it"},
	})
	if r.Status != report.Fail || r.Summary != "a port 2: broken — 4 ports: 2 fail, 1 error, 1 pass" || r.Remedy != "fix it\nlook" || len(r.Details) != 4 ||
		r.Observed != "4 ports: 2 fail, 1 error, 1 pass" {
		t.Fatalf("%+v", r)
	}
	r = combine([]verdict{{status: report.Pass, line: "x"}, {status: report.Pass, line: "y"}})
	if r.Status != report.Pass || r.Summary != "all 2 ports: x" || r.Remedy != "" {
		t.Fatalf("%+v", r)
	}
	r = combine([]verdict{{status: report.Skip, line: "s"}, {status: report.Pass, line: "p"}})
	if r.Status != report.Pass {
		t.Fatalf("a skipped port outranks a passed one: %+v", r)
	}
	r = combine([]verdict{{status: report.Skip, line: "rxe0 port 1: blocked"}})
	if r.Status != report.Skip || r.Summary != "rxe0 port 1: blocked" {
		t.Fatalf("%+v", r)
	}
	r = combine([]verdict{{status: report.Fail, line: "rxe0 port 1: broken", details: []string{"why"}, remedy: "fix"}})
	if r.Summary != "rxe0 port 1: broken" || len(r.Details) != 1 || r.Details[0] != "why" {
		t.Fatalf("one port repeats its line in the details: %+v", r)
	}
}

func TestChildFailureVerdict(t *testing.T) {
	dr := &probe.DeviceResult{Device: "mlx5_0", Stderr: "a\nb\nSIGSEGV: segmentation violation",
		Failure: &probe.ChildFailure{Error: "the verbs child crashed with SIGSEGV in port 1 verbs.qp_state: ibv_modify_qp A INIT→RTR",
			Signal: "SIGSEGV", InProgress: "port 1 verbs.qp_state: ibv_modify_qp A INIT→RTR"}}
	v := childFailureVerdict("mlx5_0 port 1", probe.QPState, dr)
	// The child's stderr is shown: its last lines say where it died.
	if v.status != report.Error || !cmp.Equal(onlyFinding("verbs.qp_state/child-crash", "mlx5_0/1"), unitFindings(v.findings)) ||
		!strings.Contains(strings.Join(v.details, ""), "SIGSEGV: segmentation") {
		t.Fatalf("%+v", v)
	}
	// A later probe never ran: it says so.
	v = childFailureVerdict("mlx5_0 port 1", probe.SendPoll, dr)
	if !cmp.Equal(onlyFinding("probe.send_poll/not-run-crash", "mlx5_0/1"), unitFindings(v.findings)) {
		t.Fatalf("%+v", v)
	}
	dr.Failure = &probe.ChildFailure{Error: "did not finish within 8s", TimedOut: true, InProgress: "port 1 verbs.resources: ibv_open_device"}
	if v := childFailureVerdict("mlx5_0 port 1", probe.Resources, dr); !cmp.Equal(onlyFinding("verbs.resources/child-timeout", "mlx5_0/1"), unitFindings(v.findings)) {
		t.Fatalf("%+v", v)
	}
	if v := childFailureVerdict("x", probe.Resources, nil); v.status != report.Error {
		t.Fatalf("%+v", v)
	}
}

// Level-2 checks never run on a snapshot, and say why.
func TestLevel2SkipsOnSnapshot(t *testing.T) {
	h, err := sysfs.Open(filepath.Join("..", "testdata", "hosts", "rxe-softroce"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	env := NewEnv(h, Options{Level: 2})
	f := &fakeVerbs{}
	UseVerbs(env, f)
	for _, id := range []string{"verbs.resources", "verbs.qp_state", "probe.send_poll", "probe.cq_overflow", "probe.destroy_order"} {
		c, _ := Lookup(id)
		r := c.Run(context.Background(), env)
		if r.Status != report.Skip || !cmp.Equal(onlyFinding(id+"/snapshot", ""), unitFindings(r.Findings)) {
			t.Errorf("%s: %s %s %v", id, r.Status, r.Summary, unitFindings(r.Findings))
		}
	}
	if f.calls != 0 {
		t.Fatal("the probes ran on a snapshot")
	}
}

// TestOnlySelectedProbesRun: a probe no selected check judges is not run
// (--check, --periodic): the child is asked for exactly the selection.
func TestOnlySelectedProbesRun(t *testing.T) {
	for _, tc := range []struct {
		ids  []string
		want string
	}{
		{nil, strings.Join(probe.AllProbes, " ")},
		{[]string{"probe.send_poll"}, "verbs.resources verbs.qp_state probe.send_poll"},
		{[]string{"probe.destroy_order", "port.state"}, "verbs.resources verbs.qp_state probe.destroy_order"},
	} {
		h, err := sysfs.Open(filepath.Join("..", "testdata", "hosts", "rxe-softroce"))
		if err != nil {
			t.Fatal(err)
		}
		env := NewEnv(h, Options{Level: 2})
		f := &fakeVerbs{results: &probe.Results{}}
		UseVerbs(env, f)
		sel, err := Select(tc.ids)
		if err != nil {
			t.Fatal(err)
		}
		verbsOf(env).selectProbes(sel)
		if _, _, err := env.probeResults(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.Close()
		if got := strings.Join(f.probed, " "); got != tc.want {
			t.Errorf("--check %v: the child was asked for %q, want %q", tc.ids, got, tc.want)
		}
	}
}

func TestRecordedResultsDecode(t *testing.T) {
	pr := healthyPort(t)
	if pr.Resources == nil || pr.QPState == nil || pr.SendPoll == nil || pr.CQOverflow == nil || pr.DestroyOrder == nil || pr.UD == nil {
		t.Fatalf("recorded run lacks a probe: %+v", pr)
	}
	for _, p := range []*probe.Probe{&pr.Resources.Probe, &pr.QPState.Probe, &pr.SendPoll.Probe, &pr.CQOverflow.Probe, &pr.DestroyOrder.Probe, &pr.UD.Probe} {
		if p.Skipped != "" || len(p.Steps) == 0 {
			t.Errorf("%s: skipped %q, %d steps", p.Name, p.Skipped, len(p.Steps))
		}
	}
}
