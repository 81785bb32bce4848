package sysfstest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// A host archive is a whole host tree in one text file, so that a fixture
// that is not generated (a tree captured from a real machine) is still one
// readable diff when it changes. The shape, in the spirit of procfs'
// fixtures.ttar and Go's txtar:
//
//	rdmadoctor host tree v1
//	Free text up to the first entry: the fixture's sources note
//	(where the tree comes from, how to refresh it).
//	== dir sys/empty/dir
//	== file etc/hostname lines=1
//	rdvm
//	== file proc/cmdline lines=1 noeol
//	text without a final newline
//	== file etc/ld.so.cache base64=2
//	bGQuc28tMS43LjAAAAA…
//	AAAA…
//	== file etc/shadow mode=0600 lines=0
//	== link lib -> usr/lib
//
// Entries are sorted by path; paths are relative to the host root, and are
// written bare or, when they hold a space, a quote or a non-printable
// character, as a Go-quoted string. A text file's lines=N says how many of the
// following lines are its content (so content that looks like an entry line is
// still content); a file that is not plain UTF-8 text is base64, 76 characters
// a line. mode= appears only where it is not the default (0644 for a file,
// 0755 for a directory); a directory appears only when it is empty or has
// another mode, since a file's parents are implied.
const archiveMagic = "rdmadoctor host tree v1"

const (
	entryPrefix    = "== "
	defaultFileMod = 0o644
	defaultDirMode = 0o755
	base64Width    = 76
)

// ParseArchive reads a host archive into its sources note and its tree. It
// returns an error, never panics, on any input that is not a valid archive.
func ParseArchive(data []byte) (note string, t *Tree, err error) {
	p := &archiveParser{lines: splitLines(data), t: NewTree(), kinds: map[string]byte{}}
	if len(p.lines) == 0 || p.lines[0] != archiveMagic {
		return "", nil, fmt.Errorf("host archive: first line is not %q", archiveMagic)
	}
	p.next = 1
	var noteLines []string
	for p.next < len(p.lines) && !strings.HasPrefix(p.lines[p.next], entryPrefix) {
		noteLines = append(noteLines, p.lines[p.next])
		p.next++
	}
	for p.next < len(p.lines) {
		if err := p.entry(); err != nil {
			return "", nil, fmt.Errorf("host archive line %d: %w", p.at, err)
		}
	}
	if err := p.checkNesting(); err != nil {
		return "", nil, fmt.Errorf("host archive: %w", err)
	}
	return strings.Join(noteLines, "\n"), p.t, nil
}

// splitLines splits data at "\n"; a final newline ends the last line rather
// than starting an empty one.
func splitLines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

type archiveParser struct {
	lines []string
	next  int // index of the next unread line
	at    int // 1-based line number of the entry being read
	t     *Tree
	kinds map[string]byte // path → 'd', 'f' or 'l', for duplicates and nesting
}

// entry reads one entry line and, for a file, its content lines.
func (p *archiveParser) entry() error {
	p.at = p.next + 1
	line := p.lines[p.next]
	p.next++
	rest, ok := strings.CutPrefix(line, entryPrefix)
	if !ok {
		return fmt.Errorf("want an entry (%q…), got %q", entryPrefix, line)
	}
	kind, rest, _ := strings.Cut(rest, " ")
	name, rest, err := cutToken(rest)
	if err != nil {
		return err
	}
	if err := checkArchivePath(name); err != nil {
		return err
	}
	if _, dup := p.kinds[name]; dup {
		return fmt.Errorf("%s: listed twice", name)
	}
	host := "/" + name
	switch kind {
	case "link":
		arrow, target, err := cutToken(rest)
		if err != nil || arrow != "->" {
			return fmt.Errorf("%s: want \"-> TARGET\" after a link's path", name)
		}
		if target, rest, err = cutToken(target); err != nil || target == "" || rest != "" {
			return fmt.Errorf("%s: a link wants one non-empty target", name)
		}
		if strings.ContainsRune(target, 0) {
			return fmt.Errorf("%s: NUL in the link's target", name)
		}
		p.kinds[name] = 'l'
		p.t.Link(host, target)
		return nil
	case "dir":
		attrs, err := parseAttrs(rest)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if attrs.lines >= 0 || attrs.base64 >= 0 || attrs.noEOL {
			return fmt.Errorf("%s: a directory has no content", name)
		}
		p.kinds[name] = 'd'
		p.t.Dir(host)
		setMode(p.t, host, attrs.mode, defaultDirMode)
		return nil
	case "file":
		return p.file(name, rest)
	}
	return fmt.Errorf("unknown entry kind %q (want dir, file or link)", kind)
}

