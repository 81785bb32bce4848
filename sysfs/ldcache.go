package sysfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
)

// LDSOCache is the dynamic loader's cache of library names → paths, written
// by ldconfig. The loader consults it before its built-in directories.
const LDSOCache = "/etc/ld.so.cache"

// Magic strings of the two cache formats. glibc 2.32 and later write only
// the new one; older ldconfig wrote the old table followed by the new one.
const (
	ldCacheMagicOld = "ld.so-1.7.0"
	ldCacheMagicNew = "glibc-ld.so.cache1.1"
)

// Sizes of the on-disk structures (glibc's sysdeps/generic/dl-cache.h):
// struct cache_file is the 11-byte old magic, padding and nlibs; struct
// file_entry is flags, key, value; struct cache_file_new is 48 bytes;
// struct file_entry_new adds osversion and a 64-bit hwcap.
const (
	ldOldHeader   = 16
	ldOldEntry    = 12
	ldNewHeader   = 48
	ldNewEntry    = 24
	ldExtMagic    = 0xeaa42174 // cache_extension_magic, (uint32_t) -358342284
	ldExtHeader   = 8
	ldExtSection  = 16
	ldMaxString   = 4096 // PATH_MAX: a longer string is not a path
	ldHWCapExtBit = uint64(1) << 62
)

// Entry flags (FLAG_* in dl-cache.h).
const (
	LDFlagTypeMask     = 0x00ff
	LDFlagELF          = 0x0001
	LDFlagELFLibc6     = 0x0003
	LDFlagRequiredMask = 0xff00
	LDFlagX8664Lib64   = 0x0300
	LDFlagAArch64Lib64 = 0x0a00
)

// LDCacheEntry is one library of the cache.
type LDCacheEntry struct {
	Name  string // the soname looked up: "libibverbs.so.1"
	Path  string // where it is: "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"
	Flags int32
	HWCap uint64
	// HWCapsDir is the glibc-hwcaps subdirectory ("x86-64-v3") the entry is
	// for, "" for the baseline entry.
	HWCapsDir string
}

// Arch names the ABI the entry's flags require ("x86-64", "aarch64"), or
// "" for an entry without one (a 32-bit library on a 64-bit host).
func (e LDCacheEntry) Arch() string { return LDArchName(e.Flags) }

// LDArchName names the required-ABI bits of a cache entry's flags.
func LDArchName(flags int32) string {
	names := map[int32]string{
		0x0100: "sparc64", 0x0200: "ia64", 0x0300: "x86-64", 0x0400: "s390x", 0x0500: "ppc64",
		0x0600: "mips64-n32", 0x0700: "mips64", 0x0800: "x32", 0x0900: "arm-hf", 0x0a00: "aarch64",
		0x0b00: "arm-sf", 0x0c00: "mips-nan2008", 0x0d00: "mips64-n32-nan2008", 0x0e00: "mips64-nan2008",
		0x0f00: "riscv-sf", 0x1000: "riscv64", 0x1100: "loongarch-sf", 0x1200: "loongarch64",
	}
	req := flags & LDFlagRequiredMask
	if req == 0 {
		return ""
	}
	if n, ok := names[req]; ok {
		return n
	}
	return fmt.Sprintf("abi-0x%04x", req)
}

// NativeLDFlags are the required-ABI bits of the libraries this program's
// architecture loads (what `ldconfig -p` prints as "libc6,x86-64").
func NativeLDFlags() int32 {
	switch runtime.GOARCH {
	case "amd64":
		return LDFlagX8664Lib64
	case "arm64":
		return LDFlagAArch64Lib64
	case "ppc64", "ppc64le":
		return 0x0500
	case "s390x":
		return 0x0400
	case "riscv64":
		return 0x1000
	case "loong64":
		return 0x1200
	case "arm":
		return 0x0900
	}
	return 0
}

// LDCache is a parsed /etc/ld.so.cache.
type LDCache struct {
	Format    string // "new", "old", or "old+new" (the compatibility layout)
	BigEndian bool
	Generator string // the ldconfig that wrote it, when recorded ("ldconfig (GNU libc) 2.36")
	Entries   []LDCacheEntry
}

// Lookup returns the entries for a soname whose flags require the ABI
// abi (see NativeLDFlags), in cache order: the loader takes the first one
// whose file it can open.
func (c *LDCache) Lookup(name string, abi int32) []LDCacheEntry {
	var out []LDCacheEntry
	for _, e := range c.Entries {
		if e.Name != name || e.Flags&LDFlagRequiredMask != abi {
			continue
		}
		if t := e.Flags & LDFlagTypeMask; t != LDFlagELF && t != LDFlagELFLibc6 {
			continue
		}
		out = append(out, e)
	}
	return out
}

