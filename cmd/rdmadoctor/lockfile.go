package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockMode is the permission of a lock file. flock(2) works on a read-only
// descriptor, so a lock file anyone can open is a lock anyone can hold: a
// job's user holding a 0644 state.json.lock made every root run exit 3 and
// kept a broken node in service. Only the owner (root) may open it.
const lockMode = 0o600

// checkPrivateDir refuses a directory that a user other than this process's
// owner (or root) could change: the directory of the state and its lock, or
// of the Slurm act lock. Whoever can write a directory can plant a symbolic
// link, a FIFO or their own lock file at our names, or hold a lock there;
// whoever can write a parent can rename the directory away and put their
// own in its place. So every directory on the way, as named and as resolved
// through symbolic links, must be owned by root or by us and writable by no
// one else — except a parent with the sticky bit (/tmp), where only an
// entry's owner may rename or remove it, and the entry is checked next.
// The directory itself may not be group- or world-writable, sticky or not.
func checkPrivateDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	if err := checkDirChain(abs, dir); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	if real == abs {
		return nil
	}
	return checkDirChain(real, dir)
}

// checkDirChain checks abs and each of its parents up to /, without
// following symbolic links (a link is judged by its owner; what it leads to
// is checked by the caller's walk of the resolved path).
func checkDirChain(abs, named string) error {
	me := uint32(os.Geteuid())
	last := true
	for p := abs; ; p = filepath.Dir(p) {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return fmt.Errorf("directory %s: %s: %w", named, p, err)
		}
		isLink := st.Mode&unix.S_IFMT == unix.S_IFLNK
		if !isLink && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return fmt.Errorf("directory %s: %s is not a directory", named, p)
		}
		if st.Uid != 0 && st.Uid != me {
			return fmt.Errorf("directory %s: %s is owned by uid %d, not by root or uid %d (this run): that user could replace what rdmadoctor keeps there or hold its lock; refused — chown it to root", named, p, st.Uid, me)
		}
		writable := !isLink && st.Mode&0o022 != 0
		sticky := st.Mode&unix.S_ISVTX != 0
		if writable && (last || !sticky) {
			return fmt.Errorf("directory %s: %s is writable by group or others (mode %04o): any of them could plant a link or a file at rdmadoctor's names or hold its lock; refused — chmod go-w %s", named, p, st.Mode&0o7777, p)
		}
		last = false
		if p == "/" {
			return nil
		}
	}
}

