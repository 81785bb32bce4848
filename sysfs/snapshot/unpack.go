package snapshot

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Unpacking a snapshot that came from someone else: the archive may be
// truncated, corrupt or hostile. Unpack reads it twice. The first pass only
// reads: every entry is checked (its name, its type, its size, where a link
// points) and the whole archive must decompress cleanly to its end before
// anything is written. The second pass writes, through an os.Root on the
// destination, exactly the entries the first pass accepted — an archive that
// changed in between is refused. Any refusal names the entry and the reason,
// and the caller removes the destination: there is no partial result.

// Limits on names, beyond Limits.
const (
	maxNameLen   = 4096
	maxNameDepth = 128
	// tarOverhead is what the tar stream may hold beyond file contents:
	// headers, padding, long-name and PAX records.
	tarOverhead = 64 << 20
)

// UnpackError is a refused archive: which entry (when one is to blame) and why.
type UnpackError struct {
	Archive string // the file, as given
	Entry   string // the entry's name as stored, or "" for the archive as a whole
	Reason  string
}

func (e *UnpackError) Error() string {
	if e.Entry == "" {
		return fmt.Sprintf("snapshot %s refused: %s", e.Archive, e.Reason)
	}
	return fmt.Sprintf("snapshot %s refused: entry %q: %s", e.Archive, e.Entry, e.Reason)
}

// UnpackFile unpacks the .tar.gz (or .tar) archive file into a new private
// temporary directory and returns the host root inside it (the archive's
// single top directory when it has one holding the facts file or manifest)
// and a function that removes everything. On error nothing is left behind.
func UnpackFile(file string, lim Limits) (root string, cleanup func(), err error) {
	dest, err := os.MkdirTemp("", "rdmadoctor-root-*")
	if err != nil {
		return "", nil, fmt.Errorf("snapshot %s: make a temporary directory: %w", file, err)
	}
	cleanup = func() { removeAll(dest) }
	open := func() (io.ReadCloser, error) { return os.Open(file) }
	rel, err := Unpack(open, file, dest, lim)
	if err != nil {
		cleanup()
		return "", nil, err
	}
	if rel == "" {
		return dest, cleanup, nil
	}
	return dest + string(os.PathSeparator) + rel, cleanup, nil
}

// removeAll removes a tree that may hold read-only directories.
func removeAll(dir string) {
	if os.RemoveAll(dir) == nil {
		return
	}
	_ = fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(dir+"/"+p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}

// planned is one accepted entry.
type planned struct {
	name string // cleaned, relative
	kind byte   // tar.TypeDir, TypeReg, TypeSymlink, TypeLink
	size int64
	perm fs.FileMode
	link string // symlink target or hard link source (cleaned)
}

// Unpack checks and extracts the archive that open returns (opened twice)
// into the existing, empty directory dest. name is the archive's name for
// messages. It returns the host root relative to dest ("" for dest itself).
func Unpack(open func() (io.ReadCloser, error), name, dest string, lim Limits) (string, error) {
	if lim == (Limits{}) {
		lim = DefaultLimits()
	}
	plan, err := scan(open, name, lim)
	if err != nil {
		return "", err
	}
	if err := extract(open, name, dest, plan, lim); err != nil {
		return "", err
	}
	return hostRoot(plan), nil
}

// openStream opens the archive and returns a tar reader over it, gzip or
// plain tar by their magic numbers, with the decompressed bytes bounded.
func openStream(open func() (io.ReadCloser, error), name string, lim Limits) (*tar.Reader, io.Reader, io.Closer, error) {
	f, err := open()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("snapshot %s: %w", name, err)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(512)
	var stream io.Reader = br
	switch {
	case len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, nil, nil, &UnpackError{Archive: name, Reason: "corrupt gzip header: " + err.Error()}
		}
		stream = zr
	case len(head) >= 262 && bytes.Equal(head[257:262], []byte("ustar")):
	case len(head) == 0:
		f.Close()
		return nil, nil, nil, &UnpackError{Archive: name, Reason: "empty file, not a snapshot archive"}
	default:
		f.Close()
		return nil, nil, nil, &UnpackError{Archive: name, Reason: "not a .tar.gz or .tar archive (give a snapshot written by `rdmadoctor snapshot -o FILE.tar.gz`, or a directory)"}
	}
	limited := &capReader{r: stream, left: lim.MaxTotalBytes + tarOverhead, name: name}
	return tar.NewReader(limited), limited, f, nil
}

