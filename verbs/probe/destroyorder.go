package probe

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// destroyOrder is probe.destroy_order: freeing in the wrong order must be
// refused (EBUSY), a SEND through a deregistered MR's lkey must complete in
// error, and the right order must free everything (the RDMA netlink
// counts of this process's objects back where they were).
func (r *runner) destroyOrder(resourcesFailed string) *DestroyOrderResult {
	res := &DestroyOrderResult{Probe: newProbe(DestroyOrder)}
	t0 := time.Now()
	defer func() { res.Millis = millis(time.Since(t0)) }()
	if r.needsConnectedQP(&res.Probe, resourcesFailed) {
		return res
	}
	res.CountsBefore = r.countObjects(res)
	r.destroyOrderBody(res)
	if res.CountsDuring != nil {
		res.CountsAfter = r.countObjects(res)
	}
	r.compareCounts(res)
	return res
}

// countObjects reads the RDMA object counts of the device: this process's
// own objects when the kernel has the per-object dumps, else the device's
// summary (and why). Every read of one probe uses the method the first
// chose. nil once a read failed (CountsError says why).
func (r *runner) countObjects(res *DestroyOrderResult) map[string]uint64 {
	if res.CountsError != "" {
		return nil
	}
	var m map[string]uint64
	var err error
	switch res.CountsMethod {
	case "":
		if m, err = ownResourceCounts(r.dev.Name); err == nil {
			res.CountsMethod, res.CountsPID = CountsProcess, os.Getpid()
			break
		}
		res.CountsFallback = err.Error()
		res.CountsMethod = CountsDevice
		m, err = deviceResourceCounts(r.dev.Name)
	case CountsProcess:
		m, err = ownResourceCounts(r.dev.Name)
	default:
		m, err = deviceResourceCounts(r.dev.Name)
	}
	if err != nil {
		res.CountsError = err.Error()
		return nil
	}
	return m
}

// compareCounts judges the counts read before the probe opened the device,
// while its objects lived and after it closed the device. Counts of this
// process's own objects that do not come back are a leak; device-wide
// counts that do not come back may be anyone's, so that is only recorded
// (CountsDrift) for the check to warn about.
func (r *runner) compareCounts(res *DestroyOrderResult) {
	before, during, after := res.CountsBefore, res.CountsDuring, res.CountsAfter
	if res.CountsError != "" || before == nil || during == nil || after == nil {
		return
	}
	visible := false
	for _, k := range countedResources {
		if during[k] > before[k] {
			visible = true
		}
	}
	if !visible {
		// Counts that did not move while the probe's objects lived
		// prove nothing about leaks (another netns, no restrack).
		res.CountsError = "the RDMA netlink resource counts did not show the probe's own objects"
		return
	}
	whose := "this process's objects (RDMA netlink per-object dumps, by PID)"
	if res.CountsMethod != CountsProcess {
		whose = "the device's summary (every user of the device counts)"
	}
	detail := fmt.Sprintf("%s: before %s, during %s, after %s", whose, fmtCounts(before), fmtCounts(during), fmtCounts(after))
	leaked := leakedCounts(before, after)
	switch {
	case leaked == "":
		r.note(&res.Probe, "resource counts back to baseline", true, "", detail)
	case res.CountsMethod == CountsProcess:
		r.note(&res.Probe, "resource counts back to baseline", false,
			"this process's RDMA objects after teardown differ from before: "+leaked, detail)
	default:
		res.CountsDrift = "device-wide resource counts after teardown differ from before: " + leaked
	}
}

func (r *runner) destroyOrderBody(res *DestroyOrderResult) {
	p := &res.Probe
	s, ok := r.open(p)
	if !ok {
		return
	}
	// The destroys are run below in the right order and recorded; this
	// stack only cleans up after an early return.
	defer r.teardown(p, &s.td)
	o, ok := r.destroyOrderObjects(p, s)
	if !ok {
		return
	}
	res.CountsDuring = r.countObjects(res)

	// Wrong order first: a correct stack refuses both.
	res.DeallocPDLiveQP = int(r.refuse(p, "ibv_dealloc_pd while QPs use it", syscall.EBUSY, o.pd.Dealloc))
	res.DestroyCQLiveQP = int(r.refuse(p, "ibv_destroy_cq while QP A uses it", syscall.EBUSY, o.cqA.Destroy))
	if res.DeallocPDLiveQP == 0 || res.DestroyCQLiveQP == 0 {
		// The object is gone from under a live QP: using the QPs further
		// could crash the child. Stop here and tear down what is left.
		return
	}
	if !r.staleKeySend(res, s, o) {
		return
	}

	// The right order: QPs, MRs, CQs, PD, then the context.
	ok = true
	for _, d := range []struct {
		name string
		fn   func() error
	}{
		{"ibv_destroy_qp A", o.a.Destroy},
		{"ibv_destroy_qp B", o.b.Destroy},
		{"ibv_dereg_mr (receive buffer)", o.live.Dereg},
		{"ibv_destroy_cq A", o.cqA.Destroy},
		{"ibv_destroy_cq B", o.cqB.Destroy},
		{"ibv_dealloc_pd", o.pd.Dealloc},
		{"ibv_close_device", s.ctx.Close},
	} {
		if !r.step(p, d.name, d.fn) {
			ok = false
		}
	}
	res.TeardownOK = ok
	// What is still on the stack is a no-op now (every destroy is
	// idempotent once it succeeded) except the buffer.
	s.td = teardown{}
	s.td.push("munmap buffer", o.buf.Free)
}

