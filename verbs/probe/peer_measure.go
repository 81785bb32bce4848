package probe

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/verbs"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
)

// peerHost is the host reader of a peer child: counters and rates are read
// through the same code as level 1's.
func peerHost(root string) (*sysfs.Host, error) {
	if root == "" || root == "/" {
		return sysfs.OpenLive(), nil
	}
	return sysfs.Open(root)
}

// readPeerCounters reads every counter of the session's port (PMA
// counters/ and the driver's hw_counters/) that has a value.
func readPeerCounters(r *runner) (map[string]uint64, error) {
	h, err := peerHost(r.hostRoot)
	if err != nil {
		return nil, err
	}
	cs, groups, probs := h.PortCounters(path.Join(sysfs.InfinibandClass, r.dev.Name), r.port, nil)
	if len(probs) > 0 {
		return nil, fmt.Errorf("read the counters of %s port %d: %v", r.dev.Name, r.port, probs[0])
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("%s port %d has no counters/ or hw_counters/ directory", r.dev.Name, r.port)
	}
	out := map[string]uint64{}
	for _, c := range cs {
		if c.Known {
			out[c.Group+"/"+c.Name] = c.Value
		}
	}
	return out, nil
}

// portRateGbps is the port's rate attribute; 0 when unreadable.
func portRateGbps(r *runner) float64 {
	h, err := peerHost(r.hostRoot)
	if err != nil {
		return 0
	}
	s, err := h.ReadAttr(path.Join(sysfs.InfinibandClass, r.dev.Name, "ports", strconv.Itoa(r.port), "rate"))
	if err != nil {
		return 0
	}
	pr, err := sysfs.ParseRate(s)
	if err != nil {
		return 0
	}
	return pr.Gbps
}

// rdmaWrite is peer.rdma_write: a WRITE of a seeded pattern into the
// server's region 2 through its rkey, checked by the server.
func (ps *peerSide) rdmaWrite(conn *wire.Conn, remote *wire.Endpoint) *PeerRDMAResult {
	r, n := ps.r, ps.params.MsgSize
	res := &PeerRDMAResult{Probe: newProbe(PeerWrite), Size: n}
	p := &res.Probe
	seed := uint32(time.Now().UnixNano()) | 1
	wire.Pattern(ps.region(0, n), seed)
	if !r.step(p, fmt.Sprintf("ibv_post_send RDMA_WRITE (rkey %#x, remote address %#x)", remote.RKey, remote.Addr+uint64(2*n)), func() error {
		return ps.qp.PostSend(verbs.SendWR{ID: 31, Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGEs: []verbs.SGE{ps.sge(0, n)}, RemoteAddr: remote.Addr + uint64(2*n), RKey: remote.RKey})
	}) {
		return res
	}
	wc, ok := ps.waitCompletion(p, "ibv_poll_cq send (the WRITE)", ps.sendCQ, ps.transferWait(), "")
	res.Status = wc.Status.String()
	if !ok {
		return res
	}
	var reply wire.OpReply
	if !r.step(p, "the server checks its memory", func() error {
		if err := conn.Send(wire.MsgOp, wire.Op{Kind: wire.OpCheckMemory, Seed: seed, Offset: 2 * n, Len: n}); err != nil {
			return err
		}
		return conn.Expect(0, wire.MsgOpReply, &reply)
	}) {
		return res
	}
	res.RemoteError = reply.Error
	r.note(p, "the WRITE landed intact", reply.OK, "on the server: "+reply.Error, reply.Detail)
	return res
}

// rdmaRead is peer.rdma_read: the server writes a pattern into its region
// 2, this side READs it through the rkey into region 1 and checks it.
func (ps *peerSide) rdmaRead(conn *wire.Conn, remote *wire.Endpoint) *PeerRDMAResult {
	r, n := ps.r, ps.params.MsgSize
	res := &PeerRDMAResult{Probe: newProbe(PeerRead), Size: n}
	p := &res.Probe
	seed := uint32(time.Now().UnixNano()) | 2
	var reply wire.OpReply
	if !r.step(p, "the server fills its memory", func() error {
		if err := conn.Send(wire.MsgOp, wire.Op{Kind: wire.OpFillMemory, Seed: seed, Offset: 2 * n, Len: n}); err != nil {
			return err
		}
		return conn.Expect(0, wire.MsgOpReply, &reply)
	}) {
		return res
	}
	if !r.note(p, "the server filled its memory", reply.OK, "on the server: "+reply.Error, "") {
		res.RemoteError = reply.Error
		return res
	}
	dst := ps.region(1, n)
	clear(dst)
	if !r.step(p, fmt.Sprintf("ibv_post_send RDMA_READ (rkey %#x, remote address %#x)", remote.RKey, remote.Addr+uint64(2*n)), func() error {
		return ps.qp.PostSend(verbs.SendWR{ID: 32, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
			SGEs: []verbs.SGE{ps.sge(1, n)}, RemoteAddr: remote.Addr + uint64(2*n), RKey: remote.RKey})
	}) {
		return res
	}
	wc, ok := ps.waitCompletion(p, "ibv_poll_cq send (the READ)", ps.sendCQ, ps.transferWait(), "")
	res.Status = wc.Status.String()
	if !ok {
		return res
	}
	at := wire.PatternMismatch(dst, seed)
	r.note(p, "the READ brought the server's bytes", at < 0, fmt.Sprintf("the data read differs from byte %d on", at), "")
	return res
}

