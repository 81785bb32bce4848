package checks

import "github.com/rdmadoctor/rdmadoctor/sysfs"

// counterClass is what counters.errors does with a counter.
type counterClass int

const (
	// errorCounter is judged: nonzero warns, beyond its threshold fails,
	// a rise during --interval fails.
	errorCounter counterClass = iota + 1
	// protocolStat is reported when nonzero and never judged: retransmissions,
	// sequence errors, RNR NAKs, congestion notifications and completions in
	// error are what a working transport does under load or what an
	// application caused — a healthy host has them.
	protocolStat
)

// counterSpec is one counter of the table.
type counterSpec struct {
	class   counterClass
	meaning string
	// bits is the width of a legacy PMA counter, which stops at 2^bits-1
	// instead of wrapping; 0 is a 64-bit counter that never saturates.
	bits int
	// threshold: an error counter beyond it fails; nonzero below it warns.
	threshold uint64
	// family is the finding of an error counter beyond its threshold
	// (counters_findings.go): what an expectations file waives by name.
	family *Finding
}

// Thresholds of the driver counters (hw_counters/), which have no published
// defaults. Each names the kind of fault it is for.
const (
	// corruptThreshold is for packets received corrupt (bad ICRC, truncated,
	// malformed): the same fault as the PMA's PortRcvErrors, so its value.
	corruptThreshold = 10
	// discardThreshold is for packets the NIC discarded for want of a
	// resource or a route: PortXmitDiscards' value.
	discardThreshold = 100
	// rxQueueThreshold is for packets dropped because no receive buffer was
	// posted (mlx5 out_of_buffer, EFA rx_drops): every receiver that starts
	// late drops a burst, and these counters count since the driver loaded
	// (EFA's since the device started), so only thousands say more.
	rxQueueThreshold = 10000
	// deviceFaultThreshold is for faults of the device itself (PCI errors
	// seen by the NIC, admin commands that never completed).
	deviceFaultThreshold = 10
)

func errC(fam *Finding, meaning string, threshold uint64) counterSpec {
	return counterSpec{class: errorCounter, meaning: meaning, threshold: threshold, family: fam}
}

func statC(meaning string) counterSpec { return counterSpec{class: protocolStat, meaning: meaning} }

// pmaCounter is an IB PortCounters error counter of the given width.
func pmaCounter(fam *Finding, meaning string, bits int, threshold uint64) counterSpec {
	return counterSpec{class: errorCounter, meaning: meaning, bits: bits, threshold: threshold, family: fam}
}

// pmaCounters are the files of ports/N/counters/, which the core creates for
// every driver with process_mad (drivers/infiniband/core/sysfs.c,
// PORT_PMA_ATTR: the names and the widths of the legacy PortCounters). The
// thresholds are the values rdma-core ships in
// infiniband-diags/etc/error_thresholds for ibqueryerrors, which reports a
// counter that exceeds its threshold. Data and packet counters are not
// listed: they are traffic, not errors.
var pmaCounters = map[string]counterSpec{
	"symbol_error":                    pmaCounter(famSymbolErrors, "minor link errors on the physical lanes: a marginal cable, dirty or loose optics", 16, 10),
	"link_error_recovery":             pmaCounter(famLinkRecovery, "the link retrained after errors: a marginal cable or transceiver", 8, 10),
	"link_downed":                     pmaCounter(famLinkDowned, "the link went down: cable pulled, peer reset or training failed", 8, 10),
	"port_rcv_errors":                 pmaCounter(famRcvErrors, "packets received with errors (CRC, length, malformed): usually a bad link", 16, 10),
	"port_rcv_remote_physical_errors": pmaCounter(famRemoteErrors, "packets received marked bad by an upstream device: a fault elsewhere in the fabric", 16, 100),
	"port_rcv_switch_relay_errors":    pmaCounter(famRemoteErrors, "packets the port could not relay", 16, 100),
	"port_xmit_discards":              pmaCounter(famXmitDiscards, "outbound packets discarded: the port was down or congested", 16, 100),
	"port_xmit_constraint_errors":     pmaCounter(famConstraintErrors, "outbound packets dropped by partition or raw-packet constraints", 8, 100),
	"port_rcv_constraint_errors":      pmaCounter(famConstraintErrors, "inbound packets dropped by partition (P_Key) or raw-packet constraints", 8, 100),
	"local_link_integrity_errors":     pmaCounter(famLinkIntegrity, "the local link passed its physical error threshold", 4, 10),
	"excessive_buffer_overrun_errors": pmaCounter(famBufferOverrun, "receive buffer overruns: flow control on the link is not working", 4, 10),
	"VL15_dropped":                    pmaCounter(famVL15Dropped, "subnet management packets dropped (VL15): a busy or misbehaving subnet manager", 16, 100),
	// error_thresholds lists PortXmitWait too, but waiting for credits is
	// congestion, not a fault of this host.
	"port_xmit_wait": {class: protocolStat, meaning: "time the port had data to send but no flow-control credits: congestion", bits: 32},
}