// ABIs returns the required-ABI values present in the cache and how many
// entries each has.
func (c *LDCache) ABIs() map[int32]int {
	out := map[int32]int{}
	for _, e := range c.Entries {
		out[e.Flags&LDFlagRequiredMask]++
	}
	return out
}

// HostABI is the required-ABI value of the libraries the host that wrote
// the cache loads natively. ldconfig flags each entry with the ABI its ELF
// header names (glibc's sysdeps/generic/ldconfig.h: FLAG_X8664_LIB64 0x0300,
// FLAG_AARCH64_LIB64 0x0a00, …), and a host's own loader looks up only its
// _DL_CACHE_DEFAULT_ID (FLAG_AARCH64_LIB64|FLAG_ELF_LIBC6 = 0x0a03 on an
// aarch64 LP64 host). The host's ABI is the one its libc.so.6 is cached
// with — preferred (this program's, see NativeLDFlags) when a libc of it is
// there, so a cache of another architecture (a snapshot of a Grace or
// Kunpeng host judged on an x86-64 workstation) is judged by its own
// libraries, and a few cross-built ones do not decide. Without a 64-bit
// libc entry: preferred when the cache holds libraries of it, else its
// most common ABI, else preferred.
func (c *LDCache) HostABI(preferred int32) int32 {
	libc := int32(0)
	for _, e := range c.Entries {
		abi := e.Flags & LDFlagRequiredMask
		if e.Name != "libc.so.6" || abi == 0 {
			continue
		}
		if abi == preferred {
			return preferred
		}
		if libc == 0 {
			libc = abi
		}
	}
	if libc != 0 {
		return libc
	}
	abis := c.ABIs()
	if abis[preferred] > 0 {
		return preferred
	}
	best, bestN := preferred, 0
	for abi, n := range abis {
		if abi != 0 && (n > bestN || n == bestN && abi < best) {
			best, bestN = abi, n
		}
	}
	return best
}

// ErrLDCacheFormat is wrapped by every parse error.
var ErrLDCacheFormat = errors.New("not a valid loader cache")

func ldErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrLDCacheFormat, fmt.Sprintf(format, args...))
}

// ParseLDCache parses the loader cache in glibc's format ("glibc-ld.so.cache1.1",
// the one ldconfig has written since glibc 2.32) or the old libc5 layout
// ("ld.so-1.7.0"), alone or followed by the new table. Every offset is
// bounds-checked: a truncated or hostile file is an error, never a panic.
func ParseLDCache(data []byte) (*LDCache, error) {
	switch {
	case bytes.HasPrefix(data, []byte(ldCacheMagicNew)):
		return parseLDNew(data, 0, "new")
	case bytes.HasPrefix(data, []byte(ldCacheMagicOld)):
		return parseLDOld(data)
	}
	head := data
	if len(head) > 20 {
		head = head[:20]
	}
	return nil, ldErr("unknown magic %q", head)
}

func parseLDOld(data []byte) (*LDCache, error) {
	if len(data) < ldOldHeader {
		return nil, ldErr("old-format header truncated (%d bytes)", len(data))
	}
	bo := binary.ByteOrder(binary.LittleEndian)
	n := uint64(bo.Uint32(data[12:16]))
	end := uint64(ldOldHeader) + n*ldOldEntry
	if end > uint64(len(data)) {
		return nil, ldErr("old-format table of %d entries does not fit in %d bytes", n, len(data))
	}
	// The new table, when present, starts at the next 8-byte boundary and
	// is what the loader uses.
	if newOff := (end + 7) &^ 7; newOff+ldNewHeader <= uint64(len(data)) &&
		bytes.HasPrefix(data[newOff:], []byte(ldCacheMagicNew)) {
		return parseLDNew(data, int(newOff), "old+new")
	}
	c := &LDCache{Format: "old", Entries: make([]LDCacheEntry, 0, n)}
	strs := data[end:]
	for i := uint64(0); i < n; i++ {
		e := data[ldOldHeader+i*ldOldEntry:]
		flags := int32(bo.Uint32(e[0:4]))
		key, err := ldString(strs, uint64(bo.Uint32(e[4:8])))
		if err != nil {
			return nil, ldErr("entry %d name: %v", i, err)
		}
		val, err := ldString(strs, uint64(bo.Uint32(e[8:12])))
		if err != nil {
			return nil, ldErr("entry %d path: %v", i, err)
		}
		c.Entries = append(c.Entries, LDCacheEntry{Name: key, Path: val, Flags: flags})
	}
	return c, nil
}