// latencySize is the message of the latency ping-pong: small, so the
// round trip is the path's and not the copy's.
const latencySize = 64

// echoBatchMax bounds the round trips of one OpEcho. Each batch ends on
// the control connection, where both processes idle, and the round trips
// after it start with a warm-up again: batches are few and long.
const echoBatchMax = 1000

// echoEstimate is the first batch's size: its round trips estimate the
// round trip, so the measured batches fit the budget; they are not
// counted.
const echoEstimate = 10

// latencyWarmup is how long the round trips that open a measured batch
// run uncounted. Both processes were idle on the control connection before
// it, and the Go runtime's monitor then polls every 20 µs for its first 50
// ticks before it backs off to 10 ms; on a one-CPU host each of its
// wake-ups preempts the ping-pong. Between the VM suite's two guests the
// first 110 round trips after the connection idled saw 190 of them, the
// next 400 about 50.
const latencyWarmup = 150 * time.Millisecond

// latency is peer.latency: SEND ping-pong with the server echoing, timed
// from ibv_post_send to the answer's receive completion. A first batch
// estimates the round trip, so the rest — each batch opened by a warm-up
// of latencyWarmup — fits the budget.
func (ps *peerSide) latency(conn *wire.Conn, preq *PeerRequest) *PeerLatencyResult {
	r := ps.r
	n := min(latencySize, ps.params.MsgSize)
	res := &PeerLatencyResult{Probe: newProbe(PeerLatency), Size: n, IterationsAsked: preq.Iterations}
	p := &res.Probe
	budgetEnd := time.Now().Add(time.Duration(preq.LatencyBudgetNS))
	if half := time.Now().Add(time.Until(r.deadline) / 2); half.Before(budgetEnd) {
		budgetEnd = half
	}
	est, ok := ps.echoBatch(conn, p, n, 0, min(preq.Iterations, echoEstimate), res)
	res.Warmup = len(est)
	var lat []time.Duration
	for left := preq.Iterations; ok && left > 0 && time.Now().Before(budgetEnd); {
		// Batches are sized to half of what the median so far says fits
		// after their warm-up: a path that slows down overshoots the
		// budget by less than a batch.
		med := time.Duration(max(stats(slices.Concat(est, lat)).MedNS, 1))
		warm := min(int(latencyWarmup/med)+1, echoBatchMax)
		batch := min(left, echoBatchMax, int((time.Until(budgetEnd)-time.Duration(warm)*med)/med/2))
		if batch <= 0 {
			break
		}
		var got []time.Duration
		got, ok = ps.echoBatch(conn, p, n, warm, batch, res)
		res.Warmup += min(len(got), warm)
		lat = append(lat, got[min(len(got), warm):]...)
		left -= batch
	}
	res.Latency = stats(lat)
	r.note(p, "round trips timed", len(lat) > 0 && p.Failed() == nil, "no round trip completed", fmt.Sprintf("%d of %d round trips, after %d uncounted", len(lat), preq.Iterations, res.Warmup))
	return res
}

