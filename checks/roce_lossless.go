package checks

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// roceRecommendedTC is the traffic class RoCE deployments usually give
// applications (NCCL_IB_TC, UCX_IB_TRAFFIC_CLASS, perftest --tclass): 106 =
// DSCP 26 (AF31) << 2 | ECT(0). It is only ever recommended, never
// assumed: rdma_cm's default ToS is 0, and NCCL, UCX and perftest send ToS
// 0 unless told, so without a default_roce_tos or an expected class the
// traffic judged is ToS 0.
const (
	roceRecommendedTC   = 106
	roceRecommendedDSCP = roceRecommendedTC >> 2
)

// howAppsChooseTC says where applications take their traffic class from.
const howAppsChooseTC = "applications choose it with NCCL_IB_TC, UCX_IB_TRAFFIC_CLASS, perftest --tclass, or rdma_cm's default_roce_tos"

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
			Judges: "For every ACTIVE hardware RoCE port (iWARP, EFA, InfiniBand and software ports say why they are not judged; VFs and representors " +
				"are the PF's business), where PFC, trust and ECN live: the port's netdev, or on an mlx5 RoCE LAG each slave of the bond (the bond " +
				"itself answers EOPNOTSUPP). PFC from DCB netlink (RTM_GETDCB / DCB_CMD_IEEE_GET: the pfc_en bitmap of struct ieee_pfc); the trust mode " +
				"from MLNX_OFED's /sys/class/net/<if>/qos/trust, else DSCP entries in the DCB IEEE APP table (trust dscp) or none (trust pcp); ECN per " +
				"priority from /sys/class/net/<if>/ecn/roce_np|roce_rp/enable/<prio> where those files exist; on Broadcom bnxt_re, whose congestion control " +
				"lives in the firmware, enable_cc and tos_ecn (ECT on RoCE packets) from debugfs /sys/kernel/debug/bnxt_re/<PCI address>/cc_config " +
				"where root can read it. A ConnectX VF with no PF in view (a VM's) is not judged: its PFC is the PF's. The traffic judged is the class RoCE " +
				"applications really use: the expected class (--roce-tc, or roce_tc in the expectations file) when given, rdma_cm's default_roce_tos " +
				"where set (rdmadoctor never creates configfs entries), MLNX_OFED/DOCA-OFED's global traffic class where " +
				"/sys/class/infiniband/<dev>/tc/<port>/traffic_class reads \"Global tclass=<N>\" (it overrides the class the applications and rdma_cm ask for, so it " +
				"replaces default_roce_tos, and the expected class too where every port of the netdev has one — the details say so; its DSCP is N>>2), and otherwise ToS 0 — the kernel's default, and what NCCL (NCCL_IB_TC), UCX " +
				"(UCX_IB_TRAFFIC_CLASS) and perftest (--tclass) send unless told. The report names the class it judged and where it came from. It warns " +
				"when RoCE runs lossy (no PFC priority) or the judged class lands on a priority without PFC, or half-configured (ECN off on the PFC " +
				"priority; trust pcp while DSCP is mapped; untagged RoCE with trust pcp going to priority 0); --expect-lossless (or lossless = true in " +
				"the expectations file) makes those fail. A driver without DCB answers EOPNOTSUPP: skip.",
			Why: "RoCE's transport recovers from loss with go-back-N retransmission: on a lossy fabric a dropped packet costs a timeout and a " +
				"burst of retransmissions, and throughput collapses under congestion. Lossless RoCE needs PFC on the RoCE priority, traffic classified " +
				"onto it (trust dscp for untagged RoCE v2: under trust pcp an untagged frame has no PCP and lands on priority 0), and ECN so that " +
				"congestion slows senders before PFC pauses the fabric.",
		},
		Run: runRoCELossless,
	})
}

