package probe

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// sendPoll is probe.send_poll: a loopback RC SEND of Size bytes checked in
// full (status, byte count, payload), then timed round trips, with the
// port's data counters read around the traffic.
func (r *runner) sendPoll(resourcesFailed string) *SendPollResult {
	res := &SendPollResult{Probe: newProbe(SendPoll), Software: r.software, Size: r.opts.Size,
		IterationsAsked: r.opts.Iterations}
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
	size := r.opts.Size

	pd, ok := r.allocPD(p, s)
	if !ok {
		return res
	}
	// One buffer, two halves: A sends from the first, B receives into the
	// second, so the payload comparison means something.
	var buf *verbs.Buffer
	if !r.step(p, "mmap page-aligned buffer", func() (err error) { buf, err = verbs.NewBuffer(2 * size); return err }) {
		return res
	}
	s.td.push("munmap buffer", buf.Free)
	r.info.MRBytes = buf.Len()
	var mr *verbs.MR
	if !r.step(p, "ibv_reg_mr", func() (err error) {
		mr, err = pd.RegMR(buf, 0, 2*size, verbs.AccessLocalWrite)
		return err
	}) {
		return res
	}
	s.td.push("ibv_dereg_mr", mr.Dereg)
	l, ok := r.rcLoopback(p, s, pd)
	if l != nil {
		res.Addressing = l.addr.report(verbs.LinkLayerName(s.port.LinkLayer))
	}
	if !ok {
		return res
	}

	before, cerr := r.readCounters()

	send := buf.Bytes()[:size]
	recv := buf.Bytes()[size : 2*size]
	for i := range send {
		send[i] = byte(i*7 + 3)
	}
	clear(recv)
	sendWR := verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGEs: []verbs.SGE{mr.SGE(0, size)}}
	recvWR := verbs.RecvWR{ID: 2, SGEs: []verbs.SGE{mr.SGE(size, size)}}
	if !r.step(p, "ibv_post_recv B", func() error { return l.b.PostRecv(recvWR) }) ||
		!r.step(p, "ibv_post_send A", func() error { return l.a.PostSend(sendWR) }) {
		return res
	}
	var swc, rwc verbs.WC
	if !r.step(p, "ibv_poll_cq A (send completion)", func() (err error) { swc, err = pollOne(l.cqA, r.pollWait()); return err }) {
		return res
	}
	res.SendStatus = swc.Status.String()
	if !r.note(p, "send completion IBV_WC_SUCCESS", swc.Status == verbs.WCSuccess,
		fmt.Sprintf("send completed with %s (vendor error %#x)", swc.Status, swc.VendorErr), "") {
		// The finding is made: a receive completion, if one comes at
		// all after a failed SEND, would change nothing, and waiting
		// for it would spend the port's time.
		return res
	}
	if !r.step(p, "ibv_poll_cq B (receive completion)", func() (err error) { rwc, err = pollOne(l.cqB, r.pollWait()); return err }) {
		return res
	}
	res.RecvStatus = rwc.Status.String()
	res.ByteLen = rwc.ByteLen
	if !r.note(p, "receive completion IBV_WC_SUCCESS", rwc.Status == verbs.WCSuccess,
		fmt.Sprintf("receive completed with %s (vendor error %#x)", rwc.Status, rwc.VendorErr), "") {
		return res
	}
	r.note(p, "receive byte_len", int(rwc.ByteLen) == size,
		fmt.Sprintf("byte_len %d, sent %d", rwc.ByteLen, size), "")
	res.PayloadOK = bytes.Equal(send, recv)
	if !r.note(p, "payload received intact", res.PayloadOK, payloadDiff(send, recv), "") {
		return res
	}
	res.BytesSent = uint64(size)

	n := r.timedRoundTrips(p, l, sendWR, recvWR, r.opts.Iterations, r.opts.IterationBudget, &res.Latency, &res.PostSendCPU)
	res.BytesSent += uint64(n) * uint64(size)

	after, cerr2 := r.readCounters()
	switch {
	case cerr != nil:
		res.CountersError = cerr.Error()
	case cerr2 != nil:
		res.CountersError = cerr2.Error()
	default:
		res.Counters = counterDeltas(before, after)
	}
	return res
}

