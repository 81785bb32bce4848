package mad

import (
	"context"
	"os"
	"testing"
)

func TestZZProbe(t *testing.T) {
	if os.Getenv("MADPROBE") == "" {
		t.Skip()
	}
	l, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Init(); err != nil {
		t.Fatal(err)
	}
	ps, err := l.Ports()
	t.Logf("%+v %v off %d size %d", ps, err, 0, l.umadSize)
	c := NewClient(NewUMAD(l))
	ctx := context.Background()
	p := ps[0]
	si, err := c.SMInfo(ctx, p, Route{LID: p.SMLID})
	t.Logf("sminfo %+v %v", si, err)
	nd, err := c.NodeDesc(ctx, p, Route{LID: p.SMLID})
	t.Logf("nd %q %v", nd, err)
	ni, err := c.NodeInfo(ctx, p, Route{Path: []uint8{1}})
	t.Logf("ni %+v %v", ni, err)
	pi, err := c.PortInfo(ctx, p, Route{Path: []uint8{}}, 1)
	t.Logf("pi %+v %v", pi, err)
	pk, err := c.PKeyTable(ctx, p, Route{LID: p.LID}, 0, 64)
	t.Logf("pk %v %v", pk, err)
	pr, err := c.PathRecord(ctx, p, p.GID())
	t.Logf("pr %+v %v", pr, err)
	pc, err := c.PortCounters(ctx, p, p.LID, uint8(p.Num))
	t.Logf("pc %+v %v", pc, err)
	si, err = c.SMInfo(ctx, p, Route{LID: 77})
	t.Logf("sminfo bad %+v %v", si, err)
}