// roce.lossless's findings, about a netdev where PFC, trust and ECN live
// or, when nothing is judged, the host. A problem warns; the finding
// lossless-expected (unit "") is what turns problems into a failure when
// lossless RoCE is expected, so a waiver of it brings them back to
// warnings. A deviation from the expectations file fails by itself.
var (
	losslessOK = declare(Finding{ID: "roce.lossless/lossless", Status: report.Pass,
		When:    "the traffic judged lands on a PFC priority, trust matches the marking and ECN is on there (or unreadable)",
		Message: "{observed}"})
	losslessNoDCB = declare(Finding{ID: "roce.lossless/no-dcb", Status: report.Skip,
		When:    "the driver has no DCB (EOPNOTSUPP): nothing to judge on the host",
		Message: "{head}: driver has no DCB ({answer})"})
	losslessDCBUnreadable = declare(Finding{ID: "roce.lossless/dcb-unreadable", Status: report.Error,
		When:    "the DCB state could not be read",
		Message: "{netdev}: {cause}", Fix: dcbByHand})
	losslessDCBAnswered = declare(Finding{ID: "roce.lossless/dcb-error", Status: report.Error,
		When:    "the DCB request was answered with an error other than EOPNOTSUPP",
		Message: "{netdev}: DCB answered {answer}", Fix: dcbByHand})
	losslessLossy = declare(Finding{ID: "roce.lossless/lossy", Status: report.Warn,
		When:    "RoCE runs lossy: PFC is off on every priority (fail with --expect-lossless)",
		Message: "PFC off on every priority: RoCE runs lossy",
		Fix:     losslessPFCFix + "."})
	losslessLossyECN = declare(Finding{ID: "roce.lossless/lossy-ecn-off", Status: report.Warn,
		When:    "RoCE runs lossy and ECN is off on the priority RoCE maps to (fail with --expect-lossless)",
		Message: "PFC off on every priority: RoCE runs lossy",
		Fix:     losslessPFCFix + "; and turn ECN on for it: {ecn_commands}."})
	losslessDefaultClassOff = declare(Finding{ID: "roce.lossless/default-class-off-pfc", Status: report.Warn,
		When:    "nothing sets a class, and ToS 0 — what applications send unless told — lands on a priority without PFC",
		Message: losslessClassOffMessage, Fix: losslessTOSFix})
	losslessTOSClassOff = declare(Finding{ID: "roce.lossless/tos-class-off-pfc", Status: report.Warn,
		When:    "rdma_cm's default_roce_tos lands on a priority without PFC",
		Message: losslessClassOffMessage,
		Fix: "{port}: rdma_cm connections that set no ToS go out with DSCP {dscp}: `echo {want} > {tos_path}`, or map DSCP {dscp} to priority {pfc_prio}: " +
			"`dcb app replace dev {netdev} dscp-prio {dscp}:{pfc_prio}`."})
	losslessOFEDClassOff = declare(Finding{ID: "roce.lossless/ofed-tclass-off-pfc", Status: report.Warn,
		When:    "MLNX_OFED's global traffic class (tc/<port>/traffic_class), which every RoCE packet of the port carries, lands on a priority without PFC",
		Message: losslessClassOffMessage,
		Fix: "{port}: every RoCE packet leaves with the global class, DSCP {dscp}: set the class the PFC priority expects, `echo tclass={want} > {tc_path}` " +
			"(MLNX_OFED/DOCA; not persistent: set it from a boot unit), or map DSCP {dscp} to priority {pfc_prio}: `mlnx_qos -i {netdev} --dscp2prio set,{dscp},{pfc_prio}` " +
			"(upstream `dcb app replace dev {netdev} dscp-prio {dscp}:{pfc_prio}`), or turn PFC on for priority {prio}: `mlnx_qos -i {netdev} --pfc {bitmap}` — whichever the switches match."})
	losslessExpectedClassOff = declare(Finding{ID: "roce.lossless/expected-class-off-pfc", Status: report.Warn,
		When:    "the expected class (--roce-tc, roce_tc in the expectations file) lands on a priority without PFC",
		Message: losslessClassOffMessage,
		Fix: "{netdev}: map DSCP {dscp} to the PFC priority {pfc_prio}: `dcb app replace dev {netdev} dscp-prio {dscp}:{pfc_prio}` (MLNX_OFED `mlnx_qos -i {netdev} --dscp2prio set,{dscp},{pfc_prio}`), " +
			"or turn PFC on for priority {prio}: `dcb pfc set dev {netdev} prio-pfc {prio}:on` (`mlnx_qos -i {netdev} --pfc {bitmap}`) — whichever the switches match."})
	losslessPFCDeviates = declare(Finding{ID: "roce.lossless/pfc-deviates", Status: report.Fail,
		When:    "PFC is off on the priority the expectations file names (pfc_priority)",
		Message: "PFC off on priority {want}, expected on by {cite} (PFC is on {pfc})",
		Fix: "{netdev}: turn PFC on for priority {want} as its class says: `dcb pfc set dev {netdev} prio-pfc {want}:on` (MLNX_OFED `mlnx_qos -i {netdev} --pfc {bitmap}`), " +
			"or update the expectations file if the fabric changed on purpose."})
	losslessECNOff = declare(Finding{ID: "roce.lossless/ecn-off", Status: report.Warn,
		When:    "half-configured: PFC on a priority whose ECN is off (fail with --expect-lossless)",
		Message: "PFC on priority {prio} but ECN off there ({points})",
		Fix:     "{netdev}: turn ECN (DCQCN) on for priority {prio}: {ecn_commands}."})
	losslessTrustPCPMap = declare(Finding{ID: "roce.lossless/trust-pcp-dscp-mapped", Status: report.Warn,
		When:    "half-configured: trust pcp while DSCP is mapped (fail with --expect-lossless)",
		Message: "trust pcp while the APP table maps DSCP: the DSCP map is ignored and untagged RoCE lands on priority 0",
		Fix:     "{netdev}: trust the DSCP marking: `mlnx_qos -i {netdev} --trust dscp`."})
	losslessUntaggedPCP = declare(Finding{ID: "roce.lossless/untagged-pcp", Status: report.Warn,
		When:    "half-configured: untagged RoCE with trust pcp goes to priority 0, which has no PFC (fail with --expect-lossless)",
		Message: "untagged RoCE with trust pcp goes to priority 0, which has no PFC (PFC is on {pfc})",
		Fix: "{netdev}: classify RoCE by DSCP onto priority {pfc_prio}: `mlnx_qos -i {netdev} --trust dscp --dscp2prio set,{dscp},{pfc_prio}` (MLNX_OFED), or upstream " +
			"`dcb app add dev {netdev} dscp-prio {dscp}:{pfc_prio}` (a DSCP entry switches mlx5 to trust dscp); or carry RoCE on a VLAN whose egress priority is {pfc_prio}."})
	losslessExpected = declare(Finding{ID: "roce.lossless/lossless-expected", Status: report.Fail,
		When:    "lossless RoCE is expected (--expect-lossless, lossless = true in the expectations file) and a netdev is not lossless",
		Message: "lossless expected: {source}"})
	losslessNoneJudged = declare(Finding{ID: "roce.lossless/none-judged", Status: report.Skip,
		When:    "no ACTIVE hardware RoCE port: software RoCE, VFs, representors and ports that are down are not judged",
		Message: "no ACTIVE hardware RoCE port to judge ({count} not judged, see details)"})
	losslessNoPort = declare(Finding{ID: "roce.lossless/no-rdma-port", Status: report.Skip,
		When:    "the host has no RDMA port",
		Message: "no RDMA port: PFC/ECN do not apply"})
	losslessNotRoCE = declare(Finding{ID: "roce.lossless/not-roce", Status: report.Skip,
		When:    "the host's ports are InfiniBand, Omni-Path or another transport without RoCE",
		Message: "no RoCE port ({transports}): PFC, trust and ECN for RoCE do not apply"})
	losslessIWARP = declare(Finding{ID: "roce.lossless/iwarp", Status: report.Skip,
		When:    "the host's Ethernet RDMA ports are iWARP",
		Message: "no RoCE port ({transports}): PFC, trust and ECN for RoCE do not apply" + whyIWARP})
	losslessEFA = declare(Finding{ID: "roce.lossless/efa", Status: report.Skip,
		When:    "the host's RDMA ports are EFA",
		Message: "no RoCE port ({transports}): PFC, trust and ECN for RoCE do not apply" + whyEFA})
	losslessUSNIC = declare(Finding{ID: "roce.lossless/usnic", Status: report.Skip,
		When:    "the host's RDMA ports are Cisco usNIC",
		Message: "no RoCE port ({transports}): PFC, trust and ECN for RoCE do not apply" + whyUSNIC})
)

