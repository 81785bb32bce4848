package checks

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// roceDefaultDSCP is the DSCP RoCE traffic carries when applications set
// the usual traffic class 106 (NCCL_IB_TC, UCX, perftest --tclass): AF31.
const roceDefaultDSCP = 26

const losslessFix = "Configure the NIC the way the switches are configured (both ends must agree), for example with MLNX_OFED/DOCA's mlnx_qos:\n" +
	"  mlnx_qos -i <netdev> --trust dscp --pfc 0,0,0,1,0,0,0,0   (PFC on priority 3, which DSCP 26 maps to)\n" +
	"or upstream iproute2: `dcb pfc set dev <netdev> prio-pfc 3:on` and `dcb app add dev <netdev> dscp-prio 26:3`.\n" +
	"Keep ECN (DCQCN) on for the PFC priority: `echo 1 > /sys/class/net/<netdev>/ecn/roce_np/enable/3` and the same for roce_rp (MLNX_OFED)."

func init() {
	register(Check{
		ID: "roce.lossless", Code: 21, Level: 1,
		Title: "RoCE netdevs run lossless: PFC on a priority, trust matching the marking, ECN on that priority",
		Needs: []string{"roce.config"},
		Explain: Explanation{
			Judges: "For the netdev of every hardware RoCE port: PFC from DCB netlink (RTM_GETDCB / DCB_CMD_IEEE_GET: the pfc_en bitmap of struct ieee_pfc); " +
				"the trust mode from MLNX_OFED's /sys/class/net/<if>/qos/trust, else DSCP entries in the DCB IEEE APP table (trust dscp) or none (trust pcp); " +
				"ECN per priority from /sys/class/net/<if>/ecn/roce_np|roce_rp/enable/<prio> where those files exist. It warns when RoCE runs lossy " +
				"(no PFC priority) or half-configured (PFC on a priority with ECN off there; trust pcp while DSCP is mapped; RoCE's DSCP 26 landing on a " +
				"priority without PFC); --expect-lossless makes those fail. A driver without DCB answers EOPNOTSUPP: skip.",
			Why: "RoCE's transport recovers from loss with go-back-N retransmission: on a lossy fabric a dropped packet costs a timeout and a " +
				"burst of retransmissions, and throughput collapses under congestion. Lossless RoCE needs PFC on the RoCE priority, traffic classified " +
				"onto it (trust dscp for untagged RoCE v2), and ECN so that congestion slows senders before PFC pauses the fabric.",
			Failures: []Failure{
				{report.Warn, "RoCE runs lossy: PFC is off on every priority (fail with --expect-lossless)", losslessFix},
				{report.Warn, "half-configured: PFC on a priority whose ECN is off, trust pcp while DSCP is mapped, or RoCE's DSCP on a priority without PFC (fail with --expect-lossless)", losslessFix},
				{report.Skip, "the driver has no DCB (EOPNOTSUPP): nothing to judge", "Nothing to fix on the host; a fabric that needs lossless RoCE needs a NIC whose driver supports DCB."},
				{report.Error, "the DCB state could not be read", "Run on the host (netlink), or capture a snapshot that records DCB."},
			},
		},
		Run: runRoCELossless,
	})
}

// losslessPort is one netdev to judge and the ports it carries.
type losslessPort struct {
	netdev string
	ports  []string
}

