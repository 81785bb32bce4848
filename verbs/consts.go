package verbs

import (
	"fmt"
	"strings"
)

// QPState is enum ibv_qp_state.
type QPState uint32

// QP states.
const (
	QPSReset   QPState = 0
	QPSInit    QPState = 1
	QPSRTR     QPState = 2
	QPSRTS     QPState = 3
	QPSSQD     QPState = 4
	QPSSQE     QPState = 5
	QPSErr     QPState = 6
	QPSUnknown QPState = 7
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN"}

func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return fmt.Sprintf("QPState(%d)", uint32(s))
}

// QPType is enum ibv_qp_type.
type QPType uint32

// QP types.
const (
	QPTRC QPType = 2
	QPTUC QPType = 3
	QPTUD QPType = 4
)

// MTU is enum ibv_mtu.
type MTU uint32

// Path MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes is the MTU in bytes, 0 for a value outside the enum.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// Access is enum ibv_access_flags.
type Access uint32

// Access flags.
const (
	AccessLocalWrite   Access = 1
	AccessRemoteWrite  Access = 1 << 1
	AccessRemoteRead   Access = 1 << 2
	AccessRemoteAtomic Access = 1 << 3
)

// QPAttrMask is enum ibv_qp_attr_mask.
type QPAttrMask uint32

// QP attribute mask bits.
const (
	QPAttrState         QPAttrMask = 1 << 0
	QPAttrCurState      QPAttrMask = 1 << 1
	QPAttrAccessFlags   QPAttrMask = 1 << 3
	QPAttrPkeyIndex     QPAttrMask = 1 << 4
	QPAttrPort          QPAttrMask = 1 << 5
	QPAttrQKey          QPAttrMask = 1 << 6
	QPAttrAV            QPAttrMask = 1 << 7
	QPAttrPathMTU       QPAttrMask = 1 << 8
	QPAttrTimeout       QPAttrMask = 1 << 9
	QPAttrRetryCnt      QPAttrMask = 1 << 10
	QPAttrRNRRetry      QPAttrMask = 1 << 11
	QPAttrRqPSN         QPAttrMask = 1 << 12
	QPAttrMaxQPRdAtomic QPAttrMask = 1 << 13
	QPAttrMinRNRTimer   QPAttrMask = 1 << 15
	QPAttrSqPSN         QPAttrMask = 1 << 16
	QPAttrMaxDestRdAtom QPAttrMask = 1 << 17
	QPAttrCap           QPAttrMask = 1 << 19
	QPAttrDestQPN       QPAttrMask = 1 << 20
)

// Attribute masks of the RC state transitions, as the InfiniBand spec
// requires them (and every provider checks them).
const (
	MaskRCToInit = QPAttrState | QPAttrPkeyIndex | QPAttrPort | QPAttrAccessFlags
	MaskRCToRTR  = QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRqPSN |
		QPAttrMaxDestRdAtom | QPAttrMinRNRTimer
	MaskRCToRTS = QPAttrState | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrSqPSN |
		QPAttrMaxQPRdAtomic
	MaskState = QPAttrState
	// A UD QP has no peer: INIT takes its Q_Key, RTR nothing beyond the
	// state, RTS the send PSN.
	MaskUDToInit = QPAttrState | QPAttrPkeyIndex | QPAttrPort | QPAttrQKey
	MaskUDToRTR  = QPAttrState
	MaskUDToRTS  = QPAttrState | QPAttrSqPSN
)

// WROpcode is enum ibv_wr_opcode.
type WROpcode uint32

// Work request opcodes.
const (
	WRRDMAWrite WROpcode = 0
	WRSend      WROpcode = 2
	WRSendImm   WROpcode = 3
	WRRDMARead  WROpcode = 4
)

// SendFlags is enum ibv_send_flags.
type SendFlags uint32

