package fleettest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// hungFixture copies the port-down fixture host and makes one sysfs
// attribute a FIFO nobody writes: reading it blocks the way an attribute
// of a wedged driver does, so a level-1 run hangs in that read.
func hungFixture(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "host")
	if out, err := exec.Command("cp", "-a", filepath.Join(repoRoot, "testdata", "hosts", "port-down"), root).CombinedOutput(); err != nil {
		t.Fatalf("copy the fixture: %v: %s", err, out)
	}
	dev, err := filepath.EvalSymlinks(filepath.Join(root, "sys", "class", "infiniband", "mlx5_1"))
	if err != nil {
		t.Fatal(err)
	}
	attr := filepath.Join(dev, "ports", "1", "state")
	if err := os.Remove(attr); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(attr, 0o644); err != nil {
		t.Fatalf("mkfifo %s: %v", attr, err)
	}
	return root
}

// procsOf lists the live processes running the executable exe.
func procsOf(exe string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink("/proc/" + e.Name() + "/exe"); err == nil && target == exe {
			pids = append(pids, pid)
		}
	}
	return pids
}

// A plugin that hangs past the rule's timeout (5s, as shipped): NPD
// SIGKILLs its process group, publishes Unknown, and no rdmadoctor
// process outlives that. While the first run hangs nothing may be
// published: skip_initial_status keeps NPD's in-memory default, False,
// off the node. The control run without skip_initial_status shows that
// NPD would otherwise declare the node healthy before any run finished.
func TestNPDKillsAHungPlugin(t *testing.T) {
	for _, skip := range []bool{true, false} {
		name := "shipped"
		if !skip {
			name = "control without skip_initial_status"
		}
		t.Run(name, func(t *testing.T) { hungPlugin(t, skip) })
	}
}