// file reads a file entry's attributes and its content lines.
func (p *archiveParser) file(name, rest string) error {
	a, err := parseAttrs(rest)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if (a.lines >= 0) == (a.base64 >= 0) {
		return fmt.Errorf("%s: a file wants exactly one of lines=N or base64=N", name)
	}
	n := max(a.lines, a.base64)
	if n > len(p.lines)-p.next {
		return fmt.Errorf("%s: the archive ends inside the file (%d lines announced, %d left)", name, n, len(p.lines)-p.next)
	}
	body := p.lines[p.next : p.next+n]
	p.next += n
	var content string
	switch {
	case a.base64 >= 0:
		if a.noEOL {
			return fmt.Errorf("%s: noeol applies to text, not base64", name)
		}
		b, err := base64.StdEncoding.DecodeString(strings.Join(body, ""))
		if err != nil {
			return fmt.Errorf("%s: base64 content: %w", name, err)
		}
		content = string(b)
	case a.noEOL && n == 0:
		return fmt.Errorf("%s: noeol on an empty file", name)
	default:
		content = strings.Join(body, "\n")
		if n > 0 && !a.noEOL {
			content += "\n"
		}
	}
	p.kinds[name] = 'f'
	p.t.File("/"+name, content)
	setMode(p.t, "/"+name, a.mode, defaultFileMod)
	return nil
}

// checkNesting refuses an entry below a file or a link: written out, it
// would land inside a file (impossible) or follow a link out of the tree.
func (p *archiveParser) checkNesting() error {
	for name := range p.kinds {
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			switch p.kinds[dir] {
			case 'f':
				return fmt.Errorf("%s lies below the file %s", name, dir)
			case 'l':
				return fmt.Errorf("%s lies below the link %s", name, dir)
			}
		}
	}
	return nil
}

func setMode(t *Tree, host string, mode, def int) {
	if mode >= 0 && mode != def {
		t.Modes[host] = os.FileMode(mode)
	}
}

// archiveAttrs are an entry's key=value words; -1 marks one that is absent.
type archiveAttrs struct {
	mode, lines, base64 int
	noEOL               bool
}

func parseAttrs(s string) (archiveAttrs, error) {
	a := archiveAttrs{mode: -1, lines: -1, base64: -1}
	for _, w := range strings.Fields(s) {
		key, val, hasVal := strings.Cut(w, "=")
		var err error
		switch {
		case w == "noeol" && !a.noEOL:
			a.noEOL = true
		case key == "mode" && hasVal && a.mode < 0:
			a.mode, err = parseNumber(val, 8, 0o777)
		case key == "lines" && hasVal && a.lines < 0:
			a.lines, err = parseNumber(val, 10, 1<<30)
		case key == "base64" && hasVal && a.base64 < 0:
			a.base64, err = parseNumber(val, 10, 1<<30)
		default:
			return a, fmt.Errorf("unknown or repeated attribute %q", w)
		}
		if err != nil {
			return a, fmt.Errorf("attribute %q: %w", w, err)
		}
	}
	return a, nil
}

func parseNumber(s string, base, limit int) (int, error) {
	n, err := strconv.ParseUint(s, base, 32)
	if err != nil || int(n) > limit {
		return 0, fmt.Errorf("want a base-%d number up to %d", base, limit)
	}
	return int(n), nil
}

// cutToken takes the first word of s, bare or Go-quoted, and returns it with
// the rest of s after one separating space.
func cutToken(s string) (tok, rest string, err error) {
	if strings.HasPrefix(s, `"`) {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return "", "", fmt.Errorf("bad quoted string in %q", s)
		}
		tok, _ = strconv.Unquote(q)
		rest = s[len(q):]
		if rest != "" && !strings.HasPrefix(rest, " ") {
			return "", "", fmt.Errorf("no space after the quoted string in %q", s)
		}
		return tok, strings.TrimPrefix(rest, " "), nil
	}
	tok, rest, _ = strings.Cut(s, " ")
	return tok, rest, nil
}

// checkArchivePath accepts a clean relative path inside the host root.
func checkArchivePath(p string) error {
	switch {
	case p == "" || p == ".":
		return errors.New("empty path")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%s: absolute path (paths are relative to the host root)", p)
	case path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("%s: not a clean path inside the host root", p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%q: NUL in a path", p)
	}
	return nil
}

// quoteToken writes s bare when a reader cannot mistake it, Go-quoted otherwise.
func quoteToken(s string) string {
	if s == "" || s == "->" || strings.HasPrefix(s, `"`) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if r <= ' ' || r >= 0x7f {
			return strconv.Quote(s)
		}
	}
	return s
}

