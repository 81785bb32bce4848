package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// defaultSlurmLock is where runs on one node meet: slurmd starts a new health
// check while an old one still runs, and prologs of jobs sharing the node
// run side by side.
const defaultSlurmLock = "/run/rdmadoctor-slurm.lock"

// actLock serialises the act step (read the node's state, then drain or
// resume) of the runs on one node, and keeps the newest verdict: the file
// holds the start time of the last run that acted, and a run that started
// before it drops its own, older verdict — a slow healthy run never resumes
// a node that a later run has just drained.
type actLock struct {
	f    *os.File
	path string
	note string // said once on stderr: an insecure lock file was replaced
}

// lockAct takes the lock, waiting while another run holds it until ctx ends.
// The file is opened as the run lock is (openLockFile: 0600, in a directory
// only root can write, no link followed, never truncated on open). A holder
// of another user is not waited for: it is no run of ours, and the caller
// acts without the lock rather than let it keep a broken node in service.
func lockAct(ctx context.Context, path string) (*actLock, error) {
	for range 3 {
		f, note, err := openLockFile(path)
		if err != nil {
			return nil, err
		}
		l, err := waitFlock(ctx, f, path)
		if err != nil || stillAt(f, path) {
			if l != nil {
				l.note = note
			}
			return l, err
		}
		f.Close() // replaced between open and flock: lock the new one
	}
	return nil, fmt.Errorf("lock %s: replaced three times while this run locked it; refused", path)
}

// waitFlock polls for the exclusive flock on f until ctx ends; f is closed
// unless the lock is returned.
func waitFlock(ctx context.Context, f *os.File, path string) (*actLock, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &actLock{f: f, path: path}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if h := findHolder(f); h.foreign() {
			f.Close()
			return nil, fmt.Errorf("lock %s is held by %s, not by an rdmadoctor run of uid %d", path, h, os.Geteuid())
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("another rdmadoctor slurm run held %s until this run's deadline", path)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// lastStart is the start time of the last run that acted; zero when none
// did, or the file holds anything else.
func (l *actLock) lastStart() time.Time {
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return time.Time{}
	}
	b, err := io.ReadAll(io.LimitReader(l.f, 64))
	if err != nil {
		return time.Time{}
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || ns <= 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// record writes this run's start time.
func (l *actLock) record(start time.Time) error {
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("lock file %s: %w", l.path, err)
	}
	if _, err := l.f.WriteAt([]byte(strconv.FormatInt(start.UnixNano(), 10)+"\n"), 0); err != nil {
		return fmt.Errorf("lock file %s: %w", l.path, err)
	}
	return nil
}

// release drops the lock (closing the file releases the flock).
func (l *actLock) release() { l.f.Close() }
