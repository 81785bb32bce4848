package verbs

import (
	"structs"
	"unsafe"
)

// C struct mirrors. Field order, types and padding follow
// <infiniband/verbs.h> (rdma-core); layout_test.go compares every size and
// offset listed in mirrorLayout with the real header. Pointers are uintptr:
// the memory they point to is never Go heap memory.

// GID mirrors union ibv_gid. The zero-length uint64 array gives the Go type
// the union's 8-byte alignment (its other member is two __be64).
type GID struct {
	_   structs.HostLayout
	_   [0]uint64
	Raw [16]byte
}

// GIDEntry mirrors struct ibv_gid_entry.
type GIDEntry struct {
	_           structs.HostLayout
	GID         GID
	GIDIndex    uint32
	PortNum     uint32
	GIDType     uint32
	NdevIfindex uint32
}

// DeviceAttr mirrors struct ibv_device_attr.
type DeviceAttr struct {
	_                     structs.HostLayout
	FwVer                 [64]byte
	NodeGUID              uint64 // big endian, as the library stores it
	SysImageGUID          uint64 // big endian
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HwVer                 uint32
	MaxQP                 int32
	MaxQPWR               int32
	DeviceCapFlags        uint32
	MaxSGE                int32
	MaxSGERd              int32
	MaxCQ                 int32
	MaxCQE                int32
	MaxMR                 int32
	MaxPD                 int32
	MaxQPRdAtom           int32
	MaxEERdAtom           int32
	MaxResRdAtom          int32
	MaxQPInitRdAtom       int32
	MaxEEInitRdAtom       int32
	AtomicCap             uint32
	MaxEE                 int32
	MaxRDD                int32
	MaxMW                 int32
	MaxRawIPv6QP          int32
	MaxRawEthyQP          int32
	MaxMcastGrp           int32
	MaxMcastQPAttach      int32
	MaxTotalMcastQPAttach int32
	MaxAH                 int32
	MaxFMR                int32
	MaxMapPerFMR          int32
	MaxSRQ                int32
	MaxSRQWR              int32
	MaxSRQSGE             int32
	MaxPkeys              uint16
	LocalCAAckDelay       uint8
	PhysPortCnt           uint8
}

// PortAttr mirrors struct ibv_port_attr as of rdma-core 44. Newer headers
// append fields; the size is passed to the provider, which fills only what
// fits.
type PortAttr struct {
	_             structs.HostLayout
	State         uint32
	MaxMTU        uint32
	ActiveMTU     uint32
	GIDTblLen     int32
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPkeyCntr   uint32
	QkeyViolCntr  uint32
	PkeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8
	Flags         uint8
	PortCapFlags2 uint16
}

// GlobalRoute mirrors struct ibv_global_route.
type GlobalRoute struct {
	_            structs.HostLayout
	DGID         GID
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
}

// AHAttr mirrors struct ibv_ah_attr.
type AHAttr struct {
	_           structs.HostLayout
	GRH         GlobalRoute
	DLID        uint16
	SL          uint8
	SrcPathBits uint8
	StaticRate  uint8
	IsGlobal    uint8
	PortNum     uint8
}

// QPCap mirrors struct ibv_qp_cap.
type QPCap struct {
	_             structs.HostLayout
	MaxSendWR     uint32
	MaxRecvWR     uint32
	MaxSendSGE    uint32
	MaxRecvSGE    uint32
	MaxInlineData uint32
}

// qpInitAttr mirrors struct ibv_qp_init_attr.
type qpInitAttr struct {
	_         structs.HostLayout
	QPContext uintptr
	SendCQ    uintptr
	RecvCQ    uintptr
	SRQ       uintptr
	Cap       QPCap
	QPType    uint32
	SqSigAll  int32
}

// QPAttr mirrors struct ibv_qp_attr.
type QPAttr struct {
	_                structs.HostLayout
	QPState          QPState
	CurQPState       QPState
	PathMTU          MTU
	PathMigState     uint32
	QKey             uint32
	RqPSN            uint32
	SqPSN            uint32
	DestQPNum        uint32
	QPAccessFlags    Access
	Cap              QPCap
	AHAttr           AHAttr
	AltAHAttr        AHAttr
	PkeyIndex        uint16
	AltPkeyIndex     uint16
	EnSqdAsyncNotify uint8
	SqDraining       uint8
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	RetryCnt         uint8
	RNRRetry         uint8
	AltPortNum       uint8
	AltTimeout       uint8
	RateLimit        uint32
}

