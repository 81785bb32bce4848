package peer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
)

// dialFrom connects to addr from the loopback address from (every
// 127/8 address is this host's): a client of its own for the server's
// per-client caps. It reads the ServerHello.
func dialFrom(t testing.TB, from, addr string) (net.Conn, wire.ServerHello) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var h wire.ServerHello
	if err := (&wire.Conn{Conn: c, IOTimeout: 2 * time.Second}).Expect(0, wire.MsgServerHello, &h); err != nil {
		t.Fatalf("from %s: %v", from, err)
	}
	return c, h
}

// hello sends a ClientHello without a token on c and returns the
// server's answer: nil for a Welcome.
func hello(t testing.TB, c net.Conn, h wire.ServerHello) error {
	t.Helper()
	wc := &wire.Conn{Conn: c, IOTimeout: 3 * time.Second}
	if err := wc.Send(wire.MsgClientHello, wire.ClientHello{Magic: wire.Magic, Version: wire.Version, Proof: wire.Proof("", h.Nonce)}); err != nil {
		return err
	}
	return wc.Expect(0, wire.MsgWelcome, &wire.Welcome{})
}

// Sixty-four connections that say nothing, from one client or from 64,
// do not keep a valid client out: it is served at once, the oldest idle
// connections making room. (Refusing newcomers past 16 handshakes locked
// every client out for as long as the idle ones were renewed.)
func TestServerIdleClientsDoNotLockOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		from func(i int) string
	}{
		{"one client", func(int) string { return "127.0.0.1" }},
		{"64 clients", func(i int) string { return fmt.Sprintf("127.0.1.%d", i+1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, log, _ := startServer(t, ServerConfig{})
			for i := range 64 {
				dialFrom(t, tc.from(i), addr)
			}
			t0 := time.Now()
			conn, ctl := Handshake(context.Background(), addr, "", 2*time.Second)
			if conn == nil || ctl.Fault != FaultNone {
				t.Fatalf("the valid client after 64 idle ones: %+v\nserver log:\n%s", ctl, log)
			}
			conn.Close()
			if d := time.Since(t0); d > time.Second {
				t.Fatalf("the valid client was served after %v, want within 1s", d)
			}
			waitLog(t, log, "refused (evicted)")
		})
	}
}

// Past --max-client-handshakes, a client's newest connection closes that
// client's oldest, never another client's; past the total, the oldest of
// all makes room.
func TestServerHandshakeEviction(t *testing.T) {
	addr, log, _ := startServer(t, ServerConfig{MaxHandshakes: 4, MaxClientHandshakes: 2})
	a1, _ := dialFrom(t, "127.0.0.2", addr)
	b1, _ := dialFrom(t, "127.0.0.3", addr)
	a2, _ := dialFrom(t, "127.0.0.2", addr)
	a3, h := dialFrom(t, "127.0.0.2", addr) // the client's third: a1 makes room
	// The evicted connection is told why, as a busy server.
	err := (&wire.Conn{Conn: a1, IOTimeout: 2 * time.Second}).Expect(0, wire.MsgWelcome, &wire.Welcome{})
	var rj *wire.RejectError
	if !errors.As(err, &rj) || rj.Reject.Code != wire.RejectBusy || !strings.Contains(rj.Reject.Message, "evicted: still in its handshake") {
		t.Fatalf("the client's oldest handshake, past --max-client-handshakes: %v", err)
	}
	if !closedWithin(a1, 2*time.Second) {
		t.Fatal("the evicted connection was kept open")
	}
	if closedWithin(b1, 200*time.Millisecond) || closedWithin(a2, 10*time.Millisecond) {
		t.Fatal("another handshake was closed for the client's third")
	}
	if err := hello(t, a3, h); err != nil {
		t.Fatalf("the newest connection: %v", err)
	}
	// Four in their handshake now (b1, a2, c1, c2 after a3's passed):
	// the fifth closes the oldest of all, b1.
	dialFrom(t, "127.0.0.4", addr)
	dialFrom(t, "127.0.0.4", addr)
	dialFrom(t, "127.0.0.5", addr)
	if !closedWithin(b1, 2*time.Second) {
		t.Fatalf("the oldest handshake of all was kept past --max-handshakes\n%s", log)
	}
	waitLog(t, log, "still in its handshake when a newer connection needed its place (at most 4 handshakes at once, 2 per client)")
}

