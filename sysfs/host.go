// Package sysfs is rdmadoctor's host reader: every file the checks read —
// sysfs, procfs, configfs, /dev, /etc and the library directories — and every
// fact that is not a file (netlink answers, the libibverbs enumeration) comes
// through one Host rooted at a directory. The root is "/" on a live host, or a
// fixture or snapshot directory; judging code never knows which.
//
// A fixture root is opened through os.Root, so a symlink inside a snapshot can
// never lead a read outside it. Missing, unreadable and malformed files are
// data: readers return errors that name the path, never panic.
package sysfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Limits on what one read may return. sysfs attributes are a page at most;
// procfs and loader files are larger but still bounded so a hostile snapshot
// cannot make the tool read gigabytes.
const (
	attrReadSize = 4096
	maxFileSize  = 8 << 20
)

// Host reads one machine's RDMA state, live or from a directory.
type Host struct {
	rootDir string   // as given by the user ("/" when live)
	display string   // how paths are shown: rootDir, or the archive it was unpacked from
	root    *os.Root // nil when live
	facts   *Facts   // loaded from the facts file (fixture) or built live
	live    LiveSource

	// dirs caches an os.Root per directory already opened, so reading the
	// forty attributes of one port walks the path once instead of forty
	// times. A nil entry remembers a directory that cannot be opened.
	mu       sync.Mutex
	dirs     map[string]*os.Root
	liveDirs map[string]int // O_PATH descriptors of live directories
	fdOnce   sync.Once
	fdBudget int

	// recorded, when non-nil, collects every path read (snapshot capture:
	// the list of what to copy comes from the checks' own reads).
	recMu    sync.Mutex
	recorded map[string]Access
}

// Access says how a recorded path was used.
type Access uint8

const (
	AccessRead Access = 1 << iota // file content read
	AccessList                    // directory listed
	AccessLink                    // symlink read
	AccessStat                    // existence or metadata looked at
)

// Record starts collecting every path this Host reads; Recorded returns them.
func (h *Host) Record() {
	h.recMu.Lock()
	h.recorded = map[string]Access{}
	h.recMu.Unlock()
}

// Recorded returns the paths read since Record, with how each was used.
func (h *Host) Recorded() map[string]Access {
	h.recMu.Lock()
	defer h.recMu.Unlock()
	out := make(map[string]Access, len(h.recorded))
	for k, v := range h.recorded {
		out[k] = v
	}
	return out
}

func (h *Host) note(p string, a Access) {
	h.recMu.Lock()
	if h.recorded != nil {
		h.recorded[path.Clean("/"+p)] |= a
	}
	h.recMu.Unlock()
}

// maxCachedDirs bounds the directory cache against a hostile snapshot.
const maxCachedDirs = 32768

// LiveSource answers the facts that are not files on a live host. The
// netlink-backed implementation lives beside this file; tests may plug their own.
type LiveSource interface {
	Netdevs() ([]Netdev, error)
	DCB(ifname string) (DCB, error)
	RDMASystem() (RDMASystem, error)
	RDMAResources() ([]RDMAResource, error)
}

// OpenLive returns a Host reading the running system.
func OpenLive() *Host {
	return &Host{rootDir: "/", live: newLiveSource()}
}

// Open returns a Host reading the directory dir as if it were "/". A root of
// "/" means the live host. The directory must exist and be a directory; a
// facts file (FactsFile) inside it supplies what is not a file.
func Open(dir string) (*Host, error) {
	if dir == "" {
		return nil, errors.New("empty root directory")
	}
	clean := filepath.Clean(dir)
	if clean == "/" {
		return OpenLive(), nil
	}
	fi, err := os.Stat(clean)
	if err != nil {
		return nil, fmt.Errorf("root %s: %w", dir, unwrapPathError(err))
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("root %s: not a directory (give a host directory, e.g. testdata/hosts/cx5-roce-healthy)", dir)
	}
	r, err := os.OpenRoot(clean)
	if err != nil {
		return nil, fmt.Errorf("root %s: %w", dir, unwrapPathError(err))
	}
	h := &Host{rootDir: dir, display: dir, root: r}
	h.facts, err = loadFacts(h)
	if err != nil {
		r.Close()
		return nil, err
	}
	return h, nil
}

