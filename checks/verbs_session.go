package checks

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// VerbsRunner runs libibverbs in child processes: the level-1 device
// enumeration and the level-2 probes. ChildVerbs is the real one; tests
// substitute their own with UseVerbs.
type VerbsRunner interface {
	Enumerate(ctx context.Context) (*probe.Enumeration, error)
	// Probe runs the named probes (probe.AllProbes when nil) on targets.
	Probe(ctx context.Context, targets []probe.Target, probes []string) *probe.Results
}

// ChildVerbs re-executes Executable as the probe child. The command's main
// must hand `<exe> __verbs-child ...` (probe.ChildArg) to probe.ChildMain.
type ChildVerbs struct {
	Executable string
	Library    string        // --libibverbs; "" = the loader's libibverbs.so.1
	Timeout    time.Duration // --probe-timeout, per port
	Size       int           // --probe-size
}

// Enumerate implements VerbsRunner.
func (c ChildVerbs) Enumerate(ctx context.Context) (*probe.Enumeration, error) {
	if c.Executable == "" {
		return nil, fmt.Errorf("internal error: no executable to run the verbs child")
	}
	return probe.Enumerate(ctx, c.Executable, c.Library, c.Timeout)
}

// Probe implements VerbsRunner.
func (c ChildVerbs) Probe(ctx context.Context, targets []probe.Target, probes []string) *probe.Results {
	if c.Executable == "" {
		res := &probe.Results{Devices: map[string]*probe.DeviceResult{}}
		for _, t := range targets {
			res.Devices[t.Device] = &probe.DeviceResult{Device: t.Device,
				Failure: &probe.ChildFailure{Error: "internal error: no executable to run the verbs child"}}
		}
		return res
	}
	return probe.Run(ctx, c.Executable, targets, probe.Options{Library: c.Library, Timeout: c.Timeout, Size: c.Size, Probes: probes})
}

// verbsState is one run's verbs work, done once and shared by the checks
// that judge it.
type verbsState struct {
	mu     sync.Mutex
	runner VerbsRunner

	enumStarted bool
	enumDone    chan struct{}
	enum        *probe.Enumeration
	enumErr     error
	// judged is the enumeration libibverbs.devices judged, in the facts
	// file's form: what a snapshot of this run records.
	judged *sysfs.VerbsEnumeration

	probeStarted bool
	probeDone    chan struct{}
	probes       *probe.Results
	plan         probePlan
	// selected are the probes this run's checks judge (nil: all). A probe
	// no selected check judges is not run at all: --check and --periodic
	// must keep, say, the CQ overrun (which makes mlx5 log "CQ error")
	// off the device, not only out of the report.
	selected []string
}

// selectProbes notes which probes the checks in sel judge.
func (s *verbsState) selectProbes(sel []*Check) {
	isProbe := map[string]bool{}
	for _, p := range probe.AllProbes {
		isProbe[p] = true
	}
	var names []string
	for _, c := range sel {
		if isProbe[c.ID] {
			names = append(names, c.ID)
		}
	}
	s.mu.Lock()
	s.selected = names
	s.mu.Unlock()
}

// verbsOf returns the run's verbs work, kept in its Env.
func verbsOf(env *Env) *verbsState { return &env.verbs }

// UseVerbs makes env's verbs checks use r instead of a ChildVerbs built
// from env.Opts (Executable, Libibverbs, ProbeTimeout, ProbeSize).
func UseVerbs(env *Env, r VerbsRunner) {
	s := verbsOf(env)
	s.mu.Lock()
	s.runner = r
	s.mu.Unlock()
}

func (s *verbsState) runnerFor(env *Env) VerbsRunner {
	if s.runner == nil {
		s.runner = ChildVerbs{Executable: env.Opts.Executable, Library: env.Opts.Libibverbs,
			Timeout: env.Opts.ProbeTimeout, Size: env.Opts.ProbeSize}
	}
	return s.runner
}

