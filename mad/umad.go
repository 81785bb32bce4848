package mad

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
)

// Dest addresses a MAD: the destination LID, QP and Q_Key. SMPs go to QP 0
// (Q_Key unused), the general services (SA, PMA) to QP 1 with the
// well-known GSI Q_Key (IBTA vol 1 13.5.1).
type Dest struct {
	LID  uint16
	QP   uint32
	QKey uint32
	SL   uint8
}

// QKey is the well-known Q_Key of QP1 (UMAD_QKEY).
const QKey = 0x80010000

// Transport sends one MAD and returns the answer: libibumad on a host or
// under ibsim (UMAD), canned answers in tests.
type Transport interface {
	// Ports lists the ports MADs may be sent from.
	Ports() ([]Port, error)
	// Exchange sends req from port p to dest and waits at most timeout
	// for the answer with the same transaction ID, which it returns as it
	// came (CheckResponse judges it). No answer in time is an error that
	// wraps ErrTimeout.
	Exchange(p Port, dest Dest, req []byte, timeout time.Duration) ([]byte, error)
	Close() error
}

// UMAD is the Transport over libibumad: one umad port opened per local
// port on first use, one agent registered per management class.
type UMAD struct {
	lib   *Lib
	mu    sync.Mutex
	ports map[string]*umadPort
}

type umadPort struct {
	id     int           // umad_open_port's port id
	offset int           // where the MAD starts in a umad buffer (umad_get_mad)
	agents map[uint8]int // management class → umad_register's agent id
	send   *cmem
	recv   *cmem
}

// recvBufSize holds an RMPP-reassembled SA answer of a few hundred records.
const recvBufSize = 256 << 10

// NewUMAD is a Transport over an opened, initialised libibumad.
func NewUMAD(lib *Lib) *UMAD { return &UMAD{lib: lib, ports: map[string]*umadPort{}} }

// Ports lists the ports libibumad finds.
func (u *UMAD) Ports() ([]Port, error) { return u.lib.Ports() }

// Close closes every umad port opened (which unregisters their agents).
func (u *UMAD) Close() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	var errs []error
	for name, p := range u.ports {
		if _, err := u.lib.callInt("umad_close_port("+name+")", u.lib.closePort, uintptr(p.id)); err != nil {
			errs = append(errs, err)
		}
		p.send.free()
		p.recv.free()
		delete(u.ports, name)
	}
	return errors.Join(errs...)
}

// open returns the umad port of p, opening it on first use.
func (u *UMAD) open(p Port) (*umadPort, error) {
	if up, ok := u.ports[p.Name()]; ok {
		return up, nil
	}
	send, err := newCmem(4096)
	if err != nil {
		return nil, err
	}
	recv, err := newCmem(recvBufSize)
	if err != nil {
		send.free()
		return nil, err
	}
	copy(send.b, p.CA) // NUL-terminated by the zeroed mapping
	id, err := u.lib.callInt(fmt.Sprintf("umad_open_port(%s, %d)", p.CA, p.Num), u.lib.openPort, send.addr(), uintptr(p.Num))
	if err != nil {
		send.free()
		recv.free()
		return nil, err
	}
	// umad_get_mad, asked only now, says where the MAD starts: the umad
	// ABI (and with it the offset, 56 or 64 bytes) is settled when
	// umad_open_port enables the P_Key index, not by umad_init.
	at, _ := u.lib.call(u.lib.getMAD, send.addr())
	if at < send.addr() || at-send.addr() > 1024 {
		send.free()
		recv.free()
		return nil, fmt.Errorf("umad_get_mad returned an address outside the buffer")
	}
	up := &umadPort{id: id, offset: int(at - send.addr()), agents: map[uint8]int{}, send: send, recv: recv}
	u.ports[p.Name()] = up
	return up, nil
}

