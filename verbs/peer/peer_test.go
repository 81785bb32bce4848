package peer

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe/fakeverbs"
)

// The test binary is its own verbs child, as the command is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == probe.ChildArg {
		os.Exit(probe.ChildMain(os.Args[2:]))
	}
	code := m.Run()
	fakeverbs.Cleanup()
	os.Exit(code)
}

// fakeLibrary builds the probe tests' fake libibverbs, whose peer modes
// carry RC traffic between two processes.
func fakeLibrary(t testing.TB) string {
	t.Helper()
	return fakeverbs.Library(t)
}

// logLines collects a server's log.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// startServer runs a server on 127.0.0.1 until the test ends.
func startServer(t testing.TB, cfg ServerConfig) (addr string, log *logLines, done <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log = &logLines{}
	if cfg.Exe == "" {
		cfg.Exe, _ = os.Executable()
	}
	cfg.Logf = log.logf
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { ch <- NewServer(cfg).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Error("the server did not stop within 10s")
		}
	})
	return ln.Addr().String(), log, ch
}

func testConfig(t testing.TB, lib string) TestConfig {
	exe, _ := os.Executable()
	return TestConfig{Exe: exe, Library: lib, GIDIndex: -1, Timeout: 10 * time.Second, IOTimeout: 2 * time.Second,
		Params: wire.Params{MsgSize: 4096, BufferSize: 1 << 20}}
}

// fakeHostRoot is a host directory with fake0's port rate and counters.
func fakeHostRoot(t testing.TB) string {
	root := t.TempDir()
	port := filepath.Join(root, "sys/class/infiniband/fake0/ports/1")
	for name, v := range map[string]string{
		"rate": "100 Gb/sec (4X EDR)", "counters/port_xmit_data": "1000", "counters/symbol_error": "0",
		"counters/port_xmit_wait": "5", "hw_counters/out_of_sequence": "0",
	} {
		p := filepath.Join(port, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestPeerHealthyPair(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer")
	root := fakeHostRoot(t)
	addr, log, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1, Token: "s3cret", HostRoot: root})
	cfg := testConfig(t, lib)
	cfg.Token = "s3cret"
	cfg.HostRoot = root
	pairs := Test(context.Background(), cfg, []string{addr})
	p := pairs[0]
	if p.Control.Fault != FaultNone || p.Control.Version != wire.Version {
		t.Fatalf("control %+v\nserver log:\n%s", p.Control, log)
	}
	v := p.Verbs
	if v == nil || v.Failure != nil {
		t.Fatalf("verbs %+v\nserver log:\n%s", v, log)
	}
	if v.Connect == nil || !v.Connect.OK() || v.Connect.PathMTU != 1024 || v.Connect.Remote == nil || v.Connect.Remote.QPN == v.Connect.Local.QPN {
		t.Fatalf("connect %+v failed %+v\nserver log:\n%s", v.Connect, v.Connect.Failed(), log)
	}
	t.Logf("connect steps: %d, local %+v remote %+v\nserver log:\n%s", len(v.Connect.Steps), v.Connect.Local, v.Connect.Remote, log)
	if sr := v.SendRecv; sr == nil || !sr.OK() || !sr.ToPeer || !sr.FromPeer {
		t.Fatalf("send_recv %+v failed %+v\nserver log:\n%s", sr, sr.Failed(), log)
	}
	if v.Write == nil || v.Read == nil || v.Latency == nil || v.Bandwidth == nil || v.Counters == nil {
		t.Fatalf("missing results: %+v\nserver log:\n%s", v, log)
	}
	for _, p := range []*probe.Probe{&v.Write.Probe, &v.Read.Probe, &v.Latency.Probe, &v.Bandwidth.Probe, &v.Counters.Probe} {
		if !p.OK() {
			t.Fatalf("%s: %+v\nserver log:\n%s", p.Name, p.Failed(), log)
		}
	}
	if v.Write.Status != "IBV_WC_SUCCESS" || v.Read.Status != "IBV_WC_SUCCESS" {
		t.Fatalf("write %s, read %s", v.Write.Status, v.Read.Status)
	}
	if l := v.Latency.Latency; l.N != 1000 || l.MinNS <= 0 || l.MedNS < l.MinNS || l.P99NS < l.MedNS {
		t.Fatalf("latency %+v", l)
	}
	if b := v.Bandwidth; len(b.Runs) != 2 || b.Runs[0].Gbps <= 0 || b.LocalRateGbps != 100 || b.RemoteRateGbps != 100 {
		// 1 MiB does not fit the upper half of a 1 MiB buffer.
		t.Fatalf("bandwidth %+v", b)
	}
	if h := v.Connect.RemoteHost; h == nil || h.RateGbps != 100 || h.Counters["counters/port_xmit_wait"] != 5 {
		t.Fatalf("the server's report of its host: %+v", h)
	}
	if c := v.Counters; len(c.Local) != 4 || len(c.Remote) != 4 || c.Local[0].Name != "counters/port_xmit_data" {
		t.Fatalf("counters %+v", c)
	}
}

// A link that drops everything: the SEND is never acknowledged and the
// server's receive never completes. Both become findings within the
// pair's deadline, not a hang.
func TestPeerSilentLinkIsAFinding(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer-silent")
	addr, log, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1})
	cfg := testConfig(t, lib)
	cfg.Timeout = 3 * time.Second
	t0 := time.Now()
	p := Test(context.Background(), cfg, []string{addr})[0]
	if d := time.Since(t0); d > cfg.Timeout+3*time.Second {
		t.Fatalf("took %v with a %v deadline", d, cfg.Timeout)
	}
	v := p.Verbs
	if v == nil || v.Connect == nil || !v.Connect.OK() {
		t.Fatalf("connect should pass (no traffic yet): %+v\n%s", v, log)
	}
	sr := v.SendRecv
	if sr == nil {
		t.Fatalf("no send_recv result: failure %+v\n%s", v.Failure, log)
	}
	st := sr.Failed()
	if st == nil || !strings.Contains(st.Error, "no completion") || sr.ToPeer || sr.FromPeer {
		t.Fatalf("send_recv step %+v, to %v from %v", st, sr.ToPeer, sr.FromPeer)
	}
}

