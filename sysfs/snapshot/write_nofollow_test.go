package snapshot_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs/snapshot"
)

// TestWriteDirRefusesSymlinkOutput: `snapshot -o DIR` where DIR is a
// symlink (to an empty directory elsewhere) is refused and nothing is
// written there. Before, the snapshot went wherever the link pointed.
func TestWriteDirRefusesSymlinkOutput(t *testing.T) {
	s := capture(t, healthy, false)
	elsewhere := t.TempDir()
	out := filepath.Join(t.TempDir(), "out")
	if err := os.Symlink(elsewhere, out); err != nil {
		t.Fatal(err)
	}
	err := s.WriteDir(out)
	if err == nil || !strings.Contains(err.Error(), out) || !strings.Contains(err.Error(), "is a symlink") {
		t.Errorf("WriteDir(symlink) = %v, want a refusal naming it", err)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) > 0 {
		t.Errorf("%d entries written where the symlink points", len(ents))
	}
}

// TestWriteDirNeverFollowsPlantedLinks: symlinks planted inside the output
// directory after WriteDir checked it empty — where a directory, a file
// and the facts file go — make the write fail, naming the path; nothing
// is written through them and the files they point at are untouched.
// (Before, MkdirAll and WriteFile followed them out of the tree.)
func TestWriteDirNeverFollowsPlantedLinks(t *testing.T) {
	s := capture(t, healthy, false)
	for _, planted := range []string{"sys", "proc/version", "rdmadoctor.facts.json"} {
		t.Run(planted, func(t *testing.T) {
			outside := t.TempDir()
			victim := filepath.Join(outside, "victim")
			if err := os.WriteFile(victim, []byte("untouched"), 0o600); err != nil {
				t.Fatal(err)
			}
			target := outside
			if planted != "sys" {
				target = victim
			}
			restore := snapshot.SetAfterOutputOpened(func(dir string) {
				p := filepath.Join(dir, planted)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.Symlink(target, p); err != nil {
					t.Error(err)
				}
			})
			defer restore()
			out := filepath.Join(t.TempDir(), "out")
			err := s.WriteDir(out)
			// The path named is the link, or the directory it was planted
			// in (which WriteDir did not make, so does not enter).
			top, _, _ := strings.Cut(planted, "/")
			if err == nil || !strings.Contains(err.Error(), filepath.Join(out, top)) {
				t.Errorf("WriteDir with %s planted = %v, want an error naming it", planted, err)
			}
			ents, _ := os.ReadDir(outside)
			if len(ents) != 1 {
				t.Errorf("%d entries beside the victim: written through the link", len(ents)-1)
			}
			if b, _ := os.ReadFile(victim); string(b) != "untouched" {
				t.Errorf("the file the link points at now holds %q", b)
			}
		})
	}
}

// TestWriteArchiveRefusesNonRegularTarget: `snapshot -o X.tar.gz` where X
// is a symlink or a FIFO is refused and leaves it as it was: the link is
// not replaced by a file (nor the file it points at written), the FIFO is
// not replaced and the write does not block on it.
func TestWriteArchiveRefusesNonRegularTarget(t *testing.T) {
	s := capture(t, healthy, false)
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("untouched"), 0o600)
	link, fifo := filepath.Join(dir, "link.tar.gz"), filepath.Join(dir, "fifo.tar")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if err := mkfifo(fifo); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]fs.FileMode{link: fs.ModeSymlink, fifo: fs.ModeNamedPipe} {
		var err error
		if strings.HasSuffix(file, ".tar") {
			_, err = s.WriteTarFile(file)
		} else {
			_, err = s.WriteTarGzFile(file)
		}
		if err == nil || !strings.Contains(err.Error(), "not a regular file") || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: err %v, want a refusal naming it", filepath.Base(file), err)
		}
		if fi, err := os.Lstat(file); err != nil || fi.Mode().Type() != want {
			t.Errorf("%s: replaced (%v, %v)", filepath.Base(file), fi.Mode(), err)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "untouched" {
		t.Errorf("the file the link points at now holds %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Errorf("%d entries in the directory, want the 3 it had (a temporary file left?)", len(ents))
	}
}