// echoBatch runs warm+count round trips of n bytes with the server
// echoing, and returns every one's time.
func (ps *peerSide) echoBatch(conn *wire.Conn, p *Probe, n, warm, count int, res *PeerLatencyResult) ([]time.Duration, bool) {
	count += warm
	r := ps.r
	wait := r.pollWait()
	if !r.step(p, fmt.Sprintf("the server posts %d receives", count), func() error {
		if err := conn.Send(wire.MsgOp, wire.Op{Kind: wire.OpEcho, Len: n, Count: count, WaitMS: int(wait / time.Millisecond)}); err != nil {
			return err
		}
		return conn.Expect(0, wire.MsgOpReady, &wire.OpReady{})
	}) {
		return nil, false
	}
	recvWR := verbs.RecvWR{ID: 41, SGEs: []verbs.SGE{ps.sge(1, n)}}
	sendWR := verbs.SendWR{ID: 42, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGEs: []verbs.SGE{ps.mr.SGE(0, n)}}
	out := make([]time.Duration, 0, count)
	name := fmt.Sprintf("%d round trips", count)
	if warm > 0 {
		name += fmt.Sprintf(" (the first %d a warm-up)", warm)
	}
	r.begin(p, name)
	sends := sendReaper{ps: ps}
	var loopErr error
	endDataPath := ps.pace.beginDataPath()
	for i := 0; i < count && loopErr == nil; i++ {
		if i == warm && warm > 0 {
			ps.pace.onePAfterWarmup()
		}
		ps.pace.maybeYield()
		if loopErr = ps.qp.PostRecv(recvWR); loopErr != nil {
			break
		}
		t0 := time.Now()
		if loopErr = ps.qp.PostSend(sendWR); loopErr != nil {
			break
		}
		sends.outstanding++
		if loopErr = ps.pollStatus(ps.recvCQ, wait, "answer"); loopErr != nil {
			break
		}
		out = append(out, time.Since(t0))
		loopErr = sends.reap(false, wait)
	}
	if loopErr == nil {
		loopErr = sends.reap(true, wait)
	}
	endDataPath()
	st := Step{Name: name, OK: loopErr == nil, Detail: fmt.Sprintf("%d completed", len(out))}
	if loopErr != nil {
		r.fill(&st, ps.midRun(loopErr))
	}
	p.Steps = append(p.Steps, st)
	var reply wire.OpReply
	if !r.step(p, "the server's account of the echo", func() error { return conn.Expect(wait, wire.MsgOpReply, &reply) }) {
		return out, false
	}
	if !reply.OK {
		res.RemoteError = reply.Error
		r.note(p, "the server answered every round trip", false, "on the server: "+reply.Error, "")
		return out, false
	}
	return out, loopErr == nil
}

// sendReaper counts the ping-pong's signaled SENDs whose completions are
// not polled yet. The answer already proves that a request arrived, so a
// side reaps its send completions when it has nothing else to do rather
// than waiting for each on the round trip's clock (as perftest does); an
// error completion is still seen, by the next reap at the latest.
type sendReaper struct {
	ps          *peerSide
	outstanding int
}

// reap polls the send completions that are there; with all (or when half
// the send queue is outstanding) it waits for every one.
func (sr *sendReaper) reap(all bool, wait time.Duration) error {
	all = all || sr.outstanding >= peerWR/2
	for sr.outstanding > 0 {
		if all {
			if err := sr.ps.pollStatus(sr.ps.sendCQ, wait, "send"); err != nil {
				return err
			}
			sr.outstanding--
			continue
		}
		var wc [1]verbs.WC
		n, err := sr.ps.sendCQ.Poll(wc[:])
		if err != nil {
			return fmt.Errorf("send: %w", err)
		}
		if n == 0 {
			return nil
		}
		if wc[0].Status != verbs.WCSuccess {
			return &causedError{msg: fmt.Sprintf("send completed with %s", wc[0].Status), cause: wcCause(wc[0].Status)}
		}
		sr.outstanding--
	}
	return nil
}

// pollStatus waits for one completion on cq and fails on an error status.
func (ps *peerSide) pollStatus(cq *verbs.CQ, wait time.Duration, what string) error {
	wc, err := ps.pollOne(cq, wait)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if wc.Status != verbs.WCSuccess {
		return &causedError{msg: fmt.Sprintf("%s completed with %s", what, wc.Status), cause: wcCause(wc.Status)}
	}
	return nil
}

// Bandwidth run: RDMA WRITEs of each size, bandwidthDepth of them
// outstanding, for PeerRequest.BandwidthNS each (ib_write_bw's method).
var bandwidthSizes = []int{4096, 65536, 1 << 20}

const bandwidthDepth = 16

// softwareInFlight caps the bytes in flight on a software device: its
// CPU drains them at tens of MB/s, and a queue that takes longer than the
// ACK timeout to drain retransmits without any loss.
const softwareInFlight = 2 << 20

