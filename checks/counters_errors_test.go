package checks_test

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestCountersErrors(t *testing.T) {
	cx5 := func(tree func(tr *sysfstest.Tree)) string {
		tr := sysfstest.Build(sysfstest.CX5RoCE())
		tree(tr)
		return hwWrite(t, tr)
	}
	runNetCases(t, "counters.errors", []netCase{
		{name: "cx5-roce-healthy", dir: netFixture("cx5-roce-healthy"), status: report.Pass,
			contains: []string{"error counters zero on 2 port(s)", "mlx5_0 port 1: 13 error counters read, all zero"}},
		{name: "cx6-ib-healthy", dir: netFixture("cx6-ib-healthy"), status: report.Pass},
		{name: "rxe-softroce", dir: netFixture("rxe-softroce"), status: report.Pass, contains: []string{"rxe0 port 1: 2 error counters read, all zero"}},
		// A saturated counter is said, not failed: pinned at its maximum it
		// cannot show a fault of today, and a node must not be drained for
		// what a counter collected over years.
		{name: "counters-saturated", dir: netFixture("counters-saturated"), status: report.Warn,
			contains: []string{"link_downed = 255, saturated (the real count is higher; threshold 10)", "symbol_error = 65535, saturated",
				"port_rcv_errors = 7 (threshold 10): packets received with errors", "--interval",
				"To start from zero after a repair: `perfquery -C mlx5_0 -P 1 -R` (IB PortCounters; -a for all ports). RoCE ports have no PMA reset: " +
					"compare with --interval instead. hw_counters reset only when the driver reloads.",
				"reseat or replace the cable/transceiver"},
			lacks: []string{"perfquery -x", "SR-IOV"}},
		{name: "counters-na-no-pma", dir: netFixture("counters-na-no-pma"), status: report.Pass,
			contains: []string{"unknown (N/A (no PMA): VL15_dropped, excessive_buffer_overrun_errors", "mlx5_1 port 1: 1 error counters read, all zero",
				"error counters zero on 2 port(s); 12 counters unreadable (N/A (no PMA)) on mlx5_1 port 1", "all readable ones zero"}},
		{name: "every counter unknown", dir: cx5(func(tr *sysfstest.Tree) {
			for _, d := range []string{"mlx5_0", "mlx5_1"} {
				sysfstest.SetAllCounters(tr, d, 1, "counters", "N/A (no PMA)")
				sysfstest.SetAllCounters(tr, d, 1, "hw_counters", "N/A (no PMA)")
			}
		}), status: report.Error, exit: report.ExitUnknown, rootCause: "counters.errors",
			contains: []string{"all 2 ports: mlx5_0 port 1: none of its 13 error counters could be read (N/A (no PMA))", "could not be determined",
				"management agent did not answer", "ethtool -S"},
			lacks: []string{"SR-IOV"}},
		{name: "a down port's unreadable counters are not judged", dir: func() string {
			h := sysfstest.CX5RoCE()
			h.NICs[1].Ports[0].State, h.NICs[1].Ports[0].PhysState = "1: DOWN", "3: Disabled"
			tr := sysfstest.Build(h)
			sysfstest.SetAllCounters(tr, "mlx5_1", 1, "counters", "N/A (no PMA)")
			sysfstest.SetAllCounters(tr, "mlx5_1", 1, "hw_counters", "N/A (no PMA)")
			return hwWrite(t, tr)
		}(), status: report.Pass, exit: 19, rootCause: "port.state",
			contains: []string{"mlx5_1 port 1: none of its 13 error counters could be read (N/A (no PMA)) and the port is not ACTIVE (1: DOWN): nothing to judge",
				"error counters zero on 1 port(s)"}},
		{name: "counters nobody may read are an error without PMA advice", dir: cx5(func(tr *sysfstest.Tree) {
			dir := sysfstest.PortDir(tr, "mlx5_1", 1) + "/"
			tr.Facts.ReadErrors = map[string]string{}
			for p := range tr.Files {
				if strings.HasPrefix(p, dir+"counters/") || strings.HasPrefix(p, dir+"hw_counters/") {
					tr.Facts.ReadErrors[p] = "EACCES"
				}
			}
		}), status: report.Error, exit: report.ExitUnknown, rootCause: "counters.errors",
			contains: []string{"mlx5_1 port 1: none of its 13 error counters could be read (permission denied)", "run as a user who may read them"},
			lacks:    []string{"management agent", "SR-IOV"}},
		{name: "unreadable for two reasons", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", "symbol_error", "N/A (no PMA)")
			sysfstest.SetCounter(tr, "mlx5_1", 1, "counters", "symbol_error", "N/A (no PMA)")
			sysfstest.SetCounter(tr, "mlx5_1", 1, "counters", "link_downed", "x")
		}), status: report.Pass, contains: []string{"; 1 counters unreadable (\"x\": not a counter value) on mlx5_1 port 1; 2 counters unreadable (N/A (no PMA)) on mlx5_0 port 1, mlx5_1 port 1"}},
		{name: "malformed and binary counters are unknown", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", "symbol_error", "lots")
			sysfstest.SetCounter(tr, "mlx5_0", 1, "hw_counters", "out_of_buffer", "\x00\xff\x01")
		}), status: report.Pass, contains: []string{`"lots": not a counter value`, "out_of_buffer"}},
		{name: "a protocol statistic is reported, not judged", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mlx5_1", 1, "hw_counters", "out_of_sequence", "42")
			sysfstest.SetCounter(tr, "mlx5_1", 1, "hw_counters", "np_cnp_sent", "7")
		}), status: report.Pass, contains: []string{"2 protocol statistic(s) nonzero, reported, not judged",
			"out_of_sequence = 42: packets received out of sequence: packets were lost on the way (reported, not judged)", "np_cnp_sent = 7"}},
		{name: "symbol_error below its threshold warns", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", "symbol_error", "3")
		}), status: report.Warn, contains: []string{"mlx5_0 port 1: symbol_error = 3 (threshold 10): minor link errors",
			"counts since boot or the last reset", "reseat or replace the cable/transceiver",
			"To start from zero after a repair: RoCE ports have no PMA reset"},
			lacks: []string{"perfquery -C"}},
		{name: "symbol_error beyond its threshold fails", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", "symbol_error", "50")
		}), status: report.Fail, exit: 22, rootCause: "counters.errors",
			contains: []string{"mlx5_0 port 1: symbol_error = 50, beyond the threshold 10", "2 ports: 1 fail, 1 pass", "reseat or replace the cable/transceiver"}},
		{name: "a 16-bit legacy counter at its maximum is saturated", dir: cx5(func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", "port_rcv_errors", "65535")
		}), status: report.Warn, contains: []string{"port_rcv_errors = 65535, saturated"}},
		{name: "beyond the threshold but not rising in --interval: history, said", dir: netFixture("counters-above-threshold"),
			opts: checks.Options{Interval: 50 * time.Millisecond}, status: report.Warn, contains: []string{"port_rcv_errors = 12, beyond the threshold 10", "it did not rise in 50ms"}},
		{name: "counters-above-threshold", dir: netFixture("counters-above-threshold"), status: report.Fail, exit: 22, rootCause: "counters.errors",
			contains: []string{"port_rcv_errors = 12, beyond the threshold 10: packets received with errors", "perfquery -C mlx5_0 -P 1 -R"}},
		{name: "a VF's unreadable PMA names its PF", dir: cx5(func(tr *sysfstest.Tree) {
			tr.RelLink("/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1/physfn", "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0")
			sysfstest.SetAllCounters(tr, "mlx5_1", 1, "counters", "N/A (no PMA)")
			sysfstest.SetAllCounters(tr, "mlx5_1", 1, "hw_counters", "N/A (no PMA)")
		}), status: report.Error, exit: report.ExitUnknown, rootCause: "counters.errors",
			contains: []string{"mlx5_1 port 1: none of its 13 error counters could be read", "mlx5_1 is an SR-IOV VF of 0000:3b:00.0: the physical link's errors are counted on the PF's port"}},
	})
}

