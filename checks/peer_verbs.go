package checks

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

var peerConnectExplain = Explanation{
	Judges: "Each side opens its port (--device/--port, else the first ACTIVE one), registers a memory region with remote read and write, " +
		"creates an RC QP and moves it to INIT; the two exchange QPN, PSN, LID, GID (index and type), active_mtu and the netdev MTU behind " +
		"the GID, and both move their QP RTR→RTS toward the other at the same path MTU: the smaller active_mtu, held to what fits the smaller " +
		"netdev MTU on RoCE (1500 → 1024, 9000 → 4096). retry_cnt and rnr_retry are 6, not 7 (infinite), so a peer that vanishes ends in " +
		"an error completion. Two netdev MTUs that differ warn: the session avoids the mismatch, an application that picks the path MTU " +
		"from its own side does not. A RoCE GID that is not RoCE v2 warns, and so do two GIDs of different IPv4 subnets " +
		"(the netdev's address the GID carries, with its prefix): RoCE v2 is then routed, and most often another interface's GID was picked.",
	Why: "This is the part perftest and ibv_rc_pingpong do by hand: a QP that cannot reach RTS with the peer's attributes, or reaches it " +
		"with an MTU one side cannot carry, is a job that hangs on its first message.",
}

// peer.connect's findings (the local-device ones are in peer_local.go).
// A connected pair's line says how it connected; a warning's message is
// appended to it, one per thing that differs.
var (
	peerConnectChild   = declarePeerChild(probe.PeerConnect)
	peerConnectSkipped = declare(Finding{ID: "peer.connect/skipped", Status: report.Skip,
		When:    "the port cannot take part in a hand-connected RC QP (an iWARP port connects only through rdma_cm); the later checks are blocked",
		Message: "{pair}: {why}"})
	peerConnectStepFailed = declare(Finding{ID: "peer.connect/step-failed", Status: report.Fail,
		When:    "a step failed on this host (open, reg_mr, create_qp, modify_qp with the peer's attributes), or the two ports are of different link layers",
		Message: "{pair}: {step}", Fix: "Run `rdmadoctor` (level 2) on this host: it judges the device alone, step by step."})
	peerConnectPeerFailed = declare(Finding{ID: "peer.connect/peer-failed", Status: report.Fail,
		When:    "the server could not build or connect its QP",
		Message: "{pair}: {step}", Fix: "Run `rdmadoctor` on the peer: its error names the step that failed there."})
	peerConnectNoEndpoints = declare(Finding{ID: "peer.connect/no-endpoints", Status: report.Error,
		When:    "the session reported success but no endpoints: nothing to judge",
		Message: "{pair}: the session reported no endpoints"})
	peerConnectConnected = declare(Finding{ID: "peer.connect/connected", Status: report.Pass,
		When:    "both QPs reached RTS toward each other",
		Message: "{pair}: {connection}"})
	peerConnectMTUMismatch = declare(Finding{ID: "peer.connect/mtu-mismatch", Status: report.Warn,
		When: "the netdev MTUs differ (e.g. 1500 here, 9000 there): the session used the smaller, an application that takes " +
			"the path MTU from one side does not",
		Message: "MTU mismatch: netdev {netdev} MTU {mtu} here, {peer_netdev} MTU {peer_mtu} on the peer — the session used path MTU {path_mtu}; " +
			"an application that takes the path MTU from one side's active_mtu sends packets the other side cannot carry and hangs",
		Fix: "Set one MTU on every RoCE interface of the fabric and the switch ports between them (`ip link set <if> mtu <N>` on both hosts)."})
	peerConnectSubnets = declare(Finding{ID: "peer.connect/subnets-differ", Status: report.Warn,
		When:    "the two RoCE GIDs' addresses are of different IPv4 subnets: RoCE v2 is routed between them",
		Message: "the GIDs are of different subnets ({subnet} here, {peer_subnet} on the peer): RoCE v2 is routed between them",
		Fix: "Pass --gid-index of the RoCE v2 GID of the address on the peer's subnet (`rdmadoctor inventory` lists each address's GID index), " +
			"on both sides; or make sure the routers between the subnets carry RoCE (PFC, ECN, MTU)."})
	peerConnectNotRoCEv2 = declare(Finding{ID: "peer.connect/gid-not-rocev2", Status: report.Warn,
		When:    "a side's RoCE GID is not RoCE v2",
		Message: "{device} port {num} used GID index {gid_index} of type {gid_type}, not RoCE v2 (routable, the kind RDMA-CM and NCCL pick)",
		Fix:     "Pass --gid-index of the RoCE v2 GID of the interface's address (`rdmadoctor inventory` lists them) on both sides."})
)

