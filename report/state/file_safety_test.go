package state

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// leftovers are the temporary files a failed write might leave in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// Issue 22, finding 3: Save (and every WriteAtomic) renamed over whatever
// was at the path. A symbolic link, a FIFO, a device and a directory are
// refused, named, and left exactly as they were.
func TestSaveRefusesSpecialTargets(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("precious\n"), 0o644)
	cases := map[string]func(p string) error{
		"symbolic link":  func(p string) error { return os.Symlink(victim, p) },
		"link to stdout": func(p string) error { return os.Symlink("/proc/self/fd/1", p) },
		"FIFO":           func(p string) error { return syscall.Mkfifo(p, 0o644) },
		"directory":      func(p string) error { return os.Mkdir(p, 0o755) },
		"character device": func(p string) error {
			if os.Geteuid() != 0 {
				return errors.ErrUnsupported
			}
			return syscall.Mknod(p, syscall.S_IFCHR|0o666, 1<<8|3)
		},
	}
	s := New("n1")
	for name, mk := range cases {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := mk(p); errors.Is(err, errors.ErrUnsupported) {
			t.Logf("%s: mknod needs root; not tested", name)
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		before, _ := os.Lstat(p)
		err := s.Save(p)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "refused") {
			t.Errorf("%s: err = %v, want a refusal naming %s", name, err, p)
		}
		after, lerr := os.Lstat(p)
		if lerr != nil || after.Mode() != before.Mode() || !os.SameFile(before, after) {
			t.Errorf("%s: now %v (%v), was %v", name, after.Mode(), lerr, before.Mode())
		}
	}
	if got, _ := os.ReadFile(victim); string(got) != "precious\n" {
		t.Errorf("a link's target now holds %q", got)
	}
	if left := leftovers(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// WriteAtomic gives the file exactly the mode asked for, whatever the
// umask, replaces a regular file (a new inode: a reader holding the old
// one reads the old bytes whole) and, when write fails, keeps it.
func TestWriteAtomicModeAndFailure(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	p := filepath.Join(dir, "r.prom")
	os.WriteFile(p, []byte("old\n"), 0o600)
	write := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	if err := WriteAtomic(p, 0o644, write("new\n")); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(p); st.Mode() != 0o644 {
		t.Errorf("mode %v under umask 077, want 0644", st.Mode())
	}
	err := WriteAtomic(p, 0o644, func(w io.Writer) error {
		io.WriteString(w, "half")
		return syscall.ENOSPC
	})
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "left as it was") {
		t.Errorf("err = %v", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "new\n" {
		t.Errorf("after a failed write the file holds %q", got)
	}
	s := New("n1")
	sp := filepath.Join(dir, "state.json")
	if err := s.Save(sp); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(sp); st.Mode() != 0o600 {
		t.Errorf("state mode %v, want 0600", st.Mode())
	}
	if left := leftovers(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
