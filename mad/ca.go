package mad

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"unsafe"
)

// Port is one port of an RDMA device as libibumad sees it
// (umad_get_ca): the kernel's view, which the SM programmed.
type Port struct {
	CA        string
	Num       int
	NodeType  uint32 // 1 CA, 2 switch, 3 router
	NodeGUID  uint64
	LinkLayer string // "InfiniBand" or "Ethernet"
	State     uint32 // 4 = ACTIVE (IBTA PortState)
	PhysState uint32 // 5 = LinkUp
	LID       uint16
	SMLID     uint16
	SMSL      uint8
	LMC       uint8
	Rate      uint32 // Gb/s as libibumad computes it
	GIDPrefix uint64
	GUID      uint64
	// PKeys is the P_Key table the kernel caches, as libibumad read it
	// (from the umad device's sysfs, which the SM's P_KeyTable sets).
	PKeys []uint16
}

// Name is the port as the checks name it: "mlx5_0/1".
func (p Port) Name() string { return fmt.Sprintf("%s/%d", p.CA, p.Num) }

// GID is the port's GID 0: subnet prefix and port GUID.
func (p Port) GID() GID { return GID{Prefix: p.GIDPrefix, GUID: p.GUID} }

// InfiniBand reports whether the port's link layer is InfiniBand, where
// MADs reach a subnet manager (RoCE ports have none).
func (p Port) InfiniBand() bool { return p.LinkLayer == "InfiniBand" || p.LinkLayer == "IB" }

// Active reports whether the port is ACTIVE (the SM brought it up).
func (p Port) Active() bool { return p.State == 4 }

// be64 turns a big-endian field libibumad stores as it came (__be64) into
// its value.
func be64(v uint64) uint64 {
	var b [8]byte
	*(*uint64)(unsafe.Pointer(&b[0])) = v
	return binary.BigEndian.Uint64(b[:])
}

// CANames lists the RDMA devices libibumad finds (umad_get_cas_names).
func (l *Lib) CANames() ([]string, error) {
	m, err := newCmem(maxCAs * caNameLen)
	if err != nil {
		return nil, err
	}
	defer m.free()
	n, err := l.callInt("umad_get_cas_names", l.getCAsNames, m.addr(), maxCAs)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, n)
	for i := 0; i < n && i < maxCAs; i++ {
		names = append(names, cString(m.b[i*caNameLen:(i+1)*caNameLen]))
	}
	return names, nil
}

// Ports lists every port of every device libibumad finds, through
// umad_get_cas_names and umad_get_ca. A name umad_get_ca does not find
// (ENOENT, ENODEV) is no device: libibumad lists its built-in default
// name, "mthca0", on a host that has none, and a device can go away
// between the two calls.
func (l *Lib) Ports() ([]Port, error) {
	names, err := l.CANames()
	if err != nil {
		return nil, err
	}
	var out []Port
	for _, name := range names {
		ps, err := l.caPorts(name)
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENODEV) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

// caPorts reads one device with umad_get_ca and copies its ports out
// before umad_release_ca frees them.
func (l *Lib) caPorts(name string) ([]Port, error) {
	m, err := newCmem(4096)
	if err != nil {
		return nil, err
	}
	defer m.free()
	if len(name) >= caNameLen {
		return nil, fmt.Errorf("device name %q longer than libibumad's %d bytes", name, caNameLen-1)
	}
	copy(m.b, name) // the rest of the mapping is zero: NUL-terminated
	caAddr := m.addr() + 64
	call := fmt.Sprintf("umad_get_ca(%s)", name)
	if _, err := l.callInt(call, l.getCA, m.addr(), caAddr); err != nil {
		return nil, err
	}
	defer l.call(l.releaseCA, caAddr) //nolint:errcheck // nothing to do if freeing fails
	ca := (*cCA)(ptr(caAddr))
	var out []Port
	for i := 1; i < caMaxPorts && i <= int(ca.NumPorts); i++ {
		if ca.Ports[i] == 0 {
			continue
		}
		out = append(out, portOf(ca, (*cPort)(ptr(ca.Ports[i]))))
	}
	return out, nil
}

func portOf(ca *cCA, cp *cPort) Port {
	p := Port{CA: cString(ca.CAName[:]), Num: int(cp.PortNum), NodeType: ca.NodeType, NodeGUID: be64(ca.NodeGUID),
		LinkLayer: cString(cp.LinkLayer[:]), State: cp.State, PhysState: cp.PhysState,
		LID: uint16(cp.BaseLID), SMLID: uint16(cp.SMLID), SMSL: uint8(cp.SMSL), LMC: uint8(cp.LMC),
		Rate: cp.Rate, GIDPrefix: be64(cp.GIDPrefix), GUID: be64(cp.PortGUID)}
	if cp.PKeys != 0 && cp.PKeysSize > 0 && cp.PKeysSize <= 1<<16 {
		keys := unsafe.Slice((*uint16)(ptr(cp.PKeys)), cp.PKeysSize)
		p.PKeys = append([]uint16(nil), keys...)
	}
	return p
}