// openLockFile opens (creating it 0600) the lock file at path for flock,
// after checking its directory. It never follows a symbolic link, never
// blocks on a FIFO, never truncates, and never opens a device. A regular
// file that is not ours alone (another owner, or group or other may open
// it: an earlier version's 0644 lock) is replaced by a fresh 0600 one —
// chmod would leave descriptors others opened meanwhile able to hold it —
// and note says so. Anything else at path is refused with the reason.
func openLockFile(path string) (f *os.File, note string, err error) {
	if err := checkPrivateDir(filepath.Dir(path)); err != nil {
		return nil, "", fmt.Errorf("lock %s: %w", path, err)
	}
	for range 3 {
		if st, err := os.Lstat(path); err == nil && !st.Mode().IsRegular() {
			return nil, "", notRegularLock(path, st.Mode())
		}
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, lockMode)
		if errors.Is(err, unix.ELOOP) {
			return nil, "", notRegularLock(path, fs.ModeSymlink)
		}
		if err != nil {
			return nil, "", fmt.Errorf("lock %s: %w", path, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			f.Close()
			return nil, "", fmt.Errorf("lock %s: %w", path, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			f.Close()
			return nil, "", fmt.Errorf("lock %s: refused: not a regular file (left as it is)", path)
		}
		if st.Uid == uint32(os.Geteuid()) && st.Mode&0o077 == 0 {
			return f, note, nil
		}
		note = fmt.Sprintf("replaced %s (mode %04o, uid %d): a lock file others can open is a lock others can hold; the new one is 0600", path, st.Mode&0o777, st.Uid)
		err = replaceLockFile(path, f, &st)
		f.Close()
		if err != nil {
			return nil, "", err
		}
	}
	return nil, "", fmt.Errorf("lock %s: replaced three times while this run opened it; refused", path)
}

func notRegularLock(path string, m fs.FileMode) error {
	kind := "a symbolic link"
	if m&fs.ModeSymlink == 0 {
		kind = "not a regular file (" + m.Type().String() + ")"
	}
	return fmt.Errorf("lock %s: refused: it is %s, and a lock file must be a regular file rdmadoctor created (left as it is; remove it)", path, kind)
}

// replaceLockFile renames a fresh 0600 file over path, carrying over the
// first line of old (the Slurm act lock keeps the last acting run's start
// time there), unless path no longer is old (another run replaced it).
func replaceLockFile(path string, old *os.File, oldSt *unix.Stat_t) error {
	b := make([]byte, 64)
	n, _ := old.ReadAt(b, 0)
	line, _, _ := strings.Cut(string(b[:n]), "\n")
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".new-"+strconv.FormatUint(rand.Uint64(), 36))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, lockMode)
	if err != nil {
		return fmt.Errorf("lock %s: replace it: %w", path, err)
	}
	defer os.Remove(tmp) // gone after the rename; removed on any failure
	_, err = io.WriteString(f, line+"\n")
	if err == nil {
		err = f.Chmod(lockMode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	var now unix.Stat_t
	if err == nil && unix.Lstat(path, &now) == nil && (now.Dev != oldSt.Dev || now.Ino != oldSt.Ino) {
		return nil // another run replaced it first: open theirs
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("lock %s: replace it: %w", path, err)
	}
	return nil
}

// stillAt says whether f is the file at path: a lock taken on a file that
// another run has since replaced excludes nobody.
func stillAt(f *os.File, path string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Lstat(path, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// lockHolder is who holds a lock, as /proc/locks and /proc/PID/status say.
type lockHolder struct {
	pid, uid int
	known    bool   // pid and uid were found
	line     string // the first line the holder wrote in the file
}

// foreign says the holder runs as another user than this process: not an
// overlapping rdmadoctor run of ours, whatever the file says.
func (h lockHolder) foreign() bool { return h.known && h.uid != os.Geteuid() }

func (h lockHolder) String() string {
	if !h.known {
		return h.line
	}
	who := strconv.Itoa(h.uid)
	if u, err := user.LookupId(who); err == nil {
		who += " (" + asciiLine(u.Username, 32) + ")"
	}
	return fmt.Sprintf("pid %d, uid %s", h.pid, who)
}

// findHolder reads who holds the flock on f: the pid from /proc/locks (the
// line for f's device and inode), its effective uid from /proc/PID/status;
// failing that, only the line the holder wrote.
func findHolder(f *os.File) lockHolder {
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, 0)
	line, _, _ := strings.Cut(string(b[:n]), "\n")
	h := lockHolder{line: asciiLine(line, 40)}
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return h
	}
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return h
	}
	defer locks.Close()
	pid := flockHolderPid(locks, unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	if uid, ok := processUID(pid); ok {
		h.pid, h.uid, h.known = pid, uid, true
	}
	return h
}

// flockHolderPid finds, in /proc/locks, the pid holding (not waiting for:
// "->") a FLOCK on the file maj:min:ino; 0 when none is listed.
// A line: "1: FLOCK  ADVISORY  WRITE 10498 fe:00:9978081 0 EOF".
func flockHolderPid(r io.Reader, maj, min uint32, ino uint64) int {
	want := fmt.Sprintf("%02x:%02x:%d", maj, min, ino)
	sc := bufio.NewScanner(io.LimitReader(r, 4<<20))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != want {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil && pid > 0 {
			return pid
		}
	}
	return 0
}

// processUID is the effective uid of pid, from /proc/PID/status's Uid line
// (real, effective, saved, fs).
func processUID(pid int) (int, bool) {
	if pid <= 0 {
		return 0, false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) < 2 {
				return 0, false
			}
			uid, err := strconv.Atoi(f[1])
			return uid, err == nil
		}
	}
	return 0, false
}
