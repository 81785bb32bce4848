package probe

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// runner is the state of one child probing one device, port by port.
type runner struct {
	em   *emitter
	opts Options
	lib  *verbs.Lib
	dev  *verbs.Device
	// setupErr is why the library or the device could not be found; every
	// probe then reports it as its first step.
	setupErr  error
	setupStep string

	port     int
	deadline time.Time
	info     causeInfo
	software bool
	// iwarp is set for an iWARP device (RNIC): its RC QPs connect only
	// through rdma_cm, so the probes that connect QPs with ibv_modify_qp
	// cannot run there.
	iwarp bool
	// noRC is why the device has no RC QPs (the parent's word, from the
	// device's driver and node type); empty when it has them.
	noRC string
	// noUD is why applications cannot create UD QPs on the device.
	noUD string
	// gpu is the GPU driver, opened once per child by the first port's
	// probe.gpu_memory.
	gpu gpuDriver
	// hostRoot is where a peer child reads counters and rates.
	hostRoot string
}

// iwarpSkip is why the probes that need a connected QP do not run on an
// iWARP device: the kernel refuses the RTR/RTS transitions of an RC QP
// that no rdma_cm connection (a TCP socket) stands behind, as siw and
// cxgb4 do.
const iwarpSkip = "iWARP RC QPs connect only through rdma_cm; this probe connects QPs with ibv_modify_qp"

func runProbes(em *emitter, req request) {
	opts := req.options()
	r := &runner{em: em, opts: opts, noRC: req.NoRC, noUD: req.NoUD}
	r.info.Device = req.Device
	r.info.MemlockBytes = memlockBytes()

	r.setupStep = "dlopen " + verbs.DefaultLibrary
	if opts.Library != "" {
		r.setupStep = "dlopen " + opts.Library
	}
	lib, err := verbs.Open(opts.Library)
	if err != nil {
		r.setupErr = err
	} else {
		r.lib = lib
		r.setupStep = "ibv_get_device_list"
		dl, err := lib.GetDeviceList()
		switch {
		case err != nil:
			r.setupErr = err
		case dl.Find(req.Device) == nil:
			var names []string
			for _, d := range dl.Devices {
				names = append(names, d.Name)
			}
			r.setupErr = fmt.Errorf("the library lists no device %q (it lists: %s)", req.Device, strings.Join(names, ", "))
		default:
			// The list stays allocated for the life of the child: Device
			// values point into it.
			r.dev = dl.Find(req.Device)
			r.info.UverbsDev = r.dev.DevName
			r.iwarp = r.dev.TransportType == verbs.TransportIWARP || r.dev.NodeType == verbs.NodeRNIC
		}
	}
	r.software = isSoftwareDevice(opts.SysfsRoot, req.Device)

	ports := req.Ports
	if len(ports) == 0 {
		ports = []int{1}
	}
	for _, port := range ports {
		r.port = port
		r.deadline = time.Now().Add(opts.Timeout)
		var resourcesFailed string
		for _, name := range opts.Probes {
			var res any
			switch {
			case !time.Now().Before(r.deadline):
				// What is left would be cut short (every wait ends at
				// the deadline) and would run into the parent's kill.
				if res = outOfTime(name, port, opts.Timeout); res == nil {
					continue
				}
			default:
				k, ok := LookupKind(name)
				if !ok {
					continue
				}
				res = k.run(r, resourcesFailed)
				if rr, ok := res.(*ResourcesResult); ok {
					if st := rr.Failed(); st != nil {
						resourcesFailed = fmt.Sprintf("blocked by %s: %s failed", Resources, st.Name)
					}
				}
			}
			b, err := json.Marshal(res)
			if err != nil {
				em.emit(event{Kind: "fatal", Error: "encode " + name + ": " + err.Error()})
				continue
			}
			em.emit(event{Kind: "result", Port: port, Probe: name, Result: b})
		}
	}
}

func (r *runner) begin(p *Probe, step string) {
	r.em.emit(event{Kind: "begin", Port: r.port, Probe: p.Name, Step: step})
}

