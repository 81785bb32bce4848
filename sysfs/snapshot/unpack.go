package snapshot

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
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

// Limits on names and streams, beyond Limits.
const (
	maxNameLen = 4096 // PATH_MAX
	maxElemLen = 255  // NAME_MAX: one path component
	// maxNameDepth bounds the components of one name. A real snapshot is
	// about 20 deep (the PCI path of a NIC behind a few bridges); a deeper
	// name only serves to make one entry imply many directories.
	maxNameDepth = 48
	// tarOverhead is what the tar stream may hold beyond file contents:
	// headers, padding, long-name and PAX records.
	tarOverhead = 64 << 20
	// maxTrailer is what may follow the tar end marker: tar pads its
	// output to a whole record (10 KiB for GNU tar, more with -b).
	maxTrailer = 1 << 20
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
// temporary directory and returns the host root inside it (see Unpack) and
// a function that removes everything. On error — a refusal, or ctx done
// (an interrupt, a deadline) — nothing is left behind.
func UnpackFile(ctx context.Context, file string, lim Limits) (root string, cleanup func(), err error) {
	lim = lim.orDefault()
	if fi, err := os.Stat(file); err == nil && fi.Size() > lim.MaxArchiveBytes {
		return "", nil, &UnpackError{Archive: file, Reason: fmt.Sprintf("the archive file is larger than %d bytes", lim.MaxArchiveBytes)}
	}
	dest, err := os.MkdirTemp("", "rdmadoctor-root-*")
	if err != nil {
		return "", nil, fmt.Errorf("snapshot %s: make a temporary directory: %w", file, err)
	}
	cleanup = func() { removeAll(dest) }
	open := func() (io.ReadCloser, error) { return os.Open(file) }
	rel, err := Unpack(ctx, open, file, dest, lim)
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
// messages. It returns the host root relative to dest ("" for dest itself):
// the archive's single top directory when it holds the facts file, the
// manifest, sys/ or proc/ (as `rdmadoctor snapshot` or `tar czf x.tgz
// hostdir` write it), else the archive root. Every symlink must resolve
// inside that host root.
//
// When ctx is done Unpack stops between two reads and returns an error
// wrapping ctx.Err(); what it wrote stays in dest for the caller to remove.
func Unpack(ctx context.Context, open func() (io.ReadCloser, error), name, dest string, lim Limits) (string, error) {
	lim = lim.orDefault()
	sc, err := scan(ctx, open, name, lim)
	if err != nil {
		return "", err
	}
	root := hostRoot(sc.plan, sc.kinds)
	if err := checkLinks(ctx, name, sc.plan, sc.kinds, root); err != nil {
		return "", err
	}
	if err := extract(ctx, open, name, dest, sc, lim); err != nil {
		return "", err
	}
	return root, nil
}

// orDefault fills in the limits a zero Limits, or an older caller, leaves out.
func (lim Limits) orDefault() Limits {
	if lim == (Limits{}) {
		lim = DefaultLimits()
	}
	if lim.MaxArchiveBytes <= 0 {
		lim.MaxArchiveBytes = 2*lim.MaxTotalBytes + tarOverhead
	}
	return lim
}

// stream is one pass over the archive: the tar reader, and the bounded
// decompressed bytes under it.
type stream struct {
	tr   *tar.Reader
	data *capReader
	file io.Closer
}

// openStream opens the archive and returns a tar reader over it, gzip or
// plain tar by their magic numbers, with the file's bytes and the
// decompressed bytes bounded, and every read checking ctx.
func openStream(ctx context.Context, open func() (io.ReadCloser, error), name string, lim Limits) (*stream, error) {
	f, err := open()
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", name, err)
	}
	// The file itself is bounded too: a stream of empty gzip members or
	// empty deflate blocks inflates to nothing, forever.
	raw := &capReader{ctx: ctx, r: f, left: lim.MaxArchiveBytes, over: errArchiveTooLarge}
	br := bufio.NewReaderSize(raw, 64<<10)
	head, _ := br.Peek(512)
	var data io.Reader = br
	switch {
	case len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, &UnpackError{Archive: name, Reason: "corrupt gzip header: " + err.Error()}
		}
		inner, err := gzipHoldsTar(ctx, zr, name)
		if err != nil {
			f.Close()
			return nil, err
		}
		data = inner
	case len(head) >= 262 && bytes.Equal(head[257:262], []byte("ustar")):
	case len(head) == 0:
		f.Close()
		if err := ctx.Err(); err != nil {
			return nil, stopped(ctx, name)
		}
		return nil, &UnpackError{Archive: name, Reason: "empty file, not a snapshot archive"}
	default:
		f.Close()
		return nil, &UnpackError{Archive: name, Reason: "not a .tar.gz or .tar archive (give a snapshot written by `rdmadoctor snapshot -o FILE.tar.gz`, or a directory)"}
	}
	limited := &capReader{ctx: ctx, r: data, left: lim.MaxTotalBytes + tarOverhead, over: errInflated}
	return &stream{tr: tar.NewReader(limited), data: limited, file: f}, nil
}

