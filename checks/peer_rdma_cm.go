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
}

// peer.rdma_cm's findings: one per stage of the client's side that can
// fail, the echo lost (with the netdevs' MTUs the same or not), and the
// server's side.
const (
	cmMTUFix = "Set one MTU on both hosts' RDMA netdevs and on the switch ports between them (`ip link set <if> mtu <N>`); then check the link and its counters."
	// cmLossFix is for an echo lost where the netdevs agree: the path's
	// loss comes first (on a lossy link rdma_cm's QP waits out its ACK
	// timeout like any other), and the switch ports' MTU after it.
	cmLossFix = "The connection was made and the echo was lost on the way: read peer.counters and `ethtool -S` on both netdevs " +
		"(retransmissions and drops: a lossy link or fabric — a cable, PFC/ECN on the traffic's priority); " +
		"then check that the switch ports between the hosts carry the hosts' MTU."
	cmStepMessage = "{pair}: rdma_cm {step}{server}"
)

var (
	peerRDMACMChild     = declarePeerChild(probe.RDMACM)
	peerRDMACMConnected = declare(Finding{ID: "peer.rdma_cm/connected", Status: report.Pass,
		When: "rdma_cm connected and the SEND came back intact",
		Message: "{pair}: rdma_cm connected {device} port {num} → {listener} (path MTU {path_mtu}) in {connect_ms} ms; " +
			"{size}-byte SEND echoed intact in {round_trip_ms} ms"})
	peerRDMACMListenFailed = declare(Finding{ID: "peer.rdma_cm/listen-failed", Status: report.Error,
		When:    "the server could not listen with rdma_cm (no librdmacm there, rdma_ucm not loaded): nothing was judged here",
		Message: cmStepMessage, Fix: "Run `rdmadoctor` on the peer: its rdma_cm listener failed ({listen_error})."})
	peerRDMACMControlBroke = declare(Finding{ID: "peer.rdma_cm/control-broke", Status: report.Error,
		When:    "the control conversation broke before the rdma_cm test: nothing was judged",
		Message: cmStepMessage, Fix: "The control conversation broke before the rdma_cm test; peer.control and the server's log say why."})
	cmStageFindings = map[string]*Finding{
		"library": declareCMStage("library", "librdmacm cannot be loaded",
			"Install rdma-core's librdmacm1 (Debian/Ubuntu) or librdmacm (RHEL, SUSE); `modprobe rdma_ucm` for its device node."),
		"address": declareCMStage("address", "address resolution failed (RDMA_CM_EVENT_ADDR_ERROR or no event)",
			"Address resolution: `ip route get <peer>` must leave through the RDMA netdev, `ip neigh show <peer>` must resolve, the port must be ACTIVE."),
		"route": declareCMStage("route", "route resolution failed (RDMA_CM_EVENT_ROUTE_ERROR)",
			"Route resolution: on RoCE the source address needs a RoCE v2 GID (`rdmadoctor inventory` lists the GIDs); on InfiniBand the "+
				"subnet manager must answer path queries (`sminfo`)."),
		"resources": declareCMStage("resources", "creating the QP or its resources through rdma_cm failed",
			"Run `rdmadoctor` (level 2) on this host: it judges the device's verbs alone."),
		"connect": declareCMStage("connect", "the peer rejected the connection or never answered (REJECTED, UNREACHABLE)",
			"Make sure `rdmadoctor peer serve` runs on the peer and the CM's packets pass: on RoCE v2, UDP port 4791 between the hosts "+
				"(`nft list ruleset`, ACLs, security groups)."),
	}
	peerRDMACMFailed = declare(Finding{ID: "peer.rdma_cm/failed", Status: report.Fail,
		When: "a step failed at a stage the client does not name", Message: cmStepMessage})
	peerRDMACMEchoLost = declare(Finding{ID: "peer.rdma_cm/echo-lost", Status: report.Fail,
		When:    "connected, but the echo never came back or differed, the netdevs' MTUs the same: the link loses frames",
		Message: cmStepMessage, Fix: cmLossFix})
	peerRDMACMEchoLostMTU = declare(Finding{ID: "peer.rdma_cm/echo-lost-mtu-mismatch", Status: report.Fail,
		When: "connected, but the echo never came back, and the netdevs' MTUs differ: larger frames are dropped",
		Message: cmStepMessage + " — likely an MTU mismatch: netdev MTU {mtu} here, {peer_mtu} on the peer; " +
			"rdma_cm connected at path MTU {path_mtu}, taken from this (active) side",
		Fix: cmMTUFix})
	peerRDMACMServerFailed = declare(Finding{ID: "peer.rdma_cm/server-failed", Status: report.Fail,
		When:    "this side finished, the server's side did not (its echo or its check of the data), the netdevs' MTUs the same",
		Message: "{pair}: rdma_cm: this side finished, the server did not: {server_failure}", Fix: cmLossFix})
	peerRDMACMServerFailedMTU = declare(Finding{ID: "peer.rdma_cm/server-failed-mtu-mismatch", Status: report.Fail,
		When:    "this side finished, the server's side did not, and the netdevs' MTUs differ",
		Message: "{pair}: rdma_cm: this side finished, the server did not: {server_failure}", Fix: cmMTUFix})
)