// capReader fails once more than left bytes come out of the decompressor: a
// small archive that inflates to gigabytes stops here.
type capReader struct {
	r    io.Reader
	left int64
	name string
}

var errInflated = errors.New("decompresses to more bytes than the limit")

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errInflated
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// streamErr turns a read error into a refusal naming the last good entry.
func streamErr(name, after string, err error) error {
	why := err.Error()
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		why = "the archive is truncated (unexpected end of data)"
	case errors.Is(err, errInflated):
		why = err.Error()
	case errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader):
		why = "the archive is corrupt (" + err.Error() + ")"
	case errors.Is(err, tar.ErrHeader) || errors.As(err, new(flate.CorruptInputError)):
		why = "the archive is corrupt (" + err.Error() + ")"
	}
	if after == "" {
		return &UnpackError{Archive: name, Reason: why + ", before the first entry"}
	}
	return &UnpackError{Archive: name, Reason: why + ", after entry " + fmt.Sprintf("%q", after)}
}

// scan is the first pass: read and judge every entry, write nothing.
func scan(open func() (io.ReadCloser, error), name string, lim Limits) ([]planned, error) {
	tr, stream, closer, err := openStream(open, name, lim)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	var (
		plan  []planned
		kinds = map[string]byte{} // accepted names → kind; implied parents as TypeDir
		total int64
		last  string
	)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, streamErr(name, last, err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue // archive-wide PAX comment (git archive writes one)
		}
		p, err := judge(h, kinds, lim)
		if err != nil {
			return nil, &UnpackError{Archive: name, Entry: h.Name, Reason: err.Error()}
		}
		if len(plan) >= lim.MaxEntries {
			return nil, &UnpackError{Archive: name, Entry: h.Name, Reason: fmt.Sprintf("more than %d entries in the archive", lim.MaxEntries)}
		}
		if p.kind == tar.TypeReg {
			total += p.size
			if total > lim.MaxTotalBytes {
				return nil, &UnpackError{Archive: name, Entry: h.Name, Reason: fmt.Sprintf("the files add up to more than %d bytes", lim.MaxTotalBytes)}
			}
			// Read the content through: a truncated archive must fail here.
			if n, err := io.Copy(io.Discard, tr); err != nil || n != p.size {
				if err == nil {
					err = io.ErrUnexpectedEOF
				}
				return nil, streamErr(name, h.Name, err)
			}
		}
		if p.kind != 0 {
			plan = append(plan, p)
		}
		last = h.Name
	}
	// The tar end marker is not the end of the gzip stream: read to the end
	// so that a bad checksum or a cut-off trailer is seen.
	if _, err := io.Copy(io.Discard, stream); err != nil {
		return nil, streamErr(name, last, err)
	}
	if len(plan) == 0 {
		return nil, &UnpackError{Archive: name, Reason: "the archive holds no entries"}
	}
	if err := checkLinks(plan, kinds); err != nil {
		return nil, &UnpackError{Archive: name, Entry: err.entry, Reason: err.reason}
	}
	return plan, nil
}

