package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// tokenEnv is where `peer` reads the shared token when --token is not
// given: an environment variable does not show in ps.
const tokenEnv = peer.TokenEnv

const peerUsage = `usage:
  rdmadoctor peer serve --listen ADDR:PORT [flags]   lend this host's port to other hosts' tests
  rdmadoctor peer test HOST[:PORT] [HOST[:PORT]...] [flags]   test RDMA between this host and each peer

The two sides agree on QPN, PSN, GID/LID, MTU and remote keys over TCP (port
%d by default), then talk RDMA only: an RC connection, SEND/RECV both ways,
RDMA WRITE and READ, latency, bandwidth, both sides' counters, and a
connection through rdma_cm (checks %s; rdmadoctor explain %d).
Each session's verbs objects live in a child process of its own, freed when
the session ends. The token (--token or %s) must match on both sides;
serve refuses to start without one unless --insecure-no-token is given, and
then listens only on a loopback or link-local address.
`

// peerCodes is the range of the two-host checks' codes, "40-48", read
// from their catalog so that the help never falls behind it.
func peerCodes() string {
	cat := checks.PeerCatalog()
	return fmt.Sprintf("%d-%d", cat[0].Code, cat[len(cat)-1].Code)
}

func peerFirstCode() int { return checks.PeerCatalog()[0].Code }

func cmdPeer(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		// A usage error: the usage goes where errors go, as with any other.
		fmt.Fprintf(stderr, "rdmadoctor peer: name serve or test\n"+peerUsage, wire.DefaultPort, peerCodes(), peerFirstCode(), tokenEnv)
		return report.ExitUsage
	}
	if args[0] == "--help" || args[0] == "-h" {
		fmt.Fprintf(stdout, peerUsage, wire.DefaultPort, peerCodes(), peerFirstCode(), tokenEnv)
		return 0
	}
	switch args[0] {
	case "serve":
		return cmdPeerServe(args[1:], stdout, stderr)
	case "test":
		return cmdPeerTest(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "rdmadoctor peer: unknown command %q%s; valid: serve, test\n", args[0], didYouMean(args[0], []string{"serve", "test"}))
	return report.ExitUsage
}

// peerPortFlags are the flags that select the local port, on both sides.
type peerPortFlags struct {
	device     string
	port       int
	gidIndex   int
	token      string
	libibverbs string
}

func addPeerPortFlags(fs *pflag.FlagSet, f *peerPortFlags) {
	fs.StringVar(&f.device, "device", "", "RDMA device to use (default: the first with an ACTIVE port)")
	fs.IntVar(&f.port, "port", 1, "port of --device")
	fs.IntVar(&f.gidIndex, "gid-index", -1, "RoCE GID index (default: the port's RoCE v2 GID, an IPv4 one first)")
	fs.StringVar(&f.token, "token", "", "shared token (default: $"+tokenEnv+"); both sides must have the same")
	fs.StringVar(&f.libibverbs, "libibverbs", "", "open this libibverbs.so.1 instead of the loader's choice")
}

func (f *peerPortFlags) resolveToken() string {
	if f.token == "" {
		return os.Getenv(tokenEnv)
	}
	return f.token
}

// hostReport is what this side tells the other about itself.
func hostReport() wire.HostReport {
	hr := wire.HostReport{Version: version}
	hr.Hostname, _ = os.Hostname()
	hr.Kernel, _ = sysfs.OpenLive().KernelRelease()
	return hr
}

