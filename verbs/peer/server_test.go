package peer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
)

// dialRaw connects to the server and reads its ServerHello.
func dialRaw(t *testing.T, addr string) (net.Conn, wire.ServerHello) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	wc := &wire.Conn{Conn: c, IOTimeout: 2 * time.Second}
	var h wire.ServerHello
	if err := wc.Expect(0, wire.MsgServerHello, &h); err != nil {
		t.Fatal(err)
	}
	return c, h
}

// closedWithin reports whether the server closes c within d, draining
// whatever it sends first.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return err == nil || !(errors.As(err, &ne) && ne.Timeout())
}

func waitLog(t *testing.T, log *logLines, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(log.String(), want) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the server's log never said %q:\n%s", want, log)
}

// A client that breaks the protocol is closed with the reason logged;
// the server goes on serving.
func TestServerHostileClients(t *testing.T) {
	addr, log, _ := startServer(t, ServerConfig{IOTimeout: 300 * time.Millisecond})
	for _, tc := range []struct {
		name string
		send []byte
		log  string
	}{
		{"garbage", []byte("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 TLS hello"), "exceeds the 65536-byte limit"},
		{"oversized frame", binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint32(nil, 1<<30), uint16(wire.MsgClientHello)), "exceeds the 65536-byte limit"},
		{"unknown type", binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint32(nil, 2), 4242), "unknown message type 4242"},
		{"wrong first message", frame(t, wire.MsgSetup, wire.Setup{}), "expected ClientHello, got Setup"},
		{"slow loris", []byte{0, 0}, "i/o timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := dialRaw(t, addr)
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if !closedWithin(c, 3*time.Second) {
				t.Fatal("the server kept the connection open")
			}
			waitLog(t, log, tc.log)
		})
	}
	if strings.Contains(log.String(), "session started") {
		t.Fatalf("a hostile client got a session:\n%s", log)
	}
}

