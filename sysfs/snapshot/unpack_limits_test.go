package snapshot_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs/snapshot"
)

// smallLimits keep the archives of these tests small.
func smallLimits() snapshot.Limits {
	lim := snapshot.DefaultLimits()
	lim.MaxEntries = 100
	return lim
}

// deepName is prefix/x/x/…/f with depth components in all.
func deepName(prefix string, depth int) string {
	return prefix + strings.Repeat("/x", depth-2) + "/f"
}

// assertEmpty fails when dir holds anything: a refused archive writes nothing.
func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("a refused archive left %d entries in %s", len(ents), dir)
	}
}

// TestUnpackCountsImpliedDirectories: a file deep down makes every
// directory above it, and each counts against MaxEntries — five headers
// that imply 200 directories are 205 entries, not 5.
func TestUnpackCountsImpliedDirectories(t *testing.T) {
	var ents []ent
	for i := range 5 {
		ents = append(ents, file(deepName(fmt.Sprintf("d%d", i), 40), "1"))
	}
	dest := t.TempDir()
	_, err := snapshot.Unpack(context.Background(), opener(tarGz(t, ents...)), "x.tar.gz", dest, smallLimits())
	assertRefused(t, err, ents[2].name, "more than 100 entries in the archive, counting the directories their paths imply")
	assertEmpty(t, dest)

	// With the default limits: the same shape, many times.
	ents = ents[:0]
	for i := range 2000 {
		ents = append(ents, file(deepName(fmt.Sprintf("d%d", i), 47), ""))
	}
	_, _, err = unpackBytes(t, tarGz(t, ents...))
	assertRefused(t, err, ents[50000/47].name, "more than 50000 entries")
}

func TestUnpackDepthLimit(t *testing.T) {
	ok := deepName("snap", 48)
	if _, err := snapshot.Unpack(context.Background(), opener(tarGz(t, file(ok, "1"))), "x.tar.gz", t.TempDir(), snapshot.DefaultLimits()); err != nil {
		t.Fatalf("48 levels refused: %v", err)
	}
	deep := deepName("snap", 49)
	_, _, err := unpackBytes(t, tarGz(t, file(deep, "1")))
	assertRefused(t, err, deep, "deeper than 48 levels")
	_, _, err = unpackBytes(t, tarGz(t, file("snap/a", "1"), hardlink("snap/b", deep)))
	assertRefused(t, err, "snap/b", "deeper than 48 levels")
}

// TestUnpackCountsRepeatedEntries: a directory entry repeated over and over
// writes nothing new, but each one read counts.
func TestUnpackCountsRepeatedEntries(t *testing.T) {
	ents := []ent{file("snap/rdmadoctor.manifest.json", "{}")}
	for range 200 {
		ents = append(ents, dir("snap/d/"))
	}
	_, err := snapshot.Unpack(context.Background(), opener(tarGz(t, ents...)), "x.tar.gz", t.TempDir(), smallLimits())
	assertRefused(t, err, "snap/d/", "more than 100 entries in the archive")

	ents = ents[:0]
	for range 200 {
		ents = append(ents, dir("./"))
	}
	_, err = snapshot.Unpack(context.Background(), opener(tarGz(t, ents...)), "x.tar.gz", t.TempDir(), smallLimits())
	assertRefused(t, err, "./", "more than 100 entries in the archive")
}

// TestUnpackAcceptsDotRoot: `tar czf x.tgz -C hostdir .` names the root
// "./" and everything below "./sys/…".
func TestUnpackAcceptsDotRoot(t *testing.T) {
	root, cleanup, err := unpackBytes(t, tarGz(t, dir("./"), dir("./sys/"), file("./sys/x", "1"), file("./proc/y", "2")))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if b, err := os.ReadFile(filepath.Join(root, "sys/x")); err != nil || string(b) != "1" {
		t.Errorf("sys/x: %q, %v", b, err)
	}
	// The root is the directory itself, not a file or a link.
	_, _, err = unpackBytes(t, tarGz(t, file(".", "x")))
	assertRefused(t, err, ".", "names the archive root itself")
	_, _, err = unpackBytes(t, tarGz(t, dir("sys/"), symlink(".", "sys")))
	assertRefused(t, err, ".", "names the archive root itself")
}

