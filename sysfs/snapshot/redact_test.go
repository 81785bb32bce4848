package snapshot_test

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/snapshot"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestRedactorText(t *testing.T) {
	r := snapshot.NewRedactor()
	r.Hostname("node01.lab.example.net")
	cases := []struct{ in, want string }{
		// MAC, then the GIDs and GUIDs made from it
		{"0c:42:a1:2b:3c:4c\n", "00:00:5e:00:53:01\n"},
		{"fe80:0000:0000:0000:0e42:a1ff:fe2b:3c4c", "fe80:0000:0000:0000:0200:5eff:fe00:5301"},
		{"fe80::e42:a1ff:fe2b:3c4c/64", "fe80::200:5eff:fe00:5301/64"},
		{"0c42:a103:002b:3c4c", "0000:5e03:0000:5301"},
		// IPv4 by /24, keeping the host octet; the mapped GID follows
		{"10.20.30.40/24", "192.0.2.40/24"},
		{"0000:0000:0000:0000:0000:ffff:0a14:1e28", "0000:0000:0000:0000:0000:ffff:c000:0228"},
		{"::ffff:10.20.30.41", "::ffff:192.0.2.41"},
		{"10.20.31.1", "198.51.100.1"},
		{"inet addr:10.20.30.40 mask", "inet addr:192.0.2.40 mask"},
		// an IB port GUID and the GID made from it
		{"b83f:d203:00a1:2c6e", "0200:5e10:0000:0001"},
		{"fe80:0000:0000:0000:b83f:d203:00a1:2c6e", "fe80:0000:0000:0000:0200:5e10:0000:0001"},
		// IPoIB hardware address: QPN kept, GID redacted
		{"00:00:10:87:fe:80:00:00:00:00:00:00:b8:3f:d2:03:00:a1:2c:6e", "00:00:10:87:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01"},
		// a global IPv6 prefix goes to 2001:db8::/32, the EUI-64 follows the MAC
		{"fd12:3456:789a:1:e42:a1ff:fe2b:3c4c", "2001:db8:0:1:200:5eff:fe00:5301"},
		// host names, whole words only
		{"node01.lab.example.net mlx5_0", "redacted-host.example mlx5_0"},
		{"node01 mlx5_0", "redacted-host mlx5_0"},
		{"node012 xnode01", "node012 xnode01"},
		// kept: not addresses, or addresses that identify nothing
		{"libibverbs.so.1.14.44.0", "libibverbs.so.1.14.44.0"},
		{"0000:3b:00.0 pci0000:3a 16.35.2000 6.1.0-18-amd64", "0000:3b:00.0 pci0000:3a 16.35.2000 6.1.0-18-amd64"},
		{"127.0.0.1/8 ::1 0.0.0.0 ff:ff:ff:ff:ff:ff 00:00:00:00:00:00", "127.0.0.1/8 ::1 0.0.0.0 ff:ff:ff:ff:ff:ff 00:00:00:00:00:00"},
		{"0000:0000:0000:0000:0000:0000:0000:0000", "0000:0000:0000:0000:0000:0000:0000:0000"},
		{"12:34:56 4: ACTIVE", "12:34:56 4: ACTIVE"},
		{"0C:42:A1:2B:3C:4C", "00:00:5E:00:53:01"},
	}
	for _, c := range cases {
		got, ok := r.Text([]byte(c.in))
		if !ok || string(got) != c.want {
			t.Errorf("%q → %q, want %q", c.in, got, c.want)
		}
	}
	short := snapshot.NewRedactor()
	short.Hostname("vm")
	for in, want := range map[string]string{"vm\n": "redacted-host\n", "vm.overcommit_memory vm mlx5_0": "vm.overcommit_memory vm mlx5_0"} {
		if got, _ := short.Text([]byte(in)); string(got) != want {
			t.Errorf("short host name: %q → %q, want %q", in, got, want)
		}
	}
	if _, ok := r.Text([]byte("\x7fELF\x00\x01")); ok {
		t.Error("binary content redacted")
	}
}

