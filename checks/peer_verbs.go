package checks

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
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
	Failures: []Failure{
		{report.Fail, "this host cannot take part: no RDMA device (/sys/class/infiniband missing or empty), no device named --device, " +
			"no userspace verbs (ib_uverbs not loaded: ENOSYS), no libibverbs, or no ACTIVE port; the later checks are blocked by it",
			"The finding names the cause and its fix; `rdmadoctor` on this host judges the stack step by step. " +
				"A host without an adapter can test with SoftRoCE (`rdma link add rxe0 type rxe netdev <interface>`)."},
		{report.Fail, "a step failed on this host (open, reg_mr, create_qp, modify_qp with the peer's attributes)", "The step and its errno name the cause; `rdmadoctor` (level 2) on this host judges the device alone."},
		{report.Fail, "the server could not build or connect its QP", "Run `rdmadoctor` on the peer: the server's error names the step."},
		{report.Fail, "the two ports are of different link layers", "Pair ports of one fabric: --device/--port here, `peer serve --device/--port` there."},
		{report.Warn, "the netdev MTUs differ (e.g. 1500 here, 9000 there)", "Set one MTU on every RoCE interface of the fabric (`ip link set <if> mtu 9000` on all, and the switch ports)."},
		{report.Warn, "a RoCE v1 GID was used", "Pass --gid-index of the port's RoCE v2 GID (`rdmadoctor inventory` lists them)."},
		{report.Warn, "the two GIDs are of different subnets", "Pass --gid-index of the address on the peer's subnet on both sides, or check that the routers between them carry RoCE (PFC, ECN, MTU)."},
		childFailure,
	},
}

func judgePeerConnect(p *peer.Pair) verdict {
	name := pairName(p)
	if p.Verbs == nil || p.Verbs.Connect == nil {
		return peerChildVerdict(p)
	}
	if st := peerLocalFault(p); st != nil {
		return judgePeerLocal(p, st)
	}
	c := p.Verbs.Connect
	if c.Skipped != "" {
		return verdict{status: report.Skip, line: fmt.Sprintf("%s: %s", name, c.Skipped)}
	}
	ev := map[string]any{"local": c.Local, "remote": c.Remote, "path_mtu": c.PathMTU, "mtu_note": c.MTUNote,
		"local_host": c.LocalHost, "remote_host": c.RemoteHost, "duration_ms": c.Millis}
	if st := c.Failed(); st != nil {
		ev["failed_step"] = st
		v := verdict{status: report.Fail, evidence: ev, line: fmt.Sprintf("%s: %s", name, stepText(st))}
		if c.RemoteError != "" {
			v.remedy = "Run `rdmadoctor` on the peer: its error names the step that failed there."
		} else {
			v.remedy = "Run `rdmadoctor` (level 2) on this host: it judges the device alone, step by step."
		}
		return v
	}
	if c.Local == nil || c.Remote == nil {
		return verdict{status: report.Error, evidence: ev, line: name + ": the session reported no endpoints"}
	}
	line := fmt.Sprintf("%s: RC QP %#x ↔ %#x on %s, path MTU %d", name, c.Local.QPN, c.Remote.QPN, endpointText(c.Local, c.Remote), c.PathMTU)
	if c.Local.ActiveMTU != c.Remote.ActiveMTU {
		line += fmt.Sprintf(" (active_mtu %d here, %d on the peer)", c.Local.ActiveMTU, c.Remote.ActiveMTU)
	}
	v := verdict{status: report.Pass, evidence: ev, line: line}
	var warns []string
	if c.Local.NetdevMTU > 0 && c.Remote.NetdevMTU > 0 && c.Local.NetdevMTU != c.Remote.NetdevMTU {
		warns = append(warns, fmt.Sprintf("MTU mismatch: netdev %s MTU %d here, %s MTU %d on the peer — the session used path MTU %d; "+
			"an application that takes the path MTU from one side's active_mtu sends packets the other side cannot carry and hangs",
			c.Local.Netdev, c.Local.NetdevMTU, c.Remote.Netdev, c.Remote.NetdevMTU, c.PathMTU))
		v.remedy = "Set one MTU on every RoCE interface of the fabric and the switch ports between them (`ip link set <if> mtu <N>` on both hosts)."
	}
	if w := subnetWarning(c.Local, c.Remote); w != "" {
		warns = append(warns, w)
		v.remedy = appendRemedy(v.remedy, "Pass --gid-index of the RoCE v2 GID of the address on the peer's subnet (`rdmadoctor inventory` lists each address's GID index), on both sides; or make sure the routers between the subnets carry RoCE (PFC, ECN, MTU).")
	}
	for _, e := range []*wire.Endpoint{c.Local, c.Remote} {
		if e.LinkLayer == "Ethernet" && e.GIDType != "RoCE v2" {
			warns = append(warns, fmt.Sprintf("%s port %d used GID index %d of type %s, not RoCE v2 (routable, the kind RDMA-CM and NCCL pick)", e.Device, e.Port, e.GIDIndex, e.GIDType))
			v.remedy = appendRemedy(v.remedy, "Pass --gid-index of the RoCE v2 GID of the interface's address (`rdmadoctor inventory` lists them) on both sides.")
		}
	}
	if len(warns) > 0 {
		v.status = report.Warn
		v.line = line + " — " + strings.Join(warns, "; ")
	}
	return v
}

