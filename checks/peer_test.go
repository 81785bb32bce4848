package checks

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func okProbe(name string) probe.Probe {
	return probe.Probe{Name: name, Steps: []probe.Step{{Name: "step", OK: true}}}
}

func failedProbe(name, step, errText string) probe.Probe {
	return probe.Probe{Name: name, Steps: []probe.Step{{Name: step, Error: errText}}}
}

func roceEndpoint(qpn uint32, netdevMTU int, software bool) *wire.Endpoint {
	return &wire.Endpoint{Device: "mlx5_0", Port: 1, LinkLayer: "Ethernet", QPN: qpn, GID: make([]byte, 16), GIDIndex: 3,
		GIDType: "RoCE v2", ActiveMTU: 4096, NetdevMTU: netdevMTU, Netdev: "eth0", Software: software}
}

// healthyPair is a pair where every check passes.
func healthyPair(target string) peer.Pair {
	rdma := func(n string) *probe.PeerRDMAResult {
		return &probe.PeerRDMAResult{Probe: okProbe(n), Size: 4096, Status: "IBV_WC_SUCCESS"}
	}
	return peer.Pair{Peer: target, Target: target, Control: peer.Control{Addr: target, Version: 1},
		Verbs: &probe.PeerResult{
			Connect:  &probe.PeerConnectResult{Probe: okProbe(probe.PeerConnect), Local: roceEndpoint(0x11, 9000, false), Remote: roceEndpoint(0x12, 9000, false), PathMTU: 4096},
			SendRecv: &probe.PeerSendRecvResult{Probe: okProbe(probe.PeerSendRecv), Size: 4096, ToPeer: true, FromPeer: true},
			Write:    rdma(probe.PeerWrite), Read: rdma(probe.PeerRead),
			Latency: &probe.PeerLatencyResult{Probe: okProbe(probe.PeerLatency), Size: 64, IterationsAsked: 1000,
				Latency: probe.Stats{N: 1000, MinNS: 2000, MedNS: 2500, P99NS: 4000}},
			Bandwidth: &probe.PeerBandwidthResult{Probe: okProbe(probe.PeerBandwidth), LocalRateGbps: 100, RemoteRateGbps: 100,
				Runs: []probe.BandwidthRun{{Size: 65536, Gbps: 90}}},
			Counters: &probe.PeerCountersResult{Probe: okProbe(probe.PeerCounters),
				Local:  []probe.PeerCounter{{Name: "counters/port_xmit_data", Before: 1, After: 1 << 30}},
				Remote: []probe.PeerCounter{{Name: "counters/symbol_error", Before: 0, After: 0}}},
			RDMACM: &probe.CMPeerResult{CMResult: probe.CMResult{Probe: okProbe(probe.RDMACM), Device: "mlx5_0", Port: 1,
				PathMTU: 4096, Size: 4096}, Listener: "192.0.2.2:40000", Remote: &wire.CMResult{OK: true}},
		}}
}

func statuses(rs []report.CheckResult) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID+"="+string(r.Status))
	}
	return strings.Join(out, " ")
}

func TestPeerReportHealthy(t *testing.T) {
	rs := PeerReport([]peer.Pair{healthyPair("a:1")})
	want := "peer.control=pass peer.connect=pass peer.send_recv=pass peer.rdma_write=pass peer.rdma_read=pass peer.latency=pass peer.bandwidth=pass peer.counters=pass peer.rdma_cm=pass"
	if got := statuses(rs); got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
	var got []unitFinding
	for _, r := range rs {
		got = append(got, unitFindings(r.Findings)...)
	}
	wantFindings := []unitFinding{{"peer.control/answered", "a:1"}, {"peer.connect/connected", "a:1"}, {"peer.send_recv/crossed", "a:1"},
		{"peer.rdma_write/intact", "a:1"}, {"peer.rdma_read/intact", "a:1"}, {"peer.latency/measured", "a:1"},
		{"peer.bandwidth/measured", "a:1"}, {"peer.counters/quiet", "a:1"}, {"peer.rdma_cm/connected", "a:1"}}
	if diff := cmp.Diff(wantFindings, got); diff != "" {
		t.Fatalf("findings (-want +got):\n%s", diff)
	}
	rep := &report.Report{Checks: rs}
	rep.Finish(false)
	if rep.ExitCode != 0 || !strings.Contains(rs[6].Summary, "90% of the slower port's 100 Gb/s") {
		t.Fatalf("exit %d, bandwidth %q", rep.ExitCode, rs[6].Summary)
	}
}

