package sysfstest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// This file completes a built host with what the hardware-path checks read
// beyond sysfs: the loader cache (/etc/ld.so.cache, a real binary in glibc's
// format, written from the libraries in the tree the way ldconfig would) and
// the /dev/infiniband nodes (recorded in the facts file: a directory of
// files cannot hold a character device).

const libcSoname = "libc.so.6"

// finishHardware adds the loader configuration, libc, the loader cache and
// the recorded /dev nodes to a built host. Build calls it last; a fixture
// that adds or removes libraries or devices afterwards calls WriteLDCache or
// RecordDevNodes itself (or deliberately does not: a stale cache is a case).
func finishHardware(t *Tree, lay *Layout) {
	for p, c := range lay.LDConf {
		if _, ok := t.Files[p]; !ok {
			t.File(p, c)
		}
	}
	libc := path.Join(lay.LibDir, libcSoname)
	if _, ok := t.Files[libc]; !ok {
		t.File(libc, elfStub(libcSoname))
	}
	WriteLDCache(t)
	RecordDevNodes(t)
}

// sonameRE matches the names ldconfig records: lib<name>.so.<major>.
var sonameRE = regexp.MustCompile(`^lib[^/]*\.so\.[0-9]+$`)

// WriteLDCache writes /etc/ld.so.cache for the libraries in the tree, as
// ldconfig does: every soname link (lib*.so.N) that resolves to a file, in
// the configured directories first and the system directories after, each
// real directory once under the first name it was reached by, sorted the way
// the loader's binary search expects. The system directories and the
// generator are those of the tree's distribution (its /etc/os-release).
func WriteLDCache(t *Tree) {
	lay := layoutOf(t)
	var dirs []string
	seen := map[string]bool{}
	for _, d := range append(ldConfDirs(t), lay.SystemLibDirs...) {
		real, ok := t.resolveDir(d)
		if !ok || seen[real] {
			continue
		}
		seen[real] = true
		dirs = append(dirs, d)
	}
	var entries []LDEntry
	for _, d := range dirs {
		real, _ := t.resolveDir(d)
		for _, name := range t.namesIn(real) {
			if !sonameRE.MatchString(name) {
				continue
			}
			if _, ok := t.resolveFile(path.Join(real, name)); !ok {
				continue // ldconfig skips a link to nothing
			}
			entries = append(entries, LDEntry{Name: name, Path: path.Join(d, name), Flags: sysfs.LDFlagELFLibc6 | sysfs.LDFlagX8664Lib64})
		}
	}
	SortLDEntries(entries)
	t.File(sysfs.LDSOCache, string(EncodeLDCache(entries, lay.LDGenerator)))
}

// ldConfDirs reads the directories named by /etc/ld.so.conf.d/*.conf.
func ldConfDirs(t *Tree) []string {
	var confs []string
	for p := range t.Files {
		if path.Dir(p) == "/etc/ld.so.conf.d" && strings.HasSuffix(p, ".conf") {
			confs = append(confs, p)
		}
	}
	sort.Strings(confs)
	var dirs []string
	for _, c := range confs {
		for _, l := range strings.Split(t.Files[c], "\n") {
			l = strings.TrimSpace(l)
			if strings.HasPrefix(l, "/") {
				dirs = append(dirs, path.Clean(l))
			}
		}
	}
	return dirs
}

// resolve follows symlinks in every element of p within the tree.
func (t *Tree) resolve(p string) (string, bool) {
	p = path.Clean(p)
	for hops := 0; hops < 40; hops++ {
		changed := false
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		cur := "/"
		for i, el := range parts {
			next := path.Join(cur, el)
			if tgt, ok := t.Links[next]; ok {
				if !path.IsAbs(tgt) {
					tgt = path.Join(cur, tgt)
				}
				p = path.Clean(path.Join(append([]string{tgt}, parts[i+1:]...)...))
				changed = true
				break
			}
			cur = next
		}
		if !changed {
			return p, true
		}
	}
	return p, false
}

func (t *Tree) resolveFile(p string) (string, bool) {
	r, ok := t.resolve(p)
	if !ok {
		return r, false
	}
	_, isFile := t.Files[r]
	return r, isFile
}

func (t *Tree) resolveDir(p string) (string, bool) {
	r, ok := t.resolve(p)
	if !ok {
		return r, false
	}
	if t.Dirs[r] {
		return r, true
	}
	for k := range t.Files {
		if strings.HasPrefix(k, r+"/") {
			return r, true
		}
	}
	for k := range t.Links {
		if strings.HasPrefix(k, r+"/") {
			return r, true
		}
	}
	return r, false
}