// driverCounters are the hw_counters/ files one driver registers, per port
// (alloc_hw_port_stats) or for the whole device (alloc_hw_device_stats) —
// the core puts both under the name hw_counters, so one table serves both.
type driverCounters struct {
	driver string // the PCI driver bound ("mlx5_core"), or the software device's module ("rdma_rxe", "siw")
	rdma   string // the module that registers the RDMA device ("mlx5_ib"), as the messages name it
	source string // where the names come from
	hw     map[string]counterSpec
}

// counterDrivers is the per-driver table. A driver absent from it, or with
// no hw entries, is judged by its PMA counters alone.
var counterDrivers = []driverCounters{
	{driver: "mlx5_core", rdma: "mlx5_ib", source: "drivers/infiniband/hw/mlx5/counters.c", hw: mlx5Counters},
	{driver: "mlx4_core", rdma: "mlx4_ib", source: "PMA only (drivers/infiniband/core/sysfs.c)"},
	{driver: "hfi1", rdma: "hfi1", source: "PMA through rdmavt (drivers/infiniband/hw/hfi1/mad.c); its hw_counters names are built at run time from chip tables and are not judged"},
	{driver: "efa", rdma: "efa", source: "drivers/infiniband/hw/efa/efa_verbs.c (EFA_DEFINE_PORT_STATS, EFA_DEFINE_DEVICE_STATS)", hw: efaCounters},
	{driver: "ice", rdma: "irdma", source: "drivers/infiniband/hw/irdma/verbs.c (irdma_hw_stat_descs)", hw: irdmaCounters},
	{driver: "i40e", rdma: "irdma", source: "drivers/infiniband/hw/irdma/verbs.c (irdma_hw_stat_descs)", hw: irdmaCounters},
	{driver: "bnxt_en", rdma: "bnxt_re", source: "drivers/infiniband/hw/bnxt_re/hw_counters.c (bnxt_re_stat_descs)", hw: bnxtReCounters},
	{driver: "hns3", rdma: "hns_roce_hw_v2", source: "drivers/infiniband/hw/hns/hns_roce_main.c (hns_roce_port_stats_descs, the DFX part)", hw: hnsCounters},
	{driver: "cxgb4", rdma: "iw_cxgb4", source: "drivers/infiniband/hw/cxgb4/provider.c (cxgb4_descs: TCP statistics only)", hw: cxgb4Counters},
	{driver: "qede", rdma: "qedr", source: "drivers/infiniband/hw/qedr registers no hw_counters"},
	{driver: "erdma", rdma: "erdma", source: "the hw_counters names seen are those of Alibaba's out-of-tree erdma (connection and command-queue statistics); not judged"},
	{driver: "mana", rdma: "mana_ib", source: "drivers/infiniband/hw/mana/counters.c (mana_ib_port_stats_desc, mana_ib_device_stats_desc)", hw: manaCounters},
	{driver: "rdma_rxe", rdma: "rdma_rxe", source: "drivers/infiniband/sw/rxe/rxe_hw_counters.c (rxe_counter_descs)", hw: rxeCounters},
	{driver: "siw", rdma: "siw", source: "drivers/infiniband/sw/siw registers no counters"},
}

