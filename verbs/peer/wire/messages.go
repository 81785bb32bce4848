package wire

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// ServerHello is the server's first frame.
type ServerHello struct {
	Magic      string `json:"magic"`
	Version    int    `json:"version"`
	MinVersion int    `json:"min_version"`
	// Nonce is the challenge the client proves the token with.
	Nonce []byte `json:"nonce"`
	// TokenRequired tells the client a token is configured, so a client
	// without one can say so instead of "wrong token".
	TokenRequired bool `json:"token_required"`
}

func (h *ServerHello) Validate() error {
	if h.Magic != Magic {
		return fmt.Errorf("magic %q is not %q: not an rdmadoctor peer server", h.Magic, Magic)
	}
	if len(h.Nonce) != NonceSize {
		return fmt.Errorf("nonce of %d bytes, want %d", len(h.Nonce), NonceSize)
	}
	return nil
}

// ClientHello is the client's answer.
type ClientHello struct {
	Magic   string `json:"magic"`
	Version int    `json:"version"`
	Proof   []byte `json:"proof"`
}

func (h *ClientHello) Validate() error {
	if h.Magic != Magic {
		return fmt.Errorf("magic %q is not %q: not an rdmadoctor peer client", h.Magic, Magic)
	}
	if len(h.Proof) != 32 {
		return fmt.Errorf("proof of %d bytes, want 32", len(h.Proof))
	}
	return nil
}

// Welcome accepts the client; Version is the version both speak.
type Welcome struct {
	Version int `json:"version"`
	// Session names the session in the server's log.
	Session string `json:"session"`
}

// RejectCode says why the server refused a client.
type RejectCode string

const (
	RejectVersion RejectCode = "version"  // no protocol version in common
	RejectToken   RejectCode = "token"    // the proof does not match the server's token
	RejectBusy    RejectCode = "busy"     // --max-sessions sessions are running
	RejectMemory  RejectCode = "memory"   // the memory cap leaves no room for another session
	RejectProto   RejectCode = "protocol" // the client broke the protocol
)

// Reject refuses the client.
type Reject struct {
	Code    RejectCode `json:"code"`
	Message string     `json:"message"`
	// Version and MinVersion are the server's, for RejectVersion.
	Version    int `json:"version,omitempty"`
	MinVersion int `json:"min_version,omitempty"`
}

// RejectError is a Reject received.
type RejectError struct{ Reject Reject }

func (e *RejectError) Error() string {
	return fmt.Sprintf("the server refused the session (%s): %s", e.Reject.Code, e.Reject.Message)
}

// ErrorMsg is a failure on the peer's side that ends the session.
type ErrorMsg struct {
	Message string `json:"message"`
}

// PeerError is an ErrorMsg received.
type PeerError struct{ Msg string }

func (e *PeerError) Error() string { return "the peer reported: " + e.Msg }

// Endpoint is one side's RC queue pair and memory, everything the other
// side needs to connect to it and reach its memory (perftest's
// pingpong_dest, plus what a doctor needs to judge the path).
type Endpoint struct {
	Device    string `json:"device"`
	Port      int    `json:"port"`
	LinkLayer string `json:"link_layer"` // "InfiniBand", "Ethernet"
	QPN       uint32 `json:"qpn"`
	PSN       uint32 `json:"psn"`
	LID       uint16 `json:"lid"`
	SL        uint8  `json:"sl"`
	// GID is the 16 raw bytes of the GID the QP sends from; GIDIndex its
	// index and GIDType its type ("RoCE v2", "RoCE v1", "IB").
	GID      []byte `json:"gid,omitempty"`
	GIDIndex int    `json:"gid_index"`
	GIDType  string `json:"gid_type,omitempty"`
	// ActiveMTU is the port's active_mtu in bytes; NetdevMTU the MTU of
	// the netdev behind the GID (RoCE), 0 when there is none.
	ActiveMTU int    `json:"active_mtu"`
	NetdevMTU int    `json:"netdev_mtu,omitempty"`
	Netdev    string `json:"netdev,omitempty"`
	// Subnet is the netdev's address that the GID carries, with its
	// prefix ("192.0.2.1/24"); empty when unknown or not IPv4-mapped.
	Subnet string `json:"subnet,omitempty"`
	// Addr, RKey and Len are the memory region the other side may
	// WRITE to and READ from.
	Addr uint64 `json:"addr"`
	RKey uint32 `json:"rkey"`
	Len  uint32 `json:"len"`
	// Software is set for a software device (rxe, siw): its timings are
	// the host CPU's, not a NIC's.
	Software bool `json:"software,omitempty"`
}

// maxQPN is the largest 24-bit QP number (and PSN).
const maxQPN = 1<<24 - 1