// agent returns the agent of class on up, registering it on first use.
// SA answers of several records come by RMPP: its agent asks for RMPP
// version 1 so the kernel reassembles them.
func (u *UMAD) agent(up *umadPort, class, version uint8) (int, error) {
	if a, ok := up.agents[class]; ok {
		return a, nil
	}
	var rmpp uintptr
	if class == ClassSA {
		rmpp = 1
	}
	call := fmt.Sprintf("umad_register(class 0x%02x, version %d)", class, version)
	a, err := u.lib.callInt(call, u.lib.register, uintptr(up.id), uintptr(class), uintptr(version), rmpp, 0)
	if err != nil {
		return 0, err
	}
	up.agents[class] = a
	return a, nil
}

// Exchange sends req and waits for its answer (see Transport).
func (u *UMAD) Exchange(p Port, dest Dest, req []byte, timeout time.Duration) ([]byte, error) {
	h, err := DecodeHeader(req)
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	up, err := u.open(p)
	if err != nil {
		return nil, err
	}
	agent, err := u.agent(up, h.Class, h.ClassVersion)
	if err != nil {
		return nil, err
	}
	if err := u.send(up, agent, dest, req, timeout); err != nil {
		return nil, err
	}
	return u.await(up, h.TID, timeout)
}

// send writes the address and the MAD into the send buffer and posts it.
// The kernel's own timeout is the same as ours, with no retries of its
// own: the caller retries.
func (u *UMAD) send(up *umadPort, agent int, dest Dest, req []byte, timeout time.Duration) error {
	l := u.lib
	hdr := up.offset
	if hdr+len(req) > len(up.send.b) {
		return fmt.Errorf("MAD of %d bytes does not fit the send buffer", len(req))
	}
	clear(up.send.b[:hdr])
	if _, err := l.callInt("umad_set_addr", l.setAddr, up.send.addr(), uintptr(dest.LID), uintptr(dest.QP),
		uintptr(dest.SL), uintptr(dest.QKey)); err != nil {
		return err
	}
	copy(up.send.b[hdr:], req)
	ms := max(1, timeout.Milliseconds())
	_, err := l.callInt(fmt.Sprintf("umad_send(LID %d, QP %d)", dest.LID, dest.QP), l.send,
		uintptr(up.id), uintptr(agent), up.send.addr(), uintptr(len(req)), uintptr(ms), 0)
	return err
}

// await reads answers until the one of transaction tid (its low 32 bits:
// the kernel sets the high ones to route the answer to the agent) or the
// timeout. Answers to earlier, abandoned tries are dropped.
func (u *UMAD) await(up *umadPort, tid uint64, timeout time.Duration) ([]byte, error) {
	l := u.lib
	hdr := up.offset
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("umad_recv: %w within %s", ErrTimeout, timeout)
		}
		// The length in and out lives in the last 4 bytes of the buffer.
		lenOff := len(up.recv.b) - 4
		binary.NativeEndian.PutUint32(up.recv.b[lenOff:], uint32(lenOff-hdr))
		_, err := l.callInt("umad_recv", l.recv, uintptr(up.id), up.recv.addr(), up.recv.addr()+uintptr(lenOff),
			uintptr(max(1, left.Milliseconds())))
		if errors.Is(err, syscall.ETIMEDOUT) || errors.Is(err, syscall.EAGAIN) {
			return nil, fmt.Errorf("umad_recv: %w within %s", ErrTimeout, timeout)
		}
		if err != nil {
			return nil, err
		}
		n := int(binary.NativeEndian.Uint32(up.recv.b[lenOff:]))
		st, _ := l.call(l.status, up.recv.addr())
		if n < 0 || hdr+n > lenOff {
			return nil, fmt.Errorf("umad_recv: length %d out of range", n)
		}
		mad := append([]byte(nil), up.recv.b[hdr:hdr+n]...)
		if len(mad) >= HeaderSize && uint32(binary.BigEndian.Uint64(mad[8:])) != uint32(tid) {
			continue
		}
		if s := syscall.Errno(int32(st)); s != 0 {
			if s == syscall.ETIMEDOUT {
				return nil, fmt.Errorf("the kernel: %w within %s", ErrTimeout, timeout)
			}
			return nil, &Error{Call: "umad_recv (status of the send)", Errno: s}
		}
		return mad, nil
	}
}
