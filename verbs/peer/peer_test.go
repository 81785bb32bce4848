package peer

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// The test binary is its own verbs child, as the command is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == probe.ChildArg {
		os.Exit(probe.ChildMain(os.Args[2:]))
	}
	code := m.Run()
	if fakeLib != "" {
		os.RemoveAll(filepath.Dir(fakeLib))
	}
	os.Exit(code)
}

var (
	fakeOnce sync.Once
	fakeLib  string
	fakeErr  string
)

// fakeLibrary builds the probe tests' fake libibverbs, whose peer modes
// carry RC traffic between two processes.
func fakeLibrary(t testing.TB) string {
	t.Helper()
	fakeOnce.Do(func() {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			fakeErr = "gcc not found: install gcc and libibverbs-dev"
			return
		}
		dir, err := os.MkdirTemp("", "fakeibverbs")
		if err != nil {
			fakeErr = err.Error()
			return
		}
		so := filepath.Join(dir, "libibverbs.so.1")
		out, err := exec.Command(gcc, "-shared", "-fPIC", "-pthread", "-o", so, "../probe/testdata/fakeibverbs.c").CombinedOutput()
		if err != nil {
			if bytes.Contains(out, []byte("infiniband/verbs.h")) {
				fakeErr = "<infiniband/verbs.h> not found: install libibverbs-dev"
				return
			}
			fakeErr = "gcc: " + err.Error() + "\n" + string(out)
			return
		}
		fakeLib = so
	})
	if fakeLib == "" {
		if strings.HasPrefix(fakeErr, "gcc:") || os.Getenv("CI") != "" {
			t.Fatal(fakeErr)
		}
		t.Skip(fakeErr)
	}
	return fakeLib
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

func TestPeerHealthyPair(t *testing.T) {
	lib := fakeLibrary(t)
	t.Setenv("FAKE_IBV", "peer")
	addr, log, _ := startServer(t, ServerConfig{Library: lib, GIDIndex: -1, Token: "s3cret"})
	cfg := testConfig(t, lib)
	cfg.Token = "s3cret"
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
}
