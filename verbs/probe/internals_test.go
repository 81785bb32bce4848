package probe

import (
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink/nl"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

func TestStats(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Microsecond)
	}
	s := stats(ds)
	if s.N != 100 || s.MinNS != 1000 || s.MaxNS != 100000 || s.MedNS != 50000 || s.P99NS != 99000 || s.MeanNS != 50500 {
		t.Fatalf("stats %+v", s)
	}
	if one := stats([]time.Duration{7}); one.MinNS != 7 || one.P99NS != 7 || one.MedNS != 7 {
		t.Fatalf("one sample %+v", one)
	}
	if (stats(nil) != Stats{}) {
		t.Fatal("empty stats")
	}
}

func TestCounterDeltas(t *testing.T) {
	before := map[string]uint64{"port_xmit_data": 100, "port_rcv_data": 50, "sent_pkts": 3}
	after := map[string]uint64{"port_xmit_data": 356, "port_rcv_data": 50, "sent_pkts": 5, "rcvd_pkts": 9}
	got := counterDeltas(before, after)
	if len(got) != 3 {
		t.Fatalf("deltas %+v", got)
	}
	if got[0].Name != "port_xmit_data" || got[0].Delta != 1024 || got[0].Unit != "bytes" || got[0].Before != 400 {
		t.Fatalf("port_xmit_data delta %+v: the PMA data counters count 4-byte words", got[0])
	}
	if got[1].Delta != 0 || got[2].Name != "sent_pkts" || got[2].Delta != 2 || got[2].Unit != "packets" {
		t.Fatalf("deltas %+v", got)
	}
	// A counter that went backwards (reset, wrap) is no traffic.
	if d := counterDeltas(map[string]uint64{"sent_pkts": 9}, map[string]uint64{"sent_pkts": 2}); d[0].Delta != 0 {
		t.Fatalf("backwards counter %+v", d)
	}
}

func TestLeakedCounts(t *testing.T) {
	b := map[string]uint64{"pd": 1, "qp": 1, "cq": 1, "mr": 0, "ctx": 0}
	if s := leakedCounts(b, b); s != "" {
		t.Fatalf("equal counts: %q", s)
	}
	a := map[string]uint64{"pd": 2, "qp": 1, "cq": 1, "mr": 1, "ctx": 0}
	if s := leakedCounts(b, a); s != "pd 1→2, mr 0→1" {
		t.Fatalf("leak text %q", s)
	}
}

func TestCauseTexts(t *testing.T) {
	info := &causeInfo{Device: "mlx5_0", UverbsDev: "uverbs2", MemlockBytes: 64 << 10, MRBytes: 8192, CQEAsked: 16,
		QPAsked: Caps{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1},
		Caps:    &DeviceCaps{MaxQPWR: 8, MaxSGE: 1, MaxCQE: 4}}
	for _, c := range []struct {
		verb  string
		errno syscall.Errno
		want  string
	}{
		{"ibv_reg_mr", syscall.ENOMEM, "RLIMIT_MEMLOCK (max locked memory is 64 KiB"},
		{"ibv_open_device", syscall.EACCES, "/dev/infiniband/uverbs2"},
		{"ibv_create_qp", syscall.EINVAL, "max_qp_wr 8"},
		{"ibv_create_cq", syscall.EINVAL, "max_cqe 4"},
		{"ibv_dealloc_pd", syscall.EBUSY, "destroy QPs first"},
		{"ibv_get_device_list", syscall.ENOSYS, "no InfiniBand support"},
		{"ibv_alloc_pd", syscall.EIO, "fatal state"},
	} {
		if got := cause(c.verb, c.errno, info); !strings.Contains(got, c.want) {
			t.Errorf("cause(%s, %s) = %q, want it to say %q", c.verb, verbs.ErrnoName(c.errno), got, c.want)
		}
	}
	if got := cause("ibv_reg_mr", syscall.ENOMEM, &causeInfo{MemlockBytes: -1}); !strings.Contains(got, "unlimited") {
		t.Errorf("unlimited memlock: %q", got)
	}
	if got := cause("ibv_alloc_pd", syscall.EAGAIN, info); got != "" {
		t.Errorf("an errno without a specific meaning got a cause: %q", got)
	}
}