// The server vanishes after the endpoint exchange (its process and its
// QP gone): the client's next step fails at once with the reason, and no
// wait outlives the pair's deadline.
func TestPeerServerVanishes(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		wc := &wire.Conn{Conn: c, IOTimeout: 2 * time.Second}
		srv := &Server{cfg: ServerConfig{IOTimeout: 2 * time.Second}}
		if srv.handshake(wc, func() error { return nil }) != nil {
			return
		}
		var setup wire.Setup
		if wc.Expect(0, wire.MsgSetup, &setup) != nil {
			return
		}
		// A QP of a process that does not exist.
		ep := setup.Endpoint
		ep.QPN, ep.PSN = 0xfffe11, 5
		_ = wc.Send(wire.MsgSetupReply, wire.SetupReply{Endpoint: ep, PathMTU: 1024})
	}()
	cfg := testConfig(t, lib)
	cfg.Timeout = 4 * time.Second
	t0 := time.Now()
	p := Test(context.Background(), cfg, []string{ln.Addr().String()})[0]
	if d := time.Since(t0); d > cfg.Timeout+2*time.Second {
		t.Fatalf("took %v", d)
	}
	if p.Verbs == nil || p.Verbs.Connect == nil || !p.Verbs.Connect.OK() {
		t.Fatalf("connect: %+v", p.Verbs)
	}
	sr := p.Verbs.SendRecv
	if sr == nil || sr.Failed() == nil || !strings.Contains(sr.Failed().Name, "the server posts its receive") {
		t.Fatalf("send_recv: %+v", sr)
	}
}

// The QP connects and SEND works, but the peer refuses remote access: the
// WRITE completes with IBV_WC_REM_ACCESS_ERR, and the cause says rkey.
func TestPeerWriteRefused(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer-badrkey")
	addr, log, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1})
	p := Test(context.Background(), testConfig(t, lib), []string{addr})[0]
	v := p.Verbs
	if v == nil || v.SendRecv == nil || !v.SendRecv.OK() || v.Write == nil {
		t.Fatalf("verbs %+v\n%s", v, log)
	}
	st := v.Write.Failed()
	if st == nil || v.Write.Status != "IBV_WC_REM_ACCESS_ERR" || !strings.Contains(st.Cause, "rkey") {
		t.Fatalf("write %+v step %+v", v.Write, st)
	}
	if v.Read != nil {
		t.Fatalf("peer.rdma_read ran after a failed WRITE: %+v", v.Read)
	}
}

