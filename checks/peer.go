package checks

import (
	"fmt"
	"strings"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// PeerCheck is one of the two-host checks of `rdmadoctor peer test`. They
// are not part of the host pipeline (they need a second host): each judges
// one pair in a small function, the pairs are combined with combineUnits
// (the worst pair decides), and each check runs on a pair only when the
// one before it passed there.
type PeerCheck struct {
	Check
	judge func(p *peer.Pair) verdict
}

// peerCheck builds a catalog entry: level 2 (it drives the verbs API),
// needing the check named (none when "").
func peerCheck(id string, code int, needs, title string, judge func(*peer.Pair) verdict, ex Explanation) *PeerCheck {
	c := &PeerCheck{Check: Check{ID: id, Code: code, Level: 2, Title: title, Explain: ex}, judge: judge}
	if needs != "" {
		c.Needs = []string{needs}
	}
	return c
}

// Each check names the one it needs: it runs on a pair only when that one
// passed (or warned) there. Code 48, peer.rdma_cm (peer_rdma_cm.go), needs
// only peer.control; 49–59 are for later two-host checks.
var peerCatalog = []*PeerCheck{
	peerCheck("peer.control", 40, "", "the peer's control port answers and accepts this client (protocol version, token)",
		judgePeerControl, peerControlExplain),
	peerCheck(probe.PeerConnect, 41, "peer.control", "an RC QP pair connects across the hosts (RESET→INIT→RTR→RTS with the peer's QPN, PSN, GID/LID, path MTU)",
		judgePeerConnect, peerConnectExplain),
	peerCheck(probe.PeerSendRecv, 42, probe.PeerConnect, "a SEND crosses each way, received with the right length and payload",
		judgePeerSendRecv, peerSendRecvExplain),
	peerCheck(probe.PeerWrite, 43, probe.PeerSendRecv, "an RDMA WRITE through the peer's rkey lands intact in its memory",
		judgePeerWrite, peerWriteExplain),
	peerCheck(probe.PeerRead, 44, probe.PeerWrite, "an RDMA READ through the peer's rkey brings its bytes intact",
		judgePeerRead, peerReadExplain),
	peerCheck(probe.PeerLatency, 45, probe.PeerRead, "SEND round trips across the hosts: min, median, p99",
		judgePeerLatency, peerLatencyExplain),
	peerCheck(probe.PeerBandwidth, 46, probe.PeerLatency, "RDMA WRITE bandwidth at a few sizes, beside the slower port's rate",
		judgePeerBandwidth, peerBandwidthExplain),
	peerCheck(probe.PeerCounters, 47, probe.PeerConnect, "no error or congestion counter rises on either side during the session's transfers",
		judgePeerCounters, peerCountersExplain),
	peerRDMACMCheck,
}

// PeerCatalog lists the two-host checks of `rdmadoctor peer test` in code
// order; they are not in Catalog (the host pipeline).
func PeerCatalog() []*Check {
	out := make([]*Check, len(peerCatalog))
	for i, c := range peerCatalog {
		out[i] = &c.Check
	}
	return out
}

// LookupPeer finds a two-host check by ID or code.
func LookupPeer(idOrCode string) (*Check, bool) {
	for _, c := range peerCatalog {
		if c.ID == idOrCode || fmt.Sprint(c.Code) == idOrCode {
			return &c.Check, true
		}
	}
	return nil, false
}

// PeerReport judges every pair with every peer check and combines the
// pairs per check: one result per check, one detail line per pair.
func PeerReport(pairs []peer.Pair) []report.CheckResult {
	out := make([]report.CheckResult, 0, len(peerCatalog))
	// blockedBy[i][id] is why check id did not pass on pair i: its own
	// ID, or the check that blocked it.
	blockedBy := make([]map[string]string, len(pairs))
	for i := range blockedBy {
		blockedBy[i] = map[string]string{}
	}
	for _, c := range peerCatalog {
		t0 := time.Now()
		vs := make([]verdict, len(pairs))
		needs := c.Needs
		if c.ID != "peer.control" {
			// Every check after the control conversation drives this
			// host's verbs: a host that cannot take part blocks them all.
			needs = append([]string{localDeviceKey}, needs...)
		}
		for i := range pairs {
			if b := firstBlocked(needs, blockedBy[i]); b != "" {
				vs[i] = verdict{status: report.Skip, line: fmt.Sprintf("%s: blocked by %s", pairName(&pairs[i]), b)}
				blockedBy[i][c.ID] = b
				continue
			}
			vs[i] = c.judge(&pairs[i])
			if vs[i].status != report.Pass && vs[i].status != report.Warn {
				blockedBy[i][c.ID] = c.ID
			}
			if c.ID == probe.PeerConnect && peerLocalFault(&pairs[i]) != nil {
				blockedBy[i][localDeviceKey] = c.ID
			}
		}
		r := combineUnits(vs, "pair", "pairs")
		ev := map[string]any{}
		for i, v := range vs {
			ev[pairName(&pairs[i])] = v.evidence
		}
		out = append(out, report.CheckResult{
			ID: c.ID, Code: c.Code, Title: c.Title, Level: 2, Status: r.Status, Summary: r.Summary,
			Observed: r.Observed, Details: nonNil(r.Details), Remedy: r.Remedy, Evidence: ev,
			DurationMS: float64(time.Since(t0).Microseconds()) / 1000,
		})
	}
	return out
}

// localDeviceKey is the prerequisite, in blockedBy, of every check that
// needs this host's own RDMA device; set to peer.connect when that check
// found this host cannot take part.
const localDeviceKey = "local device"

// firstBlocked is the check that blocks one whose prerequisites are needs:
// the first prerequisite that did not pass, or what blocked it.
func firstBlocked(needs []string, blockedBy map[string]string) string {
	for _, n := range needs {
		if b := blockedBy[n]; b != "" {
			return b
		}
	}
	return ""
}

func pairName(p *peer.Pair) string {
	if p.Target != "" {
		return p.Target
	}
	return p.Peer
}

var peerControlExplain = Explanation{
	Judges: "A TCP connection to the peer's control port (default 18516) and the handshake: the server's hello (protocol name and " +
		"versions), this client's version and its proof of the shared token (HMAC-SHA256 over the server's nonce), the server's welcome. " +
		"Connection refused, no answer, no route, a name that does not resolve, another service on the port, no common version, " +
		"a wrong or missing token and a busy server are told apart.",
	Why: "Every later check needs the control conversation to exchange QP numbers, GIDs and keys, as perftest and ibv_rc_pingpong do over TCP.",
	Failures: []Failure{
		{report.Fail, "connection refused: nothing listens on the port", "Start `rdmadoctor peer serve --listen <its address>:18516` on the peer."},
		{report.Fail, "no answer within --io-timeout: a firewall drops the port, or the host is down", "Open TCP 18516 between the hosts (`nft list ruleset`, security groups) and check that the host is up."},
		{report.Fail, "no route to the host", "Check the address and the routes (`ip route get <peer>`)."},
		{report.Fail, "the token was refused or none was given", "Pass the server's token with --token or RDMADOCTOR_PEER_TOKEN."},
		{report.Fail, "no protocol version in common", "Run the same rdmadoctor release on both hosts."},
		{report.Error, "the server is busy (--max-sessions) or its memory cap is reached", "Retry later, or raise --max-sessions on the server."},
	},
}

// peerControlFix is the remedy per control fault.
var peerControlFix = map[peer.ControlFault]string{
	peer.FaultAddress:  "Check the peer's name and port: HOST or HOST:PORT, the name resolvable here (`getent hosts HOST`).",
	peer.FaultRefused:  "Nothing listens there: start `rdmadoctor peer serve --listen <peer address>:<port>` on the peer, or test the port it listens on.",
	peer.FaultTimeout:  "No answer: a firewall drops the control port (open TCP %s between the hosts: `nft list ruleset`, security groups) or the host is down.",
	peer.FaultNoRoute:  "No route to the peer: check the address and `ip route get <peer>` here.",
	peer.FaultNotPeer:  "Something other than `rdmadoctor peer serve` answers on that port: pick the port the server listens on.",
	peer.FaultVersion:  "The two rdmadoctor releases speak no protocol version in common: install the same release on both hosts.",
	peer.FaultToken:    "Pass the server's token with --token or RDMADOCTOR_PEER_TOKEN (the same on both hosts).",
	peer.FaultBusy:     "The server runs its most sessions at once (--max-sessions) or its memory cap is reached: retry, or test fewer pairs at a time (--concurrency).",
	peer.FaultProtocol: "The conversation broke the protocol: run the same rdmadoctor release on both hosts; the server's log says what it received.",
	peer.FaultNetwork:  "The connection failed: the error names the cause.",
}

func judgePeerControl(p *peer.Pair) verdict {
	name, c := pairName(p), &p.Control
	ev := map[string]any{"control": c}
	if c.Fault == peer.FaultNone {
		return verdict{status: report.Pass, evidence: ev,
			line: fmt.Sprintf("%s: control port answered (%s), protocol %d, connect %.1f ms, handshake done in %.1f ms", name, c.Addr, c.Version, c.ConnectMillis, c.Millis)}
	}
	st := report.Fail
	if c.Fault == peer.FaultBusy || c.Fault == peer.FaultNetwork {
		st = report.Error // could not look
	}
	fix := peerControlFix[c.Fault]
	if strings.Contains(fix, "%s") {
		port := "18516"
		if i := strings.LastIndex(name, ":"); i >= 0 {
			port = name[i+1:]
		}
		fix = fmt.Sprintf(fix, port)
	}
	return verdict{status: st, evidence: ev, remedy: fix,
		line: fmt.Sprintf("%s: %s — %s", name, controlFaultText[c.Fault], c.Error)}
}

var controlFaultText = map[peer.ControlFault]string{
	peer.FaultAddress: "bad address", peer.FaultRefused: "connection refused", peer.FaultTimeout: "no answer (timed out)",
	peer.FaultNoRoute: "no route to the host", peer.FaultNotPeer: "not an rdmadoctor peer server",
	peer.FaultVersion: "protocol version mismatch", peer.FaultToken: "token refused", peer.FaultBusy: "server busy",
	peer.FaultProtocol: "protocol violation", peer.FaultNetwork: "network error",
}

// peerChildVerdict is the verdict of a check whose result the child never
// sent: it crashed, was killed at the session's deadline, or stopped early.
func peerChildVerdict(p *peer.Pair) verdict {
	name := pairName(p)
	if p.Verbs == nil || p.Verbs.Failure == nil {
		return verdict{status: report.Error, line: name + ": the verbs child sent no result for this check"}
	}
	f := p.Verbs.Failure
	return verdict{status: report.Error, line: name + ": " + f.Error, evidence: map[string]any{"failure": f, "stderr": p.Verbs.Stderr},
		remedy: "Every wait has a deadline (--timeout for the pair); the step named is where the session stopped. `dmesg` on both hosts shows the driver's side."}
}