// driverHost is CX5RoCE with its two functions given to another driver, as
// that driver's device names and counters.
func driverHost(t *testing.T, driver string, vendor, device uint16, ibdevs [2]string, tree func(tr *sysfstest.Tree)) string {
	t.Helper()
	h := sysfstest.CX5RoCE()
	for i := range h.NICs {
		h.NICs[i].Driver, h.NICs[i].Vendor, h.NICs[i].Device, h.NICs[i].IBDev = driver, vendor, device, ibdevs[i]
	}
	tr := sysfstest.Build(h)
	if tree != nil {
		tree(tr)
	}
	return hwWrite(t, tr)
}

// deviceCounter writes one of a device's own hw_counters.
func deviceCounter(tr *sysfstest.Tree, dev, name, value string) {
	tr.Attr(path.Join(path.Dir(path.Dir(sysfstest.PortDir(tr, dev, 1))), "hw_counters", name), value)
}

// Each driver is judged by the counters it has: EFA and irdma have no
// PortCounters, only hw_counters; siw and cxgb4 have no error counters.
func TestCountersErrorsByDriver(t *testing.T) {
	efa := [2]string{"rdmap59s0", "rdmap59s1"}
	cases := []struct {
		name     string
		dir      string
		status   report.Status
		contains []string
		lacks    []string
	}{
		{"efa clean", driverHost(t, "efa", 0x1d0f, 0xefa1, efa, nil), report.Pass,
			[]string{"error counters zero on 2 port(s) and 2 device(s)", "rdmap59s0 port 1: 1 error counters read, all zero", "rdmap59s0 device counters: 1 error counters read, all zero"},
			[]string{"unknown", "N/A"}},
		{"efa rx_drops beyond the threshold", driverHost(t, "efa", 0x1d0f, 0xefa1, efa, func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "rdmap59s1", 1, "hw_counters", "rx_drops", "25000")
			sysfstest.SetCounter(tr, "rdmap59s1", 1, "hw_counters", "retrans_pkts", "17852")
		}), report.Fail,
			[]string{"rdmap59s1 port 1: rx_drops = 25000, beyond the threshold 10000: packets received and then dropped",
				"retrans_pkts = 17852: SRD packets retransmitted (reported, not judged)", "receiving application does not post receive buffers",
				"hw_counters reset only when the driver reloads"},
			[]string{"perfquery -C"}},
		{"efa device fault", driverHost(t, "efa", 0x1d0f, 0xefa1, efa, func(tr *sysfstest.Tree) {
			deviceCounter(tr, "rdmap59s0", "no_completion_cmds", "2")
			deviceCounter(tr, "rdmap59s0", "cmds_err", "40")
		}), report.Warn,
			[]string{"rdmap59s0 device counters: no_completion_cmds = 2 (threshold 10): admin commands to the device that never completed",
				"cmds_err = 40", "Judge each counter by the meaning printed with it"}, []string{"rdmap59s1 device counters: no_completion"}},
		{"irdma without PMA is judged by hw_counters", driverHost(t, "ice", 0x8086, 0x159b, [2]string{"irdma0", "irdma1"}, func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "irdma1", 1, "hw_counters", "ip4InTruncatedPkts", "4")
			sysfstest.SetCounter(tr, "irdma1", 1, "hw_counters", "tcpRetransSegs", "9")
		}), report.Warn,
			[]string{"irdma1 port 1: ip4InTruncatedPkts = 4 (threshold 10): IPv4 packets received truncated", "irdma0 port 1: 7 error counters read, all zero",
				"tcpRetransSegs = 9", "Judge each counter by the meaning printed with it", "hw_counters reset only when the driver reloads"},
			[]string{"N/A", "could not be determined", "perfquery -C"}},
		{"erdma's counters are not in the table", driverHost(t, "erdma", 0x1ded, 0x107f, [2]string{"erdma_0", "erdma_1"}, func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "erdma_0", 1, "hw_counters", "listen_failed_cnt", "3")
		}), report.Skip,
			[]string{"erdma_0 port 1: erdma exposes no error counters here (none of its hw_counters/ files is an error counter in rdmadoctor's table"}, nil},
		{"bnxt_re recoverable_errors is broadcast traffic, not errors", driverHost(t, "bnxt_en", 0x14e4, 0x1750, [2]string{"bnxt_re0", "bnxt_re1"}, func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "bnxt_re0", 1, "hw_counters", "recoverable_errors", "123456")
		}), report.Pass, []string{"bnxt_re0 port 1: 5 error counters read, all zero"}, []string{"recoverable_errors"}},
		{"cxgb4 has TCP statistics only", driverHost(t, "cxgb4", 0x1425, 0x6410, [2]string{"cxgb4_0", "cxgb4_1"}, func(tr *sysfstest.Tree) {
			deviceCounter(tr, "cxgb4_0", "ip4RetransSegs", "5")
		}), report.Skip,
			[]string{"cxgb4_0 device counters: iw_cxgb4 exposes no error counters here (its hw_counters/ hold statistics only)", "ip4RetransSegs = 5"}, nil},
		{"mana hardware error", driverHost(t, "mana", 0x1414, 0x00ba, [2]string{"mana_0", "mana_1"}, func(tr *sysfstest.Tree) {
			sysfstest.SetCounter(tr, "mana_0", 1, "hw_counters", "general_hw_error", "11")
			sysfstest.SetCounter(tr, "mana_0", 1, "hw_counters", "requester_timeout", "4")
			deviceCounter(tr, "mana_1", "received_ecns", "8")
		}), report.Fail,
			[]string{"mana_0 port 1: general_hw_error = 11, beyond the threshold 10: hardware errors the adapter reported", "requester_timeout = 4",
				"received_ecns = 8", "mana_1 device counters: mana_ib exposes no error counters here (its hw_counters/ hold statistics only)"}, nil},
		{"qedr has no counters", driverHost(t, "qede", 0x1077, 0x8070, [2]string{"qedr0", "qedr1"}, nil), report.Skip,
			[]string{"all 2 counter sets: qedr0: qedr exposes no error counters in sysfs (no counters/ or hw_counters/ on its ports or the device)"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := hwRunOne(t, tc.dir, "counters.errors", checks.Options{})
			text := c.Summary + "\n" + strings.Join(c.Details, "\n") + "\n" + c.Remedy
			if c.Status != tc.status {
				t.Fatalf("status %s, want %s\n%s", c.Status, tc.status, text)
			}
			for _, s := range tc.contains {
				if !strings.Contains(text, s) {
					t.Errorf("lacks %q:\n%s", s, text)
				}
			}
			for _, s := range tc.lacks {
				if strings.Contains(text, s) {
					t.Errorf("holds %q:\n%s", s, text)
				}
			}
		})
	}
}

