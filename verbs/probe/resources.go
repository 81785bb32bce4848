package probe

import (
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// Sizes the resource probe asks for; each is clamped to the device limits.
const (
	probeCQE = 16
	probeWR  = 16
)

// resources is verbs.resources: each layer an application builds, in
// order, with the errno and its meaning where one fails.
func (r *runner) resources() *ResourcesResult {
	res := &ResourcesResult{Probe: newProbe(Resources), Software: r.software, MemlockBytes: r.info.MemlockBytes}
	t0 := time.Now()
	defer func() { res.Millis = millis(time.Since(t0)) }()
	if r.blocked(&res.Probe, "") {
		return res
	}
	s, ok := r.open(&res.Probe)
	if !ok {
		return res
	}
	defer r.teardown(&res.Probe, &s.td)
	res.Device = deviceCaps(&s.attr)
	res.Port = portInfo(&s.port)

	pd, ok := r.allocPD(&res.Probe, s)
	if !ok {
		return res
	}

	size := r.opts.Size
	if size < 4096 {
		size = 4096
	}
	var buf *verbs.Buffer
	if !r.step(&res.Probe, "mmap page-aligned buffer", func() (err error) { buf, err = verbs.NewBuffer(size); return err }) {
		return res
	}
	s.td.push("munmap buffer", buf.Free)
	res.MRBytes = buf.Len()
	r.info.MRBytes = buf.Len()
	var mr *verbs.MR
	if !r.step(&res.Probe, "ibv_reg_mr", func() (err error) {
		mr, err = pd.RegMR(buf, 0, buf.Len(), verbs.AccessLocalWrite)
		return err
	}) {
		return res
	}
	s.td.push("ibv_dereg_mr", mr.Dereg)

	res.CQEAsked = clamp(probeCQE, int(s.attr.MaxCQE))
	r.info.CQEAsked = res.CQEAsked
	var cq *verbs.CQ
	if !r.step(&res.Probe, "ibv_create_cq", func() (err error) { cq, err = s.ctx.CreateCQ(res.CQEAsked, nil, 0); return err }) {
		return res
	}
	s.td.push("ibv_destroy_cq", cq.Destroy)
	res.CQEGranted = cq.CQE()
	var typ verbs.QPType

	// A device without RC (EFA) gets the QP type it has: the layer is
	// the same, and what it proves (the provider creates a QP within the
	// device's limits) too.
	typ, res.QPType = verbs.QPTRC, "RC"
	if r.noRC != "" {
		typ, res.QPType, res.NoRC = verbs.QPTUD, "UD", r.noRC
	}
	qp, ok := r.createQP(&res.Probe, s, pd, typ, res.QPType, cq, cq, probeWR)
	res.QPAsked = r.info.QPAsked
	if ok {
		res.QPGranted = capsOf(qp.Cap)
	}
	return res
}

// clamp returns want, or limit when the device allows less (a limit of 0
// or less is taken as unknown).
func clamp(want, limit int) int {
	if limit > 0 && want > limit {
		return limit
	}
	return want
}
