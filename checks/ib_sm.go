package checks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rdmadoctor/rdmadoctor/mad"
	"github.com/rdmadoctor/rdmadoctor/report"
)

func init() {
	register(Check{
		ID: "ib.sm", Code: 70, Level: 1,
		Title:      "the subnet manager at each InfiniBand port's SM LID answers SMInfo as MASTER and is active",
		Privileges: []Need{needUmad},
		Explain: Explanation{
			Judges: "Every InfiniBand port libibumad finds (umad_get_cas_names, umad_get_ca; RoCE ports are not judged). A port whose link is up " +
				"with SM LID 0 fails: no SM configured it. Otherwise an SMInfo Get (a LID-routed SMP, attribute 0x0020) goes to the SM LID, " +
				"200 ms a try, two tries, within the check's deadline: no answer fails, a state other than MASTER fails, and a second SMInfo " +
				"100 ms later must show ActCount moved (a master that answers but does not count is hung: warn). The SM is named by GUID " +
				"(from SMInfo) and node description (a NodeDescription Get to the same LID); every SM the SA knows (an SMInfoRecord GetTable: " +
				"standbys, a second master) is listed in the details, and each SM it lists is asked SMInfo: more than one MASTER " +
				"(a split subnet, or two SMs fighting) fails, naming each by GUID, LID and node description. Nothing is changed on the fabric.",
			Why: "A port keeps its LID and SM LID after the SM that assigned them dies, so sysfs looks healthy while path record queries " +
				"(every rdma_cm and MPI connection), multicast joins and fabric changes fail. The SM runs somewhere on the fabric — a managed " +
				"switch, UFM, dedicated SM hosts — so the fix names it instead of starting one here.",
		},
		Run: runIBSM,
	})
}

const smSilentFix = "The SM that configured this port (LID {sm_lid}) no longer answers: it died, lost its link, or its node is down. " +
	"The port keeps its LID, so sysfs still looks healthy while path queries and fabric changes fail. Check the SM where the fabric " +
	"runs it (its service and log, e.g. /var/log/opensm.log, or the switch's or UFM's SM status); a standby SM should take over " +
	"— `sminfo` shows which SM answers at the port's SM LID, `saquery -s` lists the SMs the SA knows."