// OpenSnapshot is Open for a snapshot unpacked into a private temporary
// directory: messages then name paths as the captured host knew them
// ("/proc/self/limits"), so the replayed report reads exactly as the broken
// host's own would, and no temporary path leaks into it.
func OpenSnapshot(dir string) (*Host, error) {
	h, err := Open(dir)
	if err != nil {
		return nil, err
	}
	h.display = ""
	return h, nil
}

// Close releases the root directory handle.
func (h *Host) Close() error {
	h.mu.Lock()
	for _, r := range h.dirs {
		if r != nil {
			r.Close()
		}
	}
	h.dirs = nil
	for _, fd := range h.liveDirs {
		if fd >= 0 {
			syscall.Close(fd)
		}
	}
	h.liveDirs = nil
	h.mu.Unlock()
	if h.root != nil {
		return h.root.Close()
	}
	return nil
}

// liveDirFD returns a cached O_PATH descriptor of a live directory, or -1
// (not openable, or the cache is full: open by full path instead). A port's
// attributes and a GID table's thousand entries then cost one lookup each.
func (h *Host) liveDirFD(dir string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if fd, ok := h.liveDirs[dir]; ok {
		return fd
	}
	if len(h.liveDirs) >= h.maxDirs() {
		return -1
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		fd = -1
	}
	if h.liveDirs == nil {
		h.liveDirs = map[string]int{}
	}
	h.liveDirs[dir] = fd
	return fd
}

// inDir returns the cached root of p's directory and p's last element.
// Everything opened through it is still inside the host root: the
// directory root was itself opened through h.root.
func (h *Host) inDir(p string) (*os.Root, string) {
	r := rel(p)
	dir, base := path.Split(r)
	if base == "" || base == "." || base == ".." {
		return nil, ""
	}
	return h.dirRoot(strings.TrimSuffix(dir, "/")), base
}