// enumeration runs the library's device enumeration once per run. The
// child has its own deadline; ctx only bounds how long this check waits:
// its cancellation does not reach the child.
func (env *Env) verbsEnumeration(ctx context.Context) (*probe.Enumeration, error) {
	s := verbsOf(env)
	s.mu.Lock()
	if !s.enumStarted {
		s.enumStarted = true
		s.enumDone = make(chan struct{})
		r := s.runnerFor(env)
		go func() {
			defer close(s.enumDone)
			// The child must not die with the first caller's context: the
			// result is shared (StartEarly's caller, the check, a
			// snapshot). It is bounded by its own deadline; SIGINT and
			// SIGTERM reach it through probe.Enumerate's forwarding, and
			// Pdeathsig ends it with this process. Cancelling ctx (the
			// run's deadline) ends only this wait, below.
			s.enum, s.enumErr = r.Enumerate(context.WithoutCancel(ctx))
		}()
	}
	done := s.enumDone
	s.mu.Unlock()
	select {
	case <-done:
		return s.enum, s.enumErr
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the verbs child: %w", ctx.Err())
	}
}

// noteJudgedVerbs keeps the enumeration libibverbs.devices judged.
func (env *Env) noteJudgedVerbs(f *sysfs.VerbsEnumeration) {
	s := verbsOf(env)
	s.mu.Lock()
	s.judged = f
	s.mu.Unlock()
}

// JudgedVerbs returns the libibverbs enumeration of this run in the facts
// file's form: the one libibverbs.devices judged, or — when that check did
// not judge one (blocked by a prerequisite) but the enumeration was started
// early — that enumeration, waited for within ctx. A snapshot records it, so
// its replay judges the answer the live run judged, without a second child.
// ok is false when the run made no enumeration (a snapshot root, or the
// check neither ran nor was started).
func JudgedVerbs(ctx context.Context, env *Env) (f *sysfs.VerbsEnumeration, ok bool) {
	s := verbsOf(env)
	s.mu.Lock()
	judged, started := s.judged, s.enumStarted
	s.mu.Unlock()
	switch {
	case judged != nil:
		return judged, true
	case started && env.Host.Live():
		return VerbsFacts(env.verbsEnumeration(ctx)), true
	}
	return nil, false
}

// probePlan is what the level-2 probes run on: every RDMA device with its
// ACTIVE ports, and the ports left out.
type probePlan struct {
	targets  []probe.Target
	software map[string]bool
	skipped  []string // "mlx5_1 port 1: DOWN"
	err      error    // the device list could not be read
}

func planProbes(env *Env) probePlan {
	s := env.Survey()
	p := probePlan{software: map[string]bool{}}
	if s.DevicesErr != nil {
		p.err = s.DevicesErr
		return p
	}
	for _, d := range s.Devices {
		p.software[d.Name] = d.Software || d.PCIAddr == ""
		var ports []int
		for _, pt := range d.Ports {
			if pt.State.Code == 4 {
				ports = append(ports, pt.Num)
			} else {
				p.skipped = append(p.skipped, fmt.Sprintf("%s port %d: %s, not probed", d.Name, pt.Num, pt.State))
			}
		}
		if len(ports) > 0 {
			t := probe.Target{Device: d.Name, Ports: ports}
			if ok, why := rcCapable(d.Driver, d.NodeType); !ok {
				t.NoRC = why
			}
			if ok, why := udCapable(d.Driver, d.NodeType); !ok {
				t.NoUD = why
			}
			p.targets = append(p.targets, t)
		}
	}
	sort.Slice(p.targets, func(i, j int) bool { return p.targets[i].Device < p.targets[j].Device })
	return p
}

// probeResults runs the level-2 probes once per run, on every device in
// parallel, and waits for them.
func (env *Env) probeResults(ctx context.Context) (*probe.Results, probePlan, error) {
	s := verbsOf(env)
	s.mu.Lock()
	if !s.probeStarted {
		s.probeStarted = true
		s.probeDone = make(chan struct{})
		s.plan = planProbes(env)
		r, targets, probes := s.runnerFor(env), s.plan.targets, s.selected
		go func() {
			defer close(s.probeDone)
			// As for the enumeration: the children are shared by every
			// level-2 check, so one check's deadline must not kill them.
			// They are bounded by their own deadline (--probe-timeout per
			// port), SIGINT and SIGTERM reach them through probe.Run's
			// forwarding, and Pdeathsig ends them with this process.
			if len(targets) > 0 {
				s.probes = r.Probe(context.WithoutCancel(ctx), targets, probes)
			}
		}()
	}
	done := s.probeDone
	s.mu.Unlock()
	select {
	case <-done:
		return s.probes, s.plan, nil
	case <-ctx.Done():
		return nil, s.plan, fmt.Errorf("waiting for the verbs probes: %w", ctx.Err())
	}
}