// BenchmarkPeerTestHealthy is one whole `peer test` against a server on
// 127.0.0.1, both sides' verbs children driving the fake library: the
// handshake, both children's start, connect, SEND/RECV, WRITE, READ, 100
// round trips and 3 × 50 ms of bandwidth.
func BenchmarkPeerTestHealthy(b *testing.B) {
	lib := fakeLibrary(b)
	b.Setenv("FAKE_IBV", "peer")
	root := fakeHostRoot(b)
	addr, log, _ := startServer(b, ServerConfig{Library: lib, GIDIndex: -1, HostRoot: root})
	cfg := testConfig(b, lib)
	cfg.HostRoot, cfg.Iterations, cfg.BandwidthTime = root, 100, 50*time.Millisecond
	for b.Loop() {
		p := Test(context.Background(), cfg, []string{addr})[0]
		if p.Verbs == nil || p.Verbs.Counters == nil || !p.Verbs.Counters.OK() {
			b.Fatalf("not healthy: %+v\n%s", p.Verbs, log)
		}
	}
}

// Several peers at once: two servers and a port nobody listens on, at
// most two pairs at a time; the pairs come back in the order given.
func TestPeerSeveralPeers(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer")
	a, logA, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1})
	b, logB, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	nobody := ln.Addr().String()
	ln.Close()
	cfg := testConfig(t, lib)
	cfg.Concurrency, cfg.Iterations, cfg.BandwidthTime = 2, 50, 20*time.Millisecond
	pairs := Test(context.Background(), cfg, []string{a, nobody, b})
	if len(pairs) != 3 || pairs[0].Target != a || pairs[1].Target != nobody || pairs[2].Target != b {
		t.Fatalf("pairs %+v", pairs)
	}
	if pairs[1].Control.Fault != FaultRefused || pairs[1].Verbs != nil {
		t.Fatalf("nobody: %+v", pairs[1])
	}
	for _, i := range []int{0, 2} {
		v := pairs[i].Verbs
		if v == nil || v.Bandwidth == nil || !v.Bandwidth.OK() {
			t.Fatalf("pair %d: %+v\n%s\n%s", i, v, logA, logB)
		}
	}
}

// fakeRoCERoot is a host directory for the fake's RoCE port: GID 0 is a
// RoCE v2 GID on netdev fk0 with the given MTU and address.
func fakeRoCERoot(t testing.TB, mtu int, cidr string) string {
	root := fakeHostRoot(t)
	files := map[string]string{
		"sys/class/infiniband/fake0/ports/1/gid_attrs/types/0": "RoCE v2",
		"sys/class/infiniband/fake0/ports/1/gid_attrs/ndevs/0": "fk0",
		"sys/class/infiniband/fake0/ports/1/gids/0":            "0000:0000:0000:0000:0000:ffff:7f00:0001",
		"sys/class/infiniband/fake0/ports/1/state":             "4: ACTIVE",
		"sys/class/net/fk0/mtu":                                fmt.Sprint(mtu),
		"rdmadoctor.facts.json": fmt.Sprintf(`{"schema":"rdmadoctor.facts/v1","netdevs":[{"name":"fk0","index":2,"operstate":"up",`+
			`"admin_up":true,"carrier":true,"mtu":%d,"addresses":[%q]}]}`, mtu, cidr),
	}
	for name, v := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// RoCE across two "hosts" whose netdev MTUs differ (9000 on the server,
// 1500 here): both sides report their GID's netdev, MTU and subnet, and
// the path MTU is held to what 1500 carries.
func TestPeerRoCEMTUMismatch(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer-roce")
	t.Setenv("FAKE_IBV_GID4", "127.0.0.1")
	addr, log, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1, HostRoot: fakeRoCERoot(t, 9000, "127.0.0.1/8")})
	cfg := testConfig(t, lib)
	cfg.HostRoot, cfg.Iterations, cfg.BandwidthTime = fakeRoCERoot(t, 1500, "127.0.0.1/8"), 20, 20*time.Millisecond
	p := Test(context.Background(), cfg, []string{addr})[0]
	v := p.Verbs
	if v == nil || v.Connect == nil || !v.Connect.OK() {
		t.Fatalf("connect: %+v\n%s", v, log)
	}
	l, r := v.Connect.Local, v.Connect.Remote
	if l.LinkLayer != "Ethernet" || l.GIDType != "RoCE v2" || l.Netdev != "fk0" || l.NetdevMTU != 1500 || r.NetdevMTU != 9000 ||
		l.Subnet != "127.0.0.1/8" || l.GIDString() != "127.0.0.1" {
		t.Fatalf("local %+v remote %+v", l, r)
	}
	if v.Connect.PathMTU != 1024 || !strings.Contains(v.Connect.MTUNote, "netdev MTU 1500 here, 9000 there") {
		t.Fatalf("path MTU %d, note %q", v.Connect.PathMTU, v.Connect.MTUNote)
	}
	if v.Counters == nil || !v.Counters.OK() {
		t.Fatalf("the session did not run to its end: %+v", v)
	}
}

