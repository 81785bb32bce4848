package main

import (
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs/probe/fakeverbs"
)

// peerFakeLibrary builds the fake libibverbs whose peer modes carry RC
// traffic between two processes.
func peerFakeLibrary(t testing.TB) string {
	t.Helper()
	return fakeverbs.Library(t)
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// serveOnce runs `peer serve --once` in the background and waits until it
// listens.
func serveOnce(t testing.TB, lib, addr string, extra ...string) <-chan int {
	t.Helper()
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		args := append([]string{"peer", "serve", "--listen", addr, "--once", "--libibverbs", lib, "--timeout", "20s"}, extra...)
		done <- run(args, &bytes.Buffer{}, &stderr)
	}()
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close() // a connection without a handshake: logged, not a session
			return done
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("peer serve did not listen on %s", addr)
	return nil
}

func TestPeerServeAndTest(t *testing.T) {
	lib := peerFakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer")
	t.Setenv(tokenEnv, "tok")
	addr := freePort(t)
	done := serveOnce(t, lib, addr)
	code, out, errOut := runCLI(t, "peer", "test", addr, "--libibverbs", lib, "--format", "json")
	// The fake device has no sysfs directory: peer.counters could not
	// look on either side, which is an error, not a pass. Nor has this
	// host an rdma_cm device: the server cannot listen, peer.rdma_cm is
	// an error too (code 48 comes after 47).
	if code != 47 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if err := compileSchema(t).Validate(mustJSON(t, out)); err != nil {
		t.Fatalf("the peer report does not validate: %v\n%s", err, out)
	}
	var rep struct {
		Checks []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"checks"`
	}
	json.Unmarshal([]byte(out), &rep)
	var ids []string
	for _, c := range rep.Checks {
		ids = append(ids, c.ID+"="+c.Status)
	}
	if got := strings.Join(ids, " "); got != "peer.control=pass peer.connect=pass peer.send_recv=pass peer.rdma_write=pass "+
		"peer.rdma_read=pass peer.latency=pass peer.bandwidth=pass peer.counters=error peer.rdma_cm=error" {
		t.Fatalf("checks %s", got)
	}
	select {
	case c := <-done:
		if c != 0 {
			t.Fatalf("peer serve --once exited %d", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("peer serve --once did not exit after its session")
	}
}

func mustJSON(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPeerUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"peer", "serve"}, "--listen ADDR:PORT is required"},
		{[]string{"peer", "serve", "--listen", "18516"}, "want ADDR:PORT"},
		{[]string{"peer", "serve", "--listen", "127.0.0.1:1", "--max-memory", "lots"}, "--max-memory"},
		{[]string{"peer", "test"}, "name at least one peer"},
		{[]string{"peer", "test", "host:0"}, "not 1-65535"},
		{[]string{"peer", "test", "host", "--format", "xml"}, "unknown format"},
		{[]string{"peer", "test", "host", "--port", "2"}, "--port needs --device"},
		{[]string{"peer", "dance"}, "unknown command \"dance\""},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// Nobody listening: peer.control fails as refused, the rest are blocked,
// the exit code is 40.
func TestPeerTestNobodyListening(t *testing.T) {
	addr := freePort(t)
	code, out, _ := runCLI(t, "peer", "test", addr, "--no-color")
	if code != 40 || !strings.Contains(out, "connection refused") || !strings.Contains(out, "blocked by peer.control") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

// A server with nothing to lend says so before it listens.
func TestPeerServeNothingToLend(t *testing.T) {
	lib := peerFakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer")
	addr := freePort(t)
	code, _, errOut := runCLI(t, "peer", "serve", "--listen", addr, "--libibverbs", lib, "--device", "mlx5_7")
	if code != 1 || !strings.Contains(errOut, "--device mlx5_7: libibverbs lists no such device (it lists: fake0)") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	t.Setenv("FAKE_IBV", "enosys")
	code, _, errOut = runCLI(t, "peer", "serve", "--listen", addr, "--libibverbs", lib)
	if code != 1 || !strings.Contains(errOut, "nothing to lend") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
