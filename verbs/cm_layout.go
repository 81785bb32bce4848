package verbs

import (
	"strconv"
	"structs"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mirrors of <rdma/rdma_cma.h> (librdmacm). cm_layout_test.go compares
// every size and offset of CMLayout with the real header. The library owns
// every rdma_cm_id and rdma_cm_event: they are read by offset through these
// mirrors, never allocated by Go.

// CMEventType is enum rdma_cm_event_type.
type CMEventType uint32

const (
	CMEventAddrResolved CMEventType = iota
	CMEventAddrError
	CMEventRouteResolved
	CMEventRouteError
	CMEventConnectRequest
	CMEventConnectResponse
	CMEventConnectError
	CMEventUnreachable
	CMEventRejected
	CMEventEstablished
	CMEventDisconnected
	CMEventDeviceRemoval
	CMEventMulticastJoin
	CMEventMulticastError
	CMEventAddrChange
	CMEventTimewaitExit
)

var cmEventNames = [...]string{
	"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR", "RDMA_CM_EVENT_ROUTE_RESOLVED",
	"RDMA_CM_EVENT_ROUTE_ERROR", "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
	"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE", "RDMA_CM_EVENT_REJECTED",
	"RDMA_CM_EVENT_ESTABLISHED", "RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL",
	"RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR", "RDMA_CM_EVENT_ADDR_CHANGE",
	"RDMA_CM_EVENT_TIMEWAIT_EXIT",
}

// String is the name rdma_event_str gives, without calling the library.
func (t CMEventType) String() string {
	if int(t) < len(cmEventNames) {
		return cmEventNames[t]
	}
	return "RDMA_CM_EVENT_" + strconv.Itoa(int(t))
}

// PortSpace is enum rdma_port_space.
type PortSpace uint32

const (
	PortSpaceIPoIB PortSpace = 0x0002
	PortSpaceTCP   PortSpace = 0x0106 // RC QPs: what MPI, NFS/RDMA and storage use
	PortSpaceUDP   PortSpace = 0x0111
	PortSpaceIB    PortSpace = 0x013F
)

// cRDMAAddr mirrors struct rdma_addr: source and destination as
// sockaddr_storage unions, then the IB address (two GIDs and a P_Key).
type cRDMAAddr struct {
	_    structs.HostLayout
	Src  unix.RawSockaddrAny // 112 bytes; padded to sockaddr_storage below
	_    [128 - unix.SizeofSockaddrAny]byte
	Dst  unix.RawSockaddrAny
	_    [128 - unix.SizeofSockaddrAny]byte
	SGID GID
	DGID GID
	PKey uint16 // big endian
	_    [6]byte
}

// cRDMARoute mirrors struct rdma_route.
type cRDMARoute struct {
	_        structs.HostLayout
	Addr     cRDMAAddr
	PathRec  uintptr
	NumPaths int32
	_        int32
}

// cCMID mirrors struct rdma_cm_id.
type cCMID struct {
	_             structs.HostLayout
	Verbs         uintptr // struct ibv_context *, owned by librdmacm
	Channel       uintptr
	Context       uintptr
	QP            uintptr
	Route         cRDMARoute
	PS            PortSpace
	PortNum       uint8
	_             [3]byte
	Event         uintptr
	SendCQChannel uintptr
	SendCQ        uintptr
	RecvCQChannel uintptr
	RecvCQ        uintptr
	SRQ           uintptr
	PD            uintptr
	QPType        uint32
	_             uint32
}

// cConnParam mirrors struct rdma_conn_param.
type cConnParam struct {
	_                  structs.HostLayout
	PrivateData        uintptr
	PrivateDataLen     uint8
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8
	RNRRetryCount      uint8
	SRQ                uint8
	_                  uint8
	QPNum              uint32
	_                  uint32
}

// cCMEvent mirrors the head of struct rdma_cm_event (the union of the
// connection and UD parameters follows; only the connection's private data
// is read, through Conn).
type cCMEvent struct {
	_        structs.HostLayout
	ID       uintptr
	ListenID uintptr
	Event    CMEventType
	Status   int32
	Conn     cConnParam
}

// cEventChannel mirrors struct rdma_event_channel.
type cEventChannel struct {
	_  structs.HostLayout
	FD int32
}

// CMLayout lists the sizes, offsets and constants of the rdma_cm mirrors.
func CMLayout() []LayoutEntry {
	var (
		id  cCMID
		rt  cRDMARoute
		ad  cRDMAAddr
		cp  cConnParam
		ev  cCMEvent
		ch  cEventChannel
		sin unix.RawSockaddrInet4
	)
	const (
		sID = "struct rdma_cm_id"
		sRT = "struct rdma_route"
		sAD = "struct rdma_addr"
		sCP = "struct rdma_conn_param"
		sEV = "struct rdma_cm_event"
		sCh = "struct rdma_event_channel"
	)
	l := []LayoutEntry{
		sizeOf("struct sockaddr_in", unsafe.Sizeof(sin)),
		sizeOf(sAD, unsafe.Sizeof(ad)),
		offsetOf(sAD, "src_addr", unsafe.Offsetof(ad.Src)),
		offsetOf(sAD, "dst_addr", unsafe.Offsetof(ad.Dst)),
		offsetOf(sAD, "addr.ibaddr.sgid", unsafe.Offsetof(ad.SGID)),
		offsetOf(sAD, "addr.ibaddr.dgid", unsafe.Offsetof(ad.DGID)),
		offsetOf(sAD, "addr.ibaddr.pkey", unsafe.Offsetof(ad.PKey)),
		sizeOf(sRT, unsafe.Sizeof(rt)),
		offsetOf(sRT, "path_rec", unsafe.Offsetof(rt.PathRec)),
		offsetOf(sRT, "num_paths", unsafe.Offsetof(rt.NumPaths)),
		sizeOf(sID, unsafe.Sizeof(id)),
		offsetOf(sID, "verbs", unsafe.Offsetof(id.Verbs)),
		offsetOf(sID, "channel", unsafe.Offsetof(id.Channel)),
		offsetOf(sID, "context", unsafe.Offsetof(id.Context)),
		offsetOf(sID, "qp", unsafe.Offsetof(id.QP)),
		offsetOf(sID, "route", unsafe.Offsetof(id.Route)),
		offsetOf(sID, "ps", unsafe.Offsetof(id.PS)),
		offsetOf(sID, "port_num", unsafe.Offsetof(id.PortNum)),
		offsetOf(sID, "event", unsafe.Offsetof(id.Event)),
		offsetOf(sID, "send_cq", unsafe.Offsetof(id.SendCQ)),
		offsetOf(sID, "recv_cq", unsafe.Offsetof(id.RecvCQ)),
		offsetOf(sID, "pd", unsafe.Offsetof(id.PD)),
		offsetOf(sID, "qp_type", unsafe.Offsetof(id.QPType)),
		sizeOf(sCP, unsafe.Sizeof(cp)),
		offsetOf(sCP, "private_data", unsafe.Offsetof(cp.PrivateData)),
		offsetOf(sCP, "private_data_len", unsafe.Offsetof(cp.PrivateDataLen)),
		offsetOf(sCP, "responder_resources", unsafe.Offsetof(cp.ResponderResources)),
		offsetOf(sCP, "initiator_depth", unsafe.Offsetof(cp.InitiatorDepth)),
		offsetOf(sCP, "flow_control", unsafe.Offsetof(cp.FlowControl)),
		offsetOf(sCP, "retry_count", unsafe.Offsetof(cp.RetryCount)),
		offsetOf(sCP, "rnr_retry_count", unsafe.Offsetof(cp.RNRRetryCount)),
		offsetOf(sCP, "srq", unsafe.Offsetof(cp.SRQ)),
		offsetOf(sCP, "qp_num", unsafe.Offsetof(cp.QPNum)),
		offsetOf(sEV, "id", unsafe.Offsetof(ev.ID)),
		offsetOf(sEV, "listen_id", unsafe.Offsetof(ev.ListenID)),
		offsetOf(sEV, "event", unsafe.Offsetof(ev.Event)),
		offsetOf(sEV, "status", unsafe.Offsetof(ev.Status)),
		offsetOf(sEV, "param.conn", unsafe.Offsetof(ev.Conn)),
		sizeOf(sCh, unsafe.Sizeof(ch)),
		offsetOf(sCh, "fd", unsafe.Offsetof(ch.FD)),
		enumValue("RDMA_PS_TCP", int64(PortSpaceTCP)),
		enumValue("RDMA_PS_UDP", int64(PortSpaceUDP)),
		enumValue("RDMA_PS_IB", int64(PortSpaceIB)),
	}
	for t := CMEventAddrResolved; t <= CMEventTimewaitExit; t++ {
		l = append(l, enumValue(t.String(), int64(t)))
	}
	return l
}