// SGE mirrors struct ibv_sge.
type SGE struct {
	_      structs.HostLayout
	Addr   uint64
	Length uint32
	LKey   uint32
}

// cSendWR mirrors struct ibv_send_wr. The unions are kept as words; only
// the members the binding writes (wr.rdma, wr.ud) have accessors.
type cSendWR struct {
	_         structs.HostLayout
	WRID      uint64
	Next      uintptr
	SGList    uintptr
	NumSGE    int32
	Opcode    WROpcode
	SendFlags SendFlags
	ImmData   uint32 // union { imm_data; invalidate_rkey }
	WR        [4]uint64
	QPType    [2]uint32 // union { xrc.remote_srqn }, padded to the next union
	Tail      [6]uint64 // union { bind_mw; tso }
}

// Offsets of union members inside cSendWR.WR (struct ibv_send_wr's wr union).
const (
	wrRDMARemoteAddr = 0
	wrRDMARKey       = 8
	wrUDAH           = 0
	wrUDRemoteQPN    = 8
	wrUDRemoteQKey   = 12
	wrUDSize         = 16
)

// cRecvWR mirrors struct ibv_recv_wr.
type cRecvWR struct {
	_      structs.HostLayout
	WRID   uint64
	Next   uintptr
	SGList uintptr
	NumSGE int32
}

// WC mirrors struct ibv_wc, one work completion.
type WC struct {
	_            structs.HostLayout
	WRID         uint64
	Status       WCStatus
	Opcode       WCOpcode
	VendorErr    uint32
	ByteLen      uint32
	ImmData      uint32 // union { imm_data; invalidated_rkey }
	QPNum        uint32
	SrcQP        uint32
	WCFlags      WCFlags
	PkeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
}

// cAsyncEvent mirrors struct ibv_async_event.
type cAsyncEvent struct {
	_         structs.HostLayout
	Element   uintptr // union { cq; qp; srq; wq; port_num }
	EventType EventType
}

// Prefix mirrors of objects the library allocates and owns. Only the
// leading fields the binding reads are mirrored; never allocate these.

// cDevice mirrors struct ibv_device (the whole struct).
type cDevice struct {
	_             structs.HostLayout
	Ops           [2]uintptr
	NodeType      int32
	TransportType int32
	Name          [64]byte
	DevName       [64]byte
	DevPath       [256]byte
	IbdevPath     [256]byte
}

// cContextOps mirrors struct ibv_context_ops.
type cContextOps struct {
	_                 structs.HostLayout
	CompatQueryDevice uintptr
	CompatQueryPort   uintptr
	CompatAllocPD     uintptr
	CompatDeallocPD   uintptr
	CompatRegMR       uintptr
	CompatReregMR     uintptr
	CompatDeregMR     uintptr
	AllocMW           uintptr
	BindMW            uintptr
	DeallocMW         uintptr
	CompatCreateCQ    uintptr
	PollCQ            uintptr
	ReqNotifyCQ       uintptr
	CompatCQEvent     uintptr
	CompatResizeCQ    uintptr
	CompatDestroyCQ   uintptr
	CompatCreateSRQ   uintptr
	CompatModifySRQ   uintptr
	CompatQuerySRQ    uintptr
	CompatDestroySRQ  uintptr
	PostSRQRecv       uintptr
	CompatCreateQP    uintptr
	CompatQueryQP     uintptr
	CompatModifyQP    uintptr
	CompatDestroyQP   uintptr
	PostSend          uintptr
	PostRecv          uintptr
	CompatCreateAH    uintptr
	CompatDestroyAH   uintptr
	CompatAttachMcast uintptr
	CompatDetachMcast uintptr
	CompatAsyncEvent  uintptr
}

// cContext mirrors struct ibv_context.
type cContext struct {
	_              structs.HostLayout
	Device         uintptr
	Ops            cContextOps
	CmdFD          int32
	AsyncFD        int32
	NumCompVectors int32
	Mutex          [pthreadMutexSize / 8]uint64
	AbiCompat      uintptr
}