// refsOf is a verdict's findings, for cmp.Diff.
func refsOf(v verdict) []unitFinding { return unitFindings(v.findings) }

// Two pairs: one refused, one healthy. Each check has one line per pair;
// the refused pair's later checks are blocked; the worst pair decides.
func TestPeerReportWorstPairDecides(t *testing.T) {
	bad := peer.Pair{Peer: "b", Target: "b:18516", Control: peer.Control{Fault: peer.FaultRefused, Error: "connect: connection refused"}}
	rs := PeerReport([]peer.Pair{healthyPair("a:18516"), bad})
	want := []unitFinding{{"peer.control/answered", "a:18516"}, {"peer.control/refused", "b:18516"}}
	if diff := cmp.Diff(want, unitFindings(rs[0].Findings)); diff != "" || rs[0].Status != report.Fail || len(rs[0].Details) != 2 {
		t.Fatalf("control %s (-want +got):\n%s", rs[0].Status, diff)
	}
	want = []unitFinding{{"peer.connect/connected", "a:18516"}, {report.FindingBlocked, "b:18516"}}
	if diff := cmp.Diff(want, unitFindings(rs[1].Findings)); diff != "" || rs[1].Status != report.Pass {
		t.Fatalf("connect %s (-want +got):\n%s", rs[1].Status, diff)
	}
	// The blocked pair's line names it and what blocked it.
	if !strings.Contains(strings.Join(rs[1].Details, "\n"), "b:18516: blocked by peer.control") {
		t.Fatalf("connect details %q", rs[1].Details)
	}
	rep := &report.Report{Checks: rs}
	rep.Finish(false)
	if rep.ExitCode != 40 {
		t.Fatalf("exit %d, want 40", rep.ExitCode)
	}
}

// A fault's fix is rendered for the pair: the timeout's names the port.
func TestPeerControlFaults(t *testing.T) {
	for fault, want := range map[peer.ControlFault]report.Status{
		peer.FaultRefused: report.Fail, peer.FaultTimeout: report.Fail, peer.FaultToken: report.Fail,
		peer.FaultVersion: report.Fail, peer.FaultBusy: report.Error, peer.FaultNotPeer: report.Fail,
	} {
		v := judgePeerControl(&peer.Pair{Target: "h:7", Control: peer.Control{Fault: fault, Error: "e"}})
		if v.status != want || v.remedy == "" || strings.Contains(v.remedy, "{") {
			t.Errorf("%s: %s %q", fault, v.status, v.remedy)
		}
	}
	if v := judgePeerControl(&peer.Pair{Target: "h:7", Control: peer.Control{Fault: peer.FaultTimeout}}); !strings.Contains(v.remedy, "TCP 7") {
		t.Errorf("timeout remedy %q does not name the port", v.remedy)
	}
}

// Netdev MTUs that differ are named as an MTU mismatch: a warning when the
// session got through at the lower MTU, in the failure when a SEND never
// completed.
func TestPeerMTUMismatch(t *testing.T) {
	p := healthyPair("a:1")
	p.Verbs.Connect.Remote.NetdevMTU = 1500
	p.Verbs.Connect.PathMTU = 1024
	v := judgePeerConnect(&p)
	if diff := cmp.Diff(onlyFinding("peer.connect/mtu-mismatch", "a:1"), refsOf(v)); diff != "" || v.status != report.Warn {
		t.Fatalf("connect %s (-want +got):\n%s", v.status, diff)
	}
	if !strings.Contains(v.line, "MTU mismatch: netdev eth0 MTU 9000 here, eth0 MTU 1500 on the peer") {
		t.Fatalf("connect %q", v.line)
	}
	p.Verbs.SendRecv.Probe = failedProbe(probe.PeerSendRecv, "ibv_poll_cq send", "no completion within 2s")
	v = judgePeerSendRecv(&p)
	if diff := cmp.Diff(onlyFinding("peer.send_recv/mtu-mismatch", "a:1"), refsOf(v)); diff != "" ||
		!strings.Contains(v.line, "likely an MTU mismatch: netdev MTU 9000 here, 1500 on the peer") {
		t.Fatalf("send_recv %q (-want +got):\n%s", v.line, diff)
	}
}