// judge checks one header against everything accepted before it. A zero
// kind in the result means "accepted, nothing to write" (a repeated directory).
func judge(h *tar.Header, kinds map[string]byte, lim Limits) (planned, error) {
	name, err := cleanName(h.Name)
	if err != nil {
		return planned{}, err
	}
	p := planned{name: name, perm: fs.FileMode(h.Mode).Perm()}
	switch h.Typeflag {
	case tar.TypeReg, '\x00', tar.TypeGNUSparse: // '\x00': pre-POSIX regular file
		// A sparse file is judged by its full size, holes included: that is
		// what it takes on disk once written.
		p.kind = tar.TypeReg
		if h.Size < 0 {
			return planned{}, fmt.Errorf("negative size %d", h.Size)
		}
		if h.Size > lim.MaxFileBytes {
			return planned{}, fmt.Errorf("declares %d bytes, more than the per-file limit of %d bytes", h.Size, lim.MaxFileBytes)
		}
		p.size = h.Size
	case tar.TypeDir:
		p.kind = tar.TypeDir
	case tar.TypeSymlink:
		p.kind = tar.TypeSymlink
		if err := checkSymlinkTarget(name, h.Linkname); err != nil {
			return planned{}, err
		}
		p.link = h.Linkname
	case tar.TypeLink:
		p.kind = tar.TypeLink
		src, err := cleanName(h.Linkname)
		if err != nil {
			return planned{}, fmt.Errorf("hard link to %q: %v", h.Linkname, err)
		}
		if kinds[src] != tar.TypeReg {
			return planned{}, fmt.Errorf("hard link to %q, which is not a file earlier in the archive", h.Linkname)
		}
		p.link = src
	case tar.TypeChar, tar.TypeBlock:
		return planned{}, errors.New("device file (a snapshot holds only files, directories and symlinks)")
	case tar.TypeFifo:
		return planned{}, errors.New("FIFO (a snapshot holds only files, directories and symlinks)")
	default:
		return planned{}, fmt.Errorf("unsupported entry type %q", string(h.Typeflag))
	}
	// Every parent must be a directory: never write through a symlink or
	// below a file.
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		switch kinds[d] {
		case tar.TypeSymlink:
			return planned{}, fmt.Errorf("lies under the symlink %q", d)
		case tar.TypeReg, tar.TypeLink:
			return planned{}, fmt.Errorf("lies under the file %q", d)
		}
	}
	if old, ok := kinds[name]; ok {
		if old == tar.TypeDir && p.kind == tar.TypeDir {
			return planned{}, nil
		}
		return planned{}, errors.New("appears twice in the archive")
	}
	kinds[name] = p.kind
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		if _, ok := kinds[d]; !ok {
			kinds[d] = tar.TypeDir
		}
	}
	return p, nil
}

// cleanName accepts a relative, clean-able name without "..".
func cleanName(n string) (string, error) {
	switch {
	case n == "":
		return "", errors.New("empty name")
	case len(n) > maxNameLen:
		return "", fmt.Errorf("name longer than %d bytes", maxNameLen)
	case strings.ContainsRune(n, 0):
		return "", errors.New("name holds a NUL byte")
	case strings.HasPrefix(n, "/"):
		return "", errors.New("absolute path (entries must be relative to the snapshot root)")
	}
	for _, el := range strings.Split(n, "/") {
		if el == ".." {
			return "", errors.New("path climbs out with \"..\"")
		}
	}
	c := path.Clean(n)
	if c == "." {
		return "", errors.New("names the archive root itself")
	}
	if strings.Count(c, "/") >= maxNameDepth {
		return "", fmt.Errorf("deeper than %d directories", maxNameDepth)
	}
	return c, nil
}

// checkSymlinkTarget refuses a link that is absolute or, read from its own
// directory, climbs above the root.
func checkSymlinkTarget(name, target string) error {
	switch {
	case target == "":
		return errors.New("symlink with an empty target")
	case len(target) > maxNameLen:
		return fmt.Errorf("symlink target longer than %d bytes", maxNameLen)
	case strings.ContainsRune(target, 0):
		return errors.New("symlink target holds a NUL byte")
	case strings.HasPrefix(target, "/"):
		return fmt.Errorf("symlink to the absolute path %q, outside the snapshot", target)
	case escapesLexically(name, target):
		return fmt.Errorf("symlink to %q leads outside the snapshot root", target)
	}
	return nil
}

type linkError struct{ entry, reason string }

// checkLinks resolves every symlink through the archive's own table, as the
// kernel would, following links inside it: ".." after a link climbs from
// the link's target, so a chain of links that each look harmless can still
// lead out, and is refused here.
func checkLinks(plan []planned, kinds map[string]byte) *linkError {
	links := map[string]string{}
	for _, p := range plan {
		if p.kind == tar.TypeSymlink {
			links[p.name] = p.link
		}
	}
	for _, p := range plan {
		if p.kind != tar.TypeSymlink {
			continue
		}
		if !resolvesInside(path.Dir(p.name), p.link, links) {
			return &linkError{entry: p.name, reason: fmt.Sprintf("symlink to %q leads outside the snapshot root through other links", p.link)}
		}
	}
	return nil
}

