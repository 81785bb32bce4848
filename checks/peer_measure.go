package checks

import (
	"fmt"
	"sort"
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
	Failures: []Failure{
		{report.Fail, "the WRITE completed with IBV_WC_REM_ACCESS_ERR or another error", "The peer refused the access: the rkey or address exchanged does not match a region registered with IBV_ACCESS_REMOTE_WRITE; compare with `ib_write_bw` between the hosts."},
		{report.Fail, "the peer's memory differs from what was written", "Data was corrupted on the path or in the NIC: check both sides' error counters and firmware."},
		childFailure,
	},
}

var peerReadExplain = Explanation{
	Judges: "The peer writes a seeded pattern into its region; this side READs it with RDMA READ through the peer's rkey and compares.",
	Why:    "READ needs remote read access and the responder's read resources (max_dest_rd_atomic): a fabric where WRITE works can still fail READ.",
	Failures: []Failure{
		{report.Fail, "the READ completed with IBV_WC_REM_ACCESS_ERR or another error", "The peer refused the read: its region lacks IBV_ACCESS_REMOTE_READ or the rkey does not match; compare with `ib_read_bw`."},
		{report.Fail, "the data read differs from the peer's pattern", "Data was corrupted on the path or in the NIC: check both sides' error counters."},
		childFailure,
	},
}

func judgePeerRDMA(p *peer.Pair, r *probe.PeerRDMAResult, verb string) verdict {
	name := pairName(p)
	if r == nil {
		return peerChildVerdict(p)
	}
	ev := map[string]any{"size": r.Size, "status": r.Status, "duration_ms": r.Millis}
	if st := r.Failed(); st != nil {
		ev["failed_step"] = st
		v := verdict{status: report.Fail, evidence: ev, line: fmt.Sprintf("%s: %s", name, stepText(st))}
		switch {
		case strings.Contains(r.Status, "REM_ACCESS"):
			v.line += " — the QP connects but " + verb + " fails"
			v.remedy = "The peer refused remote access: the rkey, the address or the region's access flags (IBV_ACCESS_REMOTE_WRITE/READ) do not match; compare with `ib_" + strings.ToLower(verb) + "_bw` between the hosts."
		default:
			v.remedy = "Compare with `ib_" + strings.ToLower(verb) + "_bw -d <dev> -x <gid index>` on the peer and the same with the peer's address here."
		}
		return v
	}
	return verdict{status: report.Pass, evidence: ev, line: fmt.Sprintf("%s: %d-byte RDMA %s intact", name, r.Size, verb)}
}

func judgePeerWrite(p *peer.Pair) verdict {
	if p.Verbs == nil {
		return peerChildVerdict(p)
	}
	return judgePeerRDMA(p, p.Verbs.Write, "WRITE")
}

func judgePeerRead(p *peer.Pair) verdict {
	if p.Verbs == nil {
		return peerChildVerdict(p)
	}
	return judgePeerRDMA(p, p.Verbs.Read, "READ")
}

var peerLatencyExplain = Explanation{
	Judges: "Up to 1000 round trips of a 64-byte SEND answered by the peer with a SEND (within 2 s), timed from ibv_post_send to the " +
		"answer's receive completion: min, median and p99. On hardware a p99 more than 10× the median warns (a tail of retransmissions " +
		"or pauses); software devices (rxe, siw) are reported, not judged.",
	Why: "A path that works but stalls now and then is what makes collective operations slow; the tail says more than the mean.",
	Failures: []Failure{
		{report.Fail, "a round trip did not complete", "The path stopped carrying traffic: the step names the direction."},
		{report.Warn, "p99 above 10× the median", "Look for retransmissions and pauses: `rdmadoctor peer test` reports the counters that rose (peer.counters)."},
		childFailure,
	},
}

// latencyTail is the p99/median ratio past which a hardware path warns.
const latencyTail = 10

