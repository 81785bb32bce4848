package probe

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// RDMACM is the two-host rdma_cm probe (check peer.rdma_cm): the client
// resolves the server's address and route through the RDMA connection
// manager, connects to the listener the server announced, SENDs a payload
// and receives it back, the way MPI, NFS-over-RDMA and storage initiators
// connect. Every wait is bounded: rdma_cm events are read from the
// channel's non-blocking fd with a deadline, completions are polled until
// one.
const RDMACM = "peer.rdma_cm"

// CMOptions tune both sides of the rdma_cm probe. Zero values take the
// defaults.
type CMOptions struct {
	Library   string        // libibverbs ("" = libibverbs.so.1)
	CMLibrary string        // librdmacm ("" = librdmacm.so.1)
	Timeout   time.Duration // the whole probe; default 10s
	// Step bounds each rdma_cm event and each completion; default 3s
	// (address and route resolution retry inside the library for 2s).
	Step time.Duration
	// Size is the payload of the SEND and of its echo; default 4096, more
	// than the smallest path MTU, so a path MTU the wire cannot carry shows.
	Size int
	// Echoed, on the listening side, is called once the echo's SEND has
	// completed (the client acknowledged it).
	Echoed func()
	// BeforeDisconnect, on the connecting side, is called after the echo
	// arrived intact and before rdma_disconnect; its answer is the step's
	// detail. A client that tore the connection down at once left a
	// server whose last acknowledgement was lost retransmitting into a
	// closed QP: its SEND never completed, and rdma_cm failed on a link
	// that works (1 % loss on the VM pair's wire, one run in five).
	BeforeDisconnect func() string
}

func (o CMOptions) withDefaults() CMOptions {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Step <= 0 {
		o.Step = 3 * time.Second
	}
	if o.Size <= 0 {
		o.Size = 4096
	}
	return o
}

// CMResult is what one side of the rdma_cm probe saw.
type CMResult struct {
	Probe
	// Device and Port are where address resolution bound the connection
	// ("rxe0", 1); SGID and DGID the GIDs it chose.
	Device  string `json:"device,omitempty"`
	Port    int    `json:"port,omitempty"`
	SGID    string `json:"sgid,omitempty"`
	DGID    string `json:"dgid,omitempty"`
	PathMTU int    `json:"path_mtu,omitempty"` // of the connected QP, bytes
	Size    int    `json:"size"`
	// FailedStage names the stage that failed, for the check's judgement:
	// "library", "address", "route", "resources", "connect", "transfer".
	FailedStage string `json:"failed_stage,omitempty"`
	// ConnectMicros is rdma_connect to ESTABLISHED; RoundTripMicros the
	// SEND to the echo's completion.
	ConnectMicros   float64 `json:"connect_us,omitempty"`
	RoundTripMicros float64 `json:"round_trip_us,omitempty"`
}

// cmStepper records steps into a CMResult and remembers the stage of the
// first failure.
type cmStepper struct {
	res      *CMResult
	deadline time.Time
	stage    string
}

func (s *cmStepper) step(name string, fn func() error) bool {
	return s.stepDetail(name, func() (string, error) { return "", fn() })
}

// stepDetail is step for a step that says how it went even when it passed.
func (s *cmStepper) stepDetail(name string, fn func() (detail string, err error)) bool {
	t0 := time.Now()
	detail, err := fn()
	st := Step{Name: name, OK: err == nil, Detail: detail, Micros: micros(time.Since(t0))}
	if err != nil {
		st.Error = err.Error()
		e := verbs.ErrnoOf(err)
		st.Errno, st.ErrnoName = int(e), verbs.ErrnoName(e)
		var ce *causedError
		if errors.As(err, &ce) {
			st.Cause = ce.cause
		}
		if s.res.FailedStage == "" {
			s.res.FailedStage = s.stage
		}
	}
	s.res.Steps = append(s.res.Steps, st)
	return st.OK
}

// left is the time a wait may take: the step bound, or less when the
// probe's deadline is nearer.
func (s *cmStepper) left(step time.Duration) time.Duration {
	return max(min(step, time.Until(s.deadline)), 0)
}

// cmEnd is one side's open libraries and its teardown stack.
type cmEnd struct {
	lib *verbs.Lib
	cm  *verbs.CMLib
	ch  *verbs.EventChannel
	td  teardown
}

func (e *cmEnd) open(s *cmStepper, o CMOptions) bool {
	s.stage = "library"
	if !s.step("dlopen libibverbs", func() (err error) { e.lib, err = verbs.Open(o.Library); return err }) {
		return false
	}
	if !s.step("dlopen librdmacm", func() (err error) {
		e.cm, err = verbs.OpenCM(o.CMLibrary, e.lib)
		if err != nil {
			return &causedError{msg: err.Error(), cause: "librdmacm is not installed or not loadable: " +
				"install rdma-core's librdmacm1 (Debian/Ubuntu) or librdmacm (RHEL, SUSE)"}
		}
		return nil
	}) {
		return false
	}
	if !s.step("rdma_create_event_channel", func() (err error) { e.ch, err = e.cm.CreateEventChannel(); return err }) {
		return false
	}
	e.td.push("rdma_destroy_event_channel", func() error { e.ch.Destroy(); return nil })
	return true
}

// finish runs the teardown stack as steps; a teardown failure is recorded
// but does not replace the stage that failed first.
func (e *cmEnd) finish(s *cmStepper) {
	s.stage = "teardown"
	for i := len(e.td.fns) - 1; i >= 0; i-- {
		s.step(e.td.names[i], e.td.fns[i])
	}
}

