package fleettest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const (
	shippedMonitor = repoRoot + "/deploy/kubernetes/npd/rdmadoctor-monitor.json"
	nodeName       = "rdma-node-1"
	rdmaProblem    = corev1.NodeConditionType("RDMAProblem")
	rdmaFault      = corev1.NodeConditionType("RDMAFault")
	// problemOnly is the flag of the RDMAFault rule: exit 1 for a problem,
	// 0 otherwise (unknown included).
	problemOnly = "--problem-only"
	// testInterval replaces the shipped 30s invoke_interval so a test sees
	// each state within seconds; nothing else about the timing changes.
	testInterval = "1s"
)

// monitor is the shipped monitor config: whole (raw), and the fields the
// tests read.
type monitor struct {
	raw    map[string]any
	Source string `json:"source"`
	Conds  []struct {
		Type, Reason, Message string
	} `json:"conditions"`
	Rules []struct {
		Condition    corev1.NodeConditionType
		Reason, Path string
		Args         []string
		Timeout      string
	} `json:"rules"`
}

func readMonitor(t *testing.T) monitor {
	t.Helper()
	data, err := os.ReadFile(shippedMonitor)
	if err != nil {
		t.Fatal(err)
	}
	var m monitor
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", shippedMonitor, err)
	}
	if err := json.Unmarshal(data, &m.raw); err != nil {
		t.Fatalf("%s: %v", shippedMonitor, err)
	}
	if len(m.Rules) != 2 || len(m.Conds) != 2 || m.Rules[0].Condition != rdmaProblem || m.Rules[1].Condition != rdmaFault ||
		m.Conds[0].Type != string(rdmaProblem) || m.Conds[1].Type != string(rdmaFault) {
		t.Fatalf("%s: want the conditions and rules RDMAProblem and RDMAFault, in that order, got %d conditions and %d rules",
			shippedMonitor, len(m.Conds), len(m.Rules))
	}
	if slices.Contains(m.Rules[0].Args, problemOnly) || !slices.Contains(m.Rules[1].Args, problemOnly) {
		t.Fatalf("%s: want %s in RDMAFault's rule only: %q, %q", shippedMonitor, problemOnly, m.Rules[0].Args, m.Rules[1].Args)
	}
	return m
}

// adapt copies the shipped config with the plugin's path, its args and the
// invoke interval changed (and anything edit changes), writes it to dir and
// asserts that nothing else differs from what is shipped. Every rule runs
// plugin with args, the RDMAFault rule with --problem-only after them, as
// shipped (ruleArgs).
func (m monitor) adapt(t *testing.T, dir, plugin string, args []string, edit func(map[string]any), allowed ...string) string {
	t.Helper()
	var c map[string]any
	b, _ := json.Marshal(m.raw)
	json.Unmarshal(b, &c)
	c["pluginConfig"].(map[string]any)["invoke_interval"] = testInterval
	want := []string{"pluginConfig.invoke_interval"}
	for i, r := range c["rules"].([]any) {
		rule := r.(map[string]any)
		rule["path"] = plugin
		rule["args"] = m.ruleArgs(i, args)
		want = append(want, fmt.Sprintf("rules.%d.args", i), fmt.Sprintf("rules.%d.path", i))
	}
	if edit != nil {
		edit(c)
	}
	changed := jsonDiff("", m.raw, c)
	want = append(want, allowed...)
	slices.Sort(want)
	if !slices.Equal(changed, want) {
		t.Fatalf("the test's monitor config differs from the shipped one in %v, want only %v", changed, want)
	}
	out, _ := json.MarshalIndent(c, "", "  ")
	p := filepath.Join(dir, "rdmadoctor-monitor.json")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ruleArgs is what the test's config gives rule i: args, and --problem-only
// when the shipped rule has it.
func (m monitor) ruleArgs(i int, args []string) []string {
	out := slices.Clone(args)
	if slices.Contains(m.Rules[i].Args, problemOnly) && !slices.Contains(out, problemOnly) {
		out = append(out, problemOnly)
	}
	return out
}

// jsonDiff lists the dotted paths at which two decoded JSON values differ.
func jsonDiff(path string, a, b any) []string {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		for k := range am {
			out = append(out, jsonDiff(join(k), am[k], bm[k])...)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				out = append(out, join(k))
			}
		}
		slices.Sort(out)
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) && len(al) > 0 {
		if _, isMap := al[0].(map[string]any); isMap {
			var out []string
			for i := range al {
				out = append(out, jsonDiff(join(fmt.Sprint(i)), al[i], bl[i])...)
			}
			return out
		}
	}
	if !reflect.DeepEqual(normal(a), normal(b)) {
		return []string{path}
	}
	return nil
}