// namesIn lists the files and links directly in dir, sorted.
func (t *Tree) namesIn(dir string) []string {
	var out []string
	for _, m := range []map[string]string{t.Files, t.Links} {
		for k := range m {
			if path.Dir(k) == dir {
				out = append(out, path.Base(k))
			}
		}
	}
	sort.Strings(out)
	return out
}

// LDEntry is one library of a loader cache to encode.
type LDEntry struct {
	Name  string
	Path  string
	Flags int32
	HWCap uint64
}

// SortLDEntries orders entries as ldconfig does: by name, descending, with
// numbers in names compared as numbers (the loader binary-searches this
// order); entries of the same name keep their order (the first one wins).
func SortLDEntries(e []LDEntry) {
	sort.SliceStable(e, func(i, j int) bool { return libcmp(e[i].Name, e[j].Name) > 0 })
}

// libcmp compares two library names with digit runs compared by value, the
// ordering of glibc's _dl_cache_libcmp.
func libcmp(a, b string) int {
	isDigit := func(c byte) bool { return c >= '0' && c <= '9' }
	i, j := 0, 0
	for i < len(a) {
		switch {
		case isDigit(a[i]) && j < len(b) && isDigit(b[j]):
			si := i
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			sj := j
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			va, vb := digitsValue(a[si:i]), digitsValue(b[sj:j])
			if va != vb {
				if va < vb {
					return -1
				}
				return 1
			}
		case isDigit(a[i]):
			return 1
		case j < len(b) && isDigit(b[j]):
			return -1
		case j >= len(b) || a[i] != b[j]:
			if j >= len(b) {
				return 1
			}
			return int(a[i]) - int(b[j])
		default:
			i++
			j++
		}
	}
	if j < len(b) {
		return -1
	}
	return 0
}

// digitsValue is the value of a run of digits, saturating.
func digitsValue(s string) uint64 {
	var v uint64
	for i := 0; i < len(s); i++ {
		if v > 1<<59 {
			return 1 << 63
		}
		v = v*10 + uint64(s[i]-'0')
	}
	return v
}

// strtab builds a NUL-terminated string table with each string once.
type strtab struct {
	buf bytes.Buffer
	at  map[string]uint32
}

func (s *strtab) add(v string) uint32 {
	if s.at == nil {
		s.at = map[string]uint32{}
	}
	if o, ok := s.at[v]; ok {
		return o
	}
	o := uint32(s.buf.Len())
	s.buf.WriteString(v)
	s.buf.WriteByte(0)
	s.at[v] = o
	return o
}

// EncodeLDCache writes a loader cache in glibc's current format
// ("glibc-ld.so.cache1.1", little-endian) with a generator extension.
func EncodeLDCache(entries []LDEntry, generator string) []byte {
	return encodeLD(entries, generator, false)
}

// EncodeLDCacheCompat writes the layout ldconfig used before glibc 2.32:
// the old "ld.so-1.7.0" table followed, 8-byte aligned, by the new one,
// both pointing into one string table.
func EncodeLDCacheCompat(entries []LDEntry) []byte { return encodeLD(entries, "", true) }

// EncodeLDCacheOld writes only the old "ld.so-1.7.0" table.
func EncodeLDCacheOld(entries []LDEntry) []byte {
	le := binary.LittleEndian
	var st strtab
	type kv struct{ k, v uint32 }
	offs := make([]kv, len(entries))
	for i, e := range entries {
		offs[i] = kv{st.add(e.Name), st.add(e.Path)}
	}
	out := make([]byte, 16, 16+12*len(entries)+st.buf.Len())
	copy(out, "ld.so-1.7.0")
	le.PutUint32(out[12:], uint32(len(entries)))
	for i, e := range entries {
		out = le.AppendUint32(out, uint32(e.Flags))
		out = le.AppendUint32(out, offs[i].k)
		out = le.AppendUint32(out, offs[i].v)
	}
	return append(out, st.buf.Bytes()...)
}

