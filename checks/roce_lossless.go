package checks

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// roceDefaultTC is the traffic class RoCE applications are usually told to
// set (NCCL_IB_TC, UCX_IB_TRAFFIC_CLASS, perftest --tclass): 106 = DSCP 26
// (AF31) << 2 | ECT(0). Nothing on the host says what applications set;
// rdma_cm's default_roce_tos is read where it exists, else this is assumed
// and the report says so.
const (
	roceDefaultTC   = 106
	roceDefaultDSCP = roceDefaultTC >> 2
)

// assumedTC is the sentence that states the assumption.
var assumedTC = fmt.Sprintf("assuming applications set TC %d (DSCP %d)", roceDefaultTC, roceDefaultDSCP)

const losslessFix = "Configure the NIC the way the switches are configured (both ends must agree): PFC on the priority RoCE's DSCP maps to, trust dscp, " +
	"and ECN on that priority. MLNX_OFED/DOCA: `mlnx_qos -i <netdev> --trust dscp --pfc 0,0,0,1,0,0,0,0` (PFC on priority 3, which DSCP 26 maps to); " +
	"upstream iproute2: `dcb pfc set dev <netdev> prio-pfc 3:on` and `dcb app add dev <netdev> dscp-prio 26:3`; ECN (MLNX_OFED): " +
	"`echo 1 > /sys/class/net/<netdev>/ecn/roce_np/enable/3` and the same for roce_rp. The report prints these with the real netdev and priority. " +
	"Applications must mark the DSCP the fabric expects: `echo 106 > /sys/kernel/config/rdma_cm/<dev>/ports/<port>/default_roce_tos` (rdma_cm), NCCL_IB_TC=106, UCX_IB_TRAFFIC_CLASS=106."

const dcbByHand = "Look by hand: `dcb pfc show dev <netdev>` and `dcb app show dev <netdev>` (iproute2), or `mlnx_qos -i <netdev>` (MLNX_OFED); " +
	"run on the host (netlink), or capture a snapshot that records DCB."

func init() {
	register(Check{
		ID: "roce.lossless", Code: 21, Level: 1,
		Title: "RoCE netdevs run lossless: PFC on a priority, trust matching the marking, ECN on that priority",
		Needs: []string{"roce.config"},
		Explain: Explanation{
			Judges: "For the netdev of every ACTIVE hardware RoCE port (the others are listed as not judged): PFC from DCB netlink (RTM_GETDCB / " +
				"DCB_CMD_IEEE_GET: the pfc_en bitmap of struct ieee_pfc); the trust mode from MLNX_OFED's /sys/class/net/<if>/qos/trust, else DSCP " +
				"entries in the DCB IEEE APP table (trust dscp) or none (trust pcp); ECN per priority from /sys/class/net/<if>/ecn/roce_np|roce_rp/enable/<prio> " +
				"where those files exist. The DSCP RoCE traffic carries is read from rdma_cm's /sys/kernel/config/rdma_cm/<dev>/ports/<n>/default_roce_tos " +
				"where that file exists (rdmadoctor never creates configfs entries); otherwise the report says it assumes TC 106 (DSCP 26). It warns when " +
				"RoCE runs lossy (no PFC priority) or half-configured (PFC on a priority with ECN off there; trust pcp while DSCP is mapped; untagged RoCE " +
				"with trust pcp going to priority 0 without PFC; RoCE's DSCP landing on a priority without PFC); --expect-lossless makes those fail. " +
				"A driver without DCB answers EOPNOTSUPP: skip.",
			Why: "RoCE's transport recovers from loss with go-back-N retransmission: on a lossy fabric a dropped packet costs a timeout and a " +
				"burst of retransmissions, and throughput collapses under congestion. Lossless RoCE needs PFC on the RoCE priority, traffic classified " +
				"onto it (trust dscp for untagged RoCE v2: under trust pcp an untagged frame has no PCP and lands on priority 0), and ECN so that " +
				"congestion slows senders before PFC pauses the fabric.",
			Failures: []Failure{
				{report.Warn, "RoCE runs lossy: PFC is off on every priority (fail with --expect-lossless)", losslessFix},
				{report.Warn, "half-configured: PFC on a priority whose ECN is off, trust pcp while DSCP is mapped, untagged RoCE with trust pcp goes to priority 0, " +
					"or RoCE's DSCP on a priority without PFC (fail with --expect-lossless)", losslessFix},
				{report.Skip, "the driver has no DCB (EOPNOTSUPP): nothing to judge", "Nothing to fix on the host; a fabric that needs lossless RoCE needs a NIC whose driver supports DCB."},
				{report.Error, "the DCB state could not be read", dcbByHand},
			},
		},
		Run: runRoCELossless,
	})
}

