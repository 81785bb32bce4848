package snapshot_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/sysfs/snapshot"
)

// ent is one tar header to write, with its content for a file.
type ent struct {
	name, link string
	typ        byte
	body       string
	size       int64 // declared size when different from len(body)
}

func file(name, body string) ent       { return ent{name: name, typ: tar.TypeReg, body: body} }
func dir(name string) ent              { return ent{name: name, typ: tar.TypeDir} }
func symlink(name, target string) ent  { return ent{name: name, typ: tar.TypeSymlink, link: target} }
func hardlink(name, target string) ent { return ent{name: name, typ: tar.TypeLink, link: target} }

// tarGz writes the headers as given: archive/tar does not judge names or
// link targets, which is what a hostile archive needs. A declared size
// larger than the body leaves the archive cut after that header.
func tarGz(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range ents {
		size := int64(len(e.body))
		if e.size != 0 {
			size = e.size
		}
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644, Size: size, ModTime: time.Unix(1700000000, 0)}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if e.typ == tar.TypeChar || e.typ == tar.TypeBlock {
			h.Devmajor, h.Devminor = 231, 192
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("header %s: %v", e.name, err)
		}
		if e.body != "" {
			tw.Write([]byte(e.body))
		}
		if e.size > int64(len(e.body)) {
			tw.Flush() // fails (content missing); the header is written
			zw.Close()
			return buf.Bytes()
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return buf.Bytes()
}

// unpackBytes writes data to a file and unpacks it as --root does, with
// TMPDIR pointed at a directory the test then checks is empty again.
func unpackBytes(t *testing.T, data []byte) (string, func(), error) {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	file := filepath.Join(t.TempDir(), "in.tar.gz")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	root, cleanup, err := snapshot.UnpackFile(context.Background(), file, snapshot.DefaultLimits())
	if err != nil {
		left, _ := os.ReadDir(tmp)
		if len(left) > 0 {
			t.Errorf("a refused archive left %d entries in the temporary directory", len(left))
		}
	}
	return root, cleanup, err
}

func TestUnpackRefusesHostileArchives(t *testing.T) {
	healthy := file("snap/rdmadoctor.facts.json", `{"schema":"rdmadoctor.facts/v1"}`)
	cases := []struct {
		name    string
		ents    []ent
		entry   string // the entry the error must name ("" for the archive)
		because string
	}{
		{"zip-slip dotdot", []ent{healthy, file("snap/../../evil", "x")}, "snap/../../evil", `climbs out with ".."`},
		{"zip-slip leading dotdot", []ent{file("../evil", "x")}, "../evil", `".."`},
		{"zip-slip inner dotdot", []ent{file("a/b/../../../evil", "x")}, "a/b/../../../evil", `".."`},
		{"absolute path", []ent{file("/tmp/evil", "x")}, "/tmp/evil", "absolute path"},
		{"symlink to /etc/shadow", []ent{healthy, symlink("snap/sys/shadow", "/etc/shadow")}, "snap/sys/shadow", `absolute path "/etc/shadow"`},
		{"symlink climbing out", []ent{symlink("snap/sys/up", "../../../etc/shadow")}, "snap/sys/up", "outside the snapshot root"},
		{"symlink chain climbing out", []ent{
			dir("a/b/c/"), symlink("a/b/c/top", "../../.."), symlink("z", "a/b/c/top/../etc/shadow"),
		}, "z", "through other links"},
		{"write through a symlink", []ent{dir("snap/"), symlink("snap/l", "."), file("snap/l/x", "x")}, "snap/l/x", "under the symlink"},
		{"hard link outside", []ent{hardlink("snap/passwd", "/etc/passwd")}, "snap/passwd", "absolute path"},
		{"hard link dotdot", []ent{hardlink("snap/passwd", "../../etc/passwd")}, "snap/passwd", `".."`},
		{"hard link to nothing", []ent{hardlink("snap/x", "snap/missing")}, "snap/x", "not a file earlier in the archive"},
		{"character device", []ent{healthy, {name: "snap/dev/infiniband/uverbs0", typ: tar.TypeChar}}, "snap/dev/infiniband/uverbs0", "device file"},
		{"block device", []ent{{name: "snap/dev/sda", typ: tar.TypeBlock}}, "snap/dev/sda", "device file"},
		{"FIFO", []ent{{name: "snap/fifo", typ: tar.TypeFifo}}, "snap/fifo", "FIFO"},
		{"10 GB file", []ent{healthy, {name: "snap/big", typ: tar.TypeReg, size: 10 << 30}}, "snap/big", "more than the per-file limit"},
		{"duplicate", []ent{file("snap/a", "1"), file("snap/a", "2")}, "snap/a", "appears twice"},
		{"file then under it", []ent{file("snap/a", "1"), file("snap/a/b", "2")}, "snap/a/b", "under the file"},
		{"empty archive", nil, "", "no entries"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := unpackBytes(t, tarGz(t, c.ents...))
			assertRefused(t, err, c.entry, c.because)
		})
	}
}