// FormatArchive writes a tree as a host archive headed by note (the sources
// note: plain lines, none starting with "== "). The facts, if the tree has
// them, become the facts file, as Write writes it.
func FormatArchive(note string, t *Tree) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(archiveMagic + "\n")
	if note != "" {
		for _, l := range strings.Split(strings.TrimSuffix(note, "\n"), "\n") {
			if strings.HasPrefix(l, entryPrefix) {
				return nil, fmt.Errorf("host archive note: line %q would read as an entry", l)
			}
			b.WriteString(l + "\n")
		}
	}
	files := t.Files
	if t.Facts != nil {
		facts, err := json.MarshalIndent(t.Facts, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("host archive: facts: %w", err)
		}
		files = make(map[string]string, len(t.Files)+1)
		for k, v := range t.Files {
			files[k] = v
		}
		files["/"+sysfs.FactsFile] = string(facts) + "\n"
	}
	entries := map[string]string{}
	for p, content := range files {
		entries[p] = fileEntry(archiveName(p), content, t.modeAttr(p, defaultFileMod))
	}
	for p, target := range t.Links {
		entries[p] = entryPrefix + "link " + quoteToken(archiveName(p)) + " -> " + quoteToken(target) + "\n"
	}
	for p := range t.Dirs {
		if mode := t.modeAttr(p, defaultDirMode); mode != "" || !t.hasChildren(p) {
			entries[p] = entryPrefix + "dir " + quoteToken(archiveName(p)) + mode + "\n"
		}
	}
	for _, p := range sortedKeys(entries) {
		if err := checkArchivePath(archiveName(p)); err != nil {
			return nil, fmt.Errorf("host archive: %w", err)
		}
		b.WriteString(entries[p])
	}
	return b.Bytes(), nil
}

func archiveName(host string) string { return strings.TrimPrefix(path.Clean(host), "/") }

// modeAttr is " mode=0NNN" where p's mode is not def, else "".
func (t *Tree) modeAttr(p string, def os.FileMode) string {
	if m, ok := t.Modes[p]; ok && m.Perm() != def {
		return fmt.Sprintf(" mode=%04o", m.Perm())
	}
	return ""
}

// fileEntry is a file's entry line and content: text where it is plain
// UTF-8 text, base64 otherwise.
func fileEntry(name, content, mode string) string {
	head := entryPrefix + "file " + quoteToken(name) + mode
	if !isPlainText(content) {
		enc := base64.StdEncoding.EncodeToString([]byte(content))
		var lines []string
		for len(enc) > base64Width {
			lines = append(lines, enc[:base64Width])
			enc = enc[base64Width:]
		}
		if enc != "" {
			lines = append(lines, enc)
		}
		return head + fmt.Sprintf(" base64=%d\n", len(lines)) + strings.Join(lines, "\n") + newlineIf(len(lines) > 0)
	}
	if content == "" {
		return head + " lines=0\n"
	}
	n := strings.Count(content, "\n")
	if !strings.HasSuffix(content, "\n") {
		return head + fmt.Sprintf(" lines=%d noeol\n", n+1) + content + "\n"
	}
	return head + fmt.Sprintf(" lines=%d\n", n) + content
}

func newlineIf(b bool) string {
	if b {
		return "\n"
	}
	return ""
}

// isPlainText reports whether content reads as text in an archive: valid
// UTF-8 without control characters other than tab and newline.
func isPlainText(content string) bool {
	if !utf8.ValidString(content) {
		return false
	}
	for _, r := range content {
		if (r < ' ' && r != '\n' && r != '\t') || r == 0x7f {
			return false
		}
	}
	return true
}

// ReadTree reads a host directory into a tree, as FormatArchive packs it:
// regular files, symlinks as stored, empty directories, and the permissions
// that differ from the defaults. Anything else (a device, a FIFO) is an error.
func ReadTree(dir string) (*Tree, error) {
	t := NewTree()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		host := "/" + filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			t.Link(host, target)
		case d.IsDir():
			t.Dir(host)
			if info.Mode().Perm() != defaultDirMode {
				t.Modes[host] = info.Mode().Perm()
			}
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			t.File(host, string(data))
			if info.Mode().Perm() != defaultFileMod {
				t.Modes[host] = info.Mode().Perm()
			}
		default:
			return fmt.Errorf("%s: neither a file, a directory nor a symlink (%v)", p, d.Type())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read host tree %s: %w", dir, err)
	}
	return t, nil
}
