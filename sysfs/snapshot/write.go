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
// exist or be empty.
func (s *Snapshot) WriteDir(dir string) error {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("write %s: directory is not empty", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	for _, e := range s.Tree.Entries() {
		name := filepath.Join(dir, filepath.FromSlash(e.Path))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		var err error
		switch e.Kind {
		case Dir:
			err = os.Mkdir(name, e.Perm|0o700)
			if errors.Is(err, fs.ErrExist) {
				err = nil
			}
		case File:
			err = os.WriteFile(name, e.Data, e.Perm)
		case Symlink:
			err = os.Symlink(e.Target, name)
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return s.writeTop(func(n string, data []byte) error {
		return os.WriteFile(filepath.Join(dir, n), data, 0o644)
	})
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
// directory, renamed when complete, and returns its size.
func writeFileAtomic(file string, write func(io.Writer) error) (int64, error) {
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
