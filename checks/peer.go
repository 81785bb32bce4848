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
				vs[i] = peerBlocked(&pairs[i], b)
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
			Observed: r.Observed, Details: nonNil(r.Details), Remedy: r.Remedy, Evidence: ev, Findings: r.Findings,
			DurationMS: float64(time.Since(t0).Microseconds()) / 1000,
		})
	}
	return out
}

// peerBlocked is the verdict on a pair where a check this one needs did
// not pass: the runner's own finding, about the pair.
func peerBlocked(p *peer.Pair, by string) verdict {
	name := pairName(p)
	f := runBlocked.At(name, Slots{"check": by})
	return verdict{status: f.Status, line: name + ": " + f.Message, findings: []report.Finding{f}}
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
}

// peer.control's findings: the handshake done, or the fault that ended it.
var (
	peerControlAnswered = declare(Finding{ID: "peer.control/answered", Status: report.Pass,
		When:    "the control port answered and the handshake (protocol version, token) completed",
		Message: "{pair}: control port answered ({addr}), protocol {version}, connect {connect_ms} ms, handshake done in {handshake_ms} ms"})
	peerControlFaults = map[peer.ControlFault]*Finding{
		peer.FaultAddress: declarePeerControlFault("bad-address", report.Fail, "the peer's name does not resolve or the address is malformed",
			"bad address", "Check the peer's name and port: HOST or HOST:PORT, the name resolvable here (`getent hosts HOST`)."),
		peer.FaultRefused: declarePeerControlFault("refused", report.Fail, "connection refused: nothing listens on the port",
			"connection refused", "Nothing listens there: start `rdmadoctor peer serve --listen <peer address>:<port>` on the peer, or test the port it listens on."),
		peer.FaultTimeout: declarePeerControlFault("no-answer", report.Fail, "no answer within --io-timeout: a firewall drops the port, or the host is down",
			"no answer (timed out)", "No answer: a firewall drops the control port (open TCP {port} between the hosts: `nft list ruleset`, security groups) or the host is down."),
		peer.FaultNoRoute: declarePeerControlFault("no-route", report.Fail, "no route to the host",
			"no route to the host", "No route to the peer: check the address and `ip route get <peer>` here."),
		peer.FaultNotPeer: declarePeerControlFault("not-peer", report.Fail, "something other than `rdmadoctor peer serve` answers on the port",
			"not an rdmadoctor peer server", "Something other than `rdmadoctor peer serve` answers on that port: pick the port the server listens on."),
		peer.FaultVersion: declarePeerControlFault("version-mismatch", report.Fail, "the two sides speak no protocol version in common",
			"protocol version mismatch", "The two rdmadoctor releases speak no protocol version in common: install the same release on both hosts."),
		peer.FaultToken: declarePeerControlFault("token-refused", report.Fail, "the token was refused or none was given",
			"token refused", "Pass the server's token with --token or RDMADOCTOR_PEER_TOKEN (the same on both hosts)."),
		peer.FaultBusy: declarePeerControlFault("busy", report.Error, "the server is busy (--max-sessions) or its memory cap is reached: nothing was judged",
			"server busy", "The server runs its most sessions at once (--max-sessions) or its memory cap is reached: retry, or test fewer pairs at a time (--concurrency)."),
		peer.FaultProtocol: declarePeerControlFault("protocol-violation", report.Fail, "the conversation broke the protocol",
			"protocol violation", "The conversation broke the protocol: run the same rdmadoctor release on both hosts; the server's log says what it received."),
		peer.FaultNetwork: declarePeerControlFault("network-error", report.Error, "the connection failed otherwise (reset, closed early): nothing was judged",
			"network error", "The connection failed: the error names the cause."),
	}
)

// declarePeerControlFault declares the finding of one control fault.
func declarePeerControlFault(slug string, st report.Status, when, text, fix string) *Finding {
	return declare(Finding{ID: "peer.control/" + slug, Status: st, When: when, Message: "{pair}: " + text + " — {error}", Fix: fix})
}

func judgePeerControl(p *peer.Pair) verdict {
	name, c := pairName(p), &p.Control
	slots := Slots{"pair": name}
	var v verdict
	if c.Fault == peer.FaultNone {
		v = peerControlAnswered.unit(name, slots.with("addr", c.Addr, "version", fmt.Sprint(c.Version),
			"connect_ms", fmt.Sprintf("%.1f", c.ConnectMillis), "handshake_ms", fmt.Sprintf("%.1f", c.Millis)))
	} else {
		f, ok := peerControlFaults[c.Fault]
		if !ok {
			f = peerControlFaults[peer.FaultNetwork] // a fault this release does not know: could not look
		}
		v = f.unit(name, slots.with("error", c.Error, "port", pairPort(name)))
	}
	v.evidence = map[string]any{"control": c}
	return v
}

// pairPort is the control port a pair's name gives, the default when it
// names none.
func pairPort(name string) string {
	if i := strings.LastIndex(name, ":"); i >= 0 {
		return name[i+1:]
	}
	return "18516"
}

// peerChild is the two findings every check the verbs child judges has
// when the child sent no result for it: it crashed, was killed at the
// session's deadline, or stopped early.
type peerChild struct{ silent, failed *Finding }

// peerChildFix is the remedy of a child that stopped.
const peerChildFix = "Every wait has a deadline (--timeout for the pair); the step named is where the session stopped. " +
	"`dmesg` on both hosts shows the driver's side."

func declarePeerChild(id string) peerChild {
	return peerChild{
		silent: declare(Finding{ID: id + "/no-result", Status: report.Error,
			When:    "the verbs child sent no result for this check and reported no failure",
			Message: "{pair}: the verbs child sent no result for this check"}),
		failed: declare(Finding{ID: id + "/child-failed", Status: report.Error,
			When:    "the verbs child timed out, crashed or stopped before it sent this check's result",
			Message: "{pair}: {error}", Fix: peerChildFix}),
	}
}

// verdict is the check's verdict on a pair whose result the child never sent.
func (c peerChild) verdict(p *peer.Pair) verdict {
	name := pairName(p)
	if p.Verbs == nil || p.Verbs.Failure == nil {
		return c.silent.unit(name, Slots{"pair": name})
	}
	f := p.Verbs.Failure
	v := c.failed.unit(name, Slots{"pair": name, "error": f.Error})
	v.evidence = map[string]any{"failure": f, "stderr": p.Verbs.Stderr}
	return v
}