func judgePeerConnect(p *peer.Pair) verdict {
	name := pairName(p)
	if p.Verbs == nil || p.Verbs.Connect == nil {
		return peerConnectChild.verdict(p)
	}
	if st := peerLocalFault(p); st != nil {
		return judgePeerLocal(p, st)
	}
	c, slots := p.Verbs.Connect, Slots{"pair": name}
	if c.Skipped != "" {
		return peerConnectSkipped.unit(name, slots.with("why", c.Skipped))
	}
	ev := map[string]any{"local": c.Local, "remote": c.Remote, "path_mtu": c.PathMTU, "mtu_note": c.MTUNote,
		"local_host": c.LocalHost, "remote_host": c.RemoteHost, "duration_ms": c.Millis}
	var v verdict
	switch st := c.Failed(); {
	case st != nil && c.RemoteError != "":
		ev["failed_step"] = st
		v = peerConnectPeerFailed.unit(name, slots.with("step", stepText(st)))
	case st != nil:
		ev["failed_step"] = st
		v = peerConnectStepFailed.unit(name, slots.with("step", stepText(st)))
	case c.Local == nil || c.Remote == nil:
		v = peerConnectNoEndpoints.unit(name, slots)
	default:
		v = judgeConnected(name, c)
	}
	v.evidence = ev
	return v
}

// judgeConnected judges a pair whose QPs connected: it passes, or warns
// with every difference between the sides an application would trip on.
func judgeConnected(name string, c *probe.PeerConnectResult) verdict {
	line := fmt.Sprintf("RC QP %#x ↔ %#x on %s, path MTU %d", c.Local.QPN, c.Remote.QPN, endpointText(c.Local, c.Remote), c.PathMTU)
	if c.Local.ActiveMTU != c.Remote.ActiveMTU {
		line += fmt.Sprintf(" (active_mtu %d here, %d on the peer)", c.Local.ActiveMTU, c.Remote.ActiveMTU)
	}
	slots := Slots{"pair": name}
	var fs []report.Finding
	if c.Local.NetdevMTU > 0 && c.Remote.NetdevMTU > 0 && c.Local.NetdevMTU != c.Remote.NetdevMTU {
		fs = append(fs, peerConnectMTUMismatch.At(name, slots.with("netdev", c.Local.Netdev, "mtu", fmt.Sprint(c.Local.NetdevMTU),
			"peer_netdev", c.Remote.Netdev, "peer_mtu", fmt.Sprint(c.Remote.NetdevMTU), "path_mtu", fmt.Sprint(c.PathMTU))))
	}
	if differentSubnets(c.Local, c.Remote) {
		fs = append(fs, peerConnectSubnets.At(name, slots.with("subnet", c.Local.Subnet, "peer_subnet", c.Remote.Subnet)))
	}
	for _, e := range []*wire.Endpoint{c.Local, c.Remote} {
		if e.LinkLayer == "Ethernet" && e.GIDType != "RoCE v2" {
			fs = append(fs, peerConnectNotRoCEv2.At(name, slots.with("device", e.Device, "num", fmt.Sprint(e.Port),
				"gid_index", fmt.Sprint(e.GIDIndex), "gid_type", e.GIDType)))
		}
	}
	if len(fs) == 0 {
		return peerConnectConnected.unit(name, slots.with("connection", line))
	}
	v := verdict{status: report.Warn, findings: fs}
	var texts, remedies []string
	for _, f := range fs {
		texts = append(texts, f.Message)
		remedies = appendUnique(remedies, f.Fix)
	}
	v.line = name + ": " + line + " — " + strings.Join(texts, "; ")
	v.remedy = strings.Join(remedies, "\n")
	return v
}

// differentSubnets says whether two RoCE GIDs are of different IPv4
// subnets: RoCE v2 is routed between them, which works only through
// routers configured for it; most often the wrong GID (another
// interface's) was picked.
func differentSubnets(l, r *wire.Endpoint) bool {
	if l.LinkLayer != "Ethernet" || l.Subnet == "" || r.Subnet == "" {
		return false
	}
	lp, err1 := netip.ParsePrefix(l.Subnet)
	rp, err2 := netip.ParsePrefix(r.Subnet)
	return err1 == nil && err2 == nil && !lp.Contains(rp.Addr()) && !rp.Contains(lp.Addr())
}