const (
	losslessClassOffMessage = "{class} lands on priority {prio}, which has no PFC (PFC is on {pfc})"
	losslessPFCFix          = "{netdev}: turn PFC on for priority {prio}, the one {class} maps to, as the switches are configured: `mlnx_qos -i {netdev} --trust dscp --pfc {bitmap}` (MLNX_OFED/DOCA), " +
		"or upstream iproute2 `dcb pfc set dev {netdev} prio-pfc {prio}:on` and `dcb app add dev {netdev} dscp-prio {dscp}:{prio}`"
	losslessTOSFix = "Applications send ToS 0 unless told, and ToS 0 lands on a priority without PFC. Make them mark TC {tc} (DSCP {tc_dscp}), the class the PFC priority expects: " +
		"rdma_cm users with {tos_commands} (rdma_cm loaded, configfs mounted; not persistent: set it from a boot unit), NCCL with NCCL_IB_TC={tc}, UCX with UCX_IB_TRAFFIC_CLASS={tc}, perftest with --tclass={tc}. " +
		"If the applications already set a class, tell rdmadoctor which: --roce-tc N (or roce_tc in the expectations file)."
)

// losslessPort is one netdev to judge — where PFC, trust and ECN live for
// the ports it carries: the port's netdev, or each slave of a LAG's bond.
type losslessPort struct {
	netdev string
	note   string // ", slave of bond0"
	ports  []portRef
}

type portRef struct {
	dev   string
	port  int
	label string
}

// trafficClass is one traffic class RoCE traffic on a netdev carries, and
// why the check believes so.
type trafficClass struct {
	dscp      int
	tos       int
	defaulted bool   // nothing sets a class: the kernel's and the applications' ToS 0
	source    string // "mlx5_0 port 1 default_roce_tos 106", "--roce-tc 106", …
	port      portRef
	// from is what set the class: classExpected, classRoCETOS, classOFED
	// or classDefault.
	from string
}

// Where a judged traffic class comes from.
const (
	classExpected = "expected"         // --roce-tc, roce_tc in the expectations file
	classRoCETOS  = "default_roce_tos" // rdma_cm's configfs default
	classOFED     = "ofed-tclass"      // MLNX_OFED's global tclass, which overrides both
	classDefault  = "default"          // nothing sets one: ToS 0
)

