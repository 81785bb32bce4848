package gpu

import (
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// dlopen opens a library on this thread, so that dlerror's message (per
// thread) is the one for this dlopen.
func dlopen(path string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return 0, &LoadError{Path: path, Loader: err.Error()}
	}
	return h, nil
}

// cString reads a NUL-terminated string from a byte buffer.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// goString reads a NUL-terminated C string the library owns, at most max
// bytes of it.
func goString(p uintptr, max int) string {
	var b []byte
	// Byte by byte: the string may end right before an unmapped page.
	for i := 0; i < max; i++ {
		c := *(*byte)(ptr(p + uintptr(i)))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// ptr turns a library-owned address into a pointer without the
// uintptr-to-pointer conversion vet warns about: the memory is the
// library's, outside the Go heap.
func ptr(u uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&u)) }
