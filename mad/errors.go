package mad

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Error is a failed libibumad call: the function and the errno it returned.
type Error struct {
	Call  string        // e.g. "umad_open_port(mlx5_0, 1)"
	Errno syscall.Errno // 0 when the library failed without an errno
}

func (e *Error) Error() string {
	if e.Errno == 0 {
		return e.Call + ": failed without an errno"
	}
	name := unix.ErrnoName(e.Errno)
	if name == "" {
		name = fmt.Sprintf("errno %d", int(e.Errno))
	}
	return fmt.Sprintf("%s: %s (%s)", e.Call, name, e.Errno.Error())
}

// Unwrap makes errors.Is(err, syscall.EACCES) work.
func (e *Error) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

// LoadError says the dynamic loader could not open the library; Loader is
// its own message (dlerror).
type LoadError struct {
	Path   string
	Loader string
}

func (e *LoadError) Error() string { return fmt.Sprintf("dlopen %s: %s", e.Path, e.Loader) }

// MissingSymbolsError lists every symbol the library does not export.
type MissingSymbolsError struct {
	Path    string
	Symbols []string
}

func (e *MissingSymbolsError) Error() string {
	return fmt.Sprintf("%s lacks %d symbol(s) the binding needs: %s", e.Path, len(e.Symbols), strings.Join(e.Symbols, ", "))
}

// ErrTimeout is wrapped by every error of a request that got no answer
// within its timeout and retries.
var ErrTimeout = errors.New("no answer")

// TimeoutError is a request that got no answer: what was asked, of whom,
// and how long was waited.
type TimeoutError struct {
	Request string // "SMInfo Get to LID 1"
	Tries   int
	Each    string // the timeout of one try, "200ms"
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s: no answer after %d tries of %s each", e.Request, e.Tries, e.Each)
}

// Unwrap makes errors.Is(err, ErrTimeout) work.
func (e *TimeoutError) Unwrap() error { return ErrTimeout }

// TruncatedError is a MAD or attribute shorter than its layout.
type TruncatedError struct {
	What      string // "MAD header", "SMInfo"
	Got, Want int
}

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("truncated %s: %d bytes, need %d", e.What, e.Got, e.Want)
}

// StatusError is an answer whose MAD status is not success (IBTA vol 1
// 13.4.7, table 111; SA class-specific codes 15.2.1.1, table 187).
type StatusError struct {
	Class  uint8
	Attr   uint16
	Status uint16 // with the directed-route D bit removed
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s answered with status 0x%04x: %s", ClassName(e.Class), AttrName(e.Class, e.Attr), e.Status, StatusText(e.Class, e.Status))
}

// Busy reports whether the responder asked to be retried later.
func (e *StatusError) Busy() bool { return e.Status&StatusBusy != 0 }

// UnexpectedError is an answer that is not the one asked for: another
// class, attribute, method or transaction, or a class version this package
// does not decode.
type UnexpectedError struct {
	What      string // "attribute", "class version", "method", "base version"
	Got, Want string
}

func (e *UnexpectedError) Error() string {
	return fmt.Sprintf("unexpected %s in the answer: got %s, want %s", e.What, e.Got, e.Want)
}