// normal gives []string and []any the same form for comparison.
func normal(v any) any {
	b, _ := json.Marshal(v)
	var out any
	json.Unmarshal(b, &out)
	return out
}

// npdProcess is a running node-problem-detector.
type npdProcess struct {
	cmd     *exec.Cmd
	log     string
	started time.Time
}

// startNPD runs the real node-problem-detector with custom plugin
// monitors, reporting to the fake API server as node nodeName; its own
// HTTP and Prometheus servers are off (ports 0).
func startNPD(t *testing.T, api *fakeAPIServer, dir string, configs ...string) *npdProcess {
	t.Helper()
	kubeconfig := api.writeKubeconfig(t, dir)
	logPath := filepath.Join(dir, "npd.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--hostname-override=" + nodeName,
		"--apiserver-override=" + api.srv.URL + "?inClusterConfig=false&auth=" + kubeconfig,
		"--port=0", "--prometheus-port=0", "--logtostderr", "--v=2"}
	// One flag per config, as the NPD patch appends a second one.
	for _, c := range configs {
		args = append(args, "--config.custom-plugin-monitor="+c)
	}
	cmd := exec.Command(npdBinary(t), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	p := &npdProcess{cmd: cmd, log: logPath, started: time.Now()}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node-problem-detector: %v", err)
	}
	t.Cleanup(func() {
		p.stop(t)
		logf.Close()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			if len(data) > 8000 {
				data = data[len(data)-8000:]
			}
			t.Logf("node-problem-detector's log (tail):\n%s", data)
		}
	})
	return p
}

// npdStopGrace is how long NPD is given to exit on SIGTERM before it is
// killed. NPD v1.36.0 stops its monitors one by one and a monitor waits for
// the plugin run in progress, and for the run after it: with a hung plugin
// that is two 5s timeouts or more, so a kill here is no failure.
const npdStopGrace = 3 * time.Second

func (p *npdProcess) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(npdStopGrace):
		t.Logf("node-problem-detector did not stop within %v of SIGTERM: killed", npdStopGrace)
		p.cmd.Process.Kill()
		<-done
	}
}

// waitCondition polls the fake API server until the node's RDMAProblem
// condition satisfies ok, and fails the test after limit.
func waitCondition(t *testing.T, api *fakeAPIServer, limit time.Duration, what string, ok func(corev1.NodeCondition) bool) corev1.NodeCondition {
	t.Helper()
	return waitConditionOf(t, api, rdmaProblem, limit, what, ok)
}

