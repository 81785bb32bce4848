package sysfs

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Where rdma-core keeps its configuration and providers.
const (
	// LibibverbsConfDir holds one <name>.driver file per provider
	// ("driver mlx5"); libibverbs loads only the providers named there.
	LibibverbsConfDir = "/etc/libibverbs.d"
	// ProviderSubdir is the provider directory's name next to the library:
	// <libdir>/libibverbs/lib<name>-rdmav<N>.so.
	ProviderSubdir = "libibverbs"
)

// maxLinkHops bounds a symlink chain, as the kernel does (40 in a path walk).
const maxLinkHops = 40

// LinkChain is a path followed through its symlinks to the file at the end.
type LinkChain struct {
	Hops  []string // the path asked for, then every symlink target as an absolute host path
	Final string   // the last path: the real file when Err is nil
	// Dangling is set when a link in the chain points at nothing.
	Dangling bool
	// Absent is set when the first path itself does not exist.
	Absent bool
	Err    error       // why the chain does not end in a regular file
	Info   fs.FileInfo // the final file's stat, when it exists
}

// OK reports a chain that ends in a regular file.
func (c LinkChain) OK() bool { return c.Err == nil }

// String prints the chain "a -> b -> c".
func (c LinkChain) String() string { return strings.Join(c.Hops, " -> ") }

// FollowLinks follows p through its symlinks (relative targets taken from
// the link's directory, absolute ones inside the root) to a regular file.
func (h *Host) FollowLinks(p string) LinkChain {
	cur := path.Clean("/" + p)
	c := LinkChain{Hops: []string{cur}}
	for i := 0; ; i++ {
		fi, err := h.Lstat(cur)
		if err != nil {
			c.Final, c.Err = cur, err
			if IsNotExist(err) {
				if i == 0 {
					c.Absent = true
				} else {
					c.Dangling = true
					c.Err = fmt.Errorf("dangling symlink: %s -> %s, which does not exist", c.Hops[len(c.Hops)-2], cur)
				}
			}
			return c
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			c.Final = cur
			if !fi.Mode().IsRegular() {
				c.Err = fmt.Errorf("%s is not a regular file (%s)", h.Display(cur), fileType(fi.Mode()))
				return c
			}
			// Stat through the host so the identity (device, inode) is the
			// file's own, comparable with os.SameFile.
			if st, err := h.Stat(cur); err == nil {
				c.Info = st
			} else {
				c.Info = fi
			}
			return c
		}
		if i >= maxLinkHops {
			c.Final, c.Err = cur, fmt.Errorf("more than %d symlinks from %s: a loop", maxLinkHops, c.Hops[0])
			return c
		}
		t, err := h.Readlink(cur)
		if err != nil {
			c.Final, c.Err = cur, err
			return c
		}
		if path.IsAbs(t) {
			cur = path.Clean(t)
		} else {
			cur = path.Clean(path.Join(path.Dir(cur), t))
		}
		c.Hops = append(c.Hops, cur)
	}
}

// SameFile reports whether two chains end in the same file (the same inode
// reached through different names, such as /lib → /usr/lib on merged-/usr).
func SameFile(a, b LinkChain) bool {
	if a.Info == nil || b.Info == nil {
		return a.Final == b.Final
	}
	return os.SameFile(a.Info, b.Info)
}

// ELFClass reads the ELF header of a file: 64 or 32 for a 64/32-bit ELF
// object, an error when the file is not ELF.
func (h *Host) ELFClass(p string) (int, error) {
	h.note(p, AccessRead)
	f, err := h.open(p)
	if err != nil {
		return 0, h.pathErr("read", p, err)
	}
	defer f.Close()
	var hdr [5]byte
	n, _ := f.Read(hdr[:])
	if n < 5 || string(hdr[:4]) != "\x7fELF" {
		return 0, fmt.Errorf("%s is not an ELF shared object", h.Display(p))
	}
	switch hdr[4] {
	case 1:
		return 32, nil
	case 2:
		return 64, nil
	}
	return 0, fmt.Errorf("%s: unknown ELF class %d", h.Display(p), hdr[4])
}

// Multiarch returns the Debian multiarch triplet of an ABI (NativeLDFlags
// values): "x86_64-linux-gnu" for x86-64.
func Multiarch(abi int32) string {
	switch abi {
	case LDFlagX8664Lib64:
		return "x86_64-linux-gnu"
	case LDFlagAArch64Lib64:
		return "aarch64-linux-gnu"
	case 0x0500:
		return "powerpc64le-linux-gnu"
	case 0x0400:
		return "s390x-linux-gnu"
	case 0x1000:
		return "riscv64-linux-gnu"
	case 0x1200:
		return "loongarch64-linux-gnu"
	}
	return ""
}

// StandardLibDirs are the directories a loader of the ABI searches when the
// cache does not name a library: the lib64 pair of the Red Hat and SUSE
// families, the multiarch pair of the Debian family, and plain /lib, /usr/lib.
// Each loader build searches only some of them; a library found only there
// is reported as such.
func StandardLibDirs(abi int32) []string {
	dirs := []string{"/lib64", "/usr/lib64"}
	if t := Multiarch(abi); t != "" {
		dirs = append(dirs, "/lib/"+t, "/usr/lib/"+t)
	}
	return append(dirs, "/lib", "/usr/lib")
}

// ParseDriverFile parses a libibverbs.d/<name>.driver file the way libibverbs
// reads it: one "driver <name>" per line, '#' comments and blank lines
// ignored. Lines it would ignore with a warning are returned as errors.
func ParseDriverFile(data []byte) (names []string, problems []error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1024), 64*1024)
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if f[0] != "driver" {
			problems = append(problems, fmt.Errorf("line %d: unknown key %q (libibverbs ignores it)", line, trimForMsg(f[0])))
			continue
		}
		if len(f) < 2 {
			problems = append(problems, fmt.Errorf("line %d: \"driver\" without a name", line))
			continue
		}
		names = append(names, f[1])
	}
	if err := sc.Err(); err != nil {
		problems = append(problems, fmt.Errorf("after line %d: %w", line, err))
	}
	return names, problems
}

// ConfiguredProviders reads every /etc/libibverbs.d/*.driver file: provider
// name → the file that names it. A missing directory is an error for which
// IsNotExist is true.
func (h *Host) ConfiguredProviders() (map[string]string, []error, error) {
	names, err := h.ReadDir(LibibverbsConfDir)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]string{}
	var problems []error
	for _, n := range names {
		if !strings.HasSuffix(n, ".driver") {
			continue
		}
		p := path.Join(LibibverbsConfDir, n)
		data, err := h.ReadFile(p)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		provs, errs := ParseDriverFile(data)
		for _, e := range errs {
			problems = append(problems, fmt.Errorf("%s: %w", h.Display(p), e))
		}
		for _, pv := range provs {
			if _, dup := out[pv]; !dup {
				out[pv] = p
			}
		}
	}
	return out, problems, nil
}

// ProviderFiles lists the files in dir named lib<name>-rdmav<N>.so.
func (h *Host) ProviderFiles(dir, name string) ([]string, error) {
	names, err := h.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	prefix := "lib" + name + "-rdmav"
	for _, n := range names {
		if len(n) > len(prefix)+3 && strings.HasPrefix(n, prefix) && strings.HasSuffix(n, ".so") && isDigits(n[len(prefix):len(n)-3]) {
			out = append(out, path.Join(dir, n))
		}
	}
	return out, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
