package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeScontrol is a scontrol stand-in written by the test: it records each
// call's argv (NUL-separated, one record per call) and answers "show node"
// with a canned `scontrol show node` output built from a state and a reason.
type fakeScontrol struct {
	dir  string
	path string
}

const fakeScript = `#!/bin/sh
# Builtins only but for sleep: slurmd gives its programs no PATH.
d=${0%/*}
printf '%s\0' "$@" >>"$d/calls"
printf '\036' >>"$d/calls"
[ -f "$d/hang-$1" ] && { sleep 30; exit 0; }
case "$1" in
show) if [ -f "$d/show.err" ]; then
        while IFS= read -r l || [ -n "$l" ]; do printf '%s\n' "$l" >&2; done <"$d/show.err"; exit 1
      fi
      while IFS= read -r l || [ -n "$l" ]; do printf '%s\n' "$l"; done <"$d/show.out" ;;
update) if [ -f "$d/update.err" ]; then
        while IFS= read -r l || [ -n "$l" ]; do printf '%s\n' "$l" >&2; done <"$d/update.err"; exit 1
      fi ;;
esac
exit 0
`

func newFakeScontrol(t *testing.T, node, state, reason string) *fakeScontrol {
	t.Helper()
	dir := t.TempDir()
	f := &fakeScontrol{dir: dir, path: filepath.Join(dir, "scontrol")}
	if err := os.WriteFile(f.path, []byte(fakeScript), 0o755); err != nil {
		t.Fatal(err)
	}
	f.setNode(t, node, state, reason)
	return f
}

// showNodeOutput is `scontrol show node NAME` as Slurm prints it
// (slurm_sprint_node_table, multi-line form).
func showNodeOutput(node, state, reason string) string {
	s := fmt.Sprintf(`NodeName=%[1]s Arch=x86_64 CoresPerSocket=16 
   CPUAlloc=0 CPUEfctv=32 CPUTot=32 CPULoad=0.02
   AvailableFeatures=ib,hdr
   ActiveFeatures=ib,hdr
   Gres=(null)
   NodeAddr=%[1]s NodeHostName=%[1]s Version=24.11.1
   OS=Linux 6.1.0-28-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22) 
   RealMemory=257000 AllocMem=0 FreeMem=251000 Sockets=2 Boards=1
   State=%[2]s ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=batch 
   BootTime=2026-11-30T08:00:00 SlurmdStartTime=2026-11-30T08:01:10
   LastBusyTime=2026-12-01T13:00:00 ResumeAfterTime=None
   CfgTRES=cpu=32,mem=257000M,billing=32
   AllocTRES=
   CurrentWatts=0 AveWatts=0
`, node, state)
	if reason != "" {
		s += "   Reason=" + reason + " [root@2026-12-01T13:30:00]\n"
	}
	return s + "\n"
}

