// Package peer runs `rdmadoctor peer`: the server that lends a port to
// other hosts' tests, and the client that tests the path to one or more
// servers. The TCP conversation is package wire's; every verbs call runs
// in a child process per session (package probe), so a session's verbs
// objects die with it whatever happens.
package peer

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// ServerConfig is `peer serve`'s configuration.
type ServerConfig struct {
	// Exe is this binary, re-executed for each session's verbs child.
	Exe string
	// Token, when set, is required of every client (an HMAC proof over
	// the server's nonce; the token itself never crosses the wire).
	// Without one the server serves anyone, so Serve accepts only a
	// loopback or link-local listener then.
	Token string
	// Once ends the server after its first session that passed the
	// handshake.
	Once bool
	// SessionTimeout bounds one session from the handshake to Bye.
	SessionTimeout time.Duration
	// HandshakeTimeout bounds a connection from accept to Welcome: one
	// that has not passed its handshake by then is dropped.
	HandshakeTimeout time.Duration
	// IOTimeout bounds each frame read or written: a slower client is
	// dropped.
	IOTimeout time.Duration
	// MaxSessions caps the sessions running at once, MaxClientSessions
	// those of one client (an IPv4 address, an IPv6 /64); more are
	// refused ("busy"). Each session holds at most two QPs (its RC QP
	// and, during peer.rdma_cm, one rdma_cm QP), so these cap the QPs
	// too.
	MaxSessions       int
	MaxClientSessions int
	// MaxMemory caps the memory all sessions register together; each
	// session may register MaxMemory / MaxSessions, so one client at
	// most MaxClientSessions such shares.
	MaxMemory int64
	// MaxHandshakes caps the connections in their handshake at once,
	// MaxClientHandshakes those of one client: past either the oldest
	// (of that client, or of all) is closed to make room.
	MaxHandshakes       int
	MaxClientHandshakes int
	// LogBurst refusals are logged one by one per LogInterval; the rest
	// are counted into one summary line at the interval's end.
	LogBurst    int
	LogInterval time.Duration
	// Library is the libibverbs to open ("" = the loader's).
	Library string
	// HostRoot is where the port's counters and rate are read ("" = "/").
	HostRoot string
	// Device, Port and GIDIndex select the local port as in PeerRequest.
	Device   string
	Port     int
	GIDIndex int
	// Host is what the server reports of itself.
	Host wire.HostReport
	// Logf logs one line per session event.
	Logf func(format string, args ...any)
}

// Defaults for the server's limits.
const (
	DefaultSessionTimeout      = 60 * time.Second
	DefaultHandshakeTimeout    = 5 * time.Second
	DefaultIOTimeout           = 5 * time.Second
	DefaultMaxSessions         = 4
	DefaultMaxClientSessions   = 2
	DefaultMaxMemory           = 256 << 20
	DefaultMaxHandshakes       = 64
	DefaultMaxClientHandshakes = 8
	DefaultLogBurst            = 10
	DefaultLogInterval         = 10 * time.Second
	// maxAcceptBackoff is the longest wait before accepting again after
	// an accept error (EMFILE: out of descriptors).
	maxAcceptBackoff = time.Second
)

func (c *ServerConfig) withDefaults() {
	setDefault(&c.SessionTimeout, DefaultSessionTimeout)
	setDefault(&c.HandshakeTimeout, DefaultHandshakeTimeout)
	setDefault(&c.IOTimeout, DefaultIOTimeout)
	setDefault(&c.MaxSessions, DefaultMaxSessions)
	setDefault(&c.MaxClientSessions, DefaultMaxClientSessions)
	setDefault(&c.MaxMemory, DefaultMaxMemory)
	setDefault(&c.MaxHandshakes, DefaultMaxHandshakes)
	setDefault(&c.MaxClientHandshakes, DefaultMaxClientHandshakes)
	setDefault(&c.LogBurst, DefaultLogBurst)
	setDefault(&c.LogInterval, DefaultLogInterval)
	c.MaxClientSessions = min(c.MaxClientSessions, c.MaxSessions)
	c.MaxClientHandshakes = min(c.MaxClientHandshakes, c.MaxHandshakes)
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

func setDefault[T int | int64 | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// Server accepts sessions on one listener.
type Server struct {
	cfg      ServerConfig
	adm      *admission
	refusals *refusalLog
	seq      atomic.Uint64
	wg       sync.WaitGroup
}

// NewServer prepares a server; Serve runs it.
func NewServer(cfg ServerConfig) *Server {
	cfg.withDefaults()
	return &Server{cfg: cfg, adm: newAdmission(&cfg), refusals: newRefusalLog(cfg.Logf, cfg.LogBurst, cfg.LogInterval)}
}

// Serve accepts connections on ln until ctx ends (or, with Once, the first
// session ends), then closes ln and waits for the sessions running. It
// refuses a listener on the wildcard address, and one that other hosts
// can reach when the server has no token.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := s.checkListener(ln.Addr()); err != nil {
		ln.Close()
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { <-ctx.Done(); ln.Close() }()
	logDone := make(chan struct{})
	go func() { s.refusals.run(ctx); close(logDone) }()
	defer func() { cancel(); <-logDone }()
	defer s.wg.Wait()
	s.logStart(ln.Addr())
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
			}
			backoff = s.acceptFailed(ctx, ln.Addr(), err, backoff)
			continue
		}
		backoff = 0
		tc, ok := c.(*net.TCPConn)
		if !ok {
			c.Close()
			continue
		}
		s.accepted(ctx, cancel, tc)
	}
}

