package verbs

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"

	"github.com/ebitengine/purego"
)

// DefaultLibrary is the soname a program linked with -libverbs loads.
const DefaultLibrary = "libibverbs.so.1"

// Lib is an opened libibverbs with every symbol the binding calls resolved.
type Lib struct {
	path    string
	handle  uintptr
	errnoFn uintptr // libc __errno_location
	scratch *arena

	getDeviceList     uintptr
	freeDeviceList    uintptr
	getDeviceGUID     uintptr
	openDevice        uintptr
	closeDevice       uintptr
	queryDevice       uintptr
	queryPortCompat   uintptr
	queryGID          uintptr
	allocPD           uintptr
	deallocPD         uintptr
	regMR             uintptr
	deregMR           uintptr
	createCompChannel uintptr
	destroyCompChan   uintptr
	createCQ          uintptr
	destroyCQ         uintptr
	getCQEvent        uintptr
	ackCQEvents       uintptr
	createQP          uintptr
	modifyQP          uintptr
	queryQP           uintptr
	destroyQP         uintptr
	createAH          uintptr
	destroyAH         uintptr
	getAsyncEvent     uintptr
	ackAsyncEvent     uintptr

	// Optional: rdma-core 32+ (IBVERBS_1.11).
	queryGIDTable uintptr
	queryGIDEx    uintptr
	// Optional: rdma-core 34+ (IBVERBS_1.12).
	regDMABufMR uintptr
}

type symbol struct {
	name     string
	addr     *uintptr
	optional bool
}

func (l *Lib) symbols() []symbol {
	return []symbol{
		{"ibv_get_device_list", &l.getDeviceList, false},
		{"ibv_free_device_list", &l.freeDeviceList, false},
		{"ibv_get_device_guid", &l.getDeviceGUID, false},
		{"ibv_open_device", &l.openDevice, false},
		{"ibv_close_device", &l.closeDevice, false},
		{"ibv_query_device", &l.queryDevice, false},
		{"ibv_query_port", &l.queryPortCompat, false},
		{"ibv_query_gid", &l.queryGID, false},
		{"ibv_alloc_pd", &l.allocPD, false},
		{"ibv_dealloc_pd", &l.deallocPD, false},
		{"ibv_reg_mr", &l.regMR, false},
		{"ibv_dereg_mr", &l.deregMR, false},
		{"ibv_create_comp_channel", &l.createCompChannel, false},
		{"ibv_destroy_comp_channel", &l.destroyCompChan, false},
		{"ibv_create_cq", &l.createCQ, false},
		{"ibv_destroy_cq", &l.destroyCQ, false},
		{"ibv_get_cq_event", &l.getCQEvent, false},
		{"ibv_ack_cq_events", &l.ackCQEvents, false},
		{"ibv_create_qp", &l.createQP, false},
		{"ibv_modify_qp", &l.modifyQP, false},
		{"ibv_query_qp", &l.queryQP, false},
		{"ibv_destroy_qp", &l.destroyQP, false},
		{"ibv_create_ah", &l.createAH, false},
		{"ibv_destroy_ah", &l.destroyAH, false},
		{"ibv_get_async_event", &l.getAsyncEvent, false},
		{"ibv_ack_async_event", &l.ackAsyncEvent, false},
		{"_ibv_query_gid_table", &l.queryGIDTable, true},
		{"_ibv_query_gid_ex", &l.queryGIDEx, true},
		{"ibv_reg_dmabuf_mr", &l.regDMABufMR, true},
	}
}

// RequiredSymbols lists the symbols Open insists on, in the order it
// checks them.
func RequiredSymbols() []string {
	var l Lib
	var names []string
	for _, s := range l.symbols() {
		if !s.optional {
			names = append(names, s.name)
		}
	}
	return names
}

// Open loads libibverbs from path (DefaultLibrary when empty) through the
// dynamic loader and resolves every symbol the binding needs. It returns a
// *LoadError when the loader cannot open the file or one of its
// dependencies, and a *MissingSymbolsError naming every required symbol the
// library lacks.
func Open(path string) (*Lib, error) {
	if path == "" {
		path = DefaultLibrary
	}
	if !supportedArch {
		return nil, fmt.Errorf("open %s: the verbs binding supports linux/amd64 and linux/arm64 only, not %s", path, runtime.GOARCH)
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
			if !s.optional {
				missing = append(missing, s.name)
			}
			continue
		}
		*s.addr = addr
	}
	if len(missing) > 0 {
		return nil, &MissingSymbolsError{Path: path, Symbols: missing}
	}
	l.scratch, err = newArena()
	if err != nil {
		return nil, err
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
	// The process is linked against some libc; ask the global scope.
	if addr, err := purego.Dlsym(purego.RTLD_DEFAULT, "__errno_location"); err == nil && addr != 0 {
		return addr, nil
	}
	return 0, fmt.Errorf("find libc __errno_location: %w", errors.Join(errs...))
}

// Path is the name the library was opened by.
func (l *Lib) Path() string { return l.path }

// HasGIDTable reports whether the library exports _ibv_query_gid_table
// (rdma-core 32 and newer), which tells GID types without sysfs.
func (l *Lib) HasGIDTable() bool { return l.queryGIDTable != 0 }

// HasRegDMABufMR reports whether the library exports ibv_reg_dmabuf_mr
// (rdma-core 34 and newer, symbol version IBVERBS_1.12).
func (l *Lib) HasRegDMABufMR() bool { return l.regDMABufMR != 0 }

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

// callPtr calls a function returning a pointer; NULL is an *Error.
func (l *Lib) callPtr(verb string, fn uintptr, args ...uintptr) (uintptr, error) {
	r, errno := l.call(fn, args...)
	if r == 0 {
		return 0, &Error{Verb: verb, Errno: errno}
	}
	return r, nil
}

// callInt calls a function returning a C int status. libibverbs verbs
// return 0 or a positive errno; some providers return -1 with errno set,
// others a negative errno. All three are turned into an *Error.
func (l *Lib) callInt(verb string, fn uintptr, args ...uintptr) error {
	r, errno := l.call(fn, args...)
	return intStatus(verb, int32(r), errno)
}

func intStatus(verb string, rc int32, errno syscall.Errno) error {
	switch {
	case rc == 0:
		return nil
	case rc > 0:
		return &Error{Verb: verb, Errno: syscall.Errno(rc)}
	case rc == -1:
		return &Error{Verb: verb, Errno: errno}
	default:
		return &Error{Verb: verb, Errno: syscall.Errno(-rc)}
	}
}

// callFast calls a data-path function (post, poll) that reports errors in
// its return value, without touching errno: the probes time these calls.
func callFast(fn uintptr, args ...uintptr) int32 {
	r, _, _ := purego.SyscallN(fn, args...)
	return int32(r)
}

// call3 is callFast for the three-argument data-path verbs (ibv_poll_cq,
// ibv_post_send, ibv_post_recv), made under the arena's lock with the
// arguments in the arena. purego's variadic parameter escapes, so a slice
// made per call was a heap allocation per poll: a busy-poll loop fed the
// garbage collector megabytes a second, and each collection woke threads
// that took the CPU from the loop on a one-CPU guest.
func (a *arena) call3(fn, x, y, z uintptr) int32 {
	a.args = [3]uintptr{x, y, z}
	r, _, _ := purego.SyscallN(fn, a.args[:]...)
	return int32(r)
}