func (t trafficClass) String() string {
	return fmt.Sprintf("ToS %d (DSCP %d, %s)", t.tos, t.dscp, t.source)
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

// tosSlots are the slots of the remedy that makes applications mark RoCE
// traffic with the class whose DSCP lands on the PFC priority, for the
// ports given.
func tosSlots(ports []portRef, tc int) Slots {
	var cmds []string
	for _, p := range ports {
		cmds = append(cmds, fmt.Sprintf("`mkdir -p %s && echo %d > %s`", path.Dir(path.Dir(path.Dir(sysfs.RoCETOSPath(p.dev, p.port)))),
			tc, sysfs.RoCETOSPath(p.dev, p.port)))
	}
	return Slots{"tc": fmt.Sprint(tc), "tc_dscp": fmt.Sprint(tc >> 2), "tos_commands": strings.Join(cmds, ", ")}
}

func runRoCELossless(_ context.Context, env *Env) Result {
	targets, notJudged, skipped := losslessTargets(env)
	if len(targets) == 0 {
		r := skipped
		r.Details = notJudged
		return r
	}
	lj := &losslessJudge{env: env, h: env.Host}
	outs := make([]losslessOutcome, 0, len(targets))
	for _, t := range targets {
		outs = append(outs, lj.judge(t))
	}
	return losslessResult(env, outs, notJudged)
}

// losslessTargets lists the netdevs to judge for every ACTIVE hardware RoCE
// port; the ports not judged with why; and, when nothing is judged, the
// reason for the skip.
func losslessTargets(env *Env) ([]*losslessPort, []string, Result) {
	var targets []*losslessPort
	byNetdev := map[string]*losslessPort{}
	var notJudged, other []*PortModel
	var lines []string
	for _, pm := range env.Model().Ports {
		reason := losslessNotJudged(pm)
		if product := vfByDeviceID(env.Survey(), pm); reason == "" && pm.Transport == RoCE && product != "" {
			reason = "a " + product + " with no PF in view: PFC, trust and ECN are the PF's, set where the PF is " +
				"(the hypervisor host, for a VM) — nothing to set here"
		}
		switch {
		case pm.Transport != RoCE:
			other = append(other, pm)
			continue
		case reason != "":
			notJudged = append(notJudged, pm)
			lines = append(lines, fmt.Sprintf("%s: not judged: %s", pm.Label, reason))
			continue
		}
		ref := portRef{dev: pm.Device.Dev.Name, port: pm.Port.Num, label: pm.Label}
		for _, nd := range pm.DCBNetdevs {
			if t, ok := byNetdev[nd]; ok {
				t.ports = append(t.ports, ref)
				continue
			}
			t := &losslessPort{netdev: nd, ports: []portRef{ref}}
			if pm.Device.LAG != nil && nd != pm.Netdev {
				t.note = ", slave of " + pm.Netdev
			}
			byNetdev[nd] = t
			targets = append(targets, t)
		}
	}
	if len(targets) > 0 {
		if len(other) > 0 {
			lines = append(lines, "not RoCE, not judged here: "+transportTally(other))
		}
		return targets, lines, Result{}
	}
	switch {
	case len(notJudged) > 0:
		return nil, lines, losslessNoneJudged.result("", Slots{"count": fmt.Sprint(len(notJudged))})
	case len(other) > 0:
		f := map[Transport]*Finding{IWARP: losslessIWARP, EFA: losslessEFA, USNIC: losslessUSNIC}[etherTransport(other)]
		if f == nil {
			f = losslessNotRoCE
		}
		return nil, lines, f.result("", Slots{"transports": transportTally(other)})
	}
	return nil, lines, losslessNoPort.result("", nil)
}

// losslessNotJudged says why a RoCE port's lossless setup is not judged,
// "" when it is.
func losslessNotJudged(pm *PortModel) string {
	d := pm.Device
	switch {
	case pm.Transport != RoCE:
		return ""
	case d.Function == SoftwareDevice:
		return "software RoCE: lossless configuration belongs to the NIC under it"
	case !portActive(pm.Port):
		return stateText(pm.Port) + " (see port.state)"
	case pm.Netdev == "":
		return "no netdev carries it (roce.config reports it)"
	case pm.NetdevAway() && !pm.IsVF():
		return "its netdev " + pm.Netdev + " is in another network namespace (the host's): PFC, trust and ECN are set and read there"
	case pm.IsVF():
		kind := "a VF"
		if d.Function == SubFunction {
			kind = "an mlx5 sub-function"
		}
		return kind + ": PFC, trust and ECN are the PF's (" + valueOrUnknown(d.PhysFn) + ")"
	case pm.Representor:
		return "a VF representor: its traffic leaves through the uplink, judged there"
	}
	return ""
}

// losslessJudge judges one netdev's DCB state.
type losslessJudge struct {
	env *Env
	h   *sysfs.Host
}

// losslessOutcome is one netdev judged.
type losslessOutcome struct {
	netdev   string
	kind     string // "ok", "issues", "no-dcb", "unknown"
	findings []report.Finding
	problems []string
	remedies []string
	defaults []portRef // ports judged at ToS 0 because nothing sets a class
	wantTC   int       // the class that lands on PFC, when the default does not (0 = none)
	// classNamed: a problem already names a judged traffic class, so the
	// detail line need not list them again.
	classNamed bool
	// deviations are where the netdev differs from the expectations file:
	// they fail whatever --expect-lossless says.
	deviations []string
	details    []string
	ecnKnown   bool
	ev         map[string]any
}

// add records a finding about the netdev: its message is a problem (or a
// deviation from the expectations file), its fix a remedy.
func (o *losslessOutcome) add(f *Finding, slots Slots) {
	rf := f.At(o.netdev, slots.with("netdev", o.netdev))
	o.findings = append(o.findings, rf)
	if f == losslessPFCDeviates {
		o.deviations = append(o.deviations, rf.Message)
	} else {
		o.problems = append(o.problems, rf.Message)
	}
	if f != losslessDefaultClassOff {
		// The default class's remedy is one for every such port,
		// written by losslessResult.
		o.remedies = append(o.remedies, rf.Fix)
	}
}

// dcbView is a netdev's DCB answer read for judging.
type dcbView struct {
	dcb       sysfs.DCB
	pfc       []int
	dscpMap   map[int]int
	trust     string
	trustFrom string
}

// prioOf is the priority a DSCP lands on under trust dscp: the APP table's
// entry, else the NIC's default map (DSCP >> 3).
func (v dcbView) prioOf(dscp int) int {
	if p, ok := v.dscpMap[dscp]; ok {
		return p
	}
	return dscp >> 3
}

// dscpFor is the DSCP that lands on prio: the APP table's entry for it,
// else the default map's first.
func (v dcbView) dscpFor(prio int) int {
	best := -1
	for d, p := range v.dscpMap {
		if p == prio && (best < 0 || d < best) {
			best = d
		}
	}
	if best < 0 {
		best = prio << 3
	}
	return best
}

func (lj *losslessJudge) judge(t *losslessPort) losslessOutcome {
	labels := make([]string, len(t.ports))
	for i, p := range t.ports {
		labels[i] = p.label
	}
	nd := t.netdev
	head := fmt.Sprintf("%s (%s%s)", nd, strings.Join(labels, ", "), t.note)
	o := losslessOutcome{netdev: nd, kind: "ok", ev: map[string]any{"netdev": nd, "ports": labels}}
	dcb, err := lj.h.DCB(nd)
	switch {
	case err != nil:
		o.kind, o.ev["dcb"] = "unknown", "unknown"
		o.add(losslessDCBUnreadable, Slots{"cause": err.Error()})
		o.details = []string{fmt.Sprintf("%s: DCB unknown: %v", head, err)}
		return o
	case dcb.Err == sysfs.ErrNoDCB:
		o.kind, o.ev["dcb"] = "no-dcb", dcb.Err
		o.findings = []report.Finding{losslessNoDCB.At(nd, Slots{"head": head, "answer": dcb.Err})}
		o.details = []string{o.findings[0].Message}
		return o
	case dcb.Err != "":
		o.kind, o.ev["dcb"] = "unknown", dcb.Err
		o.add(losslessDCBAnswered, Slots{"answer": dcb.Err})
		o.details = []string{fmt.Sprintf("%s: DCB answered %s", head, dcb.Err)}
		return o
	}
	v := lj.readView(nd, head, dcb, &o)
	classes := lj.trafficClasses(t, &o)
	vlan, verr := lj.h.IsVLAN(nd)
	if verr != nil {
		o.details = append(o.details, fmt.Sprintf("%s: VLAN or not unknown: %v", head, verr))
	}
	o.ev["vlan"] = vlan
	ecn := lj.h.ECN(nd)
	bnxt := lj.bnxtCCOf(t, ecn)
	o.ecnKnown = ecn.Present || bnxt.Present
	lj.judgePFC(nd, v, classes, ecn, &o)
	lj.judgeExpectedPriority(t, nd, v, &o)
	ecnText := ecnSummary(ecn)
	if bnxt.Dir != "" {
		ecnText = lj.judgeBnxtCC(nd, v, bnxt, head, &o)
	} else {
		lj.judgeECN(nd, v, ecn, head, &o)
	}
	lj.judgeTrust(nd, v, classes, vlan, &o)
	line := fmt.Sprintf("%s: PFC on %s, trust %s (%s), ECN %s", head, priorityList(v.pfc), v.trust, v.trustFrom, ecnText)
	if vlan {
		line += ", VLAN netdev"
	}
	var srcs []string
	for _, c := range classes {
		srcs = append(srcs, fmt.Sprintf("%s → priority %d", c, v.prioOf(c.dscp)))
	}
	if !o.classNamed {
		line += "; traffic judged: " + strings.Join(srcs, ", ") // else a problem names it
	}
	if len(o.problems) > 0 || len(o.deviations) > 0 {
		line += " — " + strings.Join(append(append([]string(nil), o.deviations...), o.problems...), "; ")
		o.kind = "issues"
	} else {
		o.findings = []report.Finding{losslessOK.At(nd, Slots{"observed": line})}
	}
	o.ev["issues"] = nonNil(o.problems)
	o.details = append(o.details, line)
	return o
}

// readView reads PFC and the trust mode: MLNX_OFED's qos/trust, else DSCP
// entries in the APP table (trust dscp) or none (trust pcp).
func (lj *losslessJudge) readView(nd, head string, dcb sysfs.DCB, o *losslessOutcome) dcbView {
	v := dcbView{dcb: dcb, pfc: sysfs.PFCPriorities(dcb.PFCEn), dscpMap: map[int]int{}}
	o.ev["pfc_enabled"], o.ev["pfc_cap"] = nonNilInts(v.pfc), dcb.PFCCap
	for _, a := range dcb.App {
		if a.Selector == "dscp" {
			v.dscpMap[a.Protocol] = a.Priority
		}
	}
	if tr, err := lj.h.Trust(nd); err == nil {
		v.trust, v.trustFrom = tr, "qos/trust"
	} else if !sysfs.IsNotExist(err) {
		o.details = append(o.details, fmt.Sprintf("%s: trust unreadable: %v", head, err))
	}
	if v.trust == "" {
		v.trustFrom, v.trust = "DCB APP table", "pcp"
		if len(v.dscpMap) > 0 {
			v.trust = "dscp"
		}
	}
	o.ev["trust"], o.ev["trust_source"] = v.trust, v.trustFrom
	if len(v.dscpMap) > 0 {
		m := map[string]int{}
		for k, p := range v.dscpMap {
			m[fmt.Sprint(k)] = p
		}
		o.ev["dscp_to_priority"] = m
	}
	return v
}

// trafficClasses are the classes the netdev's RoCE traffic really uses: the
// expected class (--roce-tc, the expectations file) when given, and
// rdma_cm's default_roce_tos of each port where set; with neither, ToS 0 —
// the kernel's default and what NCCL, UCX and perftest send unless told.
func (lj *losslessJudge) trafficClasses(t *losslessPort, o *losslessOutcome) []trafficClass {
	var classes []trafficClass
	seen := map[int]bool{}
	add := func(c trafficClass) {
		if !seen[c.tos] {
			seen[c.tos] = true
			classes = append(classes, c)
		}
	}
	var portClasses []trafficClass
	allGlobal := len(t.ports) > 0
	for _, p := range t.ports {
		c, ok := lj.portClass(p, o)
		if ok {
			portClasses = append(portClasses, c)
		}
		allGlobal = allGlobal && ok && c.from == classOFED
	}
	if tc, src := lj.env.expectedTC(); tc >= 0 {
		if allGlobal {
			// No packet of these ports carries the applications' class:
			// the global tclass replaces it, so it is the one judged.
			o.details = append(o.details, fmt.Sprintf("%s (ToS %d) not judged on %s: MLNX_OFED's global tclass overrides the class applications ask for on every port of it", src, tc, t.netdev))
		} else {
			add(trafficClass{tos: tc, dscp: tc >> 2, source: src, port: t.ports[0], from: classExpected})
		}
	}
	for _, c := range portClasses {
		add(c)
	}
	if len(classes) == 0 {
		for _, p := range t.ports {
			o.defaults = append(o.defaults, p)
		}
		add(trafficClass{tos: 0, dscp: 0, defaulted: true, port: t.ports[0], source: "nothing sets a class", from: classDefault})
	}
	var classEv []map[string]any
	for _, c := range classes {
		classEv = append(classEv, map[string]any{"dscp": c.dscp, "tos": c.tos, "source": c.source, "defaulted": c.defaulted})
	}
	o.ev["traffic_classes"] = classEv
	return classes
}

// portClass is the class a port's RoCE traffic leaves with when the host
// sets one: MLNX_OFED's global tclass (/sys/class/infiniband/<dev>/tc/<port>/
// traffic_class), which overrides whatever ToS the QP asks for, else
// rdma_cm's default_roce_tos. Unreadable files are noted in the details.
func (lj *losslessJudge) portClass(p portRef, o *losslessOutcome) (trafficClass, bool) {
	g, err := lj.h.OFEDTrafficClass(p.dev, p.port)
	switch {
	case err == nil && g.Global:
		return trafficClass{tos: int(g.TClass), dscp: int(g.TClass) >> 2, port: p, from: classOFED,
			source: fmt.Sprintf("%s MLNX_OFED global tclass, which overrides the applications' class", p.label)}, true
	case err != nil && !sysfs.IsNotExist(err):
		o.details = append(o.details, fmt.Sprintf("%s: tc traffic_class unreadable: %v", p.label, err))
	}
	tos, err := lj.h.DefaultRoCETOS(p.dev, p.port)
	switch {
	case err == nil:
		return trafficClass{tos: int(tos), dscp: int(tos) >> 2, source: fmt.Sprintf("%s default_roce_tos", p.label), port: p, from: classRoCETOS}, true
	case !sysfs.IsNotExist(err):
		o.details = append(o.details, fmt.Sprintf("%s: default_roce_tos unreadable: %v", p.label, err))
	}
	return trafficClass{}, false
}

// judgePFC finds RoCE running lossy (no PFC at all), and traffic classes
// landing on a priority without PFC.
func (lj *losslessJudge) judgePFC(nd string, v dcbView, classes []trafficClass, ecn sysfs.ECNState, o *losslessOutcome) {
	if len(v.pfc) == 0 {
		target := v.prioOf(classes[0].dscp)
		slots := Slots{"prio": fmt.Sprint(target), "class": classes[0].String(), "bitmap": pfcBitmapArg(1 << target), "dscp": fmt.Sprint(classes[0].dscp)}
		if ecn.Present && !(ecn.NP[target] && ecn.RP[target]) {
			o.add(losslessLossyECN, slots.with("ecn_commands", ecnFix(nd, target, "roce_np", "roce_rp")))
			return
		}
		o.add(losslessLossy, slots)
		return
	}
	if v.trust != "dscp" {
		return
	}
	for _, c := range classes {
		prio := v.prioOf(c.dscp)
		if v.dcb.PFCEn&(1<<prio) != 0 {
			continue
		}
		o.classNamed = true
		want := v.dscpFor(v.pfc[0])<<2 | 2
		slots := Slots{"class": c.String(), "prio": fmt.Sprint(prio), "pfc": priorityList(v.pfc), "dscp": fmt.Sprint(c.dscp), "pfc_prio": fmt.Sprint(v.pfc[0])}
		switch c.from {
		case classDefault:
			o.wantTC = want // one remedy for every such port, written by losslessResult
			o.add(losslessDefaultClassOff, slots.with(slotsList(tosSlots(o.defaults, want))...))
		case classRoCETOS:
			o.add(losslessTOSClassOff, slots.with("port", c.port.label, "want", fmt.Sprint(want), "tos_path", sysfs.RoCETOSPath(c.port.dev, c.port.port)))
		case classOFED:
			o.add(losslessOFEDClassOff, slots.with("port", c.port.label, "want", fmt.Sprint(want), "tc_path", sysfs.OFEDTrafficClassPath(c.port.dev, c.port.port),
				"bitmap", pfcBitmapArg(v.dcb.PFCEn|1<<prio)))
		default:
			o.add(losslessExpectedClassOff, slots.with("bitmap", pfcBitmapArg(v.dcb.PFCEn|1<<prio)))
		}
	}
}

// slotsList flattens slots for Slots.with.
func slotsList(s Slots) []string {
	var kv []string
	for k, v := range s {
		kv = append(kv, k, v)
	}
	return kv
}

// judgeExpectedPriority compares PFC with the pfc_priority the
// expectations file gives the netdev's ports.
func (lj *losslessJudge) judgeExpectedPriority(t *losslessPort, nd string, v dcbView, o *losslessOutcome) {
	for _, p := range t.ports {
		want := lj.env.Expect.Port(p.dev, p.port).PFCPriority
		if want == nil || want.V < 0 || want.V > 7 || v.dcb.PFCEn&(1<<want.V) != 0 {
			continue
		}
		o.add(losslessPFCDeviates, Slots{"want": fmt.Sprint(want.V), "cite": want.Cite(), "pfc": priorityList(v.pfc), "bitmap": pfcBitmapArg(v.dcb.PFCEn | 1<<want.V)})
		return
	}
}

// judgeECN finds PFC priorities whose ECN (DCQCN) is off, where readable.
func (lj *losslessJudge) judgeECN(nd string, v dcbView, ecn sysfs.ECNState, head string, o *losslessOutcome) {
	if !ecn.Present {
		o.ev["ecn"] = "unknown"
		return
	}
	ecnEv := map[string]any{}
	for _, p := range v.pfc {
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
			o.add(losslessECNOff, Slots{"prio": fmt.Sprint(p), "points": strings.Join(off, ", "), "ecn_commands": ecnFix(nd, p, off...)})
		}
	}
	o.ev["ecn"] = ecnEv
	for _, pr := range ecn.Probs {
		o.details = append(o.details, fmt.Sprintf("%s: ECN: %s", head, pr))
	}
}

