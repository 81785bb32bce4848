package mad

import (
	"structs"
	"unsafe"
)

// C struct mirrors of <infiniband/umad.h>. layout_test.go compares every
// size and offset listed in MirrorLayout with the real header.
const (
	caNameLen  = 20 // UMAD_CA_NAME_LEN
	caMaxPorts = 10 // UMAD_CA_MAX_PORTS
	maxCAs     = 32 // UMAD_MAX_DEVICES
)

// cPort mirrors struct umad_port (umad_port_t).
type cPort struct {
	_         structs.HostLayout
	CAName    [caNameLen]byte
	PortNum   int32
	BaseLID   uint32
	LMC       uint32
	SMLID     uint32
	SMSL      uint32
	State     uint32
	PhysState uint32
	Rate      uint32
	CapMask   uint32 // big endian
	GIDPrefix uint64 // big endian
	PortGUID  uint64 // big endian
	PKeysSize uint32
	PKeys     uintptr // uint16_t *, host order
	LinkLayer [caNameLen]byte
}

// cCA mirrors struct umad_ca (umad_ca_t).
type cCA struct {
	_          structs.HostLayout
	CAName     [caNameLen]byte
	NodeType   uint32
	NumPorts   int32
	FwVer      [20]byte
	CAType     [40]byte
	HwVer      [20]byte
	NodeGUID   uint64 // big endian
	SystemGUID uint64 // big endian
	Ports      [caMaxPorts]uintptr
}

// LayoutEntry is one mirrored fact about a header: a struct size, a field
// offset or a constant, as the Go code has it; C is the C expression that
// yields the same number.
type LayoutEntry struct {
	C  string
	Go int64
}

func sizeOf(cType string, v uintptr) LayoutEntry {
	return LayoutEntry{C: "sizeof(" + cType + ")", Go: int64(v)}
}

func offsetOf(cType, field string, v uintptr) LayoutEntry {
	return LayoutEntry{C: "offsetof(" + cType + ", " + field + ")", Go: int64(v)}
}

// MirrorLayout lists every size, offset and constant the binding and the
// codecs rely on that the rdma-core headers define: the library's structs
// (umad.h) and the wire layouts (umad_types.h, umad_sm.h, umad_sa.h).
func MirrorLayout() []LayoutEntry {
	var p cPort
	var ca cCA
	l := []LayoutEntry{
		sizeOf("umad_port_t", unsafe.Sizeof(p)),
		offsetOf("umad_port_t", "portnum", unsafe.Offsetof(p.PortNum)),
		offsetOf("umad_port_t", "base_lid", unsafe.Offsetof(p.BaseLID)),
		offsetOf("umad_port_t", "lmc", unsafe.Offsetof(p.LMC)),
		offsetOf("umad_port_t", "sm_lid", unsafe.Offsetof(p.SMLID)),
		offsetOf("umad_port_t", "sm_sl", unsafe.Offsetof(p.SMSL)),
		offsetOf("umad_port_t", "state", unsafe.Offsetof(p.State)),
		offsetOf("umad_port_t", "phys_state", unsafe.Offsetof(p.PhysState)),
		offsetOf("umad_port_t", "rate", unsafe.Offsetof(p.Rate)),
		offsetOf("umad_port_t", "capmask", unsafe.Offsetof(p.CapMask)),
		offsetOf("umad_port_t", "gid_prefix", unsafe.Offsetof(p.GIDPrefix)),
		offsetOf("umad_port_t", "port_guid", unsafe.Offsetof(p.PortGUID)),
		offsetOf("umad_port_t", "pkeys_size", unsafe.Offsetof(p.PKeysSize)),
		offsetOf("umad_port_t", "pkeys", unsafe.Offsetof(p.PKeys)),
		offsetOf("umad_port_t", "link_layer", unsafe.Offsetof(p.LinkLayer)),
		sizeOf("umad_ca_t", unsafe.Sizeof(ca)),
		offsetOf("umad_ca_t", "node_type", unsafe.Offsetof(ca.NodeType)),
		offsetOf("umad_ca_t", "numports", unsafe.Offsetof(ca.NumPorts)),
		offsetOf("umad_ca_t", "fw_ver", unsafe.Offsetof(ca.FwVer)),
		offsetOf("umad_ca_t", "ca_type", unsafe.Offsetof(ca.CAType)),
		offsetOf("umad_ca_t", "hw_ver", unsafe.Offsetof(ca.HwVer)),
		offsetOf("umad_ca_t", "node_guid", unsafe.Offsetof(ca.NodeGUID)),
		offsetOf("umad_ca_t", "system_guid", unsafe.Offsetof(ca.SystemGUID)),
		offsetOf("umad_ca_t", "ports", unsafe.Offsetof(ca.Ports)),
		{C: "UMAD_CA_NAME_LEN", Go: caNameLen},
		{C: "UMAD_CA_MAX_PORTS", Go: caMaxPorts},
		{C: "UMAD_MAX_DEVICES", Go: maxCAs},
		{C: "UMAD_QKEY", Go: QKey},
	}
	return append(l, wireLayout()...)
}

