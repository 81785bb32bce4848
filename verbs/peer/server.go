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
	Token string
	// Once ends the server after its first session that passed the
	// handshake.
	Once bool
	// SessionTimeout bounds one session from the handshake to Bye.
	SessionTimeout time.Duration
	// IOTimeout bounds each frame read or written: a slower client is
	// dropped.
	IOTimeout time.Duration
	// MaxSessions caps the sessions running at once; more are refused
	// ("busy").
	MaxSessions int
	// MaxMemory caps the memory all sessions register together; each
	// session may register MaxMemory / MaxSessions.
	MaxMemory int64
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
	DefaultSessionTimeout = 60 * time.Second
	DefaultIOTimeout      = 5 * time.Second
	DefaultMaxSessions    = 4
	DefaultMaxMemory      = 256 << 20
)

func (c *ServerConfig) withDefaults() {
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.IOTimeout <= 0 {
		c.IOTimeout = DefaultIOTimeout
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.MaxMemory <= 0 {
		c.MaxMemory = DefaultMaxMemory
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// Server accepts sessions on one listener.
type Server struct {
	cfg ServerConfig
	// handshaking counts the connections in their handshake, active the
	// sessions past it: a client that stalls its handshake holds no
	// session's place, only one of the handshakes' (handshakeSlots).
	handshaking atomic.Int32
	active      atomic.Int32
	seq         atomic.Uint64
	wg          sync.WaitGroup
}

// NewServer prepares a server; Serve runs it.
func NewServer(cfg ServerConfig) *Server {
	cfg.withDefaults()
	return &Server{cfg: cfg}
}

// Serve accepts connections on ln until ctx ends (or, with Once, the first
// session ends), then closes ln and waits for the sessions running.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { <-ctx.Done(); ln.Close() }()
	defer s.wg.Wait()
	s.cfg.Logf("listening on %s (protocol %d, token %s, at most %d sessions of %v, %d MiB in all)",
		ln.Addr(), wire.Version, map[bool]string{true: "required", false: "not required"}[s.cfg.Token != ""],
		s.cfg.MaxSessions, s.cfg.SessionTimeout, s.cfg.MaxMemory>>20)
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
		}
		tc, ok := c.(*net.TCPConn)
		if !ok {
			c.Close()
			continue
		}
		id := fmt.Sprintf("s%d %s", s.seq.Add(1), c.RemoteAddr())
		if n := s.handshaking.Add(1); int(n) > s.handshakeSlots() {
			s.handshaking.Add(-1)
			s.refuse(tc, id, wire.RejectBusy, fmt.Sprintf("%d connections are in their handshake, the most this server takes (4 × --max-sessions)", s.handshakeSlots()))
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if s.session(ctx, tc, id) && s.cfg.Once {
				cancel()
			}
		}()
	}
}

// handshakeSlots bounds the connections in their handshake at once; each
// lasts --io-timeout at most.
func (s *Server) handshakeSlots() int { return 4 * s.cfg.MaxSessions }

// refuse answers a connection the server will not serve with a Reject as
// its first frame, and closes it.
func (s *Server) refuse(c *net.TCPConn, id string, code wire.RejectCode, msg string) {
	defer c.Close()
	wc := &wire.Conn{Conn: c, IOTimeout: s.cfg.IOTimeout}
	_ = wc.Send(wire.MsgReject, wire.Reject{Code: code, Message: msg, Version: wire.Version, MinVersion: wire.MinVersion})
	s.cfg.Logf("%s: refused (%s): %s", id, code, msg)
}

// session runs one connection: the handshake here, the rest in a verbs
// child. It reports whether the handshake passed.
func (s *Server) session(ctx context.Context, c *net.TCPConn, id string) bool {
	defer c.Close()
	t0 := time.Now()
	wc := &wire.Conn{Conn: c, IOTimeout: s.cfg.IOTimeout, Deadline: t0.Add(s.cfg.SessionTimeout)}
	err := s.handshake(wc, func() error {
		// The session's place is taken when the handshake has passed, and
		// refused then when every place is taken.
		if n := s.active.Add(1); int(n) > s.cfg.MaxSessions {
			s.active.Add(-1)
			return fmt.Errorf("%d sessions are running, the most this server allows (--max-sessions)", s.cfg.MaxSessions)
		}
		return nil
	})
	s.handshaking.Add(-1)
	if err != nil {
		s.cfg.Logf("%s: closed after %v: %v", id, time.Since(t0).Round(time.Millisecond), err)
		return false
	}
	defer s.active.Add(-1)
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
			id, orUnknown(h.Hostname), orUnknown(h.Kernel), orUnknown(h.Version), orUnknown(e.Device), e.Port, e.LinkLayer, e.QPN, e.ActiveMTU, netdev)
	})
	if err != nil {
		s.cfg.Logf("%s: session ended after %v: %v%s", id, time.Since(t0).Round(time.Millisecond), err, lastLine(stderr))
	} else {
		s.cfg.Logf("%s: session ended after %v", id, time.Since(t0).Round(time.Millisecond))
	}
	return true
}

// handshake sends ServerHello and judges the ClientHello: magic, version,
// token; then takes a session's place (admit). A client that fails, or
// finds no place, is sent a Reject saying why.
func (s *Server) handshake(wc *wire.Conn, admit func() error) error {
	nonce := make([]byte, wire.NonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("nonce: %w", err)
	}
	if err := wc.Send(wire.MsgServerHello, wire.ServerHello{Magic: wire.Magic, Version: wire.Version,
		MinVersion: wire.MinVersion, Nonce: nonce, TokenRequired: s.cfg.Token != ""}); err != nil {
		return err
	}
	var hello wire.ClientHello
	if err := wc.Expect(0, wire.MsgClientHello, &hello); err != nil {
		var fe *wire.FrameError
		if errors.As(err, &fe) {
			_ = wc.Send(wire.MsgReject, wire.Reject{Code: wire.RejectProto, Message: fe.Error()})
		}
		return fmt.Errorf("handshake: %w", err)
	}
	if hello.Version < wire.MinVersion || hello.Version > wire.Version {
		msg := fmt.Sprintf("client speaks protocol %d, this server %d–%d", hello.Version, wire.MinVersion, wire.Version)
		_ = wc.Send(wire.MsgReject, wire.Reject{Code: wire.RejectVersion, Message: msg, Version: wire.Version, MinVersion: wire.MinVersion})
		return errors.New("handshake: " + msg)
	}
	if s.cfg.Token != "" && !wire.ProofOK(s.cfg.Token, nonce, hello.Proof) {
		_ = wc.Send(wire.MsgReject, wire.Reject{Code: wire.RejectToken, Message: "the token does not match this server's"})
		return errors.New("handshake: wrong token")
	}
	if err := admit(); err != nil {
		_ = wc.Send(wire.MsgReject, wire.Reject{Code: wire.RejectBusy, Message: err.Error()})
		return fmt.Errorf("refused (busy): %w", err)
	}
	return wc.Send(wire.MsgWelcome, wire.Welcome{Version: hello.Version})
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
	return " (child: " + s + ")"
}