func (f *fakeScontrol) setNode(t *testing.T, node, state, reason string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, "show.out"), []byte(showNodeOutput(node, state, reason)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// touch creates a marker file that changes the fake's behaviour: "hang-show",
// "hang-update", "show.err", "update.err".
func (f *fakeScontrol) touch(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// calls returns the argv of every call made, in order.
func (f *fakeScontrol) calls(t *testing.T) [][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.dir, "calls"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, rec := range strings.Split(strings.TrimSuffix(string(data), "\036"), "\036") {
		out = append(out, strings.Split(strings.TrimSuffix(rec, "\x00"), "\x00"))
	}
	return out
}

// updates returns the argv of the update calls only.
func (f *fakeScontrol) updates(t *testing.T) [][]string {
	var u [][]string
	for _, c := range f.calls(t) {
		if len(c) > 0 && c[0] == "update" {
			u = append(u, c)
		}
	}
	return u
}

type slurmRun struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

// runSlurmCmd runs `rdmadoctor slurm ARGS` as cmdSlurm does, with env as the
// whole environment it reads (slurmd sets almost nothing).
func runSlurmCmd(t *testing.T, env map[string]string, args ...string) slurmRun {
	t.Helper()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	if !strings.Contains(strings.Join(args, " "), "--lock-file") {
		args = append(args, "--lock-file="+filepath.Join(t.TempDir(), "slurm.lock"))
	}
	o, err := parseSlurmArgs(args, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(o.budget))
	defer cancel()
	code := runSlurm(ctx, o, &stdout, &stderr)
	return slurmRun{code: code, stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
}

var node17 = map[string]string{"SLURMD_NODENAME": "node17"}

func fixture(name string) string { return "--root=../../testdata/hosts/" + name }

const portDownReasonStart = "reason=rdmadoctor: port.state/admin-down(19) mlx5_1 port 1 DOWN"

func TestSlurmFaultDrainsWithOurReason(t *testing.T) {
	f := newFakeScontrol(t, "node17", "IDLE", "")
	r := runSlurmCmd(t, node17, "healthcheck", "--scontrol", f.path, fixture("port-down"))
	if r.code != 0 {
		t.Fatalf("exit %d, want 0 after draining; stderr: %s", r.code, r.stderr)
	}
	calls := f.calls(t)
	if len(calls) != 2 || strings.Join(calls[0], " ") != "show node node17" {
		t.Fatalf("calls %q: want show node node17, then one update", calls)
	}
	u := calls[1]
	if len(u) != 4 || u[0] != "update" || u[1] != "nodename=node17" || u[2] != "state=drain" || !strings.HasPrefix(u[3], portDownReasonStart) {
		t.Fatalf("update argv %q: want update nodename=node17 state=drain %q…", u, portDownReasonStart)
	}
	if !strings.Contains(r.stdout, "drained: rdmadoctor: port.state/admin-down(19)") {
		t.Errorf("stdout does not say the node was drained: %q", r.stdout)
	}
}

func TestSlurmHealthyResumesOnlyOurDrain(t *testing.T) {
	cases := []struct {
		name, state, reason string
		resume              bool
	}{
		{"ours", "IDLE+DRAIN", "rdmadoctor: port.state(19) mlx5_1 port 1 DOWN", true},
		{"ours, jobs still running", "MIXED+DRAIN", "rdmadoctor: counters.errors(22) symbol errors rising", true},
		{"ours, old-style word", "DRAINED", "rdmadoctor: pci.link(11) x8 below x16", true},
		{"another reason", "IDLE+DRAIN", "bad DIMM, ticket 4711", false},
		{"NHC's reason", "IDLE+DRAIN", "NHC: check_fs_mount: /scratch not mounted", false},
		{"our prefix later in the text", "IDLE+DRAIN", "admin: rdmadoctor: said so", false},
		{"ours but DOWN", "DOWN+DRAIN", "rdmadoctor: port.state(19) down", false},
		{"ours but in maintenance", "IDLE+DRAIN+MAINTENANCE", "rdmadoctor: port.state(19) down", false},
		{"ours but rebooting", "IDLE+DRAIN+REBOOT_ISSUED", "rdmadoctor: port.state(19) down", false},
		{"ours but powered down", "IDLE+DRAIN+POWERED_DOWN", "rdmadoctor: port.state(19) down", false},
		{"ours, unknown state word", "IDLE+DRAIN+SOMETHING_NEW", "rdmadoctor: port.state(19) down", false},
		{"not drained", "IDLE", "", false},
		{"allocated", "ALLOCATED", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeScontrol(t, "node17", c.state, c.reason)
			r := runSlurmCmd(t, node17, "healthcheck", "--scontrol", f.path, fixture("cx5-roce-healthy"))
			if r.code != 0 {
				t.Fatalf("exit %d, want 0; stderr: %s", r.code, r.stderr)
			}
			u := f.updates(t)
			if !c.resume {
				if len(u) != 0 {
					t.Fatalf("State=%s Reason=%q: updated %q, want the node untouched", c.state, c.reason, u)
				}
				return
			}
			if len(u) != 1 || strings.Join(u[0], " ") != "update nodename=node17 state=resume" {
				t.Fatalf("updates %q, want one update nodename=node17 state=resume", u)
			}
		})
	}
}

func TestSlurmFaultLeavesOthersAlone(t *testing.T) {
	cases := []struct {
		name, state, reason string
		drain               bool
	}{
		{"down", "DOWN", "Not responding", false},
		{"down, not responding", "DOWN+NOT_RESPONDING", "", false},
		{"maintenance", "IDLE+MAINTENANCE", "", false},
		{"old-style maint", "MAINT", "", false},
		{"reboot requested", "MIXED+REBOOT_REQUESTED", "", false},
		{"powering up", "IDLE+POWERING_UP", "", false},
		{"fail", "ALLOCATED+FAIL", "admin fail", false},
		{"future", "FUTURE", "", false},
		{"unknown", "UNKNOWN", "", false},
		{"drained by an admin", "IDLE+DRAIN", "replacing HCA", false},
		{"drained by NHC", "MIXED+DRAIN", "NHC: check_hw_ib: no IB port active", false},
		{"drained by Slurm", "IDLE+DRAIN", "Prolog error", false},
		{"drained by us for the same", "IDLE+DRAIN", "", false}, // reason filled in below
		{"drained by us for something else", "IDLE+DRAIN", "rdmadoctor: pci.link(11) x8", true},
		{"mixed", "MIXED", "", true},
		{"allocated, not responding", "ALLOCATED+NOT_RESPONDING", "", true},
		{"completing", "IDLE+COMPLETING", "", true},
	}
	same := sameReason(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reason := c.reason
			if c.name == "drained by us for the same" {
				reason = same
			}
			f := newFakeScontrol(t, "node17", c.state, reason)
			r := runSlurmCmd(t, node17, "healthcheck", "--scontrol", f.path, fixture("port-down"))
			if r.code != 0 {
				t.Fatalf("exit %d, want 0; stderr: %s", r.code, r.stderr)
			}
			u := f.updates(t)
			if c.drain != (len(u) == 1) || len(u) > 1 {
				t.Fatalf("State=%s Reason=%q: updates %q, want drain=%v", c.state, reason, u, c.drain)
			}
			if c.drain && (u[0][2] != "state=drain" || !strings.HasPrefix(u[0][3], portDownReasonStart)) {
				t.Fatalf("update %q: want a drain with our reason", u[0])
			}
		})
	}
}