// verdict is one port's judgement by a level-2 check.
// probeJudge judges one port's result of one probe; nil means the child
// sent no result for that probe on that port.
type probeJudge func(label string, software bool, pr *probe.PortResult) (verdict, bool)

// runLevel2 is the frame of every level-2 check: no probes on a snapshot,
// the probes run once, each probed port judged, the verdicts combined
// (the worst wins: fail, error, warn, pass). frame holds the check's own
// findings for the frame's verdicts.
func runLevel2(ctx context.Context, env *Env, name string, frame *level2Frame, judge probeJudge) Result {
	if !env.Host.Live() {
		r := frame.snapshot.result("", nil)
		r.Details = []string{"root: " + env.Host.Root()}
		return r
	}
	res, plan, err := env.probeResults(ctx)
	if plan.err != nil {
		return frame.devicesUnreadable.result("", Slots{"cause": plan.err.Error()})
	}
	if len(plan.targets) == 0 {
		r := frame.noActivePort.result("", nil)
		r.Details = plan.skipped
		return r
	}
	if err != nil {
		cause := err
		if u := errors.Unwrap(err); u != nil {
			cause = u
		}
		return frame.unfinished.result("", Slots{"cause": cause.Error()})
	}
	var (
		verdicts []verdict
		ev       = map[string]any{}
	)
	for _, t := range plan.targets {
		dr := res.Devices[t.Device]
		for _, port := range t.Ports {
			label := fmt.Sprintf("%s port %d", t.Device, port)
			var pr *probe.PortResult
			if dr != nil {
				pr = dr.Port(port)
			}
			v, ok := verdict{}, false
			if pr != nil {
				v, ok = judge(label, plan.software[t.Device], pr)
			}
			if !ok {
				v = frame.childFailure(label, name, dr)
			}
			verdicts = append(verdicts, v)
			if v.evidence != nil {
				ev[fmt.Sprintf("%s/%d", t.Device, port)] = v.evidence
			}
		}
		if dr != nil && dr.Millis > 0 {
			ev[t.Device+"/duration_ms"] = dr.Millis
		}
	}
	r := combine(verdicts)
	if k, ok := probe.LookupKind(name); ok {
		r.Expected = k.Expected
	}
	r.Details = append(r.Details, plan.skipped...)
	r.Evidence = ev
	return r
}

// level2Frame is what runLevel2 itself finds, declared under each level-2
// check's own ID (a check returns only findings it declares): the host
// cannot be probed, or a port's probe brought no result, or the child left
// the probe out.
type level2Frame struct {
	snapshot, devicesUnreadable, noActivePort, unfinished  *Finding
	childSilent, noResult                                  *Finding
	childTimeout, childGPUTimeout, childCrash, childFailed *Finding
	notRunTimeout, notRunGPUTimeout, notRunCrash, notRun   *Finding
	skipped, outOfTime                                     *Finding
}

// The fixes for a child that died: it hung, or the provider crashed it.
const (
	gpuInitTimeoutFix = "The GPU driver did not initialise within --probe-timeout: without the persistence daemon cuInit brings every GPU up " +
		"first, which takes seconds on a node with many GPUs. Run nvidia-persistenced (`systemctl enable --now nvidia-persistenced`) " +
		"or give the probes more time (--probe-timeout); `nvidia-smi` hanging as well means the driver itself is stuck (read `dmesg`)."
	verbTimeoutFix = "A verb did not return within --probe-timeout: the provider or the device hangs. Look at `dmesg` for the driver's errors " +
		"and at the firmware; a larger --probe-timeout tells a slow device from a hung one."
	providerCrashFix = "The provider library crashed the process inside a verb: check that rdma-core (or MLNX_OFED) matches the kernel driver " +
		"and the firmware, and report the crash to the provider's maintainers with `ibv_devinfo -v` output."
)

// level2Frames are the frames of the level-2 checks, by check ID.
var level2Frames = map[string]*level2Frame{}

