package sysfs_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

const x8664 = sysfs.LDFlagELFLibc6 | sysfs.LDFlagX8664Lib64

var ldEntries = []sysfstest.LDEntry{
	{Name: "libibverbs.so.1", Path: "/usr/lib64/libibverbs.so.1", Flags: x8664},
	{Name: "libibverbs.so.1", Path: "/usr/lib/x86_64-linux-gnu/libibverbs.so.1", Flags: x8664},
	{Name: "libibverbs.so.1", Path: "/usr/lib/i386-linux-gnu/libibverbs.so.1", Flags: sysfs.LDFlagELFLibc6},
	{Name: "libc.so.6", Path: "/usr/lib/x86_64-linux-gnu/libc.so.6", Flags: x8664},
	{Name: "libmlx5.so.1", Path: "/usr/lib/aarch64-linux-gnu/libmlx5.so.1", Flags: sysfs.LDFlagELFLibc6 | sysfs.LDFlagAArch64Lib64},
}

func TestParseLDCacheFormats(t *testing.T) {
	for _, tc := range []struct {
		name, format, generator string
		data                    []byte
	}{
		{"new", "new", "ldconfig (GNU libc) 2.36", sysfstest.EncodeLDCache(ldEntries, "ldconfig (GNU libc) 2.36")},
		{"new without extensions", "new", "", sysfstest.EncodeLDCache(ldEntries, "")},
		{"old followed by new", "old+new", "", sysfstest.EncodeLDCacheCompat(ldEntries)},
		{"old only", "old", "", sysfstest.EncodeLDCacheOld(ldEntries)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := sysfs.ParseLDCache(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if c.Format != tc.format || c.Generator != tc.generator {
				t.Errorf("format %q generator %q, want %q %q", c.Format, c.Generator, tc.format, tc.generator)
			}
			if len(c.Entries) != len(ldEntries) {
				t.Fatalf("%d entries, want %d", len(c.Entries), len(ldEntries))
			}
			for i, e := range c.Entries {
				if e.Name != ldEntries[i].Name || e.Path != ldEntries[i].Path || e.Flags != ldEntries[i].Flags {
					t.Errorf("entry %d = %+v, want %+v", i, e, ldEntries[i])
				}
			}
			got := c.Lookup("libibverbs.so.1", sysfs.LDFlagX8664Lib64)
			if len(got) != 2 || got[0].Path != "/usr/lib64/libibverbs.so.1" {
				t.Errorf("x86-64 lookup = %+v, want the two 64-bit copies in cache order", got)
			}
			if got := c.Lookup("libibverbs.so.1", 0); len(got) != 1 || !strings.Contains(got[0].Path, "i386") {
				t.Errorf("32-bit lookup = %+v", got)
			}
			if a := c.Entries[4].Arch(); a != "aarch64" {
				t.Errorf("arch of an aarch64 entry = %q", a)
			}
		})
	}
}

func TestParseLDCacheBigEndianAndHWCaps(t *testing.T) {
	// Build a big-endian new-format cache by hand: one entry with a
	// glibc-hwcaps subdirectory through the extension directory.
	be := binary.BigEndian
	strs := "libfoo.so.1\x00/usr/lib64/glibc-hwcaps/x86-64-v3/libfoo.so.1\x00x86-64-v3\x00"
	hdr := make([]byte, 48)
	copy(hdr, "glibc-ld.so.cache1.1")
	be.PutUint32(hdr[20:], 1)
	be.PutUint32(hdr[24:], uint32(len(strs)))
	hdr[28] = 3 // big-endian
	ent := make([]byte, 24)
	be.PutUint32(ent[0:], uint32(x8664))
	be.PutUint32(ent[4:], 48+24)
	be.PutUint32(ent[8:], 48+24+12)
	be.PutUint64(ent[16:], 1<<62)
	data := append(append(hdr, ent...), strs...)
	for len(data)%4 != 0 {
		data = append(data, 0)
	}
	ext := len(data)
	be.PutUint32(data[32:], uint32(ext))
	hwArr := ext + 8 + 16
	sec := make([]byte, 8+16+4)
	be.PutUint32(sec[0:], 0xeaa42174)
	be.PutUint32(sec[4:], 1)
	be.PutUint32(sec[8:], 1) // glibc-hwcaps
	be.PutUint32(sec[16:], uint32(hwArr))
	be.PutUint32(sec[20:], 4)
	be.PutUint32(sec[24:], uint32(48+24+12+len("/usr/lib64/glibc-hwcaps/x86-64-v3/libfoo.so.1")+1))
	data = append(data, sec...)
	c, err := sysfs.ParseLDCache(data)
	if err != nil {
		t.Fatal(err)
	}
	if !c.BigEndian || len(c.Entries) != 1 || c.Entries[0].Name != "libfoo.so.1" || c.Entries[0].HWCapsDir != "x86-64-v3" {
		t.Fatalf("parsed %+v", c)
	}
}

