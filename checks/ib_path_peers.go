package checks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/mad"
	"github.com/rdmadoctor/rdmadoctor/report"
)

// ib.path's peers named by node description (ib_peers = ["storage-01
// HCA-1"]): the SA's NodeRecords (IBTA vol 1 15.2.5.2) give each matching
// node's ports, and a path is asked to each port GUID.

var (
	pathUnknownPeer = declare(Finding{ID: "ib.path/unknown-peer", Status: report.Fail,
		When:    "an ib_peers node description matches no node the SA knows (its NodeRecords)",
		Message: "{port}: no node named {peer} in the subnet (the SA's NodeRecords; {cite})",
		Fix: "The SA at LID {sm_lid} knows no node whose description is {peer}: the node is down or on another subnet, its description " +
			"differs (`saquery NR` lists every node with its NodeDescription), or the expectations line is wrong ({cite})."})
	pathPeerLookup = declare(Finding{ID: "ib.path/peer-lookup-failed", Status: report.Error,
		When:    "the SA's NodeRecord answer for an ib_peers node description is an error status or malformed",
		Message: "{port}: the node named {peer} could not be looked up: {cause}",
		Fix:     "`saquery NR` asks the SA the same question with infiniband-diags; a peer named by its port GUID needs no NodeRecord."})
)

// pathDest is one destination ib.path asks a path to.
type pathDest struct {
	gid   mad.GID
	words string // "itself (GID)", "peer GID (GUID)", `peer "Hca4" port 1 (GID, GUID)`
}

// pathDests lists the port itself and the class's peers: GUIDs as given,
// node descriptions through the SA's NodeRecords. The findings are those
// of peers that could not be resolved.
func pathDests(ctx context.Context, env *Env, c *mad.Client, p mad.Port, slots Slots) ([]pathDest, []report.Finding) {
	dests := []pathDest{{gid: p.GID(), words: "itself (" + p.GID().String() + ")"}}
	var fs []report.Finding
	for _, peer := range env.Expect.ExpectedIBPeers() {
		if !peer.V.ByName() {
			g := mad.GID{Prefix: p.GIDPrefix, GUID: uint64(peer.V.GUID)}
			dests = append(dests, pathDest{gid: g, words: fmt.Sprintf("peer %s (0x%016x)", g, g.GUID)})
			continue
		}
		ds, f := resolvePeer(ctx, c, p, peer, slots)
		dests = append(dests, ds...)
		fs = append(fs, f...)
	}
	return dests, fs
}

// resolvePeer finds the ports of the nodes whose description the peer
// names: a literal is asked with the NodeDescription component (opensm
// filters on it), a glob gets the whole table; either is matched here too
// (an SA that ignores the component returns every record).
func resolvePeer(ctx context.Context, c *mad.Client, p mad.Port, peer *expect.Value[expect.IBPeer], slots Slots) ([]pathDest, []report.Finding) {
	unit, name := p.Name(), peer.V.Node[0]
	slots = slots.with("peer", fmt.Sprintf("%q", name), "cite", peer.Cite())
	ask := name
	if isGlob(name) {
		ask = ""
	}
	recs, err := c.NodeRecords(ctx, p, ask)
	var se *mad.StatusError
	switch {
	case errors.As(err, &se) && se.Status>>8 == 3: // ERR_NO_RECORDS: how some SAs answer an empty table
	case err != nil:
		return nil, []report.Finding{peerLookupFailed(unit, slots, err)}
	}
	var dests []pathDest
	seen := map[uint64]bool{}
	for _, r := range recs {
		if !peer.V.Node.Match(r.Desc) || r.Info.PortGUID == 0 || seen[r.Info.PortGUID] {
			continue
		}
		seen[r.Info.PortGUID] = true
		g := mad.GID{Prefix: p.GIDPrefix, GUID: r.Info.PortGUID}
		dests = append(dests, pathDest{gid: g, words: fmt.Sprintf("peer %q port %d (%s, GUID 0x%016x)", r.Desc, r.Info.LocalPortNum, g, g.GUID)})
	}
	if len(dests) == 0 {
		return nil, []report.Finding{pathUnknownPeer.At(unit, slots)}
	}
	return dests, nil
}

// peerLookupFailed is the finding of a NodeRecord query that failed: no
// answer is the SA's silence, as for a path; anything else an error.
func peerLookupFailed(unit string, slots Slots, err error) report.Finding {
	if f, ok := pathFrame.callFailed(unit, err); ok {
		return f
	}
	slots = slots.with("cause", err.Error(), "dest", "the node named "+slots["peer"], "query", "NodeRecord", "ask", "saquery NR")
	if errors.Is(err, mad.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return pathSilent.At(unit, slots)
	}
	return pathPeerLookup.At(unit, slots)
}

// isGlob reports whether a description is a glob (the expectations
// parser checked its syntax), not a literal.
func isGlob(s string) bool { return strings.ContainsAny(s, `*?[\`) }
