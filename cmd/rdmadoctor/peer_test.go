package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
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

// fakeSysfs is a sysfs directory for SYSFS_PATH, where libibverbs (and
// the peer commands' check before any verbs child) look for devices: with
// the class directory holding devs, and the uverbs ABI file when uverbs.
// classDir false leaves class/infiniband out altogether.
func fakeSysfs(t testing.TB, classDir, uverbs bool, devs ...string) string {
	t.Helper()
	dir := t.TempDir()
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if classDir {
		mk("class/infiniband")
	}
	for _, d := range devs {
		mk("class/infiniband/" + d)
	}
	if uverbs {
		mk("class/infiniband_verbs")
		if err := os.WriteFile(filepath.Join(dir, "class/infiniband_verbs/abi_version"), []byte("6\n"), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPeerServeAndTest(t *testing.T) {
	lib := peerFakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer")
	t.Setenv(tokenEnv, "tok")
	// The fake library ignores sysfs; the check before the child reads
	// where a real one would, and finds its device there.
	t.Setenv("SYSFS_PATH", fakeSysfs(t, true, true, "fake0"))
	addr := freePort(t)
	done := serveOnce(t, lib, addr)
	code, out, errOut := runCLI(t, "peer", "test", addr, "--libibverbs", lib, "--format", "json")
	// The fake device has no sysfs directory: peer.counters could not
	// look on either side, which is an error, not a pass. Nor has this
	// host an rdma_cm device: the server cannot listen, peer.rdma_cm is
	// an error too. Errors alone are the unknown verdict: exit 4.
	if code != report.ExitUnknown {
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
	t.Setenv(tokenEnv, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"peer", "serve"}, "--listen ADDR:PORT is required"},
		{[]string{"peer", "serve", "--listen", "18516", "--token", "t"}, "want ADDR:PORT"},
		{[]string{"peer", "serve", "--listen", "127.0.0.1:1", "--token", "t", "--max-memory", "lots"}, "--max-memory"},
		{[]string{"peer", "serve", "--listen", "127.0.0.1:1", "--token", "t", "--max-client-sessions", "0"}, "--max-client-sessions 0: want a value above 0"},
		// Every interface is nobody's choice: name an address.
		{[]string{"peer", "serve", "--listen", ":18516", "--token", "t"}, `--listen ":18516": name an address`},
		{[]string{"peer", "serve", "--listen", "0.0.0.0:18516", "--token", "t"}, "name an address"},
		{[]string{"peer", "serve", "--listen", "[::]:18516", "--token", "t"}, "name an address"},
		// No token: refused, unless --insecure-no-token, and then only on
		// loopback or link-local (192.0.2.2 is this test host's own
		// eth0 address in CI: the refusal is the rule, not a failed bind).
		{[]string{"peer", "serve", "--listen", "127.0.0.1:1"}, "no token: give both hosts the same one in $RDMADOCTOR_PEER_TOKEN"},
		{[]string{"peer", "serve", "--listen", "192.0.2.2:18516", "--insecure-no-token"}, "--insecure-no-token serves anyone who connects, so it listens only on a loopback or link-local address, and 192.0.2.2 is neither"},
		{[]string{"peer", "serve", "--listen", "[2001:db8::2]:18516", "--insecure-no-token"}, "2001:db8::2 is neither"},
		{[]string{"peer", "serve", "--listen", "127.0.0.1:1", "--insecure-no-token", "--token", "t"}, "--insecure-no-token with a token"},
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

// A server with nothing to lend says so in one line before it listens:
// from sysfs when it can tell, else from the library's enumeration.
func TestPeerServeNothingToLend(t *testing.T) {
	lib := peerFakeLibrary(t)
	addr := freePort(t)
	good := fakeSysfs(t, true, true, "fake0")
	for _, tc := range []struct {
		name, sysfs, fakeIBV, lib string
		extra                     []string
		want                      string
	}{
		{"no class directory", fakeSysfs(t, false, false), "peer", lib, nil,
			"nothing to lend: no RDMA device on this host: %s/class/infiniband does not exist (no RDMA driver is loaded). Run `rdmadoctor` on this host"},
		{"empty class directory", fakeSysfs(t, true, true), "peer", lib, nil,
			"nothing to lend: no RDMA device on this host: %s/class/infiniband is empty. Run `rdmadoctor` on this host"},
		{"no such device in sysfs", good, "peer", lib, []string{"--device", "mlx5_7"},
			"nothing to lend: no RDMA device \"mlx5_7\" on this host: %s/class/infiniband lists fake0. Pass a device this host has"},
		{"no uverbs ABI file", fakeSysfs(t, true, false, "fake0"), "peer", lib, nil,
			"nothing to lend: this host's kernel offers no userspace verbs: %s/class/infiniband_verbs/abi_version does not exist (ib_uverbs is not loaded)"},
		{"the library lists no such device", fakeSysfs(t, true, true, "fake0", "mlx5_7"), "peer", lib, []string{"--device", "mlx5_7"},
			"--device mlx5_7: libibverbs lists no such device (it lists: fake0)"},
		{"ENOSYS from the library", good, "enosys", lib, nil,
			"nothing to lend: this host's kernel offers no userspace verbs: ibv_get_device_list failed with ENOSYS"},
		{"no library", good, "peer", filepath.Join(t.TempDir(), "libibverbs.so.1"), nil,
			"nothing to lend: libibverbs could not be loaded on this host: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SYSFS_PATH", tc.sysfs)
			t.Setenv("FAKE_IBV", tc.fakeIBV)
			args := append([]string{"peer", "serve", "--listen", addr, "--insecure-no-token", "--libibverbs", tc.lib}, tc.extra...)
			code, out, errOut := runCLI(t, args...)
			want := tc.want
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, tc.sysfs)
			}
			lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
			if code != 1 || out != "" || len(lines) != 1 || !strings.HasPrefix(lines[0], "rdmadoctor peer serve: "+want) {
				t.Fatalf("exit %d, stdout %q, stderr:\n%s\nwant exit 1 and one line starting %q", code, out, errOut, "rdmadoctor peer serve: "+want)
			}
		})
	}
}