func encodeLD(entries []LDEntry, generator string, compat bool) []byte {
	le := binary.LittleEndian
	var st strtab
	keys := make([]uint32, len(entries))
	vals := make([]uint32, len(entries))
	for i, e := range entries {
		keys[i], vals[i] = st.add(e.Name), st.add(e.Path)
	}
	var out []byte
	oldEnd := 0
	if compat {
		out = make([]byte, 16)
		copy(out, "ld.so-1.7.0")
		le.PutUint32(out[12:], uint32(len(entries)))
		out = append(out, make([]byte, 12*len(entries))...)
		oldEnd = len(out)
		for len(out)%8 != 0 {
			out = append(out, 0)
		}
	}
	newOff := len(out)
	strStart := newOff + 48 + 24*len(entries) // string table position in the file
	hdr := make([]byte, 48)
	copy(hdr, "glibc-ld.so.cache1.1")
	le.PutUint32(hdr[20:], uint32(len(entries)))
	le.PutUint32(hdr[24:], uint32(st.buf.Len()))
	hdr[28] = 2 // little-endian
	out = append(out, hdr...)
	for i, e := range entries {
		out = le.AppendUint32(out, uint32(e.Flags))
		out = le.AppendUint32(out, uint32(strStart-newOff)+keys[i])
		out = le.AppendUint32(out, uint32(strStart-newOff)+vals[i])
		out = le.AppendUint32(out, 0)
		out = le.AppendUint64(out, e.HWCap)
	}
	if compat {
		for i, e := range entries {
			o := 16 + 12*i
			le.PutUint32(out[o:], uint32(e.Flags))
			le.PutUint32(out[o+4:], uint32(strStart-oldEnd)+keys[i])
			le.PutUint32(out[o+8:], uint32(strStart-oldEnd)+vals[i])
		}
	}
	out = append(out, st.buf.Bytes()...)
	if generator != "" {
		for len(out)%4 != 0 {
			out = append(out, 0)
		}
		ext := len(out)
		le.PutUint32(out[newOff+32:], uint32(ext))
		out = le.AppendUint32(out, 0xeaa42174)
		out = le.AppendUint32(out, 1)
		out = le.AppendUint32(out, 0) // tag: generator
		out = le.AppendUint32(out, 0)
		out = le.AppendUint32(out, uint32(ext+8+16))
		out = le.AppendUint32(out, uint32(len(generator)))
		out = append(out, generator...)
	}
	return out
}

// uverbsClassRE matches /sys/class/infiniband_verbs/uverbsN.
var uverbsClassRE = regexp.MustCompile(`^/sys/class/infiniband_verbs/uverbs[0-9]+$`)

// RecordDevNodes records /dev/infiniband as udev leaves it on the host: one
// uverbsN node (mode 0666, the device number of the class's "dev") per
// registered uverbs device, and rdma_cm when rdma_ucm is loaded; each opens
// for the capturing user (root). It replaces what was recorded before.
func RecordDevNodes(t *Tree) {
	if t.Facts == nil {
		return
	}
	df := &sysfs.DevNodeFacts{User: "uid=0 gid=0", Dirs: []string{sysfs.DevInfiniband}, Nodes: []sysfs.DevNode{}}
	var nodes []sysfs.DevNode
	for l := range t.Links {
		if !uverbsClassRE.MatchString(l) {
			continue
		}
		dir, ok := t.resolve(l)
		if !ok {
			continue
		}
		ma, mi, err := sysfs.ParseDevNumber(t.Files[path.Join(dir, "dev")])
		if err != nil {
			continue
		}
		nodes = append(nodes, sysfs.DevNode{Path: path.Join(sysfs.DevInfiniband, path.Base(l)), Type: sysfs.DevChar,
			Major: ma, Minor: mi, Mode: "0666", Open: sysfs.DevOpenOK})
	}
	if strings.Contains(t.Files[sysfs.ProcModules], "rdma_ucm ") {
		nodes = append(nodes, sysfs.DevNode{Path: path.Join(sysfs.DevInfiniband, "rdma_cm"), Type: sysfs.DevChar,
			Major: 10, Minor: 122, Mode: "0666", Open: sysfs.DevOpenOK})
	}
	if len(nodes) > 0 {
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].Path < nodes[j].Path })
		df.Nodes = append([]sysfs.DevNode{{Path: sysfs.DevInfiniband, Type: "dir", Mode: "0755"}}, nodes...)
	}
	t.Facts.DevNodes = df
}

// SetDevNode replaces (or adds) one recorded node.
func SetDevNode(t *Tree, n sysfs.DevNode) {
	df := t.Facts.DevNodes
	for i := range df.Nodes {
		if df.Nodes[i].Path == n.Path {
			df.Nodes[i] = n
			return
		}
	}
	df.Nodes = append(df.Nodes, n)
}

// RemoveDevNode drops a recorded node (and, for a directory, what is in it).
func RemoveDevNode(t *Tree, p string) {
	df := t.Facts.DevNodes
	var keep []sysfs.DevNode
	for _, n := range df.Nodes {
		if n.Path != p && !strings.HasPrefix(n.Path, p+"/") {
			keep = append(keep, n)
		}
	}
	if keep == nil {
		keep = []sysfs.DevNode{}
	}
	df.Nodes = keep
}