// ib.sm's findings.
var (
	smFrame  = declareMADFrame("ib.sm")
	smMaster = declare(Finding{ID: "ib.sm/master", Status: report.Pass,
		When:    "the SM at the port's SM LID answers as MASTER and its ActCount moves",
		Message: "{port}: the SM at LID {sm_lid} is MASTER — {sm_name}, GUID {sm_guid}, priority {priority}, ActCount {act1} → {act2}"})
	smActFrozen = declare(Finding{ID: "ib.sm/act-count-frozen", Status: report.Warn,
		When:    "the master SM answers but its ActCount did not move between two queries",
		Message: "{port}: the SM at LID {sm_lid} ({sm_name}, GUID {sm_guid}) is MASTER but its ActCount stayed at {act1} over {interval}",
		Fix: "The master SM answers SMInfo but counts no activity: its process may be stalled. On {sm_name} (GUID {sm_guid}) check the SM's " +
			"service and log; if it is stuck, restart it there or fail over to a standby SM."})
	smNone = declare(Finding{ID: "ib.sm/no-sm", Status: report.Fail,
		When:    "the port's link is up but its SM LID is 0: no subnet manager configured it",
		Message: "{port}: link up but SM LID 0 — no subnet manager has configured this port (LID {lid}, state {state})",
		Fix: "No subnet manager reaches this port: the fabric's SM (on a managed switch, UFM or the fabric's SM hosts) is not running, " +
			"or the port is cut off from it. Find where this fabric runs its SM and check it there; `sminfo` from another node of the " +
			"fabric says whether any SM answers. Start an SM on this host only if the fabric's design puts it here."})
	smLinkDown = declare(Finding{ID: "ib.sm/link-down", Status: report.Skip,
		When:    "the port's physical link is not up: no SM can reach it (port.state judges the link)",
		Message: "{port}: physical link not up ({phys}): no SM can reach it"})
	smSilent = declare(Finding{ID: "ib.sm/sm-silent", Status: report.Fail,
		When:    "SMInfo to the port's SM LID got no answer within the timeout and retries",
		Message: "{port}: the SM at LID {sm_lid} does not answer SMInfo — {cause}", Fix: smSilentFix})
	smNotMaster = declare(Finding{ID: "ib.sm/not-master", Status: report.Fail,
		When:    "the SM at the port's SM LID answers in a state other than MASTER (STANDBY, DISCOVERING, NOTACTIVE)",
		Message: "{port}: the SM at LID {sm_lid} ({sm_name}, GUID {sm_guid}) is {sm_state}, not MASTER",
		Fix: "The port's SM LID points at an SM that is not the master: the mastership moved and this port was not reconfigured, or no SM " +
			"won the election. On {sm_name} (GUID {sm_guid}) check the SM's state and log; `sminfo` from this host shows the SM at the " +
			"port's SM LID and `saquery -s` every SM the SA knows."})
	smTwoMasters = declare(Finding{ID: "ib.sm/two-masters", Status: report.Fail,
		When: "more than one SM is MASTER: the SA's SMInfoRecords, or SMInfo asked of each SM they list, show a second master — " +
			"a split subnet or two SMs fighting over it (LIDs reassigned, paths flapping)",
		Message: "{port}: {count} SMs are MASTER — {masters}: a split subnet or SMs fighting over it",
		Fix: "Keep one master: a subnet has exactly one master SM and the others STANDBY. The SMs named are both MASTER, so each sweeps " +
			"and reassigns LIDs and paths, and connections flap. Decide which SM the fabric's design names (the managed switch, UFM or the " +
			"SM hosts); on the host or switch that should not be master, stop its extra SM or lower its priority (opensm's sm_priority " +
			"in opensm.conf or `-p`; the switch's or UFM's SM priority setting) so it falls back to STANDBY, and look for a cut between " +
			"the two halves (a switch or inter-switch link down) if they cannot see each other. `saquery -s` should then list one MASTER."})
	smBadAnswer = declare(Finding{ID: "ib.sm/bad-answer", Status: report.Error,
		When:    "SMInfo got an answer that is not one: an error status, a truncated or malformed MAD",
		Message: "{port}: SMInfo from LID {sm_lid}: {cause}"})
)

// smActInterval is the pause between the two SMInfo queries: a master
// counts every SMP it sends and answers, so its ActCount moves within it.
const smActInterval = 100 * time.Millisecond

func runIBSM(ctx context.Context, env *Env) Result {
	madMu.Lock()
	defer madMu.Unlock()
	t, ports, done := smFrame.ibPorts(env)
	if done != nil {
		return *done
	}
	defer t.Close()
	c := madClient(t)
	var vs []verdict
	for _, p := range ports {
		vs = append(vs, judgeSM(ctx, c, p))
	}
	return combine(vs)
}

