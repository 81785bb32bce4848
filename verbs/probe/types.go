package probe

import (
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs/gpu"
)

// Probe names, in the order the child runs them on each port. They are the
// IDs of the checks that judge them.
const (
	Resources    = "verbs.resources"
	QPState      = "verbs.qp_state"
	SendPoll     = "probe.send_poll"
	CQOverflow   = "probe.cq_overflow"
	DestroyOrder = "probe.destroy_order"
	UD           = "probe.ud"
	GPUMemory    = "probe.gpu_memory"
)

// Target is one device and the ports to probe on it (normally its ACTIVE
// ports).
type Target struct {
	Device string `json:"device"`
	Ports  []int  `json:"ports"`
	// NoRC says why the device has no RC queue pairs ("EFA has no RC queue
	// pairs ..."); empty when it has them. The RC probes then skip with
	// this reason and verbs.resources creates a UD QP instead.
	NoRC string `json:"no_rc,omitempty"`
	// NoUD says why applications cannot create UD queue pairs on the
	// device; probe.ud then skips with this reason.
	NoUD string `json:"no_ud,omitempty"`
}

// Options tune a probe run. Zero values take the defaults.
type Options struct {
	// Library is the libibverbs to open ("" = libibverbs.so.1 through the
	// loader path).
	Library string
	// Timeout is the deadline of one port's probes; a device's child gets
	// Timeout × its number of ports (at least one), plus a fixed margin
	// for its start. Default 5s.
	Timeout time.Duration
	// Size is the bytes per SEND of probe.send_poll. Default 1024.
	Size int
	// Iterations is the number of timed round trips of probe.send_poll
	// (fewer when IterationBudget runs out first). Default 1000.
	Iterations int
	// IterationBudget bounds the time of the timed round trips. Default 1s.
	IterationBudget time.Duration
	// Probes selects probes by name; nil runs AllProbes.
	Probes []string
	// SysfsRoot is where the child reads port counters and GID types.
	// Default "/sys".
	SysfsRoot string
	// GPULibraries are the GPU driver libraries probe.gpu_memory opens
	// (zero: libcuda.so.1, then libamdhip64.so, through the loader path).
	GPULibraries gpu.Libraries
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Size <= 0 {
		o.Size = 1024
	}
	if o.Iterations <= 0 {
		o.Iterations = 1000
	}
	if o.IterationBudget <= 0 {
		o.IterationBudget = time.Second
	}
	if len(o.Probes) == 0 {
		o.Probes = AllProbes
	}
	if o.SysfsRoot == "" {
		o.SysfsRoot = "/sys"
	}
	return o
}

// Step is one call (or one check of an outcome) inside a probe.
type Step struct {
	Name string `json:"name"` // "ibv_reg_mr", "modify_qp RESET→RTS"
	OK   bool   `json:"ok"`   // the step behaved as a healthy stack does
	// Want is the outcome a healthy stack has when that is a refusal
	// ("EINVAL", "EBUSY", "error completion"); empty when success is wanted.
	Want      string  `json:"want,omitempty"`
	Errno     int     `json:"errno,omitempty"`
	ErrnoName string  `json:"errno_name,omitempty"`
	Error     string  `json:"error,omitempty"` // what went wrong, verb and errno
	Cause     string  `json:"cause,omitempty"` // what that errno means at this step
	Detail    string  `json:"detail,omitempty"`
	Micros    float64 `json:"duration_us"`
}

// Probe is what every probe result has.
type Probe struct {
	Name string `json:"probe"`
	// Skipped says why the probe did not run: blocked by an earlier one,
	// not applicable to the device, or out of time.
	Skipped string `json:"skipped,omitempty"`
	// OutOfTime is set when the probe did not run because the port's
	// deadline (Options.Timeout) had passed: it was not judged, which is
	// not the same as not applicable.
	OutOfTime bool    `json:"out_of_time,omitempty"`
	Steps     []Step  `json:"steps"`
	Millis    float64 `json:"duration_ms"`
}

// Failed returns the first step that did not behave, or nil.
func (p *Probe) Failed() *Step {
	for i := range p.Steps {
		if !p.Steps[i].OK {
			return &p.Steps[i]
		}
	}
	return nil
}

// OK reports whether the probe ran and every step behaved.
func (p *Probe) OK() bool { return p.Skipped == "" && len(p.Steps) > 0 && p.Failed() == nil }