// peerResult is one check of a `peer test` JSON report.
type peerResult struct {
	ID      string   `json:"id"`
	Status  string   `json:"status"`
	Summary string   `json:"summary"`
	Details []string `json:"details"`
	Remedy  string   `json:"remedy"`
}

// `peer test` from a host that cannot take part: the handshake passes, then
// one finding (peer.connect) names the cause, whether sysfs told before any
// verbs child or the child's enumeration did, and every later check is
// blocked by it; the server's session ends at the client's Bye.
func TestPeerTestWithoutLocalRDMA(t *testing.T) {
	lib := peerFakeLibrary(t)
	good := fakeSysfs(t, true, true, "fake0")
	noClass := fakeSysfs(t, false, false)
	for _, tc := range []struct {
		name, sysfs, fakeIBV, lib string
		summary, remedy           string
	}{
		{"no RDMA device in sysfs", noClass, "peer", lib,
			"no RDMA device on this host: " + noClass + "/class/infiniband does not exist (no RDMA driver is loaded)", "Run `rdmadoctor` on this host"},
		{"ENOSYS from the child's enumeration", good, "enosys", lib,
			"this host's kernel offers no userspace verbs: ibv_get_device_list failed with ENOSYS", "Load the userspace verbs interface: `modprobe ib_uverbs`"},
		{"no libibverbs for the child", good, "peer", filepath.Join(t.TempDir(), "libibverbs.so.1"),
			"libibverbs could not be loaded on this host: dlopen ", "Install rdma-core's library and providers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FAKE_IBV", "peer")
			t.Setenv("SYSFS_PATH", good)
			addr := freePort(t)
			done := serveOnce(t, lib, addr, "--insecure-no-token")
			// From here on the client's host is the one judged.
			t.Setenv("SYSFS_PATH", tc.sysfs)
			t.Setenv("FAKE_IBV", tc.fakeIBV)
			code, out, errOut := runCLI(t, "peer", "test", addr, "--libibverbs", tc.lib, "--format", "json")
			if code != 41 {
				t.Fatalf("exit %d, want 41 (peer.connect)\n%s\n%s", code, out, errOut)
			}
			var rep struct {
				Checks []peerResult `json:"checks"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatal(err)
			}
			var ids []string
			var findings []peerResult
			for _, c := range rep.Checks {
				ids = append(ids, c.ID+"="+c.Status)
				switch {
				case c.Status == "skip" && c.Summary != addr+": blocked by peer.connect":
					t.Errorf("%s: %q, want blocked by peer.connect", c.ID, c.Summary)
				case c.Status != "skip" && c.Status != "pass":
					findings = append(findings, c)
				}
			}
			want := "peer.control=pass peer.connect=fail peer.send_recv=skip peer.rdma_write=skip peer.rdma_read=skip " +
				"peer.latency=skip peer.bandwidth=skip peer.counters=skip peer.rdma_cm=skip"
			if got := strings.Join(ids, " "); got != want {
				t.Fatalf("checks %s\nwant   %s", got, want)
			}
			f := findings[0]
			if len(findings) != 1 || !strings.HasPrefix(f.Summary, addr+": "+tc.summary) || !strings.HasPrefix(f.Remedy, tc.remedy) {
				t.Fatalf("findings %+v\nwant one, peer.connect, %q with fix %q", findings, tc.summary, tc.remedy)
			}
			select {
			case c := <-done:
				if c != 0 {
					t.Fatalf("peer serve --once exited %d", c)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the server's session did not end at the client's Bye")
			}
		})
	}
}

// Without a token, --insecure-no-token on 127.0.0.1 starts, says in its
// log that it serves anyone, and serves a client without a token.
func TestPeerServeInsecureOnLoopback(t *testing.T) {
	lib := peerFakeLibrary(t)
	t.Setenv(tokenEnv, "")
	t.Setenv("FAKE_IBV", "peer")
	t.Setenv("SYSFS_PATH", fakeSysfs(t, true, true, "fake0"))
	addr := freePort(t)
	done := make(chan int, 1)
	var stderr syncBuffer
	go func() {
		done <- run([]string{"peer", "serve", "--listen", addr, "--insecure-no-token", "--once", "--libibverbs", lib, "--timeout", "5s"}, &bytes.Buffer{}, &stderr)
	}()
	var conn net.Conn
	var ctl peer.Control
	for i := 0; i < 300 && conn == nil; i++ {
		if c, ctlNow := peer.Handshake(context.Background(), addr, "", time.Second); c != nil {
			conn, ctl = c, ctlNow
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if conn == nil {
		t.Fatalf("no handshake with the tokenless server: %+v\n%s", ctl, stderr.String())
	}
	conn.Close()
	select {
	case c := <-done:
		if c != 0 {
			t.Fatalf("peer serve --once exited %d\n%s", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("peer serve --once did not exit after its session")
	}
	if !strings.Contains(stderr.String(), "NO TOKEN: anyone who reaches this address is served") {
		t.Fatalf("the log does not say the server has no token:\n%s", stderr.String())
	}
}

// syncBuffer is a bytes.Buffer a goroutine writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A server's reject message is the peer's text: in the text report its
// ESC (a colour or OSC 8 link sequence), newline (a forged report line)
// and U+202E (text reversed on screen) are shown as escapes; the JSON
// report keeps the message as the server sent it.
func TestPeerTestRejectReasonInert(t *testing.T) {
	hostile := "busy\x1b]8;;http://evil.example/\x07click\x1b]8;;\x07\nrdmadoctor: all checks passed\u202eexe.txt"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wc := &wire.Conn{Conn: c, IOTimeout: 2 * time.Second}
			nonce := make([]byte, wire.NonceSize)
			_ = wc.Send(wire.MsgServerHello, wire.ServerHello{Magic: wire.Magic, Version: wire.Version, MinVersion: wire.MinVersion, Nonce: nonce})
			_ = wc.Expect(0, wire.MsgClientHello, &wire.ClientHello{})
			_ = wc.Send(wire.MsgReject, wire.Reject{Code: wire.RejectBusy, Message: hostile})
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	code, out, errOut := runCLI(t, "peer", "test", addr, "--no-color", "-v")
	if code == 0 || !strings.Contains(out, "server busy") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, bad := range []string{"\x1b", "\x07", "\u202e", "\nrdmadoctor: all checks passed"} {
		if strings.Contains(out, bad) {
			t.Errorf("the text report carries %q from the peer:\n%s", bad, out)
		}
	}
	// The report wraps long lines at spaces: joined again, the reason
	// reads as the server sent it, its controls spelled out.
	joined := regexp.MustCompile(`\n\s+`).ReplaceAllString(out, " ")
	if want := `busy\x1b]8;;http://evil.example/\x07click\x1b]8;;\x07\nrdmadoctor: all checks passed\u202eexe.txt`; !strings.Contains(joined, want) {
		t.Errorf("the text report does not show the reason escaped (%s):\n%s", want, out)
	}
	_, out, _ = runCLI(t, "peer", "test", addr, "--format", "json")
	var rep struct {
		Checks []struct {
			ID       string                                              `json:"id"`
			Evidence map[string]struct{ Control struct{ Error string } } `json:"evidence"`
		} `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Checks) == 0 || rep.Checks[0].ID != "peer.control" {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := rep.Checks[0].Evidence[addr].Control.Error; !strings.HasSuffix(got, ": "+hostile) {
		t.Fatalf("the JSON evidence's error is %q, want the server's message raw", got)
	}
}