// TestUnpackRealTarOfDirectory: what tar(1) writes for a host directory,
// both ways it is usually called.
func TestUnpackRealTarOfDirectory(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("no tar(1)")
	}
	src := t.TempDir()
	host := filepath.Join(src, "node17")
	for _, d := range []string{"sys/class/infiniband/mlx5_0", "proc/sys/net"} {
		os.MkdirAll(filepath.Join(host, d), 0o755)
	}
	os.WriteFile(filepath.Join(host, "sys/class/infiniband/mlx5_0/node_type"), []byte("1: CA\n"), 0o644)
	os.WriteFile(filepath.Join(host, "proc/version"), []byte("Linux\n"), 0o644)
	for _, c := range []struct {
		dir, arg string
	}{{host, "."}, {src, "node17"}} {
		t.Run(c.arg, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "x.tgz")
			if b, err := exec.Command("tar", "czf", out, "-C", c.dir, c.arg).CombinedOutput(); err != nil {
				t.Fatalf("tar: %v: %s", err, b)
			}
			data, _ := os.ReadFile(out)
			root, cleanup, err := unpackBytes(t, data)
			if err != nil {
				t.Fatal(err)
			}
			defer cleanup()
			if b, _ := os.ReadFile(filepath.Join(root, "sys/class/infiniband/mlx5_0/node_type")); string(b) != "1: CA\n" {
				t.Errorf("host root %s does not hold sys/: %q", root, b)
			}
		})
	}
}

// TestUnpackRefusesLongComponent: a name the kernel would refuse (a
// component over 255 bytes) is refused while judging, before anything is
// written, and the error shows it once.
func TestUnpackRefusesLongComponent(t *testing.T) {
	long := "snap/sys/" + strings.Repeat("n", 256)
	dest := t.TempDir()
	_, err := snapshot.Unpack(context.Background(), opener(tarGz(t, file("snap/a", "1"), file(long, "x"))), "x.tar.gz", dest, snapshot.DefaultLimits())
	assertRefused(t, err, long, "a path component is longer than 255 bytes")
	if err != nil && strings.Count(err.Error(), strings.Repeat("n", 256)) != 1 {
		t.Errorf("the long name is not shown exactly once: %v", err)
	}
	assertEmpty(t, dest)

	ok := "snap/sys/" + strings.Repeat("n", 255)
	if _, err := snapshot.Unpack(context.Background(), opener(tarGz(t, file(ok, "x"))), "x.tar.gz", t.TempDir(), snapshot.DefaultLimits()); err != nil {
		t.Errorf("255-byte component refused: %v", err)
	}
}

// gzipOf compresses raw into one gzip member.
func gzipOf(raw []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(raw)
	zw.Close()
	return buf.Bytes()
}

func plainTar(t *testing.T, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))})
		tw.Write([]byte(e.body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestUnpackBoundsTheStream: after the tar end marker only record padding
// may follow, and the compressed file is bounded too — a stream of empty
// gzip members inflates to nothing, for ever.
func TestUnpackBoundsTheStream(t *testing.T) {
	raw := plainTar(t, file("sys/x", "1"))
	t.Run("padding", func(t *testing.T) {
		// GNU tar -b 2048: the end marker, then zeros to a 1 MiB record.
		padded := append(bytes.Clone(raw), make([]byte, 1<<20-len(raw))...)
		if _, err := snapshot.Unpack(context.Background(), opener(gzipOf(padded)), "x.tar.gz", t.TempDir(), snapshot.DefaultLimits()); err != nil {
			t.Errorf("1 MiB record refused: %v", err)
		}
	})
	t.Run("trailer", func(t *testing.T) {
		long := append(bytes.Clone(raw), make([]byte, 2<<20)...)
		for _, data := range [][]byte{gzipOf(long), long} {
			_, err := snapshot.Unpack(context.Background(), opener(data), "x.tar.gz", t.TempDir(), snapshot.DefaultLimits())
			assertRefused(t, err, "", "follow the end of the tar archive")
		}
	})
	t.Run("compressed", func(t *testing.T) {
		data := gzipOf(raw)
		lim := snapshot.DefaultLimits()
		lim.MaxArchiveBytes = int64(len(data)) + 4096
		if _, err := snapshot.Unpack(context.Background(), opener(data), "x.tar.gz", t.TempDir(), lim); err != nil {
			t.Fatalf("within the limit: %v", err)
		}
		for range 1000 {
			data = append(data, gzipOf(nil)...)
		}
		_, err := snapshot.Unpack(context.Background(), opener(data), "x.tar.gz", t.TempDir(), lim)
		assertRefused(t, err, "", "archive file is larger than the limit")

		// A file larger than the limit is refused by its size, unread.
		file := filepath.Join(t.TempDir(), "big.tar.gz")
		os.WriteFile(file, data, 0o644)
		_, _, err = snapshot.UnpackFile(context.Background(), file, lim)
		assertRefused(t, err, "", fmt.Sprintf("larger than %d bytes", lim.MaxArchiveBytes))
	})
}

// TestUnpackRootsTopDirectoryOfHost: a host directory archived by name has
// one top directory holding sys/ or proc/, and no facts file or manifest.
func TestUnpackRootsTopDirectoryOfHost(t *testing.T) {
	for _, ents := range [][]ent{
		{dir("node17/"), file("node17/sys/class/infiniband/mlx5_0/node_type", "1: CA\n"), file("node17/proc/version", "Linux\n")},
		{file("node17/sys/class/infiniband/mlx5_0/node_type", "1: CA\n")},
		{dir("node17/"), dir("node17/proc/"), file("node17/proc/version", "Linux\n")},
	} {
		root, cleanup, err := unpackBytes(t, tarGz(t, ents...))
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(root) != "node17" {
			t.Errorf("%s: host root %s, want the top directory", ents[len(ents)-1].name, root)
		}
		cleanup()
	}
	// A host root holding only proc/ (which has a sys/ of its own) or only
	// sys/ is the archive root.
	for _, ents := range [][]ent{
		{file("proc/sys/net/ipv4/ip_forward", "0\n"), file("proc/version", "Linux\n")},
		{file("sys/sys/x", "1")},
	} {
		root, cleanup, err := unpackBytes(t, tarGz(t, ents...))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, ents[0].name)); err != nil {
			t.Errorf("host root %s: %v", root, err)
		}
		cleanup()
	}
}

