package probe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Enumerate runs ibv_get_device_list of the library at libPath ("" = the
// loader's libibverbs.so.1) in a child process (exe re-executed with
// ChildArg) and returns what it saw. The error is non-nil only when the
// child gave no answer: it could not start, crashed (the error names the
// signal), overran timeout, or was interrupted (SIGINT or SIGTERM reaching
// this process is passed on to the child); a library that cannot be loaded
// or lists nothing is an answer, not an error.
func Enumerate(ctx context.Context, exe, libPath string, timeout time.Duration) (*Enumeration, error) {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	// The child leads its own process group, so a Ctrl-C at the terminal
	// does not reach it: pass SIGINT and SIGTERM on.
	runCtx, stop := forwardSignals(ctx)
	var en *Enumeration
	var decodeErr error
	out := runChild(runCtx, exe, modeEnumerate, request{Library: libPath}, timeout, func(ev event) {
		if ev.Kind == "enumeration" {
			en = &Enumeration{}
			if err := json.Unmarshal(ev.Result, en); err != nil {
				decodeErr = fmt.Errorf("decode the child's enumeration: %w", err)
				en = nil
			}
		}
	})
	stop()
	if en != nil {
		en.Warnings = libraryWarnings(out.stderr)
	}
	if out.failure != nil {
		return en, errors.New(out.failure.Error)
	}
	if decodeErr != nil {
		return nil, decodeErr
	}
	if en == nil {
		return nil, errors.New("the verbs child ended without an answer" + stderrHint(out.stderr))
	}
	return en, nil
}

// Run probes every target in its own child process, all in parallel, and
// waits for them. A child that overruns opts.Timeout × its ports (plus
// startupMargin for its start) is killed (its whole process group); one that crashes is reported with the
// signal; SIGINT and SIGTERM received during the run are passed on to the
// children and recorded in Results.Interrupted. Cancelling ctx ends the
// children too. No child outlives Run.
func Run(ctx context.Context, exe string, targets []Target, opts Options) *Results {
	opts = opts.withDefaults()
	t0 := time.Now()
	res := &Results{Devices: map[string]*DeviceResult{}}

	runCtx, stop := forwardSignals(ctx)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Add(1)
		go func(t Target) {
			defer wg.Done()
			dr := probeDevice(runCtx, exe, t, opts)
			mu.Lock()
			res.Devices[t.Device] = dr
			mu.Unlock()
		}(t)
	}
	wg.Wait()
	if got := stop(); got != 0 {
		res.Interrupted = signalName(got)
	}
	res.Millis = millis(time.Since(t0))
	return res
}

// forwardSignals watches for SIGINT and SIGTERM while children run: the
// context it returns ends with the signal as its cause, and runChild
// passes that same signal on to its child. stop ends the watch and returns
// the signal that came, 0 if none.
func forwardSignals(ctx context.Context) (_ context.Context, stop func() syscall.Signal) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	runCtx, cancel := context.WithCancelCause(ctx)
	var got syscall.Signal
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		select {
		case s := <-sigs:
			got = s.(syscall.Signal)
			cancel(interrupted{got})
		case <-runCtx.Done():
		}
	}()
	return runCtx, func() syscall.Signal {
		signal.Stop(sigs)
		cancel(nil)
		<-watcherDone
		if got == 0 {
			select {
			case s := <-sigs: // came as the children ended
				got = s.(syscall.Signal)
			default:
			}
		}
		return got
	}
}

// interrupted is the cancel cause of a run ended by a signal, which is
// passed on to the children as that same signal.
type interrupted struct{ sig syscall.Signal }

func (i interrupted) Error() string { return "interrupted by " + signalName(i.sig) }

func probeDevice(ctx context.Context, exe string, t Target, opts Options) *DeviceResult {
	t0 := time.Now()
	ports := t.Ports
	if len(ports) == 0 {
		ports = []int{1}
	}
	dr := &DeviceResult{Device: t.Device}
	byPort := map[int]*PortResult{}
	for _, p := range ports {
		dr.Ports = append(dr.Ports, PortResult{Port: p})
	}
	for i := range dr.Ports {
		byPort[dr.Ports[i].Port] = &dr.Ports[i]
	}
	req := request{
		Library: opts.Library, Device: t.Device, Ports: ports, Size: opts.Size,
		Iterations: opts.Iterations, IterationBudgetNS: int64(opts.IterationBudget),
		PortTimeoutNS: int64(opts.Timeout), Probes: opts.Probes, SysfsRoot: opts.SysfsRoot, NoRC: t.NoRC, NoUD: t.NoUD,
		CUDALibrary: opts.GPULibraries.CUDA, HIPLibrary: opts.GPULibraries.HIP, HSALibrary: opts.GPULibraries.HSA,
	}
	var decodeErrs []string
	out := runChild(ctx, exe, modeProbe, req, opts.Timeout*time.Duration(len(ports))+startupMargin, func(ev event) {
		if ev.Kind != "result" {
			return
		}
		pr := byPort[ev.Port]
		if pr == nil {
			decodeErrs = append(decodeErrs, fmt.Sprintf("result for unknown port %d", ev.Port))
			return
		}
		if err := decodeProbe(pr, ev.Probe, ev.Result); err != nil {
			decodeErrs = append(decodeErrs, err.Error())
		}
	})
	dr.Failure = out.failure
	dr.Stderr = out.stderr
	if dr.Failure == nil && len(decodeErrs) > 0 {
		dr.Failure = &ChildFailure{Error: "the verbs child sent unreadable results: " + strings.Join(decodeErrs, "; ")}
	}
	dr.Millis = millis(time.Since(t0))
	return dr
}