// losslessPort is one netdev to judge and the ports it carries.
type losslessPort struct {
	netdev string
	ports  []portRef
}

type portRef struct {
	dev   string
	port  int
	label string
}

// trafficClass is one DSCP RoCE traffic on a netdev carries, and why the
// check believes so.
type trafficClass struct {
	dscp    int
	tos     int
	assumed bool   // no default_roce_tos to read
	source  string // "mlx5_0 port 1 default_roce_tos 0" or the assumption
	port    portRef
}

func (t trafficClass) String() string {
	if t.assumed {
		return fmt.Sprintf("RoCE's DSCP %d", t.dscp)
	}
	return fmt.Sprintf("rdma_cm's default_roce_tos %d (DSCP %d) on %s", t.tos, t.dscp, t.port.label)
}

// pfcBitmapArg prints a PFC bitmap as mlnx_qos --pfc takes it: "0,0,0,1,0,0,0,0".
func pfcBitmapArg(bitmap uint8) string {
	v := make([]string, 8)
	for p := range v {
		v[p] = "0"
		if bitmap&(1<<p) != 0 {
			v[p] = "1"
		}
	}
	return strings.Join(v, ",")
}

// ecnFix is the MLNX_OFED command that turns ECN on for one priority.
func ecnFix(netdev string, prio int, points ...string) string {
	var cmds []string
	for _, pt := range points {
		cmds = append(cmds, fmt.Sprintf("`echo 1 > /sys/class/net/%s/ecn/%s/enable/%d`", netdev, pt, prio))
	}
	return strings.Join(cmds, " and ")
}

// tosFix is the remedy line that makes applications mark RoCE traffic
// with TC 106, for the ports given.
func tosFix(ports []portRef) string {
	var cmds []string
	for _, p := range ports {
		cmds = append(cmds, fmt.Sprintf("`mkdir -p %s && echo %d > %s`", path.Dir(path.Dir(path.Dir(sysfs.RoCETOSPath(p.dev, p.port)))),
			roceDefaultTC, sysfs.RoCETOSPath(p.dev, p.port)))
	}
	return fmt.Sprintf("Make applications mark RoCE traffic with TC %d (DSCP %d), the class this configuration is judged for: rdma_cm users with %s "+
		"(rdma_cm loaded, configfs mounted; not persistent: set it from a boot unit), NCCL with NCCL_IB_TC=%d, UCX with UCX_IB_TRAFFIC_CLASS=%d, perftest with --tclass=%d.",
		roceDefaultTC, roceDefaultDSCP, strings.Join(cmds, ", "), roceDefaultTC, roceDefaultTC, roceDefaultTC)
}

