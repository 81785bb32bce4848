package probe

import (
	"strings"
	"syscall"
	"testing"
	"time"

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
	if o.Timeout != 5*time.Second || o.Size != 1024 || o.Iterations != 1000 || len(o.Probes) != 5 || o.SysfsRoot != "/sys" {
		t.Fatalf("defaults %+v", o)
	}
}
