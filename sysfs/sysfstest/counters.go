package sysfstest

import "path"

// The counter files each driver really creates, as the fixtures write them.
// The core creates ports/N/counters/ (the IB PMA PortCounters) only for
// drivers with process_mad (drivers/infiniband/core/sysfs.c); hw_counters/
// holds what a driver registers per port (alloc_hw_port_stats) and, under
// the device itself, for the whole device (alloc_hw_device_stats).

// pmaCounters are PortCounters files (PORT_PMA_ATTR and PORT_PMA_ATTR_EXT in
// drivers/infiniband/core/sysfs.c).
var pmaCounters = []string{"VL15_dropped", "excessive_buffer_overrun_errors", "link_downed", "link_error_recovery",
	"local_link_integrity_errors", "port_rcv_constraint_errors",
	"port_rcv_data", "port_rcv_errors", "port_rcv_packets", "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors",
	"port_xmit_constraint_errors", "port_xmit_data", "port_xmit_discards", "port_xmit_packets",
	"port_xmit_wait", "symbol_error", "unicast_rcv_packets", "unicast_xmit_packets"}

// pmaTraffic are the nonzero traffic values a busy port shows.
var pmaTraffic = map[string]string{
	"port_xmit_data": "2203791820", "port_rcv_data": "2196417504",
	"port_xmit_packets": "31337902", "unicast_xmit_packets": "31337902",
	"port_rcv_packets": "31290611", "unicast_rcv_packets": "31290611",
}

// mlx5HWCounters: drivers/infiniband/hw/mlx5/counters.c, the counters a
// ConnectX-5 with RoCE has (basic, out-of-sequence, retransmission,
// extended error, RoCE acceleration and congestion groups).
var mlx5HWCounters = []string{"duplicate_request", "implied_nak_seq_err", "local_ack_timeout_err",
	"np_cnp_sent", "np_ecn_marked_roce_packets", "out_of_buffer", "out_of_sequence", "packet_seq_err",
	"req_cqe_error", "req_remote_access_errors", "req_remote_invalid_request", "resp_cqe_error",
	"resp_local_length_error", "resp_remote_access_errors", "rnr_nak_retry_err", "roce_adp_retrans",
	"rp_cnp_handled", "rx_atomic_requests", "rx_read_requests", "rx_write_requests"}

// rxeHWCounters: drivers/infiniband/sw/rxe/rxe_hw_counters.c. The fixtures
// model Debian 12's kernel; later kernels also give rxe a PMA (rxe-mad.c).
var rxeHWCounters = []string{"ack_deferred", "completer_retry_err", "duplicate_request",
	"link_downed", "out_of_seq_request", "rcvd_pkts", "rcvd_rnr_err", "rcvd_seq_err", "rdma_recvs",
	"rdma_sends", "retry_exceeded_err", "retry_rnr_exceeded_err", "send_err", "send_rnr_err", "sent_pkts"}

// efaPortCounters and efaDeviceCounters: drivers/infiniband/hw/efa/efa_verbs.c
// (EFA_DEFINE_PORT_STATS, EFA_DEFINE_DEVICE_STATS).
var efaPortCounters = []string{"tx_bytes", "tx_pkts", "rx_bytes", "rx_pkts", "rx_drops", "send_bytes", "send_wrs",
	"recv_bytes", "recv_wrs", "rdma_read_wrs", "rdma_read_bytes", "rdma_read_wr_err", "rdma_read_resp_bytes",
	"rdma_write_wrs", "rdma_write_bytes", "rdma_write_wr_err", "rdma_write_recv_bytes", "retrans_bytes",
	"retrans_pkts", "retrans_timeout_events", "unresponsive_remote_events", "impaired_remote_conn_events"}

var efaDeviceCounters = []string{"submitted_cmds", "completed_cmds", "cmds_err", "no_completion_cmds",
	"keep_alive_rcvd", "alloc_pd_err", "create_qp_err", "create_cq_err", "reg_mr_err", "alloc_ucontext_err",
	"create_ah_err", "mmap_err"}