// A connection that has not passed its handshake within
// --handshake-timeout is dropped, however patient --io-timeout is.
func TestServerHandshakeDeadline(t *testing.T) {
	addr, log, _ := startServer(t, ServerConfig{HandshakeTimeout: 300 * time.Millisecond, IOTimeout: 5 * time.Second})
	t0 := time.Now()
	c, _ := dialRaw(t, addr)
	if !closedWithin(c, 3*time.Second) {
		t.Fatal("an idle connection was kept past the handshake deadline")
	}
	// Well before --io-timeout's 5s, however loaded the machine.
	if d := time.Since(t0); d < 250*time.Millisecond || d > 2500*time.Millisecond {
		t.Fatalf("dropped after %v, want about 300ms", d)
	}
	waitLog(t, log, "refused (timeout)")
}

// One client may run --max-client-sessions sessions; another client still
// gets a place.
func TestServerClientSessionCap(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer")
	addr, log, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1, MaxSessions: 4, MaxClientSessions: 1, IOTimeout: 3 * time.Second})
	c1, h1 := dialFrom(t, "127.0.0.2", addr)
	if err := hello(t, c1, h1); err != nil {
		t.Fatalf("the client's first session: %v", err)
	}
	c2, h2 := dialFrom(t, "127.0.0.2", addr)
	err := hello(t, c2, h2)
	if err == nil || !strings.Contains(err.Error(), "(busy)") || !strings.Contains(err.Error(), "--max-client-sessions") {
		t.Fatalf("the client's second session: %v, want busy naming --max-client-sessions", err)
	}
	c3, h3 := dialFrom(t, "127.0.0.3", addr)
	if err := hello(t, c3, h3); err != nil {
		t.Fatalf("another client's session: %v\n%s", err, log)
	}
	waitLog(t, log, "the most this server allows one client (--max-client-sessions)")
}

// A flood of hostile connections costs a bounded number of log lines:
// --log-burst one by one per interval, then one summary line, and the
// summaries account for every connection that was not logged.
func TestServerRefusalLogBounded(t *testing.T) {
	const interval = 300 * time.Millisecond
	addr, log, _ := startServer(t, ServerConfig{IOTimeout: time.Second, LogInterval: interval, LogBurst: 5})
	var made atomic.Int64
	t0 := time.Now()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(t0) < 1200*time.Millisecond {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					continue
				}
				made.Add(1)
				c.Write([]byte(fmt.Sprintf("garbage %d", g)))
				c.Close()
			}
		}()
	}
	wg.Wait()
	flood := time.Since(t0)
	n := int(made.Load())
	if n < 100 {
		t.Fatalf("only %d connections in the flood: too few to judge", n)
	}
	// Every connection is accounted for, logged or summed up.
	var one, summed, lines int
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		one, summed, lines = countRefusals(log.String())
		if one+summed >= n {
			break
		}
		time.Sleep(interval)
	}
	if one+summed != n {
		t.Fatalf("%d connections, %d refusals logged and %d summed up\n%s", n, one, summed, log)
	}
	// The burst per interval plus one summary, for the intervals the
	// flood and its draining spanned (and the one cut short by the end).
	intervals := int((time.Since(t0)+flood)/interval) + 2
	all := strings.Count(log.String(), "\n") + 1
	if max := intervals*(5+1) + 1; all > max { // +1: the "listening on" line
		t.Fatalf("%d connections took %d log lines, want at most %d\n%s", n, all, max, log)
	}
	t.Logf("%d connections in %v: %d lines (%d one by one, %d summed up)", n, flood.Round(time.Millisecond), lines, one, summed)
}

// countRefusals counts the refusals logged one by one, those summed up
// in summary lines, and the lines of both.
func countRefusals(log string) (one, summed, lines int) {
	for _, l := range strings.Split(log, "\n") {
		var k int
		switch {
		case strings.Contains(l, ": refused ("):
			one++
			lines++
		case strings.Contains(l, "more refusals in the last"):
			fmt.Sscanf(l, "%d more refusals", &k)
			summed += k
			lines++
		}
	}
	return one, summed, lines
}

// emfileChild is the environment variable that makes
// TestServerSurvivesEMFILE's binary the server with a lowered
// RLIMIT_NOFILE.
const emfileChild = "RDMADOCTOR_PEER_EMFILE_CHILD"