// sameReason is the reason a drain of port-down sets.
func sameReason(t *testing.T) string {
	t.Helper()
	f := newFakeScontrol(t, "node17", "IDLE", "")
	runSlurmCmd(t, node17, "healthcheck", "--scontrol", f.path, fixture("port-down"))
	u := f.updates(t)
	if len(u) != 1 {
		t.Fatalf("no drain on port-down: %q", f.calls(t))
	}
	return strings.TrimPrefix(u[0][3], "reason=")
}

func TestSlurmPrologDrainsAndExits1(t *testing.T) {
	f := newFakeScontrol(t, "node17", "ALLOCATED", "")
	r := runSlurmCmd(t, node17, "prolog", "--scontrol", f.path, fixture("memlock-64k"))
	if r.code != 1 {
		t.Fatalf("prolog on a fault exited %d, want 1 (Slurm requeues the job held)", r.code)
	}
	u := f.updates(t)
	if len(u) != 1 || u[0][2] != "state=drain" || !strings.HasPrefix(u[0][3], "reason=rdmadoctor: limits.memlock/below(18) ") {
		t.Fatalf("updates %q: want one drain for limits.memlock(18)", u)
	}

	g := newFakeScontrol(t, "node17", "ALLOCATED", "")
	if r := runSlurmCmd(t, node17, "prolog", "--scontrol", g.path, fixture("cx6-ib-healthy")); r.code != 0 || len(g.updates(t)) != 0 {
		t.Fatalf("prolog on a healthy node: exit %d, updates %q; want 0 and none", r.code, g.updates(t))
	}
}

func TestSlurmPrologDrainFailsStillExits1(t *testing.T) {
	f := newFakeScontrol(t, "node17", "ALLOCATED", "")
	f.touch(t, "update.err", "slurm_update error: Access/permission denied")
	r := runSlurmCmd(t, node17, "prolog", "--scontrol", f.path, fixture("port-down"))
	if r.code != 1 {
		t.Fatalf("exit %d, want 1: the job must not start on a broken node", r.code)
	}
	if !strings.Contains(r.stderr, "Access/permission denied") {
		t.Errorf("stderr does not carry scontrol's error: %q", r.stderr)
	}
}