// childOutcome is how a child ended.
type childOutcome struct {
	failure *ChildFailure // nil when it finished ("done")
	stderr  string
}

// stderrKeep bounds how much of a child's stderr/stdout is kept.
const stderrKeep = 8 << 10

// startupMargin is added to a probe child's deadline for what happens
// before its first probe: exec, the Go runtime, dlopen and every
// provider's initialisation in ibv_get_device_list. The per-port deadline
// the child keeps itself covers the probes alone.
const startupMargin = 2 * time.Second

// termGrace is how long a child gets to die of a forwarded SIGINT/SIGTERM
// before it is killed.
const termGrace = 500 * time.Millisecond

// runChild runs exe ChildArg mode with req on stdin and calls onEvent for
// every event line it writes on fd 3, until it exits, overruns timeout, or
// ctx ends. extra are passed on as fd 4 onward (a peer session's socket).
// The child leads its own process group, which is killed when it
// ends, so nothing it started survives.
func runChild(ctx context.Context, exe, mode string, req request, timeout time.Duration, onEvent func(event), extra ...*os.File) childOutcome {
	t0 := time.Now()
	reqJSON, err := json.Marshal(req)
	if err != nil {
		return childOutcome{failure: &ChildFailure{Error: "encode the child's request: " + err.Error()}}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return childOutcome{failure: &ChildFailure{Error: "create the result pipe: " + err.Error()}}
	}
	defer pr.Close()
	tail := &tailBuffer{max: stderrKeep}
	cmd := exec.Command(exe, ChildArg, mode)
	cmd.Stdin = bytes.NewReader(reqJSON)
	cmd.Stdout = tail
	cmd.Stderr = tail
	cmd.ExtraFiles = append([]*os.File{pw}, extra...) // fd 3 in the child, then the extra files
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		pw.Close()
		return childOutcome{failure: &ChildFailure{Error: "start the verbs child: " + err.Error()}}
	}
	pw.Close()
	pgid := cmd.Process.Pid

	var events eventStream
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		events.read(pr, onEvent)
	}()
	end := waitChild(ctx, cmd, pgid, timeout)
	// Whatever the child left in its group goes with it.
	killGroup(pgid, syscall.SIGKILL)
	select {
	case <-readDone:
	case <-time.After(time.Second):
		pr.Close() // a descendant outside the group holds the pipe open
		<-readDone
	}
	// events is the reader's no more: readDone is closed.
	stderr := tail.String()
	return childOutcome{stderr: stderr, failure: end.failure(&events, stderr, timeout, time.Since(t0).Round(time.Millisecond))}
}

// eventStream is what the parent keeps of a child's event lines as they
// come: where the child is (the last "begin" without a result is where it
// was when it stopped), whether it said it was done, its fatal error, and
// the error that cut the stream short.
type eventStream struct {
	inProgress string
	done       bool
	fatal      string
	err        error
}

// read passes each event line of r to onEvent, keeping track, until r
// ends.
func (es *eventStream) read(r io.Reader, onEvent func(event)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue
		}
		es.note(ev)
		onEvent(ev)
	}
	if err := sc.Err(); err != nil {
		// A line too long to read ends the scan; keep reading what
		// follows so that the child is never blocked writing into a
		// full pipe (and killed as if it hung).
		es.err = err
		_, _ = io.Copy(io.Discard, r)
	}
}

func (es *eventStream) note(ev event) {
	switch ev.Kind {
	case "begin":
		es.inProgress = ev.Step
		if ev.Probe != "" {
			es.inProgress = ev.Probe + ": " + ev.Step
		}
		if ev.Port != 0 {
			es.inProgress = fmt.Sprintf("port %d %s", ev.Port, es.inProgress)
		}
	case "result", "enumeration":
		es.inProgress = ""
	case "done":
		es.done = true
	case "fatal":
		es.fatal = ev.Error
	}
}

// childEnd is how the wait for a child ended.
type childEnd struct {
	err       error          // cmd.Wait's
	timedOut  bool           // killed at its deadline
	forwarded syscall.Signal // passed on when ctx ended; 0 when it did not
}