// cVerbsContext mirrors struct verbs_context as of rdma-core 44. It "grows
// up": new members are added at the top, so what matters is the distance
// from query_port to the embedded ibv_context, which never changes, and sz,
// which sits right before it.
type cVerbsContext struct {
	_                   structs.HostLayout
	QueryPort           uintptr
	AdviseMR            uintptr
	AllocNullMR         uintptr
	ReadCounters        uintptr
	AttachCountersPoint uintptr
	CreateCounters      uintptr
	DestroyCounters     uintptr
	RegDMMR             uintptr
	AllocDM             uintptr
	FreeDM              uintptr
	ModifyFlowActionESP uintptr
	DestroyFlowAction   uintptr
	CreateFlowActionESP uintptr
	ModifyQPRateLimit   uintptr
	AllocParentDomain   uintptr
	DeallocTD           uintptr
	AllocTD             uintptr
	ModifyCQ            uintptr
	PostSRQOps          uintptr
	DestroyRWQIndTable  uintptr
	CreateRWQIndTable   uintptr
	DestroyWQ           uintptr
	ModifyWQ            uintptr
	CreateWQ            uintptr
	QueryRTValues       uintptr
	CreateCQEx          uintptr
	Priv                uintptr
	QueryDeviceEx       uintptr
	IbvDestroyFlow      uintptr
	ABIPlaceholder2     uintptr
	IbvCreateFlow       uintptr
	ABIPlaceholder1     uintptr
	OpenQP              uintptr
	CreateQPEx          uintptr
	GetSRQNum           uintptr
	CreateSRQEx         uintptr
	OpenXRCD            uintptr
	CloseXRCD           uintptr
	ABIPlaceholder3     uint64
	Sz                  uintptr
	Context             cContext
}

// abiIsExtended is __VERBS_ABI_IS_EXTENDED: ibv_context.abi_compat holds
// it when the context is embedded in a verbs_context.
const abiIsExtended = ^uintptr(0)

// cPD mirrors the start of struct ibv_pd.
type cPD struct {
	_       structs.HostLayout
	Context uintptr
	Handle  uint32
}

// cMR mirrors struct ibv_mr.
type cMR struct {
	_       structs.HostLayout
	Context uintptr
	PD      uintptr
	Addr    uintptr
	Length  uintptr
	Handle  uint32
	LKey    uint32
	RKey    uint32
}

// cCompChannel mirrors struct ibv_comp_channel.
type cCompChannel struct {
	_       structs.HostLayout
	Context uintptr
	FD      int32
	Refcnt  int32
}

// cCQ mirrors the start of struct ibv_cq (up to cqe).
type cCQ struct {
	_         structs.HostLayout
	Context   uintptr
	Channel   uintptr
	CQContext uintptr
	Handle    uint32
	CQE       int32
}

// cQP mirrors the start of struct ibv_qp (up to qp_type).
type cQP struct {
	_         structs.HostLayout
	Context   uintptr
	QPContext uintptr
	PD        uintptr
	SendCQ    uintptr
	RecvCQ    uintptr
	SRQ       uintptr
	Handle    uint32
	QPNum     uint32
	State     QPState
	QPType    QPType
}

// cAH mirrors struct ibv_ah (the whole struct; the library allocates it).
type cAH struct {
	_       structs.HostLayout
	Context uintptr
	PD      uintptr
	Handle  uint32
}

// LayoutEntry is one mirrored fact about <infiniband/verbs.h>: a struct
// size, a field offset or an enum value, as the Go mirror has it. C is the
// C expression that yields the same number.
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

func enumValue(name string, v int64) LayoutEntry { return LayoutEntry{C: name, Go: v} }

