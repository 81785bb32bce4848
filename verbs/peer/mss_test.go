package peer

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"
)

// sendMSS is the segment size a connected socket sends with.
func sendMSS(t *testing.T, c net.Conn) int {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var mss int
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		mss, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG)
	}); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	return mss
}

// Over loopback (MTU 65536) a plain connection sends segments of tens of
// kilobytes; the control connection's are clamped to ControlMSS both ways,
// whichever side is ours: the server's listener alone, or the client's
// dialer alone, is enough.
func TestControlConnectionSegmentsAreClamped(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name               string
		ourListen, ourDial bool
	}{{"both", true, true}, {"listener only", true, false}, {"dialer only", false, true}, {"neither", false, false}} {
		var ln net.Listener
		var err error
		if c.ourListen {
			ln, err = Listen(ctx, "127.0.0.1:0")
		} else {
			ln, err = net.Listen("tcp", "127.0.0.1:0")
		}
		if err != nil {
			t.Fatal(err)
		}
		d := &net.Dialer{Timeout: time.Second}
		if c.ourDial {
			d = dialer(time.Second)
		}
		client, err := d.DialContext(ctx, "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		cm, sm := sendMSS(t, client), sendMSS(t, server)
		clamped := c.ourListen || c.ourDial
		if clamped && (cm > ControlMSS || sm > ControlMSS) {
			t.Errorf("%s: segments of %d (client) and %d (server) bytes, want at most %d", c.name, cm, sm, ControlMSS)
		}
		if !clamped && cm <= ControlMSS {
			t.Errorf("%s: a plain loopback connection sends %d-byte segments: the test cannot tell a clamp apart", c.name, cm)
		}
		client.Close()
		server.Close()
		ln.Close()
	}
}