// DeviceCaps are the ibv_query_device limits the probes size against.
type DeviceCaps struct {
	FwVer        string `json:"fw_ver"`
	VendorID     uint32 `json:"vendor_id"`
	VendorPartID uint32 `json:"vendor_part_id"`
	NodeGUID     string `json:"node_guid"`
	MaxQP        int    `json:"max_qp"`
	MaxQPWR      int    `json:"max_qp_wr"`
	MaxSGE       int    `json:"max_sge"`
	MaxCQ        int    `json:"max_cq"`
	MaxCQE       int    `json:"max_cqe"`
	MaxMR        int    `json:"max_mr"`
	MaxMRSize    uint64 `json:"max_mr_size"`
	MaxPD        int    `json:"max_pd"`
	PhysPortCnt  int    `json:"phys_port_cnt"`
}

// PortInfo is what ibv_query_port said about the probed port.
type PortInfo struct {
	State     string `json:"state"`
	LinkLayer string `json:"link_layer"`
	LID       int    `json:"lid"`
	SMLID     int    `json:"sm_lid"`
	ActiveMTU int    `json:"active_mtu"` // bytes
	MaxMTU    int    `json:"max_mtu"`
	GIDTblLen int    `json:"gid_tbl_len"`
}

// Caps is a QP's capacity, asked or granted.
type Caps struct {
	MaxSendWR     uint32 `json:"max_send_wr"`
	MaxRecvWR     uint32 `json:"max_recv_wr"`
	MaxSendSGE    uint32 `json:"max_send_sge"`
	MaxRecvSGE    uint32 `json:"max_recv_sge"`
	MaxInlineData uint32 `json:"max_inline_data"`
}

// ResourcesResult is verbs.resources: open → PD → MR → CQ → RC QP.
type ResourcesResult struct {
	Probe
	Software     bool        `json:"software_device"` // rxe, siw: numbers are not a NIC's
	Device       *DeviceCaps `json:"device,omitempty"`
	Port         *PortInfo   `json:"port,omitempty"`
	MemlockBytes int64       `json:"memlock_bytes"` // soft RLIMIT_MEMLOCK of the child; -1 unlimited
	MRBytes      int         `json:"mr_bytes"`
	CQEAsked     int         `json:"cqe_asked"`
	CQEGranted   int         `json:"cqe_granted"`
	QPAsked      Caps        `json:"qp_caps_asked"`
	QPGranted    Caps        `json:"qp_caps_granted"`
	// QPType is the QP created: "RC", or "UD" on a device without RC
	// (NoRC says why).
	QPType string `json:"qp_type"`
	NoRC   string `json:"no_rc,omitempty"`
}

// Addressing is how the two loopback QPs reach each other.
type Addressing struct {
	LinkLayer string `json:"link_layer"`
	GIDIndex  int    `json:"gid_index,omitempty"`
	GID       string `json:"gid,omitempty"`
	GIDType   string `json:"gid_type,omitempty"`
	DLID      int    `json:"dlid,omitempty"`
	PathMTU   int    `json:"path_mtu"`
}

// QPStateResult is verbs.qp_state: the RC state machine.
type QPStateResult struct {
	Probe
	Addressing *Addressing `json:"addressing,omitempty"`
	// ResetToRTSErrno is what modify_qp RESET→RTS on a fresh QP returned
	// (22 EINVAL on a correct stack, 0 if the provider accepted it).
	ResetToRTSErrno   int    `json:"reset_to_rts_errno"`
	ResetToRTSTried   bool   `json:"reset_to_rts_tried"`
	StateAfterRefusal string `json:"state_after_refusal,omitempty"`
	// Walk lists the states ibv_query_qp reported after each transition.
	Walk      []string `json:"walk,omitempty"`
	Recovered bool     `json:"recovered"` // RTS→ERR→RESET→INIT worked
}

// Stats summarises a series of durations in nanoseconds.
type Stats struct {
	N      int     `json:"n"`
	MinNS  float64 `json:"min_ns"`
	MedNS  float64 `json:"median_ns"`
	P99NS  float64 `json:"p99_ns"`
	MaxNS  float64 `json:"max_ns"`
	MeanNS float64 `json:"mean_ns"`
}

// CounterDelta is one port counter read before and after the traffic.
type CounterDelta struct {
	Name   string `json:"name"` // "port_xmit_data"
	Before uint64 `json:"before"`
	After  uint64 `json:"after"`
	Delta  uint64 `json:"delta"`
	Unit   string `json:"unit"` // "bytes" (port_*_data ×4 already applied) or "packets"
}

