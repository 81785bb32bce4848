package verbs

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Error is a failed verb: the libibverbs function and the errno it left.
type Error struct {
	Verb  string        // e.g. "ibv_reg_mr"
	Errno syscall.Errno // 0 when the library failed without setting errno
}

func (e *Error) Error() string {
	if e.Errno == 0 {
		return e.Verb + ": failed without setting errno"
	}
	return fmt.Sprintf("%s: %s (%s)", e.Verb, ErrnoName(e.Errno), e.Errno.Error())
}

// Unwrap makes errors.Is(err, syscall.ENOMEM) work.
func (e *Error) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

// ReturnError is a data-path verb that failed with a return value that is
// not an errno: ibv_poll_cq's negative return is the provider's own code
// (mlx5 returns -2 when the CQ is in error), so it is reported as it came.
type ReturnError struct {
	Verb   string
	Return int32
}

func (e *ReturnError) Error() string {
	return fmt.Sprintf("%s returned %d, the provider's own failure code (not an errno)", e.Verb, e.Return)
}

// ErrnoName is the symbolic name of an errno, "ENOMEM"; "errno N" for a
// number the C library has no name for.
func ErrnoName(e syscall.Errno) string {
	if e == 0 {
		return ""
	}
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return fmt.Sprintf("errno %d", int(e))
}

// ErrnoOf returns the errno carried by err (through *Error or a wrapped
// syscall.Errno), 0 if there is none.
func ErrnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// LoadError says the dynamic loader could not open the library; Loader is
// the loader's own message (dlerror), which names the missing file or the
// unresolved dependency.
type LoadError struct {
	Path   string
	Loader string
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("dlopen %s: %s", e.Path, e.Loader)
}

// MissingSymbolsError lists every symbol the library does not export.
type MissingSymbolsError struct {
	Path    string
	Symbols []string
}

func (e *MissingSymbolsError) Error() string {
	return fmt.Sprintf("%s lacks %d symbol(s) the binding needs: %s",
		e.Path, len(e.Symbols), strings.Join(e.Symbols, ", "))
}

// ErrUnsupported is returned by optional verbs the loaded library lacks.
var ErrUnsupported = errors.New("not supported by this libibverbs")