// dirRoot returns an os.Root for the root-relative directory dir, opened
// one step from its parent's (so a new directory costs one openat, not a
// walk from the top), or from the host root when the step is a symlink
// that leaves the parent — sysfs's class links do. nil means "open from
// the host root": the directory cannot be opened, or the cache is full.
func (h *Host) dirRoot(dir string) *os.Root {
	if dir == "" || dir == "." {
		return h.root
	}
	h.mu.Lock()
	sub, ok := h.dirs[dir]
	full := len(h.dirs) >= h.maxDirs()
	h.mu.Unlock()
	if ok {
		return sub
	}
	if full {
		return nil
	}
	parent, base := path.Split(dir)
	var err error
	sub = nil
	if pr := h.dirRoot(strings.TrimSuffix(parent, "/")); pr != nil && base != ".." {
		sub, err = pr.OpenRoot(base)
		if err != nil {
			sub = nil
		}
	}
	if sub == nil && (err == nil || isEscape(err)) {
		if sub, err = h.root.OpenRoot(dir); err != nil {
			sub = nil
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if prev, ok := h.dirs[dir]; ok { // another goroutine was first
		if sub != nil {
			sub.Close()
		}
		return prev
	}
	if h.dirs == nil {
		h.dirs = map[string]*os.Root{}
	}
	h.dirs[dir] = sub
	return sub
}

// maxDirs bounds the directory cache: each entry holds a descriptor, so
// it gets at most half of this process's descriptor limit (Go raises the
// soft limit to the hard one at start), and never more than maxCachedDirs.
func (h *Host) maxDirs() int {
	h.fdOnce.Do(func() {
		h.fdBudget = maxCachedDirs
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(2*maxCachedDirs) {
			h.fdBudget = max(0, int(lim.Cur)/2-64)
		}
	})
	return h.fdBudget
}

// isEscape reports an os.Root refusal to follow a symlink out of its
// directory; through the directory cache that only means "retry from the
// host root", which decides for real.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "escapes from parent")
}

// Live reports whether this Host reads the running system.
func (h *Host) Live() bool { return h.root == nil }

// Root is the directory given by the user ("/" when live).
func (h *Host) Root() string { return h.rootDir }

// rel turns "/sys/class/x" into the root-relative "sys/class/x".
func rel(p string) string {
	p = path.Clean("/" + p)
	if p == "/" {
		return "."
	}
	return p[1:]
}

// Display returns the path as the user should see it in a message: the
// host path on a live host or a snapshot, root-joined in a fixture directory.
func (h *Host) Display(p string) string {
	if h.Live() || h.display == "" {
		return path.Clean("/" + p)
	}
	return filepath.Join(h.display, rel(p))
}

func (h *Host) open(p string) (*os.File, error) {
	if h.root == nil {
		return os.Open(path.Clean("/" + p))
	}
	if err := h.recordedReadError(p); err != nil {
		return nil, err
	}
	if sub, base := h.inDir(p); sub != nil {
		f, err := sub.Open(base)
		if !isEscape(err) {
			return f, err
		}
	}
	return h.root.Open(rel(p))
}

// ReadAttr reads a small sysfs attribute with a single read(2) into a page
// buffer, and trims the trailing newline. One read matters: some drivers
// answer EAGAIN to a second read and a read loop would spin forever.
func (h *Host) ReadAttr(p string) (string, error) {
	h.note(p, AccessRead)
	if h.root == nil {
		return h.readAttrLive(p)
	}
	f, err := h.open(p)
	if err != nil {
		return "", h.pathErr("read", p, err)
	}
	defer f.Close()
	// No fstat first: read(2) on a directory fails with EISDIR by itself,
	// and one syscall less per attribute is a third of the cost on a host
	// with a thousand devices.
	buf := make([]byte, attrReadSize)
	n, err := f.Read(buf)
	if errors.Is(err, syscall.EISDIR) {
		return "", fmt.Errorf("read %s: is a directory", h.Display(p))
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return "", h.pathErr("read", p, err)
	}
	return strings.TrimRight(string(buf[:n]), "\n"), nil
}

// readAttrLive is ReadAttr on the live host with bare open/read/close: an
// os.File costs several more syscalls (poller registration, flag checks),
// and a host reads thousands of attributes — a SoftRoCE port alone has a
// 1024-entry GID table.
func (h *Host) readAttrLive(p string) (string, error) {
	name := path.Clean("/" + p)
	var (
		fd  int
		err error
	)
	dir, base := path.Split(name)
	dfd := h.liveDirFD(dir)
	for {
		if dfd >= 0 {
			// Relative to the directory: the kernel walks one component,
			// not the whole path and its /sys/class symlink again.
			fd, err = unix.Openat(dfd, base, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		} else {
			fd, err = syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		}
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return "", h.pathErr("read", p, err)
	}
	defer syscall.Close(fd)
	var buf [attrReadSize]byte
	var n int
	for {
		n, err = syscall.Read(fd, buf[:])
		if err != syscall.EINTR {
			break
		}
	}
	if err == syscall.EISDIR {
		return "", fmt.Errorf("read %s: is a directory", h.Display(p))
	}
	if err != nil {
		return "", h.pathErr("read", p, err)
	}
	return strings.TrimRight(string(buf[:max(n, 0)]), "\n"), nil
}

// ReadFile reads a whole file of at most 8 MiB (procfs tables, the loader
// cache). A larger file is refused rather than read.
func (h *Host) ReadFile(p string) ([]byte, error) {
	h.note(p, AccessRead)
	f, err := h.open(p)
	if err != nil {
		return nil, h.pathErr("read", p, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("read %s: is a directory", h.Display(p))
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, h.pathErr("read", p, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("read %s: larger than %d bytes, refused", h.Display(p), maxFileSize)
	}
	return data, nil
}

// ReadDir lists the names in a directory, sorted.
func (h *Host) ReadDir(p string) ([]string, error) {
	h.note(p, AccessList)
	f, err := h.open(p)
	if err != nil {
		return nil, h.pathErr("list", p, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, h.pathErr("list", p, err)
	}
	sort.Strings(names)
	return names, nil
}

// Readlink returns a symlink's target as stored.
func (h *Host) Readlink(p string) (string, error) {
	h.note(p, AccessLink)
	var (
		t   string
		err error
	)
	if h.root == nil {
		t, err = os.Readlink(path.Clean("/" + p))
	} else if sub, base := h.inDir(p); sub != nil {
		t, err = sub.Readlink(base)
	} else {
		t, err = h.root.Readlink(rel(p))
	}
	if err != nil {
		return "", h.pathErr("readlink", p, err)
	}
	return t, nil
}

// Lstat describes p without following a final symlink.
func (h *Host) Lstat(p string) (fs.FileInfo, error) {
	h.note(p, AccessStat)
	var (
		fi  fs.FileInfo
		err error
	)
	if h.root == nil {
		fi, err = os.Lstat(path.Clean("/" + p))
	} else if sub, base := h.inDir(p); sub != nil {
		fi, err = sub.Lstat(base)
	} else {
		fi, err = h.root.Lstat(rel(p))
	}
	if err != nil {
		return nil, h.pathErr("stat", p, err)
	}
	return fi, nil
}

// Stat describes p, following symlinks (inside the root only).
func (h *Host) Stat(p string) (fs.FileInfo, error) {
	h.note(p, AccessStat)
	var (
		fi  fs.FileInfo
		err error
	)
	if h.root == nil {
		fi, err = os.Stat(path.Clean("/" + p))
	} else {
		fi, err = h.root.Stat(rel(p))
	}
	if err != nil {
		return nil, h.pathErr("stat", p, err)
	}
	return fi, nil
}

// Exists reports whether p exists (following symlinks). Any error other
// than "does not exist" counts as existing-but-unreadable and is returned.
func (h *Host) Exists(p string) (bool, error) {
	_, err := h.Stat(p)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// ResolveLink resolves the symlink at p to a clean absolute host path,
// relative targets taken from p's directory ("/sys/class/infiniband/mlx5_0"
// → "/sys/devices/pci0000:00/.../infiniband/mlx5_0").
func (h *Host) ResolveLink(p string) (string, error) {
	t, err := h.Readlink(p)
	if err != nil {
		return "", err
	}
	if path.IsAbs(t) {
		return path.Clean(t), nil
	}
	return path.Clean(path.Join(path.Dir(path.Clean("/"+p)), t)), nil
}

// LinkBase is the last element of the symlink's target: the driver name of
// a "driver" link, the PCI address of a "device" link.
func (h *Host) LinkBase(p string) (string, error) {
	t, err := h.ResolveLink(p)
	if err != nil {
		return "", err
	}
	// Resolved first: a target such as "../.." names its directory only
	// once it is joined with the link's own place.
	return path.Base(t), nil
}

// pathErr wraps err with the verb and the path as the user knows it, keeping
// the errno (errors.Is works) but dropping Go's own path prefix.
func (h *Host) pathErr(verb, p string, err error) error {
	return &PathError{Op: verb, Path: h.Display(p), Err: unwrapPathError(err)}
}

// PathError is an error reading one host path.
type PathError struct {
	Op   string
	Path string
	Err  error
}

func (e *PathError) Error() string {
	return e.Op + " " + e.Path + ": " + describeErr(e.Err)
}

func (e *PathError) Unwrap() error { return e.Err }

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

func describeErr(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOENT:
			return "no such file"
		case syscall.EACCES, syscall.EPERM:
			return "permission denied"
		case syscall.EINVAL:
			return "invalid argument (the driver refused the read)"
		}
		return errno.Error()
	}
	if errors.Is(err, fs.ErrNotExist) {
		return "no such file"
	}
	if err != nil && strings.Contains(err.Error(), "escapes from parent") {
		return "symlink leads outside the root, refused"
	}
	return err.Error()
}

// IsNotExist reports whether err means the path is absent.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