// Send flags.
const (
	SendFence     SendFlags = 1 << 0
	SendSignaled  SendFlags = 1 << 1
	SendSolicited SendFlags = 1 << 2
	SendInline    SendFlags = 1 << 3
)

// WCStatus is enum ibv_wc_status.
type WCStatus uint32

// Work completion statuses (RDMA-FACTS lists the ones the probes meet).
const (
	WCSuccess      WCStatus = 0
	WCLocLenErr    WCStatus = 1
	WCLocQPOpErr   WCStatus = 2
	WCLocProtErr   WCStatus = 4
	WCWRFlushErr   WCStatus = 5
	WCRemInvReqErr WCStatus = 9
	WCRemAccessErr WCStatus = 10
	WCRemOpErr     WCStatus = 11
	WCRetryExcErr  WCStatus = 12
	WCRNRRetryExc  WCStatus = 13
	WCGeneralErr   WCStatus = 21
)

var wcStatusNames = [...]string{
	"IBV_WC_SUCCESS", "IBV_WC_LOC_LEN_ERR", "IBV_WC_LOC_QP_OP_ERR", "IBV_WC_LOC_EEC_OP_ERR",
	"IBV_WC_LOC_PROT_ERR", "IBV_WC_WR_FLUSH_ERR", "IBV_WC_MW_BIND_ERR", "IBV_WC_BAD_RESP_ERR",
	"IBV_WC_LOC_ACCESS_ERR", "IBV_WC_REM_INV_REQ_ERR", "IBV_WC_REM_ACCESS_ERR", "IBV_WC_REM_OP_ERR",
	"IBV_WC_RETRY_EXC_ERR", "IBV_WC_RNR_RETRY_EXC_ERR", "IBV_WC_LOC_RDD_VIOL_ERR",
	"IBV_WC_REM_INV_RD_REQ_ERR", "IBV_WC_REM_ABORT_ERR", "IBV_WC_INV_EECN_ERR",
	"IBV_WC_INV_EEC_STATE_ERR", "IBV_WC_FATAL_ERR", "IBV_WC_RESP_TIMEOUT_ERR", "IBV_WC_GENERAL_ERR",
	"IBV_WC_TM_ERR", "IBV_WC_TM_RNDV_INCOMPLETE",
}

// String is the enum's C name, e.g. "IBV_WC_LOC_PROT_ERR".
func (s WCStatus) String() string {
	if int(s) < len(wcStatusNames) {
		return wcStatusNames[s]
	}
	return fmt.Sprintf("IBV_WC_STATUS(%d)", uint32(s))
}

// WCFlags is enum ibv_wc_flags.
type WCFlags uint32

// Work completion flags.
const (
	// WCGRH says the first 40 bytes of a UD receive buffer hold the
	// packet's GRH (on RoCE, the IP header in GRH form).
	WCGRH     WCFlags = 1 << 0
	WCWithImm WCFlags = 1 << 1
)

// GRHBytes is sizeof(struct ibv_grh): the room a UD receive buffer must
// leave in front of the payload, whether or not a GRH arrives.
const GRHBytes = 40

// WCOpcode is enum ibv_wc_opcode.
type WCOpcode uint32

// Work completion opcodes.
const (
	WCOpSend      WCOpcode = 0
	WCOpRDMAWrite WCOpcode = 1
	WCOpRDMARead  WCOpcode = 2
	WCOpRecv      WCOpcode = 1 << 7
)

func (o WCOpcode) String() string {
	switch o {
	case WCOpSend:
		return "IBV_WC_SEND"
	case WCOpRDMAWrite:
		return "IBV_WC_RDMA_WRITE"
	case WCOpRDMARead:
		return "IBV_WC_RDMA_READ"
	case WCOpRecv:
		return "IBV_WC_RECV"
	}
	return fmt.Sprintf("IBV_WC_OPCODE(%d)", uint32(o))
}

// EventType is enum ibv_event_type.
type EventType uint32