func assertRefused(t *testing.T, err error, entry, because string) {
	t.Helper()
	var ue *snapshot.UnpackError
	if !errors.As(err, &ue) {
		t.Fatalf("not refused (err %v)", err)
	}
	if ue.Entry != entry {
		t.Errorf("error names entry %q, want %q: %v", ue.Entry, entry, err)
	}
	if !strings.Contains(err.Error(), because) {
		t.Errorf("error %q does not say %q", err, because)
	}
	if entry != "" && !strings.Contains(err.Error(), strconv.Quote(entry)) {
		t.Errorf("error %q does not quote the entry", err)
	}
}

// gnuSparse is a GNU old-format sparse header declaring a 10 GiB file with
// one byte of data at its end: 1.5 KB on disk, 10 GiB once written.
func gnuSparse(t *testing.T) []byte {
	var blk [512]byte
	copy(blk[0:], "snap/sparse")
	copy(blk[100:], "0000644\x00")
	copy(blk[108:], "0000000\x00")
	copy(blk[116:], "0000000\x00")
	copy(blk[124:], fmt.Sprintf("%011o\x00", 1))          // bytes stored
	copy(blk[136:], fmt.Sprintf("%011o\x00", 1700000000)) // mtime
	blk[156] = tar.TypeGNUSparse
	copy(blk[257:], "ustar  \x00")
	real := int64(10 << 30)
	copy(blk[386:], fmt.Sprintf("%011o\x00", real-1)) // sparse[0].offset
	copy(blk[398:], fmt.Sprintf("%011o\x00", 1))      // sparse[0].numbytes
	copy(blk[483:], fmt.Sprintf("%011o\x00", real))   // realsize
	copy(blk[148:], "        ")
	sum := 0
	for _, b := range blk {
		sum += int(b)
	}
	copy(blk[148:], fmt.Sprintf("%06o\x00 ", sum))
	var raw bytes.Buffer
	raw.Write(blk[:])
	data := make([]byte, 512)
	data[0] = 'x'
	raw.Write(data)
	raw.Write(make([]byte, 1024)) // end of archive
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(raw.Bytes())
	zw.Close()
	return buf.Bytes()
}

func TestUnpackRefusesSparseBomb(t *testing.T) {
	// The header alone is refused: nothing is written, let alone 10 GiB.
	_, _, err := unpackBytes(t, gnuSparse(t))
	assertRefused(t, err, "snap/sparse", "more than the per-file limit")
}

func TestUnpackRefusesTooManyEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 200,000-entry archive")
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	for i := range 200000 {
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("snap/f%06d", i), Typeflag: tar.TypeReg, Mode: 0o644})
	}
	tw.Close()
	zw.Close()
	start := time.Now()
	_, _, err := unpackBytes(t, buf.Bytes())
	// The implied directory snap/ is one of the entries: the 50,000th file
	// is the 50,001st path.
	assertRefused(t, err, fmt.Sprintf("snap/f%06d", snapshot.DefaultLimits().MaxEntries-1), "more than 50000 entries")
	t.Logf("refused in %v (%d bytes compressed)", time.Since(start), buf.Len())
}

func TestUnpackRefusesTooMuchNameText(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an archive with 36 MB of names")
	}
	// Long names within every other limit (4,096 bytes a name, 255 a
	// component, 48 levels, 50,000 entries): 9,000 names of ~3,970 bytes.
	parent := "snap"
	for range 14 {
		parent += "/" + strings.Repeat("d", 250)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	for i := range 9000 {
		tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%s/%0250d/%0200d", parent, i, i), Typeflag: tar.TypeReg, Mode: 0o644})
	}
	tw.Close()
	zw.Close()
	_, _, err := unpackBytes(t, buf.Bytes())
	if err == nil || !strings.Contains(err.Error(), "entry names add up to more than") {
		t.Fatalf("err %v, want the name-bytes limit", err)
	}
}

func TestUnpackRefusesTooManyBytes(t *testing.T) {
	lim := snapshot.DefaultLimits()
	lim.MaxTotalBytes = 10
	data := tarGz(t, file("snap/a", "123456"), file("snap/b", "123456"))
	_, err := snapshot.Unpack(context.Background(), opener(data), "x.tar.gz", t.TempDir(), lim)
	assertRefused(t, err, "snap/b", "add up to more than 10 bytes")
}

func opener(data []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
}