func (e *Endpoint) Validate() error {
	switch {
	case e.QPN == 0 || e.QPN > maxQPN:
		return fmt.Errorf("QPN %#x is not a 24-bit QP number above 0", e.QPN)
	case e.PSN > maxQPN:
		return fmt.Errorf("PSN %#x is not 24-bit", e.PSN)
	case len(e.GID) != 0 && len(e.GID) != 16:
		return fmt.Errorf("GID of %d bytes, want 16", len(e.GID))
	case e.LinkLayer == "Ethernet" && len(e.GID) != 16:
		return errors.New("a RoCE endpoint without a GID")
	case e.GIDIndex < 0 || e.GIDIndex > 1<<16:
		return fmt.Errorf("GID index %d out of range", e.GIDIndex)
	case e.SL > 15:
		return fmt.Errorf("SL %d is not 0-15", e.SL)
	case MTUEnum(e.ActiveMTU) == 0:
		return fmt.Errorf("active MTU %d is not one of 256, 512, 1024, 2048, 4096", e.ActiveMTU)
	case e.NetdevMTU < 0 || e.NetdevMTU > 1<<20:
		return fmt.Errorf("netdev MTU %d out of range", e.NetdevMTU)
	case e.Port < 1 || e.Port > 255:
		return fmt.Errorf("port %d is not 1-255", e.Port)
	case len(e.Device) > 64 || len(e.Netdev) > 64:
		return errors.New("device or netdev name longer than 64 bytes")
	case e.LinkLayer != "InfiniBand" && e.LinkLayer != "Ethernet" && e.LinkLayer != "Unspecified":
		return fmt.Errorf("link layer %q is not InfiniBand, Ethernet or Unspecified", e.LinkLayer)
	case e.GIDType != "" && e.GIDType != "RoCE v2" && e.GIDType != "RoCE v1" && e.GIDType != "IB/RoCE v1":
		return fmt.Errorf("GID type %q is not RoCE v2, RoCE v1 or IB/RoCE v1", e.GIDType)
	case e.Subnet != "" && !validPrefix(e.Subnet):
		return fmt.Errorf("subnet %q is not an address with a prefix", e.Subnet)
	}
	return nil
}

func validPrefix(s string) bool {
	_, err := netip.ParsePrefix(s)
	return err == nil
}

// GIDString formats the GID as an IPv6 address, as the kernel shows it.
func (e *Endpoint) GIDString() string {
	if len(e.GID) != 16 {
		return ""
	}
	return net.IP(e.GID).String()
}

// HostReport is what a side says about its own host, for the other's
// report.
type HostReport struct {
	Hostname string  `json:"hostname"`
	Kernel   string  `json:"kernel,omitempty"`
	Version  string  `json:"version,omitempty"` // rdmadoctor's
	RateGbps float64 `json:"rate_gbps,omitempty"`
	// Counters are the port's error and congestion counters when the
	// report was made.
	Counters map[string]uint64 `json:"counters,omitempty"`
}

// Params are the client's choices for the session.
type Params struct {
	// MsgSize is the SEND/WRITE/READ size of the functional tests.
	MsgSize int `json:"msg_size"`
	// BufferSize is the memory region each side registers.
	BufferSize int `json:"buffer_size"`
}

// MaxBuffer bounds the memory region a client may ask a server for.
const MaxBuffer = 64 << 20

// The buffer's layout: three regions of MsgSize at its start (0: what
// this side sends or writes, 1: what it receives or reads into, 2: the
// other side's WRITE and READ target), and the upper half for the
// bandwidth run.
func (p *Params) Validate() error {
	if p.MsgSize < 1 || p.BufferSize < 1 || p.BufferSize > MaxBuffer || 3*p.MsgSize > p.BufferSize/2 {
		return fmt.Errorf("message size %d and buffer %d: want 1 ≤ 3×message ≤ buffer/2, buffer ≤ %d", p.MsgSize, p.BufferSize, MaxBuffer)
	}
	return nil
}

// BandwidthRegion is the offset and length of the bandwidth run's half.
func (p *Params) BandwidthRegion() (off, n int) {
	return p.BufferSize / 2, p.BufferSize - p.BufferSize/2
}

// Setup opens the endpoint exchange: the client's QP, host and choices.
type Setup struct {
	Endpoint Endpoint   `json:"endpoint"`
	Host     HostReport `json:"host"`
	Params   Params     `json:"params"`
}

func (s *Setup) Validate() error {
	if err := s.Endpoint.Validate(); err != nil {
		return fmt.Errorf("endpoint: %w", err)
	}
	return s.Params.Validate()
}

// SetupReply is the server's QP, connected to the client's (RTS), and its
// host; or Error, when the server could not build or connect it.
type SetupReply struct {
	Endpoint Endpoint   `json:"endpoint"`
	Host     HostReport `json:"host"`
	PathMTU  int        `json:"path_mtu"`
	// Steps are the server's verbs calls, for the client's report when
	// one failed.
	Error string `json:"error,omitempty"`
}

func (s *SetupReply) Validate() error {
	if s.Error != "" {
		return nil
	}
	return s.Endpoint.Validate()
}

// OpKind is one operation the client asks the server to take part in.
type OpKind string