// rcLoop is two RC QPs of one port connected to each other, each on a CQ
// of its own: A sends, B receives.
type rcLoop struct {
	cqA, cqB *verbs.CQ
	a, b     *verbs.QP
	addr     *address
}

// cqPair creates CQs A and B of probeCQE entries (within the device's
// limit), each pushed on the session's teardown.
func (r *runner) cqPair(p *Probe, s *session) (a, b *verbs.CQ, ok bool) {
	cqe := clamp(probeCQE, int(s.attr.MaxCQE))
	if !r.step(p, "ibv_create_cq A", func() (err error) { a, err = s.ctx.CreateCQ(cqe, nil, 0); return err }) {
		return nil, nil, false
	}
	s.td.push("ibv_destroy_cq A", a.Destroy)
	if !r.step(p, "ibv_create_cq B", func() (err error) { b, err = s.ctx.CreateCQ(cqe, nil, 0); return err }) {
		return nil, nil, false
	}
	s.td.push("ibv_destroy_cq B", b.Destroy)
	return a, b, true
}

// rcLoopback creates the CQs and QPs of an rcLoop on pd, resolves the
// port's loopback address and connects the QPs (RESET→INIT→RTR→RTS), each
// object pushed on the session's teardown. l is nil when the address was
// not resolved.
func (r *runner) rcLoopback(p *Probe, s *session, pd *verbs.PD) (*rcLoop, bool) {
	l := &rcLoop{}
	var ok bool
	if l.cqA, l.cqB, ok = r.cqPair(p, s); !ok {
		return nil, false
	}
	if l.a, ok = r.createRC(p, s, pd, "A", l.cqA, l.cqA, probeWR); !ok {
		return nil, false
	}
	if l.b, ok = r.createRC(p, s, pd, "B", l.cqB, l.cqB, probeWR); !ok {
		return nil, false
	}
	if !r.step(p, "resolve loopback address", func() (err error) { l.addr, err = r.resolve(s); return err }) {
		return nil, false
	}
	// Past this point l is returned even on failure: its address tells
	// the report how the QPs were to reach each other.
	return l, r.connect(p, l.a, l.b, l.addr)
}

// timedRoundTrips times up to iterations round trips of sendWR from A into
// recvWR on B, from ibv_post_send to both completions polled, within
// budget (and half the port's time left), into lat; cpu gets the time of
// the ibv_post_send call alone, which is the CPU cost of building the WQE
// and ringing the doorbell, not the NIC's latency. It records the step
// "timed round trips" and returns how many completed.
func (r *runner) timedRoundTrips(p *Probe, l *rcLoop, sendWR verbs.SendWR, recvWR verbs.RecvWR, iterations int,
	budget time.Duration, lat, cpu *Stats) int {
	r.begin(p, "timed round trips")
	lats := make([]time.Duration, 0, iterations)
	cpus := make([]time.Duration, 0, iterations)
	budgetEnd := time.Now().Add(budget)
	if d := time.Until(r.deadline) / 2; d < budget {
		budgetEnd = time.Now().Add(d)
	}
	wait := r.pollWait()
	var loopErr error
	for i := 0; i < iterations && time.Now().Before(budgetEnd); i++ {
		if err := l.b.PostRecv(recvWR); err != nil {
			loopErr = err
			break
		}
		t1 := time.Now()
		err := l.a.PostSend(sendWR)
		t2 := time.Now()
		if err != nil {
			loopErr = err
			break
		}
		if loopErr = pollBoth(l, i+1, budgetEnd.Add(wait), wait); loopErr != nil {
			break
		}
		t3 := time.Now()
		lats = append(lats, t3.Sub(t1))
		cpus = append(cpus, t2.Sub(t1))
	}
	*lat, *cpu = stats(lats), stats(cpus)
	st := Step{Name: "timed round trips", OK: loopErr == nil && len(lats) > 0,
		Detail: fmt.Sprintf("%d of %d round trips", len(lats), iterations)}
	if loopErr != nil {
		r.fill(&st, loopErr)
	} else if len(lats) == 0 {
		st.Error = "no round trip fitted in the time budget"
	}
	p.Steps = append(p.Steps, st)
	return len(lats)
}

