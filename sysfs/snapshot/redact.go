package snapshot

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Redactor replaces hostnames, IP addresses, MAC addresses and GUIDs in text
// consistently: the same value always gets the same replacement, in every
// file and in the facts, so a redacted snapshot still agrees with itself.
// Formats stay valid — a GID stays a GID, an IPv4-mapped GID carries the
// replacement of its IPv4 address, a link-local GID made from a MAC carries
// the replacement MAC — and replacements come from the documentation
// ranges: 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24 (then the
// benchmarking 198.18.0.0/15), 2001:db8::/32, MACs 00:00:5e:00:53:xx.
//
// IPv4 addresses are mapped a /24 at a time, keeping the last octet, so two
// addresses in one /24 stay in one /24. Loopback, unspecified, broadcast and
// multicast addresses, and the all-zero and broadcast MACs, are kept.
type Redactor struct {
	hosts  map[string]string
	v4nets map[[3]byte][3]byte
	v6pfx  map[[8]byte][8]byte
	macs   map[[6]byte][6]byte
	guids  map[[8]byte][8]byte
	nguid  int // GUIDs given a sequence number (not derived from a MAC)
	// nodeDescs maps the InfiniBand node descriptions of other nodes (an
	// SM's, a neighbour switch's) to "redacted-node-N".
	nodeDescs map[string]string
	// serials are the plug-in modules' serial numbers and their stand-ins.
	serials map[string]string
	// registerOnly makes Text learn MACs without rewriting (the first pass,
	// so that a GUID derived from a MAC finds that MAC already known).
	registerOnly bool
}

// NewRedactor returns an empty Redactor.
func NewRedactor() *Redactor {
	return &Redactor{
		hosts: map[string]string{}, v4nets: map[[3]byte][3]byte{}, v6pfx: map[[8]byte][8]byte{},
		macs: map[[6]byte][6]byte{}, guids: map[[8]byte][8]byte{}, nodeDescs: map[string]string{},
	}
}

// Hostname registers a host name (and its first label) for replacement and
// returns what it becomes.
func (r *Redactor) Hostname(name string) string {
	name = strings.TrimSpace(name)
	if name == "" || name == "localhost" {
		return name
	}
	if rep, ok := r.hosts[name]; ok {
		return rep
	}
	short, _, fqdn := strings.Cut(name, ".")
	if fqdn {
		if len(short) >= 2 {
			r.hosts[short] = "redacted-host"
		}
		r.hosts[name] = "redacted-host.example"
	} else {
		r.hosts[name] = "redacted-host"
	}
	return r.hosts[name]
}

