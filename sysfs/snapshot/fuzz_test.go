package snapshot_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/sysfs/snapshot"
)

// FuzzUnpack: whatever the bytes, Unpack never panics and returns within
// its deadline (plus a margin for the scheduler), and an archive it
// accepts leaves only directories, regular files and symlinks that resolve
// inside the host root it returns, no deeper than 48 levels; nothing
// appears beside the destination.
func FuzzUnpack(f *testing.F) {
	f.Add(archiveOf(f, capture(f, healthy, false)))
	f.Add(tarGz(f, file("snap/rdmadoctor.manifest.json", "{}"), symlink("snap/l", "../x"), dir("snap/d/")))
	f.Add(tarGz(f, dir("a/b/c/"), symlink("a/b/c/top", "../../.."), symlink("z", "a/b/c/top/../etc/shadow")))
	f.Add(tarGz(f, symlink("s", "/etc/shadow"), hardlink("h", "s")))
	f.Add(tarGz(f, file("../evil", "x"), ent{name: "dev", typ: tar.TypeChar}))
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
	f.Add(tarGz(f, dir("./"), file("./sys/x", "1"), dir("./"), file("./proc/y", "2")))
	f.Add(tarGz(f, dir("top/sys/"), symlink("top/l", ".."), symlink("top/sys/u", "../l/top")))
	f.Add(tarGz(f, file(deepName("d0", 47), "1"), file(deepName("d1", 48), "1"), dir("d0/x/")))
	f.Add(hostileChain(f, 60, false))
	f.Add(hostileChain(f, 60, true))
	f.Add(tarGz(f, dir("s/"), symlink("s/p", "q/x"), symlink("s/q", "p"), symlink("s/d", ".."), symlink("s/g", "d/no/../s/g")))
	lim := snapshot.Limits{MaxFileBytes: 1 << 16, MaxPlaceholderBytes: 1 << 10, MaxTotalBytes: 1 << 20, MaxEntries: 2000, MaxListEntries: 100}
	f.Fuzz(func(t *testing.T, data []byte) {
		outer := t.TempDir()
		dest := filepath.Join(outer, "dest")
		if err := os.Mkdir(dest, 0o700); err != nil {
			t.Fatal(err)
		}
		const deadline, margin = time.Second, 250 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		start := time.Now()
		rel, err := snapshot.Unpack(ctx, opener(data), "fuzz.tar.gz", dest, lim)
		if took := time.Since(start); took > deadline+margin {
			t.Fatalf("Unpack of %d bytes took %v, past its %v deadline (%v)", len(data), took, deadline, err)
		}
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.tar.gz") {
				t.Fatalf("error does not name the archive: %v", err)
			}
			return
		}
		if ents, _ := os.ReadDir(outer); len(ents) != 1 {
			t.Fatalf("%d entries beside the destination", len(ents))
		}
		hostDir := filepath.Join(dest, rel)
		root, err := os.OpenRoot(hostDir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return nil
			}
			m := fi.Mode()
			if !m.IsDir() && !m.IsRegular() && m&fs.ModeSymlink == 0 {
				t.Fatalf("%s: %v made", p, m)
			}
			if r, _ := filepath.Rel(dest, p); strings.Count(r, "/") >= 48 {
				t.Fatalf("%s: deeper than 48 levels", r)
			}
			if m&fs.ModeSymlink != 0 {
				rel, err := filepath.Rel(hostDir, p)
				if err != nil || strings.HasPrefix(rel, "..") {
					t.Fatalf("%s: outside the host root %s", p, hostDir)
				}
				if _, err := root.Stat(rel); err != nil && strings.Contains(err.Error(), "escapes") {
					t.Fatalf("%s: symlink leads outside: %v", rel, err)
				}
			}
			return nil
		})
	})
}

// FuzzRedact: the redactor never panics, keeps binary input as it is, and
// is consistent: redacting the same text twice with one Redactor gives the
// same result.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{
		"fe80:0000:0000:0000:0e42:a1ff:fe2b:3c4c\n", "0000:0000:0000:0000:0000:ffff:c000:020a",
		"0c:42:a1:2b:3c:4c", "0c42:a103:002b:3c4c", "inet addr:10.1.2.3/24 fe80::1/64 ::ffff:10.0.0.1",
		"80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:12:34:56", ":", "a:", "::", "1.2.3.4.", "node01 mlx5_0",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := snapshot.NewRedactor()
		r.Hostname("node01")
		a, ok := r.Text(in)
		if !ok {
			if !bytes.Equal(a, in) {
				t.Fatal("binary input changed")
			}
			return
		}
		b, _ := r.Text(in)
		if !bytes.Equal(a, b) {
			t.Fatalf("not consistent: %q then %q", a, b)
		}
	})
}
