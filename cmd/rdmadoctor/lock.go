package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// ExitBusy is the exit code of a run that found another run holding its
// lock: it checked nothing and wrote nothing. It is neither healthy (0) nor
// a finding (10–59), so a health-check hook that only starts runs (slurmd
// starts one while the last still runs) can tell "not now" from a verdict.
const ExitBusy = 3

// errBusy says another process holds the lock. When it runs as another
// user (foreign) it is no overlapping run of ours: the run could not run,
// which is exit 1, never the "not now" of exit 3 that systemd and the Slurm
// prolog count as success. With the lock 0600 in a directory only root can
// write it cannot happen; it is reported, should a descriptor leak.
type errBusy struct {
	path   string
	holder lockHolder
}

func (e errBusy) Error() string {
	if e.holder.foreign() {
		return fmt.Sprintf("%s is held by %s, not by an rdmadoctor run of uid %d: this run could not run (it checked nothing and wrote nothing) — find out why that process holds it", e.path, e.holder, os.Geteuid())
	}
	msg := "another rdmadoctor run holds " + e.path
	if h := e.holder.String(); h != "" {
		msg += " (" + h + ")"
	}
	return msg + "; this run checked nothing and wrote nothing (exit 3)"
}

// busyExit is the exit code of a run that did not get its lock: ExitBusy
// for another run of ours, 1 (could not run) for a foreign holder or any
// other error.
func busyExit(err error) int {
	var busy errBusy
	if errors.As(err, &busy) && !busy.holder.foreign() {
		return ExitBusy
	}
	return report.ExitInternal
}

// lockPathFor is the lock file of a run that keeps its state in state.
func lockPathFor(state string) string { return state + ".lock" }

// runLock is a held flock(2): the kernel drops it when the process ends,
// however it ends, so a killed run never leaves a stale lock behind.
type runLock struct {
	f    *os.File
	note string // said once on stderr: an insecure lock file was replaced
}

// acquireLock takes an exclusive, non-blocking flock on path (openLockFile:
// 0600, in a directory only root can write, no link followed, nothing
// truncated before the lock is ours), then writes this process's ID into
// it for whoever finds it held. A held lock is errBusy, naming its holder;
// anything else is an error naming path.
func acquireLock(path string) (*runLock, error) {
	for range 3 {
		f, note, err := openLockFile(path)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			holder := findHolder(f)
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, errBusy{path: path, holder: holder}
			}
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !stillAt(f, path) {
			f.Close() // replaced between open and flock: lock the new one
			continue
		}
		// Ours now: the holder's line is rewritten in place.
		if err := f.Truncate(0); err == nil {
			f.WriteAt([]byte(fmt.Sprintf("pid %d\n", os.Getpid())), 0)
		}
		return &runLock{f: f, note: note}, nil
	}
	return nil, fmt.Errorf("lock %s: replaced three times while this run locked it; refused", path)
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
