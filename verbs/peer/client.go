package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// TestConfig is `peer test`'s configuration.
type TestConfig struct {
	Exe   string
	Token string
	// Library is the libibverbs to open ("" = the loader's).
	Library string
	// HostRoot is where the port's counters and rate are read ("" = "/").
	HostRoot string
	// Device, Port and GIDIndex select the local port (PeerRequest).
	Device   string
	Port     int
	GIDIndex int
	// Timeout bounds one pair's whole session; IOTimeout the connect and
	// each control frame.
	Timeout   time.Duration
	IOTimeout time.Duration
	// Params are the sizes of the session.
	Params wire.Params
	// Iterations is the number of latency round trips, within
	// LatencyBudget; BandwidthTime the length of each message size's
	// bandwidth run. Zero takes the defaults (1000, 2s, 500ms).
	Iterations    int
	LatencyBudget time.Duration
	BandwidthTime time.Duration
	// Concurrency bounds the pairs tested at once.
	Concurrency int
	Host        wire.HostReport
	// LocalFault, when set, is why this host cannot take part (found
	// before any verbs child, from sysfs): each pair then runs the
	// control handshake only, says Bye, and reports peer.connect failed
	// at this step, as a child would have.
	LocalFault *probe.Step
}

// Default sizes and limits of `peer test`.
const (
	DefaultTestTimeout = 30 * time.Second
	DefaultConcurrency = 4
	DefaultMsgSize     = 4096
	DefaultBufferSize  = 4 << 20
)

func (c *TestConfig) withDefaults() {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTestTimeout
	}
	if c.IOTimeout <= 0 {
		c.IOTimeout = DefaultIOTimeout
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Params.MsgSize <= 0 {
		c.Params.MsgSize = DefaultMsgSize
	}
	if c.Params.BufferSize <= 0 {
		c.Params.BufferSize = DefaultBufferSize
	}
}

// ControlFault names why the control conversation failed.
type ControlFault string

const (
	FaultNone     ControlFault = ""
	FaultAddress  ControlFault = "address"  // the name does not resolve, or the address is malformed
	FaultRefused  ControlFault = "refused"  // nothing listens on the port (RST)
	FaultTimeout  ControlFault = "timeout"  // no answer: a firewall dropping packets, or the host is down
	FaultNoRoute  ControlFault = "no-route" // no route to the host or network
	FaultNotPeer  ControlFault = "not-peer" // something else answered on the port
	FaultVersion  ControlFault = "version"  // no protocol version in common
	FaultToken    ControlFault = "token"    // the token was refused
	FaultBusy     ControlFault = "busy"     // the server's session cap is reached
	FaultProtocol ControlFault = "protocol" // the conversation broke the protocol
	FaultNetwork  ControlFault = "network"  // another network error
)

// Control is the outcome of the control conversation with one server.
type Control struct {
	Fault ControlFault `json:"fault,omitempty"`
	Error string       `json:"error,omitempty"`
	// Addr is the address connected to; Version the protocol agreed.
	Addr    string `json:"addr,omitempty"`
	Version int    `json:"version,omitempty"`
	// ConnectMillis is the TCP connect; Millis the connect and the
	// handshake.
	ConnectMillis float64 `json:"connect_ms"`
	Millis        float64 `json:"duration_ms"`
	// ServerVersion and ServerMinVersion are what the server speaks.
	ServerVersion    int `json:"server_version,omitempty"`
	ServerMinVersion int `json:"server_min_version,omitempty"`
}

// Pair is one client–server pair's results.
type Pair struct {
	// Peer is the server as given on the command line; Target the
	// HOST:PORT dialled.
	Peer    string            `json:"peer"`
	Target  string            `json:"target"`
	Control Control           `json:"control"`
	Verbs   *probe.PeerResult `json:"verbs,omitempty"`
}

// Target adds the default port to a peer given without one.
func Target(peer string) (string, error) {
	host, port, err := net.SplitHostPort(peer)
	if err != nil {
		// No port: a name, an IPv4 address or a bare IPv6 address.
		if ip := net.ParseIP(peer); ip != nil || !containsColon(peer) {
			return net.JoinHostPort(peer, strconv.Itoa(wire.DefaultPort)), nil
		}
		return "", fmt.Errorf("peer %q: %v", peer, err)
	}
	if host == "" {
		return "", fmt.Errorf("peer %q: no host", peer)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("peer %q: port %q is not 1-65535", peer, port)
	}
	return peer, nil
}

func containsColon(s string) bool {
	for i := range len(s) {
		if s[i] == ':' {
			return true
		}
	}
	return false
}

// Test tests every peer, at most cfg.Concurrency at once, and returns the
// pairs in the order given.
func Test(ctx context.Context, cfg TestConfig, peers []string) []Pair {
	cfg.withDefaults()
	out := make([]Pair, len(peers))
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				out[i] = Pair{Peer: p, Control: Control{Fault: FaultNetwork, Error: "not tested: " + ctx.Err().Error()}}
				return
			}
			out[i] = testOne(ctx, &cfg, p)
		}()
	}
	wg.Wait()
	return out
}