// judgeTrust finds classification that sends RoCE where PFC is not: trust
// pcp with a DSCP map, or untagged traffic under trust pcp (no PCP: it
// lands on priority 0).
func (lj *losslessJudge) judgeTrust(nd string, v dcbView, classes []trafficClass, vlan bool, o *losslessOutcome) {
	switch {
	case v.trust == "pcp" && len(v.dscpMap) > 0:
		o.add(losslessTrustPCPMap, nil)
	case v.trust == "pcp" && !vlan && len(v.pfc) > 0 && v.dcb.PFCEn&1 == 0:
		dscp := v.dscpFor(v.pfc[0])
		if !classes[0].defaulted {
			dscp = classes[0].dscp // the class the applications send
		}
		o.add(losslessUntaggedPCP, Slots{"pfc": priorityList(v.pfc), "pfc_prio": fmt.Sprint(v.pfc[0]), "dscp": fmt.Sprint(dscp)})
	}
}

// roce.lossless's headlines: the summary over the netdevs judged.
const (
	losslessIssuesHead   headline = "RoCE is not lossless on {count} netdev(s): {issues}"
	losslessExpectedHead          = losslessIssuesHead + " ({expected})"
	losslessWarnHead              = losslessIssuesHead + " (--expect-lossless makes this fail)"
	losslessUnknownHead  headline = "could not read the DCB state of {problems}"
	losslessNoDCBHead    headline = "driver has no DCB ({answer}) on {netdevs}: PFC/trust cannot be read"
	losslessPassHead     headline = "{count} netdev(s) lossless: the traffic judged lands on a PFC priority, {ecn}"
	losslessNoECNHead    headline = "trust matches; ECN not readable (no MLNX_OFED ecn files)"
	losslessSomeECNHead  headline = "trust and ECN match; ECN not readable (no MLNX_OFED ecn files) on {netdevs}"
	losslessECNHead      headline = "trust and ECN match"
	losslessPassNoDCB    headline = "; {count} without DCB ({netdevs})"
	losslessNotJudgedEnd headline = "; {count} line(s) not judged (see details)"
)