// redactedHost is the ConnectX-5 host on private addresses with an IPv6
// global address, so that every kind of value has something to hide.
func redactedHost(t *testing.T) string {
	h := sysfstest.CX5RoCE()
	h.NICs[0].Ports[0].Addrs = []string{"10.20.30.10/24", "fd12:3456:789a:1::10/64"}
	h.NICs[1].Ports[0].Addrs = []string{"10.20.31.10/24"}
	dir := filepath.Join(t.TempDir(), "host")
	if err := sysfstest.Build(h).Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRedactedSnapshot: a redacted snapshot gives the same verdicts, holds
// none of the host's names, addresses or GUIDs, and still agrees with
// itself (MAC ↔ link-local GID ↔ node GUID, IPv4 ↔ IPv4-mapped GID).
func TestRedactedSnapshot(t *testing.T) {
	src := redactedHost(t)
	plain := capture(t, src, false)
	red := capture(t, src, true)
	out := filepath.Join(t.TempDir(), "red")
	if err := red.WriteDir(out); err != nil {
		t.Fatal(err)
	}

	srcRep, redRep := reportOf(t, src), reportOf(t, out)
	if srcRep.ExitCode != redRep.ExitCode || !reflect.DeepEqual(statuses(srcRep.Checks), statuses(redRep.Checks)) {
		t.Errorf("redaction changed the verdicts: exit %d → %d\n%v\n%v", srcRep.ExitCode, redRep.ExitCode, statuses(srcRep.Checks), statuses(redRep.Checks))
	}
	if !red.Manifest.Redacted || red.Facts.Hostname != "redacted-host" {
		t.Errorf("manifest redacted %v, facts hostname %q", red.Manifest.Redacted, red.Facts.Hostname)
	}

	secrets := []string{"cx5-node01", "0c:42:a1:2b:3c:4c", "0c:42:a1:2b:3c:4d", "0c42:a103:002b:3c4c",
		"0e42:a1ff:fe2b:3c4c", "10.20.30.10", "10.20.31.10", "0a14:1e0a", "fd12:3456", "fd12::"}
	filepath.Walk(out, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		data, _ := os.ReadFile(p)
		for _, s := range secrets {
			if bytes.Contains(bytes.ToLower(data), []byte(s)) {
				t.Errorf("%s still holds %s", strings.TrimPrefix(p, out), s)
			}
		}
		return nil
	})
	// The plain capture holds them: the test can fail.
	if b, _ := json.Marshal(plain.Facts); !bytes.Contains(b, []byte("0c:42:a1:2b:3c:4c")) || !bytes.Contains(b, []byte("10.20.30.10")) {
		t.Fatalf("the unredacted facts lack the host's MAC or address: the host changed under the test")
	}

	// Self-agreement.
	var nd sysfs.Netdev
	for _, n := range red.Facts.Netdevs {
		if n.Name == "ens1f0np0" {
			nd = n
		}
	}
	mac := nd.MAC
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(out, p))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	// The file is there as an empty placeholder when only its directory was
	// listed (the host model lists a netdev's upper_/lower_ links).
	if b, err := os.ReadFile(filepath.Join(out, "sys/class/net/ens1f0np0/address")); err == nil && len(b) > 0 && strings.TrimSpace(string(b)) != mac {
		t.Errorf("netdev address %s, facts MAC %s", b, mac)
	}
	if got, want := read("sys/class/infiniband/mlx5_0/ports/1/gids/0"), eui64GID(mac); got != want {
		t.Errorf("link-local GID %s, want %s (from MAC %s)", got, want, mac)
	}
	m := strings.Split(mac, ":")
	if got, want := read("sys/class/infiniband/mlx5_0/node_guid"), m[0]+m[1]+":"+m[2]+"03:00"+m[3]+":"+m[4]+m[5]; got != want {
		t.Errorf("node GUID %s, want %s (from MAC %s)", got, want, mac)
	}
	ip := netip.MustParsePrefix(nd.Addresses[0]).Addr()
	if !ip.Is4() || !strings.HasPrefix(ip.String(), "192.0.2.") {
		t.Errorf("redacted address %s not in 192.0.2.0/24", ip)
	}
	found := false
	for i := 0; i < 8; i++ {
		b, err := os.ReadFile(filepath.Join(out, "sys/class/infiniband/mlx5_0/ports/1/gids", string(rune('0'+i))))
		if err != nil {
			continue
		}
		g, err := netip.ParseAddr(strings.TrimSpace(string(b)))
		if err == nil && g.Is4In6() && g.Unmap() == ip {
			found = true
		}
	}
	if !found {
		t.Errorf("no IPv4-mapped GID of mlx5_0 port 1 carries the redacted address %s", ip)
	}

	// Deterministic: a second redacted capture is byte-identical.
	again := capture(t, src, true)
	if !bytes.Equal(archiveOf(t, again), archiveOf(t, red)) {
		t.Error("two redacted captures of one host differ")
	}
}

// eui64GID is the link-local GID the kernel derives from a MAC, full form.
func eui64GID(mac string) string {
	var b [6]byte
	for i, p := range strings.Split(mac, ":") {
		var v byte
		for _, c := range p {
			v <<= 4
			switch {
			case c >= '0' && c <= '9':
				v |= byte(c - '0')
			default:
				v |= byte(c-'a') + 10
			}
		}
		b[i] = v
	}
	return strings.Join([]string{"fe80", "0000", "0000", "0000",
		hex2(b[0]^2, b[1]), hex2(b[2], 0xff), hex2(0xfe, b[3]), hex2(b[4], b[5])}, ":")
}

func hex2(a, b byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[a>>4], digits[a&15], digits[b>>4], digits[b&15]})
}

func reportOf(t *testing.T, dir string) *reportT {
	rep := level1(t.Context(), openHost(t, dir))
	return &reportT{ExitCode: rep.ExitCode, Checks: rep.Checks}
}

type reportT struct {
	ExitCode int
	Checks   any
}

func statuses(checks any) map[string]string {
	out := map[string]string{}
	v := reflect.ValueOf(checks)
	for i := 0; i < v.Len(); i++ {
		c := v.Index(i)
		out[c.FieldByName("ID").String()] = c.FieldByName("Status").String()
	}
	return out
}

// TestRedactedModuleSerials: --redact replaces a module's serial number
// in its EEPROM pages with a stand-in; its make and part stay.
func TestRedactedModuleSerials(t *testing.T) {
	src := filepath.Join("..", "..", "testdata", "hosts", "optics-qsfp28-healthy")
	modules := func(s *snapshot.Snapshot) map[string]*sysfs.Transceiver {
		out := map[string]*sysfs.Transceiver{}
		for dev, m := range s.Facts.ModuleEEPROMs {
			if tr, err := sysfs.DecodeTransceiver(m); err == nil {
				out[dev] = tr
			}
		}
		return out
	}
	plain, red := modules(capture(t, src, false)), modules(capture(t, src, true))
	if len(plain) == 0 {
		t.Fatal("the host's modules decode to nothing: the test cannot fail")
	}
	for dev, p := range plain {
		r := red[dev]
		if r == nil || r.Vendor != p.Vendor || r.Part != p.Part || r.Serial == p.Serial || !strings.HasPrefix(r.Serial, "SN") {
			t.Errorf("%s: %s %s %s redacted as %+v", dev, p.Vendor, p.Part, p.Serial, r)
		}
	}
}
