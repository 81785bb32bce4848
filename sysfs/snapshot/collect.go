package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// maxHops bounds symlink resolution, as the kernel's own limit does.
const maxHops = 40

// collector copies the recorded paths of a source root (the live "/" or a
// host directory) into a Tree, reproducing every symlink met on the way.
type collector struct {
	ctx  context.Context
	src  string // the source root on disk
	lim  Limits
	tree *Tree
	man  *Manifest
	// full is set once the byte budget is spent: later files are skipped.
	full bool
}

// collect walks every recorded path in sorted order.
func (c *collector) collect(recorded map[string]sysfs.Access) error {
	paths := make([]string, 0, len(recorded))
	for p := range recorded {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := c.ctx.Err(); err != nil {
			return fmt.Errorf("copy stopped at %s: %w", p, err)
		}
		if p == "/"+sysfs.FactsFile || p == "/"+ManifestFile || p == "/"+sysfs.KernelLogFile {
			continue // written by the capture itself
		}
		c.walk(p, recorded[p], 0)
	}
	return nil
}

// walk resolves the absolute host path p component by component: each
// directory on the way becomes a directory entry, each symlink a symlink
// entry (then resolution goes on at its target), and the last component is
// stored according to how the check used it.
func (c *collector) walk(p string, acc sysfs.Access, hops int) {
	comps := splitPath(p)
	cur := ""
	for i, name := range comps {
		next := name
		if cur != "" {
			next = cur + "/" + name
		}
		last := i == len(comps)-1
		fi, err := os.Lstat(c.disk(next))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				c.man.unreadable(next, err)
			}
			return // an absent path is an answer the replay gives too
		}
		switch mode := fi.Mode(); {
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(c.disk(next))
			if err != nil {
				c.man.unreadable(next, err)
				return
			}
			abs := c.putLink(next, target)
			if last && acc == sysfs.AccessLink {
				return // only the link itself was read
			}
			if hops >= maxHops {
				c.man.skipped(next, "too many levels of symbolic links")
				return
			}
			rest := strings.Join(comps[i+1:], "/")
			c.walk(path.Join(abs, rest), acc&^sysfs.AccessLink, hops+1)
			return
		case mode.IsDir():
			c.tree.put(&Entry{Path: next, Kind: Dir, Perm: fi.Mode().Perm()})
			if last && acc&sysfs.AccessList != 0 {
				c.list(next)
			}
		case mode.IsRegular():
			if !last {
				return // a file used as a directory: ENOTDIR, which the replay gives too
			}
			if acc&sysfs.AccessRead != 0 {
				c.putFile(next, fi)
			} else {
				c.putPlaceholder(next, fi, true)
			}
			return
		default:
			c.skipSpecial(next, mode)
			return
		}
		cur = next
	}
}

// list reproduces every name in a listed directory: a symlink as the
// symlink, a directory as an empty directory, a file as an empty
// placeholder (its content was not read by any check).
func (c *collector) list(dir string) {
	ents, err := os.ReadDir(c.disk(dir))
	if err != nil {
		c.man.unreadable(dir, err)
		return
	}
	if len(ents) > c.lim.MaxListEntries {
		c.man.skipped(dir, fmt.Sprintf("lists %d names; only the first %d are kept", len(ents), c.lim.MaxListEntries))
		ents = ents[:c.lim.MaxListEntries]
	}
	for _, de := range ents {
		p := dir + "/" + de.Name()
		if c.tree.has(p) {
			continue
		}
		fi, err := os.Lstat(c.disk(p))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				c.man.unreadable(p, err)
			}
			continue
		}
		switch mode := fi.Mode(); {
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(c.disk(p))
			if err != nil {
				c.man.unreadable(p, err)
				continue
			}
			c.putLink(p, target)
		case mode.IsDir():
			c.tree.put(&Entry{Path: p, Kind: Dir, Perm: mode.Perm()})
		case mode.IsRegular():
			c.putPlaceholder(p, fi, false)
		default:
			c.skipSpecial(p, mode)
		}
	}
}

// skipSpecial notes a device, FIFO or socket, which a snapshot never holds.
// Device nodes under /dev travel in the facts file instead (dev_nodes).
func (c *collector) skipSpecial(p string, mode fs.FileMode) {
	why := "not a regular file, directory or symlink (" + typeName(mode) + "); a snapshot holds none"
	if strings.HasPrefix(p, "dev/") && mode&fs.ModeDevice != 0 {
		why = typeName(mode) + ": recorded in " + sysfs.FactsFile + " (dev_nodes) instead"
	}
	c.man.skipped(p, why)
}