// Async event types.
const (
	EventCQErr       EventType = 0
	EventQPFatal     EventType = 1
	EventQPReqErr    EventType = 2
	EventQPAccessErr EventType = 3
	EventCommEst     EventType = 4
	EventSQDrained   EventType = 5
	EventPathMig     EventType = 6
	EventPathMigErr  EventType = 7
	EventDeviceFatal EventType = 8
	EventPortActive  EventType = 9
	EventPortErr     EventType = 10
	EventLIDChange   EventType = 11
	EventPkeyChange  EventType = 12
	EventSMChange    EventType = 13
	EventSRQErr      EventType = 14
	EventSRQLimit    EventType = 15
	EventQPLastWQE   EventType = 16
	EventClientRereg EventType = 17
	EventGIDChange   EventType = 18
	EventWQFatal     EventType = 19
	numEventTypes              = 20
)

var eventNames = [numEventTypes]string{
	"IBV_EVENT_CQ_ERR", "IBV_EVENT_QP_FATAL", "IBV_EVENT_QP_REQ_ERR", "IBV_EVENT_QP_ACCESS_ERR",
	"IBV_EVENT_COMM_EST", "IBV_EVENT_SQ_DRAINED", "IBV_EVENT_PATH_MIG", "IBV_EVENT_PATH_MIG_ERR",
	"IBV_EVENT_DEVICE_FATAL", "IBV_EVENT_PORT_ACTIVE", "IBV_EVENT_PORT_ERR", "IBV_EVENT_LID_CHANGE",
	"IBV_EVENT_PKEY_CHANGE", "IBV_EVENT_SM_CHANGE", "IBV_EVENT_SRQ_ERR",
	"IBV_EVENT_SRQ_LIMIT_REACHED", "IBV_EVENT_QP_LAST_WQE_REACHED", "IBV_EVENT_CLIENT_REREGISTER",
	"IBV_EVENT_GID_CHANGE", "IBV_EVENT_WQ_FATAL",
}

func (e EventType) String() string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return fmt.Sprintf("IBV_EVENT(%d)", uint32(e))
}

// Element says which member of the async event's element union is valid.
type Element int

// Kinds of async event elements.
const (
	ElementCQ Element = iota
	ElementQP
	ElementSRQ
	ElementWQ
	ElementPort
	ElementDevice
)

// ElementKind is the object an event of this type is about.
func (e EventType) ElementKind() Element {
	switch e {
	case EventCQErr:
		return ElementCQ
	case EventQPFatal, EventQPReqErr, EventQPAccessErr, EventCommEst, EventSQDrained,
		EventPathMig, EventPathMigErr, EventQPLastWQE:
		return ElementQP
	case EventSRQErr, EventSRQLimit:
		return ElementSRQ
	case EventWQFatal:
		return ElementWQ
	case EventPortActive, EventPortErr, EventLIDChange, EventPkeyChange, EventSMChange,
		EventClientRereg, EventGIDChange:
		return ElementPort
	}
	return ElementDevice
}

// PortState is enum ibv_port_state.
type PortState uint32

// Port states.
const (
	PortNOP    PortState = 0
	PortDown   PortState = 1
	PortInit   PortState = 2
	PortArmed  PortState = 3
	PortActive PortState = 4
)

func (s PortState) String() string {
	switch s {
	case PortNOP:
		return "NOP"
	case PortDown:
		return "DOWN"
	case PortInit:
		return "INIT"
	case PortArmed:
		return "ARMED"
	case PortActive:
		return "ACTIVE"
	case 5:
		return "ACTIVE_DEFER"
	}
	return fmt.Sprintf("PortState(%d)", uint32(s))
}

// Link layers (the anonymous enum IBV_LINK_LAYER_*).
const (
	LinkLayerUnspecified = 0
	LinkLayerInfiniBand  = 1
	LinkLayerEthernet    = 2
)

