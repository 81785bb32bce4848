package mad

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/unix"
)

// DefaultLibrary is the soname a program linked with -libumad loads
// (Debian's libibumad3, rdma-core's libibumad.so.3).
const DefaultLibrary = "libibumad.so.3"

// Lib is an opened libibumad with every symbol the binding calls resolved.
type Lib struct {
	path    string
	handle  uintptr
	errnoFn uintptr // libc __errno_location

	init        uintptr
	getCAsNames uintptr
	getCA       uintptr
	releaseCA   uintptr
	openPort    uintptr
	closePort   uintptr
	register    uintptr
	unregister  uintptr
	send        uintptr
	recv        uintptr
	getMAD      uintptr
	size        uintptr
	setAddr     uintptr
	status      uintptr
	umadSize    uintptr // umad_size(), read by Init
}

type symbol struct {
	name string
	addr *uintptr
}

func (l *Lib) symbols() []symbol {
	return []symbol{
		{"umad_init", &l.init},
		{"umad_get_cas_names", &l.getCAsNames},
		{"umad_get_ca", &l.getCA},
		{"umad_release_ca", &l.releaseCA},
		{"umad_open_port", &l.openPort},
		{"umad_close_port", &l.closePort},
		{"umad_register", &l.register},
		{"umad_unregister", &l.unregister},
		{"umad_send", &l.send},
		{"umad_recv", &l.recv},
		{"umad_get_mad", &l.getMAD},
		{"umad_size", &l.size},
		{"umad_set_addr", &l.setAddr},
		{"umad_status", &l.status},
	}
}

// RequiredSymbols lists the symbols Open insists on, in the order it
// resolves them.
func RequiredSymbols() []string {
	var l Lib
	var names []string
	for _, s := range l.symbols() {
		names = append(names, s.name)
	}
	return names
}

// Open loads libibumad from path (DefaultLibrary when empty) and resolves
// every symbol the binding needs. A *LoadError says the loader could not
// open it (no libibumad on the host: the caller treats that as "no
// InfiniBand management here"); a *MissingSymbolsError names what an
// unexpected library lacks. Open does not call umad_init: Init does.
func Open(path string) (*Lib, error) {
	if path == "" {
		path = DefaultLibrary
	}
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		return nil, fmt.Errorf("open %s: the umad binding supports linux/amd64 and linux/arm64 only, not %s/%s", path, runtime.GOOS, runtime.GOARCH)
	}
	// dlerror's message is per thread: keep dlopen and dlerror on one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	errnoFn, err := lookupErrnoLocation()
	if err != nil {
		return nil, err
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, &LoadError{Path: path, Loader: err.Error()}
	}
	l := &Lib{path: path, handle: h, errnoFn: errnoFn}
	var missing []string
	for _, s := range l.symbols() {
		addr, err := purego.Dlsym(h, s.name)
		if err != nil || addr == 0 {
			missing = append(missing, s.name)
			continue
		}
		*s.addr = addr
	}
	if len(missing) > 0 {
		return nil, &MissingSymbolsError{Path: path, Symbols: missing}
	}
	return l, nil
}

// lookupErrnoLocation finds libc's __errno_location, which returns the
// calling thread's errno address.
func lookupErrnoLocation() (uintptr, error) {
	var errs []error
	for _, name := range []string{"libc.so.6", "libc.so"} {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if addr, err := purego.Dlsym(h, "__errno_location"); err == nil && addr != 0 {
			return addr, nil
		}
	}
	return 0, fmt.Errorf("find libc __errno_location: %w", errors.Join(errs...))
}

// Path is the name the library was opened by.
func (l *Lib) Path() string { return l.path }

// call runs a C function on a locked OS thread with errno cleared before
// and read right after, so the errno belongs to this call.
func (l *Lib) call(fn uintptr, args ...uintptr) (uintptr, syscall.Errno) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ep, _, _ := purego.SyscallN(l.errnoFn)
	errnoPtr := (*int32)(ptr(ep))
	*errnoPtr = 0
	r, _, _ := purego.SyscallN(fn, args...)
	return r, syscall.Errno(*errnoPtr)
}

// callInt calls a function returning a C int. libibumad returns a
// negative errno on failure (umad_open_port, umad_recv, umad_get_ca) or -1
// with errno set (umad_init); both become an *Error. A non-negative value
// is the call's result (a port id, an agent id).
func (l *Lib) callInt(fn string, addr uintptr, args ...uintptr) (int, error) {
	r, errno := l.call(addr, args...)
	rc := int32(r)
	switch {
	case rc >= 0:
		return int(rc), nil
	case rc == -1 && errno != 0:
		return -1, &Error{Call: fn, Errno: errno}
	default:
		return int(rc), &Error{Call: fn, Errno: syscall.Errno(-rc)}
	}
}

// Init is umad_init: it must succeed once before any other call. A failure
// means libibumad is present but cannot work (its ABI or the kernel's
// umad interface is unusable).
func (l *Lib) Init() error {
	if _, err := l.callInt("umad_init", l.init); err != nil {
		return err
	}
	// The size of struct ib_user_mad depends on the kernel's umad ABI,
	// which umad_init reads: ask only after it.
	sz, _ := l.call(l.size)
	if sz == 0 || sz > 1024 {
		return fmt.Errorf("%s: umad_size() returned %d, not the size of a struct ib_user_mad", l.path, sz)
	}
	l.umadSize = sz
	return nil
}

// cmem is C-side scratch memory (an anonymous mapping), which the garbage
// collector never moves or frees, so its address can be handed to C.
type cmem struct{ b []byte }

func newCmem(n int) (*cmem, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes of scratch memory: %w", n, err)
	}
	return &cmem{b: b}, nil
}

func (m *cmem) addr() uintptr { return uintptr(unsafe.Pointer(&m.b[0])) }
func (m *cmem) free()         { _ = unix.Munmap(m.b) }

// ptr turns an address into a pointer without the uintptr-to-pointer
// conversion vet warns about. Every address it is given points outside the
// Go heap (libibumad's objects or mmap'd memory).
func ptr(u uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&u)) }

// cString reads a NUL-terminated string from a fixed C char array.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
