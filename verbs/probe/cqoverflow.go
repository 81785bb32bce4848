package probe

import (
	"fmt"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// cqOverflowMsg is the size of each SEND of the overflow probe.
const cqOverflowMsg = 64

// maxOverflowSends caps the SENDs the overflow probe posts in one call:
// their work requests must fit the binding's scratch memory, and a CQ a
// provider grew far beyond the one entry asked is not what this probe
// tests.
const maxOverflowSends = 256

// overflowSettle is how long the probe waits, once IBV_EVENT_CQ_ERR has
// come, for anything more to arrive (a receive completion, an event)
// before it judges: a provider may flush the SENDs after the overrun, so
// not all of them need ever arrive.
const overflowSettle = 100 * time.Millisecond

// cqOverflow is probe.cq_overflow: a send CQ asked for one entry receives
// more signaled completions than it holds, nobody polls it, and the async
// fd (non-blocking, polled with a deadline, every event acked) must say
// IBV_EVENT_CQ_ERR for that CQ rather than the completions vanish.
func (r *runner) cqOverflow(resourcesFailed string) *CQOverflowResult {
	res := &CQOverflowResult{Probe: newProbe(CQOverflow), CQEAsked: 1, RetryCnt: rcRetryCnt, Events: []AsyncEventRecord{}}
	t0 := time.Now()
	defer func() { res.Millis = millis(time.Since(t0)) }()
	if r.needsConnectedQP(&res.Probe, resourcesFailed) {
		return res
	}
	s, ok := r.open(&res.Probe)
	if !ok {
		return res
	}
	defer r.teardown(&res.Probe, &s.td)
	o, ok := r.overflowPair(s, res)
	if !ok {
		return res
	}
	p := &res.Probe
	// Whatever is still queued when the probe ends is read and acked
	// before the destroys, which wait for the acks.
	s.td.push("drain async events", func() error {
		r.collectEvents(s, res, o.small, o.a, o.b, 0, t0)
		return nil
	})
	recvs := make([]verbs.RecvWR, o.n)
	sends := make([]verbs.SendWR, o.n)
	for i := range o.n {
		recvs[i] = verbs.RecvWR{ID: uint64(100 + i), SGEs: []verbs.SGE{o.mr.SGE(0, cqOverflowMsg)}}
		sends[i] = verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRSend, Flags: verbs.SendSignaled,
			SGEs: []verbs.SGE{o.mr.SGE(cqOverflowMsg, cqOverflowMsg)}}
	}
	if !r.step(p, fmt.Sprintf("ibv_post_recv B ×%d", o.n), func() error { return o.b.PostRecv(recvs...) }) {
		return res
	}
	tSend := time.Now()
	if !r.step(p, fmt.Sprintf("ibv_post_send A ×%d signaled, send CQ not polled", o.n), func() error { return o.a.PostSend(sends...) }) {
		return res
	}
	res.SendsPosted = o.n
	wait := r.pollWait()
	received := r.awaitCQErr(s, res, o, tSend, wait)
	res.WaitedMS = millis(time.Since(tSend))
	o.countOverrun(res)
	r.judgeOverflow(res, o.n, received, wait)
	return res
}

// overflowQPs is the overflow probe's pair: A sends into the small CQ
// (granted entries for cqe=1), B receives into the big one, n SENDs.
type overflowQPs struct {
	small, big *verbs.CQ
	a, b       *verbs.QP
	mr         *verbs.MR
	n          int
}

// overflowPair creates the CQs, the buffer, the QPs and connects them; the
// returned objects are on s's teardown stack.
func (r *runner) overflowPair(s *session, res *CQOverflowResult) (*overflowQPs, bool) {
	p := &res.Probe
	pd, ok := r.allocPD(p, s)
	if !ok {
		return nil, false
	}
	o := &overflowQPs{}
	if !r.step(p, "ibv_create_cq cqe=1 (send CQ of A)", func() (err error) { o.small, err = s.ctx.CreateCQ(1, nil, 0); return err }) {
		return nil, false
	}
	s.td.push("ibv_destroy_cq (overrun)", o.small.Destroy)
	res.CQEGranted = o.small.CQE()
	if res.CQEGranted >= maxOverflowSends {
		r.note(p, "IBV_EVENT_CQ_ERR for the overrun CQ", false,
			fmt.Sprintf("the provider granted %d entries for cqe=1; overrunning that takes more than the %d signaled SENDs this probe posts",
				res.CQEGranted, maxOverflowSends), "")
		return nil, false
	}
	// Enough sends to overrun what was granted, within the QP's limits.
	o.n = clamp(max(res.CQEGranted+5, 6), int(s.attr.MaxQPWR))
	if !r.step(p, "ibv_create_cq (receive side)", func() (err error) {
		o.big, err = s.ctx.CreateCQ(clamp(4*o.n+16, int(s.attr.MaxCQE)), nil, 0)
		return err
	}) {
		return nil, false
	}
	s.td.push("ibv_destroy_cq (receive side)", o.big.Destroy)
	var buf *verbs.Buffer
	if !r.step(p, "mmap page-aligned buffer", func() (err error) { buf, err = verbs.NewBuffer((o.n + 1) * cqOverflowMsg); return err }) {
		return nil, false
	}
	s.td.push("munmap buffer", buf.Free)
	r.info.MRBytes = buf.Len()
	if !r.step(p, "ibv_reg_mr", func() (err error) { o.mr, err = pd.RegMR(buf, 0, buf.Len(), verbs.AccessLocalWrite); return err }) {
		return nil, false
	}
	s.td.push("ibv_dereg_mr", o.mr.Dereg)
	if o.a, ok = r.createRC(p, s, pd, "A", o.small, o.big, uint32(o.n)); !ok {
		return nil, false
	}
	if o.b, ok = r.createRC(p, s, pd, "B", o.big, o.big, uint32(o.n)); !ok {
		return nil, false
	}
	var addr *address
	if !r.step(p, "resolve loopback address", func() (err error) { addr, err = r.resolve(s); return err }) {
		return nil, false
	}
	if !r.connect(p, o.a, o.b, addr) {
		return nil, false
	}
	if !r.step(p, "async fd O_NONBLOCK", func() error { return s.ctx.SetAsyncNonblocking(true) }) {
		return nil, false
	}
	return o, true
}

