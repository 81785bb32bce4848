package state

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrNoState is Load's error for a state file that does not exist yet.
var ErrNoState = errors.New("no state file (no run has kept one)")

// Mode is the permission of the state file: node-problem-detector and
// node_exporter read it as other users.
const Mode = 0o644

// ReadFile reads a regular file of at most MaxBytes at path. It opens
// without blocking and without following a final symlink, so a FIFO or a
// link planted at the path can neither hang nor redirect the reader.
func ReadFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoState, path)
	}
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("state is a symbolic link, not read: %s", path)
	}
	if err != nil {
		return nil, fmt.Errorf("state unreadable: %v: %s", errnoText(err), path)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("state unreadable: %v: %s", errnoText(err), path)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("state is not a regular file (%v): %s", st.Mode().Type(), path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("state unreadable: %v: %s", errnoText(err), path)
	}
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("state larger than %d MiB: %s", MaxBytes>>20, path)
	}
	return data, nil
}

// Load reads and decodes the state at path; ErrNoState (wrapped) when there
// is none yet. Errors name the path.
func Load(path string) (*State, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, path)
	}
	return s, nil
}

// LoadOrNew is Load, with a new state for host when there is none yet.
func LoadOrNew(path, host string) (*State, error) {
	s, err := Load(path)
	if errors.Is(err, ErrNoState) {
		return New(host), nil
	}
	return s, err
}

// Save replaces path with the state, atomically: a temporary file in the
// same directory, synced, renamed over path, the directory synced. A reader
// sees the old state or the new one, never half of one.
func (s *State) Save(path string) (err error) {
	data, err := s.Encode()
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = fmt.Errorf("write %s (left as it was): %w", path, err)
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Chmod(Mode); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// errnoText is the bare errno of a path error (the caller names the path).
func errnoText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