// wireLayout is the MAD wire offsets the headers also define.
func wireLayout() []LayoutEntry {
	return []LayoutEntry{
		{C: "sizeof(struct umad_hdr)", Go: HeaderSize},
		{C: "sizeof(struct umad_smp)", Go: Size},
		{C: "offsetof(struct umad_smp, dr_slid)", Go: 32},
		{C: "offsetof(struct umad_smp, data)", Go: smpDataOff},
		{C: "offsetof(struct umad_smp, initial_path)", Go: drInitPath},
		{C: "offsetof(struct umad_smp, return_path)", Go: drRetPath},
		{C: "UMAD_SMP_DIRECTION", Go: directionBit},
		{C: "offsetof(struct umad_sa_packet, comp_mask)", Go: saHdrOff + 12},
		{C: "offsetof(struct umad_sa_packet, data)", Go: saDataOff},
		{C: "UMAD_LEN_SA_DATA", Go: saDataLen},
		{C: "offsetof(struct umad_dm_packet, data)", Go: pmaDataOff},
		{C: "UMAD_LEN_DM_DATA", Go: pmaDataLen},
		{C: "UMAD_CLASS_SUBN_LID_ROUTED", Go: ClassSubnLID},
		{C: "UMAD_CLASS_SUBN_DIRECTED_ROUTE", Go: ClassSubnDR},
		{C: "UMAD_CLASS_SUBN_ADM", Go: ClassSA},
		{C: "UMAD_CLASS_PERF_MGMT", Go: ClassPerf},
		{C: "UMAD_METHOD_GET_RESP", Go: MethodGetResp},
		{C: "UMAD_SA_METHOD_GET_TABLE", Go: MethodGetTable},
		{C: "UMAD_SM_ATTR_NODE_DESC", Go: AttrNodeDesc},
		{C: "UMAD_SM_ATTR_NODE_INFO", Go: AttrNodeInfo},
		{C: "UMAD_SM_ATTR_PORT_INFO", Go: AttrPortInfo},
		{C: "UMAD_SM_ATTR_PKEY_TABLE", Go: AttrPKeyTable},
		{C: "UMAD_SM_ATTR_SM_INFO", Go: AttrSMInfo},
		{C: "UMAD_SA_ATTR_NODE_REC", Go: AttrNodeRecord},
		{C: "UMAD_SA_ATTR_SM_INFO_REC", Go: AttrSMInfoRecord},
		{C: "UMAD_SA_ATTR_PATH_REC", Go: AttrPathRecord},
		{C: "UMAD_STATUS_BUSY", Go: StatusBusy},
		{C: "UMAD_STATUS_INVALID_FIELD_MASK", Go: statusInvalidField},
	}
}
