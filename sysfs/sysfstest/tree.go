// Package sysfstest builds host trees that look like a real machine's sysfs,
// procfs and /etc — relative symlinks from /sys/class to /sys/devices, real
// file names and real formats — for the host fixtures under testdata/hosts
// and for tests that need a variant of one. Those fixtures are not committed:
// Materialize (make fixtures, and the TestMain of every package that reads
// them) writes them from this package's generator and from the host archives
// in testdata/host-archives (archive.go).
package sysfstest

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Tree is a host directory in memory: regular files, symlinks and empty
// directories by absolute host path, plus the facts file.
type Tree struct {
	Files map[string]string
	Links map[string]string // path → target exactly as stored (relative for sysfs)
	Dirs  map[string]bool
	Modes map[string]os.FileMode // non-default permissions (e.g. 0 for unreadable)
	Facts *sysfs.Facts
}

// NewTree returns an empty tree.
func NewTree() *Tree {
	return &Tree{Files: map[string]string{}, Links: map[string]string{}, Dirs: map[string]bool{}, Modes: map[string]os.FileMode{}}
}

// File sets a file's content; a sysfs attribute gets its trailing newline here.
func (t *Tree) File(p, content string) { t.Files[path.Clean(p)] = content }

// Attr sets a sysfs attribute: the value plus a newline, as the kernel prints it.
func (t *Tree) Attr(p, value string) { t.File(p, value+"\n") }

// Link makes p a symlink to target.
func (t *Tree) Link(p, target string) { t.Links[path.Clean(p)] = target }

// RelLink makes p a symlink to the absolute host path target, stored relative
// to p's directory the way sysfs stores its links.
func (t *Tree) RelLink(p, target string) {
	r, err := filepath.Rel(path.Dir(path.Clean(p)), path.Clean(target))
	if err != nil {
		panic(err)
	}
	t.Link(p, r)
}

// Dir makes an (empty) directory.
func (t *Tree) Dir(p string) { t.Dirs[path.Clean(p)] = true }

// Remove deletes p and everything below it.
func (t *Tree) Remove(p string) {
	p = path.Clean(p)
	under := func(q string) bool { return q == p || strings.HasPrefix(q, p+"/") }
	for k := range t.Files {
		if under(k) {
			delete(t.Files, k)
		}
	}
	for k := range t.Links {
		if under(k) {
			delete(t.Links, k)
		}
	}
	for k := range t.Dirs {
		if under(k) {
			delete(t.Dirs, k)
		}
	}
}

// Clone deep-copies the tree so a variant can change it.
func (t *Tree) Clone() *Tree {
	c := NewTree()
	for k, v := range t.Files {
		c.Files[k] = v
	}
	for k, v := range t.Links {
		c.Links[k] = v
	}
	for k := range t.Dirs {
		c.Dirs[k] = true
	}
	for k, v := range t.Modes {
		c.Modes[k] = v
	}
	if t.Facts != nil {
		b, _ := json.Marshal(t.Facts)
		c.Facts = &sysfs.Facts{}
		_ = json.Unmarshal(b, c.Facts)
	}
	return c
}

// Write replaces dir with the tree, empty directories included.
func (t *Tree) Write(dir string) error { return t.write(dir, true) }

// WriteFixture writes the tree as a fixture under testdata/hosts: without
// empty directories, as the fixtures were when git held them (git keeps none),
// so every fixture reads as it always has. Fixture checks therefore treat an
// absent directory and an empty one alike.
func (t *Tree) WriteFixture(dir string) error { return t.write(dir, false) }

func (t *Tree) write(dir string, keepEmpty bool) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	host := func(p string) string { return filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(p, "/"))) }
	for _, p := range sortedKeys(t.Dirs) {
		if !keepEmpty && !t.hasChildren(p) {
			continue
		}
		if err := os.MkdirAll(host(p), 0o755); err != nil {
			return err
		}
	}
	for _, p := range sortedKeys(t.Files) {
		if err := os.MkdirAll(filepath.Dir(host(p)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(host(p), []byte(t.Files[p]), 0o644); err != nil {
			return err
		}
	}
	for _, p := range sortedKeys(t.Links) {
		if err := os.MkdirAll(filepath.Dir(host(p)), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(t.Links[p], host(p)); err != nil {
			return err
		}
	}
	if t.Facts != nil {
		b, err := json.MarshalIndent(t.Facts, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, sysfs.FactsFile), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	for _, p := range sortedKeys(t.Modes) {
		if err := os.Chmod(host(p), t.Modes[p]); err != nil {
			return err
		}
	}
	return nil
}

// hasChildren reports whether a file or link lies below dir.
func (t *Tree) hasChildren(dir string) bool {
	prefix := dir + "/"
	for k := range t.Files {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	for k := range t.Links {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Digest lists a directory as "path kind content-or-target" lines, so two
// trees can be compared in a test (the fixtures against the generator).
func Digest(dir string) (string, error) {
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "%s -> %s\n", rel, t)
		case fi.IsDir():
			fmt.Fprintf(&b, "%s/\n", rel)
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "%s = %q\n", rel, data)
		}
		return nil
	})
	return b.String(), err
}