func TestRCAttrMasks(t *testing.T) {
	peer := &verbs.QP{Num: 0x11}
	roce := &address{roce: true, gidIndex: 3, mtu: verbs.MTU1024}
	attr, mask := rcAttr(1, peer, roce, verbs.QPSRTR)
	if mask != verbs.MaskRCToRTR || attr.DestQPNum != 0x11 || attr.AHAttr.IsGlobal != 1 ||
		attr.AHAttr.GRH.SGIDIndex != 3 || attr.AHAttr.PortNum != 1 || attr.PathMTU != verbs.MTU1024 {
		t.Fatalf("RoCE RTR attr %+v mask %#x", attr, mask)
	}
	ib := &address{dlid: 7, mtu: verbs.MTU4096}
	attr, _ = rcAttr(2, peer, ib, verbs.QPSRTR)
	if attr.AHAttr.IsGlobal != 0 || attr.AHAttr.DLID != 7 || attr.AHAttr.PortNum != 2 {
		t.Fatalf("IB RTR attr %+v", attr)
	}
	attr, mask = rcAttr(1, peer, roce, verbs.QPSRTS)
	if mask != verbs.MaskRCToRTS || attr.RetryCnt >= 7 || attr.RNRRetry >= 7 {
		t.Fatalf("RTS attr %+v: retry counts must stay below 7 (7 retries forever)", attr)
	}
	if _, mask = rcAttr(1, peer, roce, verbs.QPSErr); mask != verbs.MaskState {
		t.Fatalf("ERR mask %#x", mask)
	}
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{}.withDefaults()
	if o.Timeout != 5*time.Second || o.Size != 1024 || o.Iterations != 1000 || len(o.Probes) != len(AllProbes) || o.Probes[len(o.Probes)-1] != GPUMemory || o.SysfsRoot != "/sys" {
		t.Fatalf("defaults %+v", o)
	}
}

// dumpMessage builds one message of a per-object dump: the device, then a
// table whose entries carry a PID (user objects) or a name (kernel ones).
func dumpMessage(table, entry uint16, owners ...any) []byte {
	var b []byte
	b = append(b, nl.NewRtAttr(nldevAttrDevIndex, nl.Uint32Attr(3)).Serialize()...)
	b = append(b, nl.NewRtAttr(nl.RDMA_NLDEV_ATTR_DEV_NAME, nl.ZeroTerminated("rxe0")).Serialize()...)
	t := nl.NewRtAttr(int(table), nil)
	for _, o := range owners {
		e := t.AddRtAttr(int(entry), nil)
		e.AddRtAttr(nldevAttrResQP+2, nl.Uint32Attr(0x11)) // some other field first
		switch v := o.(type) {
		case int:
			e.AddRtAttr(nldevAttrResPID, nl.Uint32Attr(uint32(v)))
		case string:
			e.AddRtAttr(29, nl.ZeroTerminated(v)) // RDMA_NLDEV_ATTR_RES_KERN_NAME
		}
	}
	return append(b, t.Serialize()...)
}

// Only this process's objects count: other processes' and the kernel's
// (IPoIB, NFS over RDMA) are left out.
func TestCountOwned(t *testing.T) {
	mine := map[uint32]bool{100: true, 101: true}
	msgs := [][]byte{
		dumpMessage(nldevAttrResQP, nldevAttrResQPEntry, 100, 555, "ib_ipoib", 101),
		dumpMessage(nldevAttrResQP, nldevAttrResQPEntry, 777, 100),
	}
	n, err := countOwned(msgs, nldevAttrResQP, nldevAttrResQPEntry, mine)
	if err != nil || n != 3 {
		t.Fatalf("countOwned = %d, %v; want 3 of this process's QPs", n, err)
	}
	// Another kind's table in the same message is not counted as QPs.
	n, _ = countOwned([][]byte{dumpMessage(nldevAttrResCQ, nldevAttrResCQEntry, 100)}, nldevAttrResQP, nldevAttrResQPEntry, mine)
	if n != 0 {
		t.Fatalf("a CQ counted as a QP: %d", n)
	}
	if n, err := countOwned(nil, nldevAttrResQP, nldevAttrResQPEntry, mine); n != 0 || err != nil {
		t.Fatalf("empty dump: %d, %v", n, err)
	}
	if !ourTasks()[uint32(os.Getpid())] {
		t.Fatal("ourTasks lacks the process ID")
	}
}