// Both hosts at MTU 9000, a hop between them at 1500: the one-packet SEND
// crosses, the 4096-byte one never completes. The failure names a hop with
// a smaller MTU than the hosts', not an unreachable peer; with a netdev
// mismatch it stays the mismatch's; without the one-packet SEND (an older
// server) it is the plain failure, with the advice to try a smaller size.
func TestPeerSmallerMTUHop(t *testing.T) {
	p := healthyPair("a:1")
	sr := p.Verbs.SendRecv
	sr.OnePacketSize, sr.OnePacketOK = 64, true
	v := judgePeerSendRecv(&p)
	if diff := cmp.Diff(onlyFinding("peer.send_recv/crossed", "a:1"), refsOf(v)); diff != "" || !strings.Contains(v.line, "4096-byte SEND each way, after a 64-byte one") {
		t.Fatalf("healthy: %q (-want +got):\n%s", v.line, diff)
	}
	sr.Probe = failedProbe(probe.PeerSendRecv, "ibv_poll_cq send (the 4096-byte SEND to the server)", "no completion within 2s")
	v = judgePeerSendRecv(&p)
	want := "a 64-byte SEND crossed both ways, the 4096-byte one (packets of 4096 bytes of payload at path MTU 4096) did not: a hop between the hosts drops packets of that size"
	if diff := cmp.Diff(onlyFinding("peer.send_recv/smaller-mtu-hop", "a:1"), refsOf(v)); diff != "" || !strings.Contains(v.line, want) {
		t.Fatalf("hop: %q (-want +got):\n%s", v.line, diff)
	}
	p.Verbs.Connect.Remote.NetdevMTU = 1500
	if v = judgePeerSendRecv(&p); !cmp.Equal(onlyFinding("peer.send_recv/mtu-mismatch", "a:1"), refsOf(v)) {
		t.Fatalf("mismatch: %v", refsOf(v))
	}
	p.Verbs.Connect.Remote.NetdevMTU = 9000
	sr.OnePacketSize, sr.OnePacketOK = 0, false
	if v = judgePeerSendRecv(&p); !cmp.Equal(onlyFinding("peer.send_recv/no-completion-large-mtu", "a:1"), refsOf(v)) || !strings.Contains(v.remedy, "--size 512") {
		t.Fatalf("no one-packet SEND: %v / %q", refsOf(v), v.remedy)
	}
}