func TestSlurmHealthcheckScontrolErrorExits1(t *testing.T) {
	f := newFakeScontrol(t, "node17", "IDLE", "")
	f.touch(t, "show.err", "Node node17 not found")
	r := runSlurmCmd(t, node17, "healthcheck", "--scontrol", f.path, fixture("port-down"))
	if r.code != 1 || len(f.updates(t)) != 0 {
		t.Fatalf("exit %d, updates %q: want 1 and none when the state cannot be read", r.code, f.updates(t))
	}
	if !strings.Contains(r.stderr, "show node node17") || !strings.Contains(r.stderr, "not found") {
		t.Errorf("stderr does not name the failed call and its error: %q", r.stderr)
	}
}

func TestSlurmDryRunPrintsWithoutUpdating(t *testing.T) {
	f := newFakeScontrol(t, "node17", "IDLE", "")
	r := runSlurmCmd(t, node17, "healthcheck", "--dry-run", "--scontrol", f.path, fixture("port-down"))
	if r.code != 0 {
		t.Fatalf("exit %d; stderr %s", r.code, r.stderr)
	}
	if u := f.updates(t); len(u) != 0 {
		t.Fatalf("a dry run ran %q", u)
	}
	if !strings.Contains(r.stdout, "read: "+f.path+" show node node17: State=IDLE") {
		t.Errorf("stdout %q does not show the state read", r.stdout)
	}
	want := "would run: " + f.path + " update nodename=node17 state=drain '" + portDownReasonStart
	if !strings.Contains(r.stdout, want) {
		t.Fatalf("stdout %q\nwant it to contain %q", r.stdout, want)
	}

	// Healthy and drained by us: the resume is printed, not run.
	g := newFakeScontrol(t, "node17", "IDLE+DRAIN", "rdmadoctor: port.state(19) x")
	r = runSlurmCmd(t, node17, "healthcheck", "--dry-run", "--scontrol", g.path, fixture("cx5-roce-healthy"))
	if len(g.updates(t)) != 0 || !strings.Contains(r.stdout, "would run: "+g.path+" update nodename=node17 state=resume") {
		t.Fatalf("dry run on a node to resume: updates %q, stdout %q", g.updates(t), r.stdout)
	}
}

func TestSlurmDryRunWithoutScontrol(t *testing.T) {
	r := runSlurmCmd(t, node17, "healthcheck", "--dry-run", "--scontrol", filepath.Join(t.TempDir(), "scontrol"), fixture("port-down"))
	if !strings.Contains(r.stdout, "state was not read") || !strings.Contains(r.stdout, "would run: scontrol update nodename=node17 state=drain") {
		t.Fatalf("stdout %q: want the missing scontrol said and the drain printed", r.stdout)
	}
}