// An iWARP port cannot connect with exchanged QP numbers: peer.connect is
// skipped saying so, and the server's session ends cleanly.
func TestPeerIWARPSkips(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "iwarp")
	addr, log, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1})
	p := Test(context.Background(), testConfig(t, lib), []string{addr})[0]
	if p.Verbs == nil || p.Verbs.Connect == nil || !strings.Contains(p.Verbs.Connect.Skipped, "rdma_cm") || p.Verbs.SendRecv != nil {
		t.Fatalf("verbs %+v", p.Verbs)
	}
	waitLog(t, log, "session ended after")
	if strings.Contains(log.String(), "read Setup") {
		t.Fatalf("the server's session did not end cleanly:\n%s", log)
	}
}

// The link goes down mid-run (each process drops every wire message it
// receives after its 2500th; a round trip is two, the peer's SEND and the
// ACK of its own): the check it happened in fails within the pair's
// deadline, naming the wait, keeps the round trips timed before, says the
// path stopped mid-run, and the rest are not run; nothing hangs.
//
// Where the drop lands must not depend on the runner's speed. It falls at
// round trip ~1250, inside the first measured batch of 1000 whatever the
// warm-up before it (at most 1000 round trips, or 150 ms's worth): the
// ping-pong is bound by its iterations, not by its time, because the
// latency budget is long. With the default 2 s budget a loaded two-core
// runner (the probe's other threads SCHED_IDLE, 8 ms a round trip) ended
// the ping-pong before the drop, and it fell in peer.bandwidth.
func TestPeerLinkDropsMidRun(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer")
	t.Setenv("FAKE_IBV_DROP_AFTER", "2500")
	addr, log, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1})
	cfg := testConfig(t, lib)
	cfg.Timeout = 30 * time.Second
	cfg.Iterations = 5000
	cfg.LatencyBudget = 20 * time.Second
	t0 := time.Now()
	p := Test(context.Background(), cfg, []string{addr})[0]
	if d := time.Since(t0); d > cfg.Timeout+3*time.Second {
		t.Fatalf("took %v", d)
	}
	v := p.Verbs
	if v == nil || v.Read == nil || !v.Read.OK() || v.Latency == nil {
		t.Fatalf("verbs %+v\n%s", v, log)
	}
	st := v.Latency.Failed()
	if st == nil || !strings.Contains(st.Error, "no completion") || v.Bandwidth != nil {
		t.Fatalf("latency step %+v (%+v), bandwidth %+v", st, v.Latency, v.Bandwidth)
	}
	// The QPs had carried the single transfers: the cause is the path
	// stopping mid-run, not QPs that never connected.
	if !strings.Contains(st.Cause, "mid-run") || strings.Contains(st.Cause, "not connected") {
		t.Errorf("latency cause %q, want the path stopping mid-run", st.Cause)
	}
	if v.Latency.Latency.N == 0 {
		t.Fatalf("the round trips before the drop were not kept: %+v", v.Latency)
	}
}

// A hop between the hosts drops every packet above 1000 bytes: the
// one-packet SEND crosses both ways, the full-size one never completes,
// and peer.send_recv says which (the checks name the hop's MTU from it);
// nothing after it runs.
func TestPeerSmallPacketsCrossFullOnesDoNot(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer")
	t.Setenv("FAKE_IBV_DROP_LARGER", "1000")
	addr, log, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1})
	cfg := testConfig(t, lib)
	cfg.Timeout = 8 * time.Second
	p := Test(context.Background(), cfg, []string{addr})[0]
	v := p.Verbs
	if v == nil || v.SendRecv == nil {
		t.Fatalf("verbs %+v\n%s", v, log)
	}
	sr := v.SendRecv
	st := sr.Failed()
	if sr.OnePacketSize != 64 || !sr.OnePacketOK || st == nil || !strings.Contains(st.Error, "no completion") ||
		!strings.Contains(st.Name, "4096-byte SEND") || v.Write != nil {
		t.Fatalf("send_recv %+v (failed step %+v), write %+v", sr, st, v.Write)
	}
}