// A device-wide count that does not come back may be another user's: it
// is recorded for a warning, not failed as a leak; this process's own
// counts that do not come back are a leak.
func TestCompareCounts(t *testing.T) {
	before := map[string]uint64{"pd": 4, "qp": 9, "cq": 6, "mr": 2, "ctx": 3}
	during := map[string]uint64{"pd": 5, "qp": 11, "cq": 8, "mr": 4, "ctx": 4}
	after := map[string]uint64{"pd": 4, "qp": 10, "cq": 6, "mr": 2, "ctx": 3} // someone else made a QP

	res := &DestroyOrderResult{Probe: newProbe(DestroyOrder), CountsMethod: CountsDevice,
		CountsBefore: before, CountsDuring: during, CountsAfter: after}
	(&runner{}).compareCounts(res)
	if st := res.Failed(); st != nil || !strings.Contains(res.CountsDrift, "qp 9→10") {
		t.Fatalf("device summary: failed %+v, drift %q", st, res.CountsDrift)
	}

	res = &DestroyOrderResult{Probe: newProbe(DestroyOrder), CountsMethod: CountsProcess,
		CountsBefore: before, CountsDuring: during, CountsAfter: after}
	(&runner{}).compareCounts(res)
	if st := res.Failed(); st == nil || !strings.Contains(st.Error, "qp 9→10") || res.CountsDrift != "" ||
		!strings.Contains(st.Detail, "by PID") {
		t.Fatalf("own objects: failed %+v, drift %q", st, res.CountsDrift)
	}

	res = &DestroyOrderResult{Probe: newProbe(DestroyOrder), CountsMethod: CountsProcess,
		CountsBefore: before, CountsDuring: during, CountsAfter: before}
	(&runner{}).compareCounts(res)
	if !res.OK() || res.Steps[0].Name != "resource counts back to baseline" {
		t.Fatalf("counts back: %+v", res.Steps)
	}

	res = &DestroyOrderResult{Probe: newProbe(DestroyOrder), CountsMethod: CountsProcess,
		CountsBefore: before, CountsDuring: before, CountsAfter: before}
	(&runner{}).compareCounts(res)
	if res.CountsError == "" || len(res.Steps) != 0 {
		t.Fatalf("invisible objects: %+v", res)
	}
}

// The pacer yields only inside a data-path loop, and there at most every
// pollYieldEvery: a second call at once keeps the first one's time.
func TestPollPacerYieldsAtMostEveryPeriodInsideADataPathLoop(t *testing.T) {
	runtime.LockOSThread() // as ChildMain's goroutine is
	defer runtime.UnlockOSThread()
	var pp pollPacer
	pp.maybeYield()
	if !pp.last.IsZero() {
		t.Fatal("yielded outside a data-path loop")
	}
	end := pp.beginDataPath()
	ended := false
	defer func() {
		if !ended { // a failure below must not leave the threads' classes
			end()
		}
	}()
	start := pp.last
	pp.maybeYield()
	if pp.last != start {
		t.Fatalf("yielded %v after the loop began, within %v", pp.last.Sub(start), pollYieldEvery)
	}
	pp.last = start.Add(-pollYieldEvery)
	pp.maybeYield()
	if !pp.last.After(start) {
		t.Fatal("did not yield once the period had passed")
	}
	before := runtime.GOMAXPROCS(0)
	pp.onePAfterWarmup()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("GOMAXPROCS %d after the warm-up, want 1", n)
	}
	end()
	ended = true
	if pp.on {
		t.Fatal("still pacing after the loop ended")
	}
	if n := runtime.GOMAXPROCS(0); n != before {
		t.Errorf("GOMAXPROCS %d after the loop, want %d back", n, before)
	}
	pp.onePAfterWarmup()
	if n := runtime.GOMAXPROCS(0); n != before {
		t.Errorf("GOMAXPROCS changed to %d outside a loop", n)
	}
}