func hungPlugin(t *testing.T, skipInitial bool) {
	m := readMonitor(t)
	bin := rdmadoctorBinary(t)
	dir := t.TempDir()
	// --run judges a level-1 run made now; its own deadline is set beyond
	// NPD's timeout, so NPD's kill is what ends it.
	args := []string{"npd", "--run", "--root=" + hungFixture(t), "--timeout=1m"}
	var edit func(map[string]any)
	var allowed []string
	if !skipInitial {
		edit = func(c map[string]any) { c["pluginConfig"].(map[string]any)["skip_initial_status"] = false }
		allowed = []string{"pluginConfig.skip_initial_status"}
	}
	config := m.adapt(t, dir, bin, args, edit, allowed...)
	timeout, err := time.ParseDuration(m.Rules[0].Timeout)
	if err != nil {
		t.Fatalf("rule timeout %q: %v", m.Rules[0].Timeout, err)
	}
	api := newFakeAPIServer(t, nodeName)
	t.Cleanup(func() {
		// NPD leaves a plugin it is stopped in the middle of running.
		for _, pid := range procsOf(bin) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	npd := startNPD(t, api, dir, config)

	w := watchPlugin(t, api, bin, 2*timeout+5*time.Second, !skipInitial)
	npd.stop(t)

	if w.firstPublished.IsZero() {
		t.Fatal("no RDMAProblem condition was published")
	}
	t.Logf("first RDMAProblem after %v: %s, reason %s, message %q", w.firstPublished.Sub(npd.started).Round(time.Millisecond),
		w.first.Status, w.first.Reason, w.first.Message)
	if !skipInitial {
		// The hung plugin can only yield Unknown: a False is NPD's own
		// initial status, published before any run ended.
		if !publishedStatus(api, corev1.ConditionFalse, m.Conds[0].Message) {
			t.Errorf("control: without skip_initial_status NPD published no False %q; the shipped run proves nothing", m.Conds[0].Message)
		}
		return
	}
	// NPD v1.36.0 runs the plugin with exec.CommandContext and also kills
	// its process group from a timer of its own: when the context's kill
	// wins that race, NPD never notes the timeout and publishes the empty
	// output as the message.
	if w.first.Status != corev1.ConditionUnknown ||
		(w.first.Message != "" && !strings.HasPrefix(w.first.Message, "Timeout when running plugin ")) {
		t.Errorf("hung plugin: RDMAProblem %s %q, want Unknown with NPD's timeout message (or none)", w.first.Status, w.first.Message)
	}
	if w.first.Message != "" {
		checkMessage(t, w.first.Message)
	}
	if waited := w.firstPublished.Sub(npd.started); waited < timeout {
		t.Errorf("RDMAProblem published after %v, before the first run's %v timeout", waited, timeout)
	}
	assertNothingBefore(t, api, corev1.ConditionUnknown)
	assertKilledInTime(t, w.seen, w.gone, w.end, timeout)
}

// pluginWatch is what watchPlugin saw: when each rdmadoctor process
// appeared and vanished, and the first RDMAProblem published.
type pluginWatch struct {
	seen, gone     map[int]time.Time
	firstPublished time.Time
	first          corev1.NodeCondition
	end            time.Time
}

// watchPlugin polls /proc and the fake API server for d (or, with
// untilPublished, until the first RDMAProblem), failing the test if two
// rdmadoctor processes ever run at once (the rule's concurrency is 1).
func watchPlugin(t *testing.T, api *fakeAPIServer, bin string, d time.Duration, untilPublished bool) pluginWatch {
	t.Helper()
	w := pluginWatch{seen: map[int]time.Time{}, gone: map[int]time.Time{}}
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		now := time.Now()
		alive := map[int]bool{}
		for _, pid := range procsOf(bin) {
			alive[pid] = true
			if _, ok := w.seen[pid]; !ok {
				w.seen[pid] = now
			}
		}
		for pid := range w.seen {
			if _, ok := w.gone[pid]; !ok && !alive[pid] {
				w.gone[pid] = now
			}
		}
		if len(alive) > 1 {
			t.Errorf("%d rdmadoctor processes alive at once: %v", len(alive), alive)
		}
		if c, ok := api.condition(rdmaProblem); ok && w.firstPublished.IsZero() {
			w.firstPublished, w.first = now, c
			if untilPublished {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.end = time.Now()
	return w
}

// killSlack is how long after its timeout a killed plugin may still be
// seen: NPD's timer, the kill and the reaping, on a busy 2-core machine.
const killSlack = 2 * time.Second

// publishedStatus reports whether any status PATCH carried RDMAProblem
// with this status and message.
func publishedStatus(api *fakeAPIServer, status corev1.ConditionStatus, msg string) bool {
	_, patches, _, _ := api.snapshot()
	for _, p := range patches {
		for _, c := range p.Status.Conditions {
			if c.Type == rdmaProblem && c.Status == status && c.Message == msg {
				return true
			}
		}
	}
	return false
}

// assertKilledInTime checks that every rdmadoctor process NPD started was
// gone within the rule's timeout and killSlack of appearing; at least the
// two runs the test watched must have been seen.
func assertKilledInTime(t *testing.T, seen, gone map[int]time.Time, watchEnd time.Time, timeout time.Duration) {
	t.Helper()
	if len(seen) < 2 {
		t.Errorf("saw %d rdmadoctor processes, want the plugin's two runs at least", len(seen))
	}
	for pid, at := range seen {
		end, ok := gone[pid]
		if !ok {
			// The run in progress when the watch ended: still young?
			if age := watchEnd.Sub(at); age > timeout+killSlack {
				t.Errorf("rdmadoctor pid %d still alive %v after it started, past NPD's %v timeout", pid, age, timeout)
			}
			continue
		}
		if lived := end.Sub(at); lived > timeout+killSlack {
			t.Errorf("rdmadoctor pid %d lived %v, past NPD's %v timeout", pid, lived, timeout)
		}
	}
}