func declareCMStage(stage, when, fix string) *Finding {
	return declare(Finding{ID: "peer.rdma_cm/" + stage + "-failed", Status: report.Fail, When: when, Message: cmStepMessage, Fix: fix})
}

func judgePeerRDMACM(p *peer.Pair) verdict {
	if p.Verbs == nil || p.Verbs.RDMACM == nil {
		return peerRDMACMChild.verdict(p)
	}
	name := pairName(p)
	r := p.Verbs.RDMACM
	ev := map[string]any{"device": r.Device, "port": r.Port, "sgid": r.SGID, "dgid": r.DGID, "listener": r.Listener,
		"path_mtu": r.PathMTU, "size": r.Size, "connect_us": r.ConnectMicros, "round_trip_us": r.RoundTripMicros,
		"remote": r.Remote, "duration_ms": r.Millis}
	slots := Slots{"pair": name}
	var v verdict
	switch st := r.Failed(); {
	case st != nil:
		ev["failed_step"], ev["failed_stage"] = st, r.FailedStage
		v = cmStepFailure(p, st)
	case r.Remote != nil && !r.Remote.OK:
		f := peerRDMACMServerFailed
		if mtuMismatch(p) {
			f = peerRDMACMServerFailedMTU
		}
		v = f.unit(name, slots.with("server_failure", r.Remote.Failure()))
	default:
		v = peerRDMACMConnected.unit(name, slots.with("device", r.Device, "num", fmt.Sprint(r.Port), "listener", r.Listener,
			"path_mtu", fmt.Sprint(r.PathMTU), "connect_ms", fmt.Sprintf("%.1f", r.ConnectMicros/1000), "size", fmt.Sprint(r.Size),
			"round_trip_ms", fmt.Sprintf("%.1f", r.RoundTripMicros/1000)))
	}
	v.evidence = ev
	return v
}

// cmStepFailure is the verdict of a failed step of the client's side, by
// its stage; the server's account of its side is added when it failed too.
func cmStepFailure(p *peer.Pair, st *probe.Step) verdict {
	name, r := pairName(p), p.Verbs.RDMACM
	slots := Slots{"pair": name, "step": stepText(st), "server": ""}
	if r.Remote != nil && !r.Remote.OK && r.Remote.Error != "" {
		slots["server"] = "; on the server: " + r.Remote.Failure()
	}
	switch {
	case r.ListenError != "":
		return peerRDMACMListenFailed.unit(name, slots.with("listen_error", r.ListenError))
	case r.FailedStage == "listen":
		return peerRDMACMControlBroke.unit(name, slots)
	case r.FailedStage == "transfer" && mtuMismatch(p):
		c := p.Verbs.Connect
		return peerRDMACMEchoLostMTU.unit(name, slots.with("mtu", fmt.Sprint(c.Local.NetdevMTU), "peer_mtu", fmt.Sprint(c.Remote.NetdevMTU),
			"path_mtu", fmt.Sprint(r.PathMTU)))
	case r.FailedStage == "transfer":
		return peerRDMACMEchoLost.unit(name, slots)
	}
	if f, ok := cmStageFindings[r.FailedStage]; ok {
		return f.unit(name, slots)
	}
	return peerRDMACMFailed.unit(name, slots)
}

// peerRDMACMCheck is check 48; it needs peer.control only, not the
// hand-connected QP's chain.
var peerRDMACMCheck = peerCheck(probe.RDMACM, 48, "peer.control",
	"a connection through the RDMA connection manager (address and route resolution, connect, SEND echoed)",
	judgePeerRDMACM, peerRDMACMExplain)