// endpointText is how the two sides address each other.
func endpointText(l, r *wire.Endpoint) string {
	side := func(e *wire.Endpoint) string {
		s := fmt.Sprintf("%s/%d", e.Device, e.Port)
		if e.LinkLayer == "Ethernet" {
			s += fmt.Sprintf(" GID[%d] %s (%s)", e.GIDIndex, e.GIDString(), e.GIDType)
		} else {
			s += fmt.Sprintf(" LID %d", e.LID)
		}
		return s
	}
	return side(l) + " → " + side(r)
}

var peerSendRecvExplain = Explanation{
	Judges: "This side posts a receive, asks the server to post one, SENDs a seeded pattern; the server checks length and " +
		"payload and SENDs a second pattern back, which this side checks. First 64 bytes (one packet at any path MTU), then --size " +
		"bytes (packets of the path MTU): a path that carries the first and drops the second has a hop with a smaller MTU. Every wait ends at the pair's deadline: a SEND that is never " +
		"acknowledged, a receive that never completes (the receiving side of a dropped link waits forever otherwise: RC retries cover only " +
		"sends) and an MTU mismatch that retries without end each become a failure naming the direction.",
	Why: "It is the first real data across the fabric: a connected QP pair that cannot move a message means routing, GIDs, MTU or the " +
		"fabric itself are wrong, whatever each host's own checks say.",
}

// peer.send_recv's findings. A SEND that never completed is told apart
// by what else is known: the one-packet SEND crossed (a hop with a smaller
// MTU), the netdevs' MTUs differ, or both hosts carry a path MTU a hop
// between them may not.
const peerPingpongFix = "Compare with `ibv_rc_pingpong -d <dev> -g <gid index>` on the peer and `ibv_rc_pingpong -d <dev> -g <gid index> <peer>` here."

var (
	peerSendRecvChild   = declarePeerChild(probe.PeerSendRecv)
	peerSendRecvCrossed = declare(Finding{ID: "peer.send_recv/crossed", Status: report.Pass,
		When:    "a SEND crossed each way with the right length and payload",
		Message: "{pair}: {size}-byte SEND each way{first}, payload intact ({ms} ms)"})
	peerSendRecvFailed = declare(Finding{ID: "peer.send_recv/failed", Status: report.Fail,
		When: "a SEND, the peer's answer or its payload failed (never acknowledged, RETRY_EXC_ERR, the answer never arrived, " +
			"a length or payload that differs)",
		Message: "{pair}: {step}", Fix: peerPingpongFix})
	peerSendRecvLargeMTU = declare(Finding{ID: "peer.send_recv/no-completion-large-mtu", Status: report.Fail,
		When:    "a SEND never completed and both hosts carry a path MTU above 1024: a hop between them may drop full packets",
		Message: "{pair}: {step}",
		Fix: peerPingpongFix + " Both hosts carry a {path_mtu}-byte path MTU; a switch port or router between them with a smaller MTU drops those packets " +
			"and RC retries without end: run again with `--size 512` — if that passes, find the hop with the smaller MTU."})
	peerSendRecvMTUMismatch = declare(Finding{ID: "peer.send_recv/mtu-mismatch", Status: report.Fail,
		When:    "a SEND never completed and the two netdevs' MTUs differ",
		Message: "{pair}: {step} — likely an MTU mismatch: netdev MTU {mtu} here, {peer_mtu} on the peer",
		Fix:     "Set one MTU on every RoCE interface and switch port of the path (`ip link set <if> mtu <N>` on both hosts)."})
	peerSendRecvSmallerHop = declare(Finding{ID: "peer.send_recv/smaller-mtu-hop", Status: report.Fail,
		When: "the one-packet SEND crossed both ways, the --size one never completed, and both hosts agree on the MTU: a hop " +
			"between them (switch port, VLAN, tunnel) has a smaller MTU and drops full packets silently",
		Message: "{pair}: a {small}-byte SEND crossed both ways, the {size}-byte one (packets of {packet} bytes of payload at path MTU {path_mtu}) did not: " +
			"a hop between the hosts drops packets of that size (a switch port, VLAN or tunnel whose MTU is below the hosts') ({call})",
		Fix: "Give every switch port, VLAN and tunnel on the path an MTU of at least the hosts' (jumbo frames: 9216 on the switch for " +
			"9000 on the hosts), or lower the netdev MTU on both hosts to what the path carries (`ip link set <if> mtu 1500`): the RDMA " +
			"path MTU follows the netdevs'. Packets that exceed a hop's MTU are dropped silently, so RC retries them without end."})
)