// checkListener enforces the listen rules on the bound address (the
// command checks them before listening, with usage errors; this holds
// for every caller).
func (s *Server) checkListener(a net.Addr) error {
	if ta, ok := a.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		return fmt.Errorf("listening on %s, every interface: name an address", a)
	}
	if s.cfg.Token == "" && !reachableOnlyHere(a) {
		return fmt.Errorf("no token, and other hosts can reach %s: a server without a token serves anyone, so it listens only on a loopback or link-local address", a)
	}
	return nil
}

func (s *Server) logStart(a net.Addr) {
	token := "token required"
	if s.cfg.Token == "" {
		token = "NO TOKEN: anyone who reaches this address is served"
	}
	c := &s.cfg
	s.cfg.Logf("listening on %s (protocol %d, %s; at most %d sessions, %d per client, of %v; %d MiB in all, %d MiB a session; %d handshakes, %d per client, of %v)",
		a, wire.Version, token, c.MaxSessions, c.MaxClientSessions, c.SessionTimeout, c.MaxMemory>>20, c.MaxMemory/int64(c.MaxSessions)>>20,
		c.MaxHandshakes, c.MaxClientHandshakes, c.HandshakeTimeout)
}

// acceptFailed waits before the next accept, twice as long as the last
// time up to maxAcceptBackoff, and returns the wait. Accept errors are
// never fatal: EMFILE or ENFILE (out of descriptors) pass once sessions
// end, and the oldest handshake is closed at once to free one.
func (s *Server) acceptFailed(ctx context.Context, addr net.Addr, err error, last time.Duration) time.Duration {
	wait := min(max(2*last, 5*time.Millisecond), maxAcceptBackoff)
	freed := ""
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		if s.adm.evictOldest() {
			freed = "; evicted the oldest connection in its handshake to free a descriptor"
		}
	}
	s.refusals.refuse("-", "accept error", "accept on %s: %v; accepting again in %v%s", addr, err, wait, freed)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return wait
}

// accepted gives a new connection its handshake place and runs it.
func (s *Server) accepted(ctx context.Context, cancel context.CancelFunc, tc *net.TCPConn) {
	id := fmt.Sprintf("s%d %s", s.seq.Add(1), tc.RemoteAddr())
	p, _ := s.adm.enter(tc, clientOf(tc.RemoteAddr()))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if s.session(ctx, tc, p, id) && s.cfg.Once {
			cancel()
		}
	}()
}

// session runs one connection: the handshake here, the rest in a verbs
// child. It reports whether the handshake passed.
func (s *Server) session(ctx context.Context, c *net.TCPConn, p *pending, id string) bool {
	defer c.Close()
	t0 := time.Now()
	wc := &wire.Conn{Conn: c, IOTimeout: s.cfg.IOTimeout, Deadline: t0.Add(min(s.cfg.HandshakeTimeout, s.cfg.SessionTimeout))}
	if rf := s.handshake(wc, func() error { return s.adm.promote(p) }); rf != nil {
		if rf.admitted {
			s.adm.end(p.client)
		}
		if s.adm.leave(p) {
			msg := fmt.Sprintf("still in its handshake when a newer connection needed its place (at most %d handshakes at once, %d per client)",
				s.cfg.MaxHandshakes, s.cfg.MaxClientHandshakes)
			_ = wc.Send(wire.MsgReject, wire.Reject{Code: wire.RejectBusy, Message: "evicted: " + msg})
			rf = &refusal{reason: "evicted", err: errors.New(msg)}
		}
		s.refusals.refuse(p.client.String(), rf.reason, "%s: refused (%s) after %v: %s", id, rf.reason, time.Since(t0).Round(time.Millisecond), Inert(rf.err.Error()))
		return false
	}
	defer s.adm.end(p.client)
	wc.Deadline = t0.Add(s.cfg.SessionTimeout)
	s.cfg.Logf("%s: session started", id)
	preq := probe.PeerRequest{Library: s.cfg.Library, HostRoot: s.cfg.HostRoot,
		Device: s.cfg.Device, Port: s.cfg.Port, GIDIndex: s.cfg.GIDIndex,
		MaxBuffer: int(s.cfg.MaxMemory / int64(s.cfg.MaxSessions)),
		SessionNS: int64(time.Until(wc.Deadline)), IOTimeoutNS: int64(s.cfg.IOTimeout), Host: s.cfg.Host,
	}
	_ = c.SetDeadline(time.Time{}) // the child keeps its own
	stderr, err := probe.PeerServe(ctx, s.cfg.Exe, c, preq, func(setup wire.Setup) {
		e, h := &setup.Endpoint, &setup.Host
		netdev := ""
		if e.Netdev != "" {
			netdev = fmt.Sprintf(", netdev %q MTU %d, GID %s", e.Netdev, e.NetdevMTU, e.GIDString())
		}
		s.cfg.Logf("%s: client %s (kernel %s, rdmadoctor %s), device %s port %d %s, QPN %#x, active MTU %d%s",
			id, orUnknown(h.Hostname), orUnknown(h.Kernel), orUnknown(h.Version), orUnknown(e.Device), e.Port, Inert(e.LinkLayer), e.QPN, e.ActiveMTU, netdev)
	})
	if err != nil {
		s.cfg.Logf("%s: session ended after %v: %v%s", id, time.Since(t0).Round(time.Millisecond), Inert(err.Error()), lastLine(stderr))
	} else {
		s.cfg.Logf("%s: session ended after %v", id, time.Since(t0).Round(time.Millisecond))
	}
	return true
}