// losslessTally is the netdevs' outcomes gathered for the check's result.
type losslessTally struct {
	details, issues, unknown, noDCB, noECN, remedies, deviations []string
	findings                                                     []report.Finding
	evs                                                          []map[string]any
	defaults                                                     []portRef
	wantTC, judged                                               int
}

func tallyLossless(outs []losslessOutcome) losslessTally {
	var t losslessTally
	for _, o := range outs {
		t.findings = append(t.findings, o.findings...)
		if o.wantTC != 0 {
			t.defaults, t.wantTC = append(t.defaults, o.defaults...), o.wantTC
		}
		t.details = append(t.details, o.details...)
		t.evs = append(t.evs, o.ev)
		switch o.kind {
		case "unknown":
			t.unknown = append(t.unknown, o.problems...)
			continue
		case "no-dcb":
			t.noDCB = append(t.noDCB, o.netdev)
			continue
		case "issues":
			t.deviations = append(t.deviations, o.deviations...)
			t.issues = append(t.issues, o.netdev+": "+strings.Join(append(append([]string(nil), o.deviations...), o.problems...), "; "))
			for _, f := range o.remedies {
				t.remedies = appendUnique(t.remedies, f)
			}
		}
		t.judged++
		if !o.ecnKnown {
			t.noECN = append(t.noECN, o.netdev)
		}
	}
	return t
}