// LargeHost is a generated big machine: cards dual-function ConnectX-6 Dx
// cards (two PFs each), every PF an RDMA device with portsPerPF Ethernet
// ports, and vfsPerPF SR-IOV VFs per PF bound to mlx5_core, each with its
// own RDMA device, netdev and address. Every port is ACTIVE with RoCE v2
// GIDs, so the level-1 pipeline walks all of it.
func LargeHost(cards, portsPerPF, vfsPerPF int) *Tree {
	h := CX5RoCE()
	h.Hostname = "large-node"
	h.NICs = nil
	dev, uverbs := 0, 0
	mac := func(n int) string { return fmt.Sprintf("0c:42:a1:%02x:%02x:%02x", (n>>16)&0xff, (n>>8)&0xff, n&0xff) }
	ip := func(n int) string { return fmt.Sprintf("10.%d.%d.%d/16", 64+(n>>16)&0x3f, (n>>8)&0xff, n&0xff) }
	port := func(netdev string, n int) Port {
		return Port{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "100 Gb/sec (4X EDR)", LinkLayer: "Ethernet",
			Netdev: netdev, MAC: mac(n), MTU: 9000, OperUp: true, Addrs: []string{ip(n)}}
	}
	type vfLink struct{ pf, vf string }
	var links []vfLink
	nd := 0
	for c := 0; c < cards; c++ {
		bus := 0x10 + 0x0c*c
		root := fmt.Sprintf("0000:%02x:00.0", bus)
		for pf := 0; pf < 2; pf++ {
			pfAddr := fmt.Sprintf("0000:%02x:00.%d", bus+1, pf)
			n := NIC{Addr: pfAddr, RootPort: root, Vendor: mellanox, Device: 0x101d, Class: 0x020000,
				SubVendor: mellanox, SubDevice: 0x0016, Driver: "mlx5_core", NUMA: c % 2,
				Speed: "16.0 GT/s PCIe", Width: 16, MaxSpeed: "16.0 GT/s PCIe", MaxWidth: 16, BridgeSpeed: "16.0 GT/s PCIe", BridgeWidth: 16,
				TotalVFs: vfsPerPF, IBDev: fmt.Sprintf("mlx5_%d", dev), Uverbs: uverbs,
				NodeGUID: fmt.Sprintf("0c42:a103:00%02x:%04x", c, dev), FW: "22.39.1002 (MT_0000000359)", HCAType: "MT4125", BoardID: "MT_0000000359"}
			for p := 0; p < portsPerPF; p++ {
				n.Ports = append(n.Ports, port(fmt.Sprintf("enp%ds0f%dnp%d", bus+1, pf, p), nd))
				nd++
			}
			h.NICs = append(h.NICs, n)
			dev++
			uverbs++
			for v := 0; v < vfsPerPF; v++ {
				rid := 2 + pf*vfsPerPF + v // ARI routing ID after the two PFs
				vfAddr := fmt.Sprintf("0000:%02x:%02x.%d", bus+1+rid/256, (rid%256)>>3, rid&7)
				h.NICs = append(h.NICs, NIC{Addr: vfAddr, RootPort: root, Vendor: mellanox, Device: 0x101e, Class: 0x020000,
					SubVendor: mellanox, SubDevice: 0x0016, Driver: "mlx5_core", NUMA: c % 2,
					Speed: "Unknown", MaxSpeed: "Unknown",
					IBDev: fmt.Sprintf("mlx5_%d", dev), Uverbs: uverbs,
					NodeGUID: fmt.Sprintf("0000:0000:%04x:%04x", c, dev), FW: "22.39.1002 (MT_0000000359)", HCAType: "MT4126", BoardID: "MT_0000000359",
					Ports: []Port{port(fmt.Sprintf("enp%ds0f%dv%d", bus+1, pf, v), nd)}})
				nd++
				dev++
				uverbs++
				links = append(links, vfLink{pfAddr, vfAddr})
			}
		}
	}
	t := Build(h)
	count := map[string]int{}
	for _, l := range links {
		pfDir, vfDir := pciDir(t, l.pf), pciDir(t, l.vf)
		t.RelLink(path.Join(vfDir, "physfn"), pfDir)
		t.RelLink(path.Join(pfDir, fmt.Sprintf("virtfn%d", count[l.pf])), vfDir)
		count[l.pf]++
		t.Attr(path.Join(pfDir, "sriov_numvfs"), strconv.Itoa(count[l.pf]))
	}
	return t
}

// pciDir is the /sys/devices directory of a function in the tree.
func pciDir(t *Tree, addr string) string {
	d, _ := t.resolve(path.Join(sysfs.PCIDevicesDir, addr))
	return d
}