// judgeSM judges the SM of one port.
func judgeSM(ctx context.Context, c *mad.Client, p mad.Port) verdict {
	unit := p.Name()
	slots := Slots{"port": unit, "sm_lid": fmt.Sprint(p.SMLID), "lid": fmt.Sprint(p.LID),
		"state": mad.PortStateName(uint8(p.State)), "phys": mad.PhysStateName(uint8(p.PhysState))}
	if p.PhysState != physLinkUp {
		// A pulled cable keeps the SM LID the port last had: no SM can be
		// reached, and asking would only time out.
		return smLinkDown.unit(unit, slots)
	}
	if p.SMLID == 0 {
		return smNone.unit(unit, slots)
	}
	to := mad.Route{LID: p.SMLID}
	first, err := c.SMInfo(ctx, p, to)
	if err != nil {
		return smQueryFailed(unit, slots, err)
	}
	slots = slots.with("sm_guid", fmt.Sprintf("0x%016x", first.GUID), "priority", fmt.Sprint(first.Priority),
		"sm_state", mad.SMStateName(first.State), "act1", fmt.Sprint(first.ActCount), "sm_name", smName(ctx, c, p, to))
	if first.State != mad.SMMaster {
		v := smNotMaster.unit(unit, slots)
		v.details, _ = smList(ctx, c, p)
		return v
	}
	select {
	case <-ctx.Done():
	case <-time.After(smActInterval):
	}
	second, err := c.SMInfo(ctx, p, to)
	if err != nil {
		return smQueryFailed(unit, slots, err)
	}
	slots = slots.with("act2", fmt.Sprint(second.ActCount), "interval", smActInterval.String())
	v := smMaster.unit(unit, slots)
	if second.ActCount == first.ActCount {
		v = smActFrozen.unit(unit, slots)
	}
	details, recs := smList(ctx, c, p)
	if masters := smMasters(ctx, c, p, first, recs, slots["sm_name"]); len(masters) > 1 {
		v = smTwoMasters.unit(unit, slots.with("count", fmt.Sprint(len(masters)), "masters", strings.Join(masters, "; ")))
	}
	v.details = details
	v.evidence = map[string]any{"sm_lid": p.SMLID, "sm_guid": slots["sm_guid"], "sm_node": slots["sm_name"],
		"priority": first.Priority, "state": mad.SMStateName(second.State), "act_count": []uint32{first.ActCount, second.ActCount}}
	return v
}

// smQueryFailed is the verdict of an SMInfo that failed: no answer (or the
// deadline) fails the port, anything else is an error of the check.
func smQueryFailed(unit string, slots Slots, err error) verdict {
	if f, ok := smFrame.callFailed(unit, err); ok {
		return verdict{status: f.Status, line: f.Message, remedy: f.Fix, findings: []report.Finding{f}}
	}
	slots = slots.with("cause", err.Error())
	if errors.Is(err, mad.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return smSilent.unit(unit, slots)
	}
	return smBadAnswer.unit(unit, slots)
}

// smName is the SM node's description, or why it is unknown.
func smName(ctx context.Context, c *mad.Client, p mad.Port, to mad.Route) string {
	desc, err := c.NodeDesc(ctx, p, to)
	if err != nil {
		return "node description unavailable: " + err.Error()
	}
	return fmt.Sprintf("%q", desc)
}

// smList lists the SMs the SA knows (SMInfoRecord), for the details: a
// standby that would take over, or a second master, shows there.
func smList(ctx context.Context, c *mad.Client, p mad.Port) ([]string, []mad.SMInfoRecord) {
	recs, err := c.SMInfoRecords(ctx, p)
	if err != nil {
		return []string{"the SMs the SA knows: not listed: " + err.Error()}, nil
	}
	out := []string{fmt.Sprintf("the SA knows %d SM(s):", len(recs))}
	for _, r := range recs {
		out = append(out, fmt.Sprintf("  LID %d GUID 0x%016x %s priority %d ActCount %d",
			r.LID, r.SMInfo.GUID, mad.SMStateName(r.SMInfo.State), r.SMInfo.Priority, r.SMInfo.ActCount))
	}
	return out, recs
}

// smMasters names every SM that is MASTER: the port's own (master, its
// name known) and each other SM the SA lists, by its own SMInfo answer
// where it gives one (the SA's record is the SM's last poll of it), else
// by the record: "LID 9 GUID 0x… \"sm-02\"".
func smMasters(ctx context.Context, c *mad.Client, p mad.Port, own mad.SMInfo, recs []mad.SMInfoRecord, ownName string) []string {
	masters := []string{fmt.Sprintf("LID %d GUID 0x%016x %s", p.SMLID, own.GUID, ownName)}
	for _, r := range recs {
		if r.LID == p.SMLID {
			continue
		}
		to := mad.Route{LID: r.LID}
		si := r.SMInfo
		if live, err := c.SMInfo(ctx, p, to); err == nil {
			si = live
		}
		if si.State != mad.SMMaster {
			continue
		}
		masters = append(masters, fmt.Sprintf("LID %d GUID 0x%016x %s", r.LID, si.GUID, smName(ctx, c, p, to)))
	}
	return masters
}