// A dry run where scontrol cannot reach slurmctld (no slurm.conf here)
// still prints the drain it would run, saying the state was not read.
func TestSlurmDryRunScontrolCannotReadNode(t *testing.T) {
	sc := filepath.Join(t.TempDir(), "scontrol")
	script := "#!/bin/sh\necho 'scontrol: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host' >&2\nexit 1\n"
	if err := os.WriteFile(sc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r := runSlurmCmd(t, node17, "healthcheck", "--dry-run", "--scontrol", sc, fixture("port-down"))
	if !strings.Contains(r.stdout, "could not be read") || !strings.Contains(r.stdout, "would run: "+sc+" update nodename=node17 state=drain") {
		t.Fatalf("stdout %q stderr %q: want the unread state said and the drain printed", r.stdout, r.stderr)
	}
}

func TestSlurmHangingScontrolIsKilled(t *testing.T) {
	for _, step := range []string{"show", "update"} {
		t.Run(step, func(t *testing.T) {
			f := newFakeScontrol(t, "node17", "IDLE", "")
			f.touch(t, "hang-"+step, "")
			r := runSlurmCmd(t, node17, "healthcheck", "--budget=3s", "--scontrol", f.path, fixture("port-down"))
			// The call's deadline is a fifth of the budget; the process
			// group (the shell and its sleep) dies with it.
			if r.elapsed > 3*time.Second {
				t.Fatalf("took %v with a --budget of 3s", r.elapsed)
			}
			if r.code != 1 || !strings.Contains(r.stderr, "killed after") {
				t.Fatalf("exit %d, stderr %q: want 1 and the killed call named", r.code, r.stderr)
			}
		})
	}
}

func TestSlurmSkipsQueryWhenSlurmctldSaysHealthy(t *testing.T) {
	f := newFakeScontrol(t, "node17", "IDLE", "")
	env := map[string]string{"SLURMD_NODENAME": "node17", "SLURM_NODE_IS_HEALTHY": "yes"}
	r := runSlurmCmd(t, env, "healthcheck", "--scontrol", f.path, fixture("cx5-roce-healthy"))
	if r.code != 0 || len(f.calls(t)) != 0 {
		t.Fatalf("exit %d, calls %q: want 0 and no scontrol call", r.code, f.calls(t))
	}
	// "no" (drained, down, …) is asked about: it may be our drain to lift.
	env["SLURM_NODE_IS_HEALTHY"] = "no"
	f.setNode(t, "node17", "IDLE+DRAIN", "rdmadoctor: port.state(19) x")
	runSlurmCmd(t, env, "healthcheck", "--scontrol", f.path, fixture("cx5-roce-healthy"))
	if u := f.updates(t); len(u) != 1 || u[0][2] != "state=resume" {
		t.Fatalf("updates %q: want a resume", u)
	}
}

func TestSlurmUnfinishedRunNeitherDrainsNorResumes(t *testing.T) {
	// --timeout 1ns cuts every check: the run has shown nothing.
	for _, host := range []string{"cx5-roce-healthy", "port-down"} {
		f := newFakeScontrol(t, "node17", "IDLE+DRAIN", "rdmadoctor: port.state(19) x")
		r := runSlurmCmd(t, node17, "healthcheck", "--timeout=1ns", "--scontrol", f.path, fixture(host))
		if r.code != 1 || len(f.calls(t)) != 0 {
			t.Fatalf("%s: exit %d, calls %q: want 1 and no scontrol call", host, r.code, f.calls(t))
		}
		if !strings.Contains(r.stderr, "could not judge") || !strings.Contains(r.stderr, "deadline") || !strings.Contains(r.stderr, "neither drained nor resumed") {
			t.Errorf("%s: stderr %q does not say the run could not finish", host, r.stderr)
		}
		r = runSlurmCmd(t, node17, "prolog", "--timeout=1ns", "--scontrol", f.path, fixture(host))
		if r.code != 0 || len(f.calls(t)) != 0 {
			t.Fatalf("prolog %s: exit %d, calls %q: want 0 (our failure holds no job) and no call", host, r.code, f.calls(t))
		}
	}
	f := newFakeScontrol(t, "node17", "IDLE", "")
	kept := filepath.Join(t.TempDir(), "state.json")
	r := runSlurmCmd(t, node17, "healthcheck", "--timeout=1ns", "--drain-on-error", "--state", kept, "--scontrol", f.path, fixture("cx5-roce-healthy"))
	u := f.updates(t)
	if r.code != 0 || len(u) != 1 || !strings.HasPrefix(u[0][3], "reason=rdmadoctor: run(1) could not check (1 runs): ") {
		t.Fatalf("--drain-on-error: exit %d, updates %q; want a drain saying it could not check", r.code, u)
	}
}

func TestSlurmRunFlagsApply(t *testing.T) {
	// --check limits the run: port-down's pci.device passes, so no drain.
	f := newFakeScontrol(t, "node17", "IDLE", "")
	r := runSlurmCmd(t, node17, "healthcheck", "--check", "pci.device", "--scontrol", f.path, fixture("port-down"))
	if r.code != 0 || len(f.updates(t)) != 0 || !strings.Contains(r.stdout, "healthy") {
		t.Fatalf("--check pci.device on port-down: exit %d, updates %q, stdout %q", r.code, f.updates(t), r.stdout)
	}
	// --fail-on warn: a warning drains too. ib-port-disabled warns at port.state.
	g := newFakeScontrol(t, "node17", "IDLE", "")
	runSlurmCmd(t, node17, "healthcheck", "--fail-on=warn", "--scontrol", g.path, fixture("ib-port-disabled"))
	if u := g.updates(t); len(u) != 1 || !strings.HasPrefix(u[0][3], "reason=rdmadoctor: port.state/disabled(19) ") {
		t.Fatalf("--fail-on warn on ib-port-disabled: updates %q, want a drain for port.state", u)
	}
}

func TestSlurmUsageErrors(t *testing.T) {
	cases := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{}, []string{"slurm", "healthcheck"}, "SLURMD_NODENAME is not set"},
		{map[string]string{"SLURMD_NODENAME": "node17 state=resume"}, []string{"slurm", "healthcheck"}, "want one host name"},
		{node17, []string{"slurm", "check"}, `unknown slurm command "check"`},
		{node17, []string{"slurm"}, "slurm needs a command"},
		{node17, []string{"slurm", "healthcheck", "--format", "json"}, "--format does not apply"},
		{node17, []string{"slurm", "healthcheck", "--bogus"}, "unknown flag --bogus; valid flags: --dry-run, "},
		{node17, []string{"slurm", "healthcheck", "extra"}, `takes flags only, got "extra"`},
		{node17, []string{"slurm", "healthcheck", "--budget=1s"}, "--budget 1s"},
		{node17, []string{"slurm", "healthcheck", "--scontrol=scontrol", "--root=../../testdata/hosts/port-down"}, "give an absolute path"},
		{node17, []string{"slurm", "healthcheck", "--level=7"}, "--level 7: unknown level; valid levels: 1, 2"},
		{node17, []string{"slurm", "healthcheck", "--root=/nonexistent/host"}, "--root"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			for _, k := range []string{"SLURMD_NODENAME", "SLURM_NODE_IS_HEALTHY"} {
				t.Setenv(k, c.env[k])
			}
			var stdout, stderr bytes.Buffer
			code := run(c.args, &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), c.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), c.want)
			}
		})
	}
}