// pollBoth busy-polls A's and B's CQs until each yields its completion of
// round trip n, successful, or until the time is past end (the budget's
// end plus one wait).
func pollBoth(l *rcLoop, n int, end time.Time, wait time.Duration) error {
	gotS, gotR := false, false
	for !(gotS && gotR) {
		var err error
		if !gotS {
			if gotS, err = pollDone(l.cqA, n, "send"); err != nil {
				return err
			}
		}
		if !gotR {
			if gotR, err = pollDone(l.cqB, n, "receive"); err != nil {
				return err
			}
		}
		if time.Now().After(end) {
			return fmt.Errorf("round trip %d: no completion within %v", n, wait.Round(time.Millisecond))
		}
	}
	return nil
}

// pollDone polls cq once: true when it held a successful completion.
func pollDone(cq *verbs.CQ, n int, what string) (bool, error) {
	var wc [1]verbs.WC
	k, err := cq.Poll(wc[:])
	if err != nil || k == 0 {
		return false, err
	}
	if wc[0].Status != verbs.WCSuccess {
		return false, fmt.Errorf("round trip %d: %s completed with %s", n, what, wc[0].Status)
	}
	return true, nil
}

func payloadDiff(want, got []byte) string {
	for i := range want {
		if i >= len(got) || want[i] != got[i] {
			return fmt.Sprintf("payload differs from byte %d on", i)
		}
	}
	return ""
}

// stats summarises durations: min, median, 99th percentile (nearest
// rank), max and mean.
func stats(ds []time.Duration) Stats {
	if len(ds) == 0 {
		return Stats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	rank := func(q float64) time.Duration {
		i := int(q*float64(len(s))+0.999999) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(s) {
			i = len(s) - 1
		}
		return s[i]
	}
	return Stats{
		N: len(s), MinNS: float64(s[0]), MedNS: float64(rank(0.5)), P99NS: float64(rank(0.99)),
		MaxNS: float64(s[len(s)-1]), MeanNS: float64(sum) / float64(len(s)),
	}
}

// portCounters are the sysfs counters read around the traffic: the PMA
// data counters count 4-byte words.
var portCounters = []struct {
	file   string
	name   string
	factor uint64
	unit   string
}{
	{"counters/port_xmit_data", "port_xmit_data", 4, "bytes"},
	{"counters/port_rcv_data", "port_rcv_data", 4, "bytes"},
	{"counters/port_xmit_packets", "port_xmit_packets", 1, "packets"},
	{"counters/port_rcv_packets", "port_rcv_packets", 1, "packets"},
	{"hw_counters/sent_pkts", "sent_pkts", 1, "packets"},
	{"hw_counters/rcvd_pkts", "rcvd_pkts", 1, "packets"},
}

// readCounters reads whichever of portCounters the port has.
func (r *runner) readCounters() (map[string]uint64, error) {
	dir := filepath.Join(r.opts.SysfsRoot, "class/infiniband", r.dev.Name, "ports", strconv.Itoa(r.port))
	out := map[string]uint64{}
	var errs []string
	for _, c := range portCounters {
		v, err := readSmall(filepath.Join(dir, c.file))
		if err != nil {
			continue // absent on this device
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %q", c.file, v))
			continue
		}
		out[c.name] = n
	}
	if len(out) == 0 {
		if len(errs) > 0 {
			return nil, errors.New("unreadable counters: " + strings.Join(errs, ", "))
		}
		return nil, fmt.Errorf("%s has none of port_xmit_data, port_rcv_data, sent_pkts, rcvd_pkts", dir)
	}
	return out, nil
}

func counterDeltas(before, after map[string]uint64) []CounterDelta {
	var out []CounterDelta
	for _, c := range portCounters {
		b, okB := before[c.name]
		a, okA := after[c.name]
		if !okB || !okA {
			continue
		}
		d := CounterDelta{Name: c.name, Before: b * c.factor, After: a * c.factor, Unit: c.unit}
		if a >= b {
			d.Delta = (a - b) * c.factor
		}
		out = append(out, d)
	}
	return out
}