// mlx5Counters: drivers/infiniband/hw/mlx5/counters.c (basic_q_cnts,
// out_of_seq_q_cnts, retrans_q_cnts, extended_err_cnts, roce_accl_cnts,
// cong_cnts, ext_ppcnt_cnts). Per port; per device in switchdev mode.
var mlx5Counters = map[string]counterSpec{
	"out_of_buffer":        errC(famRxQueueDrops, "packets dropped because no receive WQE was posted: a receive queue ran dry", rxQueueThreshold),
	"rx_icrc_encapsulated": errC(famCorruptPackets, "RoCE packets with a bad ICRC: corruption on the way", corruptThreshold),

	"out_of_sequence":                statC("packets received out of sequence: packets were lost on the way"),
	"duplicate_request":              statC("retransmitted requests seen by the responder: the sender timed out"),
	"rnr_nak_retry_err":              statC("RNR NAK retries exhausted: a receiver had no buffer posted in time"),
	"packet_seq_err":                 statC("sequence-error NAKs received: the peer saw packet loss"),
	"implied_nak_seq_err":            statC("read/atomic responses implied a lost request"),
	"local_ack_timeout_err":          statC("ACK timeouts: lost packets or a peer that stopped answering"),
	"req_transport_retries_exceeded": statC("requests that ran out of transport retries"),
	"req_rnr_retries_exceeded":       statC("requests that ran out of RNR retries"),
	"resp_local_length_error":        statC("incoming messages longer than the posted receive buffer (an application error)"),
	"resp_cqe_error":                 statC("responder completions with an error status"),
	"req_cqe_error":                  statC("requester completions with an error status"),
	"req_remote_invalid_request":     statC("requests the remote side rejected as invalid"),
	"req_remote_access_errors":       statC("remote access errors on requests (bad rkey or permissions)"),
	"resp_remote_access_errors":      statC("incoming requests with a bad rkey or permissions"),
	"resp_cqe_flush_error":           statC("responder completions flushed (a QP moved to error, e.g. on teardown)"),
	"req_cqe_flush_error":            statC("requester completions flushed (a QP moved to error, e.g. on teardown)"),
	"roce_adp_retrans":               statC("adaptive retransmissions"),
	"roce_adp_retrans_to":            statC("adaptive retransmission timeouts"),
	"roce_slow_restart":              statC("slow restarts after retransmission"),
	"roce_slow_restart_cnps":         statC("CNPs sent during slow restart"),
	"roce_slow_restart_trans":        statC("transitions to slow restart"),
	"rp_cnp_ignored":                 statC("CNPs ignored by the reaction point"),
	"rp_cnp_handled":                 statC("CNPs handled by the reaction point (congestion control at work)"),
	"np_ecn_marked_roce_packets":     statC("ECN-marked RoCE packets received (congestion on the way)"),
	"np_cnp_sent":                    statC("CNPs sent by the notification point"),
}

// efaCounters: drivers/infiniband/hw/efa/efa_verbs.c. Port statistics
// (EFA_DEFINE_PORT_STATS) and device statistics (EFA_DEFINE_DEVICE_STATS).
var efaCounters = map[string]counterSpec{
	"rx_drops":           errC(famRxQueueDrops, "packets received and then dropped (no receive buffer posted, or no room)", rxQueueThreshold),
	"no_completion_cmds": errC(famDeviceFaults, "admin commands to the device that never completed: the device stopped answering its driver", deviceFaultThreshold),

	"rdma_read_wr_err":            statC("RDMA read work requests completed in error"),
	"rdma_write_wr_err":           statC("RDMA write work requests completed in error"),
	"retrans_pkts":                statC("SRD packets retransmitted"),
	"retrans_bytes":               statC("SRD bytes retransmitted"),
	"retrans_timeout_events":      statC("SRD retransmission timeouts that changed the network path"),
	"unresponsive_remote_events":  statC("times a remote SRD peer did not answer"),
	"impaired_remote_conn_events": statC("times SRD connections to a peer were impaired"),
	"cmds_err":                    statC("admin commands the device answered with an error (invalid requests included)"),
	"alloc_pd_err":                statC("PD allocations that failed"),
	"create_qp_err":               statC("QP creations that failed"),
	"create_cq_err":               statC("CQ creations that failed"),
	"reg_mr_err":                  statC("memory registrations that failed"),
	"alloc_ucontext_err":          statC("user contexts that could not be allocated"),
	"create_ah_err":               statC("address handles that could not be created"),
	"mmap_err":                    statC("mmap calls on the device that failed"),
}

// irdmaCounters: drivers/infiniband/hw/irdma/verbs.c (irdma_hw_stat_descs),
// per port.
var irdmaCounters = map[string]counterSpec{
	"ip4InDiscards":      errC(famDiscards, "IPv4 packets discarded on receive", discardThreshold),
	"ip6InDiscards":      errC(famDiscards, "IPv6 packets discarded on receive", discardThreshold),
	"ip4InTruncatedPkts": errC(famCorruptPackets, "IPv4 packets received truncated: corruption on the link", corruptThreshold),
	"ip6InTruncatedPkts": errC(famCorruptPackets, "IPv6 packets received truncated: corruption on the link", corruptThreshold),
	"tcpInProtoErrors":   errC(famTCPErrors, "iWARP TCP segments with protocol errors", discardThreshold),
	"tcpInOptErrors":     errC(famTCPErrors, "iWARP TCP segments with bad options", discardThreshold),
	"rxVlanErrors":       errC(famDiscards, "packets received on a VLAN the port is not set up for", discardThreshold),

	"tcpRetransSegs": statC("iWARP TCP segments retransmitted"),
	"ip4OutNoRoutes": statC("IPv4 packets not sent for want of a route"),
	"ip6OutNoRoutes": statC("IPv6 packets not sent for want of a route"),
	"cnpHandled":     statC("CNPs handled (congestion control at work)"),
	"cnpIgnored":     statC("CNPs ignored"),
	"cnpSent":        statC("CNPs sent"),
	"RxECNMrkd":      statC("ECN-marked packets received (congestion on the way)"),
}

