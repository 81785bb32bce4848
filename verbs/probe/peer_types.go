package probe

import (
	"net/netip"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
)

// Peer check names: the IDs of the checks that judge the two-host
// session's results. peer.control is judged from the TCP conversation
// alone (verbs/peer); the others come from the client's verbs child.
const (
	PeerConnect   = "peer.connect"
	PeerSendRecv  = "peer.send_recv"
	PeerWrite     = "peer.rdma_write"
	PeerRead      = "peer.rdma_read"
	PeerLatency   = "peer.latency"
	PeerBandwidth = "peer.bandwidth"
	PeerCounters  = "peer.counters"
)

// PeerProbes lists the verbs parts of a peer session in run order; each
// runs only when the one before it passed.
var PeerProbes = []string{PeerConnect, PeerSendRecv, PeerWrite, PeerRead, PeerLatency, PeerBandwidth, PeerCounters}

// PeerRequest is one side's share of a peer session, as its child gets it.
type PeerRequest struct {
	// Library is the libibverbs to open ("" = the loader's).
	Library string `json:"library,omitempty"`
	// Device and Port select the local port; "" and 0 take the first
	// ACTIVE port of the first device that has one.
	Device string `json:"device,omitempty"`
	Port   int    `json:"port,omitempty"`
	// GIDIndex selects the local GID on RoCE; -1 picks one (RoCE v2,
	// IPv4-mapped first).
	GIDIndex int `json:"gid_index"`
	// Params are the client's choices (the server takes the client's
	// from its Setup, within MaxBuffer).
	Params wire.Params `json:"params"`
	// MaxBuffer is the most memory the server registers for one session
	// (its share of --max-memory).
	MaxBuffer int `json:"max_buffer,omitempty"`
	// SessionNS bounds the whole session; IOTimeoutNS each control frame.
	SessionNS   int64 `json:"session_ns"`
	IOTimeoutNS int64 `json:"io_timeout_ns"`
	// Host is what this side reports of itself.
	Host wire.HostReport `json:"host"`
	// Iterations is the number of latency round trips (fewer when
	// LatencyBudgetNS runs out first).
	Iterations      int   `json:"iterations,omitempty"`
	LatencyBudgetNS int64 `json:"latency_budget_ns,omitempty"`
	// BandwidthNS is how long each message size of the bandwidth run
	// lasts.
	BandwidthNS int64 `json:"bandwidth_ns,omitempty"`
	// HostRoot is the host directory counters and rates are read under
	// ("" = "/").
	HostRoot string `json:"host_root,omitempty"`
	// ProtocolVersion is the control protocol version the two sides
	// agreed on (wire.Version), for what an older server cannot do.
	ProtocolVersion int `json:"protocol_version,omitempty"`

	// peerIP is the other side's control address, set in the child.
	peerIP netip.Addr
}

func (r *PeerRequest) withDefaults() {
	if r.Iterations <= 0 {
		r.Iterations = 1000
	}
	if r.LatencyBudgetNS <= 0 {
		r.LatencyBudgetNS = int64(2 * time.Second)
	}
	if r.BandwidthNS <= 0 {
		r.BandwidthNS = int64(500 * time.Millisecond)
	}
	if r.HostRoot == "" {
		r.HostRoot = "/"
	}
}

// PeerConnectResult is peer.connect: both QPs built and moved to RTS
// toward each other.
type PeerConnectResult struct {
	Probe
	Local      *wire.Endpoint   `json:"local,omitempty"`
	Remote     *wire.Endpoint   `json:"remote,omitempty"`
	LocalHost  *wire.HostReport `json:"local_host,omitempty"`
	RemoteHost *wire.HostReport `json:"remote_host,omitempty"`
	// PathMTU is the negotiated path MTU in bytes; MTUNote what held it
	// down when the two sides differ.
	PathMTU int    `json:"path_mtu,omitempty"`
	MTUNote string `json:"mtu_note,omitempty"`
	// RemoteError is the server's own failure, when it had one.
	RemoteError string `json:"remote_error,omitempty"`
}