func judgePeerLatency(p *peer.Pair) verdict {
	name := pairName(p)
	if p.Verbs == nil || p.Verbs.Latency == nil {
		return peerChildVerdict(p)
	}
	r := p.Verbs.Latency
	l := r.Latency
	ev := map[string]any{"size": r.Size, "iterations_asked": r.IterationsAsked, "warmup_round_trips": r.Warmup, "latency_ns": l, "duration_ms": r.Millis}
	if st := r.Failed(); st != nil {
		ev["failed_step"] = st
		return verdict{status: report.Fail, evidence: ev, line: fmt.Sprintf("%s: %s", name, stepText(st)),
			remedy: "Compare with `ib_send_lat` between the hosts; the counters of both ports (peer.counters) show retransmissions."}
	}
	us := func(ns float64) string { return fmt.Sprintf("%.1f µs", ns/1000) }
	line := fmt.Sprintf("%s: %d round trips of %d bytes: min %s, median %s, p99 %s", name, l.N, r.Size, us(l.MinNS), us(l.MedNS), us(l.P99NS))
	software := softwarePair(p)
	if software {
		return verdict{status: report.Pass, evidence: ev, line: line + " (software device: the host CPU's timing, not a NIC's)"}
	}
	if l.N >= 100 && l.MedNS > 0 && l.P99NS > latencyTail*l.MedNS {
		return verdict{status: report.Warn, evidence: ev, line: line + fmt.Sprintf(" — the tail is %.0f× the median", l.P99NS/l.MedNS),
			remedy: "A long tail is retransmissions or pauses on the path: see peer.counters, and check PFC/ECN on the traffic's priority (`rdmadoctor` roce.lossless on both hosts)."}
	}
	return verdict{status: report.Pass, evidence: ev, line: line}
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
	Failures: []Failure{
		{report.Fail, "a WRITE completed in error or none completed in time under load", "Under load the path drops what single messages survive: an MTU mismatch on the path or a fabric without PFC; see peer.counters."},
		{report.Warn, "below half the slower port's rate", "Compare with `ib_write_bw` between the hosts; check the PCIe link (pci.link), the ports' width and speed, and the counters."},
		childFailure,
	},
}

// bandwidthFloor is the fraction of the slower port's rate below which a
// hardware pair warns.
const bandwidthFloor = 0.5

func judgePeerBandwidth(p *peer.Pair) verdict {
	name := pairName(p)
	if p.Verbs == nil || p.Verbs.Bandwidth == nil {
		return peerChildVerdict(p)
	}
	r := p.Verbs.Bandwidth
	ev := map[string]any{"runs": r.Runs, "local_rate_gbps": r.LocalRateGbps, "remote_rate_gbps": r.RemoteRateGbps, "duration_ms": r.Millis}
	if st := r.Failed(); st != nil {
		ev["failed_step"] = st
		v := verdict{status: report.Fail, evidence: ev, line: fmt.Sprintf("%s: %s", name, stepText(st)),
			remedy: "Compare with `ib_write_bw` between the hosts; the counters of both ports (peer.counters) name what the path dropped."}
		if note := mtuSuspect(p); note != "" {
			v.line += " — " + note
		}
		return v
	}
	if len(r.Runs) == 0 {
		return verdict{status: report.Error, evidence: ev, line: name + ": no message size fitted the session's buffer"}
	}
	best := r.Runs[0]
	var parts []string
	for _, run := range r.Runs {
		parts = append(parts, fmt.Sprintf("%s %.2f Gb/s", sizeName(run.Size), run.Gbps))
		if run.Gbps > best.Gbps {
			best = run
		}
	}
	line := fmt.Sprintf("%s: RDMA WRITE %s", name, strings.Join(parts, ", "))
	slower := minKnown(r.LocalRateGbps, r.RemoteRateGbps)
	ev["slower_rate_gbps"] = slower
	switch {
	case softwarePair(p) || r.Software:
		return verdict{status: report.Pass, evidence: ev, line: line + " (software device: no NIC's rate to compare)"}
	case slower <= 0:
		return verdict{status: report.Pass, evidence: ev, line: line + " (port rates unknown: not compared)"}
	}
	frac := best.Gbps / slower
	ev["fraction_of_rate"] = frac
	line += fmt.Sprintf(" — %.0f%% of the slower port's %g Gb/s", 100*frac, slower)
	if frac < bandwidthFloor {
		return verdict{status: report.Warn, evidence: ev, line: line,
			remedy: "Compare with `ib_write_bw` between the hosts; check each side's PCIe link (pci.link), port width and speed, and peer.counters for retransmissions and pauses."}
	}
	return verdict{status: report.Pass, evidence: ev, line: line}
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
	Failures: []Failure{
		{report.Fail, "an error counter rose during the run (symbol errors, discards, bad ICRC, send_err)", "The counter's meaning names the fault; check the cable and optics of that side."},
		{report.Warn, "retransmission or sequence-error counters rose: packets were lost", "Make the fabric lossless for RDMA: PFC on the RoCE priority on both hosts and every switch port (`rdmadoctor` roce.lossless), ECN for congestion control."},
		{report.Warn, "congestion counters rose (CNPs, port_xmit_wait)", "The path is congested at this load: ECN works if CNPs flow; check the switch's buffers and the traffic's priority."},
		{report.Error, "neither side's counters could be read", "The error names the directory; a driver without counters cannot be judged."},
		childFailure,
	},
}

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

// counterFindings is what one side's counters say: the status, one phrase
// per counter that rose, the causes named, and which kinds of counter rose
// (for the advice).
type counterFindings struct {
	status            report.Status
	rose, causes      []string
	sendErr, physical bool
}

