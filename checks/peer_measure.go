package checks

import (
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

var peerWriteExplain = Explanation{
	Judges: "An RDMA WRITE of --size bytes of a seeded pattern into the peer's memory region, addressed with the address and rkey " +
		"the peer sent; the peer compares its memory with the pattern. The completion status names a refusal (IBV_WC_REM_ACCESS_ERR: " +
		"a wrong rkey, an address outside the region, a region without remote write).",
	Why: "\"The QP connects but WRITE fails\": SEND needs no remote key, WRITE and READ do; storage and collective libraries move " +
		"their data with them.",
}

var peerReadExplain = Explanation{
	Judges: "The peer writes a seeded pattern into its region; this side READs it with RDMA READ through the peer's rkey and compares.",
	Why:    "READ needs remote read access and the responder's read resources (max_dest_rd_atomic): a fabric where WRITE works can still fail READ.",
}

// peerRDMA is the findings of peer.rdma_write or peer.rdma_read.
type peerRDMA struct {
	child                        peerChild
	intact, remoteAccess, failed *Finding
}

// declarePeerRDMA declares the findings of the check of one RDMA verb
// ("WRITE", "READ").
func declarePeerRDMA(id, verb string) *peerRDMA {
	flag, bw := "IBV_ACCESS_REMOTE_"+verb, "ib_"+strings.ToLower(verb)+"_bw"
	return &peerRDMA{
		child: declarePeerChild(id),
		intact: declare(Finding{ID: id + "/intact", Status: report.Pass,
			When:    "the RDMA " + verb + " completed and the data arrived intact",
			Message: "{pair}: {size}-byte RDMA " + verb + " intact"}),
		remoteAccess: declare(Finding{ID: id + "/remote-access", Status: report.Fail,
			When:    "the " + verb + " completed with IBV_WC_REM_ACCESS_ERR: the peer refused the access",
			Message: "{pair}: {step} — the QP connects but " + verb + " fails",
			Fix: "The peer refused remote access: the rkey, the address or the region's access flags (" + flag +
				") do not match; compare with `" + bw + "` between the hosts."}),
		failed: declare(Finding{ID: id + "/failed", Status: report.Fail,
			When:    "the " + verb + " completed with another error status, or the data differs from the pattern",
			Message: "{pair}: {step}",
			Fix:     "Compare with `" + bw + " -d <dev> -x <gid index>` on the peer and the same with the peer's address here."}),
	}
}

var (
	peerWrite = declarePeerRDMA(probe.PeerWrite, "WRITE")
	peerRead  = declarePeerRDMA(probe.PeerRead, "READ")
)

func (c *peerRDMA) judge(p *peer.Pair, r *probe.PeerRDMAResult) verdict {
	if p.Verbs == nil || r == nil {
		return c.child.verdict(p)
	}
	name := pairName(p)
	slots := Slots{"pair": name}
	ev := map[string]any{"size": r.Size, "status": r.Status, "duration_ms": r.Millis}
	var v verdict
	switch st := r.Failed(); {
	case st != nil && strings.Contains(r.Status, "REM_ACCESS"):
		ev["failed_step"] = st
		v = c.remoteAccess.unit(name, slots.with("step", stepText(st)))
	case st != nil:
		ev["failed_step"] = st
		v = c.failed.unit(name, slots.with("step", stepText(st)))
	default:
		v = c.intact.unit(name, slots.with("size", fmt.Sprint(r.Size)))
	}
	v.evidence = ev
	return v
}

func judgePeerWrite(p *peer.Pair) verdict {
	if p.Verbs == nil {
		return peerWrite.child.verdict(p)
	}
	return peerWrite.judge(p, p.Verbs.Write)
}

func judgePeerRead(p *peer.Pair) verdict {
	if p.Verbs == nil {
		return peerRead.child.verdict(p)
	}
	return peerRead.judge(p, p.Verbs.Read)
}

var peerLatencyExplain = Explanation{
	Judges: "Up to 1000 round trips of a 64-byte SEND answered by the peer with a SEND (within 2 s), timed from ibv_post_send to the " +
		"answer's receive completion: min, median and p99. On hardware a p99 more than 10× the median warns (a tail of retransmissions " +
		"or pauses); software devices (rxe, siw) are reported, not judged.",
	Why: "A path that works but stalls now and then is what makes collective operations slow; the tail says more than the mean.",
}

// peer.latency's findings.
var (
	peerLatencyChild    = declarePeerChild(probe.PeerLatency)
	peerLatencyMeasured = declare(Finding{ID: "peer.latency/measured", Status: report.Pass,
		When: "the round trips completed, the tail within 10× the median", Message: "{pair}: {stats}"})
	peerLatencySoftware = declare(Finding{ID: "peer.latency/software", Status: report.Pass,
		When:    "the round trips completed on a software device (rxe, siw): reported, not judged",
		Message: "{pair}: {stats} (software device: the host CPU's timing, not a NIC's)"})
	peerLatencyTail = declare(Finding{ID: "peer.latency/long-tail", Status: report.Warn,
		When:    "on hardware, the p99 round trip is above 10× the median",
		Message: "{pair}: {stats} — the tail is {ratio}× the median",
		Fix: "A long tail is retransmissions or pauses on the path: see peer.counters, and check PFC/ECN on the traffic's priority " +
			"(`rdmadoctor` roce.lossless on both hosts)."})
	peerLatencyFailed = declare(Finding{ID: "peer.latency/failed", Status: report.Fail,
		When:    "a round trip did not complete: the step names the direction",
		Message: "{pair}: {step}",
		Fix:     "Compare with `ib_send_lat` between the hosts; the counters of both ports (peer.counters) show retransmissions."})
)

// latencyTail is the p99/median ratio past which a hardware path warns.
const latencyTail = 10

func judgePeerLatency(p *peer.Pair) verdict {
	if p.Verbs == nil || p.Verbs.Latency == nil {
		return peerLatencyChild.verdict(p)
	}
	name := pairName(p)
	slots := Slots{"pair": name}
	r := p.Verbs.Latency
	l := r.Latency
	ev := map[string]any{"size": r.Size, "iterations_asked": r.IterationsAsked, "warmup_round_trips": r.Warmup, "latency_ns": l, "duration_ms": r.Millis}
	us := func(ns float64) string { return fmt.Sprintf("%.1f µs", ns/1000) }
	stats := fmt.Sprintf("%d round trips of %d bytes: min %s, median %s, p99 %s", l.N, r.Size, us(l.MinNS), us(l.MedNS), us(l.P99NS))
	var v verdict
	switch st := r.Failed(); {
	case st != nil:
		ev["failed_step"] = st
		v = peerLatencyFailed.unit(name, slots.with("step", stepText(st)))
	case softwarePair(p):
		v = peerLatencySoftware.unit(name, slots.with("stats", stats))
	case l.N >= 100 && l.MedNS > 0 && l.P99NS > latencyTail*l.MedNS:
		v = peerLatencyTail.unit(name, slots.with("stats", stats, "ratio", fmt.Sprintf("%.0f", l.P99NS/l.MedNS)))
	default:
		v = peerLatencyMeasured.unit(name, slots.with("stats", stats))
	}
	v.evidence = ev
	return v
}

// softwarePair says whether either side is a software device.
func softwarePair(p *peer.Pair) bool {
	if p.Verbs == nil || p.Verbs.Connect == nil {
		return false
	}
	c := p.Verbs.Connect
	return (c.Local != nil && c.Local.Software) || (c.Remote != nil && c.Remote.Software)
}

var peerBandwidthExplain = Explanation{
	Judges: "RDMA WRITEs with 16 outstanding, of 4 KiB, 64 KiB and 1 MiB (those that fit half the session's buffer), half a second " +
		"each, as ib_write_bw does; the best rate is set beside the slower port's rate (the rate attribute of each side). On hardware " +
		"below half the slower port's rate warns; software devices and ports of unknown rate are reported, not judged.",
	Why: "A path that delivers a fraction of its rate has a slow hop, a lossy link retransmitting, or flow control pausing it.",
}

// peer.bandwidth's findings.
const peerBandwidthFailFix = "Compare with `ib_write_bw` between the hosts; the counters of both ports (peer.counters) name what the path dropped."

var (
	peerBandwidthChild  = declarePeerChild(probe.PeerBandwidth)
	peerBandwidthFailed = declare(Finding{ID: "peer.bandwidth/failed", Status: report.Fail,
		When:    "a WRITE completed in error or none completed in time under load: the path drops what single messages survive",
		Message: "{pair}: {step}", Fix: peerBandwidthFailFix})
	peerBandwidthFailedMTU = declare(Finding{ID: "peer.bandwidth/failed-mtu-mismatch", Status: report.Fail,
		When:    "the WRITEs failed under load and the two netdevs' MTUs differ",
		Message: "{pair}: {step} — likely an MTU mismatch: netdev MTU {mtu} here, {peer_mtu} on the peer", Fix: peerBandwidthFailFix})
	peerBandwidthNoSize = declare(Finding{ID: "peer.bandwidth/no-size", Status: report.Error,
		When:    "no message size fitted the session's buffer: nothing was measured",
		Message: "{pair}: no message size fitted the session's buffer"})
	peerBandwidthSoftware = declare(Finding{ID: "peer.bandwidth/software", Status: report.Pass,
		When:    "a software device (rxe, siw): the rate is reported, not judged",
		Message: "{pair}: RDMA WRITE {runs} (software device: no NIC's rate to compare)"})
	peerBandwidthRateUnknown = declare(Finding{ID: "peer.bandwidth/rate-unknown", Status: report.Pass,
		When:    "neither port's rate is known: the rate is reported, not judged",
		Message: "{pair}: RDMA WRITE {runs} (port rates unknown: not compared)"})
	peerBandwidthMeasured = declare(Finding{ID: "peer.bandwidth/measured", Status: report.Pass,
		When:    "the best rate is at least half the slower port's rate",
		Message: "{pair}: RDMA WRITE {runs} — {percent}% of the slower port's {slower} Gb/s"})
	peerBandwidthBelowHalf = declare(Finding{ID: "peer.bandwidth/below-half-rate", Status: report.Warn,
		When:    "on hardware, the best rate is below half the slower port's rate",
		Message: "{pair}: RDMA WRITE {runs} — {percent}% of the slower port's {slower} Gb/s",
		Fix: "Compare with `ib_write_bw` between the hosts; check each side's PCIe link (pci.link), port width and speed, " +
			"and peer.counters for retransmissions and pauses."})
)

// bandwidthFloor is the fraction of the slower port's rate below which a
// hardware pair warns.
const bandwidthFloor = 0.5

func judgePeerBandwidth(p *peer.Pair) verdict {
	if p.Verbs == nil || p.Verbs.Bandwidth == nil {
		return peerBandwidthChild.verdict(p)
	}
	r := p.Verbs.Bandwidth
	ev := map[string]any{"runs": r.Runs, "local_rate_gbps": r.LocalRateGbps, "remote_rate_gbps": r.RemoteRateGbps, "duration_ms": r.Millis}
	v := judgeBandwidthRuns(p, r, ev)
	v.evidence = ev
	return v
}

// judgeBandwidthRuns judges the runs: the best rate beside the slower
// port's, on hardware whose rates are known.
func judgeBandwidthRuns(p *peer.Pair, r *probe.PeerBandwidthResult, ev map[string]any) verdict {
	name := pairName(p)
	slots := Slots{"pair": name}
	if st := r.Failed(); st != nil {
		ev["failed_step"] = st
		if mtuMismatch(p) {
			c := p.Verbs.Connect
			return peerBandwidthFailedMTU.unit(name, slots.with("step", stepText(st),
				"mtu", fmt.Sprint(c.Local.NetdevMTU), "peer_mtu", fmt.Sprint(c.Remote.NetdevMTU)))
		}
		return peerBandwidthFailed.unit(name, slots.with("step", stepText(st)))
	}
	if len(r.Runs) == 0 {
		return peerBandwidthNoSize.unit(name, slots)
	}
	best := r.Runs[0]
	var parts []string
	for _, run := range r.Runs {
		parts = append(parts, fmt.Sprintf("%s %.2f Gb/s", sizeName(run.Size), run.Gbps))
		if run.Gbps > best.Gbps {
			best = run
		}
	}
	slots["runs"] = strings.Join(parts, ", ")
	slower := minKnown(r.LocalRateGbps, r.RemoteRateGbps)
	ev["slower_rate_gbps"] = slower
	switch {
	case softwarePair(p) || r.Software:
		return peerBandwidthSoftware.unit(name, slots)
	case slower <= 0:
		return peerBandwidthRateUnknown.unit(name, slots)
	}
	frac := best.Gbps / slower
	ev["fraction_of_rate"] = frac
	slots = slots.with("percent", fmt.Sprintf("%.0f", 100*frac), "slower", fmt.Sprintf("%g", slower))
	if frac < bandwidthFloor {
		return peerBandwidthBelowHalf.unit(name, slots)
	}
	return peerBandwidthMeasured.unit(name, slots)
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func minKnown(a, b float64) float64 {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

var peerCountersExplain = Explanation{
	Judges: "Both sides' port counters (the PMA counters/ and the driver's hw_counters/, read as counters.errors reads them) " +
		"before the first transfer of the session and after the last one (the measuring checks that stopped early included). An error counter of counters.errors' table that rose fails; a protocol statistic that " +
		"rose warns with its cause: retransmissions and sequence errors (out_of_sequence, packet_seq_err, duplicate_request, " +
		"rxe's rcvd_seq_err, out_of_seq_request, retry_exceeded_err) mean packets were lost — a lossy fabric, PFC missing or not on " +
		"the traffic's priority; congestion notifications (CNPs) and port_xmit_wait mean congestion. Traffic counters are not judged. " +
		"A pair whose two ends are one port (a host testing itself through its own address) counts the port once and reports, without " +
		"judging, the device's own retransmissions: no fabric lies between a port and itself.",
	Why: "RDMA over a lossy path works slowly, then not at all under load: the counters that rose during a known load say which side " +
		"dropped and why, before an application finds out.",
}

// peer.counters's findings. A pair's line names every counter that rose;
// each kind of rise is a finding of its own, with its own fix.
const peerLosslessFix = "Make the fabric lossless for RDMA: PFC on the RoCE priority on both hosts and every switch port between them, ECN for " +
	"congestion control (`rdmadoctor` roce.lossless on both hosts says what is missing)."

var (
	peerCountersChild      = declarePeerChild(probe.PeerCounters)
	peerCountersUnreadable = declare(Finding{ID: "peer.counters/unreadable", Status: report.Error,
		When:    "neither side's counters could be read: a driver without counters cannot be judged",
		Message: "{pair}: no counters on either side: here {local_error}; on the peer {remote_error}",
		Fix:     "A driver without counters cannot be judged; the other peer checks stand."})
	peerCountersQuiet = declare(Finding{ID: "peer.counters/quiet", Status: report.Pass,
		When:    "no error or congestion counter rose on either side",
		Message: "{pair}: no error or congestion counter rose during the session's transfers ({here} counters here, {there} on the peer)"})
	peerCountersQuietOneSide = declare(Finding{ID: "peer.counters/quiet-one-side", Status: report.Pass,
		When:    "one side's counters could not be read, and none of the other side's rose",
		Message: "{pair}: no error or congestion counter rose during the session's transfers ({here} counters here, {there} on the peer) — {unread}"})
	peerCountersLinkErrors = declare(Finding{ID: "peer.counters/link-errors", Status: report.Fail,
		When:    "an error counter of counters.errors' table rose during the run (symbol errors, discards, bad ICRC)",
		Message: "{counters}",
		Fix:     "An error counter names a bad cable, optic or port on its side: reseat or replace it, and compare with the switch port's counters."})
	peerCountersSendErr = declare(Finding{ID: "peer.counters/send-err", Status: report.Fail,
		When:    "send_err rose: this host's own network stack refused the device's packets",
		Message: "{counters}",
		Fix: "send_err counts packets this host's own network stack refused: look for a qdisc that drops them " +
			"(`tc -s qdisc show dev <netdev>`), the netdev down or its queue full, or frames above the netdev's MTU."})
	peerCountersLoss = declare(Finding{ID: "peer.counters/packet-loss", Status: report.Warn,
		When: "retransmission or sequence-error counters rose (out_of_sequence, packet_seq_err, duplicate_request, rcvd_seq_err, " +
			"out_of_seq_request, retry_exceeded_err): packets were lost",
		Message: "{counters} — " + lossCause, Fix: peerLosslessFix})
	peerCountersCongestion = declare(Finding{ID: "peer.counters/congestion", Status: report.Warn,
		When:    "congestion counters rose (CNPs, ECN marks, port_xmit_wait): the path is congested at this load",
		Message: "{counters} — " + congestionCause, Fix: peerLosslessFix})
	peerCountersLoopback = declare(Finding{ID: "peer.counters/loopback-retransmissions", Status: report.Pass,
		When:    "both ends are one port (a host testing itself through its own address): its retransmissions are the device's own, not judged",
		Message: "{counters} — both ends are this one port, with no fabric between them: the device's own retransmissions under load, not judged"})
)

// lossCounters and congestionCounters group the protocol statistics by
// the cause a rise points at.
var (
	lossCounters = map[string]bool{"out_of_sequence": true, "packet_seq_err": true, "duplicate_request": true, "implied_nak_seq_err": true,
		"local_ack_timeout_err": true, "rcvd_seq_err": true, "out_of_seq_request": true, "retry_exceeded_err": true, "completer_retry_err": true}
	congestionCounters = map[string]bool{"np_cnp_sent": true, "rp_cnp_handled": true, "np_ecn_marked_roce_packets": true,
		"rp_cnp_ignored": true, "port_xmit_wait": true}
)

const (
	lossCause       = "packets were lost and retransmitted: a lossy fabric — on RoCE, PFC missing or not on the traffic's priority (ECN alone does not prevent drops)"
	congestionCause = "congestion on the path (ECN marks and CNPs flowing, or the port waiting for credits)"
)

// counterSpecByName finds a counter in counters.errors' tables: the PMA
// table for counters/, any driver's table for hw_counters/.
func counterSpecByName(group, name string) (counterSpec, bool) {
	if group == "counters" {
		s, ok := pmaCounters[name]
		return s, ok
	}
	for i := range counterDrivers {
		if s, ok := counterDrivers[i].hw[name]; ok {
			return s, true
		}
	}
	return counterSpec{}, false
}

// counterRise is what rose on both sides, one phrase per counter,
// grouped by what a rise points at.
type counterRise struct{ physical, sendErr, loss, congestion []string }

// add groups one side's counters that rose; traffic counters are not judged.
func (cr *counterRise) add(side string, cs []probe.PeerCounter) {
	for _, c := range cs {
		if c.After <= c.Before {
			continue
		}
		group, name, _ := strings.Cut(c.Name, "/")
		spec, ok := counterSpecByName(group, name)
		if !ok {
			continue // traffic
		}
		d := c.After - c.Before
		switch {
		case spec.class == errorCounter && name == "send_err":
			cr.sendErr = append(cr.sendErr, fmt.Sprintf("%s %s +%d (%s)", side, name, d, spec.meaning))
		case spec.class == errorCounter:
			cr.physical = append(cr.physical, fmt.Sprintf("%s %s +%d (%s)", side, name, d, spec.meaning))
		case lossCounters[name]:
			cr.loss = append(cr.loss, fmt.Sprintf("%s %s +%d", side, name, d))
		case congestionCounters[name]:
			cr.congestion = append(cr.congestion, fmt.Sprintf("%s %s +%d", side, name, d))
		}
	}
}

// findings are the rise's findings about pair name. On a pair whose two
// ends are one port, no fabric lies between them: retransmissions there
// are the device's own under load, not a lossy network's.
func (cr *counterRise) findings(name string, loopback bool) []report.Finding {
	at := func(f *Finding, counters []string) report.Finding {
		return f.At(name, Slots{"counters": strings.Join(counters, ", ")})
	}
	var fs []report.Finding
	if len(cr.physical) > 0 {
		fs = append(fs, at(peerCountersLinkErrors, cr.physical))
	}
	if len(cr.sendErr) > 0 {
		fs = append(fs, at(peerCountersSendErr, cr.sendErr))
	}
	if loopback && len(fs) == 0 && len(cr.loss)+len(cr.congestion) > 0 {
		return append(fs, at(peerCountersLoopback, append(append([]string(nil), cr.loss...), cr.congestion...)))
	}
	if len(cr.loss) > 0 {
		fs = append(fs, at(peerCountersLoss, cr.loss))
	}
	if len(cr.congestion) > 0 {
		fs = append(fs, at(peerCountersCongestion, cr.congestion))
	}
	return fs
}

func worseOf(a, b report.Status) report.Status {
	if worse(b, a) {
		return b
	}
	return a
}

func judgePeerCounters(p *peer.Pair) verdict {
	if p.Verbs == nil || p.Verbs.Counters == nil {
		return peerCountersChild.verdict(p)
	}
	name := pairName(p)
	r := p.Verbs.Counters
	ev := map[string]any{"local": r.Local, "remote": r.Remote, "local_error": r.LocalError, "remote_error": r.RemoteError}
	slots := Slots{"pair": name}
	if r.LocalError != "" && r.RemoteError != "" {
		v := peerCountersUnreadable.unit(name, slots.with("local_error", r.LocalError, "remote_error", r.RemoteError))
		v.evidence = ev
		return v
	}
	var unread []string
	if r.LocalError != "" {
		unread = append(unread, "this side's counters unread: "+r.LocalError)
	}
	if r.RemoteError != "" {
		unread = append(unread, "the peer's counters unread: "+r.RemoteError)
	}
	loopback := samePort(p)
	var rise counterRise
	rise.add("here", r.Local)
	if !loopback {
		// Both ends are this very port (a loopback through the port's
		// own address): its counters are counted once.
		rise.add("peer", r.Remote)
	}
	fs := rise.findings(name, loopback)
	if len(fs) == 0 {
		slots = slots.with("here", fmt.Sprint(len(r.Local)), "there", fmt.Sprint(len(r.Remote)))
		v := peerCountersQuiet.unit(name, slots)
		if len(unread) > 0 {
			v = peerCountersQuietOneSide.unit(name, slots.with("unread", strings.Join(unread, "; ")))
		}
		v.evidence, v.details = ev, unread
		return v
	}
	v := verdict{status: report.Pass, evidence: ev, details: unread, findings: fs}
	var texts, remedies []string
	for _, f := range fs {
		v.status = worseOf(v.status, f.Status)
		texts = append(texts, f.Message)
		if f.Fix != "" {
			remedies = appendUnique(remedies, f.Fix)
		}
	}
	v.line = name + ": rose during the session's transfers: " + strings.Join(texts, "; ")
	v.remedy = strings.Join(remedies, " ")
	return v
}

// samePort says whether the two ends of a pair are one port of one host.
func samePort(p *peer.Pair) bool {
	c := p.Verbs.Connect
	if c == nil || c.Local == nil || c.Remote == nil || c.LocalHost == nil || c.RemoteHost == nil {
		return false
	}
	return c.LocalHost.Hostname != "" && c.LocalHost.Hostname == c.RemoteHost.Hostname &&
		c.Local.Device == c.Remote.Device && c.Local.Port == c.Remote.Port && string(c.Local.GID) == string(c.Remote.GID)
}