func cmdPeerServe(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("peer serve", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var pf peerPortFlags
	listen := fs.String("listen", "", "ADDR:PORT to listen on (required: the server listens only where told, never on every interface)")
	insecure := fs.Bool("insecure-no-token", false, "serve anyone who connects, without a token: only on a loopback or link-local --listen address")
	once := fs.Bool("once", false, "exit after the first session that passed the handshake")
	timeout := fs.Duration("timeout", peer.DefaultSessionTimeout, "deadline of one session, handshake to end")
	handshakeTimeout := fs.Duration("handshake-timeout", peer.DefaultHandshakeTimeout, "deadline of a connection's handshake, accept to welcome: an idle or slower connection is dropped")
	ioTimeout := fs.Duration("io-timeout", peer.DefaultIOTimeout, "deadline of each control message: a slower client is dropped")
	maxSessions := fs.Int("max-sessions", peer.DefaultMaxSessions, "sessions at once (2 QPs each at most); more are refused as busy")
	maxClientSessions := fs.Int("max-client-sessions", peer.DefaultMaxClientSessions, "sessions at once of one client (an IPv4 address, an IPv6 /64); more are refused as busy")
	maxMemory := fs.String("max-memory", "256MiB", "memory all sessions may register together (each gets its share: --max-memory / --max-sessions)")
	addPeerPortFlags(fs, &pf)
	help := fs.BoolP("help", "h", false, "print this help")
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "rdmadoctor peer serve: %s\n", msg)
		return report.ExitUsage
	}
	if err := fs.Parse(args); err != nil {
		return usage(flagError(err, fs))
	}
	if *help {
		fmt.Fprintf(stdout, peerUsage+"\nflags of serve:\n%s", wire.DefaultPort, peerCodes(), peerFirstCode(), tokenEnv, fs.FlagUsages())
		return 0
	}
	if fs.NArg() > 0 {
		return usage(fmt.Sprintf("unexpected argument %q: peer serve takes flags only (peer test HOST tests a peer)", fs.Arg(0)))
	}
	if *listen == "" {
		return usage(fmt.Sprintf("--listen ADDR:PORT is required (e.g. --listen 192.0.2.1:%d): the server never picks an address itself", wire.DefaultPort))
	}
	token := pf.resolveToken()
	if msg := serveTokenRule(token, *insecure); msg != "" {
		return usage(msg)
	}
	if err := peer.CheckListen(*listen, peer.ListenRules{NoToken: token == ""}); err != nil {
		return usage(err.Error())
	}
	mem, err := checks.ParseSize(*maxMemory)
	if err != nil || mem == 0 || mem > 1<<40 {
		return usage(fmt.Sprintf("--max-memory %q: want a size such as 256MiB", *maxMemory))
	}
	if msg := notPositive(fs, "timeout", "handshake-timeout", "io-timeout", "max-sessions", "max-client-sessions"); msg != "" {
		return usage(msg)
	}
	if st := peerLocalFault(pf.device); st != nil {
		cause, fix := checks.PeerLocalFaultText(st)
		fmt.Fprintf(stderr, "rdmadoctor peer serve: nothing to lend: %s. %s\n", cause, fix)
		return report.ExitInternal
	}
	exe, _ := os.Executable()
	if err := checkLendable(exe, pf.libibverbs, pf.device); err != nil {
		fmt.Fprintf(stderr, "rdmadoctor peer serve: %v\n", err)
		return report.ExitInternal
	}
	ln, err := peer.Listen(context.Background(), *listen)
	if err != nil {
		fmt.Fprintf(stderr, "rdmadoctor peer serve: %v\n", err)
		return report.ExitInternal
	}
	logger := log.New(stderr, "rdmadoctor peer serve: ", log.LstdFlags|log.LUTC)
	srv := peer.NewServer(peer.ServerConfig{
		Exe: exe, Token: token, Once: *once, SessionTimeout: *timeout, HandshakeTimeout: *handshakeTimeout, IOTimeout: *ioTimeout,
		MaxSessions: *maxSessions, MaxClientSessions: *maxClientSessions, MaxMemory: int64(mem), Library: pf.libibverbs,
		Device: pf.device, Port: pf.port, GIDIndex: pf.gidIndex, Host: hostReport(), Logf: logger.Printf,
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.Serve(ctx, ln); err != nil {
		logger.Print(err)
		return report.ExitInternal
	}
	return 0
}

// serveTokenRule is why `peer serve` will not start with this token
// choice ("" when it will): a server without a token lends memory and
// QPs to anyone who connects, so that takes --insecure-no-token (and
// CheckListen then holds it to loopback and link-local addresses); a
// token and the flag together are a contradiction, refused rather than
// guessed at.
func serveTokenRule(token string, insecure bool) string {
	switch {
	case token == "" && !insecure:
		return fmt.Sprintf("no token: give both hosts the same one in $%s (or --token); "+
			"--insecure-no-token serves anyone, and only on a loopback or link-local --listen address", tokenEnv)
	case token != "" && insecure:
		return fmt.Sprintf("--insecure-no-token with a token (--token or $%s): drop one", tokenEnv)
	}
	return ""
}

// peerTestRun is a parsed `peer test` command line.
type peerTestRun struct {
	cfg              peer.TestConfig
	peers            []string
	format, failOn   string
	noColor, verbose bool
}

// parsePeerTest parses and validates `peer test`'s flags; help is set for
// --help (the usage is then written to stdout). Every error is a usage
// error.
func parsePeerTest(args []string, stdout io.Writer) (run *peerTestRun, help bool, err error) {
	fs := pflag.NewFlagSet("peer test", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var pf peerPortFlags
	addPeerPortFlags(fs, &pf)
	r := &peerTestRun{}
	timeout := fs.Duration("timeout", peer.DefaultTestTimeout, "deadline of one pair's whole session")
	ioTimeout := fs.Duration("io-timeout", peer.DefaultIOTimeout, "deadline of the TCP connect and of each control message")
	concurrency := fs.Int("concurrency", peer.DefaultConcurrency, "pairs tested at once")
	size := fs.Int("size", peer.DefaultMsgSize, "bytes per SEND, WRITE and READ")
	iterations := fs.Int("iterations", 1000, "peer.latency: round trips (at most 2 s of them)")
	bwTime := fs.Duration("bandwidth-time", 500*time.Millisecond, "peer.bandwidth: how long each message size runs")
	fs.StringVar(&r.format, "format", "text", "report format: text or json")
	fs.StringVar(&r.failOn, "fail-on", "fail", "what makes the exit code non-zero: fail, or warn")
	fs.BoolVar(&r.noColor, "no-color", false, "never colour the text report")
	fs.BoolVarP(&r.verbose, "verbose", "v", false, "print the details of passing checks too")
	helpFlag := fs.BoolP("help", "h", false, "print this help")
	if err := fs.Parse(args); err != nil {
		return nil, false, usageError{flagError(err, fs)}
	}
	if *helpFlag {
		fmt.Fprintf(stdout, peerUsage+"\nflags of test:\n%s", wire.DefaultPort, peerCodes(), peerFirstCode(), tokenEnv, fs.FlagUsages())
		return nil, true, nil
	}
	r.peers = fs.Args()
	switch {
	case len(r.peers) == 0:
		return nil, false, usageError{"name at least one peer: HOST or HOST:PORT"}
	case r.format != "text" && r.format != "json":
		return nil, false, usageError{fmt.Sprintf("--format %q: unknown format; valid formats: text, json", r.format)}
	case r.failOn != "fail" && r.failOn != "warn":
		return nil, false, usageError{fmt.Sprintf("--fail-on %q: unknown policy; valid: fail, warn", r.failOn)}
	case notPositive(fs, "timeout", "io-timeout", "concurrency", "bandwidth-time") != "":
		return nil, false, usageError{notPositive(fs, "timeout", "io-timeout", "concurrency", "bandwidth-time")}
	case *size <= 0 || *size > wire.MaxBuffer/8:
		return nil, false, usageError{fmt.Sprintf("--size %d: want 1 to %d bytes", *size, wire.MaxBuffer/8)}
	case *iterations <= 0 || *iterations > wire.MaxEcho:
		return nil, false, usageError{fmt.Sprintf("--iterations %d: want 1 to %d round trips", *iterations, wire.MaxEcho)}
	case pf.device == "" && fs.Changed("port"):
		return nil, false, usageError{"--port needs --device"}
	}
	for _, p := range r.peers {
		if _, err := peer.Target(p); err != nil {
			return nil, false, usageError{err.Error()}
		}
	}
	exe, _ := os.Executable()
	r.cfg = peer.TestConfig{
		Exe: exe, Token: pf.resolveToken(), Library: pf.libibverbs, Device: pf.device, Port: pf.port, GIDIndex: pf.gidIndex,
		Timeout: *timeout, IOTimeout: *ioTimeout, Concurrency: *concurrency, Host: hostReport(),
		Iterations: *iterations, BandwidthTime: *bwTime,
		Params: wire.Params{MsgSize: *size, BufferSize: min(max(peer.DefaultBufferSize, 8**size), wire.MaxBuffer)},
	}
	if pf.device == "" {
		r.cfg.Port = 0
	}
	return r, false, nil
}

func cmdPeerTest(args []string, stdout, stderr io.Writer) int {
	run, help, err := parsePeerTest(args, stdout)
	switch {
	case help:
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "rdmadoctor peer test: %v\n", err)
		return report.ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	run.cfg.LocalFault = peerLocalFault(run.cfg.Device)
	pairs := peer.Test(ctx, run.cfg, run.peers)
	rep := &report.Report{Schema: report.Schema, Version: version, Level: 2, Started: started.UTC()}
	rep.Host.Hostname, rep.Host.Kernel, rep.Host.Root = run.cfg.Host.Hostname, run.cfg.Host.Kernel, "/"
	rep.Checks = checks.PeerReport(pairs)
	rep.DurationMS = float64(time.Since(started).Microseconds()) / 1000
	rep.Finish(run.failOn == "warn")
	if run.format == "json" {
		err = report.WriteJSON(stdout, rep)
	} else {
		err = writeText(stdout, func(w io.Writer) error {
			return report.WriteText(w, rep, report.TextOptions{Color: useColor(stdout, run.noColor), Verbose: run.verbose, Width: textWidth(stdout)})
		})
	}
	if err != nil {
		fmt.Fprintf(stderr, "rdmadoctor peer test: write report: %v\n", err)
		return report.ExitInternal
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "rdmadoctor peer test: interrupted; the report above is partial")
		return report.ExitInternal
	}
	return rep.ExitCode
}

// peerLocalFault judges from sysfs, before any verbs child starts, whether
// this host can take part in a peer session (checks.PeerLocalFault); nil
// when it can, or when sysfs cannot tell. It reads the sysfs libibverbs
// will: $SYSFS_PATH when set (rdma-core follows it unless the process is
// setuid), else /sys.
func peerLocalFault(device string) *probe.Step {
	h, sysDir := sysfs.OpenLive(), "/sys"
	if p := os.Getenv("SYSFS_PATH"); p != "" && os.Getuid() == os.Geteuid() {
		oh, err := sysfs.Open(p)
		if err != nil {
			return nil // the library fails there too: the child says how
		}
		defer oh.Close()
		h, sysDir = oh, "/"
	}
	return checks.PeerLocalFault(h, sysDir, device)
}

// checkLendable enumerates the devices (in a verbs child, as level 1
// does) before the server listens: a server with nothing to lend, or told
// to lend a device the library does not list, says so at once instead of
// failing every session.
func checkLendable(exe, lib, device string) error {
	en, err := probe.Enumerate(context.Background(), exe, lib, 10*time.Second)
	switch {
	case err != nil:
		return fmt.Errorf("list the RDMA devices: %w", err)
	case en.LoadError != "":
		cause, fix := checks.PeerLocalFaultText(&probe.Step{Name: probe.StepLocalLoad, Error: en.LoadError})
		return fmt.Errorf("nothing to lend: %s. %s", cause, fix)
	case en.ListError != "":
		cause, fix := checks.PeerLocalFaultText(&probe.Step{Name: probe.StepLocalList, Error: en.ListError,
			Errno: en.ListErrno, ErrnoName: en.ListErrnoName})
		return fmt.Errorf("nothing to lend: %s. %s", cause, fix)
	case len(en.Devices) == 0:
		return errors.New("libibverbs lists no RDMA device: there is nothing to lend (run `rdmadoctor` to see why)")
	}
	var names []string
	for _, d := range en.Devices {
		if d.Name == device {
			return nil
		}
		names = append(names, d.Name)
	}
	if device == "" {
		return nil
	}
	return fmt.Errorf("--device %s: libibverbs lists no such device (it lists: %s)", device, strings.Join(names, ", "))
}