// gzipHoldsTar looks at the first tar block inside a gzip stream. A
// stream that ends whole (its checksum read) before one block, or whose
// first block is not a ustar header, is gzip of something else: refused
// as such, not as a truncated archive. A stream cut off is still truncated
// (scan says so), and an empty tar (a zero block) is judged by scan too.
func gzipHoldsTar(ctx context.Context, zr *gzip.Reader, name string) (io.Reader, error) {
	br := bufio.NewReaderSize(zr, 512)
	head, err := br.Peek(512)
	notTar := func(what string) error {
		return &UnpackError{Archive: name, Reason: "a gzip stream, but " + what + " is not a tar archive (give a snapshot written by `rdmadoctor snapshot -o FILE.tar.gz`, or a directory)"}
	}
	switch {
	case err == nil:
		if !bytes.Equal(head[257:262], []byte("ustar")) && !bytes.Equal(head, make([]byte, 512)) {
			return nil, notTar("what it holds")
		}
	case errors.Is(err, io.EOF) && ctx.Err() == nil:
		return nil, notTar(fmt.Sprintf("what it holds (%d bytes, less than one tar header)", len(head)))
	}
	return br, nil // a read error shows again, and is judged, in scan
}

// finish reads what follows the tar end marker — record padding, then the
// gzip trailer with its checksum — and refuses more than maxTrailer bytes
// of it rather than reading on.
func (s *stream) finish(name, last string) error {
	n, err := io.Copy(io.Discard, io.LimitReader(s.data, maxTrailer+1))
	if err != nil {
		return streamErr(s.data.ctx, name, last, err)
	}
	if n > maxTrailer {
		return &UnpackError{Archive: name, Reason: fmt.Sprintf("more than %d bytes follow the end of the tar archive", maxTrailer)}
	}
	return nil
}

// capReader fails once more than left bytes have come through it — a small
// archive that inflates to gigabytes stops here — and as soon as ctx is
// done.
type capReader struct {
	ctx  context.Context
	r    io.Reader
	left int64
	over error // returned past the limit
}

var (
	errInflated        = errors.New("decompresses to more bytes than the limit")
	errArchiveTooLarge = errors.New("the archive file is larger than the limit")
)

func (c *capReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if c.left <= 0 {
		return 0, c.over
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// stopped is the error of an unpack cut short by ctx: not a refusal.
func stopped(ctx context.Context, name string) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("snapshot %s: unpacking stopped: %v: %w", name, cause, err)
	}
	return fmt.Errorf("snapshot %s: unpacking stopped: %w", name, err)
}

// streamErr turns a read error into a refusal naming the last good entry.
func streamErr(ctx context.Context, name, after string, err error) error {
	if ctx.Err() != nil {
		return stopped(ctx, name)
	}
	why := err.Error()
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		why = "the archive is truncated (unexpected end of data)"
	case errors.Is(err, errInflated), errors.Is(err, errArchiveTooLarge):
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

// scanned is what the first pass accepted: the entries to write, the kind
// of every path they name or imply, and how many headers it read.
type scanned struct {
	plan    []planned
	kinds   map[string]byte // accepted names → kind; implied parents as TypeDir
	headers int
}

// maxNameBytes bounds the entry names and link targets of one archive.
const maxNameBytes = 32 << 20

// scan is the first pass: read and judge every entry, write nothing.
//
// MaxEntries bounds two counts: the headers read (so repeating one
// directory entry costs as much as new entries do) and the distinct paths
// named or implied (so "a/b/c/…/f" counts every directory writing it
// makes).
func scan(ctx context.Context, open func() (io.ReadCloser, error), name string, lim Limits) (*scanned, error) {
	s, err := openStream(ctx, open, name, lim)
	if err != nil {
		return nil, err
	}
	defer s.file.Close()
	sc := &scanned{kinds: map[string]byte{}}
	var (
		total     int64
		nameBytes int
		last      string
	)
	for {
		if ctx.Err() != nil {
			return nil, stopped(ctx, name)
		}
		h, err := s.tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, streamErr(ctx, name, last, err)
		}
		if sc.headers++; sc.headers > lim.MaxEntries {
			return nil, &UnpackError{Archive: name, Entry: h.Name, Reason: fmt.Sprintf("more than %d entries in the archive", lim.MaxEntries)}
		}
		// The names are held in memory until the archive is judged whole:
		// bound them too (a real snapshot's names add up to well under 1 MiB).
		if nameBytes += len(h.Name) + len(h.Linkname); nameBytes > maxNameBytes {
			return nil, &UnpackError{Archive: name, Entry: h.Name, Reason: fmt.Sprintf("the entry names add up to more than %d bytes", maxNameBytes)}
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue // archive-wide PAX comment (git archive writes one)
		}
		p, err := judge(h, sc.kinds, lim)
		if err != nil {
			return nil, &UnpackError{Archive: name, Entry: h.Name, Reason: err.Error()}
		}
		if len(sc.kinds) > lim.MaxEntries {
			return nil, &UnpackError{Archive: name, Entry: h.Name, Reason: fmt.Sprintf("more than %d entries in the archive, counting the directories their paths imply", lim.MaxEntries)}
		}
		if p.kind == tar.TypeReg {
			total += p.size
			if total > lim.MaxTotalBytes {
				return nil, &UnpackError{Archive: name, Entry: h.Name, Reason: fmt.Sprintf("the files add up to more than %d bytes", lim.MaxTotalBytes)}
			}
			// Read the content through: a truncated archive must fail here.
			if n, err := io.Copy(io.Discard, s.tr); err != nil || n != p.size {
				if err == nil {
					err = io.ErrUnexpectedEOF
				}
				return nil, streamErr(ctx, name, h.Name, err)
			}
		}
		if p.kind != 0 {
			sc.plan = append(sc.plan, p)
		}
		last = h.Name
	}
	// The tar end marker is not the end of the gzip stream: read to the end
	// so that a bad checksum or a cut-off trailer is seen.
	if err := s.finish(name, last); err != nil {
		return nil, err
	}
	if len(sc.plan) == 0 {
		return nil, &UnpackError{Archive: name, Reason: "the archive holds no entries"}
	}
	return sc, nil
}

