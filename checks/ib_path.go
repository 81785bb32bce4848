package checks

import (
	"context"
	"errors"
	"fmt"

	"github.com/rdmadoctor/rdmadoctor/mad"
	"github.com/rdmadoctor/rdmadoctor/report"
)

func init() {
	register(Check{
		ID: "ib.path", Code: 71, Level: 1,
		Title:      "the SA resolves a path record from each InfiniBand port to itself and to the expected peers",
		Privileges: []Need{needUmad},
		Explain: Explanation{
			Judges: "Every InfiniBand port libibumad finds with an SM LID: an SA PathRecord Get (SubnAdm class, attribute 0x0035, " +
				"SGID and DGID given, one reversible path) to the SM LID, from the port's GID 0 to itself and to each port GUID of the " +
				"expectations class's ib_peers (in the port's subnet), 1 s a try (the SA is the SM's software), two tries. An ib_peers item that names " +
				"a node description is resolved first through the SA's NodeRecords (attribute 0x0011, a GetTable: for a literal description " +
				"with the NodeDescription component, as opensm matches it; for a glob the whole table, matched here): every port of every " +
				"node matched is asked, and a description no node has fails. No answer or an SA error status " +
				"(ERR_NO_RECORDS: no path) fails. A path whose MTU is below the port's active MTU (its PortInfo, by an empty directed " +
				"route) or whose rate is below the port's warns: a hop on the way limits it.",
			Why: "Every rdma_cm connection, MPI and NCCL over IB, and IPoIB's neighbours resolve a path record through the SA before the first " +
				"byte: a port that is ACTIVE with a LID but whose SA does not answer connects to nothing. A path MTU or rate below the " +
				"port's caps every transfer on it.",
		},
		Run: runIBPath,
	})
}

const pathSAFix = "The SA runs with the master SM (LID {sm_lid}): check it as ib.sm does; `{ask}` " +
	"asks the same question with infiniband-diags."

// ib.path's findings.
var (
	pathFrame = declareMADFrame("ib.path")
	pathOK    = declare(Finding{ID: "ib.path/resolved", Status: report.Pass,
		When:    "the SA returns a path whose MTU and rate are the port's",
		Message: "{port}: path to {dest} resolves — DLID {dlid}, MTU {mtu}, rate {rate}, SL {sl}"})
	pathNoSM = declare(Finding{ID: "ib.path/no-sm", Status: report.Skip,
		When:    "the port has no SM LID: there is no SA to ask (ib.sm judges it)",
		Message: "{port}: SM LID 0: no SA to ask"})
	pathSilent = declare(Finding{ID: "ib.path/sa-silent", Status: report.Fail,
		When:    "the SA at the SM LID did not answer the PathRecord query (or the NodeRecord query that resolves an ib_peers node description)",
		Message: "{port}: the SA at LID {sm_lid} does not answer a {query} query for {dest} — {cause}", Fix: pathSAFix})
	pathNone = declare(Finding{ID: "ib.path/no-path", Status: report.Fail,
		When:    "the SA answers with an error status (no record: no path between the two ports)",
		Message: "{port}: no path to {dest}: {cause}",
		Fix: "The SA knows no path to {dest}: the peer is down, not in this subnet, or in no partition shared with this port " +
			"(see ib.pkey). " + pathSAFix})
	pathMTU = declare(Finding{ID: "ib.path/mtu-below-port", Status: report.Warn,
		When:    "the path's MTU is below the port's active MTU",
		Message: "{port}: the path to {dest} has MTU {mtu}, below the port's {port_mtu}",
		Fix: "A hop on the path (a switch port, the peer, or the partition's MTU in the SM's partitions.conf) limits the MTU: " +
			"check the SM's partition MTU (opensm: `mtu=5` for 4096) and the ports along `ibtracert {lid} {dlid}`."})
	pathRate = declare(Finding{ID: "ib.path/rate-below-port", Status: report.Warn,
		When:    "the path's rate is below the port's",
		Message: "{port}: the path to {dest} has rate {rate}, below the port's {port_rate} Gb/s",
		Fix:     "A slower link on the path or the partition's rate in the SM's partitions.conf caps it: check `ibtracert {lid} {dlid}` and the SM's partition rate."})
	pathBadAnswer = declare(Finding{ID: "ib.path/bad-answer", Status: report.Error,
		When:    "the PathRecord answer is malformed, or the port's own PortInfo could not be read",
		Message: "{port}: {cause}"})
)

