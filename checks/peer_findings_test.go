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

// unitFinding is what a peer test says of a finding: which, about which
// pair. The sentences are the renderer's.
type unitFinding struct{ ID, Unit string }

// onlyFinding is the single finding id about unit.
func onlyFinding(id, unit string) []unitFinding { return []unitFinding{{id, unit}} }

func unitFindings(fs []report.Finding) []unitFinding {
	var out []unitFinding
	for _, f := range fs {
		out = append(out, unitFinding{f.ID, f.Unit})
	}
	return out
}

// peerResult is check id's result in a peer report.
func peerResult(t *testing.T, rs []report.CheckResult, id string) report.CheckResult {
	t.Helper()
	for _, r := range rs {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no result of %s", id)
	return report.CheckResult{}
}

// TestPeerFindings: each pair gives check's findings named, whatever the
// words; the report's status is theirs.
func TestPeerFindings(t *testing.T) {
	const pair = "a:1"
	one := func(id string) []unitFinding { return onlyFinding(id, pair) }
	failStep := func(name, step, errText string) probe.Probe { return failedProbe(name, step, errText) }
	mismatch := func(p *peer.Pair) { p.Verbs.Connect.Remote.NetdevMTU = 1500 }
	for _, tc := range []struct {
		name  string
		check string
		edit  func(p *peer.Pair)
		want  []unitFinding
	}{
		{"healthy connect", probe.PeerConnect, func(*peer.Pair) {}, one("peer.connect/connected")},
		{"connect: a step failed here", probe.PeerConnect, func(p *peer.Pair) {
			p.Verbs.Connect.Probe = failStep(probe.PeerConnect, "ibv_modify_qp INIT→RTR", "EINVAL")
		}, one("peer.connect/step-failed")},
		{"connect: the server failed", probe.PeerConnect, func(p *peer.Pair) {
			p.Verbs.Connect.Probe = failStep(probe.PeerConnect, "the server's QP", "ibv_create_qp: ENOMEM")
			p.Verbs.Connect.RemoteError = "ibv_create_qp: ENOMEM"
		}, one("peer.connect/peer-failed")},
		{"connect: no endpoints", probe.PeerConnect, func(p *peer.Pair) { p.Verbs.Connect.Remote = nil }, one("peer.connect/no-endpoints")},
		{"connect: every difference at once", probe.PeerConnect, func(p *peer.Pair) {
			c := p.Verbs.Connect
			c.Remote.NetdevMTU = 1500
			c.Local.Subnet, c.Remote.Subnet = "192.0.2.1/24", "198.51.100.7/24"
			c.Remote.GIDType = "RoCE v1"
		}, []unitFinding{{"peer.connect/mtu-mismatch", pair}, {"peer.connect/subnets-differ", pair}, {"peer.connect/gid-not-rocev2", pair}}},
		{"send_recv crossed", probe.PeerSendRecv, func(*peer.Pair) {}, one("peer.send_recv/crossed")},
		{"send_recv: wrong payload", probe.PeerSendRecv, func(p *peer.Pair) {
			p.Verbs.SendRecv.Probe = failStep(probe.PeerSendRecv, "the 4096-byte answer arrived intact", "payload differs from byte 12")
		}, one("peer.send_recv/failed")},
		{"send_recv: no completion at path MTU 1024", probe.PeerSendRecv, func(p *peer.Pair) {
			p.Verbs.Connect.PathMTU = 1024
			p.Verbs.SendRecv.Probe = failStep(probe.PeerSendRecv, "ibv_poll_cq send", "no completion within 2s")
		}, one("peer.send_recv/failed")},
		{"send_recv: no completion at path MTU 4096", probe.PeerSendRecv, func(p *peer.Pair) {
			p.Verbs.SendRecv.Probe = failStep(probe.PeerSendRecv, "ibv_poll_cq send", "no completion within 2s")
		}, one("peer.send_recv/no-completion-large-mtu")},
		{"send_recv: netdev MTUs differ", probe.PeerSendRecv, func(p *peer.Pair) {
			mismatch(p)
			p.Verbs.SendRecv.Probe = failStep(probe.PeerSendRecv, "ibv_poll_cq send", "completed with IBV_WC_RETRY_EXC_ERR")
		}, one("peer.send_recv/mtu-mismatch")},
		{"send_recv: a hop with a smaller MTU", probe.PeerSendRecv, func(p *peer.Pair) {
			sr := p.Verbs.SendRecv
			sr.OnePacketSize, sr.OnePacketOK = 64, true
			sr.Probe = failStep(probe.PeerSendRecv, "ibv_poll_cq send", "no completion within 2s")
		}, one("peer.send_recv/smaller-mtu-hop")},
		{"write intact", probe.PeerWrite, func(*peer.Pair) {}, one("peer.rdma_write/intact")},
		{"write refused", probe.PeerWrite, func(p *peer.Pair) {
			p.Verbs.Write.Probe, p.Verbs.Write.Status = failStep(probe.PeerWrite, "ibv_poll_cq", "completed with IBV_WC_REM_ACCESS_ERR"), "IBV_WC_REM_ACCESS_ERR"
		}, one("peer.rdma_write/remote-access")},
		{"write failed", probe.PeerWrite, func(p *peer.Pair) {
			p.Verbs.Write.Probe = failStep(probe.PeerWrite, "the peer's memory holds the pattern", "differs from byte 0")
		}, one("peer.rdma_write/failed")},
		{"read intact", probe.PeerRead, func(*peer.Pair) {}, one("peer.rdma_read/intact")},
		{"read refused", probe.PeerRead, func(p *peer.Pair) {
			p.Verbs.Read.Probe, p.Verbs.Read.Status = failStep(probe.PeerRead, "ibv_poll_cq", "completed with IBV_WC_REM_ACCESS_ERR"), "IBV_WC_REM_ACCESS_ERR"
		}, one("peer.rdma_read/remote-access")},
		{"read failed", probe.PeerRead, func(p *peer.Pair) {
			p.Verbs.Read.Probe, p.Verbs.Read.Status = failStep(probe.PeerRead, "ibv_poll_cq", "completed with IBV_WC_RETRY_EXC_ERR"), "IBV_WC_RETRY_EXC_ERR"
		}, one("peer.rdma_read/failed")},
		{"latency measured", probe.PeerLatency, func(*peer.Pair) {}, one("peer.latency/measured")},
		{"latency failed", probe.PeerLatency, func(p *peer.Pair) {
			p.Verbs.Latency.Probe = failStep(probe.PeerLatency, "poll_cq", "no completion within 2s")
		}, one("peer.latency/failed")},
		{"latency: a long tail", probe.PeerLatency, func(p *peer.Pair) { p.Verbs.Latency.Latency.P99NS = 40000 }, one("peer.latency/long-tail")},
		{"latency: a software device", probe.PeerLatency, func(p *peer.Pair) {
			p.Verbs.Latency.Latency.P99NS = 40000
			p.Verbs.Connect.Remote.Software = true
		}, one("peer.latency/software")},
		{"bandwidth measured", probe.PeerBandwidth, func(*peer.Pair) {}, one("peer.bandwidth/measured")},
		{"bandwidth below half the rate", probe.PeerBandwidth, func(p *peer.Pair) { p.Verbs.Bandwidth.Runs[0].Gbps = 30 }, one("peer.bandwidth/below-half-rate")},
		{"bandwidth: rates unknown", probe.PeerBandwidth, func(p *peer.Pair) {
			p.Verbs.Bandwidth.LocalRateGbps, p.Verbs.Bandwidth.RemoteRateGbps = 0, 0
		}, one("peer.bandwidth/rate-unknown")},
		{"bandwidth: a software device", probe.PeerBandwidth, func(p *peer.Pair) {
			p.Verbs.Bandwidth.Runs[0].Gbps, p.Verbs.Bandwidth.Software = 3, true
		}, one("peer.bandwidth/software")},
		{"bandwidth: no size fitted", probe.PeerBandwidth, func(p *peer.Pair) { p.Verbs.Bandwidth.Runs = nil }, one("peer.bandwidth/no-size")},
		{"bandwidth failed", probe.PeerBandwidth, func(p *peer.Pair) {
			p.Verbs.Bandwidth.Probe = failStep(probe.PeerBandwidth, "WRITE 65536 bytes", "completed with IBV_WC_RETRY_EXC_ERR")
		}, one("peer.bandwidth/failed")},
		{"bandwidth failed, MTUs differ", probe.PeerBandwidth, func(p *peer.Pair) {
			mismatch(p)
			p.Verbs.Bandwidth.Probe = failStep(probe.PeerBandwidth, "WRITE 65536 bytes", "completed with IBV_WC_RETRY_EXC_ERR")
		}, one("peer.bandwidth/failed-mtu-mismatch")},
		{"counters quiet", probe.PeerCounters, func(*peer.Pair) {}, one("peer.counters/quiet")},
		{"counters quiet, the peer's unread", probe.PeerCounters, func(p *peer.Pair) {
			p.Verbs.Counters.Remote, p.Verbs.Counters.RemoteError = nil, "open hw_counters: no such directory"
		}, one("peer.counters/quiet-one-side")},
		{"counters unreadable", probe.PeerCounters, func(p *peer.Pair) {
			p.Verbs.Counters.LocalError, p.Verbs.Counters.RemoteError = "none here", "none there"
		}, one("peer.counters/unreadable")},
		{"every kind of counter rose", probe.PeerCounters, func(p *peer.Pair) {
			p.Verbs.Counters.Local = []probe.PeerCounter{{Name: "hw_counters/np_cnp_sent", After: 3}, {Name: "hw_counters/send_err", After: 2}}
			p.Verbs.Counters.Remote = []probe.PeerCounter{{Name: "hw_counters/rcvd_seq_err", After: 9}, {Name: "counters/symbol_error", After: 1}}
		}, []unitFinding{{"peer.counters/link-errors", pair}, {"peer.counters/send-err", pair}, {"peer.counters/packet-loss", pair},
			{"peer.counters/congestion", pair}}},
		{"counters: retransmissions on one port", probe.PeerCounters, func(p *peer.Pair) {
			c := p.Verbs.Connect
			c.LocalHost, c.RemoteHost, c.Remote = &wire.HostReport{Hostname: "n1"}, &wire.HostReport{Hostname: "n1"}, c.Local
			p.Verbs.Counters.Local = []probe.PeerCounter{{Name: "hw_counters/duplicate_request", After: 64}, {Name: "hw_counters/np_cnp_sent", After: 2}}
		}, one("peer.counters/loopback-retransmissions")},
		{"rdma_cm connected", probe.RDMACM, func(*peer.Pair) {}, one("peer.rdma_cm/connected")},
		{"rdma_cm: the server could not listen", probe.RDMACM, func(p *peer.Pair) {
			p.Verbs.RDMACM = cmFailed("listen", "the server's rdma_cm listener", "on the server: rdma_create_id: ENODEV", "")
			p.Verbs.RDMACM.ListenError = "rdma_create_id: ENODEV"
		}, one("peer.rdma_cm/listen-failed")},
		{"rdma_cm: the control conversation broke", probe.RDMACM, func(p *peer.Pair) {
			p.Verbs.RDMACM = cmFailed("listen", "the server's rdma_cm listener", "read: connection reset by peer", "")
		}, one("peer.rdma_cm/control-broke")},
		{"rdma_cm: no stage named", probe.RDMACM, func(p *peer.Pair) {
			p.Verbs.RDMACM = cmFailed("", "rdma_disconnect", "EINVAL", "")
		}, one("peer.rdma_cm/failed")},
		{"rdma_cm: the server failed after this side finished", probe.RDMACM, func(p *peer.Pair) {
			p.Verbs.RDMACM.Remote = &wire.CMResult{Step: "SEND the echo", Error: "no completion of wr 1 within 3s"}
		}, one("peer.rdma_cm/server-failed")},
		{"rdma_cm: the server failed, MTUs differ", probe.RDMACM, func(p *peer.Pair) {
			mismatch(p)
			p.Verbs.RDMACM.Remote = &wire.CMResult{Step: "SEND the echo", Error: "no completion of wr 1 within 3s"}
		}, one("peer.rdma_cm/server-failed-mtu-mismatch")},
		{"rdma_cm: echo lost", probe.RDMACM, func(p *peer.Pair) {
			p.Verbs.RDMACM = cmFailed("transfer", "RECV the echo", "no completion of wr 2 within 3s", "")
		}, one("peer.rdma_cm/echo-lost")},
		{"rdma_cm: echo lost, MTUs differ", probe.RDMACM, func(p *peer.Pair) {
			mismatch(p)
			p.Verbs.RDMACM = cmFailed("transfer", "RECV the echo", "no completion of wr 2 within 3s", "")
		}, one("peer.rdma_cm/echo-lost-mtu-mismatch")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := healthyPair(pair)
			tc.edit(&p)
			r := peerResult(t, PeerReport([]peer.Pair{p}), tc.check)
			if diff := cmp.Diff(tc.want, unitFindings(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
			}
			if r.FindingID() != tc.want[0].ID {
				t.Errorf("status %s led by %s, want %s", r.Status, r.FindingID(), tc.want[0].ID)
			}
		})
	}
}

// Each failed stage of the connection manager is its own finding.
func TestPeerRDMACMStageFindings(t *testing.T) {
	for _, stage := range []string{"library", "address", "route", "resources", "connect"} {
		p := healthyPair("a:1")
		p.Verbs.RDMACM = cmFailed(stage, "a step of "+stage, "it failed", "")
		v := judgePeerRDMACM(&p)
		want := []unitFinding{{"peer.rdma_cm/" + stage + "-failed", "a:1"}}
		if diff := cmp.Diff(want, unitFindings(v.findings)); diff != "" || v.status != report.Fail {
			t.Errorf("%s: %s (-want +got):\n%s", stage, v.status, diff)
		}
	}
}

// Every control fault is a finding of its own, about the pair.
func TestPeerControlFindings(t *testing.T) {
	for fault, slug := range map[peer.ControlFault]string{
		peer.FaultNone: "answered", peer.FaultAddress: "bad-address", peer.FaultRefused: "refused", peer.FaultTimeout: "no-answer",
		peer.FaultNoRoute: "no-route", peer.FaultNotPeer: "not-peer", peer.FaultVersion: "version-mismatch", peer.FaultToken: "token-refused",
		peer.FaultBusy: "busy", peer.FaultProtocol: "protocol-violation", peer.FaultNetwork: "network-error",
		peer.ControlFault("a fault of a later release"): "network-error",
	} {
		v := judgePeerControl(&peer.Pair{Target: "h:7", Control: peer.Control{Fault: fault, Error: "e"}})
		want := []unitFinding{{"peer.control/" + slug, "h:7"}}
		if diff := cmp.Diff(want, unitFindings(v.findings)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", fault, diff)
		}
	}
}

// A check whose result the verbs child never sent is an error, naming
// the child's failure when it had one; never a pass.
func TestPeerChildFindings(t *testing.T) {
	for _, c := range peerCatalog[1:] {
		silent := healthyPair("a:1")
		silent.Verbs = nil
		died := healthyPair("a:1")
		died.Verbs = &probe.PeerResult{Failure: &probe.ChildFailure{Error: "the verbs child was killed by SIGSEGV", Signal: "SIGSEGV"}}
		for _, tc := range []struct {
			p    peer.Pair
			slug string
		}{{silent, "no-result"}, {died, "child-failed"}} {
			v := c.judge(&tc.p)
			want := []unitFinding{{c.ID + "/" + tc.slug, "a:1"}}
			if diff := cmp.Diff(want, unitFindings(v.findings)); diff != "" || v.status != report.Error {
				t.Errorf("%s %s: %s (-want +got):\n%s", c.ID, tc.slug, v.status, diff)
			}
		}
	}
}

// A host that cannot take part is peer.connect's finding naming what is
// missing; the pair's later checks carry the runner's blocked finding.
func TestPeerLocalFindings(t *testing.T) {
	for _, tc := range []struct {
		step probe.Step
		want string
	}{
		{probe.Step{Name: probe.StepLocalSysfs, Error: "no RDMA device on this host: /sys/class/infiniband is empty", Cause: peerNoDeviceFix}, "no-device"},
		{probe.Step{Name: probe.StepLocalSysfs, Error: `no RDMA device "mlx5_7" on this host`, Cause: peerNoSuchDeviceFix}, "no-such-device"},
		{probe.Step{Name: probe.StepLocalSysfs, Error: "this host's kernel offers no userspace verbs", Cause: peerNoUverbsFix}, "no-uverbs"},
		{probe.Step{Name: probe.StepLocalLoad, Error: "dlopen libibverbs.so.1: not found"}, "no-libibverbs"},
		{probe.Step{Name: probe.StepLocalList, Error: "ibv_get_device_list: ENOSYS", Errno: 38, ErrnoName: "ENOSYS"}, "no-uverbs"},
		{probe.Step{Name: probe.StepLocalList, Error: "libibverbs lists no RDMA device"}, "no-provider"},
		{probe.Step{Name: probe.StepLocalList, Error: "ibv_get_device_list: EACCES", Errno: 13, ErrnoName: "EACCES"}, "no-device"},
		{probe.Step{Name: probe.StepLocalDevice, Error: "no device has an ACTIVE port"}, "no-port"},
	} {
		rs := PeerReport([]peer.Pair{localFaultPair(tc.step)})
		if diff := cmp.Diff([]unitFinding{{"peer.connect/" + tc.want, "b:18516"}}, unitFindings(rs[1].Findings)); diff != "" {
			t.Errorf("%s %q (-want +got):\n%s", tc.step.Name, tc.step.Error, diff)
		}
		for _, r := range rs[2:] {
			if diff := cmp.Diff([]unitFinding{{report.FindingBlocked, "b:18516"}}, unitFindings(r.Findings)); diff != "" {
				t.Errorf("%s after %s (-want +got):\n%s", r.ID, tc.want, diff)
			}
		}
	}
}

// A port that cannot take part skips peer.connect with the reason.
func TestPeerConnectSkippedFinding(t *testing.T) {
	p := healthyPair("a:1")
	p.Verbs.Connect.Probe = probe.Probe{Name: probe.PeerConnect, Skipped: "iWARP RC QPs connect only through rdma_cm"}
	v := judgePeerConnect(&p)
	if diff := cmp.Diff([]unitFinding{{"peer.connect/skipped", "a:1"}}, unitFindings(v.findings)); diff != "" || v.status != report.Skip {
		t.Errorf("%s (-want +got):\n%s", v.status, diff)
	}
}

// An error reads "verb: cause" once, whether the step's error repeats the
// step's name or only its verb.
func TestPeerStepTextNamesTheVerbOnce(t *testing.T) {
	p := healthyPair("a:1")
	sr := p.Verbs.SendRecv
	sr.OnePacketSize, sr.OnePacketOK = 64, true
	for _, errText := range []string{"ibv_poll_cq: no completion within 2s", "ibv_poll_cq send: no completion within 2s"} {
		sr.Probe = failedProbe(probe.PeerSendRecv, "ibv_poll_cq send", errText)
		v := judgePeerSendRecv(&p)
		if strings.Count(v.line, "ibv_poll_cq") != 1 || !strings.Contains(v.line, "(ibv_poll_cq send: no completion within 2s)") {
			t.Errorf("%q: line %q names the verb more than once", errText, v.line)
		}
	}
}
