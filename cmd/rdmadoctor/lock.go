package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ExitBusy is the exit code of a run that found another run holding its
// lock: it checked nothing and wrote nothing. It is neither healthy (0) nor
// a finding (10–59), so a health-check hook that only starts runs (slurmd
// starts one while the last still runs) can tell "not now" from a verdict.
const ExitBusy = 3

// errBusy says another run holds the lock.
type errBusy struct{ path, holder string }

func (e errBusy) Error() string {
	msg := "another rdmadoctor run holds " + e.path
	if e.holder != "" {
		msg += " (" + e.holder + ")"
	}
	return msg + "; this run checked nothing and wrote nothing (exit 3)"
}

// lockPathFor is the lock file of a run that keeps its state in state.
func lockPathFor(state string) string { return state + ".lock" }

// runLock is a held flock(2): the kernel drops it when the process ends,
// however it ends, so a killed run never leaves a stale lock behind.
type runLock struct{ f *os.File }

// acquireLock takes an exclusive, non-blocking flock on path, creating the
// file, and writes this process's ID into it for whoever finds it held.
// A held lock is errBusy; anything else is an error naming path.
func acquireLock(path string) (*runLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := readHolder(f)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errBusy{path: path, holder: holder}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "pid %d\n", os.Getpid())
	}
	return &runLock{f: f}, nil
}

// readHolder returns the first line the holder wrote, printable and short.
func readHolder(f *os.File) string {
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, 0)
	line, _, _ := strings.Cut(string(b[:n]), "\n")
	return asciiLine(line, 40)
}

// release drops the lock; the file stays, for the next run to lock.
func (l *runLock) release() {
	if l != nil && l.f != nil {
		unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
		l.f.Close()
		l.f = nil
	}
}

// ensureDir creates the directory of path (for /var/lib/rdmadoctor on a
// fresh host); an error names it.
func ensureDir(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}