// MirrorLayout lists every size, offset and constant the binding relies on.
func MirrorLayout() []LayoutEntry {
	var (
		gid  GID
		ge   GIDEntry
		da   DeviceAttr
		pa   PortAttr
		gr   GlobalRoute
		ah   AHAttr
		qc   QPCap
		qia  qpInitAttr
		qa   QPAttr
		sge  SGE
		swr  cSendWR
		rwr  cRecvWR
		wc   WC
		ev   cAsyncEvent
		dev  cDevice
		ops  cContextOps
		ctx  cContext
		vctx cVerbsContext
		pd   cPD
		mr   cMR
		ch   cCompChannel
		cq   cCQ
		qp   cQP
		cah  cAH
	)
	abiExt := abiIsExtended // a variable, so the conversion below wraps
	const (
		sGE   = "struct ibv_gid_entry"
		sDA   = "struct ibv_device_attr"
		sPA   = "struct ibv_port_attr"
		sGR   = "struct ibv_global_route"
		sAH   = "struct ibv_ah_attr"
		sQC   = "struct ibv_qp_cap"
		sQIA  = "struct ibv_qp_init_attr"
		sQA   = "struct ibv_qp_attr"
		sSGE  = "struct ibv_sge"
		sSWR  = "struct ibv_send_wr"
		sRWR  = "struct ibv_recv_wr"
		sWC   = "struct ibv_wc"
		sEV   = "struct ibv_async_event"
		sDev  = "struct ibv_device"
		sOps  = "struct ibv_context_ops"
		sCtx  = "struct ibv_context"
		sVCtx = "struct verbs_context"
		sPD   = "struct ibv_pd"
		sMR   = "struct ibv_mr"
		sCh   = "struct ibv_comp_channel"
		sCQ   = "struct ibv_cq"
		sQP   = "struct ibv_qp"
		sAHo  = "struct ibv_ah"
	)
	l := []LayoutEntry{
		sizeOf("union ibv_gid", unsafe.Sizeof(gid)),
		{C: "_Alignof(union ibv_gid)", Go: int64(unsafe.Alignof(gid))},

		sizeOf(sGE, unsafe.Sizeof(ge)),
		offsetOf(sGE, "gid", unsafe.Offsetof(ge.GID)),
		offsetOf(sGE, "gid_index", unsafe.Offsetof(ge.GIDIndex)),
		offsetOf(sGE, "port_num", unsafe.Offsetof(ge.PortNum)),
		offsetOf(sGE, "gid_type", unsafe.Offsetof(ge.GIDType)),
		offsetOf(sGE, "ndev_ifindex", unsafe.Offsetof(ge.NdevIfindex)),

		sizeOf(sDA, unsafe.Sizeof(da)),
		offsetOf(sDA, "fw_ver", unsafe.Offsetof(da.FwVer)),
		offsetOf(sDA, "node_guid", unsafe.Offsetof(da.NodeGUID)),
		offsetOf(sDA, "sys_image_guid", unsafe.Offsetof(da.SysImageGUID)),
		offsetOf(sDA, "max_mr_size", unsafe.Offsetof(da.MaxMRSize)),
		offsetOf(sDA, "page_size_cap", unsafe.Offsetof(da.PageSizeCap)),
		offsetOf(sDA, "vendor_id", unsafe.Offsetof(da.VendorID)),
		offsetOf(sDA, "vendor_part_id", unsafe.Offsetof(da.VendorPartID)),
		offsetOf(sDA, "hw_ver", unsafe.Offsetof(da.HwVer)),
		offsetOf(sDA, "max_qp", unsafe.Offsetof(da.MaxQP)),
		offsetOf(sDA, "max_qp_wr", unsafe.Offsetof(da.MaxQPWR)),
		offsetOf(sDA, "device_cap_flags", unsafe.Offsetof(da.DeviceCapFlags)),
		offsetOf(sDA, "max_sge", unsafe.Offsetof(da.MaxSGE)),
		offsetOf(sDA, "max_sge_rd", unsafe.Offsetof(da.MaxSGERd)),
		offsetOf(sDA, "max_cq", unsafe.Offsetof(da.MaxCQ)),
		offsetOf(sDA, "max_cqe", unsafe.Offsetof(da.MaxCQE)),
		offsetOf(sDA, "max_mr", unsafe.Offsetof(da.MaxMR)),
		offsetOf(sDA, "max_pd", unsafe.Offsetof(da.MaxPD)),
		offsetOf(sDA, "max_qp_rd_atom", unsafe.Offsetof(da.MaxQPRdAtom)),
		offsetOf(sDA, "max_qp_init_rd_atom", unsafe.Offsetof(da.MaxQPInitRdAtom)),
		offsetOf(sDA, "atomic_cap", unsafe.Offsetof(da.AtomicCap)),
		offsetOf(sDA, "max_mw", unsafe.Offsetof(da.MaxMW)),
		offsetOf(sDA, "max_ah", unsafe.Offsetof(da.MaxAH)),
		offsetOf(sDA, "max_srq", unsafe.Offsetof(da.MaxSRQ)),
		offsetOf(sDA, "max_srq_sge", unsafe.Offsetof(da.MaxSRQSGE)),
		offsetOf(sDA, "max_pkeys", unsafe.Offsetof(da.MaxPkeys)),
		offsetOf(sDA, "local_ca_ack_delay", unsafe.Offsetof(da.LocalCAAckDelay)),
		offsetOf(sDA, "phys_port_cnt", unsafe.Offsetof(da.PhysPortCnt)),

		sizeOf(sPA, unsafe.Sizeof(pa)),
		offsetOf(sPA, "state", unsafe.Offsetof(pa.State)),
		offsetOf(sPA, "max_mtu", unsafe.Offsetof(pa.MaxMTU)),
		offsetOf(sPA, "active_mtu", unsafe.Offsetof(pa.ActiveMTU)),
		offsetOf(sPA, "gid_tbl_len", unsafe.Offsetof(pa.GIDTblLen)),
		offsetOf(sPA, "port_cap_flags", unsafe.Offsetof(pa.PortCapFlags)),
		offsetOf(sPA, "max_msg_sz", unsafe.Offsetof(pa.MaxMsgSz)),
		offsetOf(sPA, "pkey_tbl_len", unsafe.Offsetof(pa.PkeyTblLen)),
		offsetOf(sPA, "lid", unsafe.Offsetof(pa.LID)),
		offsetOf(sPA, "sm_lid", unsafe.Offsetof(pa.SMLID)),
		offsetOf(sPA, "lmc", unsafe.Offsetof(pa.LMC)),
		offsetOf(sPA, "max_vl_num", unsafe.Offsetof(pa.MaxVLNum)),
		offsetOf(sPA, "sm_sl", unsafe.Offsetof(pa.SMSL)),
		offsetOf(sPA, "active_width", unsafe.Offsetof(pa.ActiveWidth)),
		offsetOf(sPA, "active_speed", unsafe.Offsetof(pa.ActiveSpeed)),
		offsetOf(sPA, "phys_state", unsafe.Offsetof(pa.PhysState)),
		offsetOf(sPA, "link_layer", unsafe.Offsetof(pa.LinkLayer)),
		offsetOf(sPA, "flags", unsafe.Offsetof(pa.Flags)),
		offsetOf(sPA, "port_cap_flags2", unsafe.Offsetof(pa.PortCapFlags2)),

		sizeOf(sGR, unsafe.Sizeof(gr)),
		offsetOf(sGR, "dgid", unsafe.Offsetof(gr.DGID)),
		offsetOf(sGR, "flow_label", unsafe.Offsetof(gr.FlowLabel)),
		offsetOf(sGR, "sgid_index", unsafe.Offsetof(gr.SGIDIndex)),
		offsetOf(sGR, "hop_limit", unsafe.Offsetof(gr.HopLimit)),
		offsetOf(sGR, "traffic_class", unsafe.Offsetof(gr.TrafficClass)),

		sizeOf(sAH, unsafe.Sizeof(ah)),
		{C: "_Alignof(" + sAH + ")", Go: int64(unsafe.Alignof(ah))},
		offsetOf(sAH, "grh", unsafe.Offsetof(ah.GRH)),
		offsetOf(sAH, "dlid", unsafe.Offsetof(ah.DLID)),
		offsetOf(sAH, "sl", unsafe.Offsetof(ah.SL)),
		offsetOf(sAH, "src_path_bits", unsafe.Offsetof(ah.SrcPathBits)),
		offsetOf(sAH, "static_rate", unsafe.Offsetof(ah.StaticRate)),
		offsetOf(sAH, "is_global", unsafe.Offsetof(ah.IsGlobal)),
		offsetOf(sAH, "port_num", unsafe.Offsetof(ah.PortNum)),

		sizeOf(sQC, unsafe.Sizeof(qc)),
		offsetOf(sQC, "max_send_wr", unsafe.Offsetof(qc.MaxSendWR)),
		offsetOf(sQC, "max_recv_wr", unsafe.Offsetof(qc.MaxRecvWR)),
		offsetOf(sQC, "max_send_sge", unsafe.Offsetof(qc.MaxSendSGE)),
		offsetOf(sQC, "max_recv_sge", unsafe.Offsetof(qc.MaxRecvSGE)),
		offsetOf(sQC, "max_inline_data", unsafe.Offsetof(qc.MaxInlineData)),

		sizeOf(sQIA, unsafe.Sizeof(qia)),
		offsetOf(sQIA, "qp_context", unsafe.Offsetof(qia.QPContext)),
		offsetOf(sQIA, "send_cq", unsafe.Offsetof(qia.SendCQ)),
		offsetOf(sQIA, "recv_cq", unsafe.Offsetof(qia.RecvCQ)),
		offsetOf(sQIA, "srq", unsafe.Offsetof(qia.SRQ)),
		offsetOf(sQIA, "cap", unsafe.Offsetof(qia.Cap)),
		offsetOf(sQIA, "qp_type", unsafe.Offsetof(qia.QPType)),
		offsetOf(sQIA, "sq_sig_all", unsafe.Offsetof(qia.SqSigAll)),

		sizeOf(sQA, unsafe.Sizeof(qa)),
		offsetOf(sQA, "qp_state", unsafe.Offsetof(qa.QPState)),
		offsetOf(sQA, "cur_qp_state", unsafe.Offsetof(qa.CurQPState)),
		offsetOf(sQA, "path_mtu", unsafe.Offsetof(qa.PathMTU)),
		offsetOf(sQA, "path_mig_state", unsafe.Offsetof(qa.PathMigState)),
		offsetOf(sQA, "qkey", unsafe.Offsetof(qa.QKey)),
		offsetOf(sQA, "rq_psn", unsafe.Offsetof(qa.RqPSN)),
		offsetOf(sQA, "sq_psn", unsafe.Offsetof(qa.SqPSN)),
		offsetOf(sQA, "dest_qp_num", unsafe.Offsetof(qa.DestQPNum)),
		offsetOf(sQA, "qp_access_flags", unsafe.Offsetof(qa.QPAccessFlags)),
		offsetOf(sQA, "cap", unsafe.Offsetof(qa.Cap)),
		offsetOf(sQA, "ah_attr", unsafe.Offsetof(qa.AHAttr)),
		offsetOf(sQA, "alt_ah_attr", unsafe.Offsetof(qa.AltAHAttr)),
		offsetOf(sQA, "pkey_index", unsafe.Offsetof(qa.PkeyIndex)),
		offsetOf(sQA, "alt_pkey_index", unsafe.Offsetof(qa.AltPkeyIndex)),
		offsetOf(sQA, "en_sqd_async_notify", unsafe.Offsetof(qa.EnSqdAsyncNotify)),
		offsetOf(sQA, "sq_draining", unsafe.Offsetof(qa.SqDraining)),
		offsetOf(sQA, "max_rd_atomic", unsafe.Offsetof(qa.MaxRdAtomic)),
		offsetOf(sQA, "max_dest_rd_atomic", unsafe.Offsetof(qa.MaxDestRdAtomic)),
		offsetOf(sQA, "min_rnr_timer", unsafe.Offsetof(qa.MinRNRTimer)),
		offsetOf(sQA, "port_num", unsafe.Offsetof(qa.PortNum)),
		offsetOf(sQA, "timeout", unsafe.Offsetof(qa.Timeout)),
		offsetOf(sQA, "retry_cnt", unsafe.Offsetof(qa.RetryCnt)),
		offsetOf(sQA, "rnr_retry", unsafe.Offsetof(qa.RNRRetry)),
		offsetOf(sQA, "alt_port_num", unsafe.Offsetof(qa.AltPortNum)),
		offsetOf(sQA, "alt_timeout", unsafe.Offsetof(qa.AltTimeout)),
		offsetOf(sQA, "rate_limit", unsafe.Offsetof(qa.RateLimit)),

		sizeOf(sSGE, unsafe.Sizeof(sge)),
		offsetOf(sSGE, "addr", unsafe.Offsetof(sge.Addr)),
		offsetOf(sSGE, "length", unsafe.Offsetof(sge.Length)),
		offsetOf(sSGE, "lkey", unsafe.Offsetof(sge.LKey)),

		sizeOf(sSWR, unsafe.Sizeof(swr)),
		offsetOf(sSWR, "wr_id", unsafe.Offsetof(swr.WRID)),
		offsetOf(sSWR, "next", unsafe.Offsetof(swr.Next)),
		offsetOf(sSWR, "sg_list", unsafe.Offsetof(swr.SGList)),
		offsetOf(sSWR, "num_sge", unsafe.Offsetof(swr.NumSGE)),
		offsetOf(sSWR, "opcode", unsafe.Offsetof(swr.Opcode)),
		offsetOf(sSWR, "send_flags", unsafe.Offsetof(swr.SendFlags)),
		offsetOf(sSWR, "imm_data", unsafe.Offsetof(swr.ImmData)),
		offsetOf(sSWR, "wr", unsafe.Offsetof(swr.WR)),
		offsetOf(sSWR, "wr.rdma.remote_addr", unsafe.Offsetof(swr.WR)+wrRDMARemoteAddr),
		offsetOf(sSWR, "wr.rdma.rkey", unsafe.Offsetof(swr.WR)+wrRDMARKey),
		offsetOf(sSWR, "wr.ud.ah", unsafe.Offsetof(swr.WR)+wrUDAH),
		offsetOf(sSWR, "wr.ud.remote_qpn", unsafe.Offsetof(swr.WR)+wrUDRemoteQPN),
		offsetOf(sSWR, "wr.ud.remote_qkey", unsafe.Offsetof(swr.WR)+wrUDRemoteQKey),
		{C: "sizeof(((" + sSWR + " *)0)->wr.ud)", Go: wrUDSize},
		offsetOf(sSWR, "qp_type", unsafe.Offsetof(swr.QPType)),
		offsetOf(sSWR, "bind_mw", unsafe.Offsetof(swr.Tail)),

		sizeOf(sRWR, unsafe.Sizeof(rwr)),
		offsetOf(sRWR, "wr_id", unsafe.Offsetof(rwr.WRID)),
		offsetOf(sRWR, "next", unsafe.Offsetof(rwr.Next)),
		offsetOf(sRWR, "sg_list", unsafe.Offsetof(rwr.SGList)),
		offsetOf(sRWR, "num_sge", unsafe.Offsetof(rwr.NumSGE)),

		sizeOf(sWC, unsafe.Sizeof(wc)),
		offsetOf(sWC, "wr_id", unsafe.Offsetof(wc.WRID)),
		offsetOf(sWC, "status", unsafe.Offsetof(wc.Status)),
		offsetOf(sWC, "opcode", unsafe.Offsetof(wc.Opcode)),
		offsetOf(sWC, "vendor_err", unsafe.Offsetof(wc.VendorErr)),
		offsetOf(sWC, "byte_len", unsafe.Offsetof(wc.ByteLen)),
		offsetOf(sWC, "imm_data", unsafe.Offsetof(wc.ImmData)),
		offsetOf(sWC, "qp_num", unsafe.Offsetof(wc.QPNum)),
		offsetOf(sWC, "src_qp", unsafe.Offsetof(wc.SrcQP)),
		offsetOf(sWC, "wc_flags", unsafe.Offsetof(wc.WCFlags)),
		offsetOf(sWC, "pkey_index", unsafe.Offsetof(wc.PkeyIndex)),
		offsetOf(sWC, "slid", unsafe.Offsetof(wc.SLID)),
		offsetOf(sWC, "sl", unsafe.Offsetof(wc.SL)),
		offsetOf(sWC, "dlid_path_bits", unsafe.Offsetof(wc.DLIDPathBits)),

		sizeOf(sEV, unsafe.Sizeof(ev)),
		offsetOf(sEV, "element", unsafe.Offsetof(ev.Element)),
		offsetOf(sEV, "event_type", unsafe.Offsetof(ev.EventType)),

		sizeOf(sDev, unsafe.Sizeof(dev)),
		offsetOf(sDev, "node_type", unsafe.Offsetof(dev.NodeType)),
		offsetOf(sDev, "transport_type", unsafe.Offsetof(dev.TransportType)),
		offsetOf(sDev, "name", unsafe.Offsetof(dev.Name)),
		offsetOf(sDev, "dev_name", unsafe.Offsetof(dev.DevName)),
		offsetOf(sDev, "dev_path", unsafe.Offsetof(dev.DevPath)),
		offsetOf(sDev, "ibdev_path", unsafe.Offsetof(dev.IbdevPath)),

		sizeOf(sOps, unsafe.Sizeof(ops)),
		offsetOf(sOps, "poll_cq", unsafe.Offsetof(ops.PollCQ)),
		offsetOf(sOps, "req_notify_cq", unsafe.Offsetof(ops.ReqNotifyCQ)),
		offsetOf(sOps, "post_srq_recv", unsafe.Offsetof(ops.PostSRQRecv)),
		offsetOf(sOps, "post_send", unsafe.Offsetof(ops.PostSend)),
		offsetOf(sOps, "post_recv", unsafe.Offsetof(ops.PostRecv)),
		offsetOf(sOps, "_compat_async_event", unsafe.Offsetof(ops.CompatAsyncEvent)),

		sizeOf(sCtx, unsafe.Sizeof(ctx)),
		offsetOf(sCtx, "device", unsafe.Offsetof(ctx.Device)),
		offsetOf(sCtx, "ops", unsafe.Offsetof(ctx.Ops)),
		offsetOf(sCtx, "cmd_fd", unsafe.Offsetof(ctx.CmdFD)),
		offsetOf(sCtx, "async_fd", unsafe.Offsetof(ctx.AsyncFD)),
		offsetOf(sCtx, "num_comp_vectors", unsafe.Offsetof(ctx.NumCompVectors)),
		offsetOf(sCtx, "mutex", unsafe.Offsetof(ctx.Mutex)),
		offsetOf(sCtx, "abi_compat", unsafe.Offsetof(ctx.AbiCompat)),

		sizeOf(sVCtx, unsafe.Sizeof(vctx)),
		offsetOf(sVCtx, "query_port", unsafe.Offsetof(vctx.QueryPort)),
		offsetOf(sVCtx, "create_cq_ex", unsafe.Offsetof(vctx.CreateCQEx)),
		offsetOf(sVCtx, "query_device_ex", unsafe.Offsetof(vctx.QueryDeviceEx)),
		offsetOf(sVCtx, "create_qp_ex", unsafe.Offsetof(vctx.CreateQPEx)),
		offsetOf(sVCtx, "close_xrcd", unsafe.Offsetof(vctx.CloseXRCD)),
		offsetOf(sVCtx, "sz", unsafe.Offsetof(vctx.Sz)),
		offsetOf(sVCtx, "context", unsafe.Offsetof(vctx.Context)),

		offsetOf(sPD, "context", unsafe.Offsetof(pd.Context)),
		offsetOf(sPD, "handle", unsafe.Offsetof(pd.Handle)),

		sizeOf(sMR, unsafe.Sizeof(mr)),
		offsetOf(sMR, "context", unsafe.Offsetof(mr.Context)),
		offsetOf(sMR, "pd", unsafe.Offsetof(mr.PD)),
		offsetOf(sMR, "addr", unsafe.Offsetof(mr.Addr)),
		offsetOf(sMR, "length", unsafe.Offsetof(mr.Length)),
		offsetOf(sMR, "handle", unsafe.Offsetof(mr.Handle)),
		offsetOf(sMR, "lkey", unsafe.Offsetof(mr.LKey)),
		offsetOf(sMR, "rkey", unsafe.Offsetof(mr.RKey)),

		sizeOf(sCh, unsafe.Sizeof(ch)),
		offsetOf(sCh, "context", unsafe.Offsetof(ch.Context)),
		offsetOf(sCh, "fd", unsafe.Offsetof(ch.FD)),
		offsetOf(sCh, "refcnt", unsafe.Offsetof(ch.Refcnt)),

		offsetOf(sCQ, "context", unsafe.Offsetof(cq.Context)),
		offsetOf(sCQ, "channel", unsafe.Offsetof(cq.Channel)),
		offsetOf(sCQ, "cq_context", unsafe.Offsetof(cq.CQContext)),
		offsetOf(sCQ, "handle", unsafe.Offsetof(cq.Handle)),
		offsetOf(sCQ, "cqe", unsafe.Offsetof(cq.CQE)),

		offsetOf(sQP, "context", unsafe.Offsetof(qp.Context)),
		offsetOf(sQP, "qp_context", unsafe.Offsetof(qp.QPContext)),
		offsetOf(sQP, "pd", unsafe.Offsetof(qp.PD)),
		offsetOf(sQP, "send_cq", unsafe.Offsetof(qp.SendCQ)),
		offsetOf(sQP, "recv_cq", unsafe.Offsetof(qp.RecvCQ)),
		offsetOf(sQP, "srq", unsafe.Offsetof(qp.SRQ)),
		offsetOf(sQP, "handle", unsafe.Offsetof(qp.Handle)),
		offsetOf(sQP, "qp_num", unsafe.Offsetof(qp.QPNum)),
		offsetOf(sQP, "state", unsafe.Offsetof(qp.State)),
		offsetOf(sQP, "qp_type", unsafe.Offsetof(qp.QPType)),

		sizeOf(sAHo, unsafe.Sizeof(cah)),
		offsetOf(sAHo, "context", unsafe.Offsetof(cah.Context)),
		offsetOf(sAHo, "pd", unsafe.Offsetof(cah.PD)),
		offsetOf(sAHo, "handle", unsafe.Offsetof(cah.Handle)),

		{C: "(long long)__VERBS_ABI_IS_EXTENDED", Go: int64(abiExt)},
	}
	return append(l, enumLayout()...)
}
