package verbs_test

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/verbs"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe/fakeverbs"
)

// The data-path calls make no heap allocation: peer.latency busy-polls a
// CQ hundreds of thousands of times a second, and garbage made per poll
// brings the collector (and the threads it wakes) into the round trips
// it times.
func TestDataPathCallsDoNotAllocate(t *testing.T) {
	t.Setenv("FAKE_IBV", "loop")
	lib, err := verbs.Open(fakeverbs.Library(t))
	if err != nil {
		t.Fatal(err)
	}
	dl, err := lib.GetDeviceList()
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Free()
	dev := dl.Find("fake0")
	if dev == nil {
		t.Fatal("the fake library lists no fake0")
	}
	ctx, err := dev.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	buf, err := verbs.NewBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	mr, err := pd.RegMR(buf, 0, 4096, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Dereg()
	cq, err := ctx.CreateCQ(64, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Destroy()
	qp, err := pd.CreateQP(verbs.QPInit{SendCQ: cq, RecvCQ: cq, Type: verbs.QPTRC,
		Cap: verbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Destroy()

	var wc [1]verbs.WC
	if n := testing.AllocsPerRun(200, func() {
		if _, err := cq.Poll(wc[:]); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ibv_poll_cq: %v heap allocations per call, want 0", n)
	}
	recv := verbs.RecvWR{ID: 1, SGEs: []verbs.SGE{mr.SGE(0, 64)}}
	if n := testing.AllocsPerRun(8, func() {
		if err := qp.PostRecv(recv); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ibv_post_recv: %v heap allocations per call, want 0", n)
	}
}