// irdmaHWCounters: drivers/infiniband/hw/irdma/verbs.c (irdma_hw_stat_descs),
// gen2 (E810).
var irdmaHWCounters = []string{"ip4InDiscards", "ip4InTruncatedPkts", "ip4OutNoRoutes", "ip6InDiscards",
	"ip6InTruncatedPkts", "ip6OutNoRoutes", "tcpRetransSegs", "tcpInOptErrors", "tcpInProtoErrors", "rxVlanErrors",
	"ip4InOctets", "ip4InPkts", "ip4InReasmRqd", "ip4InMcastPkts", "ip4OutOctets", "ip4OutPkts", "ip4OutSegRqd",
	"ip4OutMcastPkts", "ip6InOctets", "ip6InPkts", "ip6InReasmRqd", "ip6InMcastPkts", "ip6OutOctets", "ip6OutPkts",
	"ip6OutSegRqd", "ip6OutMcastPkts", "tcpInSegs", "tcpOutSegs", "iwInRdmaReads", "iwInRdmaSends", "iwInRdmaWrites",
	"iwOutRdmaReads", "iwOutRdmaSends", "iwOutRdmaWrites", "iwRdmaBnd", "iwRdmaInv", "cnpHandled", "cnpIgnored",
	"cnpSent", "ip4InMcastOctets", "ip4OutMcastOctets", "ip6InMcastOctets", "ip6OutMcastOctets", "RxUDP", "TxUDP",
	"RxECNMrkd"}

// bnxtReHWCounters: drivers/infiniband/hw/bnxt_re/hw_counters.c
// (bnxt_re_stat_descs). A 2025 kernel added bnxt_re_process_mad (PMA
// counters under counters/); the fixtures model the kernels before it, which
// distributions still ship.
var bnxtReHWCounters = []string{"active_pds", "active_ahs", "active_qps", "active_srqs", "active_cqs", "active_mrs",
	"active_mws", "rx_pkts", "rx_bytes", "tx_pkts", "tx_bytes", "recoverable_errors", "rx_roce_errors",
	"rx_roce_discards", "to_retransmits", "seq_err_naks_rcvd", "max_retry_exceeded", "rnr_naks_rcvd", "missing_resp",
	"unrecoverable_err", "bad_resp_err", "local_qp_op_err", "local_protection_err", "mem_mgmt_op_err",
	"remote_invalid_req_err", "remote_access_err", "remote_op_err", "dup_req", "res_exceed_max", "res_length_mismatch",
	"res_exceeds_wqe", "res_opcode_err", "res_rx_invalid_rkey", "res_rx_domain_err", "res_rx_no_perm",
	"res_rx_range_err", "res_tx_invalid_rkey", "res_tx_domain_err", "res_tx_no_perm", "res_tx_range_err",
	"res_irrq_oflow", "res_unsup_opcode", "res_unaligned_atomic", "res_rem_inv_err", "res_mem_err", "res_srq_err",
	"res_cmp_err", "res_invalid_dup_rkey", "res_wqe_format_err", "res_cq_load_err", "res_srq_load_err",
	"res_tx_pci_err", "res_rx_pci_err", "oos_drop_count", "tx_atomic_req", "tx_read_req", "tx_read_resp",
	"tx_write_req", "tx_send_req", "rx_atomic_req", "rx_read_req", "rx_read_resp", "rx_write_req", "rx_send_req",
	"rx_roce_good_pkts", "rx_roce_good_bytes", "rx_out_of_buffer"}

// cxgb4DeviceCounters: drivers/infiniband/hw/cxgb4/provider.c (cxgb4_descs),
// registered for the device.
var cxgb4DeviceCounters = []string{"ip4InSegs", "ip4OutSegs", "ip4RetransSegs", "ip4OutRsts", "ip6InSegs",
	"ip6OutSegs", "ip6RetransSegs", "ip6OutRsts"}

