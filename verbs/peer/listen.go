package peer

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
)

// ListenRules are what `peer serve` may listen on. The server lends RDMA
// memory and queue pairs to whoever passes its handshake, so it listens
// only on an address an operator named, and without a token only where
// no other host can reach it.
type ListenRules struct {
	// NoToken is a server that serves anyone (--insecure-no-token): it
	// may listen only on a loopback or link-local address.
	NoToken bool
	// Resolve looks a host name up (nil: the system resolver, bounded to
	// a few seconds).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
}

// CheckListen judges addr (HOST:PORT) against the rules before the
// server listens. A missing or wildcard host (":18516", "0.0.0.0:18516",
// "[::]:18516") would bind every interface, so it is refused; so is, for
// a server without a token, any address a routed host could reach. The
// error says what to pass instead.
func CheckListen(addr string, rules ListenRules) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: want ADDR:PORT (e.g. 192.0.2.1:%d): %v", addr, wire.DefaultPort, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("--listen %q: port %q is not 0-65535", addr, port)
	}
	if host == "" {
		return fmt.Errorf("--listen %q: name an address (e.g. --listen 192.0.2.1:%s): without one the server would listen on every interface", addr, port)
	}
	ips, err := listenAddrs(host, rules.Resolve)
	if err != nil {
		return fmt.Errorf("--listen %q: %v", addr, err)
	}
	for _, ip := range ips {
		if ip.IsUnspecified() {
			return fmt.Errorf("--listen %q: name an address (e.g. --listen 192.0.2.1:%s): %s is the wildcard, every interface", addr, port, ip)
		}
		if rules.NoToken && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
			return fmt.Errorf("--listen %q: --insecure-no-token serves anyone who connects, so it listens only on a loopback or link-local address, and %s is neither: "+
				"give both hosts the same token (%s or --token) instead", addr, ip, TokenEnv)
		}
	}
	return nil
}

// listenAddrs is host as addresses: the literal (with its IPv6 zone), or
// what the name resolves to.
func listenAddrs(host string, resolve func(context.Context, string) ([]netip.Addr, error)) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap()}, nil
	}
	if resolve == nil {
		resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := resolve(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolve %q: %w", host, err)
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("%q resolves to no address", host)
	}
	for i := range ips {
		ips[i] = ips[i].Unmap()
	}
	return ips, nil
}

// reachableOnlyHere says a bound listener address is loopback or
// link-local: no routed host can reach it.
func reachableOnlyHere(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip := ta.AddrPort().Addr().Unmap()
	return ip.IsLoopback() || ip.IsLinkLocalUnicast()
}

// TokenEnv is where the peer commands read the shared token when --token
// is not given: an environment variable does not show in ps.
const TokenEnv = "RDMADOCTOR_PEER_TOKEN"