// SendPollResult is probe.send_poll: loopback RC SEND.
type SendPollResult struct {
	Probe
	Software   bool        `json:"software_device"`
	Addressing *Addressing `json:"addressing,omitempty"`
	Size       int         `json:"size"`
	// The first SEND, checked in full.
	SendStatus string `json:"send_status,omitempty"`
	RecvStatus string `json:"recv_status,omitempty"`
	ByteLen    uint32 `json:"byte_len"`
	PayloadOK  bool   `json:"payload_ok"`
	// The timed round trips: post_send to both completions polled.
	IterationsAsked int   `json:"iterations_asked"`
	Latency         Stats `json:"latency"`
	// The CPU cost of the ibv_post_send call alone (building the WQE and
	// ringing the doorbell), which is not the NIC's latency.
	PostSendCPU   Stats          `json:"post_send_cpu"`
	BytesSent     uint64         `json:"bytes_sent"`
	Counters      []CounterDelta `json:"counters,omitempty"`
	CountersError string         `json:"counters_error,omitempty"`
}

// AsyncEventRecord is one async event read (and acked) during a probe.
type AsyncEventRecord struct {
	Type    string  `json:"type"`   // "IBV_EVENT_CQ_ERR"
	Object  string  `json:"object"` // "overrun send CQ", "QP A", "port 1", ...
	AfterMS float64 `json:"after_ms"`
}

// CQOverflowResult is probe.cq_overflow.
type CQOverflowResult struct {
	Probe
	CQEAsked     int                `json:"cqe_asked"`
	CQEGranted   int                `json:"cqe_granted"`
	SendsPosted  int                `json:"sends_posted"`
	RetryCnt     int                `json:"retry_cnt"`
	Events       []AsyncEventRecord `json:"events"`
	CQErrOnCQ    int                `json:"cq_err_events"` // IBV_EVENT_CQ_ERR naming the overrun CQ
	Completions  int                `json:"completions_polled"`
	PollError    string             `json:"poll_error,omitempty"`
	Lost         int                `json:"completions_lost"`
	QPStateAfter string             `json:"qp_state_after,omitempty"`
	WaitedMS     float64            `json:"waited_ms"`
}

// DestroyOrderResult is probe.destroy_order.
type DestroyOrderResult struct {
	Probe
	// Errnos of the refusals a correct stack gives (16 EBUSY), 0 if the
	// call succeeded.
	DeallocPDLiveQP int `json:"dealloc_pd_live_qp_errno"`
	DestroyCQLiveQP int `json:"destroy_cq_live_qp_errno"`
	// SEND on a deregistered MR's lkey.
	StalePostErrno  int    `json:"stale_post_errno"`
	StaleStatus     string `json:"stale_status,omitempty"`
	StaleStatusCode int    `json:"stale_status_code"`
	StaleVendorErr  uint32 `json:"stale_vendor_err"`
	TeardownOK      bool   `json:"teardown_ok"`
	// RDMA netlink object counts: before the probe opened the device,
	// while its objects lived, after it closed it.
	CountsBefore map[string]uint64 `json:"counts_before,omitempty"`
	CountsDuring map[string]uint64 `json:"counts_during,omitempty"`
	CountsAfter  map[string]uint64 `json:"counts_after,omitempty"`
	CountsError  string            `json:"counts_error,omitempty"`
	// CountsMethod says whose objects were counted: CountsProcess (this
	// child's own, CountsPID) or CountsDevice (the device's summary, when
	// the kernel lacks the per-object dumps: CountsFallback says why).
	CountsMethod   string `json:"counts_method,omitempty"`
	CountsPID      int    `json:"counts_pid,omitempty"`
	CountsFallback string `json:"counts_fallback,omitempty"`
	// CountsDrift is a device-wide count that did not come back, which
	// other users of the device may have caused: not a leak of the probe.
	CountsDrift string `json:"counts_drift,omitempty"`
}