// refusal is why a connection got no session: reason is its kind, for
// the log's summary (timeout, protocol, closed, version, token, busy,
// evicted).
type refusal struct {
	reason string
	err    error
	// admitted is a session's place taken before the refusal (its
	// Welcome could not be sent): the caller gives it back.
	admitted bool
}

// handshake sends ServerHello and judges the ClientHello: magic, version,
// token; then takes a session's place (admit). A client that fails, or
// finds no place, is sent a Reject saying why.
func (s *Server) handshake(wc *wire.Conn, admit func() error) *refusal {
	nonce := make([]byte, wire.NonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return &refusal{reason: "nonce", err: fmt.Errorf("nonce: %w", err)}
	}
	if err := wc.Send(wire.MsgServerHello, wire.ServerHello{Magic: wire.Magic, Version: wire.Version,
		MinVersion: wire.MinVersion, Nonce: nonce, TokenRequired: s.cfg.Token != ""}); err != nil {
		return &refusal{reason: netReason(err), err: err}
	}
	var hello wire.ClientHello
	if err := wc.Expect(0, wire.MsgClientHello, &hello); err != nil {
		var fe *wire.FrameError
		if errors.As(err, &fe) {
			_ = wc.Send(wire.MsgReject, wire.Reject{Code: wire.RejectProto, Message: fe.Error()})
		}
		return &refusal{reason: netReason(err), err: fmt.Errorf("handshake: %w", err)}
	}
	if hello.Version < wire.MinVersion || hello.Version > wire.Version {
		msg := fmt.Sprintf("client speaks protocol %d, this server %d–%d", hello.Version, wire.MinVersion, wire.Version)
		_ = wc.Send(wire.MsgReject, wire.Reject{Code: wire.RejectVersion, Message: msg, Version: wire.Version, MinVersion: wire.MinVersion})
		return &refusal{reason: "version", err: errors.New("handshake: " + msg)}
	}
	if s.cfg.Token != "" && !wire.ProofOK(s.cfg.Token, nonce, hello.Proof) {
		_ = wc.Send(wire.MsgReject, wire.Reject{Code: wire.RejectToken, Message: "the token does not match this server's"})
		return &refusal{reason: "token", err: errors.New("handshake: wrong token")}
	}
	if err := admit(); err != nil {
		if errors.Is(err, errEvicted) {
			return &refusal{reason: "evicted", err: err}
		}
		_ = wc.Send(wire.MsgReject, wire.Reject{Code: wire.RejectBusy, Message: err.Error()})
		return &refusal{reason: "busy", err: err}
	}
	if err := wc.Send(wire.MsgWelcome, wire.Welcome{Version: hello.Version}); err != nil {
		// The place was taken: a session that cannot start gives it back.
		return &refusal{reason: netReason(err), err: fmt.Errorf("send Welcome: %w", err), admitted: true}
	}
	return nil
}

// netReason names a failed read or write for the log's summary.
func netReason(err error) string {
	var fe *wire.FrameError
	var ne net.Error
	switch {
	case errors.As(err, &fe):
		return "protocol"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "closed"
}

// orUnknown shows an empty value from the client as unknown; the
// client's strings are logged quoted, so they cannot forge log lines.
func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return fmt.Sprintf("%q", s)
}

func lastLine(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			s = s[i+1:]
			break
		}
	}
	if s == "" {
		return ""
	}
	return " (child: " + Inert(s) + ")"
}