func TestParseLDCacheRejectsDamage(t *testing.T) {
	good := sysfstest.EncodeLDCache(ldEntries, "gen")
	// Every truncation of a valid file is either a clean error or, once the
	// whole table and its strings are there, a valid parse; never a panic.
	for n := 0; n < len(good); n++ {
		c, err := sysfs.ParseLDCache(good[:n])
		if err == nil && len(c.Entries) != len(ldEntries) {
			t.Fatalf("truncated to %d bytes: parsed %d entries without error", n, len(c.Entries))
		}
		if err != nil && !errors.Is(err, sysfs.ErrLDCacheFormat) {
			t.Fatalf("truncated to %d bytes: error %v does not wrap ErrLDCacheFormat", n, err)
		}
	}
	for _, tc := range []struct {
		name string
		mut  func([]byte) []byte
		want string
	}{
		{"bad magic", func(b []byte) []byte { b[0] = 'X'; return b }, "unknown magic"},
		{"huge count", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[20:], 1<<30); return b }, "does not fit"},
		{"string past the end", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[48+4:], 1<<31); return b }, "past the end"},
		{"marked invalid", func(b []byte) []byte { b[28] = 1; return b }, "invalid"},
		{"unterminated string", func(b []byte) []byte { return bytes.TrimRight(b[:len(b)-len("gen")-24], "\x00") }, ""},
		{"old table too long", func([]byte) []byte {
			b := sysfstest.EncodeLDCacheOld(ldEntries)
			binary.LittleEndian.PutUint32(b[12:], 1<<28)
			return b
		}, "does not fit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.mut(append([]byte(nil), good...))
			_, err := sysfs.ParseLDCache(b)
			if err == nil {
				t.Fatal("parsed a damaged cache without error")
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// TestParseLDCacheOfThisHost parses the machine's own /etc/ld.so.cache and,
// where ldconfig is installed, compares it with `ldconfig -p`.
func TestParseLDCacheOfThisHost(t *testing.T) {
	data, err := os.ReadFile(sysfs.LDSOCache)
	if err != nil {
		t.Skipf("no loader cache on this host: %v", err)
	}
	c, err := sysfs.ParseLDCache(data)
	if err != nil {
		t.Fatalf("parse the host's cache: %v", err)
	}
	if len(c.Entries) == 0 {
		t.Fatal("the host's cache parsed to no entries")
	}
	libc := false
	for _, e := range c.Entries {
		if e.Name == "libc.so.6" {
			libc = true
		}
	}
	if !libc {
		t.Error("the host's cache has no libc.so.6")
	}
	ldconfig, err := exec.LookPath("ldconfig")
	if err != nil {
		for _, p := range []string{"/sbin/ldconfig", "/usr/sbin/ldconfig"} {
			if _, err := os.Stat(p); err == nil {
				ldconfig = p
			}
		}
	}
	if ldconfig == "" {
		t.Skip("ldconfig not installed: parsed only")
	}
	out, err := exec.Command(ldconfig, "-p").Output()
	if err != nil {
		t.Skipf("ldconfig -p: %v", err)
	}
	// "\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1"
	line := regexp.MustCompile(`^\s+(\S+) \(([^)]*)\) => (.+)$`)
	var want []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := line.FindStringSubmatch(sc.Text()); m != nil {
			want = append(want, m[1]+" "+m[3])
		}
	}
	var got []string
	for _, e := range c.Entries {
		got = append(got, e.Name+" "+e.Path)
	}
	if len(got) != len(want) {
		t.Fatalf("parsed %d entries, ldconfig -p lists %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("entry %d: parsed %q, ldconfig -p says %q", i, got[i], want[i])
		}
	}
}

func FuzzParseLDCache(f *testing.F) {
	f.Add(sysfstest.EncodeLDCache(ldEntries, "ldconfig (GNU libc) 2.36"))
	f.Add(sysfstest.EncodeLDCacheCompat(ldEntries))
	f.Add(sysfstest.EncodeLDCacheOld(ldEntries))
	f.Add([]byte("glibc-ld.so.cache1.1"))
	f.Add([]byte("ld.so-1.7.0\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := sysfs.ParseLDCache(data)
		if err != nil {
			if c != nil || !errors.Is(err, sysfs.ErrLDCacheFormat) {
				t.Fatalf("error %v with result %v", err, c)
			}
			return
		}
		if len(c.Entries) > len(data) {
			t.Fatalf("%d entries from %d bytes", len(c.Entries), len(data))
		}
		for _, e := range c.Entries {
			if strings.IndexByte(e.Name, 0) >= 0 || strings.IndexByte(e.Path, 0) >= 0 {
				t.Fatalf("NUL inside a parsed string: %+v", e)
			}
			_ = e.Arch()
		}
	})
}
