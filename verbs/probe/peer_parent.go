package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
)

// PeerServe runs the server's side of one session in a child process (exe
// re-executed with ChildArg), handing it conn after the handshake. The
// child builds its own verbs objects and answers the client until Bye,
// the end of the connection or preq's session deadline, past which it is
// killed; the kernel frees whatever it left. The error says why the
// session ended badly; stderr is what the library printed. onSetup,
// when not nil, is called with the client's Setup (its endpoint and its
// report of its host) once the child has read it.
func PeerServe(ctx context.Context, exe string, conn *net.TCPConn, preq PeerRequest, onSetup func(wire.Setup)) (stderr string, err error) {
	f, err := conn.File()
	if err != nil {
		return "", fmt.Errorf("hand the session's socket to the child: %w", err)
	}
	defer f.Close()
	out := runChild(ctx, exe, modePeerServe, request{Peer: &preq}, time.Duration(preq.SessionNS)+startupMargin,
		func(ev event) {
			var setup wire.Setup
			if ev.Kind == "result" && ev.Probe == peerClientEvent && onSetup != nil && json.Unmarshal(ev.Result, &setup) == nil {
				onSetup(setup)
			}
		}, f)
	if out.failure != nil {
		return out.stderr, errors.New(out.failure.Error)
	}
	return out.stderr, nil
}

// PeerTest runs the client's side of one session in a child process,
// handing it conn after the handshake, and returns the results of the
// peer checks it reached.
func PeerTest(ctx context.Context, exe string, conn *net.TCPConn, preq PeerRequest) *PeerResult {
	t0 := time.Now()
	res := &PeerResult{}
	f, err := conn.File()
	if err != nil {
		res.Failure = &ChildFailure{Error: "hand the session's socket to the child: " + err.Error()}
		return res
	}
	defer f.Close()
	var decodeErrs []string
	out := runChild(ctx, exe, modePeerTest, request{Peer: &preq}, time.Duration(preq.SessionNS)+startupMargin,
		func(ev event) {
			if ev.Kind != "result" {
				return
			}
			if err := res.decode(ev.Probe, ev.Result); err != nil {
				decodeErrs = append(decodeErrs, err.Error())
			}
		}, f)
	res.Failure, res.Stderr = out.failure, out.stderr
	if res.Failure == nil && len(decodeErrs) > 0 {
		res.Failure = &ChildFailure{Error: "the verbs child sent unreadable results: " + strings.Join(decodeErrs, "; ")}
	}
	res.Millis = millis(time.Since(t0))
	return res
}

func (res *PeerResult) decode(name string, raw json.RawMessage) error {
	var dst any
	switch name {
	case PeerConnect:
		res.Connect = &PeerConnectResult{}
		dst = res.Connect
	case PeerSendRecv:
		res.SendRecv = &PeerSendRecvResult{}
		dst = res.SendRecv
	case PeerWrite:
		res.Write = &PeerRDMAResult{}
		dst = res.Write
	case PeerRead:
		res.Read = &PeerRDMAResult{}
		dst = res.Read
	case PeerLatency:
		res.Latency = &PeerLatencyResult{}
		dst = res.Latency
	case PeerBandwidth:
		res.Bandwidth = &PeerBandwidthResult{}
		dst = res.Bandwidth
	case PeerCounters:
		res.Counters = &PeerCountersResult{}
		dst = res.Counters
	case RDMACM:
		res.RDMACM = &CMPeerResult{}
		dst = res.RDMACM
	default:
		return fmt.Errorf("result of unknown peer check %q", name)
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("decode %s: %w", name, err)
	}
	return nil
}
