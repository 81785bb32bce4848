package verbs

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Buffer is page-aligned memory outside the Go heap (an anonymous private
// mapping), suitable for registration as a memory region: the garbage
// collector never moves it, and it stays valid until Free.
type Buffer struct {
	mem []byte
}

// NewBuffer maps size bytes, rounded up to whole pages.
func NewBuffer(size int) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("buffer size %d: must be positive", size)
	}
	page := unix.Getpagesize()
	n := (size + page - 1) / page * page
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", n, err)
	}
	return &Buffer{mem: mem}, nil
}

// Bytes is the whole mapping. Nil after Free.
func (b *Buffer) Bytes() []byte { return b.mem }

// Addr is the address of the first byte.
func (b *Buffer) Addr() uintptr {
	if len(b.mem) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&b.mem[0]))
}

// Len is the mapped length in bytes.
func (b *Buffer) Len() int { return len(b.mem) }

// Free unmaps the buffer. Deregister every memory region on it first.
func (b *Buffer) Free() error {
	if b == nil || b.mem == nil {
		return nil
	}
	err := unix.Munmap(b.mem)
	b.mem = nil
	return err
}

// arena is scratch memory outside the Go heap for the structs a call hands
// to the library (attributes, work requests, SGEs, completion arrays). It
// is reset at the start of every call, under its mutex.
type arena struct {
	mu   sync.Mutex
	buf  *Buffer
	used uintptr
	// args holds a data-path call's arguments (call3).
	args [3]uintptr
}

const arenaSize = 64 << 10

func newArena() (*arena, error) {
	b, err := NewBuffer(arenaSize)
	if err != nil {
		return nil, err
	}
	return &arena{buf: b}, nil
}

// take locks the arena and empties it; release with a.mu.Unlock.
func (a *arena) take() *arena {
	a.mu.Lock()
	a.used = 0
	return a
}

// alloc returns zeroed, aligned scratch memory of n bytes, or 0 when the
// arena is full.
func (a *arena) alloc(n, align uintptr) uintptr {
	base := a.buf.Addr()
	off := (a.used + align - 1) &^ (align - 1)
	if off+n > uintptr(a.buf.Len()) {
		return 0
	}
	a.used = off + n
	clear(a.buf.mem[off : off+n])
	return base + off
}

// room is how many more bytes alloc can hand out (ignoring alignment).
func (a *arena) room() uintptr { return uintptr(a.buf.Len()) - a.used }

// allocT returns a zeroed *T in the arena; it panics only on a programming
// error (a call that needs more than arenaSize bytes of scratch).
func allocT[T any](a *arena) *T {
	var zero T
	p := a.alloc(unsafe.Sizeof(zero), unsafe.Alignof(zero))
	if p == 0 {
		panic("verbs: scratch arena exhausted")
	}
	return (*T)(ptr(p))
}

// cArrayString reads a NUL-terminated string from a fixed C char array.
func cArrayString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// ptr turns an address into a pointer without the uintptr-to-pointer
// conversion vet warns about. Every address it is given points outside the
// Go heap (library-owned objects or mmap'd memory), so the garbage
// collector has nothing to track there.
func ptr(u uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&u)) }
