package mad

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Client asks typed questions over a Transport with a short timeout per
// try and a bounded number of tries, never longer than the context allows.
type Client struct {
	T       Transport
	Timeout time.Duration // one try; DefaultTimeout when 0
	Tries   int           // DefaultTries when 0
	tid     atomic.Uint32
}

// The default try: 200 ms covers a healthy SM many hops away (IBTA's
// default response time value is 8 ms per hop); two tries ride out one lost
// datagram without making a dead SM cost more than half a second.
const (
	DefaultTimeout = 200 * time.Millisecond
	DefaultTries   = 2
)

// SATimeout is the least a try to the SA waits: the SA is the SM's
// software, which answers between its sweeps, not an agent in a port's
// firmware; infiniband-diags wait a second for every MAD.
const SATimeout = time.Second

// NewClient is a Client over t with the default timeout and tries.
func NewClient(t Transport) *Client {
	c := &Client{T: t}
	c.tid.Store(uint32(time.Now().UnixNano()))
	return c
}

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

func (c *Client) tries() int {
	if c.Tries > 0 {
		return c.Tries
	}
	return DefaultTries
}

// do sends what build encodes until a checked answer, an error other than
// a timeout or a busy status, the last try, or the context's end. Each try
// has its own transaction ID, so a late answer to an earlier try is not
// taken for this one's.
func (c *Client) do(ctx context.Context, p Port, dest Dest, what string, build func(tid uint64) ([]byte, error)) ([]byte, error) {
	return c.doWithin(ctx, p, dest, what, c.timeout(), build)
}

// doSA is do for a query to the SA, each try at least SATimeout.
func (c *Client) doSA(ctx context.Context, p Port, dest Dest, what string, build func(tid uint64) ([]byte, error)) ([]byte, error) {
	return c.doWithin(ctx, p, dest, what, max(c.timeout(), SATimeout), build)
}