// bnxtReCounters: drivers/infiniband/hw/bnxt_re/hw_counters.c
// (bnxt_re_stat_descs), per port. "recoverable_errors" is not listed: the
// driver fills it with the function's transmitted broadcast packets
// (hw_stats->tx_bcast_pkts), so it is no error count.
var bnxtReCounters = map[string]counterSpec{
	"rx_roce_errors":   errC(famCorruptPackets, "RoCE packets received with errors", corruptThreshold),
	"rx_roce_discards": errC(famDiscards, "RoCE packets discarded on receive", discardThreshold),
	"rx_out_of_buffer": errC(famRxQueueDrops, "packets dropped because no receive buffer was posted", rxQueueThreshold),
	"res_tx_pci_err":   errC(famDeviceFaults, "PCI errors on the responder's transmit path", deviceFaultThreshold),
	"res_rx_pci_err":   errC(famDeviceFaults, "PCI errors on the responder's receive path", deviceFaultThreshold),

	"to_retransmits":         statC("retransmissions after a timeout"),
	"seq_err_naks_rcvd":      statC("sequence-error NAKs received: the peer saw packet loss"),
	"max_retry_exceeded":     statC("requests that ran out of retries"),
	"rnr_naks_rcvd":          statC("RNR NAKs received: a receiver had no buffer posted"),
	"missing_resp":           statC("responses that never came"),
	"dup_req":                statC("duplicate requests seen by the responder"),
	"oos_drop_count":         statC("packets dropped as out of sequence"),
	"unrecoverable_err":      statC("requester errors that moved a QP to error"),
	"bad_resp_err":           statC("bad responses received"),
	"local_qp_op_err":        statC("local QP operation errors"),
	"local_protection_err":   statC("local protection errors (bad lkey)"),
	"mem_mgmt_op_err":        statC("memory management operation errors"),
	"remote_invalid_req_err": statC("requests the remote side rejected as invalid"),
	"remote_access_err":      statC("remote access errors (bad rkey or permissions)"),
	"remote_op_err":          statC("remote operation errors"),
	"res_length_mismatch":    statC("incoming messages of the wrong length"),
	"res_rx_invalid_rkey":    statC("incoming requests with an invalid rkey"),
}

// hnsCounters: drivers/infiniband/hw/hns/hns_roce_main.c, the driver's own
// (DFX) part of hns_roce_port_stats_descs, per port.
var hnsCounters = map[string]counterSpec{
	"cmds_err":       statC("firmware commands that failed (invalid requests included)"),
	"qp_create_err":  statC("QP creations that failed"),
	"qp_modify_err":  statC("QP modifications that failed"),
	"cq_create_err":  statC("CQ creations that failed"),
	"srq_create_err": statC("SRQ creations that failed"),
	"mr_reg_err":     statC("memory registrations that failed"),
	"ah_create_err":  statC("address handles that could not be created"),
	"mmap_err":       statC("mmap calls on the device that failed"),
	"uctx_alloc_err": statC("user contexts that could not be allocated"),
}

// cxgb4Counters: drivers/infiniband/hw/cxgb4/provider.c (cxgb4_descs), for
// the device: the offloaded TCP's statistics, none an error count.
var cxgb4Counters = map[string]counterSpec{
	"ip4RetransSegs": statC("iWARP TCP segments retransmitted (IPv4)"),
	"ip6RetransSegs": statC("iWARP TCP segments retransmitted (IPv6)"),
	"ip4OutRsts":     statC("TCP resets sent (IPv4)"),
	"ip6OutRsts":     statC("TCP resets sent (IPv6)"),
}