func TestUnpackRefusesTruncatedAndCorrupt(t *testing.T) {
	good := archiveOf(t, capture(t, healthy, false))
	t.Run("truncated gzip", func(t *testing.T) {
		for _, cut := range []int{10, len(good) / 3, len(good) / 2, len(good) - 4} {
			_, _, err := unpackBytes(t, good[:cut])
			assertRefused(t, err, "", "truncated")
		}
	})
	t.Run("corrupt gzip", func(t *testing.T) {
		bad := bytes.Clone(good)
		bad[len(bad)/2] ^= 0xff
		_, _, err := unpackBytes(t, bad)
		assertRefused(t, err, "", "corrupt")
	})
	t.Run("bad checksum", func(t *testing.T) {
		bad := bytes.Clone(good)
		bad[len(bad)-8] ^= 0x01 // the CRC-32 in the gzip trailer
		_, _, err := unpackBytes(t, bad)
		assertRefused(t, err, "", "corrupt")
	})
	t.Run("not an archive", func(t *testing.T) {
		_, _, err := unpackBytes(t, []byte("hello, this is not a tar\n"))
		assertRefused(t, err, "", "not a .tar.gz")
	})
	// gzip of something else is not a truncated archive: it says so.
	gz := func(body []byte) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(body)
		zw.Close()
		return b.Bytes()
	}
	t.Run("gzip of a short text", func(t *testing.T) {
		_, _, err := unpackBytes(t, gz([]byte("hello\n")))
		assertRefused(t, err, "", "a gzip stream, but what it holds (6 bytes, less than one tar header) is not a tar archive")
	})
	t.Run("gzip of a long text", func(t *testing.T) {
		_, _, err := unpackBytes(t, gz(bytes.Repeat([]byte("not a tar\n"), 100)))
		assertRefused(t, err, "", "a gzip stream, but what it holds is not a tar archive")
	})
	t.Run("gzip of an empty tar", func(t *testing.T) {
		_, _, err := unpackBytes(t, gz(make([]byte, 1024)))
		assertRefused(t, err, "", "holds no entries")
	})
	t.Run("empty file", func(t *testing.T) {
		_, _, err := unpackBytes(t, nil)
		assertRefused(t, err, "", "empty file")
	})
}

// TestUnpackChangedBetweenPasses: an archive that changes after it was
// judged is refused, not half written.
func TestUnpackChangedBetweenPasses(t *testing.T) {
	first := tarGz(t, file("snap/a", "1"), file("snap/b", "2"))
	second := tarGz(t, file("snap/a", "1"), symlink("snap/b", "/etc/shadow"))
	calls := 0
	open := func() (io.ReadCloser, error) {
		calls++
		if calls == 1 {
			return io.NopCloser(bytes.NewReader(first)), nil
		}
		return io.NopCloser(bytes.NewReader(second)), nil
	}
	_, err := snapshot.Unpack(context.Background(), open, "x.tar.gz", t.TempDir(), snapshot.DefaultLimits())
	assertRefused(t, err, "snap/b", "changed while it was being read")
}

// TestUnpackAccepts: what a snapshot legitimately holds comes out as it
// went in — relative links (dangling ones too), modes, hard links inside,
// a plain tar, an archive without a top directory.
func TestUnpackAccepts(t *testing.T) {
	data := tarGz(t,
		dir("snap/"),
		file("snap/rdmadoctor.manifest.json", "{}"),
		dir("snap/sys/devices/pci0000:00/0000:00:01.0/"),
		file("snap/sys/devices/pci0000:00/0000:00:01.0/vendor", "0x15b3\n"),
		symlink("snap/sys/bus/pci/devices/0000:00:01.0", "../../../devices/pci0000:00/0000:00:01.0"),
		symlink("snap/sys/dangling", "nowhere"),
		hardlink("snap/sys/vendor2", "snap/sys/devices/pci0000:00/0000:00:01.0/vendor"),
	)
	root, cleanup, err := unpackBytes(t, data)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(root) != "snap" {
		t.Errorf("root %s, want the top directory", root)
	}
	got, err := os.ReadFile(filepath.Join(root, "sys/bus/pci/devices/0000:00:01.0/vendor"))
	if err != nil || string(got) != "0x15b3\n" {
		t.Errorf("read through the link: %q, %v", got, err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "sys/vendor2")); string(got) != "0x15b3\n" {
		t.Errorf("hard link: %q", got)
	}
	tmp := filepath.Dir(root)
	cleanup()
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("cleanup left %s: %v", tmp, err)
	}

	// No top directory with a manifest: the archive root is the host root.
	root, cleanup, err = unpackBytes(t, tarGz(t, file("sys/x", "1"), file("proc/y", "2")))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if _, err := os.Stat(filepath.Join(root, "sys/x")); err != nil {
		t.Error(err)
	}
}

func TestUnpackPlainTar(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "sys/x", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
	tw.Write([]byte("1"))
	tw.Close()
	root, cleanup, err := unpackBytes(t, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if b, _ := os.ReadFile(filepath.Join(root, "sys/x")); string(b) != "1" {
		t.Errorf("got %q", b)
	}
}