// UDResult is probe.ud: a loopback UD SEND through an address handle, and
// what the stack does with the two classic UD mistakes.
type UDResult struct {
	Probe
	Software   bool        `json:"software_device"`
	Addressing *Addressing `json:"addressing,omitempty"`
	QKey       uint32      `json:"qkey"`
	Payload    int         `json:"payload_bytes"`
	// The SEND with the right Q_Key, checked in full.
	SendStatus  string `json:"send_status,omitempty"`
	RecvStatus  string `json:"recv_status,omitempty"`
	ByteLen     uint32 `json:"byte_len"`
	ByteLenWant uint32 `json:"byte_len_want"` // payload + the 40-byte GRH area
	GRHFlag     bool   `json:"grh_flag"`      // IBV_WC_GRH on the receive completion
	SrcQP       uint32 `json:"src_qp"`
	SenderQPN   uint32 `json:"sender_qpn"`
	// PayloadOffset is where the payload was found in the receive buffer:
	// 40 on a correct stack, -1 nowhere.
	PayloadOffset int   `json:"payload_offset"`
	Latency       Stats `json:"latency"`
	// WrongQKey is what became of a SEND with another Q_Key: "dropped"
	// (correct), "delivered", or empty when not tried.
	WrongQKey string `json:"wrong_qkey_outcome,omitempty"`
	// QKeyViolations is the port's qkey_viol_cntr (ibv_query_port) before
	// and after that SEND; providers that do not count leave it unmoved.
	QKeyViolations *CounterDelta `json:"qkey_violations,omitempty"`
	// NoGRHRoom is the completion of a receive whose buffer holds the
	// payload but not the GRH area in front of it: "IBV_WC_LOC_LEN_ERR"
	// on a correct stack, "no completion", or empty when not tried.
	NoGRHRoom string `json:"no_grh_room_outcome,omitempty"`
}

// GPU-memory registration paths.
const (
	// PathPeerMemory is ibv_reg_mr on the GPU's device pointer, which a
	// peer-memory client in the kernel (nvidia_peermem, nv_peer_mem)
	// resolves to the GPU's pages.
	PathPeerMemory = "peer memory"
	// PathDMABuf is the GPU memory exported by its driver as a dma-buf
	// and registered with ibv_reg_dmabuf_mr.
	PathDMABuf = "DMA-BUF"
)

// GPUPath is one way of registering GPU memory with the NIC and what a
// SEND into it through that registration did.
type GPUPath struct {
	Name string `json:"name"` // PathPeerMemory, PathDMABuf
	// Registered: the NIC accepted the GPU memory (the MR exists).
	Registered bool `json:"registered"`
	// Unavailable says why the path is not there on this host: the call
	// that refused to export or register the memory, with its errno or
	// CUresult. Empty when it registered.
	Unavailable string `json:"unavailable,omitempty"`
	// UnavailableStep is the step that refused.
	UnavailableStep string `json:"unavailable_step,omitempty"`
	// Failed is the step that broke the path after it registered (an
	// error completion, a wrong payload), nil when none did.
	Failed    *Step  `json:"failed,omitempty"`
	ByteLen   uint32 `json:"byte_len"`
	PayloadOK bool   `json:"payload_ok"`
	// Latency of the timed round trips into the GPU memory.
	Latency Stats `json:"latency"`
}

// OK reports whether the path registered and its SEND arrived intact.
func (p GPUPath) OK() bool { return p.Registered && p.Failed == nil && p.PayloadOK }

// Unexplained is the first failed step that no path accounts for (a
// set-up or teardown call), nil when there is none.
func (r *GPUMemoryResult) Unexplained() *Step {
	for i := range r.Steps {
		st := &r.Steps[i]
		if st.OK {
			continue
		}
		explained := false
		for _, p := range r.Paths {
			if st.Name == p.UnavailableStep || (p.Failed != nil && st.Name == p.Failed.Name) {
				explained = true
			}
		}
		if !explained {
			return st
		}
	}
	return nil
}

// GPUMemoryResult is probe.gpu_memory: GPU memory registered with the NIC
// through each path, a loopback RC SEND from host memory into it, read
// back through the GPU driver. The steps of a path that is unavailable
// fail as they happened; Paths judges them.
type GPUMemoryResult struct {
	Probe
	Software   bool        `json:"software_device"`
	Addressing *Addressing `json:"addressing,omitempty"`
	// Vendor is the GPU driver's vendor ("NVIDIA", "AMD"), Driver the
	// library: vendor, version, the name it was opened by.
	Vendor string       `json:"vendor,omitempty"`
	Driver string       `json:"driver,omitempty"`
	GPUs   []gpu.Device `json:"gpus,omitempty"`
	// GPU is the one probed and Choice why it was chosen.
	GPU         *gpu.Device `json:"gpu,omitempty"`
	Choice      string      `json:"choice,omitempty"`
	NICPCIAddr  string      `json:"nic_pci_addr,omitempty"`
	Size        int         `json:"size"`
	RegionBytes int         `json:"region_bytes,omitempty"` // GPU memory registered
	Paths       []GPUPath   `json:"paths"`
}

