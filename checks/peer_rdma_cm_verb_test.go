package checks

import (
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/verbs/peer"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// The server's failed step reads "verb: cause" once, although its error
// already starts with the verb (the library's errors do).
func TestPeerRDMACMServerFailureNamesTheVerbOnce(t *testing.T) {
	p := healthyPair("n2:4854")
	p.Verbs.RDMACM.Remote = &wire.CMResult{Step: "rdma_create_event_channel", Error: "rdma_create_event_channel: ENODEV"}
	r := peerResult(t, PeerReport([]peer.Pair{p}), probe.RDMACM)
	if n := strings.Count(r.Summary, "rdma_create_event_channel"); n != 1 || !strings.Contains(r.Summary, "rdma_create_event_channel: ENODEV") {
		t.Fatalf("summary names the verb %d times, want once as \"rdma_create_event_channel: ENODEV\": %s", n, r.Summary)
	}
}
