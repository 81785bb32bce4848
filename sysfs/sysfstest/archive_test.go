package sysfstest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// edgeTree holds every shape an archive must carry: text with and without a
// final newline, an empty file, content that looks like an entry, binary
// content, odd names, modes, links and an empty directory.
func edgeTree() *Tree {
	t := NewTree()
	t.File("/etc/hostname", "rdvm\n")
	t.File("/proc/cmdline", "BOOT_IMAGE=/vmlinuz quiet")
	t.File("/empty", "")
	t.File("/blank-lines", "\n\n")
	t.File("/sys/looks-like-entries", "== file x lines=1\nrdmadoctor host tree v1\n")
	t.File("/sys/bus/pci/devices/0000:3b:00.0/config", "\x15\xb3\x17\x10\x00\xff")
	t.File("/crlf", "a\r\nb\r\n")
	t.File("/with space/and \"quote\"", "x\n")
	t.File("/etc/shadow", "root:*:19000::::::\n")
	t.Modes["/etc/shadow"] = 0o600
	t.Link("/lib", "usr/lib")
	t.Link("/sys/class/net/eth0", "../../devices/virtual/net/eth0")
	t.Link("/->", "target with space")
	t.Dir("/sys/empty")
	t.Dir("/sys/locked")
	t.Modes["/sys/locked"] = 0o700
	t.File("/sys/locked/attr", "1\n")
	return t
}

