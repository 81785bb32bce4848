package peer

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// client is who a connection counts against: its IPv4 address, or its
// IPv6 /64 (a host may take any address of its /64, so an address alone
// would let one host be many clients).
type client netip.Prefix

func clientOf(a net.Addr) client {
	var ip netip.Addr
	if ta, ok := a.(*net.TCPAddr); ok {
		ip = ta.AddrPort().Addr().Unmap().WithZone("")
	}
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return client(p)
}

func (c client) String() string {
	p := netip.Prefix(c)
	if p.Addr().Is4() {
		return p.Addr().String()
	}
	return p.String()
}

// pending is a connection in its handshake.
type pending struct {
	conn    *net.TCPConn
	client  client
	since   time.Time
	evicted bool // made to give its place up to a newer connection (under admission.mu)
}

// admission holds the server's places: connections in their handshake,
// and sessions past it, in all and per client.
//
// A handshake takes a place from accept to Welcome. When the places are
// taken, the oldest handshake makes room (of the same client when that
// client holds its share, else of any): a client that opens connections
// and says nothing then delays nobody but itself, and a valid client,
// whose handshake takes one round trip, is served at once. Refusing the
// newcomer instead let sixteen idle connections lock every client out.
type admission struct {
	maxShakes, maxClientShakes     int
	maxSessions, maxClientSessions int

	mu       sync.Mutex
	shaking  []*pending // oldest first
	shakes   map[client]int
	active   int
	sessions map[client]int
}

func newAdmission(cfg *ServerConfig) *admission {
	return &admission{
		maxShakes: cfg.MaxHandshakes, maxClientShakes: cfg.MaxClientHandshakes,
		maxSessions: cfg.MaxSessions, maxClientSessions: cfg.MaxClientSessions,
		shakes: map[client]int{}, sessions: map[client]int{},
	}
}

// enter gives a new connection a handshake place, evicting the oldest
// handshake that must make room; it returns the new place and the one
// evicted (nil when there was room).
func (a *admission) enter(c *net.TCPConn, cl client) (p, evicted *pending) {
	p = &pending{conn: c, client: cl, since: time.Now()}
	a.mu.Lock()
	switch {
	case a.shakes[cl] >= a.maxClientShakes:
		evicted = a.evictLocked(func(q *pending) bool { return q.client == cl })
	case len(a.shaking) >= a.maxShakes:
		evicted = a.evictLocked(func(*pending) bool { return true })
	}
	a.shaking = append(a.shaking, p)
	a.shakes[cl]++
	a.mu.Unlock()
	evicted.stop()
	return p, evicted
}

// stop ends an evicted handshake's reading: its goroutine's read returns
// at once (now, or at its next read, whatever deadline it sets), finds
// evicted set, tells the client why and closes the connection. Closing
// it here instead would leave the client with a bare EOF.
func (q *pending) stop() {
	if q != nil {
		_ = q.conn.CloseRead()
	}
}

// evictOldest evicts the oldest handshake, whose goroutine then closes
// it and frees its descriptor (the accept loop's answer to EMFILE);
// false when none is running.
func (a *admission) evictOldest() bool {
	a.mu.Lock()
	q := a.evictLocked(func(*pending) bool { return true })
	a.mu.Unlock()
	q.stop()
	return q != nil
}

// evictLocked takes the oldest handshake that match accepts out of the
// places and marks it evicted; the caller stops it.
func (a *admission) evictLocked(match func(*pending) bool) *pending {
	for i, q := range a.shaking {
		if match(q) {
			a.removeLocked(i)
			q.evicted = true
			return q
		}
	}
	return nil
}

func (a *admission) removeLocked(i int) {
	q := a.shaking[i]
	a.shaking = append(a.shaking[:i], a.shaking[i+1:]...)
	if a.shakes[q.client]--; a.shakes[q.client] <= 0 {
		delete(a.shakes, q.client)
	}
}

// errEvicted is a handshake closed to make room.
var errEvicted = errors.New("evicted")

// leave gives a handshake's place back (a no-op once it was evicted or
// promoted) and says whether it had been evicted.
func (a *admission) leave(p *pending) (evicted bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, q := range a.shaking {
		if q == p {
			a.removeLocked(i)
			break
		}
	}
	return p.evicted
}

// promote turns a handshake that passed into a session, when the session
// caps allow: in all (--max-sessions) and for its client
// (--max-client-sessions). It gives the handshake's place back either
// way; an evicted handshake is never promoted.
func (a *admission) promote(p *pending) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p.evicted {
		return errEvicted
	}
	for i, q := range a.shaking {
		if q == p {
			a.removeLocked(i)
			break
		}
	}
	switch {
	case a.active >= a.maxSessions:
		return fmt.Errorf("%d sessions are running, the most this server allows (--max-sessions)", a.maxSessions)
	case a.sessions[p.client] >= a.maxClientSessions:
		return fmt.Errorf("%d sessions of %s are running, the most this server allows one client (--max-client-sessions)", a.maxClientSessions, p.client)
	}
	a.active++
	a.sessions[p.client]++
	return nil
}

// end gives a session's place back.
func (a *admission) end(cl client) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.active--
	if a.sessions[cl]--; a.sessions[cl] <= 0 {
		delete(a.sessions, cl)
	}
}
