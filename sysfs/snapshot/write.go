package snapshot

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Format is how a snapshot is written, chosen by the output name.
type Format int

const (
	FormatDir   Format = iota // a host directory
	FormatTarGz               // .tar.gz or .tgz
	FormatTar                 // .tar, uncompressed
)

// archiveExts are the names written as archives, longest first.
var archiveExts = []struct {
	ext    string
	format Format
}{{".tar.gz", FormatTarGz}, {".tgz", FormatTarGz}, {".tar", FormatTar}}

// otherArchiveExts are archive names this tool does not write: writing a
// directory by such a name would only mislead.
var otherArchiveExts = []string{
	".tar.bz2", ".tbz2", ".tbz", ".tar.xz", ".txz", ".tar.zst", ".tzst", ".tar.lz4", ".tar.lz", ".tar.lzma", ".tar.z",
	".zip", ".7z", ".rar", ".gz", ".bz2", ".xz", ".zst", ".lz4",
}

// OutputFormat is the format `snapshot -o name` writes: .tar.gz or .tgz a
// gzip-compressed tar, .tar a plain tar, anything else a directory — except
// a name of another archive format (.zip, .tar.xz, …), which is an error.
// Case does not matter.
func OutputFormat(name string) (Format, error) {
	lower := strings.ToLower(name)
	for _, a := range archiveExts {
		if strings.HasSuffix(lower, a.ext) {
			return a.format, nil
		}
	}
	for _, ext := range otherArchiveExts {
		if strings.HasSuffix(lower, ext) {
			return FormatDir, fmt.Errorf("%s: %s archives are not written; give FILE.tar.gz, FILE.tgz, FILE.tar or a directory", name, name[len(name)-len(ext):])
		}
	}
	return FormatDir, nil
}

// ArchivePrefix is the top directory inside the archive written to file:
// its base name without the extension, so `tar xzf NAME.tar.gz` makes one
// directory NAME instead of spilling sys/ and proc/ into the current one.
func ArchivePrefix(file string) string {
	b := filepath.Base(file)
	for _, a := range archiveExts {
		if strings.HasSuffix(strings.ToLower(b), a.ext) {
			b = b[:len(b)-len(a.ext)]
			break
		}
	}
	if b == "" || b == "." || b == ".." {
		return "rdmadoctor-snapshot"
	}
	return b
}

// WriteDir writes the snapshot as a host directory at dir, which must not
// exist or be an empty directory — not a symlink to one.
//
// Everything is written through an os.Root on dir, and nothing inside it
// is ever followed or reused: each directory is made with mkdir (which
// fails on anything already there, a symlink included), each file created
// O_EXCL (which never opens through a symlink). A symlink planted in the
// output tree while the snapshot is written — dir in a directory others
// can write, such as /tmp — makes the write fail; it never redirects it.
func (s *Snapshot) WriteDir(dir string) error {
	root, err := openOutputDir(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	w := &dirWriter{dir: dir, root: root, made: map[string]bool{}}
	for _, e := range s.Tree.Entries() {
		if err := w.put(e); err != nil {
			return err
		}
	}
	return s.writeTop(func(n string, data []byte) error { return w.file(n, data, 0o644) })
}

// afterOutputOpened runs, in tests only, once WriteDir holds its output
// directory: where a test plants what another user could plant then.
var afterOutputOpened = func(dir string) {}

// openOutputDir makes dir (its parents as needed) or takes it when it is
// an empty directory, and returns an os.Root on it. A symlink at dir is
// refused, and so is a directory swapped in between the check and the
// open: the Root is on the very directory that was checked.
func openOutputDir(dir string) (*os.Root, error) {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, fmt.Errorf("write %s: %w", dir, err)
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("write %s: %w", dir, err)
		}
	case err != nil:
		return nil, fmt.Errorf("write %s: %w", dir, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("write %s: it is a symlink; give a new or empty directory", dir)
	case !fi.IsDir():
		return nil, fmt.Errorf("write %s: it exists and is not a directory", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", dir, err)
	}
	if err := checkOutputRoot(root, dir); err != nil {
		root.Close()
		return nil, err
	}
	afterOutputOpened(dir)
	return root, nil
}

// checkOutputRoot makes sure the opened root is the directory dir names
// now, not a symlink swapped in, and that it is empty.
func checkOutputRoot(root *os.Root, dir string) error {
	opened, err := root.Stat(".")
	if err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	if now, err := os.Lstat(dir); err != nil || !os.SameFile(opened, now) {
		return fmt.Errorf("write %s: the directory was replaced while it was being opened", dir)
	}
	d, err := root.Open(".")
	if err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	defer d.Close()
	if names, _ := d.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("write %s: directory is not empty", dir)
	}
	return nil
}