// bandwidth is peer.bandwidth. The WRITEs go into the upper half of the
// server's region, from the upper half of this side's.
func (ps *peerSide) bandwidth(remote *wire.Endpoint, remoteRate float64, preq *PeerRequest) *PeerBandwidthResult {
	r := ps.r
	res := &PeerBandwidthResult{Probe: newProbe(PeerBandwidth), Runs: []BandwidthRun{}, LocalRateGbps: preq.Host.RateGbps,
		RemoteRateGbps: remoteRate, Software: r.software}
	p := &res.Probe
	off, region := ps.params.BandwidthRegion()
	for _, size := range bandwidthSizes {
		if size > region {
			break
		}
		run, err := ps.writeRun(remote, off, region, size, time.Duration(preq.BandwidthNS))
		st := Step{Name: fmt.Sprintf("RDMA WRITE %d bytes × %d outstanding", size, run.Outstanding), OK: err == nil,
			Detail: fmt.Sprintf("%d messages in %.3f s: %.3f Gb/s", run.Messages, run.Seconds, run.Gbps)}
		if err != nil {
			r.fill(&st, ps.midRun(err))
		}
		p.Steps = append(p.Steps, st)
		if err != nil {
			break
		}
		res.Runs = append(res.Runs, run)
	}
	return res
}

// writeRun keeps bandwidthDepth WRITEs of size bytes outstanding for d,
// then drains them; every wait for a completion ends at the poll wait.
func (ps *peerSide) writeRun(remote *wire.Endpoint, off, region, size int, d time.Duration) (BandwidthRun, error) {
	depth := bandwidthDepth
	if ps.r.software {
		depth = max(1, min(depth, softwareInFlight/size))
	}
	run := BandwidthRun{Size: size, Outstanding: depth}
	slots := max(region/size, 1)
	next := 0
	post := func() error {
		o := off + (next%slots)*size
		next++
		return ps.qp.PostSend(verbs.SendWR{ID: uint64(next), Opcode: verbs.WRRDMAWrite, Flags: verbs.SendSignaled,
			SGEs: []verbs.SGE{ps.mr.SGE(o, size)}, RemoteAddr: remote.Addr + uint64(o), RKey: remote.RKey})
	}
	t0 := time.Now()
	end := t0.Add(d)
	outstanding := 0
	for ; outstanding < depth; outstanding++ {
		if err := post(); err != nil {
			return run, err
		}
	}
	wcs := make([]verbs.WC, bandwidthDepth)
	wait := ps.r.pollWait()
	lastProgress := time.Now()
	for outstanding > 0 {
		k, err := ps.sendCQ.Poll(wcs)
		if err != nil {
			return run, err
		}
		now := time.Now()
		if k == 0 {
			ps.yieldBetweenPolls()
			if now.Sub(lastProgress) > wait {
				return run, &causedError{msg: fmt.Sprintf("no WRITE completed within %v with %d outstanding", wait.Round(time.Millisecond), outstanding),
					cause: "the peer stopped acknowledging under load: packets above some size are dropped on the path (an MTU mismatch), or the fabric drops under load (PFC missing)"}
			}
			continue
		}
		lastProgress = now
		for _, wc := range wcs[:k] {
			if wc.Status != verbs.WCSuccess {
				return run, &causedError{msg: fmt.Sprintf("a %d-byte WRITE completed with %s", size, wc.Status), cause: wcCause(wc.Status)}
			}
			outstanding--
			run.Messages++
			if now.Before(end) {
				if err := post(); err != nil {
					return run, err
				}
				outstanding++
			}
		}
	}
	run.Seconds = time.Since(t0).Seconds()
	run.Gbps = float64(run.Messages) * float64(size) * 8 / run.Seconds / 1e9
	return run, nil
}

// counterSnapshot reads both sides' counters: this side's here, the
// server's through an OpCounters.
func (ps *peerSide) counterSnapshot(conn *wire.Conn) (local, remote map[string]uint64, localErr, remoteErr string) {
	if cs, err := readPeerCounters(ps.r); err != nil {
		localErr = err.Error()
	} else {
		local = cs
	}
	var reply wire.OpReply
	err := conn.Send(wire.MsgOp, wire.Op{Kind: wire.OpCounters})
	if err == nil {
		err = conn.Expect(0, wire.MsgOpReply, &reply)
	}
	switch {
	case err != nil:
		remoteErr = err.Error()
	case !reply.OK:
		remoteErr = reply.Error
	default:
		remote = reply.Counters
	}
	return local, remote, localErr, remoteErr
}

// counterPairs lists the counters read both times, by name.
func counterPairs(before, after map[string]uint64) []PeerCounter {
	out := []PeerCounter{}
	for name, b := range before {
		if a, ok := after[name]; ok {
			out = append(out, PeerCounter{Name: name, Before: b, After: a})
		}
	}
	slices.SortFunc(out, func(a, b PeerCounter) int { return strings.Compare(a.Name, b.Name) })
	return out
}