// manaCounters: drivers/infiniband/hw/mana/counters.c, per port
// (mana_ib_port_stats_desc) and for the device (mana_ib_device_stats_desc).
var manaCounters = map[string]counterSpec{
	"general_hw_error": errC(famDeviceFaults, "hardware errors the adapter reported", deviceFaultThreshold),

	"requester_timeout":                  statC("requests that timed out"),
	"requester_oos_nak":                  statC("out-of-sequence NAKs received"),
	"requester_rnr_nak":                  statC("RNR NAKs received"),
	"responder_rnr_nak":                  statC("RNR NAKs sent"),
	"responder_oos":                      statC("requests received out of sequence"),
	"responder_dup_request":              statC("duplicate requests seen by the responder"),
	"requester_implicit_nak":             statC("read/atomic responses implied a lost request"),
	"requester_readresp_psn_mismatch":    statC("read responses with an unexpected PSN"),
	"nak_inv_req":                        statC("invalid-request NAKs"),
	"nak_access_error":                   statC("remote access error NAKs"),
	"nak_opp_error":                      statC("remote operation error NAKs"),
	"nak_inv_read":                       statC("invalid read NAKs"),
	"responder_local_len_error":          statC("incoming messages longer than the posted receive buffer"),
	"requestor_local_prot_error":         statC("local protection errors (bad lkey)"),
	"responder_rem_access_error":         statC("incoming requests with a bad rkey or permissions"),
	"responder_local_qp_error":           statC("responder local QP errors"),
	"responder_malformed_wqe":            statC("malformed receive WQEs"),
	"requester_rnr_nak_retries_exceeded": statC("requests that ran out of RNR retries"),
	"requester_retries_exceeded":         statC("requests that ran out of retries"),
	"total_fatal_error":                  statC("QPs that hit a fatal error"),
	"received_cnps":                      statC("CNPs received (congestion control at work)"),
	"num_qps_congested":                  statC("QPs slowed down by congestion control"),
	"dup_rx_requests":                    statC("duplicate requests received"),
	"sent_cnps":                          statC("CNPs sent"),
	"received_ecns":                      statC("ECN-marked packets received (congestion on the way)"),
	"received_cnp_count":                 statC("CNPs received"),
	"qp_congested_events":                statC("times a QP was slowed down by congestion control"),
}

// rxeCounters: drivers/infiniband/sw/rxe/rxe_hw_counters.c, per port.
// rxe's link_downed is a 64-bit software count, not the 8-bit PMA one.
var rxeCounters = map[string]counterSpec{
	"send_err":    errC(famDiscards, "packets the device failed to hand to the network stack", discardThreshold),
	"link_downed": errC(famLinkDowned, "times the underlying netdev went down", 10),

	"duplicate_request":      statC("duplicate requests seen by the responder"),
	"out_of_seq_request":     statC("requests received out of sequence"),
	"rcvd_rnr_err":           statC("RNR NAKs received"),
	"send_rnr_err":           statC("RNR NAKs sent"),
	"rcvd_seq_err":           statC("sequence errors received"),
	"retry_exceeded_err":     statC("requests that ran out of retries"),
	"retry_rnr_exceeded_err": statC("requests that ran out of RNR retries"),
	"completer_retry_err":    statC("retries by the completer"),
	"ack_deferred":           statC("ACKs the completer deferred"),
}

// counterDriverOf finds the table row of an RDMA device: by the PCI driver
// bound, or, for a software device, by its module. nil: a driver the table
// does not know (judged by its PMA counters alone).
func counterDriverOf(d sysfs.RDMADevice) *driverCounters {
	name := d.Driver
	if d.Software {
		if sd := softwareDriver(d.Name, nil); sd != nil {
			name = sd.Modules[0]
		}
	}
	for i := range counterDrivers {
		if counterDrivers[i].driver == name {
			return &counterDrivers[i]
		}
	}
	return nil
}

// lookup returns the spec of a counter of group ("counters" or
// "hw_counters") on a device of this driver; ok is false for a counter the
// table does not list (traffic, or a driver's name it does not know).
func (dc *driverCounters) lookup(group, name string) (counterSpec, bool) {
	if group == "counters" {
		s, ok := pmaCounters[name]
		return s, ok
	}
	if dc == nil {
		return counterSpec{}, false
	}
	s, ok := dc.hw[name]
	return s, ok
}

// name is how messages call the driver.
func (dc *driverCounters) name(d sysfs.RDMADevice) string {
	if dc != nil {
		return dc.rdma
	}
	if d.Driver != "" {
		return d.Driver
	}
	return "the driver of " + d.Name
}

func (dc *driverCounters) sourceOrUnknown() string {
	if dc == nil {
		return "a driver it does not know"
	}
	return dc.source
}
