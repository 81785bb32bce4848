package checks

import (
	"context"
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

func init() {
	register(Check{
		ID: "pci.link", Code: 11, Level: 1,
		Title: "each RDMA function's PCIe link trained at the best speed and width its path allows",
		Needs: []string{"pci.device"},
		Explain: Explanation{
			Judges: "For every RDMA NIC function (PFs; a VF shares its PF's link) reads current_link_speed/width and max_link_speed/width, " +
				"and the same of every PCI bridge above it up to the root port, walking the function's /sys/devices path. " +
				"The expected link is min(the card's max, every bridge's max) for speed and for width separately: a Gen5 card in a Gen4 slot " +
				"is expected at Gen4 and passes. The function's link below that fails, naming both values; a bridge link on the way below it " +
				"fails when it leaves less bandwidth than the card's expected link and warns otherwise. Functions that expose no " +
				"current_link_* files (mlx4) are unknown, not failed. With an expectations file (--expect), a function whose trained link differs " +
				"from its RDMA device's pcie_speed or pcie_width — slower or faster — fails, naming the line.",
			Why: "A card that trained at x8 instead of x16, or at Gen3 in a Gen4 slot, loses half its bandwidth to the host: RDMA still " +
				"works, benchmarks and jobs just run slow, and nothing else reports it. The usual causes are a card not fully seated, a riser " +
				"or retimer, a slot wired narrower than it looks, or a BIOS link-speed setting.",
			Failures: []Failure{
				{report.Fail, "a function trained below min(card max, slot/bridge max) in speed or width",
					"Reseat the card (power off), try another slot, replace a riser or cable; check the slot's electrical width and lane sharing " +
						"in the board manual and the BIOS PCIe speed/bifurcation settings; compare `lspci -vv -s <addr>` LnkCap with LnkSta and read " +
						"`dmesg | grep -i -e 'PCIe bandwidth' -e AER` for link errors."},
				{report.Fail, "a bridge on the way to the root port trained below the card's expected link, leaving less bandwidth",
					"Same causes one level up: the switch or its uplink (riser, cable, retimer); check the bridge with `lspci -vv -s <bridge>`."},
				{report.Warn, "a bridge link trained below its capability without limiting the card", "Check the bridge's slot/riser when convenient."},
				{report.Fail, "the trained link differs from the expectations class's pcie_speed or pcie_width",
					"The node's card, slot or riser is not its class's: compare `lspci -vv -s <addr>` with a node of the class; if the hardware is meant, update the file or give the node its own class."},
				{report.Skip, "no function exposes its link (mlx4, virtual functions only) or only software RDMA", "Nothing to do; the link cannot be judged from sysfs."},
				{report.Error, "a link attribute could not be read or parsed", "Run where /sys is readable; the message names the file."},
			},
		},
		Run: runPCILink,
	})
}

// linkJudgement is one function's verdict.
type linkJudgement struct {
	status   report.Status
	detail   string
	evidence map[string]any
	observed string
	expected string
	summary  string
	remedy   bool // a degraded link (needs the reseat/BIOS remedy)
	// cur and curWidth are the trained link, when it could be read.
	cur      sysfs.LinkSpeed
	curWidth int
	deviates []string // the expectations-file keys the link deviates from, cited
}

func runPCILink(_ context.Context, env *Env) Result {
	s := env.Survey()
	if s.PCIErr != nil {
		return pciBusUnreadable(s.PCIErr)
	}
	lj := judgeLinks(env, s.NICs)
	var r Result
	if len(lj.judged) == 0 {
		r = noPhysicalFunction(s)
	} else {
		r = combineLinks(lj.judged)
	}
	r.Details, r.Evidence = lj.details, lj.evidence()
	return r
}

// pciBusUnreadable is the result when the PCI bus cannot be listed: no
// function can be judged, and the remedy says how to read the links by hand.
func pciBusUnreadable(err error) Result {
	r := errorf("could not list PCI functions: %v", err)
	r.Observed, r.Expected = "PCI bus unreadable", "a readable "+sysfs.PCIDevicesDir
	r.Remedy = "Run where sysfs is mounted and readable; by hand: `lspci -vv -s <address> | grep -e LnkCap -e LnkSta` for each RDMA NIC."
	return r
}

// linkJudgements are the physical functions' verdicts, in survey order,
// with the VFs that were passed over.
type linkJudgements struct {
	judged    []linkJudgement
	vfs       int
	details   []string
	functions []map[string]any
}

func (lj linkJudgements) evidence() map[string]any {
	return map[string]any{"functions": lj.functions, "vfs_skipped": lj.vfs}
}

// judgeLinks judges every physical function; a VF is only counted, since it
// has no link of its own (it shares its PF's).
func judgeLinks(env *Env, nics []NIC) linkJudgements {
	var lj linkJudgements
	for _, n := range nics {
		if n.Fn.PhysFn != "" {
			lj.vfs++
			continue
		}
		j := judgeLink(env.Host, n)
		applyPCIeExpect(pcieExpectOf(env, n), n, &j)
		lj.judged = append(lj.judged, j)
		lj.details = append(lj.details, j.detail)
		lj.functions = append(lj.functions, j.evidence)
	}
	if lj.vfs > 0 {
		lj.details = append(lj.details, fmt.Sprintf("%d SR-IOV VF(s) not judged: a VF has no link of its own, it shares its PF's", lj.vfs))
	}
	return lj
}

// noPhysicalFunction skips the check when there is no PF to judge: no RDMA
// NIC at all (perhaps software RDMA only), or only VFs whose PF is not here.
func noPhysicalFunction(s *Survey) Result {
	var r Result
	if len(s.NICs) == 0 {
		r = skip("no RDMA NIC function to judge")
		if len(s.SoftwareDevices()) > 0 {
			r.Summary += " (software RDMA only)"
		}
	} else {
		r = skip("only SR-IOV VFs: their link is the PF's, which this host does not show")
	}
	r.Observed, r.Expected = "no physical function to judge", "each RDMA PF at min(card max, path max)"
	return r
}

// combineLinks folds the functions' verdicts into the check's result: the
// worst status decides, with the shared precedence, and every function of
// that status is named in the summary; a function without link status
// (skip) ranks below a pass.
func combineLinks(judged []linkJudgement) Result {
	worst := judged[0].status
	for _, j := range judged[1:] {
		if worse(j.status, worst) {
			worst = j.status
		}
	}
	switch worst {
	case report.Fail:
		return degradedLinkResult(linksWithStatus(judged, report.Fail))
	case report.Error:
		return unreadableLinkResult(linksWithStatus(judged, report.Error))
	case report.Warn:
		return slowBridgeResult(linksWithStatus(judged, report.Warn))
	case report.Pass:
		return expectedLinkResult(linksWithStatus(judged, report.Pass), len(linksWithStatus(judged, report.Skip)))
	}
	return noLinkStatusResult()
}

// linksWithStatus are the verdicts of one status, in survey order.
func linksWithStatus(judged []linkJudgement, st report.Status) []linkJudgement {
	var out []linkJudgement
	for _, j := range judged {
		if j.status == st {
			out = append(out, j)
		}
	}
	return out
}

// degradedLinkResult fails on links below what their path allows (the
// reseat/BIOS remedy) or below what the expectations file asks for (the
// node is not built like its class).
func degradedLinkResult(f []linkJudgement) Result {
	r := fail(joinSummaries(f))
	r.Observed, r.Expected = f[0].observed, f[0].expected
	if !f[0].remedy {
		r.Remedy = pcieExpectRemedy(f[0])
		return r
	}
	r.Remedy = "Reseat the card with the host powered off, or move it to another slot; replace a riser, retimer or cable in the path. " +
		"Check the slot's electrical width and lane sharing in the board manual and the BIOS PCIe link speed and bifurcation settings. " +
		"Compare `lspci -vv -s " + f[0].evidence["address"].(string) + " | grep -e LnkCap -e LnkSta` and read `dmesg | grep -i -e 'PCIe bandwidth' -e AER`."
	if len(f[0].deviates) > 0 {
		r.Remedy += " If the card or slot was changed on purpose, update " + strings.Join(f[0].deviates, ", ") + " in the expectations file."
	}
	return r
}

// unreadableLinkResult is an error: a link attribute of a function or of a
// bridge that may limit it could not be read, so the link cannot be judged.
func unreadableLinkResult(e []linkJudgement) Result {
	r := errorf("%s", joinSummaries(e))
	r.Observed, r.Expected = "link attributes unreadable", "readable current_link_*/max_link_* of each function and bridge"
	if e[0].observed != "" {
		r.Observed = e[0].observed + " (a bridge unreadable)"
	}
	if e[0].expected != "" {
		r.Expected = e[0].expected
	}
	r.Remedy = "Run where /sys is readable (as root on a host with sysfs mounted); the details name the file. By hand: `lspci -vv -s " +
		e[0].evidence["address"].(string) + " | grep -e LnkCap -e LnkSta` and the same for each bridge above it (`lspci -tv`)."
	return r
}

// slowBridgeResult warns: the cards' own links are right, but a bridge
// above one trained below its capability without limiting the card.
func slowBridgeResult(w []linkJudgement) Result {
	r := warn(joinSummaries(w))
	r.Observed, r.Expected = w[0].observed, w[0].expected
	r.Remedy = "The card's own link is fine; check the bridge's riser or cable when convenient (`lspci -vv -s <bridge>`)."
	return r
}

// expectedLinkResult passes the functions at their expected link, noting
// how many others show no link status and so were not judged.
func expectedLinkResult(p []linkJudgement, unknown int) Result {
	r := pass(fmt.Sprintf("%d RDMA function(s) at their expected PCIe link: %s", len(p), distinctLinks(p)))
	r.Observed, r.Expected = distinctLinks(p), "each function at min(card max, path max)"
	if unknown > 0 {
		r.Summary += fmt.Sprintf("; %d without link status (not judged)", unknown)
	}
	return r
}

// noLinkStatusResult skips when no function exposes its link (mlx4): sysfs
// cannot tell, lspci can.
func noLinkStatusResult() Result {
	r := skip("no RDMA function exposes its PCIe link status (current_link_* absent, as on mlx4): cannot judge")
	r.Observed, r.Expected = "no link status", "each RDMA PF at min(card max, path max)"
	r.Remedy = "Read it by hand: `lspci -vv -s <address> | grep -e LnkCap -e LnkSta`."
	return r
}

// applyPCIeExpect fails a function whose trained link differs from the
// expectations class's pcie_speed/pcie_width, whatever the hardware rule
// said; a link that could not be read is left as it was, with a note that
// the file's value could not be checked.
func applyPCIeExpect(pe pcieExpect, n NIC, j *linkJudgement) {
	if pe.speed == nil && pe.width == nil {
		return
	}
	var cites []string
	for _, c := range []string{pe.speed.Cite(), pe.width.Cite()} {
		if c != "" {
			cites = append(cites, c)
		}
	}
	j.evidence["expect"] = cites
	if !j.cur.Known() || j.curWidth == 0 {
		j.detail += fmt.Sprintf("; %s not checked: the trained link could not be read", strings.Join(cites, ", "))
		return
	}
	bad, keys := judgePCIeExpect(pe, j.cur, j.curWidth)
	if len(bad) == 0 {
		j.detail += "; as " + strings.Join(cites, ", ") + " expects"
		return
	}
	msg := strings.Join(bad, ", ")
	if j.status == report.Fail {
		j.summary += "; " + msg
	} else {
		j.summary = fmt.Sprintf("%s trained at %s x%d: %s", n.Fn.Address, j.cur.Short(), j.curWidth, msg)
		j.expected = expectedLinkText(pe, j)
	}
	j.detail += "; DEVIATES from the expectations: " + msg
	if j.status != report.Fail {
		j.evidence["status"] = "deviates"
	}
	j.status, j.deviates = report.Fail, keys
}

// pcieExpectRemedy is the fix for a link that is as good as its path
// allows but not what the class expects: the node is not built like its
// class (another card, slot or riser), or the file is wrong.
func pcieExpectRemedy(j linkJudgement) string {
	return fmt.Sprintf("The link is the best this card and slot allow, but not what %s expects: this node's card, slot or riser differs "+
		"from its class's. Compare `lspci -vv -s %s | grep -e LnkCap -e LnkSta` with a node of the class; if this hardware is meant, "+
		"update the expectations file (or give the node a class of its own).", strings.Join(j.deviates, ", "), j.evidence["address"])
}

// expectedLinkText is the link the expectations ask for, filling in from
// the hardware rule what the file leaves open.
func expectedLinkText(pe pcieExpect, j *linkJudgement) string {
	speed, width := j.cur.Short(), fmt.Sprintf("x%d", j.curWidth)
	if pe.speed != nil {
		speed = pe.speed.V
	}
	if pe.width != nil {
		width = fmt.Sprintf("x%d", pe.width.V)
	}
	return speed + " " + width
}

func joinSummaries(js []linkJudgement) string {
	var parts []string
	for _, j := range js {
		parts = append(parts, j.summary)
	}
	return strings.Join(parts, "; ")
}

func distinctLinks(js []linkJudgement) string {
	var out []string
	for _, j := range js {
		out = appendUnique(out, j.observed)
	}
	return strings.Join(out, ", ")
}

// judgeLink compares one function's trained link with the best its path
// allows. Each outcome is its own small function below, tried in order:
// unreadable, not trained, no expectation, degraded, limited by a bridge,
// a slower bridge, as expected.
func judgeLink(h *sysfs.Host, n NIC) linkJudgement {
	u := newLinkUnit(h.PCIPathOf(n.Fn), n)
	j := linkJudgement{evidence: u.evidence()}
	if u.limit.known() {
		j.expected = u.limit.String()
	}
	fn := u.path.Function
	if len(fn.Problems) > 0 && !fn.HasCur {
		return u.unreadable(j)
	}
	if !fn.HasCur || !fn.Cur.Known() || fn.CurWidth == 0 {
		return u.untrained(j)
	}
	j.observed = fmt.Sprintf("%s x%d", fn.Cur.Short(), fn.CurWidth)
	j.cur, j.curWidth = fn.Cur, fn.CurWidth
	if !u.limit.known() {
		return u.noExpectation(j)
	}
	if bad := u.shortfalls(); len(bad) > 0 {
		return u.degraded(j, bad)
	}
	if j, judged := u.judgeUpstream(j); judged {
		return j
	}
	return u.asExpected(j)
}

// pathLimit is the best link a function's path allows: the smallest max
// speed and, separately, the smallest max width of the card and every
// bridge above it, with what sets each ("card" or "bridge <address>").
type pathLimit struct {
	speed            sysfs.LinkSpeed
	width            int
	speedBy, widthBy string
}

// known reports whether both the speed and the width could be worked out.
func (l pathLimit) known() bool { return l.speed.Known() && l.width > 0 }

func (l pathLimit) String() string { return fmt.Sprintf("%s x%d", l.speed.Short(), l.width) }

// expectedLink is min(the card's max, every bridge's max) for speed and for
// width separately: a Gen5 card in a Gen4 slot is expected at Gen4. A card
// without max_link_* starts from nothing and takes the bridges' values.
func expectedLink(p sysfs.PCIPath) pathLimit {
	var l pathLimit
	if fn := p.Function; fn.HasMax {
		l = pathLimit{speed: fn.Max, width: fn.MaxWidth, speedBy: "card", widthBy: "card"}
	}
	for _, b := range p.Upstream {
		if !b.HasMax {
			continue
		}
		if b.Max.Known() && (!l.speed.Known() || b.Max.GTs < l.speed.GTs) {
			l.speed, l.speedBy = b.Max, "bridge "+b.Address
		}
		if b.MaxWidth > 0 && (l.width == 0 || b.MaxWidth < l.width) {
			l.width, l.widthBy = b.MaxWidth, "bridge "+b.Address
		}
	}
	return l
}

// linkUnit is one function under judgement: its path to the root port, the
// link that path allows, and what of the bridges could not be read.
type linkUnit struct {
	n              NIC
	name           string // "<address> <product>" for the details
	path           sysfs.PCIPath
	limit          pathLimit
	bridgeProblems []string
}

func newLinkUnit(p sysfs.PCIPath, n NIC) linkUnit {
	u := linkUnit{n: n, name: fmt.Sprintf("%s %s", n.Fn.Address, n.Product), path: p, limit: expectedLink(p)}
	for _, b := range p.Upstream {
		u.bridgeProblems = append(u.bridgeProblems, b.Problems...)
	}
	return u
}

// evidence records what was read of the function and its bridges, and the
// expected link with what limits it when it is known.
func (u linkUnit) evidence() map[string]any {
	ev := map[string]any{"address": u.n.Fn.Address, "product": u.n.Product}
	var up []map[string]any
	for _, b := range u.path.Upstream {
		up = append(up, bridgeEvidence(b))
	}
	ev["upstream"] = up
	fn := u.path.Function
	if fn.HasCur {
		ev["current_speed"], ev["current_width"] = fn.Cur.Short(), fn.CurWidth
	}
	if fn.HasMax {
		ev["max_speed"], ev["max_width"] = fn.Max.Short(), fn.MaxWidth
	}
	if u.limit.known() {
		ev["expected_speed"], ev["expected_width"] = u.limit.speed.Short(), u.limit.width
		ev["limited_by"] = map[string]string{"speed": u.limit.speedBy, "width": u.limit.widthBy}
	}
	return ev
}

// bridgeEvidence is one bridge's link as read: its max and current values,
// each pair only when both halves could be read.
func bridgeEvidence(b sysfs.LinkStatus) map[string]any {
	bev := map[string]any{"address": b.Address}
	if b.HasMax {
		bev["max_speed"], bev["max_width"] = b.Max.Short(), b.MaxWidth
	}
	if b.HasCur {
		bev["current_speed"], bev["current_width"] = b.Cur.Short(), b.CurWidth
	}
	return bev
}

// capNote says what the card is capable of and, when a bridge sets the
// expected link rather than the card, what limits it.
func (u linkUnit) capNote() string {
	fn, l := u.path.Function, u.limit
	note := "card max unknown"
	if fn.HasMax && fn.Max.Known() {
		note = fmt.Sprintf("card max %s x%d", fn.Max.Short(), fn.MaxWidth)
	}
	if l.speedBy != "card" || l.widthBy != "card" {
		note += fmt.Sprintf("; path allows %s x%d (speed limited by %s, width by %s)", l.speed.Short(), l.width, l.speedBy, l.widthBy)
	}
	return note
}

// unreadable is an error: the function's own link status could not be read.
func (u linkUnit) unreadable(j linkJudgement) linkJudgement {
	j.status = report.Error
	j.summary = fmt.Sprintf("%s: link status unreadable", u.n.Fn.Address)
	j.detail = fmt.Sprintf("%s: %s", u.name, strings.Join(u.path.Function.Problems, "; "))
	j.evidence["status"] = "error"
	return j
}

// untrained is unknown, not failed: the function exposes no link status
// (mlx4) or one that is not a trained link.
func (u linkUnit) untrained(j linkJudgement) linkJudgement {
	fn := u.path.Function
	j.status = report.Skip
	why := "no current_link_speed/current_link_width (the driver or kernel does not expose it, as on mlx4)"
	if fn.HasCur {
		why = fmt.Sprintf("link status reads %q x%d (not trained or not reported)", fn.Cur.Raw, fn.CurWidth)
	}
	j.detail = fmt.Sprintf("%s: unknown — %s", u.name, why)
	j.summary = u.n.Fn.Address + ": unknown"
	j.evidence["status"] = "unknown"
	return j
}

// noExpectation is unknown: the link trained, but neither the card nor a
// bridge says what it could train at.
func (u linkUnit) noExpectation(j linkJudgement) linkJudgement {
	j.status = report.Skip
	j.detail = fmt.Sprintf("%s: trained at %s; no max_link_* on the card or its bridges, so the expected link is unknown", u.name, j.observed)
	j.summary = u.n.Fn.Address + ": expected link unknown"
	j.evidence["status"] = "unknown"
	return j
}

// shortfalls name how the function's trained link falls below the
// expected one, in speed and in width.
func (u linkUnit) shortfalls() []string {
	fn, l := u.path.Function, u.limit
	var bad []string
	if fn.Cur.GTs < l.speed.GTs {
		bad = append(bad, fmt.Sprintf("speed %s below %s", fn.Cur.String(), l.speed.String()))
	}
	if fn.CurWidth < l.width {
		bad = append(bad, fmt.Sprintf("width x%d below x%d", fn.CurWidth, l.width))
	}
	return bad
}

// degraded fails a link below what its path allows. An unreadable bridge
// may be the one that limits the card, so then it is an error instead: the
// link is not called degraded on half the path.
func (u linkUnit) degraded(j linkJudgement, bad []string) linkJudgement {
	addr := u.n.Fn.Address
	if len(u.bridgeProblems) > 0 {
		j.status = report.Error
		j.summary = fmt.Sprintf("%s trained at %s, below %s, but a bridge's link could not be read", addr, j.observed, j.expected)
		j.detail = fmt.Sprintf("%s: trained at %s, expected %s from what could be read (%s); %s", u.name, j.observed, j.expected, u.capNote(), strings.Join(u.bridgeProblems, "; "))
		j.evidence["status"] = "error"
		return j
	}
	j.status, j.remedy = report.Fail, true
	j.summary = fmt.Sprintf("%s trained at %s, expected %s", addr, j.observed, j.expected)
	j.detail = fmt.Sprintf("%s: DEGRADED — trained at %s, expected %s: %s (%s)", u.name, j.observed, j.expected, strings.Join(bad, ", "), u.capNote())
	j.evidence["status"] = "degraded"
	return j
}

// judgeUpstream checks the links above a function whose own link is right:
// every one on the way to the root port must carry at least as much. The
// first bridge that leaves less bandwidth than the card's link fails it;
// otherwise the first one merely slower than the card's link warns. It
// reports whether a bridge decided the verdict.
func (u linkUnit) judgeUpstream(j linkJudgement) (linkJudgement, bool) {
	need := float64(u.limit.width) * u.limit.speed.LaneGBps()
	for _, b := range u.path.Upstream {
		if !b.HasCur || !b.Cur.Known() || b.CurWidth == 0 {
			continue
		}
		if b.Cur.GTs >= u.limit.speed.GTs && b.CurWidth >= u.limit.width {
			continue
		}
		got := float64(b.CurWidth) * b.Cur.LaneGBps()
		msg := fmt.Sprintf("bridge %s link trained at %s x%d (≈%.1f GB/s) below the card's expected %s (≈%.1f GB/s)",
			b.Address, b.Cur.Short(), b.CurWidth, got, j.expected, need)
		if got < need {
			return u.limitedByBridge(j, b, msg), true
		}
		if j.status != report.Warn {
			j = u.slowerBridge(j, msg)
		}
	}
	return j, j.status == report.Warn
}

// limitedByBridge fails a function whose own link is right but a bridge
// above it carries less than that link: the card cannot use its bandwidth.
func (u linkUnit) limitedByBridge(j linkJudgement, b sysfs.LinkStatus, msg string) linkJudgement {
	j.status, j.remedy = report.Fail, true
	j.summary = fmt.Sprintf("%s limited by %s", u.n.Fn.Address, msg)
	j.detail = fmt.Sprintf("%s: card trained at %s but the %s", u.name, j.observed, msg)
	j.observed = fmt.Sprintf("%s x%d at %s", b.Cur.Short(), b.CurWidth, b.Address)
	j.evidence["status"] = "degraded_upstream"
	return j
}

// slowerBridge warns: a bridge trained below the card's link in speed or
// width, but still carries as much bandwidth.
func (u linkUnit) slowerBridge(j linkJudgement, msg string) linkJudgement {
	j.status = report.Warn
	j.summary = fmt.Sprintf("%s: %s, without limiting the card", u.n.Fn.Address, msg)
	j.detail = fmt.Sprintf("%s: at %s as expected; %s (not limiting it)", u.name, j.observed, msg)
	j.evidence["status"] = "bridge_degraded"
	return j
}

// asExpected passes the function, noting whatever could not be read that
// did not stand in the way of the judgement.
func (u linkUnit) asExpected(j linkJudgement) linkJudgement {
	j.status = report.Pass
	j.detail = fmt.Sprintf("%s: %s as expected (%s)", u.name, j.observed, u.capNote())
	ps := append(append([]string(nil), u.path.Function.Problems...), u.bridgeProblems...)
	if len(ps) > 0 {
		j.detail += "; " + strings.Join(ps, "; ")
	}
	j.evidence["status"] = "ok"
	return j
}