func runIBPath(ctx context.Context, env *Env) Result {
	madMu.Lock()
	defer madMu.Unlock()
	t, ports, done := pathFrame.ibPorts(env)
	if done != nil {
		return *done
	}
	defer t.Close()
	c := madClient(t)
	var fs []report.Finding
	for _, p := range ports {
		fs = append(fs, judgePaths(ctx, env, c, p)...)
	}
	return combineFindings(fs, false)
}

// judgePaths asks the port's SA for a path to itself and to each peer.
func judgePaths(ctx context.Context, env *Env, c *mad.Client, p mad.Port) []report.Finding {
	unit := p.Name()
	slots := Slots{"port": unit, "sm_lid": fmt.Sprint(p.SMLID), "lid": fmt.Sprint(p.LID), "sgid": p.GID().String()}
	if p.SMLID == 0 {
		return []report.Finding{pathNoSM.At(unit, slots)}
	}
	own, err := c.PortInfo(ctx, p, mad.Route{Path: []uint8{}}, uint8(p.Num))
	if f, ok := pathFrame.callFailed(unit, err); ok {
		return []report.Finding{f}
	}
	if err != nil {
		return []report.Finding{pathBadAnswer.At(unit, slots.with("cause", "the port's own PortInfo: "+err.Error()))}
	}
	dests, fs := pathDests(ctx, env, c, p, slots)
	for _, d := range dests {
		fs = append(fs, judgePath(ctx, c, p, own, d.gid, slots.with("dest", d.words, "dgid", d.gid.String()))...)
	}
	return fs
}

// judgePath judges one path: resolved, with the port's MTU and rate.
func judgePath(ctx context.Context, c *mad.Client, p mad.Port, own mad.PortInfo, d mad.GID, slots Slots) []report.Finding {
	unit := p.Name()
	pr, err := c.PathRecord(ctx, p, d)
	if err != nil {
		return []report.Finding{pathFailed(unit, slots, err)}
	}
	slots = slots.with("dlid", fmt.Sprint(pr.DLID), "mtu", fmt.Sprint(mad.MTUBytes(pr.MTU)), "rate", mad.RateName(pr.Rate),
		"sl", fmt.Sprint(pr.SL), "port_mtu", fmt.Sprint(mad.MTUBytes(own.NeighborMTU)), "port_rate", fmt.Sprint(p.Rate))
	var fs []report.Finding
	if own.NeighborMTU != 0 && pr.MTU < own.NeighborMTU {
		fs = append(fs, pathMTU.At(unit, slots))
	}
	if g := mad.RateGbps(pr.Rate); g > 0 && p.Rate > 0 && g < float64(p.Rate) {
		fs = append(fs, pathRate.At(unit, slots))
	}
	if len(fs) == 0 {
		fs = append(fs, pathOK.At(unit, slots))
	}
	return fs
}

// pathFailed is the finding of a query that failed: no answer, an SA
// error status, libibumad's own failure, or a malformed answer.
func pathFailed(unit string, slots Slots, err error) report.Finding {
	if f, ok := pathFrame.callFailed(unit, err); ok {
		return f
	}
	slots = slots.with("cause", err.Error(), "query", "PathRecord", "ask", "saquery --sgid-to-dgid "+slots["sgid"]+"-"+slots["dgid"])
	var se *mad.StatusError
	switch {
	case errors.Is(err, mad.ErrTimeout) || errors.Is(err, context.DeadlineExceeded):
		return pathSilent.At(unit, slots)
	case errors.As(err, &se):
		return pathNone.At(unit, slots)
	}
	return pathBadAnswer.At(unit, slots)
}