// parseLDNew parses the new table that starts at off. Entry strings are
// offsets from the table's start; extension offsets from the file's start.
func parseLDNew(data []byte, off int, format string) (*LDCache, error) {
	if len(data)-off < ldNewHeader {
		return nil, ldErr("header truncated (%d bytes)", len(data)-off)
	}
	h := data[off:]
	c := &LDCache{Format: format}
	var bo binary.ByteOrder = binary.LittleEndian
	switch h[28] & 3 {
	case 1:
		return nil, ldErr("ldconfig marked the cache invalid (endian flag 1)")
	case 3:
		bo, c.BigEndian = binary.BigEndian, true
	}
	n := uint64(bo.Uint32(h[20:24]))
	extOff := uint64(bo.Uint32(h[32:36]))
	if uint64(ldNewHeader)+n*ldNewEntry > uint64(len(h)) {
		return nil, ldErr("table of %d entries does not fit in %d bytes", n, len(h))
	}
	hwcapsDirs := parseLDExtensions(data, extOff, bo, c)
	c.Entries = make([]LDCacheEntry, 0, n)
	for i := uint64(0); i < n; i++ {
		e := h[ldNewHeader+i*ldNewEntry:]
		ent := LDCacheEntry{Flags: int32(bo.Uint32(e[0:4])), HWCap: bo.Uint64(e[16:24])}
		var err error
		if ent.Name, err = ldString(h, uint64(bo.Uint32(e[4:8]))); err != nil {
			return nil, ldErr("entry %d name: %v", i, err)
		}
		if ent.Path, err = ldString(h, uint64(bo.Uint32(e[8:12]))); err != nil {
			return nil, ldErr("entry %d path: %v", i, err)
		}
		if ent.HWCap>>32 == ldHWCapExtBit>>32 {
			if idx := uint64(uint32(ent.HWCap)); idx < uint64(len(hwcapsDirs)) {
				ent.HWCapsDir = hwcapsDirs[idx]
			}
		}
		c.Entries = append(c.Entries, ent)
	}
	return c, nil
}

// parseLDExtensions reads the extension directory: the generator string and
// the glibc-hwcaps subdirectory names. A damaged directory is ignored, as
// the loader ignores it; it never fails the parse.
func parseLDExtensions(data []byte, off uint64, bo binary.ByteOrder, c *LDCache) []string {
	size := uint64(len(data))
	if off == 0 || off%4 != 0 || off+ldExtHeader > size || bo.Uint32(data[off:]) != ldExtMagic {
		return nil
	}
	count := uint64(bo.Uint32(data[off+4:]))
	if off+ldExtHeader+count*ldExtSection > size {
		return nil
	}
	var dirs []string
	for i := uint64(0); i < count; i++ {
		s := data[off+ldExtHeader+i*ldExtSection:]
		tag, so, sz := bo.Uint32(s[0:4]), uint64(bo.Uint32(s[8:12])), uint64(bo.Uint32(s[12:16]))
		if so+sz > size {
			return nil
		}
		body := data[so : so+sz]
		switch tag {
		case 0: // generator
			g := body
			if len(g) > 256 {
				g = g[:256]
			}
			c.Generator = string(bytes.TrimRight(g, "\x00"))
		case 1: // glibc-hwcaps: uint32 string offsets from the file's start
			if sz%4 != 0 || sz/4 > 1024 {
				continue
			}
			for j := uint64(0); j < sz/4; j++ {
				name, err := ldString(data, uint64(bo.Uint32(body[j*4:])))
				if err != nil {
					name = ""
				}
				dirs = append(dirs, name)
			}
		}
	}
	return dirs
}

// ldString returns the NUL-terminated string at off in b.
func ldString(b []byte, off uint64) (string, error) {
	if off >= uint64(len(b)) {
		return "", fmt.Errorf("string offset %d is past the end (%d bytes)", off, len(b))
	}
	s := b[off:]
	if len(s) > ldMaxString+1 {
		s = s[:ldMaxString+1]
	}
	i := bytes.IndexByte(s, 0)
	if i < 0 {
		return "", fmt.Errorf("string at %d is not terminated within %d bytes", off, ldMaxString)
	}
	return string(s[:i]), nil
}

// ReadLDCache reads and parses the host's /etc/ld.so.cache.
func (h *Host) ReadLDCache() (*LDCache, error) {
	data, err := h.ReadFile(LDSOCache)
	if err != nil {
		return nil, err
	}
	c, err := ParseLDCache(data)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", h.Display(LDSOCache), err)
	}
	return c, nil
}
