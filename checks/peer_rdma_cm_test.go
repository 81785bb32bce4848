package checks

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/verbs/peer"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer/wire"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func cmFailed(stage, step, errText, cause string) *probe.CMPeerResult {
	return &probe.CMPeerResult{CMResult: probe.CMResult{FailedStage: stage,
		Probe: probe.Probe{Name: probe.RDMACM, Steps: []probe.Step{{Name: "dlopen libibverbs", OK: true},
			{Name: step, Error: errText, Cause: cause}}}}}
}

// peer.rdma_cm needs only peer.control: a pair whose hand-made QP failed
// still gets its rdma_cm verdict.
func TestPeerRDMACMGatedOnControlOnly(t *testing.T) {
	p := healthyPair("a:1")
	p.Verbs.Connect.Steps = []probe.Step{{Name: "ibv_modify_qp RTR", Error: "EINVAL"}}
	rs := PeerReport([]peer.Pair{p})
	got := statuses(rs)
	if !strings.Contains(got, "peer.connect=fail") || !strings.Contains(got, "peer.send_recv=skip") || !strings.HasSuffix(got, "peer.rdma_cm=pass") {
		t.Fatalf("statuses %s", got)
	}
	p = healthyPair("a:1")
	p.Control = peer.Control{Fault: peer.FaultRefused, Error: "connect: connection refused"}
	if got := statuses(PeerReport([]peer.Pair{p})); !strings.HasSuffix(got, "peer.rdma_cm=skip") {
		t.Fatalf("control refused: %s", got)
	}
}

// Each failed stage is a fail naming the step, with that stage's remedy;
// a server that could not listen is an error (nothing was judged here).
func TestPeerRDMACMStages(t *testing.T) {
	cases := []struct {
		res     *probe.CMPeerResult
		finding string
		line    string
		remedy  string
	}{
		{cmFailed("address", "RDMA_CM_EVENT_ADDR_RESOLVED", "got RDMA_CM_EVENT_ADDR_ERROR (status -110 ETIMEDOUT)", "address resolution failed"),
			"peer.rdma_cm/address-failed", "ADDR_ERROR", "ip neigh show"},
		{cmFailed("route", "RDMA_CM_EVENT_ROUTE_RESOLVED", "got RDMA_CM_EVENT_ROUTE_ERROR", "route resolution failed"),
			"peer.rdma_cm/route-failed", "ROUTE_ERROR", "GID"},
		{cmFailed("connect", "RDMA_CM_EVENT_ESTABLISHED", "got RDMA_CM_EVENT_UNREACHABLE", "UDP port 4791 is blocked"),
			"peer.rdma_cm/connect-failed", "4791", "4791"},
		{cmFailed("library", "dlopen librdmacm", "dlopen librdmacm.so.1: not found", "install librdmacm1"),
			"peer.rdma_cm/library-failed", "librdmacm", "librdmacm1"},
		{func() *probe.CMPeerResult {
			r := cmFailed("listen", "the server's rdma_cm listener", "on the server: rdma_create_id: ENODEV", "")
			r.ListenError = "rdma_create_id: ENODEV"
			return r
		}(), "peer.rdma_cm/listen-failed", "ENODEV", "on the peer"},
	}
	for _, c := range cases {
		p := healthyPair("a:1")
		p.Verbs.RDMACM = c.res
		v := judgePeerRDMACM(&p)
		if diff := cmp.Diff(onlyFinding(c.finding, "a:1"), refsOf(v)); diff != "" {
			t.Errorf("stage %s (-want +got):\n%s", c.res.FailedStage, diff)
		}
		// The line names the step's event; the remedy is the stage's.
		if !strings.Contains(v.line, c.line) || !strings.Contains(v.remedy, c.remedy) {
			t.Errorf("stage %s: %q remedy %q; want %q, %q", c.res.FailedStage, v.line, v.remedy, c.line, c.remedy)
		}
	}
}

// An echo lost with netdev MTUs that differ is named as the MTU mismatch,
// with the path MTU rdma_cm took from the active side.
func TestPeerRDMACMNamesMTUMismatch(t *testing.T) {
	p := healthyPair("a:1")
	p.Verbs.Connect.Remote.NetdevMTU = 1500
	r := cmFailed("transfer", "RECV the 4096-byte echo", "no completion of wr 2 within 3s", "the echo never arrived")
	r.PathMTU = 4096
	r.Remote = &wire.CMResult{Step: "SEND the 4096-byte echo", Error: "no completion of wr 1 within 3s"}
	p.Verbs.RDMACM = r
	v := judgePeerRDMACM(&p)
	if diff := cmp.Diff(onlyFinding("peer.rdma_cm/echo-lost-mtu-mismatch", "a:1"), refsOf(v)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, want := range []string{"MTU mismatch", "9000 here, 1500 on the peer", "path MTU 4096", "on the server: SEND the 4096-byte echo"} {
		if !strings.Contains(v.line, want) {
			t.Errorf("line %q does not name %q", v.line, want)
		}
	}
}

// An echo lost where both netdevs carry one MTU (a lossy link): the remedy
// leads with the loss, not with an MTU change that would fix nothing.
func TestPeerRDMACMEchoLostWithOneMTU(t *testing.T) {
	for _, tc := range []struct {
		r       *probe.CMPeerResult
		finding string
	}{
		{cmFailed("transfer", "RECV the 4096-byte echo", "no completion of wr 2 within 3s", "the echo never arrived"), "peer.rdma_cm/echo-lost"},
		{&probe.CMPeerResult{CMResult: probe.CMResult{Probe: probe.Probe{Name: probe.RDMACM}},
			Remote: &wire.CMResult{Step: "SEND the 4096-byte echo", Error: "no completion of wr 1 within 3s"}}, "peer.rdma_cm/server-failed"},
	} {
		p := healthyPair("a:1")
		p.Verbs.RDMACM = tc.r
		v := judgePeerRDMACM(&p)
		if diff := cmp.Diff(onlyFinding(tc.finding, "a:1"), refsOf(v)); diff != "" || !strings.HasPrefix(v.remedy, "The connection was made and the echo was lost") {
			t.Errorf("remedy %q (-want +got):\n%s", v.remedy, diff)
		}
	}
}