// PortResult holds every probe's result on one port; a probe not selected
// is nil.
type PortResult struct {
	Port         int                 `json:"port"`
	Resources    *ResourcesResult    `json:"verbs_resources,omitempty"`
	QPState      *QPStateResult      `json:"verbs_qp_state,omitempty"`
	SendPoll     *SendPollResult     `json:"probe_send_poll,omitempty"`
	CQOverflow   *CQOverflowResult   `json:"probe_cq_overflow,omitempty"`
	DestroyOrder *DestroyOrderResult `json:"probe_destroy_order,omitempty"`
	UD           *UDResult           `json:"probe_ud,omitempty"`
	GPUMemory    *GPUMemoryResult    `json:"probe_gpu_memory,omitempty"`
}

// ChildFailure says why a child process gave no (complete) answer.
type ChildFailure struct {
	Error    string `json:"error"` // one sentence, names the step when known
	TimedOut bool   `json:"timed_out,omitempty"`
	Signal   string `json:"signal,omitempty"` // "SIGSEGV": died of it or crashed with it
	ExitCode int    `json:"exit_code,omitempty"`
	// InProgress is "probe/step" the child was in when it stopped.
	InProgress string `json:"in_progress,omitempty"`
}

// DeviceResult is everything one device's child reported.
type DeviceResult struct {
	Device string       `json:"device"`
	Ports  []PortResult `json:"ports"`
	// Failure is set when the child did not finish: it timed out, crashed,
	// was interrupted or could not start. Ports then holds what it reported
	// before that.
	Failure *ChildFailure `json:"failure,omitempty"`
	// Stderr is the tail of what the child (the library, the provider)
	// wrote to stderr and stdout.
	Stderr string  `json:"stderr,omitempty"`
	Millis float64 `json:"duration_ms"`
}

// Port returns the result of port p, nil if there is none.
func (d *DeviceResult) Port(p int) *PortResult {
	for i := range d.Ports {
		if d.Ports[i].Port == p {
			return &d.Ports[i]
		}
	}
	return nil
}

// Results is a whole probe run.
type Results struct {
	Devices map[string]*DeviceResult `json:"devices"`
	// Interrupted is set when SIGINT or SIGTERM arrived during the run
	// ("SIGINT"); the children got it too and the caller should stop.
	Interrupted string  `json:"interrupted,omitempty"`
	Millis      float64 `json:"duration_ms"`
}

// EnumDevice is one device of ibv_get_device_list.
type EnumDevice struct {
	Name      string `json:"name"`
	NodeGUID  string `json:"node_guid"` // sysfs form, "0002:c903:00a1:b2c3"
	UverbsDev string `json:"uverbs"`    // "uverbs0"
	IBDevPath string `json:"ibdev_path"`
	NodeType  int    `json:"node_type"`
	Transport int    `json:"transport"`
}

// Enumeration is the level-1 answer of the real library.
type Enumeration struct {
	Library string `json:"library"` // the name it was opened by
	// LoadedFrom is the file the loader mapped (from /proc/self/maps).
	LoadedFrom string `json:"loaded_from,omitempty"`
	// LoadError is the loader's message when dlopen failed.
	LoadError string `json:"load_error,omitempty"`
	// MissingSymbols lists the verbs the library lacks (a wrong or very
	// old library).
	MissingSymbols []string `json:"missing_symbols,omitempty"`
	// ListErrno is errno when ibv_get_device_list returned NULL (ENOSYS:
	// no InfiniBand in the kernel).
	ListErrno     int          `json:"list_errno,omitempty"`
	ListErrnoName string       `json:"list_errno_name,omitempty"`
	ListError     string       `json:"list_error,omitempty"`
	Devices       []EnumDevice `json:"devices"`
	// Providers are the provider libraries the library loaded.
	Providers []string `json:"providers,omitempty"`
	// Warnings are the lines the library printed on stderr ("couldn't
	// load driver ...").
	Warnings []string `json:"warnings,omitempty"`
	Millis   float64  `json:"duration_ms"`
}

func newProbe(name string) Probe { return Probe{Name: name, Steps: []Step{}} }
