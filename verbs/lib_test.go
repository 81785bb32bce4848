package verbs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ebitengine/purego"
)

func TestOpenMissingLibraryCarriesLoaderMessage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "libibverbs.so.1")
	_, err := Open(path)
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("Open(%s) = %v, want *LoadError", path, err)
	}
	if le.Path != path || !strings.Contains(le.Loader, "No such file or directory") {
		t.Fatalf("loader message %q does not say the file is missing", le.Loader)
	}
	if !strings.HasPrefix(err.Error(), "dlopen "+path+": ") {
		t.Fatalf("error text %q", err)
	}
}

func TestOpenNotALibrary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "libibverbs.so.1")
	if err := os.WriteFile(path, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	var le *LoadError
	if !errors.As(err, &le) || le.Loader == "" {
		t.Fatalf("Open(garbage) = %v, want *LoadError with the loader's message", err)
	}
}

// A library that loads but lacks the verbs (here: libc itself) must be
// reported with every missing symbol, not a panic on the first.
func TestOpenReportsEveryMissingSymbol(t *testing.T) {
	_, err := Open("libc.so.6")
	var me *MissingSymbolsError
	if !errors.As(err, &me) {
		t.Fatalf("Open(libc.so.6) = %v, want *MissingSymbolsError", err)
	}
	want := RequiredSymbols()
	if len(me.Symbols) != len(want) {
		t.Fatalf("missing %d symbols, want all %d: %v", len(me.Symbols), len(want), me.Symbols)
	}
	for i := range want {
		if me.Symbols[i] != want[i] {
			t.Fatalf("missing[%d] = %s, want %s", i, me.Symbols[i], want[i])
		}
	}
	for _, s := range []string{"ibv_get_device_list", "ibv_create_qp", "ibv_ack_async_event"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error text does not name %s: %s", s, err)
		}
	}
}

func TestErrorText(t *testing.T) {
	err := error(&Error{Verb: "ibv_reg_mr", Errno: syscall.ENOMEM})
	if got, want := err.Error(), "ibv_reg_mr: ENOMEM (cannot allocate memory)"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if !errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EBUSY) {
		t.Fatal("errors.Is does not see the errno")
	}
	if ErrnoOf(err) != syscall.ENOMEM {
		t.Fatal("ErrnoOf")
	}
	if got := (&Error{Verb: "ibv_open_device"}).Error(); got != "ibv_open_device: failed without setting errno" {
		t.Fatalf("errno 0: %q", got)
	}
	pe := error(&PostError{Verb: "ibv_post_send", Errno: syscall.EINVAL, BadWR: 2})
	if !errors.Is(pe, syscall.EINVAL) || !strings.Contains(pe.Error(), "EINVAL") || !strings.Contains(pe.Error(), "work request 2") {
		t.Fatalf("post error %q", pe)
	}
}

func TestErrnoName(t *testing.T) {
	for e, want := range map[syscall.Errno]string{
		syscall.EBUSY: "EBUSY", syscall.ENOSYS: "ENOSYS", syscall.EACCES: "EACCES",
		syscall.EINVAL: "EINVAL", 0: "", 4095: "errno 4095",
	} {
		if got := ErrnoName(e); got != want {
			t.Errorf("ErrnoName(%d) = %q, want %q", int(e), got, want)
		}
	}
}

func TestIntStatus(t *testing.T) {
	cases := []struct {
		rc    int32
		errno syscall.Errno
		want  syscall.Errno
		ok    bool
	}{
		{0, syscall.EINVAL, 0, true},                // success ignores a stale errno
		{16, 0, syscall.EBUSY, false},               // positive errno return (rdma-core style)
		{-1, syscall.EINVAL, syscall.EINVAL, false}, // -1 and errno
		{-22, 0, syscall.EINVAL, false},             // negative errno return
		{-1, 0, 0, false},                           // failed without errno
	}
	for _, c := range cases {
		err := intStatus("ibv_x", c.rc, c.errno)
		if c.ok != (err == nil) {
			t.Fatalf("rc %d: err %v", c.rc, err)
		}
		if err != nil && err.(*Error).Errno != c.want {
			t.Errorf("rc %d errno %d: got errno %d, want %d", c.rc, c.errno, err.(*Error).Errno, c.want)
		}
	}
}