// testOne runs the control conversation with one server and, when it
// passed, the verbs session in a child.
func testOne(ctx context.Context, cfg *TestConfig, peerName string) Pair {
	pr := Pair{Peer: peerName}
	target, err := Target(peerName)
	if err != nil {
		pr.Control = Control{Fault: FaultAddress, Error: err.Error()}
		return pr
	}
	pr.Target = target
	conn, ctl := Handshake(ctx, target, cfg.Token, cfg.IOTimeout)
	pr.Control = ctl
	if conn == nil {
		return pr
	}
	defer conn.Close()
	if cfg.LocalFault != nil {
		// The server's session waits for a Setup or a Bye: Bye ends it at
		// once instead of at its deadline.
		_ = (&wire.Conn{Conn: conn, IOTimeout: cfg.IOTimeout}).Send(wire.MsgBye, struct{}{})
		pr.Verbs = &probe.PeerResult{Connect: &probe.PeerConnectResult{
			Probe: probe.Probe{Name: probe.PeerConnect, Steps: []probe.Step{*cfg.LocalFault}}}}
		return pr
	}
	_ = conn.SetDeadline(time.Time{})
	preq := probe.PeerRequest{Library: cfg.Library, HostRoot: cfg.HostRoot, Device: cfg.Device, Port: cfg.Port, GIDIndex: cfg.GIDIndex, Params: cfg.Params,
		SessionNS: int64(cfg.Timeout), IOTimeoutNS: int64(cfg.IOTimeout), Host: cfg.Host,
		Iterations: cfg.Iterations, LatencyBudgetNS: int64(cfg.LatencyBudget), BandwidthNS: int64(cfg.BandwidthTime),
		ProtocolVersion: pr.Control.Version}
	pr.Verbs = probe.PeerTest(ctx, cfg.Exe, conn, preq)
	return pr
}

// Handshake connects to target and runs the handshake; it returns the
// connection (nil on failure) and the outcome, the fault named.
func Handshake(ctx context.Context, target, token string, ioTimeout time.Duration) (*net.TCPConn, Control) {
	t0 := time.Now()
	ctl := Control{}
	done := func(f ControlFault, err error) (*net.TCPConn, Control) {
		ctl.Fault, ctl.Error = f, err.Error()
		ctl.Millis = float64(time.Since(t0).Microseconds()) / 1000
		return nil, ctl
	}
	c, err := dialer(ioTimeout).DialContext(ctx, "tcp", target)
	if err != nil {
		return done(dialFault(err), err)
	}
	ctl.Addr = c.RemoteAddr().String()
	ctl.ConnectMillis = float64(time.Since(t0).Microseconds()) / 1000
	wc := &wire.Conn{Conn: c, IOTimeout: ioTimeout}
	fail := func(f ControlFault, err error) (*net.TCPConn, Control) {
		c.Close()
		return done(f, err)
	}
	var hello wire.ServerHello
	if err := wc.Expect(0, wire.MsgServerHello, &hello); err != nil {
		return fail(frameFault(err, FaultNotPeer), fmt.Errorf("%s answered, but not as an rdmadoctor peer server: %w", target, err))
	}
	ctl.ServerVersion, ctl.ServerMinVersion = hello.Version, hello.MinVersion
	if wire.Version < hello.MinVersion || wire.MinVersion > hello.Version {
		return fail(FaultVersion, fmt.Errorf("the server speaks protocol %d–%d, this client %d–%d: run the same rdmadoctor release on both",
			hello.MinVersion, hello.Version, wire.MinVersion, wire.Version))
	}
	if hello.TokenRequired && token == "" {
		return fail(FaultToken, errors.New("the server requires a token and none was given (--token or RDMADOCTOR_PEER_TOKEN)"))
	}
	version := min(wire.Version, hello.Version)
	if err := wc.Send(wire.MsgClientHello, wire.ClientHello{Magic: wire.Magic, Version: version, Proof: wire.Proof(token, hello.Nonce)}); err != nil {
		return fail(FaultNetwork, err)
	}
	var welcome wire.Welcome
	if err := wc.Expect(0, wire.MsgWelcome, &welcome); err != nil {
		return fail(frameFault(err, FaultProtocol), err)
	}
	ctl.Version = welcome.Version
	ctl.Millis = float64(time.Since(t0).Microseconds()) / 1000
	return c.(*net.TCPConn), ctl
}

// dialFault tells apart why a TCP connect failed.
func dialFault(err error) ControlFault {
	var dnsErr *net.DNSError
	var ne net.Error
	var ae *net.AddrError
	switch {
	case errors.As(err, &dnsErr), errors.As(err, &ae):
		return FaultAddress
	case errors.Is(err, syscall.ECONNREFUSED):
		return FaultRefused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return FaultNoRoute
	case errors.As(err, &ne) && ne.Timeout():
		return FaultTimeout
	}
	return FaultNetwork
}

// frameFault classifies a failure while waiting for a frame: a Reject by
// its code, a timeout, a protocol violation as other.
func frameFault(err error, other ControlFault) ControlFault {
	var rj *wire.RejectError
	var ne net.Error
	var fe *wire.FrameError
	switch {
	case errors.As(err, &rj):
		switch rj.Reject.Code {
		case wire.RejectVersion:
			return FaultVersion
		case wire.RejectToken:
			return FaultToken
		case wire.RejectBusy, wire.RejectMemory:
			return FaultBusy
		}
		return FaultProtocol
	case errors.As(err, &ne) && ne.Timeout():
		return FaultTimeout
	case errors.As(err, &fe):
		return other
	}
	return FaultNetwork
}
