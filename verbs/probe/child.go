package probe

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmadoctor/rdmadoctor/verbs/gpu"
)

// ChildArg is os.Args[1] of a probe child: the command's main must hand
// os.Args[2:] to ChildMain when it sees it.
const ChildArg = "__verbs-child"

// Child modes (os.Args[2]).
const (
	modeEnumerate = "enumerate"
	modeProbe     = "probe"
)

// resultFD is the descriptor a child writes its events to: the parent
// passes a pipe there, so whatever the library prints on stdout or stderr
// cannot corrupt the results.
const resultFD = 3

// request is what the parent sends on the child's stdin.
type request struct {
	Library           string   `json:"library"`
	Device            string   `json:"device,omitempty"`
	Ports             []int    `json:"ports,omitempty"`
	Size              int      `json:"size,omitempty"`
	Iterations        int      `json:"iterations,omitempty"`
	IterationBudgetNS int64    `json:"iteration_budget_ns,omitempty"`
	PortTimeoutNS     int64    `json:"port_timeout_ns,omitempty"`
	Probes            []string `json:"probes,omitempty"`
	SysfsRoot         string   `json:"sysfs_root,omitempty"`
	NoRC              string   `json:"no_rc,omitempty"`
	NoUD              string   `json:"no_ud,omitempty"`
	CUDALibrary       string   `json:"cuda_library,omitempty"`
	HIPLibrary        string   `json:"hip_library,omitempty"`
	HSALibrary        string   `json:"hsa_library,omitempty"`
	// Peer is a peer session's request (modes peer-serve and peer-test).
	Peer *PeerRequest `json:"peer,omitempty"`
}

// event is one line of the child's output (JSON lines on resultFD).
type event struct {
	Kind  string `json:"kind"` // "begin", "result", "enumeration", "done", "fatal"
	Port  int    `json:"port,omitempty"`
	Probe string `json:"probe,omitempty"`
	Step  string `json:"step,omitempty"`
	// Result is the probe's result (kind "result") or the Enumeration.
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"` // kind "fatal"
}

// emitter writes events; it is shared by the probes of one child.
type emitter struct {
	mu  sync.Mutex
	w   *bufio.Writer
	err error
}

func (e *emitter) emit(ev event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return
	}
	b, err := json.Marshal(ev)
	if err != nil {
		b, _ = json.Marshal(event{Kind: "fatal", Error: "encode result: " + err.Error()})
	}
	b = append(b, '\n')
	if _, err := e.w.Write(b); err != nil {
		e.err = err
		return
	}
	// Flush every line: if the child dies in the next verb, the parent
	// still knows how far it got.
	e.err = e.w.Flush()
}

// ChildMain is the probe child's entry point. args are the arguments after
// ChildArg: the mode. The request comes on stdin, the events go to fd 3
// (stdout when fd 3 is not open, for running a child by hand). It returns
// the process exit status.
func ChildMain(args []string) int {
	// One OS thread for every verb: errno is read on the thread that made
	// the call, and providers may keep thread-local state.
	runtime.LockOSThread()
	// Two Ps at least, even on one CPU: with a single P the runtime's
	// monitor finds no idle P and takes the one away from a verb call it
	// sees in flight (a cgo call), and the locked thread must win it back
	// on return. On a 1-vCPU guest those thread switches doubled the peer
	// round trip (median 2.99 ms against 1.44 ms with two, same pair).
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}

	var out io.Writer = os.Stdout
	if _, err := unix.FcntlInt(resultFD, unix.F_GETFD, 0); err == nil {
		out = os.NewFile(resultFD, "results")
	}
	em := &emitter{w: bufio.NewWriter(out)}
	if len(args) < 1 {
		em.emit(event{Kind: "fatal", Error: "probe child: no mode given"})
		return 2
	}
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		em.emit(event{Kind: "fatal", Error: "probe child: read request: " + err.Error()})
		return 2
	}
	switch args[0] {
	case modeEnumerate:
		en := enumerate(em, req.Library)
		b, _ := json.Marshal(en)
		em.emit(event{Kind: "enumeration", Result: b})
	case modeProbe:
		if req.Device == "" {
			em.emit(event{Kind: "fatal", Error: "probe child: no device in the request"})
			return 2
		}
		runProbes(em, req)
	case modePeerServe, modePeerTest:
		if err := runPeerChild(em, args[0], req); err != nil {
			em.emit(event{Kind: "fatal", Error: args[0] + ": " + err.Error()})
			em.emit(event{Kind: "done"})
			return 3
		}
	default:
		em.emit(event{Kind: "fatal", Error: fmt.Sprintf("probe child: unknown mode %q", args[0])})
		return 2
	}
	em.emit(event{Kind: "done"})
	if em.err != nil {
		fmt.Fprintln(os.Stderr, "probe child: write results:", em.err)
		return 1
	}
	return 0
}

func (r request) options() Options {
	return Options{
		Library:         r.Library,
		Timeout:         time.Duration(r.PortTimeoutNS),
		Size:            r.Size,
		Iterations:      r.Iterations,
		IterationBudget: time.Duration(r.IterationBudgetNS),
		Probes:          r.Probes,
		SysfsRoot:       r.SysfsRoot,
		GPULibraries:    gpu.Libraries{CUDA: r.CUDALibrary, HIP: r.HIPLibrary, HSA: r.HSALibrary},
	}.withDefaults()
}