// resolvesInside walks target from directory dir (root-relative, "." for
// the root), expanding links; false when a ".." climbs above the root.
// Loops and dangling links are not escapes (a read through them fails).
func resolvesInside(dir, target string, links map[string]string) bool {
	var stack []string
	if dir != "." {
		stack = strings.Split(dir, "/")
	}
	todo := strings.Split(target, "/")
	for hops := 0; len(todo) > 0; {
		el := todo[0]
		todo = todo[1:]
		switch el {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return false
			}
			stack = stack[:len(stack)-1]
			continue
		}
		stack = append(stack, el)
		cur := strings.Join(stack, "/")
		t, ok := links[cur]
		if !ok {
			continue
		}
		if hops++; hops > maxHops {
			return true // a loop: reads fail with ELOOP, nothing escapes
		}
		stack = stack[:len(stack)-1]
		todo = append(strings.Split(t, "/"), todo...)
	}
	return true
}

// extract is the second pass: write exactly the planned entries.
func extract(open func() (io.ReadCloser, error), name, dest string, plan []planned, lim Limits) error {
	root, err := os.OpenRoot(dest)
	if err != nil {
		return fmt.Errorf("snapshot %s: open %s: %w", name, dest, err)
	}
	defer root.Close()
	tr, stream, closer, err := openStream(open, name, lim)
	if err != nil {
		return err
	}
	defer closer.Close()
	changed := func(entry string) error {
		return &UnpackError{Archive: name, Entry: entry, Reason: "the archive changed while it was being read"}
	}
	kinds := map[string]byte{}
	w := &writer{root: root, made: map[string]bool{}}
	i := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return streamErr(name, "", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		p, err := judge(h, kinds, lim)
		if err != nil {
			return changed(h.Name)
		}
		if p.kind == 0 {
			continue
		}
		if i >= len(plan) || plan[i] != p {
			return changed(h.Name)
		}
		i++
		if err := w.entry(tr, p); err != nil {
			return &UnpackError{Archive: name, Entry: h.Name, Reason: err.Error()}
		}
	}
	if i != len(plan) {
		return changed("")
	}
	if _, err := io.Copy(io.Discard, stream); err != nil {
		return streamErr(name, "", err)
	}
	return nil
}

// writer writes planned entries through an os.Root, making each parent
// directory once.
type writer struct {
	root *os.Root
	made map[string]bool
}

func (w *writer) parents(name string) error {
	d := path.Dir(name)
	if d == "." || w.made[d] {
		return nil
	}
	if err := w.root.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("make directory: %w", err)
	}
	for ; d != "." && !w.made[d]; d = path.Dir(d) {
		w.made[d] = true
	}
	return nil
}

func (w *writer) entry(r io.Reader, p planned) error {
	if err := w.parents(p.name); err != nil {
		return err
	}
	switch p.kind {
	case tar.TypeDir:
		if w.made[p.name] {
			// made earlier as a parent; give it its own permissions
			return w.root.Chmod(p.name, p.perm|0o700)
		}
		w.made[p.name] = true
		return w.root.Mkdir(p.name, p.perm|0o700)
	case tar.TypeReg:
		// A new file is writable through the descriptor that created it
		// whatever its mode, so it gets its final mode at once.
		f, err := w.root.OpenFile(p.name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, p.perm)
		if err != nil {
			return err
		}
		n, err := io.Copy(f, io.LimitReader(r, p.size))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil && n != p.size {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		return nil
	case tar.TypeSymlink:
		return w.root.Symlink(p.link, p.name)
	case tar.TypeLink:
		return w.root.Link(p.link, p.name)
	}
	return fmt.Errorf("unsupported entry type %q", string(p.kind))
}

// hostRoot picks the host root: the archive's single top directory when it
// holds the facts file or the manifest (as `rdmadoctor snapshot` writes it),
// else the archive root.
func hostRoot(plan []planned) string {
	top := ""
	for _, p := range plan {
		first, _, _ := strings.Cut(p.name, "/")
		if top == "" {
			top = first
		} else if first != top {
			return ""
		}
	}
	for _, p := range plan {
		if p.kind == tar.TypeReg && (p.name == top+"/"+sysfs.FactsFile || p.name == top+"/"+ManifestFile) {
			return top
		}
	}
	return ""
}