func frame(t *testing.T, typ wire.MsgType, v any) []byte {
	var b bytes.Buffer
	if err := wire.WriteFrame(&b, typ, v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestHandshakeFaults(t *testing.T) {
	addr, _, _ := startServer(t, ServerConfig{Token: "right", IOTimeout: time.Second})
	for _, tc := range []struct {
		token string
		want  ControlFault
		err   string
	}{
		{"wrong", FaultToken, "token does not match"},
		{"", FaultToken, "requires a token and none was given"},
	} {
		conn, ctl := Handshake(context.Background(), addr, tc.token, time.Second)
		if conn != nil || ctl.Fault != tc.want || !strings.Contains(ctl.Error, tc.err) {
			t.Errorf("token %q: conn %v, control %+v; want %s with %q", tc.token, conn, ctl, tc.want, tc.err)
		}
	}
	conn, ctl := Handshake(context.Background(), addr, "right", time.Second)
	if conn == nil || ctl.Fault != FaultNone || ctl.Version != wire.Version {
		t.Fatalf("the right token: %+v", ctl)
	}
	conn.Close()
}

// The server refuses a client of a protocol version it does not speak,
// saying which it speaks.
func TestServerRefusesOtherVersion(t *testing.T) {
	addr, log, _ := startServer(t, ServerConfig{IOTimeout: time.Second})
	c, h := dialRaw(t, addr)
	if _, err := c.Write(frame(t, wire.MsgClientHello, wire.ClientHello{Magic: wire.Magic, Version: 99, Proof: wire.Proof("", h.Nonce)})); err != nil {
		t.Fatal(err)
	}
	wc := &wire.Conn{Conn: c, IOTimeout: 2 * time.Second}
	err := wc.Expect(0, wire.MsgWelcome, &wire.Welcome{})
	var rj *wire.RejectError
	if !errors.As(err, &rj) || rj.Reject.Code != wire.RejectVersion || rj.Reject.Version != wire.Version {
		t.Fatalf("reply %v", err)
	}
	waitLog(t, log, "client speaks protocol 99")
}

// A client of an older protocol version the server still accepts is
// welcomed at its own version, the one the session then speaks.
func TestServerWelcomesOlderVersionAtItsVersion(t *testing.T) {
	addr, _, _ := startServer(t, ServerConfig{IOTimeout: time.Second})
	c, h := dialRaw(t, addr)
	if h.Version != wire.Version || h.MinVersion > 1 {
		t.Fatalf("server hello %+v", h)
	}
	if _, err := c.Write(frame(t, wire.MsgClientHello, wire.ClientHello{Magic: wire.Magic, Version: 1, Proof: wire.Proof("", h.Nonce)})); err != nil {
		t.Fatal(err)
	}
	wc := &wire.Conn{Conn: c, IOTimeout: 2 * time.Second}
	var w wire.Welcome
	if err := wc.Expect(0, wire.MsgWelcome, &w); err != nil || w.Version != 1 {
		t.Fatalf("welcome %+v, %v", w, err)
	}
}

// The client tells a refused port, a silent one and another service apart.
func TestControlFaults(t *testing.T) {
	// Refused: a port that was listening and is closed.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	refused := ln.Addr().String()
	ln.Close()
	// Silent: accepts and says nothing (a proxy, a hung server).
	silent, _ := net.Listen("tcp", "127.0.0.1:0")
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	// Another service: an SSH banner.
	ssh, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ssh.Close()
	go func() {
		for {
			c, err := ssh.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n"))
			c.Close()
		}
	}()
	for _, tc := range []struct {
		addr string
		want ControlFault
	}{
		{refused, FaultRefused},
		{silent.Addr().String(), FaultTimeout},
		{ssh.Addr().String(), FaultNotPeer},
		{"no-such-host.invalid:18516", FaultAddress},
	} {
		t0 := time.Now()
		_, ctl := Handshake(context.Background(), tc.addr, "", 300*time.Millisecond)
		if ctl.Fault != tc.want {
			t.Errorf("%s: %+v, want %s", tc.addr, ctl, tc.want)
		}
		if d := time.Since(t0); d > 3*time.Second {
			t.Errorf("%s: took %v", tc.addr, d)
		}
	}
}

// Past --max-sessions a client is refused as busy once its handshake has
// passed; a client stalling in its handshake holds no session's place.
func TestServerSessionCap(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer")
	addr, log, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1, MaxSessions: 1, IOTimeout: 2 * time.Second})
	// A client stalled in its handshake: the next one still gets the place.
	stalled, _ := dialRaw(t, addr)
	defer stalled.Close()
	first := handshaken(t, addr)
	defer first.Close()
	_, ctl := Handshake(context.Background(), addr, "", time.Second)
	if ctl.Fault != FaultBusy || !strings.Contains(ctl.Error, "max-sessions") {
		t.Fatalf("second client: %+v", ctl)
	}
	waitLog(t, log, "refused (busy)")
}

func TestTarget(t *testing.T) {
	for in, want := range map[string]string{
		"node02": "node02:18516", "192.0.2.2": "192.0.2.2:18516", "192.0.2.2:1234": "192.0.2.2:1234",
		"fe80::1": "[fe80::1]:18516", "[fe80::1]:99": "[fe80::1]:99",
	} {
		if got, err := Target(in); err != nil || got != want {
			t.Errorf("Target(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{":18516", "host:0", "host:99999", "host:ssh"} {
		if _, err := Target(bad); err == nil {
			t.Errorf("Target(%q) accepted", bad)
		}
	}
}

// handshaken connects and passes the handshake by hand.
func handshaken(t *testing.T, addr string) *wire.Conn {
	t.Helper()
	c, h := dialRaw(t, addr)
	wc := &wire.Conn{Conn: c, IOTimeout: 5 * time.Second}
	if err := wc.Send(wire.MsgClientHello, wire.ClientHello{Magic: wire.Magic, Version: wire.Version, Proof: wire.Proof("", h.Nonce)}); err != nil {
		t.Fatal(err)
	}
	if err := wc.Expect(0, wire.MsgWelcome, &wire.Welcome{}); err != nil {
		t.Fatal(err)
	}
	return wc
}

// A client that passes the handshake and then says nothing: the session's
// child gives up at the session's deadline and the server logs why.
func TestServerSessionDeadline(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer")
	addr, log, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1, SessionTimeout: time.Second, IOTimeout: 5 * time.Second})
	t0 := time.Now()
	wc := handshaken(t, addr)
	if !closedWithin(wc.Conn, 5*time.Second) {
		t.Fatal("the server kept a silent session past its deadline")
	}
	if d := time.Since(t0); d < 900*time.Millisecond {
		t.Fatalf("closed after %v, before the 1s session deadline", d)
	}
	waitLog(t, log, "read Setup")
}

