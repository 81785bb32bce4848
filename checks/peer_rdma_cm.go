package checks

import (
	"fmt"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

var peerRDMACMExplain = Explanation{
	Judges: "The client asks the server's session to listen with the RDMA connection manager (on the address of its RoCE v2 GID), " +
		"then connects the way MPI, NFS-over-RDMA and storage initiators do: rdma_resolve_addr (the route and neighbour lookup " +
		"that picks the local device), rdma_resolve_route (the GID, or the subnet manager's path on InfiniBand), rdma_create_qp, " +
		"rdma_connect to ESTABLISHED, then a SEND the server echoes back, checked byte for byte, and rdma_disconnect. librdmacm " +
		"is opened at run time; every event is read with a deadline. It needs only the control connection: it runs even when " +
		"the hand-connected QP of peer.connect failed, so the two ways of connecting can be compared.",
	Why: "Applications that connect through rdma_cm depend on what the hand-made QP does not: address and route resolution, the " +
		"CM's own packets (UDP 4791 on RoCE v2), a listener on the peer. `ibv_rc_pingpong` working while `rping` or an MPI job " +
		"hangs is this class of fault.",
	Failures: []Failure{
		{report.Fail, "librdmacm cannot be loaded", "Install rdma-core's librdmacm1 (Debian/Ubuntu) or librdmacm (RHEL, SUSE)."},
		{report.Fail, "address resolution failed (RDMA_CM_EVENT_ADDR_ERROR or no event)", "Check `ip route get <peer>` names the RDMA netdev, `ip neigh show <peer>` resolves, and the port is ACTIVE."},
		{report.Fail, "route resolution failed (RDMA_CM_EVENT_ROUTE_ERROR)", "On RoCE, the source address needs a GID (check the port's GID table); on InfiniBand, the subnet manager must answer path queries."},
		{report.Fail, "the peer rejected the connection or never answered (REJECTED, UNREACHABLE)", "Nothing listens, or the CM's packets are lost: open UDP 4791 between the hosts on RoCE v2."},
		{report.Fail, "connected, but the echo never came back or differed", "Where the netdevs' MTUs differ, larger frames are dropped: set one MTU on both hosts' RDMA netdevs and the switch ports; where they agree, the link loses frames: peer.counters and `ethtool -S` on both sides."},
		{report.Error, "the server could not listen with rdma_cm", "Run `rdmadoctor` on the peer: its error names the step (no librdmacm there, rdma_ucm not loaded)."},
		childFailure,
	},
}

// cmStageFix is the remedy per failed stage of the client's side.
var cmStageFix = map[string]string{
	"library":   "Install rdma-core's librdmacm1 (Debian/Ubuntu) or librdmacm (RHEL, SUSE); `modprobe rdma_ucm` for its device node.",
	"address":   "Address resolution: `ip route get <peer>` must leave through the RDMA netdev, `ip neigh show <peer>` must resolve, the port must be ACTIVE.",
	"route":     "Route resolution: on RoCE the source address needs a RoCE v2 GID (`rdmadoctor inventory` lists the GIDs); on InfiniBand the subnet manager must answer path queries (`sminfo`).",
	"resources": "Run `rdmadoctor` (level 2) on this host: it judges the device's verbs alone.",
	"connect":   "Make sure `rdmadoctor peer serve` runs on the peer and the CM's packets pass: on RoCE v2, UDP port 4791 between the hosts (`nft list ruleset`, ACLs, security groups).",
	"transfer":  "Set one MTU on both hosts' RDMA netdevs and on the switch ports between them (`ip link set <if> mtu <N>`); then check the link and its counters.",
}

// cmTransferFix is the remedy for an echo lost after the connection was
// made: the MTU mismatch when the netdevs' MTUs differ; otherwise the
// path's loss comes first (on a lossy link rdma_cm's QP waits out its ACK
// timeout like any other), and the switch ports' MTU after it.
func cmTransferFix(p *peer.Pair) string {
	if mtuSuspect(p) != "" {
		return cmStageFix["transfer"]
	}
	return "The connection was made and the echo was lost on the way: read peer.counters and `ethtool -S` on both netdevs " +
		"(retransmissions and drops: a lossy link or fabric — a cable, PFC/ECN on the traffic's priority); " +
		"then check that the switch ports between the hosts carry the hosts' MTU."
}

func judgePeerRDMACM(p *peer.Pair) verdict {
	name := pairName(p)
	if p.Verbs == nil || p.Verbs.RDMACM == nil {
		return peerChildVerdict(p)
	}
	r := p.Verbs.RDMACM
	ev := map[string]any{"device": r.Device, "port": r.Port, "sgid": r.SGID, "dgid": r.DGID, "listener": r.Listener,
		"path_mtu": r.PathMTU, "size": r.Size, "connect_us": r.ConnectMicros, "round_trip_us": r.RoundTripMicros,
		"remote": r.Remote, "duration_ms": r.Millis}
	if st := r.Failed(); st != nil {
		ev["failed_step"], ev["failed_stage"] = st, r.FailedStage
		v := verdict{status: report.Fail, evidence: ev, line: fmt.Sprintf("%s: rdma_cm %s", name, stepText(st))}
		switch {
		case r.ListenError != "":
			v.status = report.Error // the server could not take part: nothing was judged here
			v.remedy = "Run `rdmadoctor` on the peer: its rdma_cm listener failed (" + r.ListenError + ")."
		case r.FailedStage == "listen":
			v.status = report.Error
			v.remedy = "The control conversation broke before the rdma_cm test; peer.control and the server's log say why."
		case r.FailedStage == "transfer":
			v.remedy = cmTransferFix(p)
		default:
			v.remedy = cmStageFix[r.FailedStage]
		}
		if r.Remote != nil && !r.Remote.OK && r.Remote.Error != "" {
			v.line += fmt.Sprintf("; on the server: %s: %s", r.Remote.Step, r.Remote.Error)
		}
		if note := mtuSuspect(p); note != "" && r.FailedStage == "transfer" {
			v.line += fmt.Sprintf(" — %s; rdma_cm connected at path MTU %d, taken from this (active) side", note, r.PathMTU)
		}
		return v
	}
	if r.Remote != nil && !r.Remote.OK {
		ev["remote"] = r.Remote
		return verdict{status: report.Fail, evidence: ev, remedy: cmTransferFix(p),
			line: fmt.Sprintf("%s: rdma_cm: this side finished, the server did not: %s: %s", name, r.Remote.Step, r.Remote.Error)}
	}
	return verdict{status: report.Pass, evidence: ev,
		line: fmt.Sprintf("%s: rdma_cm connected %s port %d → %s (path MTU %d) in %.1f ms; %d-byte SEND echoed intact in %.1f ms",
			name, r.Device, r.Port, r.Listener, r.PathMTU, r.ConnectMicros/1000, r.Size, r.RoundTripMicros/1000)}
}

// peerRDMACMCheck is check 48; it needs peer.control only, not the
// hand-connected QP's chain.
var peerRDMACMCheck = peerCheck(probe.RDMACM, 48, "peer.control",
	"a connection through the RDMA connection manager (address and route resolution, connect, SEND echoed)",
	judgePeerRDMACM, peerRDMACMExplain)