// declareLevel2Frame declares the frame's findings of level-2 check id.
func declareLevel2Frame(id string) *level2Frame {
	d := func(slug string, st report.Status, when, msg, fix string) *Finding {
		return declare(Finding{ID: id + "/" + slug, Status: st, When: when, Message: msg, Fix: fix})
	}
	const died = "{label}: {error}"
	const notRun = "{label}: not run: {error}"
	f := &level2Frame{
		snapshot: d("snapshot", report.Skip, "the host is a snapshot: the verbs probes run only on the live host",
			"no live device in a snapshot: the verbs probes run only on the host itself", ""),
		devicesUnreadable: d("devices-unreadable", report.Error, "the RDMA devices to probe could not be listed",
			"could not list the RDMA devices to probe: {cause}", ""),
		noActivePort: d("no-active-port", report.Skip, "no port of any RDMA device is ACTIVE: nothing to probe", "no ACTIVE port to probe", ""),
		unfinished: d("unfinished", report.Error, "the check's deadline (or the run's) passed while the probes ran",
			"waiting for the verbs probes: {cause}", ""),
		childSilent: d("child-silent", report.Error, "the verbs child reported nothing for the port's device",
			"{label}: the verbs child reported nothing", ""),
		noResult: d("no-result", report.Error, "the verbs child reported on the port but sent no result of this probe",
			"{label}: the verbs child sent no "+id+" result", ""),
		childGPUTimeout: d("child-gpu-timeout", report.Error, "the verbs child timed out in this probe while opening the GPU driver",
			died, gpuInitTimeoutFix),
		childTimeout: d("child-timeout", report.Error, "the verbs child timed out in this probe: a verb did not return", died, verbTimeoutFix),
		childCrash:   d("child-crash", report.Error, "the verbs child was killed by a signal in this probe: the provider crashed it", died, providerCrashFix),
		childFailed:  d("child-failed", report.Error, "the verbs child failed otherwise in this probe", died, ""),
		notRunGPUTimeout: d("not-run-gpu-timeout", report.Error, "the verbs child timed out opening the GPU driver before it reached this probe",
			notRun, gpuInitTimeoutFix),
		notRunTimeout: d("not-run-timeout", report.Error, "the verbs child timed out in an earlier probe: this one never ran", notRun, verbTimeoutFix),
		notRunCrash: d("not-run-crash", report.Error, "the verbs child was killed by a signal in an earlier probe: this one never ran",
			notRun, providerCrashFix),
		notRun: d("not-run", report.Error, "the verbs child failed otherwise before it reached this probe", notRun, ""),
		skipped: d("skipped", report.Skip, "the child did not run this probe on the port, and says why (the port or the device cannot take it)",
			"{label}: {why}", ""),
		outOfTime: d("out-of-time", report.Error, "the probes before it on the port spent the port's --probe-timeout, so this one was left out",
			"{label}: {why}", outOfTimeFix),
	}
	level2Frames[id] = f
	return f
}

// portUnitOf is the finding unit of a port label: "mlx5_0 port 1" → "mlx5_0/1".
func portUnitOf(label string) string {
	dev, port := labelParts(label)
	return dev + "/" + port
}

// childFailure explains a missing result: the child died (timeout, crash,
// signal) in this probe or before it reached it, or never ran.
func (f *level2Frame) childFailure(label, name string, dr *probe.DeviceResult) verdict {
	unit, slots := portUnitOf(label), Slots{"label": label}
	var v verdict
	switch {
	case dr == nil:
		v = f.childSilent.unit(unit, slots)
	case dr.Failure != nil:
		v = f.childDied(dr.Failure, name).unit(unit, slots.with("error", dr.Failure.Error))
		v.evidence = map[string]any{"failure": dr.Failure}
	default:
		v = f.noResult.unit(unit, slots)
	}
	if dr != nil && dr.Stderr != "" {
		v.details = append(v.details, "child's stderr: "+lastLines(dr.Stderr, 5))
	}
	return v
}

// childDied picks the finding for a child that failed: in this probe or
// before it, hung in the GPU driver or in a verb, crashed, or otherwise.
func (f *level2Frame) childDied(cf *probe.ChildFailure, name string) *Finding {
	inThis := cf.InProgress == "" || strings.Contains(cf.InProgress, name)
	pick := func(here, before *Finding) *Finding {
		if inThis {
			return here
		}
		return before
	}
	switch {
	case cf.TimedOut && strings.Contains(cf.InProgress, "open the GPU driver"):
		return pick(f.childGPUTimeout, f.notRunGPUTimeout)
	case cf.TimedOut:
		return pick(f.childTimeout, f.notRunTimeout)
	case cf.Signal != "":
		return pick(f.childCrash, f.notRunCrash)
	}
	return pick(f.childFailed, f.notRun)
}