// step runs fn as one step of p and records its outcome.
func (r *runner) step(p *Probe, name string, fn func() error) bool {
	r.begin(p, name)
	t0 := time.Now()
	err := fn()
	s := Step{Name: name, OK: err == nil, Micros: micros(time.Since(t0))}
	if err != nil {
		r.fill(&s, err)
	}
	p.Steps = append(p.Steps, s)
	return s.OK
}

// refuse runs fn, which a correct stack refuses with want, and records it.
func (r *runner) refuse(p *Probe, name string, want syscall.Errno, fn func() error) syscall.Errno {
	r.begin(p, name)
	t0 := time.Now()
	err := fn()
	s := Step{Name: name, Want: verbs.ErrnoName(want), Micros: micros(time.Since(t0))}
	var got syscall.Errno
	if err == nil {
		s.Error = fmt.Sprintf("%s succeeded; a correct stack refuses it with %s", name, verbs.ErrnoName(want))
	} else {
		r.fill(&s, err)
		got = verbs.ErrnoOf(err)
		s.OK = got == want
		if !s.OK {
			s.Error += fmt.Sprintf("; a correct stack refuses it with %s", verbs.ErrnoName(want))
		}
	}
	p.Steps = append(p.Steps, s)
	return got
}

// note records a judgement that is not a call: a state read back, a
// payload compared.
func (r *runner) note(p *Probe, name string, ok bool, errText, detail string) bool {
	s := Step{Name: name, OK: ok, Detail: detail}
	if !ok {
		s.Error = errText
	}
	p.Steps = append(p.Steps, s)
	return ok
}

func (r *runner) fill(s *Step, err error) {
	s.Error = err.Error()
	e := verbs.ErrnoOf(err)
	s.Errno = int(e)
	s.ErrnoName = verbs.ErrnoName(e)
	var ve *verbs.Error
	var pe *verbs.PostError
	var re *verbs.ReturnError
	var ce *causedError
	switch {
	case errors.As(err, &ce):
		s.Cause = ce.cause
	case errors.As(err, &re) && re.Verb == "ibv_poll_cq":
		s.Cause = "the provider failed the poll itself — most often the CQ is in error (overrun, or the device hit a fatal error): " +
			"read dmesg and the device's async events"
	case errors.As(err, &ve):
		s.Cause = cause(ve.Verb, e, &r.info)
	case errors.As(err, &pe):
		s.Cause = cause(pe.Verb, e, &r.info)
	}
}

// causedError is a failure found by the probe itself, with its cause.
type causedError struct {
	msg, cause string
	err        error // what it stands for, when a caller tells it apart
}

func (e *causedError) Error() string { return e.msg }
func (e *causedError) Unwrap() error { return e.err }

// blocked reports the setup failure or an earlier probe's failure as the
// reason p cannot run; true when p must stop.
func (r *runner) blocked(p *Probe, resourcesFailed string) bool {
	if resourcesFailed != "" {
		p.Skipped = resourcesFailed
		return true
	}
	if r.setupErr != nil {
		r.step(p, r.setupStep, func() error { return r.setupErr })
		return true
	}
	return false
}

// needsConnectedQP is blocked for the probes that connect RC QPs with
// ibv_modify_qp: on iWARP, and on a device without RC QPs (EFA), they are
// skipped (not failed), saying why.
func (r *runner) needsConnectedQP(p *Probe, resourcesFailed string) bool {
	if r.blocked(p, resourcesFailed) {
		return true
	}
	switch {
	case r.iwarp:
		p.Skipped = iwarpSkip
		return true
	case r.noRC != "":
		p.Skipped = r.noRC
		return true
	}
	return false
}

// maxPollWait bounds one wait for a completion or an event.
const maxPollWait = 2 * time.Second

// pollWait is how long a probe waits for one completion or event: the
// port's remaining budget, at most maxPollWait, and nothing once the
// deadline has passed (the caller then looks once without waiting).
func (r *runner) pollWait() time.Duration {
	left := time.Until(r.deadline)
	switch {
	case left > maxPollWait:
		return maxPollWait
	case left < 0:
		return 0
	}
	return left
}

// teardown is a stack of destroy calls, run last-in first-out and recorded
// as steps.
type teardown struct {
	names []string
	fns   []func() error
}