// The errno plumbing (clear, call, read on the same locked thread) is
// tested through libc: close(-1) fails with EBADF.
func TestCallReadsErrno(t *testing.T) {
	fn, err := lookupErrnoLocation()
	if err != nil {
		t.Fatal(err)
	}
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW)
	if err != nil {
		t.Skip(err)
	}
	closeFn, err := purego.Dlsym(h, "close")
	if err != nil {
		t.Fatal(err)
	}
	l := &Lib{errnoFn: fn}
	for i := 0; i < 100; i++ {
		neg1 := -1
		err := l.callInt("close", closeFn, uintptr(neg1))
		if !errors.Is(err, syscall.EBADF) {
			t.Fatalf("close(-1) = %v, want EBADF", err)
		}
	}
}

func TestGIDFormatting(t *testing.T) {
	g := GID{Raw: [16]byte{0xfe, 0x80, 15: 0x01}}
	if s := g.String(); s != "fe80:0000:0000:0000:0000:0000:0000:0001" {
		t.Fatalf("GID string %s", s)
	}
	v4 := GID{Raw: [16]byte{10: 0xff, 11: 0xff, 12: 192, 13: 0, 14: 2, 15: 1}}
	if !v4.IsIPv4Mapped() || g.IsIPv4Mapped() || v4.IsZero() || !(GID{}).IsZero() {
		t.Fatal("GID predicates")
	}
	if s := FormatGUID(0x0002c90300a1b2c3); s != "0002:c903:00a1:b2c3" {
		t.Fatalf("FormatGUID %s", s)
	}
}

func TestBuffer(t *testing.T) {
	b, err := NewBuffer(100)
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() != os.Getpagesize() || b.Addr()%uintptr(os.Getpagesize()) != 0 {
		t.Fatalf("buffer len %d addr %#x: not whole, aligned pages", b.Len(), b.Addr())
	}
	b.Bytes()[0] = 1
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if err := b.Free(); err != nil {
		t.Fatal("second Free:", err)
	}
	if _, err := NewBuffer(0); err == nil {
		t.Fatal("NewBuffer(0) succeeded")
	}
}

func TestArenaAlignment(t *testing.T) {
	a, err := newArena()
	if err != nil {
		t.Fatal(err)
	}
	defer a.buf.Free()
	a.take()
	defer a.mu.Unlock()
	a.alloc(3, 1)
	p := a.alloc(8, 8)
	if p%8 != 0 {
		t.Fatalf("alloc(8, 8) = %#x, not aligned", p)
	}
	if a.alloc(arenaSize, 1) != 0 {
		t.Fatal("overfull alloc succeeded")
	}
}

func TestEventKinds(t *testing.T) {
	if EventCQErr.ElementKind() != ElementCQ || EventQPFatal.ElementKind() != ElementQP ||
		EventPortActive.ElementKind() != ElementPort || EventDeviceFatal.ElementKind() != ElementDevice {
		t.Fatal("event element kinds")
	}
	if EventCQErr.String() != "IBV_EVENT_CQ_ERR" || WCLocProtErr.String() != "IBV_WC_LOC_PROT_ERR" ||
		WCStatus(99).String() != "IBV_WC_STATUS(99)" || QPSRTS.String() != "RTS" {
		t.Fatal("names")
	}
}

// With the real library installed, enumeration must come back either as a
// list or as an *Error with an errno (ENOSYS on a kernel without
// InfiniBand), never a crash.
func TestGetDeviceListRealLibrary(t *testing.T) {
	l, err := Open("")
	if err != nil {
		t.Skipf("libibverbs not installed here: %v", err)
	}
	dl, err := l.GetDeviceList()
	if err != nil {
		var ve *Error
		if !errors.As(err, &ve) || ve.Verb != "ibv_get_device_list" {
			t.Fatalf("GetDeviceList error %v is not a verb error", err)
		}
		t.Logf("%v", err)
		return
	}
	defer dl.Free()
	for _, d := range dl.Devices {
		t.Logf("device %s (%s) guid %s", d.Name, d.DevName, FormatGUID(d.GUID()))
	}
}

// The real library of a supported distribution is rdma-core 34 or newer
// (Debian 12 ships 44), which exports ibv_reg_dmabuf_mr; a library without
// it is refused with the version that added it.
func TestRegDMABufMRSymbol(t *testing.T) {
	l, err := Open("")
	if err != nil {
		t.Skipf("libibverbs not installed here: %v", err)
	}
	if !l.HasRegDMABufMR() {
		t.Errorf("%s does not export ibv_reg_dmabuf_mr", l.Path())
	}
	pd := &PD{Context: &Context{lib: &Lib{}}}
	if _, err := pd.RegDMABufMR(0, 4096, 0x1000, 3, AccessLocalWrite); !errors.Is(err, ErrUnsupported) ||
		!strings.Contains(err.Error(), "older than rdma-core 34") {
		t.Errorf("without the symbol: %v", err)
	}
}