// skippedVerdict is a probe the child did not run on a port, and why. One
// that ran out of the port's time was not judged, which is not the same as
// not applicable: it is an error, so the run does not read as healthy.
func (f *level2Frame) skippedVerdict(label string, p *probe.Probe) verdict {
	slots := Slots{"label": label, "why": p.Skipped}
	if p.OutOfTime {
		v := f.outOfTime.unit(portUnitOf(label), slots)
		v.evidence = map[string]any{"skipped": p.Skipped, "out_of_time": true}
		return v
	}
	return f.skipped.unit(portUnitOf(label), slots)
}

// childFailureVerdict is the verdict of level-2 check name's frame for a
// port whose result is missing.
func childFailureVerdict(label, name string, dr *probe.DeviceResult) verdict {
	return level2Frames[name].childFailure(label, name, dr)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// stepText is a failed step as an operator reads it: the call, the errno
// and what that errno means there.
func stepText(st *probe.Step) string {
	s := st.Name + " failed"
	verb := strings.Fields(st.Name + " ")[0]
	switch {
	case st.Error == "":
	case strings.HasPrefix(st.Error, st.Name):
		s = st.Error
	case strings.HasPrefix(st.Error, verb+": "):
		// "ibv_modify_qp: EINVAL ..." under "ibv_modify_qp A INIT→RTR".
		s = st.Name + ": " + st.Error[len(verb)+2:]
	default:
		s = st.Name + ": " + st.Error
	}
	if st.Cause != "" {
		s += " — " + st.Cause
	}
	return s
}

// softwareNote marks numbers from a software device.
func softwareNote(software bool) string {
	if software {
		return " (software RoCE: the kernel's verbs semantics, not a NIC's timing)"
	}
	return ""
}

// fmtNS prints a duration in nanoseconds with a readable unit.
func fmtNS(ns float64) string {
	return time.Duration(ns).Round(100 * time.Nanosecond).String()
}

// outOfTimeFix is for a probe left out because the probes before it on the
// port spent its --probe-timeout.
const outOfTimeFix = "The probes before it on this port spent the whole --probe-timeout (each wait for a completion or an event ends at that " +
	"deadline): their own results say which one waited and why. A larger --probe-timeout tells a slow device from a stalled one."

// StartEarly begins the libibverbs enumeration in its child process before
// the pipeline reaches libibverbs.devices, so the child's start-up (exec,
// dlopen, every provider's init) overlaps the file-reading checks instead
// of adding to them. It does nothing on a snapshot, when that check is not
// selected, or when the host has no RDMA device (the check would be
// blocked and the child would be wasted work).
func StartEarly(ctx context.Context, env *Env, sel []*Check) {
	if !env.Host.Live() {
		return
	}
	// One directory listing, not the survey: the child should start before
	// the survey's thousands of reads, not after them.
	if names, err := env.Host.RDMADeviceNames(); err != nil || len(names) == 0 {
		return
	}
	for _, c := range sel {
		if c.ID == "libibverbs.devices" && env.Expect.Skipped(c.ID) == nil { // a class's skip starts no child
			s := verbsOf(env)
			s.mu.Lock()
			started := s.enumStarted
			s.mu.Unlock()
			if !started {
				go func() { _, _ = env.verbsEnumeration(ctx) }() // the check reads the result
			}
			return
		}
	}
}

// The level-2 checks' flags: the verbs child's deadline and library.
func init() {
	declareKnob(30, func(fs *pflag.FlagSet, o *Options) {
		fs.DurationVar(&o.ProbeTimeout, "probe-timeout", 8*time.Second, "deadline of the verbs child process per device")
		fs.StringVar(&o.Libibverbs, "libibverbs", "", "open this libibverbs.so.1 instead of the loader's choice")
	}, func(o *Options, _ func(string) bool) error {
		if o.ProbeTimeout <= 0 {
			return fmt.Errorf("--probe-timeout %v must be positive", o.ProbeTimeout)
		}
		return nil
	})
}