// dirWriter writes tree entries through root, making each directory once
// and never writing into anything it did not make itself.
type dirWriter struct {
	dir  string
	root *os.Root
	made map[string]bool
}

// fail names the path under dir that could not be written.
func (w *dirWriter) fail(p string, err error) error {
	if errors.Is(err, fs.ErrExist) {
		err = fmt.Errorf("%w (something else wrote into the output directory; nothing there is reused)", err)
	}
	return fmt.Errorf("write %s: %w", filepath.Join(w.dir, filepath.FromSlash(p)), err)
}

// mkdirs makes p and its missing parents, each with mkdir: one that exists
// already and was not made here is an error.
func (w *dirWriter) mkdirs(p string, perm fs.FileMode) error {
	if p == "." || w.made[p] {
		return nil
	}
	if err := w.mkdirs(path.Dir(p), 0o755); err != nil {
		return err
	}
	if err := w.root.Mkdir(p, perm); err != nil {
		return w.fail(p, err)
	}
	w.made[p] = true
	return nil
}

func (w *dirWriter) put(e *Entry) error {
	if err := w.mkdirs(path.Dir(e.Path), 0o755); err != nil {
		return err
	}
	switch e.Kind {
	case Dir:
		if w.made[e.Path] {
			return nil
		}
		return w.mkdirs(e.Path, e.Perm|0o700)
	case File:
		return w.file(e.Path, e.Data, e.Perm)
	case Symlink:
		if err := w.root.Symlink(e.Target, e.Path); err != nil {
			return w.fail(e.Path, err)
		}
	}
	return nil
}

// file creates p (O_EXCL: never through a symlink, never over a file) with
// its final mode and writes data.
func (w *dirWriter) file(p string, data []byte, perm fs.FileMode) error {
	f, err := w.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return w.fail(p, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return w.fail(p, err)
	}
	return nil
}

// writeTop writes the facts file, the kernel log and the manifest.
func (s *Snapshot) writeTop(write func(name string, data []byte) error) error {
	facts, err := s.factsJSON()
	if err != nil {
		return err
	}
	man, err := s.manifestJSON()
	if err != nil {
		return err
	}
	if err := write(sysfs.FactsFile, facts); err != nil {
		return err
	}
	if s.KernelLog != nil {
		if err := write(sysfs.KernelLogFile, s.KernelLog); err != nil {
			return err
		}
	}
	return write(ManifestFile, man)
}

// WriteTarGz writes the snapshot as a gzip-compressed tar whose entries all
// lie under the directory prefix. Only directories, regular files and
// relative symlinks are written, as Unpack accepts.
func (s *Snapshot) WriteTarGz(w io.Writer, prefix string) error {
	zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	if err := s.WriteTar(zw, prefix); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	return nil
}

// archiveEntries is the number of entries WriteTar writes: the top
// directory, the tree, any parent directory the tree lacks, and the facts
// file and the manifest. Unpack counts them against MaxEntries.
func (s *Snapshot) archiveEntries() int {
	n := 3 + s.Tree.Len()
	if s.KernelLog != nil {
		n++
	}
	seen := map[string]bool{}
	for _, e := range s.Tree.Entries() {
		for d := path.Dir(e.Path); d != "." && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			if s.Tree.Lookup(d) == nil {
				n++
			}
		}
	}
	return n
}