// waitChild waits for cmd until it exits, overruns timeout (its group is
// killed), or ctx ends (the signal that ended it, SIGTERM by default, is
// passed on to the group, and SIGKILL follows after termGrace).
func waitChild(ctx context.Context, cmd *exec.Cmd, pgid int, timeout time.Duration) childEnd {
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-waitErr:
		return childEnd{err: err}
	case <-timer.C:
		killGroup(pgid, syscall.SIGKILL)
		return childEnd{err: <-waitErr, timedOut: true}
	case <-ctx.Done():
		end := childEnd{forwarded: syscall.SIGTERM}
		var in interrupted
		if errors.As(context.Cause(ctx), &in) {
			end.forwarded = in.sig
		}
		killGroup(pgid, end.forwarded)
		select {
		case end.err = <-waitErr:
		case <-time.After(termGrace):
			killGroup(pgid, syscall.SIGKILL)
			end.err = <-waitErr
		}
		return end
	}
}

// failure says why the child did not finish; nil when it did (exit 0
// after "done", nothing lost on the way).
func (e childEnd) failure(es *eventStream, stderr string, timeout, elapsed time.Duration) *ChildFailure {
	where := ""
	if es.inProgress != "" {
		where = " in " + es.inProgress
	}
	f := &ChildFailure{InProgress: es.inProgress}
	var ee *exec.ExitError
	var ws syscall.WaitStatus
	if errors.As(e.err, &ee) {
		ws, _ = ee.Sys().(syscall.WaitStatus)
	}
	switch {
	case e.timedOut:
		f.TimedOut = true
		f.Signal = "SIGKILL"
		f.Error = fmt.Sprintf("the verbs child did not finish within %v%s; it was killed", timeout, where)
	case e.forwarded != 0:
		f.Signal = signalName(e.forwarded)
		f.Error = fmt.Sprintf("interrupted by %s after %v%s", f.Signal, elapsed, where)
	case e.err != nil && ws.Signaled():
		f.Signal = signalName(ws.Signal())
		f.Error = fmt.Sprintf("the verbs child was killed by %s%s", f.Signal, where)
	case e.err != nil && ee != nil:
		f.ExitCode = ws.ExitStatus()
		if sig := crashSignal(stderr); sig != "" {
			// The Go runtime turns a fault in C code into exit status 2
			// with "[signal SIGSEGV: ...]" on stderr.
			f.Signal = sig
			f.Error = fmt.Sprintf("the verbs child crashed with %s%s", sig, where)
		} else if es.fatal != "" {
			f.Error = "the verbs child failed: " + es.fatal
		} else {
			f.Error = fmt.Sprintf("the verbs child exited with status %d%s%s", f.ExitCode, where, stderrHint(stderr))
		}
	case e.err != nil:
		f.Error = "the verbs child: " + e.err.Error()
	case es.err != nil:
		f.Error = fmt.Sprintf("the verbs child's results could not be read: %v; what it wrote after that was lost", es.err)
	case es.fatal != "":
		f.Error = "the verbs child failed: " + es.fatal
	case !es.done:
		f.Error = "the verbs child ended without finishing" + where + stderrHint(stderr)
	default:
		return nil
	}
	return f
}

func killGroup(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
}

func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}

// A Go program does not die of a fault in C code: its runtime catches the
// signal, prints "[signal SIGSEGV: segmentation violation ...]" (or
// "SIGABRT: abort" for signals it does not handle otherwise) and exits
// with status 2.
var (
	crashFaultRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\[signal (SIG[A-Z0-9]+)`) })
	crashSignalRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^(SIG[A-Z0-9]+): `) })
)

// crashSignal finds the signal in a Go runtime crash report.
func crashSignal(stderr string) string {
	if m := crashFaultRE().FindStringSubmatch(stderr); m != nil {
		return m[1]
	}
	if m := crashSignalRE().FindStringSubmatch(stderr); m != nil {
		return m[1]
	}
	return ""
}

// stderrHint is the last non-empty line of the child's stderr, as a
// suffix for an error message.
func stderrHint(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return ": " + l
		}
	}
	return ""
}

// libraryWarnings are the lines libibverbs and its providers printed.
func libraryWarnings(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// tailBuffer keeps the first head bytes written to it (where a Go crash
// report names the signal) and the last max bytes (where a library's
// last words are).
type tailBuffer struct {
	mu      sync.Mutex
	head    []byte
	buf     []byte
	max     int
	dropped bool
}

const headKeep = 2 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if room := headKeep - len(t.head); room > 0 {
		k := min(room, len(p))
		t.head = append(t.head, p[:k]...)
		p = p[k:]
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.dropped = true
	}
	return n, nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped {
		return string(t.head) + "\n…\n" + string(t.buf)
	}
	return string(t.head) + string(t.buf)
}