// TestUnpackChecksLinksAgainstHostRoot: once the top directory is the host
// root, a link may not climb out of it into the archive root.
func TestUnpackChecksLinksAgainstHostRoot(t *testing.T) {
	man := file("top/rdmadoctor.manifest.json", "{}")
	cases := []struct {
		name    string
		ents    []ent
		entry   string
		because string
	}{
		{"to the archive root", []ent{man, symlink("top/l", "..")}, "top/l", `leads outside the host root "top"`},
		{"beside the host root", []ent{man, dir("top/sys/"), symlink("top/sys/l", "../../other")}, "top/sys/l", `leads outside the host root "top"`},
		{"through another link", []ent{man, dir("top/sys/d/"), symlink("top/sys/up", "d/../.."), symlink("top/z", "sys/up/..")}, "top/z", "through other links"},
		{"host directory by name", []ent{dir("node/sys/"), symlink("node/sys/l", "../..")}, "node/sys/l", `leads outside the host root "node"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := unpackBytes(t, tarGz(t, c.ents...))
			assertRefused(t, err, c.entry, c.because)
		})
	}
	// With two top directories the archive root is the host root: the same
	// link stays inside.
	root, cleanup, err := unpackBytes(t, tarGz(t, man, symlink("top/l", ".."), file("other/x", "1")))
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if b, _ := os.ReadFile(filepath.Join(root, "top/l/other/x")); string(b) != "1" {
		t.Errorf("read through top/l: %q", b)
	}
}

// cancelReader cancels its context once after bytes have been read.
type cancelReader struct {
	r      io.Reader
	after  int
	cancel context.CancelFunc
}

func (c *cancelReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.after -= n; c.after <= 0 {
		c.cancel()
	}
	return n, err
}

func (c *cancelReader) Close() error { return nil }

// TestUnpackStopsWhenCancelled: an interrupt or a deadline during either
// pass stops the unpack with the context's error — not a refusal — and
// UnpackFile leaves nothing behind.
func TestUnpackStopsWhenCancelled(t *testing.T) {
	// Incompressible contents, so that the archive is read in many chunks.
	rng := rand.New(rand.NewPCG(1, 2))
	var ents []ent
	for i := range 400 {
		body := make([]byte, 4000)
		for j := range body {
			body[j] = byte(rng.Uint32())
		}
		ents = append(ents, file(fmt.Sprintf("snap/sys/f%03d", i), string(body)))
	}
	data := tarGz(t, ents...)
	for pass := 1; pass <= 2; pass++ {
		t.Run(fmt.Sprintf("pass %d", pass), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			opens := 0
			open := func() (io.ReadCloser, error) {
				opens++
				if opens == pass {
					return &cancelReader{r: bytes.NewReader(data), after: len(data) / 3, cancel: cancel}, nil
				}
				return io.NopCloser(bytes.NewReader(data)), nil
			}
			dest := t.TempDir()
			_, err := snapshot.Unpack(ctx, open, "x.tar.gz", dest, snapshot.DefaultLimits())
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "x.tar.gz") {
				t.Fatalf("err %v, want one naming the archive and wrapping context.Canceled", err)
			}
			var ue *snapshot.UnpackError
			if errors.As(err, &ue) {
				t.Errorf("a cancelled unpack reads as a refusal: %v", err)
			}
			if pass == 2 {
				ents, _ := os.ReadDir(filepath.Join(dest, "snap/sys"))
				if len(ents) == 0 || len(ents) >= 400 {
					t.Errorf("%d of 400 files written: not stopped midway", len(ents))
				}
			}
		})
	}
	t.Run("UnpackFile", func(t *testing.T) {
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		file := filepath.Join(t.TempDir(), "x.tar.gz")
		os.WriteFile(file, data, 0o644)
		ctx, cancel := context.WithTimeout(context.Background(), 0)
		defer cancel()
		_, _, err := snapshot.UnpackFile(ctx, file, snapshot.DefaultLimits())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want context.DeadlineExceeded", err)
		}
		assertEmpty(t, tmp)
	})
}