func judgePeerSendRecv(p *peer.Pair) verdict {
	name := pairName(p)
	if p.Verbs == nil || p.Verbs.SendRecv == nil {
		return peerSendRecvChild.verdict(p)
	}
	r := p.Verbs.SendRecv
	ev := map[string]any{"size": r.Size, "to_peer": r.ToPeer, "from_peer": r.FromPeer, "duration_ms": r.Millis}
	if r.OnePacketSize > 0 {
		ev["one_packet_size"], ev["one_packet_ok"] = r.OnePacketSize, r.OnePacketOK
	}
	slots := Slots{"pair": name}
	if st := r.Failed(); st != nil {
		ev["failed_step"] = st
		v := sendRecvFailure(p, st, slots)
		v.evidence = ev
		return v
	}
	first := ""
	if r.OnePacketOK {
		first = fmt.Sprintf(", after a %d-byte one", r.OnePacketSize)
	}
	v := peerSendRecvCrossed.unit(name, slots.with("size", fmt.Sprint(r.Size), "first", first, "ms", fmt.Sprintf("%.1f", r.Millis)))
	v.evidence = ev
	return v
}

// sendRecvFailure is the verdict of a failed step: a SEND that never
// completed is named by what else is known of the path.
func sendRecvFailure(p *peer.Pair, st *probe.Step, slots Slots) verdict {
	name, c := pairName(p), p.Verbs.Connect
	noCompletion := strings.Contains(st.Error, "no completion") || strings.Contains(st.Error, "RETRY_EXC")
	switch {
	case !noCompletion:
	case smallerMTUHop(p):
		// The peer is reachable (the small SEND crossed): the step's own
		// cause, "not reachable", would mislead.
		r := p.Verbs.SendRecv
		pkt := c.PathMTU
		if pkt <= 0 || r.Size < pkt {
			pkt = r.Size
		}
		return peerSendRecvSmallerHop.unit(name, slots.with("small", fmt.Sprint(r.OnePacketSize), "size", fmt.Sprint(r.Size),
			"packet", fmt.Sprint(pkt), "path_mtu", fmt.Sprint(c.PathMTU), "call", stepCall(st)))
	case mtuMismatch(p):
		return peerSendRecvMTUMismatch.unit(name, slots.with("step", stepText(st),
			"mtu", fmt.Sprint(c.Local.NetdevMTU), "peer_mtu", fmt.Sprint(c.Remote.NetdevMTU)))
	case c != nil && c.PathMTU > 1024:
		// Both hosts agree, but a hop between them may not.
		return peerSendRecvLargeMTU.unit(name, slots.with("step", stepText(st), "path_mtu", fmt.Sprint(c.PathMTU)))
	}
	return peerSendRecvFailed.unit(name, slots.with("step", stepText(st)))
}

// smallerMTUHop says whether a hop drops full packets: the one-packet
// SEND crossed both ways, the full-size one did not, and both hosts agree
// on the netdev MTU (a mismatch between them is mtuMismatch's).
func smallerMTUHop(p *peer.Pair) bool {
	return p.Verbs.SendRecv.OnePacketOK && !mtuMismatch(p) && p.Verbs.Connect != nil
}

// mtuMismatch says whether the two sides' netdevs differ in MTU, the
// usual cause of messages that never complete.
func mtuMismatch(p *peer.Pair) bool {
	if p.Verbs == nil || p.Verbs.Connect == nil || p.Verbs.Connect.Local == nil || p.Verbs.Connect.Remote == nil {
		return false
	}
	l, r := p.Verbs.Connect.Local, p.Verbs.Connect.Remote
	return l.NetdevMTU > 0 && r.NetdevMTU > 0 && l.NetdevMTU != r.NetdevMTU
}

// stepCall is a failed step's call and error, the verb said once
// ("ibv_poll_cq send: no completion within 2s"), without the cause.
func stepCall(st *probe.Step) string {
	return stepText(&probe.Step{Name: st.Name, Error: st.Error})
}
