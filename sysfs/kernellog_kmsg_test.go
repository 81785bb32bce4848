package sysfs

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"
)

// kmsgRecords are records as devkmsg_read (kernel/printk/printk.c) writes
// them: "%u,%llu,%llu,%c;" (facility<<3|level, sequence, microseconds,
// '-' or 'c'), the text, '\n', then the dictionary's " KEY=value\n" lines
// (Documentation/ABI/testing/dev-kmsg shows the same layout).
var kmsgRecords = []struct {
	in   string
	want KernelRecord
}{
	{"3,2417,86012553377,-;mlx5_core 0000:3b:00.0 ens1f0np0: TX timeout on queue: 5\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n",
		KernelRecord{Level: 3, Facility: 0, Seq: 2417, HasSeq: true, Time: 86012553377000, Text: "mlx5_core 0000:3b:00.0 ens1f0np0: TX timeout on queue: 5",
			Subsystem: "pci", Device: "+pci:0000:3b:00.0"}},
	{"12,2418,86013000000,-;NETDEV WATCHDOG: dummy0 (dummy): transmit queue 0 timed out 5120 ms\n",
		KernelRecord{Level: 4, Facility: 1, Seq: 2418, HasSeq: true, Time: 86013000000000, Text: "NETDEV WATCHDOG: dummy0 (dummy): transmit queue 0 timed out 5120 ms"}},
	{"6,339,5140900,-,caller=T1;NET: Registered protocol family 10\n SUBSYSTEM=net\n DEVICE=n8\n",
		KernelRecord{Level: 6, Seq: 339, HasSeq: true, Time: 5140900000, Text: "NET: Registered protocol family 10", Subsystem: "net", Device: "n8"}},
}

func TestParseKmsgRecordDictionary(t *testing.T) {
	for _, tc := range kmsgRecords {
		got, ok := ParseKmsgRecord([]byte(tc.in))
		if !ok {
			t.Fatalf("%q refused", tc.in)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.in, diff)
		}
	}
}

