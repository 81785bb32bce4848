package snapshot

import (
	"io/fs"
	"sort"
)

// Kind is what a snapshot entry is. Nothing else (devices, FIFOs, sockets)
// is ever stored.
type Kind uint8

const (
	Dir Kind = iota + 1
	File
	Symlink
)

func (k Kind) String() string {
	switch k {
	case Dir:
		return "directory"
	case File:
		return "file"
	case Symlink:
		return "symlink"
	}
	return "unknown"
}

// Entry is one path of a snapshot.
type Entry struct {
	Path   string      // root-relative, slash-separated, clean ("sys/class/net")
	Kind   Kind        //
	Perm   fs.FileMode // permission bits only
	Data   []byte      // File content
	Target string      // Symlink target, always relative and inside the root
	// Placeholder marks a file whose content no check read (it was only
	// listed or looked at): Data is zeros of the real size, or empty.
	Placeholder bool
}

// Tree is a snapshot in memory: every entry by path, plus the two JSON
// files written at its top.
type Tree struct {
	entries map[string]*Entry
	bytes   int64 // sum of file sizes
}

func newTree() *Tree { return &Tree{entries: map[string]*Entry{}} }

// put adds or upgrades an entry: a file whose content was read replaces a
// placeholder, a placeholder that keeps the size replaces an empty one; an
// existing entry is otherwise kept (first writer wins).
func (t *Tree) put(e *Entry) {
	old, ok := t.entries[e.Path]
	if ok {
		upgrade := old.Kind == File && old.Placeholder && e.Kind == File &&
			(!e.Placeholder || len(e.Data) > len(old.Data))
		if !upgrade {
			return
		}
		t.bytes -= int64(len(old.Data))
	}
	t.entries[e.Path] = e
	if e.Kind == File {
		t.bytes += int64(len(e.Data))
	}
}

// has reports whether p is already in the tree as a full (non-placeholder) entry.
func (t *Tree) has(p string) bool {
	e, ok := t.entries[p]
	return ok && !e.Placeholder
}

// Entries returns the entries sorted by path; a directory sorts before
// everything inside it.
func (t *Tree) Entries() []*Entry {
	out := make([]*Entry, 0, len(t.entries))
	for _, e := range t.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Len is the number of entries.
func (t *Tree) Len() int { return len(t.entries) }

// Bytes is the total size of the file contents.
func (t *Tree) Bytes() int64 { return t.bytes }

// Lookup returns the entry at p, or nil.
func (t *Tree) Lookup(p string) *Entry { return t.entries[p] }