func TestArchiveRoundTrip(t *testing.T) {
	want := edgeTree()
	data, err := FormatArchive("Sources: a test.\n\nSecond paragraph.", want)
	if err != nil {
		t.Fatal(err)
	}
	note, got, err := ParseArchive(data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if note != "Sources: a test.\n\nSecond paragraph." {
		t.Errorf("note = %q", note)
	}
	wantDir, gotDir := t.TempDir(), t.TempDir()
	if err := want.Write(wantDir); err != nil {
		t.Fatal(err)
	}
	if err := got.Write(gotDir); err != nil {
		t.Fatal(err)
	}
	assertSameTree(t, wantDir, gotDir)
	again, err := FormatArchive(note, got)
	if err != nil || !bytes.Equal(again, data) {
		t.Errorf("formatting the parsed archive changes it (%v):\n%s\nvs\n%s", err, data, again)
	}
	for _, line := range []string{
		"== file proc/cmdline lines=1 noeol\nBOOT_IMAGE=/vmlinuz quiet\n",
		"== file etc/shadow mode=0600 lines=1\n",
		"== file sys/bus/pci/devices/0000:3b:00.0/config base64=1\nFbMXEAD/\n",
		"== link sys/class/net/eth0 -> ../../devices/virtual/net/eth0\n",
		"== file \"with space/and \\\"quote\\\"\" lines=1\n",
		"== dir sys/empty\n",
		"== dir sys/locked mode=0700\n",
	} {
		if !strings.Contains(string(data), line) {
			t.Errorf("archive lacks %q:\n%s", line, data)
		}
	}
}

// assertSameTree compares two directories by content, links and permissions.
func assertSameTree(t *testing.T, want, got string) {
	t.Helper()
	wantT, err := ReadTree(want)
	if err != nil {
		t.Fatal(err)
	}
	gotT, err := ReadTree(got)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := FormatArchive("", wantT)
	b, _ := FormatArchive("", gotT)
	if !bytes.Equal(a, b) {
		t.Errorf("trees differ:\n%s\nvs\n%s", a, b)
	}
}

// TestArchiveOfGeneratedFixture packs a generated fixture from disk and
// unpacks it: the same tree, byte for byte, links as stored.
func TestArchiveOfGeneratedFixture(t *testing.T) {
	tree, err := Fixture("cx5-roce-healthy")
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	if err := tree.WriteFixture(src); err != nil {
		t.Fatal(err)
	}
	read, err := ReadTree(src)
	if err != nil {
		t.Fatal(err)
	}
	data, err := FormatArchive("", read)
	if err != nil {
		t.Fatal(err)
	}
	_, parsed, err := ParseArchive(data)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := parsed.Write(dst); err != nil {
		t.Fatal(err)
	}
	want, _ := Digest(src)
	got, _ := Digest(dst)
	if want != got {
		t.Error("cx5-roce-healthy differs after a trip through an archive")
	}
}

func TestParseArchiveRejects(t *testing.T) {
	const m = archiveMagic + "\n"
	for _, c := range []struct{ in, want string }{
		{"", "first line"},
		{"rdmadoctor host tree v2\n", "first line"},
		{m + "== file a lines=2\nx\n", "ends inside the file"},
		{m + "== file a\n", "exactly one of"},
		{m + "== file a lines=1 base64=1\nx\n", "exactly one of"},
		{m + "== file a lines=0 noeol\n", "noeol on an empty file"},
		{m + "== file a base64=1 noeol\nAA==\n", "noeol applies to text"},
		{m + "== file a base64=1\n!!\n", "base64 content"},
		{m + "== file a lines=1 lines=1\nx\n", "repeated"},
		{m + "== file a mode=0999 lines=0\n", "base-8"},
		{m + "== file a mode=01777 lines=0\n", "up to 511"},
		{m + "== file a lines=-1\n", "base-10"},
		{m + "== file a colour=red lines=0\n", "unknown"},
		{m + "== file /etc/passwd lines=0\n", "absolute path"},
		{m + "== file ../x lines=0\n", "not a clean path"},
		{m + "== file a/../b lines=0\n", "not a clean path"},
		{m + "== file \"a\\x00b\" lines=0\n", "NUL"},
		{m + "== file \"a lines=0\n", "bad quoted string"},
		{m + "== file \"a\"b lines=0\n", "no space after"},
		{m + "== file a lines=0\n== file a lines=0\n", "listed twice"},
		{m + "== link a\n", "-> TARGET"},
		{m + "== link a -> \n", "one non-empty target"},
		{m + "== link a -> b c\n", "one non-empty target"},
		{m + "== link a -> \"b\\x00\"\n", "NUL"},
		{m + "== link a -> /etc\n== file a/passwd lines=0\n", "below the link a"},
		{m + "== file a lines=0\n== file a/b lines=0\n", "below the file a"},
		{m + "== dir a lines=1\nx\n", "no content"},
		{m + "== pipe a\n", "unknown entry kind"},
		{m + "== file a lines=1\nx\nstray\n", "want an entry"},
	} {
		_, _, err := ParseArchive([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseArchive(%q) = %v, want an error with %q", c.in, err, c.want)
		}
	}
}

func TestFormatArchiveRefusesANoteThatReadsAsAnEntry(t *testing.T) {
	if _, err := FormatArchive("fine\n== file x lines=0", NewTree()); err == nil {
		t.Error("a note line starting with \"== \" was accepted")
	}
}

func TestReadTreeRefusesAFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	if _, err := ReadTree(dir); err == nil || !strings.Contains(err.Error(), "neither a file") {
		t.Errorf("ReadTree with a FIFO: %v", err)
	}
}

// FuzzParseArchive: no input panics, and whatever parses formats to an
// archive that parses to the same archive again.
func FuzzParseArchive(f *testing.F) {
	seed, _ := FormatArchive("Sources: seed.", edgeTree())
	f.Add(seed)
	f.Add([]byte(archiveMagic + "\n== file a lines=1 noeol\nx"))
	f.Add([]byte(archiveMagic + "\n== link \"a b\" -> \"\\n\"\n== dir c mode=0\n"))
	if data, err := os.ReadFile(filepath.Join("..", "..", "testdata", ArchiveDir, "rxe-vm-captured"+ArchiveExt)); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		note, tree, err := ParseArchive(data)
		if err != nil {
			return
		}
		once, err := FormatArchive(note, tree)
		if err != nil {
			t.Fatalf("a parsed archive does not format: %v", err)
		}
		note2, tree2, err := ParseArchive(once)
		if err != nil {
			t.Fatalf("a formatted archive does not parse: %v\n%s", err, once)
		}
		twice, err := FormatArchive(note2, tree2)
		if err != nil || !bytes.Equal(once, twice) {
			t.Fatalf("format(parse(format(x))) differs (%v):\n%q\n%q", err, once, twice)
		}
	})
}

// TestCommittedArchivesAreCanonical: each archive under testdata/host-archives
// is exactly what FormatArchive writes for its tree, so that re-packing an
// unchanged tree (hosttree pack) changes nothing in the diff.
func TestCommittedArchivesAreCanonical(t *testing.T) {
	testdata := filepath.Join("..", "..", "testdata")
	names, err := ArchivedFixtures(testdata)
	if err != nil || len(names) == 0 {
		t.Fatalf("archived fixtures: %v, %v", names, err)
	}
	for _, name := range names {
		data, err := os.ReadFile(archivePath(testdata, name))
		if err != nil {
			t.Fatal(err)
		}
		note, tree, err := ParseArchive(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.Contains(note, "Sources:") {
			t.Errorf("%s: the archive's note names no sources", name)
		}
		again, err := FormatArchive(note, tree)
		if err != nil || !bytes.Equal(again, data) {
			t.Errorf("%s: the archive is not as FormatArchive writes it (%v)", name, err)
		}
	}
}