// siw registers no counters at all: skipped with the reason, never error.
func TestCountersErrorsSoftIWARP(t *testing.T) {
	h := sysfstest.RXE()
	h.Soft[0].Name = "siw0"
	c := hwRunOne(t, hwWrite(t, sysfstest.Build(h)), "counters.errors", checks.Options{})
	if c.Status != report.Skip || !strings.Contains(c.Summary, "siw0: siw exposes no error counters in sysfs (no counters/ or hw_counters/") {
		t.Fatalf("%s %q", c.Status, c.Summary)
	}
}

// A counter that rises between the two samples of --interval fails; one
// that stays put does not.
func TestCountersErrorsInterval(t *testing.T) {
	dir := hwWrite(t, sysfstest.Build(sysfstest.CX6IB()))
	still := hwRun(t, dir, checks.Options{Interval: 100 * time.Millisecond}, "counters.errors")
	if c := hwResult(t, still, "counters.errors"); c.Status != report.Pass || !strings.Contains(c.Summary, "none rose in 100ms") {
		t.Fatalf("steady counters: %s %q", c.Status, c.Summary)
	}

	f := filepath.Join(dir, "sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error")
	if err := os.WriteFile(f, []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Well after the first sample and well before the second, even on
		// a loaded machine where building the run takes a while.
		time.Sleep(1500 * time.Millisecond)
		os.WriteFile(f, []byte("9\n"), 0o644)
	}()
	r := hwRun(t, dir, checks.Options{Interval: 3 * time.Second}, "counters.errors")
	<-done
	c := hwResult(t, r, "counters.errors")
	if c.Status != report.Fail || r.ExitCode != 22 || !strings.Contains(c.Summary, "symbol_error rose by 2") ||
		!strings.Contains(c.Remedy, "The fault is happening now") {
		t.Fatalf("rising counter below its threshold: %s exit %d %q", c.Status, r.ExitCode, c.Summary)
	}

	// A steady count below the threshold warns and says it did not rise.
	r = hwRun(t, dir, checks.Options{Interval: 100 * time.Millisecond}, "counters.errors")
	c = hwResult(t, r, "counters.errors")
	if c.Status != report.Warn || !strings.Contains(c.Summary, "symbol_error = 9 (threshold 10): minor link errors on the physical lanes: a marginal cable, dirty or loose optics; it did not rise in 100ms") ||
		strings.Contains(c.Summary, "counts since boot") {
		t.Fatalf("steady count: %s %q", c.Status, c.Summary)
	}

	// A saturated counter cannot rise: --interval says so instead of "did not rise".
	sat := hwRun(t, netFixture("counters-saturated"), checks.Options{Interval: 100 * time.Millisecond}, "counters.errors")
	c = hwResult(t, sat, "counters.errors")
	if c.Status != report.Warn || !strings.Contains(c.Summary, "link_downed = 255, saturated (the real count is higher; threshold 10): "+
		"the link went down: cable pulled, peer reset or training failed; whether it still rises cannot be told: reset it (`perfquery -C mlx5_0 -P 1 -R`) and measure again") {
		t.Fatalf("saturated with --interval: %s exit %d %q", c.Status, sat.ExitCode, c.Summary)
	}

	// An interval longer than the check's deadline is shortened, not an error.
	r = hwRun(t, dir, checks.Options{Interval: time.Minute, CheckTimeout: 500 * time.Millisecond}, "counters.errors")
	c = hwResult(t, r, "counters.errors")
	if c.Status == report.Error || !strings.Contains(strings.Join(c.Details, "\n"), "longer than the check's deadline") {
		t.Fatalf("long interval: %s %q %v", c.Status, c.Summary, c.Details)
	}
}

// Driver counters are 64-bit: a rxe link_downed of 255 is a count, not a
// saturated 8-bit PMA counter.
func TestCountersSaturationIsPerWidth(t *testing.T) {
	tr := sysfstest.Build(sysfstest.RXE())
	sysfstest.SetCounter(tr, "rxe0", 1, "hw_counters", "link_downed", "255")
	r := hwRun(t, hwWrite(t, tr), checks.Options{}, "counters.errors")
	c := hwResult(t, r, "counters.errors")
	if c.Status != report.Fail || strings.Contains(c.Summary, "saturated") || !strings.Contains(c.Summary, "link_downed = 255, beyond the threshold 10") {
		t.Fatalf("%s %q", c.Status, c.Summary)
	}
}