// destroyOrderSet is the destroy-order probe's objects: two MRs on one
// buffer (live receives, stale is deregistered under a live QP), a CQ
// and an RC QP for each side, all on one PD.
type destroyOrderSet struct {
	pd          *verbs.PD
	buf         *verbs.Buffer
	live, stale *verbs.MR
	cqA, cqB    *verbs.CQ
	a, b        *verbs.QP
}

// destroyOrderObjects creates the probe's objects, each on s's teardown
// stack.
func (r *runner) destroyOrderObjects(p *Probe, s *session) (*destroyOrderSet, bool) {
	o := &destroyOrderSet{}
	var ok bool
	if o.pd, ok = r.allocPD(p, s); !ok {
		return nil, false
	}
	if !r.step(p, "mmap page-aligned buffer", func() (err error) { o.buf, err = verbs.NewBuffer(8192); return err }) {
		return nil, false
	}
	s.td.push("munmap buffer", o.buf.Free)
	r.info.MRBytes = o.buf.Len()
	if !r.step(p, "ibv_reg_mr (receive buffer)", func() (err error) { o.live, err = o.pd.RegMR(o.buf, 0, 4096, verbs.AccessLocalWrite); return err }) {
		return nil, false
	}
	s.td.push("ibv_dereg_mr (receive buffer)", o.live.Dereg)
	if !r.step(p, "ibv_reg_mr (send buffer)", func() (err error) { o.stale, err = o.pd.RegMR(o.buf, 4096, 4096, verbs.AccessLocalWrite); return err }) {
		return nil, false
	}
	s.td.push("ibv_dereg_mr (send buffer)", o.stale.Dereg)
	if o.cqA, o.cqB, ok = r.cqPair(p, s); !ok {
		return nil, false
	}
	if o.a, ok = r.createRC(p, s, o.pd, "A", o.cqA, o.cqA, 4); !ok {
		return nil, false
	}
	if o.b, ok = r.createRC(p, s, o.pd, "B", o.cqB, o.cqB, 4); !ok {
		return nil, false
	}
	return o, true
}

// staleKeySend connects the QPs, deregisters the send buffer's MR while
// they live (which must succeed: nothing ties a QP to an MR) and posts a
// SEND with its stale lkey, which must be refused or complete in error.
// It is false when a step before the SEND failed.
func (r *runner) staleKeySend(res *DestroyOrderResult, s *session, o *destroyOrderSet) bool {
	p := &res.Probe
	var addr *address
	if !r.step(p, "resolve loopback address", func() (err error) { addr, err = r.resolve(s); return err }) {
		return false
	}
	if !r.connect(p, o.a, o.b, addr) {
		return false
	}
	staleSGE := o.stale.SGE(0, 256)
	if !r.step(p, "ibv_dereg_mr (send buffer) while the QP lives", o.stale.Dereg) {
		return false
	}
	if !r.step(p, "ibv_post_recv B", func() error {
		return o.b.PostRecv(verbs.RecvWR{ID: 1, SGEs: []verbs.SGE{o.live.SGE(0, 4096)}})
	}) {
		return false
	}
	r.begin(p, "ibv_post_send A with the deregistered lkey")
	postErr := o.a.PostSend(verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGEs: []verbs.SGE{staleSGE}})
	res.StalePostErrno = int(verbs.ErrnoOf(postErr))
	if postErr != nil {
		// Refusing the post is as good as an error completion: the stale
		// key was caught.
		st := Step{Name: "ibv_post_send A with the deregistered lkey", OK: true, Want: "error completion",
			Detail: "the provider refused the post itself"}
		r.fill(&st, postErr)
		p.Steps = append(p.Steps, st)
		return true
	}
	var wc verbs.WC
	if r.step(p, "ibv_poll_cq A (completion of the stale-lkey SEND)", func() (err error) { wc, err = pollOne(o.cqA, r.pollWait()); return err }) {
		res.StaleStatus = wc.Status.String()
		res.StaleStatusCode = int(wc.Status)
		res.StaleVendorErr = wc.VendorErr
		st := Step{Name: "stale-lkey SEND completes in error", OK: wc.Status != verbs.WCSuccess, Want: "error completion",
			Detail: fmt.Sprintf("status %s (%d), vendor error %#x", wc.Status, int(wc.Status), wc.VendorErr)}
		if !st.OK {
			st.Error = "a SEND through a deregistered MR's lkey completed successfully: the device did not check the key"
		}
		p.Steps = append(p.Steps, st)
	}
	return true
}