// losslessResult combines the netdevs' outcomes: a problem warns (fails
// with --expect-lossless or the expectations file), an unreadable DCB is
// an error, and drivers without DCB are skipped.
func losslessResult(env *Env, outs []losslessOutcome, notJudged []string) Result {
	t := tallyLossless(outs)
	expectLossless, lossSrc := env.expectLossless()
	var r Result
	switch {
	case len(t.issues) > 0:
		r = t.issuesResult(expectLossless, lossSrc)
	case len(t.unknown) > 0:
		r = combineFindings(t.findings, false)
		r.Summary = losslessUnknownHead.render(Slots{"problems": strings.Join(t.unknown, "; ")})
		r.Observed = "DCB unknown"
	case t.judged == 0:
		r = combineFindings(t.findings, false)
		r.Summary = losslessNoDCBHead.render(Slots{"answer": sysfs.ErrNoDCB, "netdevs": strings.Join(t.noDCB, ", ")})
		r.Observed = "no DCB"
	default:
		r = combineFindings(t.findings, false)
		r.Summary = losslessPassHead.render(Slots{"count": fmt.Sprint(t.judged), "ecn": ecnText(t.judged, t.noECN)})
		r.Observed = fmt.Sprint(t.judged, " lossless")
		if len(t.noDCB) > 0 {
			r.Summary += losslessPassNoDCB.render(Slots{"count": fmt.Sprint(len(t.noDCB)), "netdevs": strings.Join(t.noDCB, ", ")})
		}
	}
	if len(notJudged) > 0 && r.Status != report.Error {
		r.Summary += losslessNotJudgedEnd.render(Slots{"count": fmt.Sprint(len(notJudged))})
	}
	if bf := blueFieldNetdevs(env, outs); r.Remedy != "" && len(bf) > 0 {
		r.Remedy += "\n" + render(dpuQoSNote, Slots{"netdevs": strings.Join(bf, ", ")})
	}
	r.Expected = "PFC on the priority the RoCE traffic really uses (rdma_cm's default ToS, else ToS 0, or the expected class), trust dscp (or pcp with tagged traffic), ECN on the PFC priority; " + howAppsChooseTC
	r.Details = append(t.details, notJudged...)
	r.Evidence = map[string]any{"netdevs": t.evs, "expect_lossless": expectLossless}
	return r
}