// LinkLayerName names a port_attr.link_layer value the way sysfs does.
func LinkLayerName(ll uint8) string {
	switch ll {
	case LinkLayerInfiniBand:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	case LinkLayerUnspecified:
		return "Unspecified"
	}
	return fmt.Sprintf("LinkLayer(%d)", ll)
}

// GIDType is enum ibv_gid_type.
type GIDType uint32

// GID types.
const (
	GIDTypeIB     GIDType = 0
	GIDTypeRoCEv1 GIDType = 1
	GIDTypeRoCEv2 GIDType = 2
)

// String is the name sysfs gid_attrs/types uses.
func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB/RoCE v1"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("GIDType(%d)", uint32(t))
}

// Node types (enum ibv_node_type) and transports (enum ibv_transport_type).
const (
	NodeCA     = 1
	NodeSwitch = 2
	NodeRouter = 3
	NodeRNIC   = 4

	TransportIB    = 0
	TransportIWARP = 1
)

// String formats a GID the way sysfs does (eight groups of four hex digits).
func (g GID) String() string {
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02x%02x", g.Raw[i], g.Raw[i+1])
	}
	return b.String()
}

// IsZero reports whether every byte of the GID is zero (an empty table slot).
func (g GID) IsZero() bool { return g.Raw == [16]byte{} }

// IsIPv4Mapped reports whether the GID is ::ffff:a.b.c.d, the form RoCE v2
// GIDs of IPv4 addresses take.
func (g GID) IsIPv4Mapped() bool {
	for _, b := range g.Raw[:10] {
		if b != 0 {
			return false
		}
	}
	return g.Raw[10] == 0xff && g.Raw[11] == 0xff
}