// Out of descriptors (EMFILE), accept fails: the server logs it, waits
// and accepts again, instead of ending. Once the connections that took
// the descriptors are gone, it serves again.
func TestServerSurvivesEMFILE(t *testing.T) {
	if os.Getenv(emfileChild) != "" {
		emfileServer()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerSurvivesEMFILE$")
	cmd.Env = append(os.Environ(), emfileChild+"=1")
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	stdin, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); <-exited })
	log := &logLines{}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.logf("%s", sc.Text())
		}
	}()
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the server child said no address: %v\n%s", err, log)
	}
	addr = strings.TrimSpace(addr)
	var held []net.Conn
	for range 40 {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		held = append(held, c)
	}
	waitLog(t, log, "too many open files; accepting again in")
	for _, c := range held {
		c.Close()
	}
	select {
	case <-exited:
		t.Fatalf("the server ended on EMFILE: %v\n%s", waitErr, log)
	default:
	}
	// Within the longest backoff the server accepts again.
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, ctl := Handshake(context.Background(), addr, "", time.Second)
		if conn != nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not served after the descriptors came back: %+v\n%s", ctl, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// emfileServer is the child of TestServerSurvivesEMFILE: a server on
// loopback whose RLIMIT_NOFILE leaves room for a few connections; it
// writes its address on stdout, logs on stderr, and ends when stdin
// closes.
func emfileServer() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ents, _ := os.ReadDir("/proc/self/fd")
	lim := uint64(len(ents) + 4)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: lim, Max: lim}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	fmt.Println(ln.Addr())
	srv := NewServer(ServerConfig{Exe: "/bin/false", Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
	if err := srv.Serve(ctx, ln); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// The listen rules: a wildcard or missing address is refused; without a
// token only loopback and link-local addresses, literal or resolved.
func TestCheckListen(t *testing.T) {
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "localhost":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}, nil
		case "node02":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.0.2.2")}, nil
		}
		return nil, fmt.Errorf("no such host")
	}
	for _, tc := range []struct {
		addr    string
		noToken bool
		want    string // "" = allowed
	}{
		{":18516", false, "name an address"},
		{"0.0.0.0:18516", false, "name an address"},
		{"[::]:18516", false, "name an address"},
		{"[::ffff:0.0.0.0]:18516", false, "name an address"},
		{"18516", false, "want ADDR:PORT"},
		{"192.0.2.1:ssh", false, "is not 0-65535"},
		{"192.0.2.1:18516", false, ""},
		{"node02:18516", false, ""},
		{"nowhere:18516", false, "no such host"},
		{"192.0.2.1:18516", true, "192.0.2.1 is neither"},
		{"node02:18516", true, "192.0.2.2 is neither"},
		{"[2001:db8::1]:18516", true, "is neither"},
		{"127.0.0.1:18516", true, ""},
		{"127.0.3.4:18516", true, ""},
		{"[::1]:18516", true, ""},
		{"[::ffff:127.0.0.1]:18516", true, ""},
		{"169.254.10.1:18516", true, ""},
		{"[fe80::1%eth0]:18516", true, ""},
		{"localhost:18516", true, ""},
	} {
		err := CheckListen(tc.addr, ListenRules{NoToken: tc.noToken, Resolve: resolve})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s (no token %v): %v, want allowed", tc.addr, tc.noToken, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s (no token %v): %v, want %q", tc.addr, tc.noToken, err, tc.want)
		}
	}
}

// Serve itself refuses the wildcard address, and a server without a
// token refuses a listener other hosts can reach.
func TestServeRefusesOpenListener(t *testing.T) {
	serve := func(cfg ServerConfig, addr string) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("cannot listen on %s here: %v", addr, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return NewServer(cfg).Serve(ctx, ln)
	}
	if err := serve(ServerConfig{Token: "t"}, "0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "name an address") {
		t.Errorf("the wildcard address with a token: %v", err)
	}
	routable := routableAddr(t)
	if routable == "" {
		t.Log("this host has no routable address: the rule is proved on the wildcard only")
		routable = "0.0.0.0"
	}
	if err := serve(ServerConfig{}, net.JoinHostPort(routable, "0")); err == nil || !strings.Contains(err.Error(), "without a token") && !strings.Contains(err.Error(), "name an address") {
		t.Errorf("no token on %s: %v", routable, err)
	}
}

// routableAddr is an address of this host that is neither loopback nor
// link-local, or "".
func routableAddr(t *testing.T) string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			return ipn.IP.String()
		}
	}
	return ""
}