func runRoCELossless(_ context.Context, env *Env) Result {
	s := env.Survey()
	h := env.Host
	var targets []*losslessPort
	byNetdev := map[string]*losslessPort{}
	var softOnly []string
	eth := 0
	for _, d := range s.Devices {
		for _, p := range d.Ports {
			if p.LinkLayer != "Ethernet" {
				continue
			}
			eth++
			label := portLabel(d.Name, p.Num)
			if d.Software || d.PCIAddr == "" {
				softOnly = append(softOnly, label)
				continue
			}
			nd := portNetdev(s, d, p)
			if nd == "" {
				continue // roce.config reports it
			}
			if t, ok := byNetdev[nd]; ok {
				t.ports = append(t.ports, label)
				continue
			}
			t := &losslessPort{netdev: nd, ports: []string{label}}
			byNetdev[nd] = t
			targets = append(targets, t)
		}
	}
	if eth == 0 {
		return skip("no Ethernet ports (InfiniBand only): PFC/ECN do not apply")
	}
	if len(targets) == 0 {
		r := skip(fmt.Sprintf("only software RoCE (%s): lossless configuration belongs to the NIC under it", strings.Join(softOnly, ", ")))
		return r
	}
	var details, issues, unknown, noDCB []string
	var evs []map[string]any
	for _, t := range targets {
		ev := map[string]any{"netdev": t.netdev, "ports": t.ports}
		evs = append(evs, ev)
		head := fmt.Sprintf("%s (%s)", t.netdev, strings.Join(t.ports, ", "))
		dcb, err := h.DCB(t.netdev)
		if err != nil {
			unknown = append(unknown, fmt.Sprintf("%s: %v", t.netdev, err))
			details = append(details, fmt.Sprintf("%s: DCB unknown: %v", head, err))
			ev["dcb"] = "unknown"
			continue
		}
		if dcb.Err != "" {
			ev["dcb"] = dcb.Err
			if dcb.Err == sysfs.ErrNoDCB {
				noDCB = append(noDCB, t.netdev)
				details = append(details, fmt.Sprintf("%s: driver has no DCB (%s)", head, dcb.Err))
			} else {
				unknown = append(unknown, fmt.Sprintf("%s: DCB answered %s", t.netdev, dcb.Err))
				details = append(details, fmt.Sprintf("%s: DCB answered %s", head, dcb.Err))
			}
			continue
		}
		pfc := sysfs.PFCPriorities(dcb.PFCEn)
		ev["pfc_enabled"], ev["pfc_cap"] = nonNilInts(pfc), dcb.PFCCap

		// trust: OFED's file first, else the APP table
		dscpMap := map[int]int{}
		for _, a := range dcb.App {
			if a.Selector == "dscp" {
				dscpMap[a.Protocol] = a.Priority
			}
		}
		trust, trustFrom := "", ""
		if tr, err := h.Trust(t.netdev); err == nil {
			trust, trustFrom = tr, "qos/trust"
		} else if !sysfs.IsNotExist(err) {
			details = append(details, fmt.Sprintf("%s: trust unreadable: %v", head, err))
		}
		if trust == "" {
			trustFrom = "DCB APP table"
			trust = "pcp"
			if len(dscpMap) > 0 {
				trust = "dscp"
			}
		}
		ev["trust"], ev["trust_source"] = trust, trustFrom
		if len(dscpMap) > 0 {
			m := map[string]int{}
			for k, v := range dscpMap {
				m[fmt.Sprint(k)] = v
			}
			ev["dscp_to_priority"] = m
		}

		ecn := h.ECN(t.netdev)
		var problems []string
		if len(pfc) == 0 {
			problems = append(problems, "PFC off on every priority: RoCE runs lossy")
		}
		if ecn.Present {
			ecnEv := map[string]any{}
			for _, p := range pfc {
				np, npKnown := ecn.NP[p]
				rp, rpKnown := ecn.RP[p]
				ecnEv[fmt.Sprint(p)] = map[string]any{"np": boolOrUnknown(np, npKnown), "rp": boolOrUnknown(rp, rpKnown)}
				var off []string
				if npKnown && !np {
					off = append(off, "roce_np")
				}
				if rpKnown && !rp {
					off = append(off, "roce_rp")
				}
				if len(off) > 0 {
					problems = append(problems, fmt.Sprintf("PFC on priority %d but ECN off there (%s)", p, strings.Join(off, ", ")))
				}
			}
			ev["ecn"] = ecnEv
			for _, pr := range ecn.Probs {
				details = append(details, fmt.Sprintf("%s: ECN: %s", head, pr))
			}
		} else {
			ev["ecn"] = "unknown"
		}
		if trust == "pcp" && len(dscpMap) > 0 {
			problems = append(problems, "trust pcp while the APP table maps DSCP: the DSCP map is ignored and untagged RoCE lands on priority 0")
		}
		if trust == "dscp" && len(pfc) > 0 {
			prio, ok := dscpMap[roceDefaultDSCP]
			if !ok {
				prio = roceDefaultDSCP >> 3 // the NIC's default DSCP → priority map
			}
			if dcb.PFCEn&(1<<prio) == 0 {
				problems = append(problems, fmt.Sprintf("RoCE's DSCP %d maps to priority %d, which has no PFC", roceDefaultDSCP, prio))
			}
		}
		line := fmt.Sprintf("%s: PFC on %s, trust %s (%s), ECN %s", head, priorityList(pfc), trust, trustFrom, ecnSummary(ecn))
		if len(problems) > 0 {
			line += " — " + strings.Join(problems, "; ")
			issues = append(issues, fmt.Sprintf("%s: %s", t.netdev, strings.Join(problems, "; ")))
		}
		ev["issues"] = nonNil(problems)
		details = append(details, line)
	}
	for _, l := range softOnly {
		details = append(details, l+": software RoCE, not judged")
	}
	judged := len(targets) - len(noDCB) - len(unknown)
	var r Result
	switch {
	case len(issues) > 0:
		msg := fmt.Sprintf("RoCE is not lossless on %d netdev(s): %s", len(issues), strings.Join(issues, "; "))
		if env.Opts.ExpectLossless {
			r = fail(msg)
		} else {
			r = warn(msg + " (--expect-lossless makes this fail)")
		}
		r.Remedy = losslessFix
		r.Observed = issues[0]
	case len(unknown) > 0:
		r = errorf("could not read the DCB state of %s", strings.Join(unknown, "; "))
		r.Observed = "DCB unknown"
	case judged == 0:
		r = skip(fmt.Sprintf("driver has no DCB (%s) on %s: PFC/trust cannot be read", sysfs.ErrNoDCB, strings.Join(noDCB, ", ")))
		r.Observed = "no DCB"
	default:
		r = pass(fmt.Sprintf("%d netdev(s) lossless: PFC on the RoCE priority, trust and ECN match", judged))
		r.Observed = fmt.Sprintf("%d lossless", judged)
		if len(noDCB) > 0 {
			r.Summary += fmt.Sprintf("; %d without DCB (%s)", len(noDCB), strings.Join(noDCB, ", "))
		}
	}
	r.Expected = "PFC on the RoCE priority, trust dscp (or pcp with tagged traffic), ECN on the PFC priority"
	r.Details = details
	r.Evidence = map[string]any{"netdevs": evs, "expect_lossless": env.Opts.ExpectLossless}
	return r
}

func priorityList(p []int) string {
	if len(p) == 0 {
		return "no priority"
	}
	s := make([]string, len(p))
	for i, v := range p {
		s[i] = fmt.Sprint(v)
	}
	return "priority " + strings.Join(s, ",")
}

func ecnSummary(e sysfs.ECNState) string {
	if !e.Present {
		return "unknown (no ecn files: not an MLNX_OFED driver)"
	}
	var on, off []int
	for p := 0; p < 8; p++ {
		if e.NP[p] && e.RP[p] {
			on = append(on, p)
		} else if _, ok := e.NP[p]; ok {
			off = append(off, p)
		}
	}
	sort.Ints(on)
	if len(off) == 0 {
		return "on for every priority"
	}
	return fmt.Sprintf("on for %s, off for %s", intsOrNone(on), intsOrNone(off))
}

func intsOrNone(v []int) string {
	if len(v) == 0 {
		return "none"
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

func boolOrUnknown(v, known bool) any {
	if !known {
		return "unknown"
	}
	return v
}

func nonNilInts(v []int) []int {
	if v == nil {
		return []int{}
	}
	return v
}