// add merges another side's findings into f.
func (f *counterFindings) add(o counterFindings) {
	f.status = worseOf(f.status, o.status)
	f.rose = append(f.rose, o.rose...)
	for _, c := range o.causes {
		f.causes = appendUnique(f.causes, c)
	}
	f.sendErr = f.sendErr || o.sendErr
	f.physical = f.physical || o.physical
}

// judgeCounterSide judges one side's deltas.
func judgeCounterSide(side string, cs []probe.PeerCounter) counterFindings {
	f := counterFindings{status: report.Pass}
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
		case spec.class == errorCounter:
			f.status = report.Fail
			f.rose = append(f.rose, fmt.Sprintf("%s %s +%d (%s)", side, name, d, spec.meaning))
			if name == "send_err" {
				f.sendErr = true
			} else {
				f.physical = true
			}
		case lossCounters[name]:
			f.status = worseOf(f.status, report.Warn)
			f.rose = append(f.rose, fmt.Sprintf("%s %s +%d", side, name, d))
			f.causes = appendUnique(f.causes, lossCause)
		case congestionCounters[name]:
			f.status = worseOf(f.status, report.Warn)
			f.rose = append(f.rose, fmt.Sprintf("%s %s +%d", side, name, d))
			f.causes = appendUnique(f.causes, congestionCause)
		}
	}
	return f
}

func worseOf(a, b report.Status) report.Status {
	if worse(b, a) {
		return b
	}
	return a
}

func judgePeerCounters(p *peer.Pair) verdict {
	name := pairName(p)
	if p.Verbs == nil || p.Verbs.Counters == nil {
		return peerChildVerdict(p)
	}
	r := p.Verbs.Counters
	ev := map[string]any{"local": r.Local, "remote": r.Remote, "local_error": r.LocalError, "remote_error": r.RemoteError}
	if r.LocalError != "" && r.RemoteError != "" {
		return verdict{status: report.Error, evidence: ev, line: fmt.Sprintf("%s: no counters on either side: here %s; on the peer %s", name, r.LocalError, r.RemoteError),
			remedy: "A driver without counters cannot be judged; the other peer checks stand."}
	}
	remote := r.Remote
	loopback := samePort(p)
	if loopback {
		// Both ends are this very port (a loopback through the port's
		// own address): its counters are counted once.
		remote = nil
	}
	f := judgeCounterSide("here", r.Local)
	f.add(judgeCounterSide("peer", remote))
	st, rose, causes := f.status, f.rose, f.causes
	sort.Strings(causes)
	var unread []string
	if r.LocalError != "" {
		unread = append(unread, "this side's counters unread: "+r.LocalError)
	}
	if r.RemoteError != "" {
		unread = append(unread, "the peer's counters unread: "+r.RemoteError)
	}
	v := verdict{status: st, evidence: ev, details: unread}
	if len(rose) == 0 {
		v.line = fmt.Sprintf("%s: no error or congestion counter rose during the session's transfers (%d counters here, %d on the peer)", name, len(r.Local), len(r.Remote))
		if len(unread) > 0 {
			v.line += " — " + strings.Join(unread, "; ")
		}
		return v
	}
	v.line = fmt.Sprintf("%s: rose during the session's transfers: %s", name, strings.Join(rose, ", "))
	if loopback && st == report.Warn {
		// No fabric lies between a port and itself: retransmissions there
		// are the device's own under load, not a lossy network's.
		v.status = report.Pass
		v.line += " — both ends are this one port, with no fabric between them: the device's own retransmissions under load, not judged"
		return v
	}
	if len(causes) > 0 {
		v.line += " — " + strings.Join(causes, "; ")
	}
	v.remedy = countersRemedy(f)
	return v
}

// countersRemedy advises on what rose: lost or congested packets want a
// lossless fabric; send_err is the host's own network stack refusing the
// device's packets, which no switch setting cures; any other error counter
// is physical.
func countersRemedy(f counterFindings) string {
	lossy, sendErr, physical := len(f.causes) > 0, f.sendErr, f.physical
	var parts []string
	if sendErr {
		parts = append(parts, "send_err counts packets this host's own network stack refused: look for a qdisc that drops them "+
			"(`tc -s qdisc show dev <netdev>`), the netdev down or its queue full, or frames above the netdev's MTU.")
	}
	if physical {
		parts = append(parts, "An error counter names a bad cable, optic or port on its side: reseat or replace it, and compare with the switch port's counters.")
	}
	if lossy || len(parts) == 0 {
		parts = append(parts, "Make the fabric lossless for RDMA: PFC on the RoCE priority on both hosts and every switch port between them, ECN for "+
			"congestion control (`rdmadoctor` roce.lossless on both hosts says what is missing).")
	}
	return strings.Join(parts, " ")
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
