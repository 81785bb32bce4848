package probe

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// A library that cannot be loaded fails the first step, names the stage
// and tears down nothing it did not build.
func TestCMClientLibraryMissing(t *testing.T) {
	res := CMClient("192.0.2.2:4000", nil, CMOptions{Library: "/nonexistent/libibverbs.so.1", Timeout: time.Second})
	if res.FailedStage != "library" {
		t.Fatalf("failed stage %q, want library; steps %+v", res.FailedStage, res.Steps)
	}
	f := res.Failed()
	if f == nil || f.Name != "dlopen libibverbs" {
		t.Fatalf("first failed step %+v, want dlopen libibverbs", f)
	}
	for _, s := range res.Steps {
		if strings.HasPrefix(s.Name, "rdma_destroy") {
			t.Errorf("teardown step %q for an object never created", s.Name)
		}
	}
}

func TestCMClientBadAddress(t *testing.T) {
	for _, addr := range []string{"", "192.0.2.2", "peer:4000", "[::1]:x"} {
		res := CMClient(addr, nil, CMOptions{Timeout: time.Second})
		if f := res.Failed(); f == nil || !strings.HasPrefix(f.Name, "parse") {
			t.Errorf("%q: first failed step %+v, want the parse step", addr, f)
		}
	}
}

func TestListenCMBadAddress(t *testing.T) {
	l := ListenCM("not-an-ip", CMOptions{Timeout: time.Second})
	if l.Port() != 0 || l.Result().Failed() == nil {
		t.Fatalf("listener on a bad address: port %d, steps %+v", l.Port(), l.Result().Steps)
	}
	// Serve on a failed listener returns at once.
	t0 := time.Now()
	l.Serve(nil, 5*time.Second)
	if time.Since(t0) > time.Second {
		t.Errorf("Serve on a failed listener waited %s", time.Since(t0))
	}
}

func TestConnectCauseNamesTheStep(t *testing.T) {
	cases := map[verbs.CMEventType]string{
		verbs.CMEventRejected:     "rejected",
		verbs.CMEventType(99):     "unexpected",
		verbs.CMEventUnreachable:  "4791",
		verbs.CMEventConnectError: "4791",
	}
	for typ, word := range cases {
		if c := connectCause(&verbs.CMEvent{Type: typ}); !strings.Contains(c, word) {
			t.Errorf("%s: cause %q does not name %q", typ, c, word)
		}
	}
	if c := connectCause(nil); !strings.Contains(c, "never established") {
		t.Errorf("timeout cause %q", c)
	}
}

func TestPayloadCheck(t *testing.T) {
	a := []byte{1, 2, 3, 4}
	if err := payloadCheck(a, a); err != nil {
		t.Fatal(err)
	}
	err := payloadCheck([]byte{1, 2, 9, 4}, a)
	if err == nil || !strings.Contains(err.Error(), "byte 2 of 4") {
		t.Fatalf("payloadCheck = %v", err)
	}
}

// TestCMLoopbackLive connects to this host's own rdma_cm listener over a
// real device: RDMADOCTOR_LIVE_CM_ADDR names an IPv4 address of a netdev
// that carries an RDMA device (the VM suite's guest: 192.0.2.1 on dummy0
// under rxe0). Without it the test skips: it needs a real stack.
func TestCMLoopbackLive(t *testing.T) {
	addr := os.Getenv("RDMADOCTOR_LIVE_CM_ADDR")
	if addr == "" {
		t.Skip("RDMADOCTOR_LIVE_CM_ADDR not set: no live RDMA device to connect through")
	}
	o := CMOptions{Timeout: 10 * time.Second}
	l := ListenCM(addr, o)
	if l.Port() == 0 {
		t.Fatalf("listen: %+v", l.Result().Steps)
	}
	nonce := []byte("session-nonce-0123456789")
	done := make(chan *CMResult)
	go func() { done <- l.Serve(nonce, 10*time.Second) }()
	cl := CMClient(addr+":"+strconv.Itoa(int(l.Port())), nonce, o)
	srv := <-done
	for _, r := range []*CMResult{cl, srv} {
		for _, s := range r.Steps {
			t.Logf("%-40s ok=%v %.0f µs %s %s", s.Name, s.OK, s.Micros, s.Error, s.Cause)
		}
		if f := r.Failed(); f != nil {
			t.Errorf("step %s failed: %s (%s)", f.Name, f.Error, f.Cause)
		}
	}
	t.Logf("device %s port %d sgid %s dgid %s path MTU %d, connect %.0f µs, round trip %.0f µs",
		cl.Device, cl.Port, cl.SGID, cl.DGID, cl.PathMTU, cl.ConnectMicros, cl.RoundTripMicros)
	if cl.Device == "" || cl.PathMTU == 0 || cl.RoundTripMicros == 0 {
		t.Errorf("client result incomplete: %+v", cl)
	}
	// A wrong nonce is rejected, and the client names the rejection.
	l = ListenCM(addr, o)
	go func() { done <- l.Serve(nonce, 10*time.Second) }()
	cl = CMClient(addr+":"+strconv.Itoa(int(l.Port())), []byte("another session"), o)
	<-done
	if cl.FailedStage != "connect" || !strings.Contains(cl.Failed().Cause, "refused") {
		t.Errorf("wrong nonce: stage %q, failed %+v", cl.FailedStage, cl.Failed())
	}
	// Nobody listening on the port: rejected too, within the deadline.
	t0 := time.Now()
	cl = CMClient(addr+":1", nonce, o)
	if cl.FailedStage != "connect" || time.Since(t0) > o.Timeout+2*time.Second ||
		!strings.Contains(cl.Failed().Cause, "nothing listens") {
		t.Errorf("no listener: stage %q after %s, failed %+v", cl.FailedStage, time.Since(t0), cl.Failed())
	}
}