func (t *teardown) push(name string, fn func() error) {
	t.names = append(t.names, name)
	t.fns = append(t.fns, fn)
}

// run destroys everything still on the stack; it reports whether every
// destroy succeeded.
func (r *runner) teardown(p *Probe, t *teardown) bool {
	ok := true
	for i := len(t.fns) - 1; i >= 0; i-- {
		if !r.step(p, t.names[i], t.fns[i]) {
			ok = false
		}
	}
	t.names, t.fns = nil, nil
	return ok
}

// allocPD is every probe's first step: a protection domain, freed by the
// session's teardown.
func (r *runner) allocPD(p *Probe, s *session) (*verbs.PD, bool) {
	var pd *verbs.PD
	if !r.step(p, "ibv_alloc_pd", func() (err error) { pd, err = s.ctx.AllocPD(); return err }) {
		return nil, false
	}
	s.td.push("ibv_dealloc_pd", pd.Dealloc)
	return pd, true
}

// session is an opened device with its limits and the probed port.
type session struct {
	ctx  *verbs.Context
	attr verbs.DeviceAttr
	port verbs.PortAttr
	td   teardown
}

// open opens the device and queries it and the port, recording the steps.
func (r *runner) open(p *Probe) (*session, bool) {
	s := &session{}
	if !r.step(p, "ibv_open_device", func() (err error) { s.ctx, err = r.dev.Open(); return err }) {
		return nil, false
	}
	s.td.push("ibv_close_device", s.ctx.Close)
	if !r.step(p, "ibv_query_device", func() (err error) { s.attr, err = s.ctx.QueryDevice(); return err }) {
		r.teardown(p, &s.td)
		return nil, false
	}
	r.info.Caps = deviceCaps(&s.attr)
	if !r.step(p, fmt.Sprintf("ibv_query_port %d", r.port), func() (err error) {
		s.port, err = s.ctx.QueryPort(uint8(r.port))
		return err
	}) {
		r.teardown(p, &s.td)
		return nil, false
	}
	return s, true
}

func deviceCaps(a *verbs.DeviceAttr) *DeviceCaps {
	return &DeviceCaps{
		FwVer: a.FwVersion(), VendorID: a.VendorID, VendorPartID: a.VendorPartID,
		NodeGUID: verbs.FormatGUID(beToHost(a.NodeGUID)),
		MaxQP:    int(a.MaxQP), MaxQPWR: int(a.MaxQPWR), MaxSGE: int(a.MaxSGE), MaxCQ: int(a.MaxCQ),
		MaxCQE: int(a.MaxCQE), MaxMR: int(a.MaxMR), MaxMRSize: a.MaxMRSize, MaxPD: int(a.MaxPD),
		PhysPortCnt: int(a.PhysPortCnt),
	}
}

func portInfo(a *verbs.PortAttr) *PortInfo {
	return &PortInfo{
		State: verbs.PortState(a.State).String(), LinkLayer: verbs.LinkLayerName(a.LinkLayer),
		LID: int(a.LID), SMLID: int(a.SMLID), ActiveMTU: verbs.MTU(a.ActiveMTU).Bytes(),
		MaxMTU: verbs.MTU(a.MaxMTU).Bytes(), GIDTblLen: int(a.GIDTblLen),
	}
}

// beToHost converts a __be64 that was read as a native integer.
func beToHost(v uint64) uint64 {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], v)
	return binary.BigEndian.Uint64(b[:])
}

func memlockBytes() int64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err != nil {
		return 0
	}
	if rl.Cur == unix.RLIM_INFINITY {
		return -1
	}
	return int64(rl.Cur)
}

// isSoftwareDevice tells rxe/siw (whose numbers are no NIC's) from
// hardware: a software device has no parent bus device in sysfs.
func isSoftwareDevice(sysRoot, dev string) bool {
	if strings.HasPrefix(dev, "rxe") || strings.HasPrefix(dev, "siw") {
		return true
	}
	_, err := os.Stat(filepath.Join(sysRoot, "class/infiniband", dev, "device"))
	return errors.Is(err, os.ErrNotExist)
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
