package peer

import (
	"context"
	"net"
	"syscall"
	"time"
)

// ControlMSS is the largest TCP segment the control connection sends or
// accepts. A hop with a smaller MTU than the hosts' drops full-size frames
// without a word (switches send no ICMP), and a TCP connection whose
// segments are sized to the hosts' 9000-byte MTU then stalls on its first
// large frame: the control conversation would time out before the RDMA
// checks could name the hop. Segments this small cross any path that
// carries IPv6's minimum MTU (1280 bytes with headers and options), and the
// control conversation moves a few kilobytes.
const ControlMSS = 1200

// clampMSS sets TCP_MAXSEG on a control socket before it connects or
// listens: the SYN then advertises it (the peer sends no larger segment)
// and this side's own segments are clamped to it.
func clampMSS(network, address string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = setMaxSeg(int(fd), ControlMSS) }); err != nil {
		return err
	}
	return serr
}

// Listen opens the control port of `peer serve` on addr, its accepted
// connections clamped to ControlMSS.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: clampMSS}
	return lc.Listen(ctx, "tcp", addr)
}

// dialer is the control connection's dialer, clamped to ControlMSS.
func dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, Control: clampMSS}
}