// awaitCQErr waits for the receive side's n completions — the proof that
// the SENDs went out — while collecting async events, until the CQ_ERR
// came and nothing more arrives, or wait ends; it returns how many
// receives completed.
func (r *runner) awaitCQErr(s *session, res *CQOverflowResult, o *overflowQPs, tSend time.Time, wait time.Duration) int {
	r.begin(&res.Probe, "wait for IBV_EVENT_CQ_ERR")
	deadline := time.Now().Add(wait)
	received := 0
	lastNews := time.Now()
	var wc [16]verbs.WC
	for time.Now().Before(deadline) {
		if received < o.n {
			if k, err := o.big.Poll(wc[:]); err == nil && k > 0 {
				received += k
				lastNews = time.Now()
			}
		}
		if r.collectEvents(s, res, o.small, o.a, o.b, 5*time.Millisecond, tSend) > 0 {
			lastNews = time.Now()
		}
		if res.CQErrOnCQ > 0 && (received >= o.n || time.Since(lastNews) >= overflowSettle) {
			// Events for the last completions may trail: one more short look.
			r.collectEvents(s, res, o.small, o.a, o.b, 50*time.Millisecond, tSend)
			break
		}
	}
	return received
}

// countOverrun polls what the overrun CQ still holds, counts what was lost
// and reads A's state afterwards.
func (o *overflowQPs) countOverrun(res *CQOverflowResult) {
	var wc [16]verbs.WC
	for {
		k, err := o.small.Poll(wc[:])
		if err != nil {
			res.PollError = err.Error()
			break
		}
		res.Completions += k
		if k < len(wc) {
			break
		}
	}
	res.Lost = max(o.n-res.Completions, 0)
	if st, err := o.a.Query(verbs.QPAttrState); err == nil {
		res.QPStateAfter = st.QPState.String()
	}
}

// judgeOverflow notes the probe's verdict: the CQ_ERR came, or why not.
func (r *runner) judgeOverflow(res *CQOverflowResult, n, received int, wait time.Duration) {
	p := &res.Probe
	detail := fmt.Sprintf("%d signaled SENDs into a CQ granted %d entries: %d completions polled, %d lost, %d of %d receives completed, %d CQ_ERR event(s)",
		n, res.CQEGranted, res.Completions, res.Lost, received, n, res.CQErrOnCQ)
	const name = "IBV_EVENT_CQ_ERR for the overrun CQ"
	switch {
	case res.CQErrOnCQ > 0:
		r.note(p, name, true, "", detail)
	case res.Lost > 0:
		r.note(p, name, false, fmt.Sprintf("%d completions lost and no IBV_EVENT_CQ_ERR within %v", res.Lost, wait), detail)
	case received < n:
		r.note(p, name, false, fmt.Sprintf("only %d of %d SENDs arrived within %v; the CQ was not overrun", received, n, wait), detail)
	default:
		r.note(p, name, false, fmt.Sprintf("the CQ granted %d entries held all %d completions; it was not overrun", res.CQEGranted, n), detail)
	}
}

// collectEvents reads every pending async event within wait (0: only what
// is already queued), acks each, counts the CQ_ERRs of the overrun CQ and
// returns how many events it read.
func (r *runner) collectEvents(s *session, res *CQOverflowResult, small *verbs.CQ, a, b *verbs.QP, wait time.Duration, since time.Time) int {
	read := 0
	for {
		ev, err := s.ctx.WaitAsyncEvent(wait)
		if err != nil || ev == nil {
			return read
		}
		read++
		rec := AsyncEventRecord{Type: ev.Type.String(), AfterMS: millis(time.Since(since))}
		switch {
		case ev.IsCQ(small):
			rec.Object = "overrun send CQ"
			if ev.Type == verbs.EventCQErr {
				res.CQErrOnCQ++
			}
		case ev.IsQP(a):
			rec.Object = "QP A"
		case ev.IsQP(b):
			rec.Object = "QP B"
		case ev.Type.ElementKind() == verbs.ElementPort:
			rec.Object = fmt.Sprintf("port %d", ev.Port())
		case ev.Type.ElementKind() == verbs.ElementCQ:
			rec.Object = "receive CQ"
		default:
			rec.Object = "device"
		}
		ev.Ack()
		// Keep the record bounded if a provider floods events.
		if len(res.Events) < 64 {
			res.Events = append(res.Events, rec)
		}
		wait = 0
	}
}
