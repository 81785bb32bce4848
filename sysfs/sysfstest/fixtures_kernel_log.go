package sysfstest

import (
	"strings"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Hosts for the kernel.log check: the CX-5 RoCE host (mlx5_0 on
// 0000:3b:00.0, netdev ens1f0np0, below root port 0000:3a:00.0) with a
// snapshot's kernel.log — lines as dmesg prints them, "[  sec.usec] text",
// each in the format of the kernel source named beside it — and its devlink
// health reporters in the facts file (mlx5 registers fw, fw_fatal on the PF,
// tx and rx on its netdev's channels: en/reporter_tx.c, reporter_rx.c).

// kernelLogBoot is what every mlx5 host logs at probe, none of it a fault:
// the healthy host's log, and the start of every other.
var kernelLogBoot = []string{
	"[    4.118532] mlx5_core 0000:3b:00.0: firmware version: 16.35.2000",
	"[    4.118601] mlx5_core 0000:3b:00.0: 126.016 Gb/s available PCIe bandwidth (8.0 GT/s PCIe x16 link)",
	"[    4.412907] mlx5_core 0000:3b:00.0: Port module event: module 0, Cable plugged",
	"[    5.902114] mlx5_core 0000:3b:00.0 ens1f0np0: renamed from eth0",
	"[    9.310772] mlx5_core 0000:3b:00.0 ens1f0np0: Link up",
	// The management NIC's watchdog: not an RDMA NIC, noted only.
	"[ 5020.000113] NETDEV WATCHDOG: eno1 (igb): transmit queue 2 timed out",
}

// healthyReporters are mlx5_0's reporters, healthy, one error long ago
// recovered on tx.
func healthyReporters() *sysfs.DevlinkHealth {
	r := func(name, st string, errs, rec uint64) sysfs.DevlinkReporter {
		return sysfs.DevlinkReporter{Bus: "pci", Device: "0000:3b:00.0", Name: name, State: st, ErrorCount: errs, RecoverCount: rec}
	}
	return &sysfs.DevlinkHealth{Reporters: []sysfs.DevlinkReporter{
		r("fw", "healthy", 0, 0), r("fw_fatal", "healthy", 0, 0), r("tx", "healthy", 0, 0), r("rx", "healthy", 0, 0),
	}}
}

// kernelLogHost is the CX-5 host with these kernel log lines after the
// boot lines, and these reporters.
func kernelLogHost(extra []string, dh *sysfs.DevlinkHealth) *Tree {
	tr := Build(CX5RoCE())
	lines := append(append([]string(nil), kernelLogBoot...), extra...)
	tr.File("/"+sysfs.KernelLogFile, strings.Join(lines, "\n")+"\n")
	if tr.Facts == nil {
		tr.Facts = &sysfs.Facts{Schema: sysfs.FactsSchema}
	}
	tr.Facts.DevlinkHealth = dh
	return tr
}

// KernelLogHealthy: the probe lines and a watchdog on the management NIC
// only. Verdict: kernel.log passes (kernel.log/clean, the igb line noted as
// kernel.log/other-device).
func KernelLogHealthy() *Tree { return kernelLogHost(nil, healthyReporters()) }

// KernelLogTxTimeout: the netdev watchdog fires on ens1f0np0 and mlx5
// reports the stuck send queue (net/sched/sch_generic.c, 6.1's format with
// the milliseconds; mlx5/core/en/reporter_tx.c). Verdict: kernel.log fails,
// kernel.log/tx-timeout on ens1f0np0 (two lines).
func KernelLogTxTimeout() *Tree {
	return kernelLogHost([]string{
		"[86012.553201] NETDEV WATCHDOG: ens1f0np0 (mlx5_core): transmit queue 5 timed out 8192 ms",
		"[86012.553377] mlx5_core 0000:3b:00.0 ens1f0np0: TX timeout on queue: 5, SQ: 0x10c, CQ: 0x427, SQ Cons: 0x1b2 SQ Prod: 0x1c0, usecs since last trans: 8192000",
	}, healthyReporters())
}

// KernelLogSlotPower: mlx5's PCIe power event (mlx5/core/events.c).
// Verdict: kernel.log warns, kernel.log/insufficient-power on 0000:3b:00.0.
func KernelLogSlotPower() *Tree {
	return kernelLogHost([]string{
		"[    4.231440] mlx5_core 0000:3b:00.0: mlx5_pcie_event:299:(pid 1210): Detected insufficient power on the PCIe slot (27W).",
	}, healthyReporters())
}

// KernelLogModuleHot: a port module event for high temperature, then the
// link going down (mlx5/core/events.c, en_main.c). Verdict: kernel.log
// fails, kernel.log/module-high-temperature on 0000:3b:00.0 (the link-down
// line beside it is a kernel.log/link-down note).
func KernelLogModuleHot() *Tree {
	return kernelLogHost([]string{
		"[73311.020944] mlx5_core 0000:3b:00.0: Port module event[error]: module 0, Cable error, High Temperature",
		"[73311.021377] mlx5_core 0000:3b:00.0 ens1f0np0: Link down",
	}, healthyReporters())
}

// KernelLogDevlinkError: a clean log, but mlx5_0's fw_fatal reporter is in
// error state after a firmware fatal error it could not recover. Verdict:
// kernel.log fails, kernel.log/devlink-error on pci/0000:3b:00.0/fw_fatal.
func KernelLogDevlinkError() *Tree {
	dh := healthyReporters()
	dh.Reporters[1].State, dh.Reporters[1].ErrorCount = "error", 1
	return kernelLogHost(nil, dh)
}
