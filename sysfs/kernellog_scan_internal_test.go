package sysfs

import (
	"testing"
)

// The one-pass literal test over a raw record never drops what
// IsKeptKernelMessage keeps.
func FuzzMayBeKept(f *testing.F) {
	for _, r := range kmsgRecords {
		f.Add(r.in)
	}
	for _, s := range []string{"6,1,2,-;e1000e: eth0 NIC Link is Down\n", "3,9,9,-;pcieport 0000:00:01.0: AER: Corrected error\n",
		"4,5,6,-;NETDEV WATCHDOG: eth0 (virtio_net): transmit queue 0 timed out\n", "6,7,8,-;systemd[1]: Started\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rec string) {
		h, text, dict, ok := splitKmsg([]byte(rec))
		if !ok {
			return
		}
		r := h.record(text, dict)
		if IsKeptKernelMessage(r.Text) && !mayBeKept(text) {
			t.Errorf("%q: kept, but the literal test drops it", rec)
		}
	})
}

// BenchmarkKmsgScan is the work per record of a reading since boot, the
// kernel's read left out: the header split, the sequence number counted,
// the literal test, and the parse of the records that may be kept.
func BenchmarkKmsgScan(b *testing.B) {
	var ring [][]byte
	for i := 0; i < 2000; i++ {
		r := kmsgRecords[i%len(kmsgRecords)].in
		if i%10 != 0 {
			r = "6,4711,5140900,-;systemd[1]: Started session-1234.scope - Session 1234 of User root.\n SUBSYSTEM=net\n"
		}
		ring = append(ring, []byte(r))
	}
	b.ReportAllocs()
	for b.Loop() {
		span := seqSpan{}
		var kept []KernelRecord
		for _, rec := range ring {
			h, text, dict, ok := splitKmsg(rec)
			if !ok || !h.hasSeq {
				continue
			}
			span.add(h.seq)
			if mayBeKept(text) {
				if r := h.record(text, dict); IsKeptKernelMessage(r.Text) {
					kept = append(kept, r)
				}
			}
		}
		_ = span.since(kept)
	}
}