// subnetWarning names two RoCE GIDs of different IPv4 subnets: RoCE v2
// is routed between them, which works only through routers configured
// for it; most often the wrong GID (another interface's) was picked.
func subnetWarning(l, r *wire.Endpoint) string {
	if l.LinkLayer != "Ethernet" || l.Subnet == "" || r.Subnet == "" {
		return ""
	}
	lp, err1 := netip.ParsePrefix(l.Subnet)
	rp, err2 := netip.ParsePrefix(r.Subnet)
	if err1 != nil || err2 != nil || lp.Contains(rp.Addr()) || rp.Contains(lp.Addr()) {
		return ""
	}
	return fmt.Sprintf("the GIDs are of different subnets (%s here, %s on the peer): RoCE v2 is routed between them", l.Subnet, r.Subnet)
}

func appendRemedy(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n" + b
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
	Failures: []Failure{
		{report.Fail, "the SEND to the peer was never acknowledged (no completion, or RETRY_EXC_ERR)", "The peer does not see this host's RDMA packets: on RoCE check routing between the GIDs' addresses, UDP 4791 in firewalls, one MTU on the path; on InfiniBand the SM's paths (`ibtracert`)."},
		{report.Fail, "the 64-byte SEND crossed both ways, the --size one did not", "A hop between the hosts (switch port, VLAN, tunnel) has an MTU below the hosts' and drops full packets silently: give the path jumbo frames, or lower both hosts' netdev MTU to what it carries."},
		{report.Fail, "the peer's answer never arrived", "One direction of the path is broken: check the peer's route back and its firewall."},
		{report.Fail, "a payload or length that differs", "Data was corrupted on the path: check the cable and the counters (symbol errors, FCS) on both sides."},
		childFailure,
	},
}

func judgePeerSendRecv(p *peer.Pair) verdict {
	name := pairName(p)
	if p.Verbs == nil || p.Verbs.SendRecv == nil {
		return peerChildVerdict(p)
	}
	r := p.Verbs.SendRecv
	ev := map[string]any{"size": r.Size, "to_peer": r.ToPeer, "from_peer": r.FromPeer, "duration_ms": r.Millis}
	if r.OnePacketSize > 0 {
		ev["one_packet_size"], ev["one_packet_ok"] = r.OnePacketSize, r.OnePacketOK
	}
	if st := r.Failed(); st != nil {
		ev["failed_step"] = st
		v := verdict{status: report.Fail, evidence: ev, line: fmt.Sprintf("%s: %s", name, stepText(st))}
		v.remedy = "Compare with `ibv_rc_pingpong -d <dev> -g <gid index>` on the peer and `ibv_rc_pingpong -d <dev> -g <gid index> <peer>` here."
		noCompletion := strings.Contains(st.Error, "no completion") || strings.Contains(st.Error, "RETRY_EXC")
		if hop := smallerMTUHop(p); hop != "" && noCompletion {
			// The peer is reachable (the small SEND crossed): the step's
			// own cause, "not reachable", would mislead.
			v.line = fmt.Sprintf("%s: %s (%s: %s)", name, hop, st.Name, st.Error)
			v.remedy = "Give every switch port, VLAN and tunnel on the path an MTU of at least the hosts' (jumbo frames: 9216 on the switch for " +
				"9000 on the hosts), or lower the netdev MTU on both hosts to what the path carries (`ip link set <if> mtu 1500`): the RDMA " +
				"path MTU follows the netdevs'. Packets that exceed a hop's MTU are dropped silently, so RC retries them without end."
		} else if note := mtuSuspect(p); note != "" && noCompletion {
			v.line += " — " + note
			v.remedy = "Set one MTU on every RoCE interface and switch port of the path (`ip link set <if> mtu <N>` on both hosts)."
		} else if c := p.Verbs.Connect; noCompletion && c != nil && c.PathMTU > 1024 {
			// Both hosts agree, but a hop between them may not.
			v.remedy += fmt.Sprintf(" Both hosts carry a %d-byte path MTU; a switch port or router between them with a smaller MTU drops those packets "+
				"and RC retries without end: run again with `--size 512` — if that passes, find the hop with the smaller MTU.", c.PathMTU)
		}
		return v
	}
	first := ""
	if r.OnePacketOK {
		first = fmt.Sprintf(", after a %d-byte one", r.OnePacketSize)
	}
	return verdict{status: report.Pass, evidence: ev,
		line: fmt.Sprintf("%s: %d-byte SEND each way%s, payload intact (%.1f ms)", name, r.Size, first, r.Millis)}
}

// smallerMTUHop names a hop that drops full packets: the one-packet SEND
// crossed both ways, the full-size one did not, and both hosts agree on
// the netdev MTU (a mismatch between them is mtuSuspect's).
func smallerMTUHop(p *peer.Pair) string {
	r, c := p.Verbs.SendRecv, p.Verbs.Connect
	if !r.OnePacketOK || mtuSuspect(p) != "" || c == nil {
		return ""
	}
	pkt := c.PathMTU
	if pkt <= 0 || r.Size < pkt {
		pkt = r.Size
	}
	return fmt.Sprintf("a %d-byte SEND crossed both ways, the %d-byte one (packets of %d bytes of payload at path MTU %d) did not: "+
		"a hop between the hosts drops packets of that size (a switch port, VLAN or tunnel whose MTU is below the hosts')",
		r.OnePacketSize, r.Size, pkt, c.PathMTU)
}

// mtuSuspect names an MTU mismatch between the two sides' netdevs, the
// usual cause of messages that never complete.
func mtuSuspect(p *peer.Pair) string {
	if p.Verbs == nil || p.Verbs.Connect == nil || p.Verbs.Connect.Local == nil || p.Verbs.Connect.Remote == nil {
		return ""
	}
	l, r := p.Verbs.Connect.Local, p.Verbs.Connect.Remote
	if l.NetdevMTU > 0 && r.NetdevMTU > 0 && l.NetdevMTU != r.NetdevMTU {
		return fmt.Sprintf("likely an MTU mismatch: netdev MTU %d here, %d on the peer", l.NetdevMTU, r.NetdevMTU)
	}
	return ""
}
