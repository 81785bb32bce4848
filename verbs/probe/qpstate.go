package probe

import (
	"syscall"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// qpState is verbs.qp_state: a fresh QP must refuse RESET→RTS with EINVAL;
// two RC QPs walk RESET→INIT→RTR→RTS toward each other, read back after
// each step; RTS→ERR→RESET→INIT must recover one of them.
func (r *runner) qpState(resourcesFailed string) *QPStateResult {
	res := &QPStateResult{Probe: newProbe(QPState)}
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
	p := &res.Probe

	pd, ok := r.allocPD(p, s)
	if !ok {
		return res
	}
	var cq *verbs.CQ
	if !r.step(p, "ibv_create_cq", func() (err error) {
		cq, err = s.ctx.CreateCQ(clamp(probeCQE, int(s.attr.MaxCQE)), nil, 0)
		return err
	}) {
		return res
	}
	s.td.push("ibv_destroy_cq", cq.Destroy)

	var addr *address
	if !r.step(p, "resolve loopback address", func() (err error) { addr, err = r.resolve(s); return err }) {
		return res
	}
	res.Addressing = addr.report(verbs.LinkLayerName(s.port.LinkLayer))

	// RESET→RTS on a fresh QP, with every attribute RTS would need.
	fresh, ok := r.createRC(p, s, pd, "C", cq, cq, 4)
	if !ok {
		return res
	}
	res.ResetToRTSTried = true
	attr, mask := rcAttr(r.port, nil, addr, verbs.QPSRTS)
	got := r.refuse(p, "ibv_modify_qp C RESET→RTS", syscall.EINVAL, func() error { return fresh.Modify(&attr, mask) })
	res.ResetToRTSErrno = int(got)
	if st, _ := r.expectState(p, "C", fresh, verbs.QPSReset); st != verbs.QPSUnknown {
		res.StateAfterRefusal = st.String()
	}

	a, ok := r.createRC(p, s, pd, "A", cq, cq, 4)
	if !ok {
		return res
	}
	b, ok := r.createRC(p, s, pd, "B", cq, cq, 4)
	if !ok {
		return res
	}
	res.Walk = []string{verbs.QPSReset.String()}
	for _, st := range [][2]verbs.QPState{{verbs.QPSReset, verbs.QPSInit}, {verbs.QPSInit, verbs.QPSRTR}, {verbs.QPSRTR, verbs.QPSRTS}} {
		if !r.modify(p, "A", a, b, addr, st[0], st[1]) || !r.modify(p, "B", b, a, addr, st[0], st[1]) {
			return res
		}
		gotA, okA := r.expectState(p, "A", a, st[1])
		res.Walk = append(res.Walk, gotA.String())
		if !okA {
			return res
		}
		if _, okB := r.expectState(p, "B", b, st[1]); !okB {
			return res
		}
	}

	// Recovery: RTS→ERR→RESET, then INIT again.
	for _, st := range [][2]verbs.QPState{{verbs.QPSRTS, verbs.QPSErr}, {verbs.QPSErr, verbs.QPSReset}, {verbs.QPSReset, verbs.QPSInit}} {
		if !r.modify(p, "A", a, b, addr, st[0], st[1]) {
			return res
		}
		gotA, okA := r.expectState(p, "A", a, st[1])
		res.Walk = append(res.Walk, gotA.String())
		if !okA {
			return res
		}
	}
	res.Recovered = true
	return res
}