// expect waits for the event want on the channel. Any other event, or none
// in time, is an error with cause; the event read is acknowledged.
func expect(s *cmStepper, ch *verbs.EventChannel, want verbs.CMEventType, step time.Duration,
	causeOf func(ev *verbs.CMEvent) string, known ...*verbs.CMID) (*verbs.CMEvent, error) {
	wait := s.left(step)
	ev, err := ch.WaitEvent(wait, known...)
	if errors.Is(err, verbs.ErrCMTimeout) {
		return nil, &causedError{msg: fmt.Sprintf("no %s within %s", want, wait.Round(time.Millisecond)),
			cause: causeOf(nil), err: verbs.ErrCMTimeout}
	}
	if err != nil {
		return nil, err
	}
	if err := ev.Ack(); err != nil {
		return nil, err
	}
	if ev.Type != want {
		return ev, &causedError{msg: fmt.Sprintf("got %s instead of %s", ev, want), cause: causeOf(ev)}
	}
	return ev, nil
}

// cmBuffers are one side's verbs objects on the cm_id's device.
type cmBuffers struct {
	ctx  *verbs.Context
	pd   *verbs.PD
	cq   *verbs.CQ
	buf  *verbs.Buffer
	mr   *verbs.MR
	qp   *verbs.QP
	size int
}

// resources makes PD, CQ, buffer (send half, receive half), MR and the
// cm_id's QP, each pushed on the teardown stack.
func (e *cmEnd) resources(s *cmStepper, id *verbs.CMID, size int) (*cmBuffers, bool) {
	s.stage = "resources"
	b := &cmBuffers{size: size}
	ok := s.step("device of the cm_id", func() (err error) { b.ctx, err = id.Context(); return err }) &&
		s.step("ibv_alloc_pd", func() (err error) { b.pd, err = b.ctx.AllocPD(); return err })
	if !ok {
		return nil, false
	}
	e.td.push("ibv_dealloc_pd", func() error { return b.pd.Dealloc() })
	if !s.step("ibv_create_cq", func() (err error) { b.cq, err = b.ctx.CreateCQ(8, nil, 0); return err }) {
		return nil, false
	}
	e.td.push("ibv_destroy_cq", func() error { return b.cq.Destroy() })
	if !s.step("mmap buffer", func() (err error) { b.buf, err = verbs.NewBuffer(2 * size); return err }) {
		return nil, false
	}
	e.td.push("munmap buffer", b.buf.Free)
	if !s.step("ibv_reg_mr", func() (err error) {
		b.mr, err = b.pd.RegMR(b.buf, 0, 2*size, verbs.AccessLocalWrite)
		return err
	}) {
		return nil, false
	}
	e.td.push("ibv_dereg_mr", b.mr.Dereg)
	if !s.step("rdma_create_qp", func() (err error) {
		b.qp, err = id.CreateQP(b.pd, verbs.QPInit{SendCQ: b.cq, RecvCQ: b.cq, Type: verbs.QPTRC,
			Cap: verbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		return err
	}) {
		return nil, false
	}
	e.td.push("rdma_destroy_qp", func() error { id.DestroyQP(); return nil })
	return b, true
}

// postRecv posts the receive half of the buffer.
func (b *cmBuffers) postRecv() error {
	return b.qp.PostRecv(verbs.RecvWR{ID: 2, SGEs: []verbs.SGE{b.mr.SGE(b.size, b.size)}})
}

// send SENDs the first half of the buffer, signaled.
func (b *cmBuffers) send() error {
	return b.qp.PostSend(verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
		SGEs: []verbs.SGE{b.mr.SGE(0, b.size)}})
}

// waitCompletion polls the CQ for the completion of work request id until
// wait passes. A completion in error is an error naming its status.
func (b *cmBuffers) waitCompletion(id uint64, wait time.Duration, timeoutCause string) (verbs.WC, error) {
	deadline := time.Now().Add(wait)
	wcs := make([]verbs.WC, 1)
	for spins := 0; ; spins++ {
		n, err := b.cq.Poll(wcs)
		if err != nil {
			return verbs.WC{}, err
		}
		if n == 1 {
			wc := wcs[0]
			if wc.Status != verbs.WCSuccess {
				return wc, &causedError{msg: fmt.Sprintf("completion of wr %d: %s", wc.WRID, wc.Status),
					cause: "the connection broke during the transfer (" + wc.Status.String() + "): the link or the peer went away"}
			}
			if wc.WRID != id {
				continue
			}
			return wc, nil
		}
		if time.Now().After(deadline) {
			return verbs.WC{}, &causedError{msg: fmt.Sprintf("no completion of wr %d within %s", id, wait.Round(time.Millisecond)),
				cause: timeoutCause}
		}
		if spins > 1000 {
			// Busy polling on a shared CPU starves the softirq that runs a
			// software provider's receive path.
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// fill writes the probe's payload pattern (seed differs per side).
func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

// addrPort parses "IP:PORT" for the rdma_cm calls.
func addrPort(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("rdma_cm address %q: %w", s, err)
	}
	return ap, nil
}

func payloadCheck(got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return &causedError{msg: fmt.Sprintf("echoed payload differs from what was sent, first at byte %d of %d", i, len(want)),
		cause: "data corrupted on the path: a faulty NIC, cable or a memory-registration bug in the provider"}
}