// judge checks one header against everything accepted before it. A zero
// kind in the result means "accepted, nothing to write": a repeated
// directory, or the archive root itself ("./", as `tar czf x.tgz -C dir .`
// writes it).
func judge(h *tar.Header, kinds map[string]byte, lim Limits) (planned, error) {
	name, err := cleanName(h.Name)
	if err != nil {
		return planned{}, err
	}
	if name == "." {
		if h.Typeflag == tar.TypeDir {
			return planned{}, nil
		}
		return planned{}, errors.New("names the archive root itself")
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
		if _, ok := kinds[d]; ok {
			break // its parents were added with it
		}
		kinds[d] = tar.TypeDir
	}
	return p, nil
}

// cleanName accepts a relative, clean-able name without "..", no deeper
// than maxNameDepth, each component a name the kernel takes. "." (the
// archive root) is returned for the caller to judge.
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
		if len(el) > maxElemLen {
			// The name is in the error already, once: not again here.
			return "", fmt.Errorf("a path component is longer than %d bytes", maxElemLen)
		}
	}
	c := path.Clean(n)
	if strings.Count(c, "/") >= maxNameDepth {
		return "", fmt.Errorf("deeper than %d levels", maxNameDepth)
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
		return fmt.Errorf("symlink to the absolute path %s, outside the snapshot", shortQuote(target))
	case escapesLexically(name, target):
		return fmt.Errorf("symlink to %s leads outside the snapshot root", shortQuote(target))
	}
	return nil
}

// extract is the second pass: write exactly the planned entries.
func extract(ctx context.Context, open func() (io.ReadCloser, error), name, dest string, sc *scanned, lim Limits) error {
	root, err := os.OpenRoot(dest)
	if err != nil {
		return fmt.Errorf("snapshot %s: open %s: %w", name, dest, err)
	}
	defer root.Close()
	s, err := openStream(ctx, open, name, lim)
	if err != nil {
		return err
	}
	defer s.file.Close()
	changed := func(entry string) error {
		return &UnpackError{Archive: name, Entry: entry, Reason: "the archive changed while it was being read"}
	}
	plan := sc.plan
	kinds := map[string]byte{}
	w := &writer{root: root, made: map[string]bool{}}
	i, headers := 0, 0
	for {
		if ctx.Err() != nil {
			return stopped(ctx, name)
		}
		h, err := s.tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return streamErr(ctx, name, "", err)
		}
		if headers++; headers > sc.headers {
			return changed(h.Name)
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
		if err := w.entry(s.tr, p); err != nil {
			if ctx.Err() != nil {
				return stopped(ctx, name)
			}
			return &UnpackError{Archive: name, Entry: h.Name, Reason: err.Error()}
		}
	}
	if i != len(plan) {
		return changed("")
	}
	return s.finish(name, "")
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
// holds the facts file or the manifest (as `rdmadoctor snapshot` writes
// it), or sys/ or proc/ (a host directory or fixture archived by name),
// else the archive root.
func hostRoot(plan []planned, kinds map[string]byte) string {
	top := ""
	for _, p := range plan {
		first, _, _ := strings.Cut(p.name, "/")
		if top == "" {
			top = first
		} else if first != top {
			return ""
		}
	}
	if kinds[top] != tar.TypeDir {
		return ""
	}
	for _, f := range []string{sysfs.FactsFile, ManifestFile} {
		if k := kinds[top+"/"+f]; k == tar.TypeReg || k == tar.TypeLink {
			return top
		}
	}
	// A root holding only sys/ is not a top directory named sys holding
	// another: /proc/sys exists, so a root of only proc/ is not either.
	if top == "sys" || top == "proc" {
		return ""
	}
	if kinds[top+"/sys"] == tar.TypeDir || kinds[top+"/proc"] == tar.TypeDir {
		return top
	}
	return ""
}