func enumLayout() []LayoutEntry {
	l := []LayoutEntry{
		enumValue("IBV_QPS_RESET", int64(QPSReset)),
		enumValue("IBV_QPS_INIT", int64(QPSInit)),
		enumValue("IBV_QPS_RTR", int64(QPSRTR)),
		enumValue("IBV_QPS_RTS", int64(QPSRTS)),
		enumValue("IBV_QPS_SQD", int64(QPSSQD)),
		enumValue("IBV_QPS_SQE", int64(QPSSQE)),
		enumValue("IBV_QPS_ERR", int64(QPSErr)),
		enumValue("IBV_QPS_UNKNOWN", int64(QPSUnknown)),
		enumValue("IBV_QPT_RC", int64(QPTRC)),
		enumValue("IBV_QPT_UC", int64(QPTUC)),
		enumValue("IBV_QPT_UD", int64(QPTUD)),
		enumValue("IBV_MTU_256", int64(MTU256)),
		enumValue("IBV_MTU_1024", int64(MTU1024)),
		enumValue("IBV_MTU_4096", int64(MTU4096)),
		enumValue("IBV_ACCESS_LOCAL_WRITE", int64(AccessLocalWrite)),
		enumValue("IBV_ACCESS_REMOTE_WRITE", int64(AccessRemoteWrite)),
		enumValue("IBV_ACCESS_REMOTE_READ", int64(AccessRemoteRead)),
		enumValue("IBV_ACCESS_REMOTE_ATOMIC", int64(AccessRemoteAtomic)),
		enumValue("IBV_QP_STATE", int64(QPAttrState)),
		enumValue("IBV_QP_CUR_STATE", int64(QPAttrCurState)),
		enumValue("IBV_QP_ACCESS_FLAGS", int64(QPAttrAccessFlags)),
		enumValue("IBV_QP_PKEY_INDEX", int64(QPAttrPkeyIndex)),
		enumValue("IBV_QP_PORT", int64(QPAttrPort)),
		enumValue("IBV_QP_QKEY", int64(QPAttrQKey)),
		enumValue("IBV_QP_AV", int64(QPAttrAV)),
		enumValue("IBV_QP_PATH_MTU", int64(QPAttrPathMTU)),
		enumValue("IBV_QP_TIMEOUT", int64(QPAttrTimeout)),
		enumValue("IBV_QP_RETRY_CNT", int64(QPAttrRetryCnt)),
		enumValue("IBV_QP_RNR_RETRY", int64(QPAttrRNRRetry)),
		enumValue("IBV_QP_RQ_PSN", int64(QPAttrRqPSN)),
		enumValue("IBV_QP_MAX_QP_RD_ATOMIC", int64(QPAttrMaxQPRdAtomic)),
		enumValue("IBV_QP_MIN_RNR_TIMER", int64(QPAttrMinRNRTimer)),
		enumValue("IBV_QP_SQ_PSN", int64(QPAttrSqPSN)),
		enumValue("IBV_QP_MAX_DEST_RD_ATOMIC", int64(QPAttrMaxDestRdAtom)),
		enumValue("IBV_QP_CAP", int64(QPAttrCap)),
		enumValue("IBV_QP_DEST_QPN", int64(QPAttrDestQPN)),
		enumValue("IBV_WR_RDMA_WRITE", int64(WRRDMAWrite)),
		enumValue("IBV_WR_SEND", int64(WRSend)),
		enumValue("IBV_WR_SEND_WITH_IMM", int64(WRSendImm)),
		enumValue("IBV_WR_RDMA_READ", int64(WRRDMARead)),
		enumValue("IBV_SEND_FENCE", int64(SendFence)),
		enumValue("IBV_SEND_SIGNALED", int64(SendSignaled)),
		enumValue("IBV_SEND_SOLICITED", int64(SendSolicited)),
		enumValue("IBV_SEND_INLINE", int64(SendInline)),
		enumValue("IBV_WC_SEND", int64(WCOpSend)),
		enumValue("IBV_WC_RDMA_WRITE", int64(WCOpRDMAWrite)),
		enumValue("IBV_WC_RDMA_READ", int64(WCOpRDMARead)),
		enumValue("IBV_WC_RECV", int64(WCOpRecv)),
		enumValue("IBV_WC_GRH", int64(WCGRH)),
		enumValue("IBV_WC_WITH_IMM", int64(WCWithImm)),
		enumValue("sizeof(struct ibv_grh)", GRHBytes),
		enumValue("IBV_PORT_NOP", int64(PortNOP)),
		enumValue("IBV_PORT_DOWN", int64(PortDown)),
		enumValue("IBV_PORT_INIT", int64(PortInit)),
		enumValue("IBV_PORT_ARMED", int64(PortArmed)),
		enumValue("IBV_PORT_ACTIVE", int64(PortActive)),
		enumValue("IBV_LINK_LAYER_UNSPECIFIED", LinkLayerUnspecified),
		enumValue("IBV_LINK_LAYER_INFINIBAND", LinkLayerInfiniBand),
		enumValue("IBV_LINK_LAYER_ETHERNET", LinkLayerEthernet),
		enumValue("IBV_GID_TYPE_IB", int64(GIDTypeIB)),
		enumValue("IBV_GID_TYPE_ROCE_V1", int64(GIDTypeRoCEv1)),
		enumValue("IBV_GID_TYPE_ROCE_V2", int64(GIDTypeRoCEv2)),
		enumValue("IBV_NODE_CA", NodeCA),
		enumValue("IBV_NODE_SWITCH", NodeSwitch),
		enumValue("IBV_NODE_ROUTER", NodeRouter),
		enumValue("IBV_NODE_RNIC", NodeRNIC),
		enumValue("IBV_TRANSPORT_IB", TransportIB),
		enumValue("IBV_TRANSPORT_IWARP", TransportIWARP),
		enumValue("IBV_SYSFS_NAME_MAX", 64),
		enumValue("IBV_SYSFS_PATH_MAX", 256),
	}
	for i, n := range wcStatusNames {
		l = append(l, enumValue(n, int64(i)))
	}
	for i, n := range eventNames {
		l = append(l, enumValue(n, int64(i)))
	}
	return l
}