// Text returns s with every address, GUID and registered host name replaced.
// ok is false for binary content, which is returned unchanged.
func (r *Redactor) Text(s []byte) (out []byte, ok bool) {
	if bytes.IndexByte(s, 0) >= 0 || !utf8.Valid(s) {
		return s, false
	}
	var b bytes.Buffer
	b.Grow(len(s))
	i := 0
	for i < len(s) {
		if !isAddrByte(s[i]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && isAddrByte(s[j]) {
			j++
		}
		b.WriteString(r.token(s, i, j))
		i = j
	}
	out = b.Bytes()
	if len(r.hosts) > 0 {
		out = r.replaceHosts(out)
	}
	return out, true
}

func isAddrByte(c byte) bool {
	return c == ':' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isWordByte(c byte) bool {
	return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// token rewrites the run s[i:j] of address characters when it is a whole
// address, and returns it unchanged otherwise.
func (r *Redactor) token(s []byte, i, j int) string {
	run := string(s[i:j])
	// A run glued to a word ("pci0000:3a", "libibverbs.so.1.14.44.0") is
	// part of a name, not an address.
	if i > 0 && (isWordByte(s[i-1]) || s[i-1] == '-') {
		// "addr:10.0.0.1": a single leading colon separates a label.
		if run[0] == ':' && !strings.HasPrefix(run, "::") && j > i+1 {
			return ":" + r.token(s, i+1, j)
		}
		return run
	}
	if j < len(s) && (isWordByte(s[j]) || s[j] == '-') {
		return run
	}
	if run[0] == '.' {
		return run
	}
	core := strings.TrimRight(run, ".:")
	if core == "" {
		return run
	}
	// "fe80::" ends in colons that belong to it.
	if strings.HasSuffix(run, "::") && strings.Count(run, "::") == 1 {
		core = run
	}
	rep, ok := r.address(core)
	if !ok {
		return run
	}
	return rep + run[len(core):]
}

// address redacts one whole token, or says it is not an address.
func (r *Redactor) address(t string) (string, bool) {
	upper := strings.ToUpper(t) == t && strings.ToLower(t) != t
	out, ok := r.addressLower(strings.ToLower(t))
	if ok && upper {
		out = strings.ToUpper(out)
	}
	return out, ok
}

func (r *Redactor) addressLower(t string) (string, bool) {
	groups := strings.Split(t, ":")
	switch {
	case strings.Count(t, ".") == 3 && len(groups) == 1:
		a, err := netip.ParseAddr(t)
		if err != nil || !a.Is4() {
			return "", false
		}
		return r.v4(a).String(), true
	case allLen(groups, 2) && len(groups) >= 6:
		raw, ok := hexGroups(groups)
		if !ok {
			return "", false
		}
		switch len(raw) {
		case 6:
			m := r.mac([6]byte(raw))
			return colonBytes(m[:]), true
		case 8:
			g := r.iid([8]byte(raw))
			return colonBytes(g[:]), true
		case 20: // IPoIB hardware address: flags and QPN, then the port GID
			g := r.gid([16]byte(raw[4:]))
			return colonBytes(append(raw[:4:4], g[:]...)), true
		}
		return "", false
	case allLen(groups, 4) && len(groups) == 8:
		raw, ok := hexGroups(groups)
		if !ok {
			return "", false
		}
		g := r.gid([16]byte(raw))
		return quadGroups(g[:]), true
	case allLen(groups, 4) && len(groups) == 4:
		raw, ok := hexGroups(groups)
		if !ok {
			return "", false
		}
		g := r.guid([8]byte(raw))
		return quadGroups(g[:]), true
	case len(groups) >= 3:
		a, err := netip.ParseAddr(t)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", false
		}
		return netip.AddrFrom16(r.gid(a.As16())).String(), true
	}
	return "", false
}

func allLen(groups []string, n int) bool {
	for _, g := range groups {
		if len(g) != n {
			return false
		}
	}
	return true
}

func hexGroups(groups []string) ([]byte, bool) {
	raw, err := hex.DecodeString(strings.Join(groups, ""))
	return raw, err == nil
}

func colonBytes(b []byte) string {
	parts := make([]string, len(b))
	for i, c := range b {
		parts[i] = fmt.Sprintf("%02x", c)
	}
	return strings.Join(parts, ":")
}

func quadGroups(b []byte) string {
	parts := make([]string, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		parts = append(parts, fmt.Sprintf("%02x%02x", b[i], b[i+1]))
	}
	return strings.Join(parts, ":")
}

// docNets are the /24s IPv4 addresses are mapped into, in order.
func docNet(n int) [3]byte {
	switch n {
	case 0:
		return [3]byte{192, 0, 2}
	case 1:
		return [3]byte{198, 51, 100}
	case 2:
		return [3]byte{203, 0, 113}
	}
	n -= 3
	if n < 512 {
		return [3]byte{198, 18 + byte(n/256), byte(n % 256)}
	}
	n -= 512 // past 515 networks: the reserved 240.0.0.0/4
	return [3]byte{240 + byte(n>>16&0x0f), byte(n >> 8), byte(n)}
}

func (r *Redactor) v4(a netip.Addr) netip.Addr {
	b := a.As4()
	if a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() || b == [4]byte{255, 255, 255, 255} {
		return a
	}
	key := [3]byte{b[0], b[1], b[2]}
	net, ok := r.v4nets[key]
	if !ok {
		net = docNet(len(r.v4nets))
		if !r.registerOnly {
			r.v4nets[key] = net
		}
	}
	return netip.AddrFrom4([4]byte{net[0], net[1], net[2], b[3]})
}

// mac maps a MAC to 00:00:5e:00:53:xx (then 02:00:5e:… when more are needed).
func (r *Redactor) mac(m [6]byte) [6]byte {
	if m == [6]byte{} || m == [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} {
		return m
	}
	if rep, ok := r.macs[m]; ok {
		return rep
	}
	n := len(r.macs) + 1
	rep := [6]byte{0x00, 0x00, 0x5e, 0x00, 0x53, byte(n)}
	if n > 255 {
		rep = [6]byte{0x02, 0x00, 0x5e, byte(n >> 16), byte(n >> 8), byte(n)}
	}
	r.macs[m] = rep
	return rep
}

// iid maps a 64-bit interface identifier or GUID. One made from a MAC the
// usual ways — EUI-64 (ff:fe in the middle, universal/local bit flipped), or
// a NIC's node GUID with 03:00 in the middle of a MAC already seen — keeps
// that relation to the replacement MAC.
func (r *Redactor) iid(g [8]byte) [8]byte {
	if g == [8]byte{} {
		return g
	}
	if rep, ok := r.guids[g]; ok {
		return rep
	}
	var rep [8]byte
	switch {
	case g[3] == 0xff && g[4] == 0xfe:
		m := r.mac([6]byte{g[0] ^ 0x02, g[1], g[2], g[5], g[6], g[7]})
		rep = [8]byte{m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]}
	case g[3] == 0x03 && g[4] == 0x00 && r.knownMAC([6]byte{g[0], g[1], g[2], g[5], g[6], g[7]}):
		m := r.mac([6]byte{g[0], g[1], g[2], g[5], g[6], g[7]})
		rep = [8]byte{m[0], m[1], m[2], 0x03, 0x00, m[3], m[4], m[5]}
	default:
		binary.BigEndian.PutUint64(rep[:], 0x02005e1000000000|uint64(r.nguid+1))
		if !r.registerOnly {
			r.nguid++
		}
	}
	if !r.registerOnly {
		r.guids[g] = rep
	}
	return rep
}

func (r *Redactor) knownMAC(m [6]byte) bool { _, ok := r.macs[m]; return ok }

// guid is a node, system image or port GUID: the same map as an interface ID.
func (r *Redactor) guid(g [8]byte) [8]byte { return r.iid(g) }

// gid redacts a 128-bit GID or IPv6 address: the /64 prefix (link-local
// kept, others into 2001:db8::/32) and the interface ID separately, and an
// IPv4-mapped one through its IPv4 address.
func (r *Redactor) gid(b [16]byte) [16]byte {
	a := netip.AddrFrom16(b)
	if a.Is4In6() {
		v4 := r.v4(a.Unmap()).As4()
		copy(b[12:], v4[:])
		return b
	}
	if a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() {
		return b
	}
	var pfx [8]byte
	copy(pfx[:], b[:8])
	if !(a.IsLinkLocalUnicast() && binary.BigEndian.Uint64(pfx[:]) == 0xfe80000000000000) && pfx != [8]byte{} {
		rep, ok := r.v6pfx[pfx]
		if !ok {
			binary.BigEndian.PutUint64(rep[:], 0x20010db800000000|uint64(len(r.v6pfx)+1))
			if !r.registerOnly {
				r.v6pfx[pfx] = rep
			}
		}
		pfx = rep
	}
	id := r.iid([8]byte(b[8:]))
	copy(b[:8], pfx[:])
	copy(b[8:], id[:])
	return b
}

// replaceHosts replaces whole-word occurrences of the registered host
// names, longest first (a full name before its first label).
func (r *Redactor) replaceHosts(s []byte) []byte {
	names := make([]string, 0, len(r.hosts))
	for n := range r.hosts {
		names = append(names, n)
	}
	// longest first, then alphabetical, for a deterministic result
	for i := 1; i < len(names); i++ {
		for j := i; j > 0 && (len(names[j]) > len(names[j-1]) || len(names[j]) == len(names[j-1]) && names[j] < names[j-1]); j-- {
			names[j], names[j-1] = names[j-1], names[j]
		}
	}
	for _, n := range names {
		if len(n) < minHostWord {
			// A name this short ("vm") is also a word of ordinary text: it
			// is replaced only where it is the whole content (the hostname file).
			if string(bytes.TrimSpace(s)) == n {
				s = bytes.Replace(s, []byte(n), []byte(r.hosts[n]), 1)
			}
			continue
		}
		s = replaceWord(s, n, r.hosts[n])
	}
	return s
}

// minHostWord is the shortest host name replaced wherever it stands.
const minHostWord = 3

func isHostByte(c byte) bool { return isWordByte(c) || c == '-' }

func replaceWord(s []byte, word, rep string) []byte {
	if !bytes.Contains(s, []byte(word)) {
		return s
	}
	var b bytes.Buffer
	for {
		k := bytes.Index(s, []byte(word))
		if k < 0 {
			b.Write(s)
			return b.Bytes()
		}
		end := k + len(word)
		whole := (k == 0 || !isHostByte(s[k-1])) && (end == len(s) || !isHostByte(s[end]))
		b.Write(s[:k])
		if whole {
			b.WriteString(rep)
		} else {
			b.WriteString(word)
		}
		s = s[end:]
	}
}

// redactSnapshot rewrites a captured snapshot in place: first every text is
// scanned so that each MAC is known before a GUID derived from it, then the
// facts (hostname first), every copied file in path order and the manifest
// are rewritten with one Redactor.
func redactSnapshot(s *Snapshot) {
	r := NewRedactor()
	if s.Facts.Hostname != "" {
		s.Facts.Hostname = r.Hostname(s.Facts.Hostname)
	}
	if s.Manifest.Hostname != "" {
		s.Manifest.Hostname = r.Hostname(s.Manifest.Hostname)
	}
	redactIBFabric(r, s.Facts.IBFabric)
	factsJSON, _ := json.Marshal(s.Facts)
	entries := s.Tree.Entries()

	r.registerOnly = true
	r.learnMACs(factsJSON)
	r.learnMACs(s.KernelLog)
	for _, e := range entries {
		if e.Kind == File && !e.Placeholder {
			r.learnMACs(e.Data)
		}
	}
	r.registerOnly = false

	if out, ok := r.Text(factsJSON); ok {
		var f sysfs.Facts
		if json.Unmarshal(out, &f) == nil {
			*s.Facts = f
		}
	}
	redactModuleSerials(r, s.Facts)
	for _, e := range entries {
		if e.Kind != File || e.Placeholder || len(e.Data) == 0 {
			continue
		}
		out, ok := r.Text(e.Data)
		if !ok {
			s.Manifest.NotRedacted = append(s.Manifest.NotRedacted, "/"+e.Path)
			continue
		}
		s.Tree.bytes += int64(len(out) - len(e.Data))
		e.Data = out
	}
	redactKernelLog(r, s)
	s.Manifest.Source = string(mustText(r, []byte(s.Manifest.Source)))
	for i := range s.Manifest.Unreadable {
		s.Manifest.Unreadable[i].Reason = string(mustText(r, []byte(s.Manifest.Unreadable[i].Reason)))
	}
	for k, v := range s.Manifest.FactsUnavailable {
		s.Manifest.FactsUnavailable[k] = string(mustText(r, []byte(v)))
	}
}

// NodeDesc redacts an InfiniBand node description. One that names a
// registered host (this host's own, "node01 mlx5_0") keeps its shape, the
// host name replaced as everywhere else; any other names a node of the
// fabric (an SM host, a switch) and becomes "redacted-node-N", the same
// description always the same N.
func (r *Redactor) NodeDesc(desc string) string {
	if desc == "" {
		return desc
	}
	if out := string(r.replaceHosts([]byte(desc))); out != desc {
		return out
	}
	if rep, ok := r.nodeDescs[desc]; ok {
		return rep
	}
	rep := fmt.Sprintf("redacted-node-%d", len(r.nodeDescs)+1)
	r.nodeDescs[desc] = rep
	return rep
}

// redactIBFabric replaces the node descriptions the fabric gave; its GUIDs
// and subnet prefixes are rewritten with the rest of the facts' text.
func redactIBFabric(r *Redactor, f *sysfs.IBFabricFacts) {
	if f == nil {
		return
	}
	for i := range f.Ports {
		p := &f.Ports[i]
		if p.SM != nil {
			p.SM.NodeDesc = r.NodeDesc(p.SM.NodeDesc)
		}
		if p.SMs != nil {
			for j := range p.SMs.SMs {
				p.SMs.SMs[j].NodeDesc = r.NodeDesc(p.SMs.SMs[j].NodeDesc)
			}
		}
		if p.Neighbour != nil {
			p.Neighbour.NodeDesc = r.NodeDesc(p.Neighbour.NodeDesc)
		}
	}
}

// redactModuleSerials replaces each plug-in module's vendor serial number
// in its recorded EEPROM pages (hex, which the text pass does not read)
// with "SN" and a number, the same serial the same number. A module whose
// pages hold no serial where its specification puts one keeps them as
// they are: the decoders read nothing from them either.
func redactModuleSerials(r *Redactor, f *sysfs.Facts) {
	for dev, m := range f.ModuleEEPROMs {
		if m.ReplaceSerial(r.serial) {
			f.ModuleEEPROMs[dev] = m
		}
	}
}

// serial is the stand-in for a module serial number.
func (r *Redactor) serial(sn string) string {
	if sn == "" {
		return ""
	}
	if r.serials == nil {
		r.serials = map[string]string{}
	}
	if v, ok := r.serials[sn]; ok {
		return v
	}
	v := fmt.Sprintf("SN%04d", len(r.serials)+1)
	r.serials[sn] = v
	return v
}

// learnMACs registers, in order of appearance, the MACs in s (plain, and
// inside EUI-64 interface IDs), without rewriting anything.
func (r *Redactor) learnMACs(s []byte) {
	if bytes.IndexByte(s, 0) >= 0 {
		return
	}
	for i := 0; i < len(s); {
		if !isAddrByte(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isAddrByte(s[j]) {
			j++
		}
		r.token(s, i, j) // mac() records even in registerOnly mode; the rest is discarded
		i = j
	}
}

func mustText(r *Redactor, s []byte) []byte {
	out, _ := r.Text(s)
	return out
}

// redactKernelLog rewrites the kernel log with the snapshot's Redactor.
// A log it cannot rewrite (binary bytes) is dropped, never kept unredacted.
func redactKernelLog(r *Redactor, s *Snapshot) {
	if s.KernelLog == nil {
		return
	}
	out, ok := r.Text(s.KernelLog)
	if !ok {
		s.KernelLog, s.Manifest.KernelLog = nil, nil
		if s.Facts.Unavailable == nil {
			s.Facts.Unavailable = map[string]string{}
		}
		s.Facts.Unavailable["kernel_log"] = "dropped: --redact cannot rewrite it (binary bytes)"
		s.Manifest.FactsUnavailable = s.Facts.Unavailable
		return
	}
	s.KernelLog = out
}