// putLink stores the symlink at p and returns the absolute host path it
// leads to. A relative target that stays inside the root is kept as the
// kernel wrote it (sysfs links stay relative); an absolute target, or one
// that climbs above "/", is rewritten relative, since a snapshot root may
// hold only links that stay inside it.
func (c *collector) putLink(p, target string) string {
	dir := path.Dir("/" + p)
	var abs string
	if path.IsAbs(target) {
		abs = path.Clean(target)
	} else {
		abs = path.Join(dir, target)
	}
	stored := target
	if path.IsAbs(target) || escapesLexically(p, target) || target == "" {
		stored = relTo(dir, abs)
		c.man.Rewritten = append(c.man.Rewritten, Rewrite{Path: p, Target: target, Stored: stored})
	}
	c.tree.put(&Entry{Path: p, Kind: Symlink, Perm: 0o777, Target: stored})
	return abs
}

// putFile copies a file's content, bounded per file and in total.
func (c *collector) putFile(p string, fi fs.FileInfo) {
	if c.full {
		c.man.skipped(p, fmt.Sprintf("the snapshot's byte budget (%d) was spent", c.lim.MaxTotalBytes))
		return
	}
	data, err := readBounded(c.disk(p), c.lim.MaxFileBytes)
	if err != nil {
		c.man.unreadable(p, err)
		return
	}
	if c.tree.Bytes()+int64(len(data)) > c.lim.MaxTotalBytes {
		c.full = true
		c.man.skipped(p, fmt.Sprintf("the snapshot's byte budget (%d) was spent", c.lim.MaxTotalBytes))
		return
	}
	c.tree.put(&Entry{Path: p, Kind: File, Perm: fi.Mode().Perm(), Data: data})
}

// putPlaceholder stores a file no check read. A file that a check looked at
// (stat) keeps its size as zeros, which compress to nearly nothing; a file
// that was only listed is empty.
func (c *collector) putPlaceholder(p string, fi fs.FileInfo, keepSize bool) {
	if old, ok := c.tree.entries[p]; ok && !(old.Placeholder && keepSize && len(old.Data) == 0) {
		return
	}
	var data []byte
	if keepSize && fi.Size() > 0 {
		if fi.Size() <= c.lim.MaxPlaceholderBytes && c.tree.Bytes()+fi.Size() <= c.lim.MaxTotalBytes {
			data = make([]byte, fi.Size())
			c.keepELFHeader(p, data)
		} else {
			c.man.skipped(p, fmt.Sprintf("size %d not kept: larger than %d bytes", fi.Size(), c.lim.MaxPlaceholderBytes))
		}
	}
	c.tree.put(&Entry{Path: p, Kind: File, Perm: fi.Mode().Perm(), Data: data, Placeholder: true})
}

// elfHeaderSize is the 64-bit ELF header: what a check learns about a
// shared library by opening it (its class and machine).
const elfHeaderSize = 64

// keepELFHeader copies the ELF header of a library that a check looked at
// into its zero placeholder: the loader checks read a library's class from
// it without reading the library, and a snapshot must not carry whole
// libraries. Nothing under /sys or /proc is read for this.
func (c *collector) keepELFHeader(p string, data []byte) {
	if strings.HasPrefix(p, "sys/") || strings.HasPrefix(p, "proc/") || len(data) < 4 {
		return
	}
	f, err := os.Open(c.disk(p))
	if err != nil {
		return
	}
	defer f.Close()
	var head [elfHeaderSize]byte
	n, _ := io.ReadFull(f, head[:min(len(head), len(data))])
	if n >= 4 && string(head[:4]) == "\x7fELF" {
		copy(data, head[:n])
	}
}

// disk is p's file name in the source root.
func (c *collector) disk(p string) string { return filepath.Join(c.src, filepath.FromSlash(p)) }

// errTooLarge says a file is larger than the per-file limit.
var errTooLarge = errors.New("larger than the per-file limit")

// readBounded reads at most limit bytes. A read error after some bytes
// keeps them: some sysfs attributes answer the first read and refuse the
// next one, and what the first read gave is what a check sees.
func readBounded(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf []byte
	chunk := make([]byte, 4096)
	for {
		n, err := f.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if int64(len(buf)) > limit {
			return nil, fmt.Errorf("%w (%d bytes)", errTooLarge, limit)
		}
		if errors.Is(err, io.EOF) || (err != nil && len(buf) > 0) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return buf, nil
		}
	}
}

// splitPath turns "/sys/class/x" into ["sys" "class" "x"].
func splitPath(p string) []string {
	p = strings.Trim(path.Clean("/"+p), "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// escapesLexically reports whether the relative target of the link at p
// climbs above the root before coming back (the kernel stops ".." at "/",
// a snapshot root must not need to).
func escapesLexically(p, target string) bool {
	depth := len(splitPath(path.Dir("/" + p)))
	// Cut, not Split: an archive may hold thousands of PATH_MAX targets.
	for rest := target; rest != ""; {
		var el string
		el, rest, _ = strings.Cut(rest, "/")
		switch el {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return true
			}
		default:
			depth++
		}
	}
	return false
}

// relTo is the relative path from directory dir to abs, both absolute.
func relTo(dir, abs string) string {
	r, err := filepath.Rel(filepath.FromSlash(dir), filepath.FromSlash(abs))
	if err != nil {
		return "." // cannot happen for two absolute paths
	}
	return filepath.ToSlash(r)
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return m.Type().String()
}
