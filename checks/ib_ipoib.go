package checks

import (
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/mad"
)

// ipoibIf is an IPoIB interface: its P_Key (as sysfs shows it, the full
// bit always set), mode and MTU, and the port GUID of its address.
type ipoibIf struct {
	name, mode, mtu string
	pkey            uint16
	guid            uint64
}

// readIPoIB lists the host's IPoIB interfaces: the netdevs with a pkey
// attribute. Under the simulator sysfs has none; that is no fault.
func readIPoIB(env *Env) []ipoibIf {
	names, err := env.Host.ReadDir("/sys/class/net")
	if err != nil {
		return nil
	}
	var out []ipoibIf
	for _, n := range names {
		base := "/sys/class/net/" + n + "/"
		pk, err := env.Host.ReadAttr(base + "pkey")
		if err != nil {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(pk), 0, 16)
		if err != nil {
			continue
		}
		i := ipoibIf{name: n, pkey: uint16(v), mode: "unknown", mtu: "unknown"}
		if m, err := env.Host.ReadAttr(base + "mode"); err == nil {
			i.mode = strings.TrimSpace(m)
		}
		if m, err := env.Host.ReadAttr(base + "mtu"); err == nil {
			i.mtu = strings.TrimSpace(m)
		}
		if a, err := env.Host.ReadAttr(base + "address"); err == nil {
			i.guid = ipoibGUID(a)
		}
		out = append(out, i)
	}
	return out
}

// ipoibGUID is the port GUID in an IPoIB hardware address: 4 bytes of
// flags and QPN, then the port's GID, whose last 8 bytes are the GUID.
func ipoibGUID(addr string) uint64 {
	b, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(addr), ":", ""))
	if err != nil || len(b) != 20 {
		return 0
	}
	return binary.BigEndian.Uint64(b[12:])
}

// ipoibOf are the IPoIB interfaces on port p.
func ipoibOf(all []ipoibIf, p mad.Port) []ipoibIf {
	var out []ipoibIf
	for _, i := range all {
		if i.guid != 0 && i.guid == p.GUID {
			out = append(out, i)
		}
	}
	return out
}