const (
	// OpSendRecv: post a receive, say OpReady, wait for the client's
	// SEND, check its payload, SEND the answer back, then OpReply.
	OpSendRecv OpKind = "send_recv"
	// OpCheckMemory: compare Len bytes at Offset of the region with the
	// pattern of Seed (after the client's RDMA WRITE).
	OpCheckMemory OpKind = "check_memory"
	// OpFillMemory: fill Len bytes at Offset with the pattern of Seed
	// (before the client's RDMA READ).
	OpFillMemory OpKind = "fill_memory"
	// OpEcho: post Count receives, say OpReady, and answer every SEND
	// with a SEND of the same size (the latency ping-pong).
	OpEcho OpKind = "echo"
	// OpCounters: read the port's counters now.
	OpCounters OpKind = "counters"
)

// Op asks the server to take part in one test.
type Op struct {
	Kind   OpKind `json:"kind"`
	Seed   uint32 `json:"seed"`
	Offset int    `json:"offset"`
	Len    int    `json:"len"`
	Count  int    `json:"count,omitempty"`
	// WaitMS bounds the server's waits in this operation.
	WaitMS int `json:"wait_ms"`
}

// MaxEcho bounds the round trips of one OpEcho.
const MaxEcho = 100000

func (o *Op) Validate() error {
	switch o.Kind {
	case OpSendRecv, OpCheckMemory, OpFillMemory, OpEcho, OpCounters:
	default:
		return fmt.Errorf("unknown operation %q", o.Kind)
	}
	if o.Offset < 0 || o.Len < 0 || o.Offset > MaxBuffer || o.Len > MaxBuffer || o.Count < 0 || o.Count > MaxEcho || o.WaitMS < 0 || o.WaitMS > 600000 {
		return fmt.Errorf("operation %s: offset %d, len %d, count %d or wait %d ms out of range", o.Kind, o.Offset, o.Len, o.Count, o.WaitMS)
	}
	return nil
}

// OpReady says the server's receives are posted.
type OpReady struct{}

// OpReply is how the server's part of an operation went.
type OpReply struct {
	OK bool `json:"ok"`
	// Error is what went wrong on the server's side, with the verb.
	Error    string            `json:"error,omitempty"`
	Detail   string            `json:"detail,omitempty"`
	Counters map[string]uint64 `json:"counters,omitempty"`
}

// MTUEnum maps an MTU in bytes to enum ibv_mtu (1 = 256 … 5 = 4096); 0
// for any other value.
func MTUEnum(bytes int) int {
	switch bytes {
	case 256:
		return 1
	case 512:
		return 2
	case 1024:
		return 3
	case 2048:
		return 4
	case 4096:
		return 5
	}
	return 0
}

// roceOverhead is what a RoCE v2 packet adds to its payload inside the
// netdev's MTU: IPv4 20 (IPv6 40), UDP 8, BTH 12, RETH 16, ICRC 4 —
// 40 + 20 + 16 + 4 rounded to the 96 bytes the drivers reserve.
const roceOverhead = 96

// NegotiatePathMTU is the RC path MTU two endpoints can use: the smaller
// active_mtu, and on RoCE no more than the largest IB MTU whose packet
// fits the smaller netdev MTU (1500 → 1024, 9000 → 4096). Note says what
// held it down when the two sides differ; empty when they agree.
func NegotiatePathMTU(a, b *Endpoint) (mtu int, note string) {
	mtu = min(a.ActiveMTU, b.ActiveMTU)
	if a.ActiveMTU != b.ActiveMTU {
		note = fmt.Sprintf("active_mtu %d here, %d there", a.ActiveMTU, b.ActiveMTU)
	}
	if a.LinkLayer == "Ethernet" || b.LinkLayer == "Ethernet" {
		nd := 0
		for _, n := range []int{a.NetdevMTU, b.NetdevMTU} {
			if n > 0 && (nd == 0 || n < nd) {
				nd = n
			}
		}
		if nd > 0 {
			fit := 256
			for _, m := range []int{4096, 2048, 1024, 512} {
				if m+roceOverhead <= nd {
					fit = m
					break
				}
			}
			if fit < mtu {
				mtu = fit
			}
		}
		if a.NetdevMTU != b.NetdevMTU && a.NetdevMTU > 0 && b.NetdevMTU > 0 {
			if note != "" {
				note += "; "
			}
			note += fmt.Sprintf("netdev MTU %d here, %d there", a.NetdevMTU, b.NetdevMTU)
		}
	}
	return mtu, note
}

// Pattern fills b with the bytes of seed: a test payload both sides can
// check without sending it twice.
func Pattern(b []byte, seed uint32) {
	x := seed*2654435761 | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

// PatternMismatch returns the first offset where b differs from seed's
// pattern, -1 when it matches.
func PatternMismatch(b []byte, seed uint32) int {
	want := make([]byte, len(b))
	Pattern(want, seed)
	for i := range b {
		if b[i] != want[i] {
			return i
		}
	}
	return -1
}
