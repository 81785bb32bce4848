package checks

import (
	"errors"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// A kernel that refuses its log (dmesg_restrict without CAP_SYSLOG) makes
// kernel.log skip with the way to grant it; the devlink reporters are
// still judged beside it.
func TestKernelLogUnreadKinds(t *testing.T) {
	dl := devlinkVerdict{summary: "1 devlink health reporter(s) of the RDMA NICs",
		findings: []report.Finding{klogDevlinkError.At("pci/0000:3b:00.0/fw_fatal", Slots{"device": "mlx5_0", "reporter": "fw_fatal",
			"handle": "pci/0000:3b:00.0", "errors": "1", "recovered": "0"})}}
	for _, tc := range []struct {
		err    error
		id     string
		status report.Status
	}{
		{&sysfs.KernelLogError{Err: errors.New("open /dev/kmsg: operation not permitted"), Denied: true}, "kernel.log/no-access", report.Fail},
		{&sysfs.KernelLogError{Err: errors.New("read /dev/kmsg: input/output error")}, "kernel.log/unreadable", report.Fail},
	} {
		r := kernelLogUnread(tc.err, dl)
		if r.Status != tc.status || len(r.Findings) != 2 || r.Findings[0].ID != tc.id || r.Findings[1].ID != "kernel.log/devlink-error" {
			t.Errorf("%v: %s %+v", tc.err, r.Status, r.Findings)
		}
	}
	r := kernelLogUnread(&sysfs.KernelLogError{Err: errors.New("denied"), Denied: true}, devlinkVerdict{summary: "no devlink health reporters"})
	if r.Status != report.Skip || r.Findings[0].ID != "kernel.log/no-access" || r.Remedy == "" {
		t.Errorf("alone: %s %q %q", r.Status, r.Summary, r.Remedy)
	}
}

// kernelSamples are one line per table entry, as the kernel source the
// entry cites prints it (its format string filled in), in table order.
var kernelSamples = []string{
	"NETDEV WATCHDOG: ens1f0np0 (mlx5_core): transmit queue 5 timed out 8192 ms",
	"mlx5_core 0000:3b:00.0 ens1f0np0: NETDEV WATCHDOG: CPU: 12: transmit queue 3 timed out 5120 ms",
	"mlx5_core 0000:3b:00.0 ens1f0np0: TX timeout on queue: 5, SQ: 0x10c, CQ: 0x427, SQ Cons: 0x1b2 SQ Prod: 0x1c0, usecs since last trans: 8192000",
	"bnxt_en 0000:04:00.0 eth0: TX timeout detected, starting reset task!",
	"ice 0000:17:00.0 ens785f0: tx_timeout recovery level 1, txqueue 7",
	"mlx5_core 0000:41:00.0: poll_health:852:(pid 0): device's health compromised - reached miss count",
	"mlx5_core 0000:41:00.0: poll_health:860:(pid 0): Fatal error 1 detected",
	"mlx5_core 0000:5c:00.0: mlx5_pcie_event:299:(pid 268269): Detected insufficient power on the PCIe slot (27W).",
	"mlx5_core 0000:5c:00.0: Port module event[error]: module 0, Cable error, High Temperature",
	"mlx5_core 0000:5c:00.0: Port module event[error]: module 1, Cable error, Bad or shorted cable/module",
	"mlx5_core 0000:01:00.0: 63.008 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x8 link at 0000:00:01.0 (capable of 126.016 Gb/s with 8.0 GT/s PCIe x16 link)",
	"pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0",
	"mlx5_core 0000:01:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Requester ID)",
	"pcieport 0000:00:01.0: AER: Multiple Uncorrected (Non-Fatal) error message received from 0000:01:00.0",
	"mlx5_core 0000:01:00.0: AER: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)",
	"pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0",
	"pcieport 0000:00:01.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
	"mlx5_core 0000:3b:00.0 ens1f0np0: Link down",
	"bnxt_en 0000:04:00.0 eth0: NIC Link is Down",
	"IPv6: ADDRCONF(NETDEV_UP): ens1f0np0: link is not ready",
}

// Every table entry matches its kernel line (and no earlier entry takes
// it), and every such line is one a snapshot keeps, so a replay judges it.
func TestKnownMessagesMatchTheKernelLines(t *testing.T) {
	if len(kernelSamples) != len(knownMessages) {
		t.Fatalf("%d samples for %d table entries", len(kernelSamples), len(knownMessages))
	}
	for i, line := range kernelSamples {
		k, _ := matchKnown(line)
		if k != &knownMessages[i] {
			got := "nothing"
			if k != nil {
				got = k.source
			}
			t.Errorf("%q: matched %s, want entry %d (%s)", line, got, i, knownMessages[i].source)
		}
		if !sysfs.IsRDMAKernelMessage(line) && !sysfs.IsLinkHealthMessage(line) {
			t.Errorf("%q: a snapshot would not keep it", line)
		}
	}
	for _, line := range []string{"mlx5_core 0000:3b:00.0 ens1f0np0: Link up", "mlx5_core 0000:3b:00.0: Port module event: module 0, Cable plugged",
		"mlx5_core 0000:3b:00.0: 126.016 Gb/s available PCIe bandwidth (8.0 GT/s PCIe x16 link)"} {
		if k, _ := matchKnown(line); k != nil {
			t.Errorf("%q matched %s", line, k.finding.ID)
		}
	}
}

// A record's device comes from the message first, then its DEVICE=
// dictionary entry (a PCI device, a netdev by ifindex or by name), then
// the driver's prefix; the first that is in scope is the unit.
func TestLogScopeDevicesOf(t *testing.T) {
	sc := &logScope{units: map[string]string{"0000:3b:00.0": "mlx5_0 (0000:3b:00.0)", "ens1f0np0": "ens1f0np0 (netdev of mlx5_0)",
		"0000:3a:00.0": "PCIe port 0000:3a:00.0 (above mlx5_0)"}, ifindex: map[int]string{7: "ens1f0np0"}}
	for _, tc := range []struct {
		rec   sysfs.KernelRecord
		named []string
		want  []string
		unit  string
		in    bool
	}{
		{sysfs.KernelRecord{Text: "x", Device: "n7"}, nil, []string{"ens1f0np0"}, "ens1f0np0", true},
		{sysfs.KernelRecord{Text: "x", Device: "+pci:0000:3b:00.0"}, nil, []string{"0000:3b:00.0"}, "0000:3b:00.0", true},
		{sysfs.KernelRecord{Text: "x", Device: "+net:eno1"}, nil, []string{"eno1"}, "eno1", false},
		{sysfs.KernelRecord{Text: "x", Device: "n99"}, nil, nil, "", true},
		{sysfs.KernelRecord{Text: "mlx5_core 0000:3b:00.0 ens1f0np0: Link down"}, []string{"ens1f0np0"},
			[]string{"ens1f0np0", "ens1f0np0", "0000:3b:00.0"}, "ens1f0np0", true},
		{sysfs.KernelRecord{Text: "pcieport 0000:00:1c.0: AER: Corrected error received: 0000:05:00.0"}, []string{"0000:05:00.0"},
			[]string{"0000:05:00.0", "0000:00:1c.0"}, "0000:05:00.0", false},
		{sysfs.KernelRecord{Text: "pcieport 0000:3a:00.0: AER: Corrected error received: 0000:05:00.0"}, []string{"0000:05:00.0"},
			[]string{"0000:05:00.0", "0000:3a:00.0"}, "0000:3a:00.0", true},
	} {
		devs := sc.devicesOf(tc.rec, tc.named)
		unit, _, in := sc.place(devs)
		if strings.Join(devs, ",") != strings.Join(tc.want, ",") || unit != tc.unit || in != tc.in {
			t.Errorf("%+v: devices %v, unit %q in scope %v; want %v, %q, %v", tc.rec, devs, unit, in, tc.want, tc.unit, tc.in)
		}
	}
}