// waitConditionOf polls the fake API server until the node's condition typ
// satisfies ok, and fails the test after limit.
func waitConditionOf(t *testing.T, api *fakeAPIServer, typ corev1.NodeConditionType, limit time.Duration, what string, ok func(corev1.NodeCondition) bool) corev1.NodeCondition {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		c, found := api.condition(typ)
		if found && ok(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not published within %v; %s is %+v (present %v)", what, limit, typ, c, found)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pluginLine is what the plugin prints and exits with for args, run the
// way NPD runs it; the line is checked against NPD's message limits.
func pluginLine(t *testing.T, bin string, args []string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if _, isExit := err.(*exec.ExitError); err != nil && !isExit {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	line := strings.TrimSpace(out.String())
	checkMessage(t, line)
	return line, code
}

// checkMessage asserts a condition message is printable ASCII of at most
// 80 bytes, NPD's max_output_length.
func checkMessage(t *testing.T, msg string) {
	t.Helper()
	if len(msg) == 0 || len(msg) > 80 {
		t.Errorf("message of %d bytes, want 1..80: %q", len(msg), msg)
	}
	for i := 0; i < len(msg); i++ {
		if msg[i] < 0x20 || msg[i] > 0x7e {
			t.Errorf("byte %d of %q is not printable ASCII", i, msg)
			return
		}
	}
}

// keptReport runs rdmadoctor at level 1 against a fixture host (a name
// under testdata/hosts, or a path) with a new --state and returns the state
// it kept.
func keptReport(t *testing.T, bin, fixture string, wantExit int) []byte {
	t.Helper()
	root := fixture
	if !filepath.IsAbs(root) {
		root = filepath.Join(repoRoot, "testdata", "hosts", fixture)
	}
	return runKept(t, bin, root, filepath.Join(t.TempDir(), "state.json"), wantExit)
}

// runKept runs rdmadoctor at level 1 against the host at root with --state
// state (which it updates, as a timer's runs do) and the extra args, asserts
// its exit code and returns the state it kept.
func runKept(t *testing.T, bin, root, state string, wantExit int, extra ...string) []byte {
	t.Helper()
	args := append([]string{"--root", root, "--level", "1", "--format", "json", "--state", state}, extra...)
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != wantExit {
		t.Fatalf("rdmadoctor %v: exit %d, want %d\n%s", args, code, wantExit, stderr.Bytes())
	}
	data, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// runReport is the report/v1 document a level-1 run against a fixture
// prints: the state file of versions before rdmadoctor.state/v2.
func runReport(t *testing.T, bin, fixture string, wantExit int) []byte {
	t.Helper()
	cmd := exec.Command(bin, "--root", filepath.Join(repoRoot, "testdata", "hosts", fixture), "--level", "1", "--format", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != wantExit {
		t.Fatalf("rdmadoctor --root %s: exit %d, want %d\n%s", fixture, code, wantExit, stderr.Bytes())
	}
	var head struct{ Schema string }
	if err := json.Unmarshal(stdout.Bytes(), &head); err != nil || head.Schema != "rdmadoctor.report/v1" {
		t.Fatalf("rdmadoctor --format json printed schema %q (%v), want rdmadoctor.report/v1", head.Schema, err)
	}
	return stdout.Bytes()
}

// keptState is what the tests read of a state file.
type keptState struct {
	Schema string `json:"schema"`
	Checks []struct {
		ID     string    `json:"id"`
		Status string    `json:"status"`
		Ran    time.Time `json:"ran"`
	} `json:"checks"`
}

func decodeState(t *testing.T, data []byte) keptState {
	t.Helper()
	var s keptState
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("state: %v", err)
	}
	if s.Schema != "rdmadoctor.state/v2" {
		t.Fatalf("state schema %q, want rdmadoctor.state/v2", s.Schema)
	}
	return s
}

// assertPartial checks that a run with --check ran refreshed ran's record
// and left older's as it was: older than ran's, by at least a run.
func assertPartial(t *testing.T, data []byte, ran, older string) {
	t.Helper()
	at := map[string]time.Time{}
	for _, c := range decodeState(t, data).Checks {
		at[c.ID] = c.Ran
	}
	if at[ran].IsZero() || at[older].IsZero() {
		t.Fatalf("the state lacks a record of %s or %s: %s", ran, older, data)
	}
	if !at[older].Before(at[ran]) {
		t.Fatalf("after a run of --check %s, %s's record (%v) is not older than %s's (%v): the partial run rewrote it",
			ran, older, at[older], ran, at[ran])
	}
}

// errorFixture copies the healthy HGX host and cuts every PCI function's
// config space to the 64 bytes an unprivileged reader sees: gpu.acs cannot
// read ACS and reports error, the only check that does not pass.
func errorFixture(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "host")
	if out, err := exec.Command("cp", "-a", filepath.Join(repoRoot, "testdata", "hosts", "hgx-8gpu-healthy"), root).CombinedOutput(); err != nil {
		t.Fatalf("copy the fixture: %v: %s", err, out)
	}
	var cut int
	err := filepath.WalkDir(filepath.Join(root, "sys", "devices"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "config" || !d.Type().IsRegular() {
			return err
		}
		cut++
		return os.Truncate(p, 64)
	})
	if err != nil || cut == 0 {
		t.Fatalf("cut config space in %s: %d files, %v", root, cut, err)
	}
	return root
}

// replaceFile puts data at path by rename, as rdmadoctor's --state does:
// the plugin never reads a half-written state.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// withRan returns the state with every check's record (when it ran and
// since when its status holds) and the state's own time moved to at, as if
// the last run had been then.
func withRan(t *testing.T, state []byte, at time.Time) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(state, &doc); err != nil {
		t.Fatal(err)
	}
	ts := at.UTC().Format(time.RFC3339Nano)
	checks, _ := doc["checks"].([]any)
	if len(checks) == 0 {
		t.Fatal("the state has no check records")
	}
	for _, c := range checks {
		rec := c.(map[string]any)
		rec["ran"], rec["since"] = ts, ts
	}
	doc["updated"] = ts
	out, _ := json.Marshal(doc)
	return out
}