// doWithin is do with each try's wait given.
func (c *Client) doWithin(ctx context.Context, p Port, dest Dest, what string, each time.Duration, build func(tid uint64) ([]byte, error)) ([]byte, error) {
	var last error
	for try := 0; try < c.tries(); try++ {
		wait := each
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if err := ctx.Err(); err != nil || wait <= 0 {
			return nil, fmt.Errorf("%s from %s: %w", what, p.Name(), context.DeadlineExceeded)
		}
		req, err := build(uint64(c.tid.Add(1)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		resp, err := c.T.Exchange(p, dest, req, wait)
		if errors.Is(err, ErrTimeout) {
			last = err
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s from %s: %w", what, p.Name(), err)
		}
		if _, err := CheckResponse(req, resp); err != nil {
			var se *StatusError
			if errors.As(err, &se) && se.Busy() {
				last = err
				continue
			}
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return resp, nil
	}
	var se *StatusError
	if errors.As(last, &se) {
		return nil, fmt.Errorf("%s: %w", what, last)
	}
	return nil, &TimeoutError{Request: what + " from " + p.Name(), Tries: c.tries(), Each: each.String()}
}

// smp sends a subnet management Get of attr along r and returns its data.
func (c *Client) smp(ctx context.Context, p Port, r Route, attr uint16, mod uint32) ([]byte, error) {
	dest := Dest{LID: r.LID}
	if r.Directed() {
		dest.LID = PermissiveLID
	}
	what := fmt.Sprintf("%s Get to %s", AttrName(ClassSubnLID, attr), r)
	resp, err := c.do(ctx, p, dest, what, func(tid uint64) ([]byte, error) { return NewSMP(r, attr, mod, tid) })
	if err != nil {
		return nil, err
	}
	return SMPData(resp), nil
}

// SMInfo asks the SM at r for its SMInfo (14.2.5.13).
func (c *Client) SMInfo(ctx context.Context, p Port, r Route) (SMInfo, error) {
	d, err := c.smp(ctx, p, r, AttrSMInfo, 0)
	if err != nil {
		return SMInfo{}, err
	}
	return DecodeSMInfo(d)
}

// NodeInfo asks the node at r for its NodeInfo.
func (c *Client) NodeInfo(ctx context.Context, p Port, r Route) (NodeInfo, error) {
	d, err := c.smp(ctx, p, r, AttrNodeInfo, 0)
	if err != nil {
		return NodeInfo{}, err
	}
	return DecodeNodeInfo(d)
}

// NodeDesc asks the node at r for its NodeDescription.
func (c *Client) NodeDesc(ctx context.Context, p Port, r Route) (string, error) {
	d, err := c.smp(ctx, p, r, AttrNodeDesc, 0)
	if err != nil {
		return "", err
	}
	return DecodeNodeDesc(d)
}

// PortInfo asks the node at r for the PortInfo of its port num (0 for the
// port the SMP arrives on at a channel adapter, a switch's management port).
func (c *Client) PortInfo(ctx context.Context, p Port, r Route, num uint8) (PortInfo, error) {
	d, err := c.smp(ctx, p, r, AttrPortInfo, uint32(num))
	if err != nil {
		return PortInfo{}, err
	}
	return DecodePortInfo(d)
}

// PKeyTable reads the first n entries of the P_Key table of the node at
// r, 32 per block (14.2.5.7: the modifier is the block number; a switch
// also takes the port number in bits 16-23).
func (c *Client) PKeyTable(ctx context.Context, p Port, r Route, port uint8, n int) ([]uint16, error) {
	var out []uint16
	for block := 0; block*PKeysPerBlock < n; block++ {
		d, err := c.smp(ctx, p, r, AttrPKeyTable, uint32(port)<<16|uint32(block))
		if err != nil {
			return out, err
		}
		keys, err := DecodePKeyBlock(d)
		if err != nil {
			return out, err
		}
		out = append(out, keys...)
	}
	return out[:min(n, len(out))], nil
}

// PortCounters reads the PMA PortCounters of port on the node at lid.
func (c *Client) PortCounters(ctx context.Context, p Port, lid uint16, port uint8) (PortCounters, error) {
	dest := Dest{LID: lid, QP: 1, QKey: QKey}
	what := fmt.Sprintf("PortCounters Get to LID %d port %d", lid, port)
	resp, err := c.do(ctx, p, dest, what, func(tid uint64) ([]byte, error) { return NewPortCountersQuery(port, tid), nil })
	if err != nil {
		return PortCounters{}, err
	}
	return DecodePortCounters(PMAData(resp))
}

// PathRecord asks the SA (at the port's SM LID) for a path from the
// port's GID to dgid.
func (c *Client) PathRecord(ctx context.Context, p Port, dgid GID) (PathRecord, error) {
	dest := Dest{LID: p.SMLID, QP: 1, QKey: QKey, SL: p.SMSL}
	what := fmt.Sprintf("PathRecord Get to the SA at LID %d for %s", p.SMLID, dgid)
	resp, err := c.doSA(ctx, p, dest, what, func(tid uint64) ([]byte, error) {
		return NewPathRecordQuery(p.GID(), dgid, tid), nil
	})
	if err != nil {
		return PathRecord{}, err
	}
	return DecodePathRecord(SAData(resp))
}

// SMInfoRecords asks the SA (at the port's SM LID) for every SM it knows.
func (c *Client) SMInfoRecords(ctx context.Context, p Port) ([]SMInfoRecord, error) {
	dest := Dest{LID: p.SMLID, QP: 1, QKey: QKey, SL: p.SMSL}
	what := fmt.Sprintf("SMInfoRecord GetTable to the SA at LID %d", p.SMLID)
	resp, err := c.doSA(ctx, p, dest, what, func(tid uint64) ([]byte, error) { return NewSMInfoRecordQuery(tid), nil })
	if err != nil {
		return nil, err
	}
	return DecodeSMInfoRecords(resp)
}

// NodeRecords asks the SA (at the port's SM LID) for the NodeRecords whose
// node description is desc (every record when desc is ""): one a port of
// each matching node.
func (c *Client) NodeRecords(ctx context.Context, p Port, desc string) ([]NodeRecord, error) {
	dest := Dest{LID: p.SMLID, QP: 1, QKey: QKey, SL: p.SMSL}
	what := fmt.Sprintf("NodeRecord GetTable to the SA at LID %d for %q", p.SMLID, desc)
	if desc == "" {
		what = fmt.Sprintf("NodeRecord GetTable to the SA at LID %d", p.SMLID)
	}
	resp, err := c.doSA(ctx, p, dest, what, func(tid uint64) ([]byte, error) { return NewNodeRecordQuery(desc, tid) })
	if err != nil {
		return nil, err
	}
	recs, err := DecodeNodeRecords(resp)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return recs, nil
}
