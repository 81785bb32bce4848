package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ebitengine/purego"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe/fakeverbs"
)

// The test binary is its own probe child: run with ChildArg it behaves as
// PROBE_TEST_CHILD says (hang, crash, print noise...) or, by default, as the
// real ChildMain.
const behaviourEnv = "PROBE_TEST_CHILD"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ChildArg {
		os.Exit(fakeChild(os.Args[2:]))
	}
	code := m.Run()
	fakeverbs.Cleanup()
	os.Exit(code)
}

func fakeChild(args []string) int {
	b := os.Getenv(behaviourEnv)
	if b == "" {
		return ChildMain(args)
	}
	out := os.NewFile(resultFD, "results")
	emit := func(ev event) {
		line, _ := json.Marshal(ev)
		out.Write(append(line, '\n'))
	}
	var req request
	json.NewDecoder(os.Stdin).Decode(&req)
	emit(event{Kind: "begin", Port: 1, Probe: Resources, Step: "ibv_create_qp RC"})
	switch b {
	case "hang":
		select {}
	case "segv":
		// A fault inside C code, the way a provider crashes.
		purego.SyscallN(8)
	case "sigkill":
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	case "ignore-term":
		// Die only of SIGKILL.
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		select {}
	case "grandchild":
		// Start a sleeper in the same process group, record its pid, hang.
		cmd := exec.Command("sleep", "1000")
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		os.WriteFile(os.Getenv("PROBE_TEST_PIDFILE"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
		select {}
	case "noise", "slow":
		if b == "slow" {
			time.Sleep(300 * time.Millisecond)
		}
		fmt.Println("provider chatter on stdout")
		fmt.Fprintln(os.Stderr, "libibverbs: Warning: chatter on stderr")
		res := &ResourcesResult{Probe: newProbe(Resources), CQEGranted: 31}
		res.Steps = append(res.Steps, Step{Name: "ibv_open_device", OK: true})
		raw, _ := json.Marshal(res)
		emit(event{Kind: "result", Port: 1, Probe: Resources, Result: raw})
		emit(event{Kind: "done"})
		return 0
	case "long-line":
		// A line past the reader's limit, then a proper answer.
		line := append([]byte(`{"kind":"begin","step":"`), bytes.Repeat([]byte("x"), 17<<20)...)
		out.Write(append(line, "\"}\n"...))
		emit(event{Kind: "done"})
		return 0
	case "slow-start":
		// Start-up (exec, dlopen, providers) that takes longer than one
		// port's deadline, then a quick answer.
		time.Sleep(time.Duration(req.PortTimeoutNS) + 500*time.Millisecond)
		emit(event{Kind: "done"})
		return 0
	case "no-done":
		return 0
	case "exit3":
		fmt.Fprintln(os.Stderr, "something broke")
		return 3
	}
	return 0
}

func testExe(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func runFake(t *testing.T, behaviour string, opts Options, targets ...Target) *Results {
	t.Helper()
	t.Setenv(behaviourEnv, behaviour)
	if len(targets) == 0 {
		targets = []Target{{Device: "fake0", Ports: []int{1}}}
	}
	return Run(context.Background(), testExe(t), targets, opts)
}

func TestRunTimeoutKillsAndNamesTheStep(t *testing.T) {
	t0 := time.Now()
	res := runFake(t, "hang", Options{Timeout: 300 * time.Millisecond})
	if d := time.Since(t0); d > 300*time.Millisecond+startupMargin+2*time.Second {
		t.Fatalf("Run took %v for a 300ms deadline", d)
	}
	f := res.Devices["fake0"].Failure
	if f == nil || !f.TimedOut {
		t.Fatalf("failure %+v, want a timeout", f)
	}
	if f.InProgress != "port 1 verbs.resources: ibv_create_qp RC" || !strings.Contains(f.Error, "ibv_create_qp RC") {
		t.Fatalf("failure does not name the step: %+v", f)
	}
}

func TestRunCrashInCNamesTheSignal(t *testing.T) {
	res := runFake(t, "segv", Options{Timeout: 5 * time.Second})
	f := res.Devices["fake0"].Failure
	if f == nil || f.Signal != "SIGSEGV" || !strings.Contains(f.Error, "crashed with SIGSEGV") {
		t.Fatalf("failure %+v, want a SIGSEGV crash", f)
	}
	if !strings.Contains(f.Error, "ibv_create_qp") {
		t.Fatalf("crash does not name the step: %s", f.Error)
	}
}

func TestRunKilledBySignal(t *testing.T) {
	res := runFake(t, "sigkill", Options{Timeout: 5 * time.Second})
	f := res.Devices["fake0"].Failure
	if f == nil || f.Signal != "SIGKILL" || f.TimedOut || !strings.Contains(f.Error, "killed by SIGKILL") {
		t.Fatalf("failure %+v, want killed by SIGKILL", f)
	}
}

func TestRunOutputNoiseDoesNotCorruptResults(t *testing.T) {
	res := runFake(t, "noise", Options{Timeout: 5 * time.Second})
	d := res.Devices["fake0"]
	if d.Failure != nil {
		t.Fatalf("failure %+v", d.Failure)
	}
	pr := d.Port(1)
	if pr == nil || pr.Resources == nil || pr.Resources.CQEGranted != 31 || !pr.Resources.OK() {
		t.Fatalf("port result %+v", pr)
	}
	if !strings.Contains(d.Stderr, "chatter on stdout") || !strings.Contains(d.Stderr, "chatter on stderr") {
		t.Fatalf("stderr tail %q", d.Stderr)
	}
}

func TestRunChildWithoutResult(t *testing.T) {
	for behaviour, want := range map[string]string{
		"no-done": "ended without finishing",
		"exit3":   "exited with status 3",
	} {
		res := runFake(t, behaviour, Options{Timeout: 5 * time.Second})
		f := res.Devices["fake0"].Failure
		if f == nil || !strings.Contains(f.Error, want) {
			t.Errorf("%s: failure %+v, want %q", behaviour, f, want)
		}
	}
}

func TestRunDevicesInParallel(t *testing.T) {
	t0 := time.Now()
	res := runFake(t, "slow", Options{Timeout: 10 * time.Second},
		Target{Device: "a", Ports: []int{1}}, Target{Device: "b", Ports: []int{1}}, Target{Device: "c", Ports: []int{1}})
	total := time.Since(t0)
	var sum time.Duration
	for _, n := range []string{"a", "b", "c"} {
		d := res.Devices[n]
		if d == nil || d.Failure != nil {
			t.Fatalf("device %s: %+v", n, d)
		}
		sum += time.Duration(d.Millis * float64(time.Millisecond))
	}
	// In series the run would take the sum of the children's times.
	if total > sum*3/4 {
		t.Fatalf("three children took %v in all, %v summed: not parallel", total, sum)
	}
}

func TestRunCancelEndsStubbornChild(t *testing.T) {
	t.Setenv(behaviourEnv, "ignore-term")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	t0 := time.Now()
	res := Run(ctx, testExe(t), []Target{{Device: "fake0", Ports: []int{1}}}, Options{Timeout: 10 * time.Second})
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("cancel took %v to end the child", d)
	}
	f := res.Devices["fake0"].Failure
	if f == nil || !strings.Contains(f.Error, "interrupted by SIGTERM") {
		t.Fatalf("failure %+v", f)
	}
}

func TestRunLeavesNoGrandchild(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pid")
	t.Setenv("PROBE_TEST_PIDFILE", pidfile)
	runFake(t, "grandchild", Options{Timeout: 500 * time.Millisecond})
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatalf("the child did not record its grandchild: %v", err)
	}
	pid, _ := strconv.Atoi(string(b))
	deadline := time.Now().Add(2 * time.Second)
	for {
		if !alive(pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still runs after Run returned", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie waiting for its reaper is dead).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestRunForwardsSIGINT(t *testing.T) {
	t.Setenv(behaviourEnv, "hang")
	done := make(chan *Results)
	go func() {
		done <- Run(context.Background(), testExe(t), []Target{{Device: "fake0", Ports: []int{1}}}, Options{Timeout: 10 * time.Second})
	}()
	// Run registers for SIGINT before it starts the children; give it
	// time to start one.
	time.Sleep(300 * time.Millisecond)
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	select {
	case res := <-done:
		if res.Interrupted != "SIGINT" {
			t.Fatalf("Interrupted = %q", res.Interrupted)
		}
		f := res.Devices["fake0"].Failure
		if f == nil || f.Signal != "SIGINT" {
			t.Fatalf("failure %+v", f)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after SIGINT")
	}
}

func TestRunBadExecutable(t *testing.T) {
	res := Run(context.Background(), filepath.Join(t.TempDir(), "missing"), []Target{{Device: "x"}}, Options{})
	f := res.Devices["x"].Failure
	if f == nil || !strings.Contains(f.Error, "start the verbs child") {
		t.Fatalf("failure %+v", f)
	}
}

func TestCrashSignal(t *testing.T) {
	for in, want := range map[string]string{
		"fatal error: unexpected signal during runtime execution\n[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x7f]": "SIGSEGV",
		"SIGSEGV: segmentation violation\nPC=0x7f0b57cde2ed m=0 sigcode=1 addr=0x0":                                                   "SIGSEGV",
		"SIGABRT: abort\nPC=0x46": "SIGABRT",
		"panic: boom":             "",
		"":                        "",
	} {
		if got := crashSignal(in); got != want {
			t.Errorf("crashSignal(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTailBufferKeepsHeadAndTail(t *testing.T) {
	tb := &tailBuffer{max: 16}
	tb.Write([]byte("SIGSEGV: head\n"))
	for i := 0; i < 1000; i++ {
		tb.Write([]byte(strings.Repeat("x", 10)))
	}
	tb.Write([]byte("last words"))
	s := tb.String()
	if !strings.HasPrefix(s, "SIGSEGV: head") || !strings.HasSuffix(s, "last words") || len(s) > headKeep+32 {
		t.Fatalf("tail buffer kept %d bytes: %.60q…%.30q", len(s), s, s[len(s)-30:])
	}
}

func TestEnumerateWithoutLibrary(t *testing.T) {
	t.Setenv(behaviourEnv, "")
	path := filepath.Join(t.TempDir(), "libibverbs.so.1")
	en, err := Enumerate(context.Background(), testExe(t), path, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(en.LoadError, "No such file or directory") || len(en.Devices) != 0 {
		t.Fatalf("enumeration %+v", en)
	}
}

func TestEnumerateWrongLibrary(t *testing.T) {
	t.Setenv(behaviourEnv, "")
	en, err := Enumerate(context.Background(), testExe(t), "libc.so.6", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(en.MissingSymbols) == 0 || en.MissingSymbols[0] != "ibv_get_device_list" {
		t.Fatalf("missing symbols %v", en.MissingSymbols)
	}
}

func TestEnumerateChildTimeout(t *testing.T) {
	t.Setenv(behaviourEnv, "hang")
	_, err := Enumerate(context.Background(), testExe(t), "", 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not finish within 300ms") {
		t.Fatalf("err %v", err)
	}
}

// A result line too long to read must not leave the child blocked on a
// full pipe until it is killed as if it hung.
func TestRunOverlongLineIsNotATimeout(t *testing.T) {
	t0 := time.Now()
	res := runFake(t, "long-line", Options{Timeout: 3 * time.Second})
	f := res.Devices["fake0"].Failure
	if f == nil || f.TimedOut || !strings.Contains(f.Error, "could not be read") || !strings.Contains(f.Error, "too long") {
		t.Fatalf("failure %+v", f)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
}

// The child's deadline leaves room for its start-up on top of the
// per-port probe time.
func TestRunDeadlineAllowsStartup(t *testing.T) {
	res := runFake(t, "slow-start", Options{Timeout: 300 * time.Millisecond})
	if f := res.Devices["fake0"].Failure; f != nil {
		t.Fatalf("a child that started slowly was cut: %+v", f)
	}
}

// The enumeration child leads its own process group too: SIGINT reaching
// the parent is passed on to it.
func TestEnumerateForwardsSIGINT(t *testing.T) {
	// Keep SIGINT from ending the test binary whatever Enumerate does.
	own := make(chan os.Signal, 1)
	signal.Notify(own, syscall.SIGINT)
	defer signal.Stop(own)
	t.Setenv(behaviourEnv, "hang")
	type answer struct {
		en  *Enumeration
		err error
	}
	done := make(chan answer)
	go func() {
		en, err := Enumerate(context.Background(), testExe(t), "", 10*time.Second)
		done <- answer{en, err}
	}()
	time.Sleep(300 * time.Millisecond)
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	select {
	case a := <-done:
		if a.err == nil || !strings.Contains(a.err.Error(), "interrupted by SIGINT") {
			t.Fatalf("Enumerate = %+v, %v", a.en, a.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Enumerate did not return after SIGINT")
	}
}
