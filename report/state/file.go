package state

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// ErrNoState is Load's error for a state file that does not exist yet.
var ErrNoState = errors.New("no state file (no run has kept one)")

// Mode is the permission of the state file: only its owner (root) reads it.
// Its readers — `rdmadoctor npd` in the DaemonSet, the Slurm adapters, ack —
// run as root; node_exporter reads the --output textfile, never the state.
// The state decides drains and taints, so no other user reads what the next
// decision rests on, nor can it be made readable by a lax umask.
const Mode = 0o600

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

// Save replaces path with the state, atomically (WriteAtomic, mode Mode):
// a reader sees the old state or the new one, never half of one, and a
// path that is not a regular file is refused and left as it was.
func (s *State) Save(path string) error {
	data, err := s.Encode()
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return WriteAtomic(path, Mode, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteAtomic replaces path with what write writes, or leaves it as it was.
// It is how rdmadoctor writes every file it keeps (--state, --output):
//   - path must be missing or a regular file: a symbolic link, FIFO, device,
//     socket or directory there is refused, so that `--output /dev/null`
//     run as root can never turn the host's /dev/null into a file;
//   - the bytes go to a temporary file in the same directory (a rename never
//     crosses a file system), created O_EXCL|O_NOFOLLOW — it cannot be a
//     file or link someone planted — with exactly mode, whatever the umask;
//   - it is synced, renamed over path, and the directory synced.
//
// On any failure the temporary file is removed and the error names path.
func WriteAtomic(path string, mode os.FileMode, write func(io.Writer) error) (err error) {
	if err := CheckTarget(path); err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := createTemp(dir, base, mode)
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
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Chmod(mode); err != nil { // the umask narrowed O_CREAT's mode
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	// Looked at again just before the rename: the render may have taken
	// seconds, and a special file that appeared meanwhile is kept too.
	if err = CheckTarget(path); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		d.Sync() // a file system that cannot sync a directory has still renamed
		d.Close()
	}
	return nil
}

// CheckTarget refuses a path that exists and is not a regular file; a
// missing one is fine (it is created). The error names path and what is
// there.
func CheckTarget(path string) error {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("write %s: %v", path, errnoText(err))
	case st.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("write %s: refused: it is a symbolic link, and rdmadoctor replaces only regular files (left as it was; remove it or name another path)", path)
	case !st.Mode().IsRegular():
		return fmt.Errorf("write %s: refused: it is a %s, not a regular file, and rdmadoctor replaces only regular files (left as it was; name another path)", path, FileKind(st.Mode()))
	}
	return nil
}

// FileKind names the type of a file that is not a regular one, for an
// error message: "FIFO", "character device", "directory", ….
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	}
	return "special file (" + m.Type().String() + ")"
}

// createTemp creates a new file beside base in dir, open for writing. The
// name is random; O_EXCL|O_NOFOLLOW make a name someone else took, as a
// file or a link, an error (and another try), never a file we write into.
func createTemp(dir, base string, mode os.FileMode) (*os.File, error) {
	for range 100 {
		name := filepath.Join(dir, "."+base+".tmp-"+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, mode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("no free temporary name in %s after 100 tries", dir)
}

// errnoText is the bare errno of a path error (the caller names the path).
func errnoText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