// issuesResult is the result when a netdev is not lossless: a warning,
// which a deviation from the expectations file or an expected lossless
// fabric (the finding lossless-expected) makes a failure.
func (t losslessTally) issuesResult(expectLossless bool, lossSrc string) Result {
	findings := t.findings
	slots := Slots{"count": fmt.Sprint(len(t.issues)), "issues": strings.Join(t.issues, "; ")}
	head := losslessWarnHead
	switch {
	case len(t.deviations) > 0:
		head = losslessIssuesHead
	case expectLossless:
		ex := losslessExpected.At("", Slots{"source": lossSrc})
		findings = append(findings, ex)
		head, slots = losslessExpectedHead, slots.with("expected", ex.Message)
	}
	remedies := t.remedies
	if t.wantTC != 0 {
		remedies = append(remedies, render(losslessTOSFix, tosSlots(t.defaults, t.wantTC)))
	}
	return Result{Status: worstStatus(findings), Summary: head.render(slots), Remedy: strings.Join(remedies, "\n"),
		Observed: t.issues[0], Findings: findings}
}

func ecnText(judged int, noECN []string) string {
	switch {
	case len(noECN) == judged:
		return string(losslessNoECNHead)
	case len(noECN) > 0:
		return losslessSomeECNHead.render(Slots{"netdevs": strings.Join(noECN, ", ")})
	}
	return string(losslessECNHead)
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

// roce.lossless's flags: whether lossy RoCE fails, and the traffic class
// applications use.
func init() {
	declareKnob(21, func(fs *pflag.FlagSet, o *Options) {
		fs.BoolVar(&o.ExpectLossless, "expect-lossless", false, "roce.lossless: fail (not warn) when RoCE runs lossy or half-configured")
		fs.IntVar(&o.RoCETC, "roce-tc", -1, "roce.lossless: the traffic class (ToS, 0-255) RoCE applications use (NCCL_IB_TC, UCX_IB_TRAFFIC_CLASS); default: rdma_cm's default_roce_tos, else 0")
	}, func(o *Options, changed func(string) bool) error {
		if changed("roce-tc") && (o.RoCETC < 0 || o.RoCETC > 255) {
			return fmt.Errorf("--roce-tc %d: a traffic class is 0-255 (106 is DSCP 26 with ECT)", o.RoCETC)
		}
		o.RoCETCSet = o.RoCETC >= 0
		return nil
	})
}

// vfByDeviceID tells an SR-IOV VF that shows no physfn link — a VF passed
// into a VM, where the guest sees no PF — by its ConnectX VF device ID
// (GCP's A3 Ultra/A4 and Azure's HPC VMs get ConnectX-6/7 VFs): the kernel
// answers DCB with EOPNOTSUPP on it, and its lossless setup is the PF's.
// It returns the VF's product name, "" when the port is no such VF.
func vfByDeviceID(s *Survey, pm *PortModel) string {
	for _, fn := range s.PCI {
		if fn.Address == pm.Device.Dev.PCIAddr && fn.Vendor == 0x15b3 && strings.HasSuffix(mellanoxProducts[fn.Device], " VF") {
			return mellanoxProducts[fn.Device] + " (" + fn.Address + ")"
		}
	}
	return ""
}