// The mark: records from it on; a gap before the oldest one left is
// counted as lost; a ring whose newest record is older than the mark
// starts again at the beginning.
func TestSinceMark(t *testing.T) {
	recs := func(seqs ...uint64) []KernelRecord {
		var out []KernelRecord
		for _, s := range seqs {
			out = append(out, KernelRecord{Seq: s, HasSeq: true})
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		all        []KernelRecord
		from       uint64
		n          int
		next, lost uint64
		restarted  bool
	}{
		{"since boot", recs(0, 1, 2), 0, 3, 3, 0, false},
		{"since the mark", recs(0, 1, 2, 3, 4), 3, 2, 5, 0, false},
		{"nothing new", recs(0, 1, 2), 3, 0, 3, 0, false},
		{"overwritten since the mark", recs(10, 11, 12), 5, 3, 13, 5, false},
		{"ring restarted below the mark", recs(0, 1), 50, 2, 2, 0, true},
	} {
		span := seqSpan{from: tc.from}
		for _, r := range tc.all {
			span.add(r.Seq)
		}
		rd := span.since(tc.all)
		if len(rd.Records) != tc.n || rd.Next != tc.next || rd.Lost != tc.lost || rd.Restarted != tc.restarted {
			t.Errorf("%s: %d records, next %d, lost %d, restarted %v", tc.name, len(rd.Records), rd.Next, rd.Lost, rd.Restarted)
		}
	}
}

// devlinkAnswer encodes a DEVLINK_CMD_HEALTH_REPORTER_GET answer as
// devlink_nl_health_reporter_fill (net/devlink/health.c) writes it: the
// handle, then the reporter nested in DEVLINK_ATTR_HEALTH_REPORTER.
func devlinkAnswer(t testing.TB, port *uint32, name string, st uint8, errs, rec uint64) []byte {
	ae := netlink.NewAttributeEncoder()
	ae.String(devlinkAttrBusName, "pci")
	ae.String(devlinkAttrDevName, "0000:3b:00.0")
	if port != nil {
		ae.Uint32(devlinkAttrPortIndex, *port)
	}
	ae.Nested(devlinkAttrHealthReporter, func(ne *netlink.AttributeEncoder) error {
		ne.String(devlinkAttrReporterName, name)
		ne.Uint8(devlinkAttrReporterState, st)
		ne.Uint64(devlinkAttrReporterErrCount, errs)
		ne.Uint64(devlinkAttrReporterRecCount, rec)
		ne.Uint64(devlinkAttrReporterRecCount+1, 0) // DUMP_TS: not read
		return nil
	})
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseDevlinkHealthReporter(t *testing.T) {
	port := uint32(65535)
	got, err := ParseDevlinkHealthReporter(devlinkAnswer(t, nil, "fw_fatal", 1, 3, 2))
	want := DevlinkReporter{Bus: "pci", Device: "0000:3b:00.0", Name: "fw_fatal", State: "error", ErrorCount: 3, RecoverCount: 2}
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("fw_fatal: %v %s", err, cmp.Diff(want, got))
	}
	got, err = ParseDevlinkHealthReporter(devlinkAnswer(t, &port, "tx", 0, 0, 0))
	if err != nil || got.State != "healthy" || got.Handle() != "pci/0000:3b:00.0/65535" {
		t.Errorf("port reporter: %v %+v", err, got)
	}
	if _, err := ParseDevlinkHealthReporter([]byte{5, 0, 1}); err == nil {
		t.Error("a truncated answer was accepted")
	}
}

// FuzzParseDevlinkHealthReporter: any bytes decode to a reporter or an
// error, never a panic; an accepted one has its handle and name.
func FuzzParseDevlinkHealthReporter(f *testing.F) {
	f.Add(devlinkAnswer(f, nil, "fw", 0, 0, 0))
	f.Add(devlinkAnswer(f, nil, "rx", 1, 1<<40, 7))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseDevlinkHealthReporter(data)
		if err == nil && (r.Bus == "" || r.Device == "" || r.Name == "") {
			t.Fatalf("accepted without a handle or name: %+v", r)
		}
	})
}

// A snapshot keeps the link-health lines of the PCIe and network cores
// beside the RDMA stack's: AER reported by the root port above a NIC, the
// netdev watchdog, the PCI core's bandwidth line; other lines stay out.
func TestKeepRDMAKeepsLinkHealthLines(t *testing.T) {
	recs := []KernelRecord{
		{Time: time.Second, Text: "pcieport 0000:3a:00.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0"},
		{Time: 2 * time.Second, Text: "NETDEV WATCHDOG: eno1 (igb): transmit queue 2 timed out"},
		{Time: 3 * time.Second, Text: "usb 1-1: new high-speed USB device number 2 using xhci_hcd"},
		{Time: 4 * time.Second, Text: "mlx5_core 0000:3b:00.0: 63.008 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x8 link at 0000:3a:00.0 (capable of 126.016 Gb/s with 8.0 GT/s PCIe x16 link)"},
	}
	got := KeepRDMA(recs, 5*time.Second)
	if len(got) != 3 || strings.Contains(strings.Join(got, "\n"), "usb") {
		t.Errorf("kept:\n%s", strings.Join(got, "\n"))
	}
}

// The live devlink answer: reporters, or none with the reason (a kernel
// without the devlink family); never an error on a Linux host that has
// generic netlink.
func TestLiveDevlinkHealth(t *testing.T) {
	dh, err := readDevlinkHealth()
	if err != nil {
		t.Skipf("generic netlink not usable here: %v", err)
	}
	if dh.Reporters == nil {
		t.Fatalf("%+v", dh)
	}
	for _, r := range dh.Reporters {
		if r.Bus == "" || r.Name == "" || (r.State != "healthy" && r.State != "error") {
			t.Errorf("reporter %+v", r)
		}
	}
	t.Logf("%d reporter(s); absent: %q", len(dh.Reporters), dh.Absent)
}