func TestSlurmHostileSummaryStaysOneArgument(t *testing.T) {
	hostile := "it's \"quoted\"\nState=resume\r\x1b[31m $(touch PWNED) `touch PWNED`; touch PWNED — ü \xff" + strings.Repeat("x", 300)
	reason := slurmReason("port.state", 19, hostile)
	f := newFakeScontrol(t, "node17", "IDLE", "")
	o := &slurmOpts{mode: slurmHealthcheck, node: "node17", budget: 10 * time.Second, getenv: func(string) string { return "" }}
	var stdout, stderr bytes.Buffer
	a := &slurmActor{o: o, ctx: context.Background(), sc: scontrol{path: f.path, timeout: 5 * time.Second}, stdout: &stdout, stderr: &stderr}
	cwd, _ := os.Getwd()
	a.act(verdict{kind: verdictFault, what: "port.state(19) fail", reason: reason})
	u := f.updates(t)
	if len(u) != 1 || len(u[0]) != 4 || u[0][3] != "reason="+reason {
		t.Fatalf("updates %q: want the reason as one argument %q", u, "reason="+reason)
	}
	for _, d := range []string{cwd, f.dir} {
		if _, err := os.Stat(filepath.Join(d, "PWNED")); err == nil {
			t.Fatalf("the summary ran a command (PWNED in %s)", d)
		}
	}
}

func TestSlurmReason(t *testing.T) {
	cases := []struct{ summary, want string }{
		{"mlx5_1 port 1 DOWN", "rdmadoctor: port.state(19) mlx5_1 port 1 DOWN"},
		{"a\nb\r\tc  d", "rdmadoctor: port.state(19) a b c d"},
		{`say "hi"`, "rdmadoctor: port.state(19) say 'hi'"},
		{"x — y → z ≥ 4 …", "rdmadoctor: port.state(19) x - y -> z >= 4 ..."},
		// One table of spellings with the NPD line: what it spells, the
		// reason spells too.
		{"mlx5_0 ↔ GPU0 12 µs ± 3 “ok” −1 ≈2", `rdmadoctor: port.state(19) mlx5_0 <-> GPU0 12 us +- 3 'ok' -1 ~2`},
		{"Grüße \xff\x1b[0m", "rdmadoctor: port.state(19) Gr??e ? [0m"},
		{"", "rdmadoctor: port.state(19)"},
	}
	for _, c := range cases {
		if got := slurmReason("port.state", 19, c.summary); got != c.want {
			t.Errorf("slurmReason(%q) = %q, want %q", c.summary, got, c.want)
		}
	}
	long := slurmReason("port.state", 19, strings.Repeat("ü", 500))
	if len(long) > maxReasonLen || !strings.HasSuffix(long, "...") {
		t.Errorf("long reason: %d bytes %q; want at most %d ending in ...", len(long), long, maxReasonLen)
	}
}