// PeerSendRecvResult is peer.send_recv: a SEND each way, payload checked.
type PeerSendRecvResult struct {
	Probe
	Size int `json:"size"`
	// ToPeer and FromPeer say which directions delivered intact.
	ToPeer   bool `json:"to_peer"`
	FromPeer bool `json:"from_peer"`
	// OnePacketSize is the size of the SEND each way before the full one
	// (0: none was sent, as --size fits one packet or the server speaks
	// protocol 1); OnePacketOK says it crossed both ways intact. A small
	// SEND that crosses and a full one that does not is a hop with a
	// smaller MTU than the hosts'.
	OnePacketSize int  `json:"one_packet_size,omitempty"`
	OnePacketOK   bool `json:"one_packet_ok,omitempty"`
	// RemoteError is the server's account of its side.
	RemoteError string `json:"remote_error,omitempty"`
}

// PeerRDMAResult is peer.rdma_write or peer.rdma_read: one RDMA WRITE
// into the server's region (checked there), or one RDMA READ of a pattern
// the server wrote (checked here), through the server's rkey.
type PeerRDMAResult struct {
	Probe
	Size        int    `json:"size"`
	Status      string `json:"status,omitempty"` // the completion's
	RemoteError string `json:"remote_error,omitempty"`
}

// PeerLatencyResult is peer.latency: SEND ping-pong round trips.
type PeerLatencyResult struct {
	Probe
	Size            int `json:"size"`
	IterationsAsked int `json:"iterations_asked"`
	// Warmup is how many round trips ran before the counted ones (the
	// estimate and each batch's warm-up: peer_measure.go).
	Warmup      int    `json:"warmup_round_trips"`
	Latency     Stats  `json:"latency_ns"`
	RemoteError string `json:"remote_error,omitempty"`
}

// BandwidthRun is one message size of the bandwidth run.
type BandwidthRun struct {
	Size        int     `json:"size"`
	Outstanding int     `json:"outstanding"`
	Messages    int     `json:"messages"`
	Seconds     float64 `json:"seconds"`
	Gbps        float64 `json:"gbps"`
}

// PeerBandwidthResult is peer.bandwidth: RDMA WRITEs with several work
// requests outstanding, at a few message sizes.
type PeerBandwidthResult struct {
	Probe
	Runs []BandwidthRun `json:"runs"`
	// LocalRateGbps and RemoteRateGbps are the ports' rates (0: unknown).
	LocalRateGbps  float64 `json:"local_rate_gbps"`
	RemoteRateGbps float64 `json:"remote_rate_gbps"`
	// Software is set when either side's device is software (rxe, siw):
	// its rate is no NIC's.
	Software bool `json:"software,omitempty"`
}

// PeerCounter is one counter read before and after the session's transfers.
type PeerCounter struct {
	Name   string `json:"name"`
	Before uint64 `json:"before"`
	After  uint64 `json:"after"`
}

// PeerCountersResult is peer.counters: both sides' port counters (PMA
// counters/ and the driver's hw_counters/) around the session's transfers.
type PeerCountersResult struct {
	Probe
	Local       []PeerCounter `json:"local"`
	Remote      []PeerCounter `json:"remote"`
	LocalError  string        `json:"local_error,omitempty"`
	RemoteError string        `json:"remote_error,omitempty"`
}

// PeerResult is the client's whole session with one server.
type PeerResult struct {
	Connect   *PeerConnectResult   `json:"connect,omitempty"`
	SendRecv  *PeerSendRecvResult  `json:"send_recv,omitempty"`
	Write     *PeerRDMAResult      `json:"rdma_write,omitempty"`
	Read      *PeerRDMAResult      `json:"rdma_read,omitempty"`
	Latency   *PeerLatencyResult   `json:"latency,omitempty"`
	Bandwidth *PeerBandwidthResult `json:"bandwidth,omitempty"`
	Counters  *PeerCountersResult  `json:"counters,omitempty"`
	RDMACM    *CMPeerResult        `json:"rdma_cm,omitempty"`
	// Failure is set when the child did not finish: killed at the
	// session's deadline, crashed, or could not start.
	Failure *ChildFailure `json:"failure,omitempty"`
	Stderr  string        `json:"stderr,omitempty"`
	Millis  float64       `json:"duration_ms"`
}