// WriteTar writes the snapshot as an uncompressed tar, as WriteTarGz does.
func (s *Snapshot) WriteTar(w io.Writer, prefix string) error {
	tw := tar.NewWriter(w)
	// Whole seconds: a sub-second time would cost a PAX record per entry.
	mtime := s.Manifest.CapturedAt.Truncate(time.Second)
	hdr := func(name string, typ byte, mode fs.FileMode) *tar.Header {
		return &tar.Header{Name: name, Typeflag: typ, Mode: int64(mode), ModTime: mtime}
	}
	if err := tw.WriteHeader(hdr(prefix+"/", tar.TypeDir, 0o755)); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	dirs := map[string]bool{}
	for _, e := range s.Tree.Entries() {
		// Parents normally precede their children; make sure of it.
		for d := path.Dir(e.Path); d != "." && !dirs[d]; d = path.Dir(d) {
			if s.Tree.Lookup(d) == nil {
				if err := tw.WriteHeader(hdr(prefix+"/"+d+"/", tar.TypeDir, 0o755)); err != nil {
					return fmt.Errorf("write archive: %w", err)
				}
			}
			dirs[d] = true
		}
		name := prefix + "/" + e.Path
		var h *tar.Header
		switch e.Kind {
		case Dir:
			h = hdr(name+"/", tar.TypeDir, e.Perm|0o700)
			dirs[e.Path] = true
		case File:
			h = hdr(name, tar.TypeReg, e.Perm)
			h.Size = int64(len(e.Data))
		case Symlink:
			h = hdr(name, tar.TypeSymlink, 0o777)
			h.Linkname = e.Target
		default:
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("write archive entry %s: %w", e.Path, err)
		}
		if e.Kind == File {
			if _, err := tw.Write(e.Data); err != nil {
				return fmt.Errorf("write archive entry %s: %w", e.Path, err)
			}
		}
	}
	err := s.writeTop(func(n string, data []byte) error {
		h := hdr(prefix+"/"+n, tar.TypeReg, 0o644)
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("write archive entry %s: %w", n, err)
		}
		_, err := tw.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write archive: %w", err)
	}
	return nil
}

// WriteTarGzFile writes the archive to file atomically (a temporary file in
// the same directory, renamed when complete) and returns its size.
func (s *Snapshot) WriteTarGzFile(file string) (int64, error) {
	return writeFileAtomic(file, func(w io.Writer) error { return s.WriteTarGz(w, ArchivePrefix(file)) })
}

// WriteTarFile is WriteTarGzFile for an uncompressed tar.
func (s *Snapshot) WriteTarFile(file string) (int64, error) {
	return writeFileAtomic(file, func(w io.Writer) error { return s.WriteTar(w, ArchivePrefix(file)) })
}

// writeFileAtomic writes file through a temporary file in the same
// directory (created O_EXCL, so never through a symlink), synced and
// renamed when complete, and returns its size. A file that exists and is
// not a regular file — a symlink, a FIFO, a device — is refused rather
// than replaced: `-o` names where a snapshot goes, not something to
// overwrite. On failure the old file, if any, is left as it was.
func writeFileAtomic(file string, write func(io.Writer) error) (int64, error) {
	if fi, err := os.Lstat(file); err == nil && !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("write %s: it exists and is not a regular file (%s); give a new name", file, fileKind(fi.Mode()))
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".rdmadoctor-snapshot-*")
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", file, err)
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return 0, fmt.Errorf("write %s: %w", file, err)
	}
	fi, err := tmp.Stat()
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", file, err)
	}
	return fi.Size(), nil
}

// fileKind names what a non-regular file is, for an error.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return m.Type().String()
}