func TestSlurmOlderVerdictNeverUndoesNewer(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "slurm.lock")
	later := time.Now().Add(time.Hour).UnixNano()
	if err := os.WriteFile(lock, []byte(fmt.Sprintf("%d\n", later)), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFakeScontrol(t, "node17", "IDLE+DRAIN", "rdmadoctor: port.state(19) x")
	r := runSlurmCmd(t, node17, "healthcheck", "--lock-file="+lock, "--scontrol", f.path, fixture("cx5-roce-healthy"))
	if r.code != 0 || len(f.calls(t)) != 0 || !strings.Contains(r.stdout, "started later") {
		t.Fatalf("exit %d, calls %q, stdout %q: want 0, no call, and the newer run named", r.code, f.calls(t), r.stdout)
	}

	// A run that acts records its start; the next, started after it, acts.
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	runSlurmCmd(t, node17, "healthcheck", "--lock-file="+lock, "--scontrol", f.path, fixture("cx5-roce-healthy"))
	data, _ := os.ReadFile(lock)
	var ns int64
	if _, err := fmt.Sscan(string(data), &ns); err != nil || time.Unix(0, ns).Before(before) {
		t.Fatalf("lock file %q: want the acting run's start time", data)
	}
	g := newFakeScontrol(t, "node17", "IDLE", "")
	runSlurmCmd(t, node17, "healthcheck", "--lock-file="+lock, "--scontrol", g.path, fixture("port-down"))
	if len(g.updates(t)) != 1 {
		t.Fatalf("the next run did not drain: calls %q", g.calls(t))
	}
}

func TestSlurmLockTakesTurns(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "slurm.lock")
	held, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE, 0o600) // as a run creates it
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	// Held for the whole budget: no call, exit 1, said.
	f := newFakeScontrol(t, "node17", "IDLE", "")
	r := runSlurmCmd(t, node17, "healthcheck", "--budget=2s", "--lock-file="+lock, "--scontrol", f.path, fixture("port-down"))
	if r.code != 1 || len(f.calls(t)) != 0 || !strings.Contains(r.stderr, "held") {
		t.Fatalf("exit %d, calls %q, stderr %q: want 1, no call, the lock named", r.code, f.calls(t), r.stderr)
	}
	if r.elapsed > 3*time.Second {
		t.Fatalf("waited %v on a 2s budget", r.elapsed)
	}
	// Released a moment later: the run waits its turn, then acts.
	go func() {
		time.Sleep(300 * time.Millisecond)
		syscall.Flock(int(held.Fd()), syscall.LOCK_UN)
	}()
	r = runSlurmCmd(t, node17, "healthcheck", "--budget=5s", "--lock-file="+lock, "--scontrol", f.path, fixture("port-down"))
	if r.code != 0 || len(f.updates(t)) != 1 {
		t.Fatalf("exit %d, calls %q: want a drain once the lock is free", r.code, f.calls(t))
	}
}

func TestSlurmLockUnavailableStillActs(t *testing.T) {
	f := newFakeScontrol(t, "node17", "IDLE", "")
	lock := filepath.Join(t.TempDir(), "no-such-dir", "slurm.lock")
	r := runSlurmCmd(t, node17, "healthcheck", "--lock-file="+lock, "--scontrol", f.path, fixture("port-down"))
	if r.code != 0 || len(f.updates(t)) != 1 || !strings.Contains(r.stderr, "acting without it") {
		t.Fatalf("exit %d, updates %q, stderr %q: want the drain, and the missing lock said", r.code, f.updates(t), r.stderr)
	}
}

func TestSlurmHelp(t *testing.T) {
	for _, args := range [][]string{{"slurm", "--help"}, {"slurm", "healthcheck", "--help"}, {"slurm", "prolog", "-h"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "rdmadoctor slurm healthcheck") ||
			!strings.Contains(stdout.String(), "--drain-on-error") {
			t.Errorf("%q: exit %d, stdout %q; want 0 and the usage", args, code, stdout.String())
		}
	}
}

func TestSlurmScontrolMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "scontrol")
	env := map[string]string{"SLURMD_NODENAME": "node17", "SLURM_NODE_IS_HEALTHY": "yes"}
	for _, c := range []struct {
		mode, host string
		code       int
	}{
		{"healthcheck", "port-down", 1},
		{"healthcheck", "cx5-roce-healthy", 1}, // healthy, but it could not drain tomorrow
		{"prolog", "port-down", 1},
		{"prolog", "cx5-roce-healthy", 0},
	} {
		r := runSlurmCmd(t, env, c.mode, "--scontrol", missing, fixture(c.host))
		if r.code != c.code || strings.Count(r.stderr, missing) != 1 {
			t.Errorf("%s on %s: exit %d, stderr %q; want %d and the missing scontrol named once", c.mode, c.host, r.code, r.stderr, c.code)
		}
	}
}

// TestSlurmStateLockOverlap: with --state, a health check that slurmd starts
// while the last one still holds the state's lock exits 3 at once, saying
// so, and neither calls scontrol nor writes the state; a prolog in the same
// case exits 0, not holding the job. Under Debian's real slurmd the
// overlap happens (testdata/slurm): before this lock the second run
// checked and acted beside the first.
func TestSlurmStateLockOverlap(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	held, err := acquireLock(lockPathFor(state))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode string
		code int
	}{{"healthcheck", ExitBusy}, {"prolog", 0}} {
		f := newFakeScontrol(t, "node17", "IDLE", "")
		r := runSlurmCmd(t, node17, c.mode, "--state", state, "--scontrol", f.path, fixture("port-down"))
		if r.code != c.code || len(f.calls(t)) != 0 || !strings.Contains(r.stderr, "another rdmadoctor run holds "+state+".lock (pid ") {
			t.Fatalf("%s: exit %d, calls %q, stderr %q: want %d, no scontrol call, the holder named", c.mode, r.code, f.calls(t), r.stderr, c.code)
		}
		if r.elapsed > time.Second {
			t.Fatalf("%s: took %v: want an exit at once", c.mode, r.elapsed)
		}
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Fatalf("%s: the busy run wrote the state (%v)", c.mode, err)
		}
	}
	// Released: the run holds it, checks, drains and keeps its report.
	held.release()
	f := newFakeScontrol(t, "node17", "IDLE", "")
	r := runSlurmCmd(t, node17, "healthcheck", "--state", state, "--scontrol", f.path, fixture("port-down"))
	if r.code != 0 || len(f.updates(t)) != 1 {
		t.Fatalf("exit %d, calls %q, stderr %q: want the drain once the lock is free", r.code, f.calls(t), r.stderr)
	}
	if b, err := os.ReadFile(state); err != nil || !strings.Contains(string(b), `"root_cause": "port.state"`) {
		t.Fatalf("state after the run: %v %.200s", err, b)
	}
	// An unusable --state: not a verdict; the prolog lets the job go.
	bad := filepath.Join(state, "under-a-file", "state.json")
	r = runSlurmCmd(t, node17, "prolog", "--state", bad, "--scontrol", f.path, fixture("port-down"))
	if r.code != 0 || !strings.Contains(r.stderr, "--state") {
		t.Fatalf("prolog with an unusable --state: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestSlurmRunsArePeriodic: slurmd runs the health check every interval and
// the prolog before every job, so both leave out the probes that make the
// driver log a line unless the site says otherwise.
func TestSlurmRunsArePeriodic(t *testing.T) {
	env := func(string) string { return "node17" }
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"healthcheck", "--level", "2"}, true},
		{[]string{"prolog"}, true},
		{[]string{"healthcheck", "--periodic=false"}, false},
	} {
		o, err := parseSlurmArgs(tc.args, env)
		if err != nil {
			t.Fatal(err)
		}
		got := false
		for _, a := range o.runArgs {
			if a == "--periodic" || a == "--periodic=true" {
				got = true
			}
		}
		if got != tc.want {
			t.Errorf("slurm %v: the run's flags %q, want --periodic %v", tc.args, o.runArgs, tc.want)
		}
	}
}