func runRoCELossless(_ context.Context, env *Env) Result {
	s := env.Survey()
	h := env.Host
	var targets []*losslessPort
	byNetdev := map[string]*losslessPort{}
	var softOnly, notJudged []string
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
			if !portActive(p) {
				notJudged = append(notJudged, fmt.Sprintf("%s: not judged: %s", label, stateText(p)))
				continue
			}
			nd := portNetdev(s, d, p)
			if nd == "" {
				continue // roce.config reports it
			}
			ref := portRef{dev: d.Name, port: p.Num, label: label}
			if t, ok := byNetdev[nd]; ok {
				t.ports = append(t.ports, ref)
				continue
			}
			t := &losslessPort{netdev: nd, ports: []portRef{ref}}
			byNetdev[nd] = t
			targets = append(targets, t)
		}
	}
	if eth == 0 {
		return skip("no Ethernet ports (InfiniBand only): PFC/ECN do not apply")
	}
	if len(targets) == 0 {
		switch {
		case len(notJudged) > 0:
			r := skip(fmt.Sprintf("no ACTIVE hardware RoCE port to judge (%s); port.state reports why", strings.Join(notJudged, "; ")))
			r.Details = append(notJudged, softOnly...)
			return r
		case len(softOnly) > 0:
			return skip(fmt.Sprintf("only software RoCE (%s): lossless configuration belongs to the NIC under it", strings.Join(softOnly, ", ")))
		}
		return skip("no netdev carries a hardware RoCE port (roce.config reports it)")
	}
	var details, issues, unknown, noDCB, noECN []string
	var remedy []string
	addRemedy := func(r string) {
		for _, x := range remedy {
			if x == r {
				return
			}
		}
		remedy = append(remedy, r)
	}
	var assumedPorts []portRef
	judgedTOS := false
	var evs []map[string]any
	for _, t := range targets {
		labels := make([]string, len(t.ports))
		for i, p := range t.ports {
			labels[i] = p.label
		}
		nd := t.netdev
		ev := map[string]any{"netdev": nd, "ports": labels}
		evs = append(evs, ev)
		head := fmt.Sprintf("%s (%s)", nd, strings.Join(labels, ", "))
		dcb, err := h.DCB(nd)
		if err != nil {
			unknown = append(unknown, fmt.Sprintf("%s: %v", nd, err))
			details = append(details, fmt.Sprintf("%s: DCB unknown: %v", head, err))
			ev["dcb"] = "unknown"
			continue
		}
		if dcb.Err != "" {
			ev["dcb"] = dcb.Err
			if dcb.Err == sysfs.ErrNoDCB {
				noDCB = append(noDCB, nd)
				details = append(details, fmt.Sprintf("%s: driver has no DCB (%s)", head, dcb.Err))
			} else {
				unknown = append(unknown, fmt.Sprintf("%s: DCB answered %s", nd, dcb.Err))
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
		if tr, err := h.Trust(nd); err == nil {
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
		// prioOf is the priority a DSCP lands on under trust dscp: the APP
		// table's entry, else the NIC's default map (DSCP >> 3).
		prioOf := func(dscp int) int {
			if p, ok := dscpMap[dscp]; ok {
				return p
			}
			return dscp >> 3
		}

		// the DSCPs RoCE traffic carries: rdma_cm's default where readable
		var classes []trafficClass
		seen := map[int]bool{}
		for _, p := range t.ports {
			tos, err := h.DefaultRoCETOS(p.dev, p.port)
			tc := trafficClass{port: p}
			switch {
			case err == nil:
				tc.tos, tc.dscp, tc.source = int(tos), int(tos)>>2, fmt.Sprintf("%s default_roce_tos %d", p.label, tos)
				judgedTOS = true
			case sysfs.IsNotExist(err):
				tc.tos, tc.dscp, tc.assumed, tc.source = roceDefaultTC, roceDefaultDSCP, true, assumedTC
				assumedPorts = append(assumedPorts, p)
			default:
				details = append(details, fmt.Sprintf("%s: default_roce_tos unreadable (%v): %s", head, err, assumedTC))
				tc.tos, tc.dscp, tc.assumed, tc.source = roceDefaultTC, roceDefaultDSCP, true, assumedTC
				assumedPorts = append(assumedPorts, p)
			}
			key := tc.dscp
			if tc.assumed {
				key = -1 - tc.dscp // an assumption and a file saying the same stay apart
			}
			if !seen[key] {
				seen[key] = true
				classes = append(classes, tc)
			}
		}
		var classEv []map[string]any
		for _, c := range classes {
			classEv = append(classEv, map[string]any{"dscp": c.dscp, "tos": c.tos, "source": c.source, "assumed": c.assumed})
		}
		ev["traffic_classes"] = classEv

		vlan, verr := h.IsVLAN(nd)
		if verr != nil {
			details = append(details, fmt.Sprintf("%s: VLAN or not unknown: %v", head, verr))
		}
		ev["vlan"] = vlan

		ecn := h.ECN(nd)
		var problems []string
		// target is the priority RoCE should be lossless on: where the
		// first traffic class lands under trust dscp.
		target := prioOf(classes[0].dscp)
		if len(pfc) == 0 {
			problems = append(problems, "PFC off on every priority: RoCE runs lossy")
			fix := fmt.Sprintf("%s: turn PFC on for priority %d, the one DSCP %d maps to, as the switches are configured: `mlnx_qos -i %s --trust dscp --pfc %s` (MLNX_OFED/DOCA), "+
				"or upstream iproute2 `dcb pfc set dev %s prio-pfc %d:on` and `dcb app add dev %s dscp-prio %d:%d`",
				nd, target, classes[0].dscp, nd, pfcBitmapArg(1<<target), nd, target, nd, classes[0].dscp, target)
			if ecn.Present && !(ecn.NP[target] && ecn.RP[target]) {
				fix += "; and turn ECN on for it: " + ecnFix(nd, target, "roce_np", "roce_rp")
			}
			addRemedy(fix + ".")
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
					addRemedy(fmt.Sprintf("%s: turn ECN (DCQCN) on for priority %d: %s.", nd, p, ecnFix(nd, p, off...)))
				}
			}
			ev["ecn"] = ecnEv
			for _, pr := range ecn.Probs {
				details = append(details, fmt.Sprintf("%s: ECN: %s", head, pr))
			}
		} else {
			ev["ecn"] = "unknown"
			noECN = append(noECN, nd)
		}
		switch {
		case trust == "pcp" && len(dscpMap) > 0:
			problems = append(problems, "trust pcp while the APP table maps DSCP: the DSCP map is ignored and untagged RoCE lands on priority 0")
			addRemedy(fmt.Sprintf("%s: trust the DSCP marking: `mlnx_qos -i %s --trust dscp`.", nd, nd))
		case trust == "pcp" && !vlan && len(pfc) > 0 && dcb.PFCEn&1 == 0:
			problems = append(problems, fmt.Sprintf("untagged RoCE with trust pcp goes to priority 0, which has no PFC (PFC is on %s)", priorityList(pfc)))
			addRemedy(fmt.Sprintf("%s: classify RoCE by DSCP onto priority %d: `mlnx_qos -i %s --trust dscp --dscp2prio set,%d,%d` (MLNX_OFED), or upstream "+
				"`dcb app add dev %s dscp-prio %d:%d` (a DSCP entry switches mlx5 to trust dscp); or carry RoCE on a VLAN whose egress priority is %d.",
				nd, pfc[0], nd, classes[0].dscp, pfc[0], nd, classes[0].dscp, pfc[0], pfc[0]))
		case trust == "dscp" && len(pfc) > 0:
			for _, c := range classes {
				prio := prioOf(c.dscp)
				if dcb.PFCEn&(1<<prio) != 0 {
					continue
				}
				problems = append(problems, fmt.Sprintf("%s maps to priority %d, which has no PFC", c, prio))
				if !c.assumed {
					addRemedy(fmt.Sprintf("%s: rdma_cm connections that set no ToS go out with DSCP %d: `echo %d > %s`, or map DSCP %d to priority %d: `dcb app replace dev %s dscp-prio %d:%d`.",
						c.port.label, c.dscp, roceDefaultTC, sysfs.RoCETOSPath(c.port.dev, c.port.port), c.dscp, pfc[0], nd, c.dscp, pfc[0]))
					continue
				}
				addRemedy(fmt.Sprintf("%s: map DSCP %d to the PFC priority %d: `dcb app replace dev %s dscp-prio %d:%d` (MLNX_OFED `mlnx_qos -i %s --dscp2prio set,%d,%d`), "+
					"or turn PFC on for priority %d: `dcb pfc set dev %s prio-pfc %d:on` (`mlnx_qos -i %s --pfc %s`) — whichever the switches match.",
					nd, c.dscp, pfc[0], nd, c.dscp, pfc[0], nd, c.dscp, pfc[0], prio, nd, prio, nd, pfcBitmapArg(dcb.PFCEn|1<<prio)))
			}
		}
		line := fmt.Sprintf("%s: PFC on %s, trust %s (%s), ECN %s", head, priorityList(pfc), trust, trustFrom, ecnSummary(ecn))
		if vlan {
			line += ", VLAN netdev"
		}
		var srcs []string
		for _, c := range classes {
			srcs = append(srcs, c.source)
		}
		line += "; traffic class: " + strings.Join(srcs, ", ")
		if len(problems) > 0 {
			line += " — " + strings.Join(problems, "; ")
			issues = append(issues, fmt.Sprintf("%s: %s", nd, strings.Join(problems, "; ")))
		}
		ev["issues"] = nonNil(problems)
		details = append(details, line)
	}
	details = append(details, notJudged...)
	for _, l := range softOnly {
		details = append(details, l+": software RoCE, not judged")
	}
	judged := len(targets) - len(noDCB) - len(unknown)
	// classNote says which traffic class the judgement rests on.
	classNote := ""
	switch {
	case len(assumedPorts) > 0 && judgedTOS:
		classNote = "; traffic class from rdma_cm's default_roce_tos where set, elsewhere " + assumedTC
	case len(assumedPorts) > 0:
		classNote = "; " + assumedTC
	case judgedTOS:
		classNote = "; traffic class from rdma_cm's default_roce_tos"
	}
	var r Result
	switch {
	case len(issues) > 0:
		msg := fmt.Sprintf("RoCE is not lossless on %d netdev(s): %s%s", len(issues), strings.Join(issues, "; "), classNote)
		if env.Opts.ExpectLossless {
			r = fail(msg)
		} else {
			r = warn(msg + " (--expect-lossless makes this fail)")
		}
		if len(assumedPorts) > 0 {
			addRemedy(tosFix(assumedPorts))
		}
		r.Remedy = strings.Join(remedy, "\n")
		r.Observed = issues[0]
	case len(unknown) > 0:
		r = errorf("could not read the DCB state of %s", strings.Join(unknown, "; "))
		r.Observed = "DCB unknown"
		r.Remedy = dcbByHand
	case judged == 0:
		r = skip(fmt.Sprintf("driver has no DCB (%s) on %s: PFC/trust cannot be read", sysfs.ErrNoDCB, strings.Join(noDCB, ", ")))
		r.Observed = "no DCB"
	default:
		ecnText := "trust and ECN match"
		switch {
		case len(noECN) == judged:
			ecnText = "trust matches; ECN not readable (no MLNX_OFED ecn files)"
		case len(noECN) > 0:
			ecnText = fmt.Sprintf("trust and ECN match; ECN not readable (no MLNX_OFED ecn files) on %s", strings.Join(noECN, ", "))
		}
		r = pass(fmt.Sprintf("%d netdev(s) lossless: PFC on the RoCE priority, %s%s", judged, ecnText, classNote))
		r.Observed = fmt.Sprintf("%d lossless", judged)
		if len(noDCB) > 0 {
			r.Summary += fmt.Sprintf("; %d without DCB (%s)", len(noDCB), strings.Join(noDCB, ", "))
		}
	}
	if len(notJudged) > 0 && r.Status != report.Error {
		r.Summary += fmt.Sprintf("; %d port(s) not judged (not ACTIVE, see port.state)", len(notJudged))
	}
	r.Expected = "PFC on the priority RoCE's DSCP maps to, trust dscp (or pcp with tagged traffic), ECN on the PFC priority"
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