// A Setup that asks for more memory than the server's share is refused
// with the reason, before any verbs object is made.
func TestServerMemoryCap(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer")
	addr, log, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1, MaxMemory: 8 << 20, MaxSessions: 4})
	wc := handshaken(t, addr)
	ep := wire.Endpoint{Device: "fake0", Port: 1, LinkLayer: "InfiniBand", QPN: 0x11, LID: 1, ActiveMTU: 1024}
	if err := wc.Send(wire.MsgSetup, wire.Setup{Endpoint: ep, Params: wire.Params{MsgSize: 4096, BufferSize: 4 << 20}}); err != nil {
		t.Fatal(err)
	}
	var reply wire.SetupReply
	if err := wc.Expect(0, wire.MsgSetupReply, &reply); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reply.Error, "exceeds this server's 2097152-byte share") {
		t.Fatalf("reply %+v", reply)
	}
	waitLog(t, log, "share of its memory cap")
}

// Garbage after the handshake ends the session's child with the reason
// logged; the server goes on.
func TestServerGarbageAfterHandshake(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer")
	addr, log, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1})
	wc := handshaken(t, addr)
	if _, err := wc.Conn.Write([]byte("\x00\x00\x00\x05\x00\x10{{{")); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(wc.Conn, 5*time.Second) {
		t.Fatal("the server kept the session open")
	}
	waitLog(t, log, "protocol violation: Setup")
	// Still serving.
	_, ctl := Handshake(context.Background(), addr, "", time.Second)
	if ctl.Fault != FaultNone {
		t.Fatalf("after a hostile session: %+v", ctl)
	}
}

// The client vanishes after the endpoint exchange: the session's child
// sees the connection end, tears its verbs objects down and exits; the
// server logs why.
func TestServerClientVanishes(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer")
	addr, log, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1, SessionTimeout: 30 * time.Second})
	wc := handshaken(t, addr)
	ep := wire.Endpoint{Device: "fake0", Port: 1, LinkLayer: "InfiniBand", QPN: 0x11, LID: 1, ActiveMTU: 1024}
	if err := wc.Send(wire.MsgSetup, wire.Setup{Endpoint: ep, Params: wire.Params{MsgSize: 4096, BufferSize: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	var reply wire.SetupReply
	if err := wc.Expect(0, wire.MsgSetupReply, &reply); err != nil || reply.Error != "" {
		t.Fatalf("setup: %v %+v", err, reply)
	}
	t0 := time.Now()
	wc.Close()
	waitLog(t, log, "wait for the next operation: EOF")
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("the session outlived its client by %v", d)
	}
}

// Between operations a client may think as long as the session lasts, but
// a frame once begun must arrive within --io-timeout: a client that
// trickles one is dropped.
func TestServerTrickledFrame(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer")
	addr, log, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1, SessionTimeout: 30 * time.Second, IOTimeout: 500 * time.Millisecond})
	wc := handshaken(t, addr)
	ep := wire.Endpoint{Device: "fake0", Port: 1, LinkLayer: "InfiniBand", QPN: 0x11, LID: 1, ActiveMTU: 1024}
	if err := wc.Send(wire.MsgSetup, wire.Setup{Endpoint: ep, Params: wire.Params{MsgSize: 4096, BufferSize: 1 << 20}}); err != nil {
		t.Fatal(err)
	}
	if err := wc.Expect(0, wire.MsgSetupReply, &wire.SetupReply{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // thinking between operations: allowed
	op := frame(t, wire.MsgOp, wire.Op{Kind: wire.OpCounters})
	t0 := time.Now()
	for _, b := range op[:3] { // then one byte every 300 ms
		if _, err := wc.Conn.Write([]byte{b}); err != nil {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if !closedWithin(wc.Conn, 3*time.Second) {
		t.Fatal("the server kept a trickling client")
	}
	if d := time.Since(t0); d > 2500*time.Millisecond {
		t.Fatalf("dropped after %v", d)
	}
	waitLog(t, log, "i/o timeout")
}