// manaPortCounters and manaDeviceCounters: drivers/infiniband/hw/mana/counters.c.
var manaPortCounters = []string{"requester_timeout", "requester_oos_nak", "requester_rnr_nak", "responder_rnr_nak",
	"responder_oos", "responder_dup_request", "requester_implicit_nak", "requester_readresp_psn_mismatch", "nak_inv_req",
	"nak_access_error", "nak_opp_error", "nak_inv_read", "responder_local_len_error", "requestor_local_prot_error",
	"responder_rem_access_error", "responder_local_qp_error", "responder_malformed_wqe", "general_hw_error",
	"requester_rnr_nak_retries_exceeded", "requester_retries_exceeded", "total_fatal_error", "received_cnps",
	"num_qps_congested", "rate_inc_events", "num_qps_recovered", "current_rate", "dup_rx_requests", "tx_bytes",
	"rx_bytes", "rx_send_requests", "rx_write_requests", "rx_read_requests", "tx_packets", "rx_packets"}

var manaDeviceCounters = []string{"sent_cnps", "received_ecns", "received_cnp_count", "qp_congested_events",
	"qp_recovered_events", "rate_inc_events"}

// driverCounterFiles is what one driver creates: PortCounters or not, its
// per-port and its per-device hw_counters. A driver not listed has none
// (siw, qedr).
type driverCounterFiles struct {
	pma          bool
	port, device []string
	lifespan     string // hw_counters/lifespan, milliseconds ("10" unless set)
}

// counterFiles is keyed by the PCI driver bound, or by the software
// device's module ("rdma_rxe", "siw").
var counterFiles = map[string]driverCounterFiles{
	"mlx5_core": {pma: true, port: mlx5HWCounters, lifespan: "12"},
	"mlx4_core": {pma: true},
	"hfi1":      {pma: true},
	"rdma_rxe":  {port: rxeHWCounters},
	"efa":       {port: efaPortCounters, device: efaDeviceCounters},
	"ice":       {port: irdmaHWCounters},
	"i40e":      {port: irdmaHWCounters},
	"bnxt_en":   {port: bnxtReHWCounters},
	"cxgb4":     {device: cxgb4DeviceCounters},
	"mana":      {port: manaPortCounters, device: manaDeviceCounters},
}

// writeCounters writes the counter files of the port directory pd of a
// device whose driver is driver (the PCI driver, or "rdma_rxe"/"siw"),
// all zero but the traffic counters. The device's own hw_counters are
// written with its first port.
func writeCounters(t *Tree, pd string, driver string, pma bool) {
	files := counterFiles[driver]
	if files.pma || pma {
		for _, c := range pmaCounters {
			v := pmaTraffic[c]
			if v == "" {
				v = "0"
			}
			t.Attr(path.Join(pd, "counters", c), v)
		}
	}
	writeHWCounters(t, path.Join(pd, "hw_counters"), files.port, files.lifespan)
	if path.Base(pd) == "1" {
		writeHWCounters(t, path.Join(path.Dir(path.Dir(pd)), "hw_counters"), files.device, files.lifespan)
	}
}

// writeHWCounters writes one hw_counters directory: its counters and the
// lifespan file the core adds (milliseconds between hardware queries).
func writeHWCounters(t *Tree, dir string, names []string, lifespan string) {
	if len(names) == 0 {
		return
	}
	for _, c := range names {
		t.Attr(path.Join(dir, c), "0")
	}
	if lifespan == "" {
		lifespan = "10"
	}
	t.Attr(path.Join(dir, "lifespan"), lifespan)
}

// softDriver is the module of a software RDMA device, told by its name as
// `rdma link add` users name them ("rxe0", "siw0").
func softDriver(name string) string {
	if len(name) >= 3 && name[:3] == "siw" {
		return "siw"
	}
	return "rdma_rxe"
}