func TestPeerWriteRemoteAccess(t *testing.T) {
	p := healthyPair("a:1")
	p.Verbs.Write.Probe = failedProbe(probe.PeerWrite, "ibv_poll_cq send (the WRITE)", "completed with IBV_WC_REM_ACCESS_ERR")
	p.Verbs.Write.Status = "IBV_WC_REM_ACCESS_ERR"
	rs := PeerReport([]peer.Pair{p})
	if got := statuses(rs); !strings.HasPrefix(got, "peer.control=pass peer.connect=pass peer.send_recv=pass peer.rdma_write=fail peer.rdma_read=skip") {
		t.Fatalf("%s", got)
	}
	if diff := cmp.Diff(onlyFinding("peer.rdma_write/remote-access", "a:1"), unitFindings(rs[3].Findings)); diff != "" {
		t.Fatalf("write (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(onlyFinding(report.FindingBlocked, "a:1"), unitFindings(rs[4].Findings)); diff != "" {
		t.Fatalf("read (-want +got):\n%s", diff)
	}
	// The fix names the access flag the peer's MR lacks.
	if !strings.Contains(rs[3].Remedy, "IBV_ACCESS_REMOTE_WRITE") {
		t.Fatalf("write %+v", rs[3])
	}
}

func TestPeerLatencyTail(t *testing.T) {
	p := healthyPair("a:1")
	p.Verbs.Latency.Latency = probe.Stats{N: 1000, MinNS: 2000, MedNS: 2500, P99NS: 40000}
	if v := judgePeerLatency(&p); !cmp.Equal(onlyFinding("peer.latency/long-tail", "a:1"), refsOf(v)) || !strings.Contains(v.line, "16× the median") {
		t.Fatalf("hardware tail: %v %q", refsOf(v), v.line)
	}
	p.Verbs.Connect.Local.Software = true
	if v := judgePeerLatency(&p); !cmp.Equal(onlyFinding("peer.latency/software", "a:1"), refsOf(v)) {
		t.Fatalf("software tail: %v %q", refsOf(v), v.line)
	}
}

func TestPeerBandwidthFraction(t *testing.T) {
	p := healthyPair("a:1")
	p.Verbs.Bandwidth.RemoteRateGbps = 25 // the slower port
	p.Verbs.Bandwidth.Runs = []probe.BandwidthRun{{Size: 4096, Gbps: 5}, {Size: 1 << 20, Gbps: 10}}
	v := judgePeerBandwidth(&p)
	if !cmp.Equal(onlyFinding("peer.bandwidth/below-half-rate", "a:1"), refsOf(v)) ||
		!strings.Contains(v.line, "4 KiB 5.00 Gb/s, 1 MiB 10.00 Gb/s — 40% of the slower port's 25 Gb/s") {
		t.Fatalf("%v %q", refsOf(v), v.line)
	}
	p.Verbs.Bandwidth.LocalRateGbps, p.Verbs.Bandwidth.RemoteRateGbps = 0, 0
	if v := judgePeerBandwidth(&p); !cmp.Equal(onlyFinding("peer.bandwidth/rate-unknown", "a:1"), refsOf(v)) {
		t.Fatalf("%v %q", refsOf(v), v.line)
	}
}

func TestPeerCountersRising(t *testing.T) {
	p := healthyPair("a:1")
	c := p.Verbs.Counters
	// rxe on the peer retransmitting: a lossy link; its traffic counter
	// is not judged.
	c.Remote = []probe.PeerCounter{{Name: "hw_counters/rcvd_seq_err", Before: 3, After: 40}, {Name: "hw_counters/sent_pkts", Before: 1, After: 9999}}
	v := judgePeerCounters(&p)
	if !cmp.Equal(onlyFinding("peer.counters/packet-loss", "a:1"), refsOf(v)) || !strings.Contains(v.line, "peer rcvd_seq_err +37") ||
		strings.Contains(v.line, "sent_pkts") {
		t.Fatalf("loss: %v %q", refsOf(v), v.line)
	}
	// CNPs here: congestion.
	c.Remote = nil
	c.Local = []probe.PeerCounter{{Name: "hw_counters/np_cnp_sent", Before: 0, After: 12}}
	if v := judgePeerCounters(&p); !cmp.Equal(onlyFinding("peer.counters/congestion", "a:1"), refsOf(v)) || !strings.Contains(v.line, "here np_cnp_sent +12") {
		t.Fatalf("congestion: %v %q", refsOf(v), v.line)
	}
	// An error counter rising fails, with its meaning.
	c.Local = []probe.PeerCounter{{Name: "counters/symbol_error", Before: 0, After: 4}}
	if v := judgePeerCounters(&p); !cmp.Equal(onlyFinding("peer.counters/link-errors", "a:1"), refsOf(v)) || v.status != report.Fail {
		t.Fatalf("error counter: %v %q", refsOf(v), v.line)
	}
	c.LocalError, c.RemoteError = "no counters here", "no counters there"
	if v := judgePeerCounters(&p); !cmp.Equal(onlyFinding("peer.counters/unreadable", "a:1"), refsOf(v)) {
		t.Fatalf("unread: %v %q", refsOf(v), v.line)
	}
}

// A child that was killed or never answered for a check is an error
// naming why, never a pass.
func TestPeerChildFailure(t *testing.T) {
	p := healthyPair("a:1")
	p.Verbs.Latency, p.Verbs.Bandwidth, p.Verbs.Counters = nil, nil, nil
	p.Verbs.Failure = &probe.ChildFailure{Error: "the verbs child did not finish within 32s in peer.latency; it was killed", TimedOut: true}
	rs := PeerReport([]peer.Pair{p})
	if rs[5].Status != report.Error || !cmp.Equal(onlyFinding("peer.latency/child-failed", "a:1"), unitFindings(rs[5].Findings)) ||
		!strings.Contains(rs[5].Summary, "did not finish within 32s") || rs[6].Status != report.Skip {
		t.Fatalf("%s\n%+v", statuses(rs), rs[5])
	}
}

// A loopback through the port's own address: one port, counted once, and
// its retransmissions are not a fabric's.
func TestPeerCountersSamePortCountedOnce(t *testing.T) {
	p := healthyPair("a:1")
	c := p.Verbs.Connect
	c.LocalHost, c.RemoteHost = &wire.HostReport{Hostname: "n1"}, &wire.HostReport{Hostname: "n1"}
	c.Remote = c.Local
	rose := []probe.PeerCounter{{Name: "hw_counters/duplicate_request", Before: 0, After: 64}}
	p.Verbs.Counters.Local, p.Verbs.Counters.Remote = rose, rose
	v := judgePeerCounters(&p)
	if !cmp.Equal(onlyFinding("peer.counters/loopback-retransmissions", "a:1"), refsOf(v)) || v.status != report.Pass ||
		strings.Contains(v.line, "peer duplicate_request") || !strings.Contains(v.line, "here duplicate_request +64") {
		t.Fatalf("%v %q", refsOf(v), v.line)
	}
	// An error counter still fails on a loopback.
	p.Verbs.Counters.Local = []probe.PeerCounter{{Name: "hw_counters/send_err", Before: 0, After: 500}}
	if v := judgePeerCounters(&p); !cmp.Equal(onlyFinding("peer.counters/send-err", "a:1"), refsOf(v)) || v.status != report.Fail {
		t.Fatalf("send_err on a loopback: %v %q", refsOf(v), v.line)
	}
}

func TestPeerSubnets(t *testing.T) {
	p := healthyPair("a:1")
	p.Verbs.Connect.Local.Subnet, p.Verbs.Connect.Remote.Subnet = "192.0.2.1/24", "198.51.100.7/24"
	if v := judgePeerConnect(&p); !cmp.Equal(onlyFinding("peer.connect/subnets-differ", "a:1"), refsOf(v)) ||
		!strings.Contains(v.line, "different subnets (192.0.2.1/24 here, 198.51.100.7/24 on the peer)") {
		t.Fatalf("%v %q", refsOf(v), v.line)
	}
	p.Verbs.Connect.Remote.Subnet = "192.0.2.9/24"
	if v := judgePeerConnect(&p); !cmp.Equal(onlyFinding("peer.connect/connected", "a:1"), refsOf(v)) {
		t.Fatalf("same subnet: %v %q", refsOf(v), v.line)
	}
}

// A port that cannot take part (iWARP) skips peer.connect with the reason
// and blocks the rest; a skip is never a pass. peer.rdma_cm, which needs
// only peer.control, still judges the connection manager's way in.
func TestPeerConnectSkipped(t *testing.T) {
	p := peer.Pair{Peer: "a:1", Target: "a:1", Control: peer.Control{Version: 1},
		Verbs: &probe.PeerResult{Connect: &probe.PeerConnectResult{Probe: probe.Probe{Name: probe.PeerConnect, Skipped: "iWARP RC QPs connect only through rdma_cm"}},
			RDMACM: &probe.CMPeerResult{CMResult: probe.CMResult{Probe: okProbe(probe.RDMACM), Device: "irdma0", Port: 1, Size: 4096}}}}
	rs := PeerReport([]peer.Pair{p})
	if got := statuses(rs); got != "peer.control=pass peer.connect=skip peer.send_recv=skip peer.rdma_write=skip peer.rdma_read=skip peer.latency=skip peer.bandwidth=skip peer.counters=skip peer.rdma_cm=pass" {
		t.Fatal(got)
	}
	if !cmp.Equal(onlyFinding("peer.connect/skipped", "a:1"), unitFindings(rs[1].Findings)) || !strings.Contains(rs[1].Summary, "rdma_cm") ||
		!strings.Contains(rs[2].Summary, "blocked by peer.connect") {
		t.Fatalf("%v %q / %q", unitFindings(rs[1].Findings), rs[1].Summary, rs[2].Summary)
	}
}

// Ports of different active MTUs connect at the smaller, and the line says
// why the path MTU is what it is.
func TestPeerActiveMTUsDiffer(t *testing.T) {
	p := healthyPair("a:1")
	p.Verbs.Connect.Remote.ActiveMTU, p.Verbs.Connect.PathMTU = 2048, 2048
	if v := judgePeerConnect(&p); !cmp.Equal(onlyFinding("peer.connect/connected", "a:1"), refsOf(v)) ||
		!strings.Contains(v.line, "path MTU 2048 (active_mtu 4096 here, 2048 on the peer)") {
		t.Fatalf("%v %q", refsOf(v), v.line)
	}
}

// A lossy link stalls the latency run: the checks after it are blocked,
// but peer.counters (read around whatever ran) still names the counters
// that rose, so the report says why.
func TestPeerCountersJudgedWhenLatencyFails(t *testing.T) {
	p := healthyPair("a:1")
	p.Verbs.Latency.Probe = failedProbe(probe.PeerLatency, "poll_cq", "no completion within 2s")
	p.Verbs.Bandwidth = nil
	p.Verbs.Counters.Remote = []probe.PeerCounter{{Name: "hw_counters/rcvd_seq_err", Before: 0, After: 25}}
	rs := PeerReport([]peer.Pair{p})
	got := statuses(rs)
	if !strings.Contains(got, "peer.latency=fail") || !strings.Contains(got, "peer.bandwidth=skip") || !strings.Contains(got, "peer.counters=warn") {
		t.Fatalf("statuses %s", got)
	}
	r := peerResult(t, rs, probe.PeerCounters)
	if !cmp.Equal(onlyFinding("peer.counters/packet-loss", "a:1"), unitFindings(r.Findings)) || !strings.Contains(r.Summary, "rcvd_seq_err +25") {
		t.Fatalf("peer.counters does not name the counter: %v %q", unitFindings(r.Findings), r.Summary)
	}
}

// What rose decides the advice: send_err is the host's own stack refusing
// packets (a qdisc, a full queue), never the fabric's PFC; a physical
// error counter points at the cable; retransmissions at a lossy fabric.
func TestPeerCountersRemedyFollowsWhatRose(t *testing.T) {
	for _, c := range []struct {
		counter, finding, want, not string
	}{
		{"hw_counters/send_err", "peer.counters/send-err", "tc -s qdisc show", "PFC"},
		{"counters/symbol_error", "peer.counters/link-errors", "cable", "PFC"},
		{"hw_counters/rcvd_seq_err", "peer.counters/packet-loss", "PFC", "qdisc"},
	} {
		p := healthyPair("a:1")
		p.Verbs.Counters.Local = []probe.PeerCounter{{Name: c.counter, Before: 0, After: 50}}
		v := judgePeerCounters(&p)
		if !cmp.Equal(onlyFinding(c.finding, "a:1"), refsOf(v)) || !strings.Contains(v.remedy, c.want) || strings.Contains(v.remedy, c.not) {
			t.Errorf("%s: %v, remedy %q (want %q, not %q)", c.counter, refsOf(v), v.remedy, c.want, c.not)
		}
	}
}
