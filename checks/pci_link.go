package checks

import (
	"context"
	"fmt"
	"strconv"
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
				"current_link_* files (mlx4) are unknown, not failed. A VF in a virtual machine on a Hyper-V/Azure vPCI bus (the guest sees " +
				"no PF and no path above it) is counted, not judged: its link is the PF's, which only the platform sees. With an expectations file (--expect), a function whose trained link differs " +
				"from its RDMA device's pcie_speed or pcie_width — slower or faster — fails, naming the line.",
			Why: "A card that trained at x8 instead of x16, or at Gen3 in a Gen4 slot, loses half its bandwidth to the host: RDMA still " +
				"works, benchmarks and jobs just run slow, and nothing else reports it. The usual causes are a card not fully seated, a riser " +
				"or retimer, a slot wired narrower than it looks, or a BIOS link-speed setting.",
		},
		Run: runPCILink,
	})
}

// pci.link's findings: one or two about each RDMA physical function (its
// PCI address), or one about the host when there is none to judge.
// {function} is "<address> <product>", {link} the trained link
// ("8.0 GT/s x8"), {expected} the best the function's path allows.
const (
	linkReseatFix = "Reseat the card with the host powered off, or move it to another slot; replace a riser, retimer or cable in the path. " +
		"Check the slot's electrical width and lane sharing in the board manual and the BIOS PCIe link speed and bifurcation settings. " +
		"Compare `lspci -vv -s {address} | grep -e LnkCap -e LnkSta` and read `dmesg | grep -i -e 'PCIe bandwidth' -e AER`."
	linkUnreadableFix = "Run where /sys is readable (as root on a host with sysfs mounted); the details name the file. By hand: `lspci -vv -s " +
		"{address} | grep -e LnkCap -e LnkSta` and the same for each bridge above it (`lspci -tv`)."
)

var (
	linkExpected = declare(Finding{ID: "pci.link/expected", Status: report.Pass,
		When:    "the function trained at min(card max, every bridge's max) in speed and width, and no bridge above it is slower",
		Message: "{function}: {link} as expected ({capacity})"})
	linkDegraded = declare(Finding{ID: "pci.link/degraded", Status: report.Fail,
		When:    "the function trained below min(card max, slot/bridge max) in speed or width",
		Message: "{address} trained at {link}, expected {expected}", Fix: linkReseatFix})
	linkLimitedByBridge = declare(Finding{ID: "pci.link/limited-by-bridge", Status: report.Fail,
		When:    "the function's own link is right, but a bridge on the way to the root port trained below it and leaves less bandwidth",
		Message: "{address} limited by bridge {bridge} link trained at {bridge_link} (≈{bridge_gbps} GB/s) below the card's expected {expected} (≈{need_gbps} GB/s)",
		Fix: "The card's own link is right; the bridge {bridge} above it carries less: the same causes one level up — the switch or its uplink (riser, cable, retimer). " +
			"Compare `lspci -vv -s {bridge} | grep -e LnkCap -e LnkSta` and read `dmesg | grep -i -e 'PCIe bandwidth' -e AER`."})
	linkSlowBridge = declare(Finding{ID: "pci.link/slow-bridge", Status: report.Warn,
		When:    "a bridge above the function trained below the card's link in speed or width, but still carries as much bandwidth",
		Message: "{address}: bridge {bridge} link trained at {bridge_link} (≈{bridge_gbps} GB/s) below the card's expected {expected} (≈{need_gbps} GB/s), without limiting the card",
		Fix:     "The card's own link is fine; check the bridge's riser or cable when convenient (`lspci -vv -s {bridge}`)."})
	linkDeviates = declare(Finding{ID: "pci.link/deviates", Status: report.Fail,
		When:    "the trained link differs from the expectations class's pcie_speed or pcie_width (slower or faster)",
		Message: "{address} trained at {link}: {deviation}",
		Fix: "The link is not what {keys} expects: this node's card, slot or riser differs from its class's, or the link trained low. " +
			"Compare `lspci -vv -s {address} | grep -e LnkCap -e LnkSta` with a node of the class; if this hardware is meant, " +
			"update the expectations file (or give the node a class of its own)."})
	linkUnreadable = declare(Finding{ID: "pci.link/unreadable", Status: report.Error,
		When:    "the function's own link attributes could not be read or parsed",
		Message: "{address}: link status unreadable", Fix: linkUnreadableFix})
	linkBridgeUnreadable = declare(Finding{ID: "pci.link/bridge-unreadable", Status: report.Error,
		When:    "the function trained below what could be read of its path, and a bridge's link (which may be the limit) could not be read",
		Message: "{address} trained at {link}, below {expected}, but a bridge's link could not be read", Fix: linkUnreadableFix})
	linkNoLinkFiles = declare(Finding{ID: "pci.link/no-link-files", Status: report.Skip,
		When:    "the function exposes no current_link_* files (mlx4): its link is unknown, not failed",
		Message: "{function}: unknown — no current_link_speed/current_link_width (the driver or kernel does not expose it, as on mlx4)"})
	linkNotTrained = declare(Finding{ID: "pci.link/not-trained", Status: report.Skip,
		When:    "the function's link status reads no trained link (Unknown speed, width 0)",
		Message: "{function}: unknown — link status reads {speed} x{width} (not trained or not reported)"})
	linkNoExpectation = declare(Finding{ID: "pci.link/no-expectation", Status: report.Skip,
		When:    "the link trained, but neither the card nor a bridge has max_link_* to say what it could train at",
		Message: "{function}: trained at {link}; no max_link_* on the card or its bridges, so the expected link is unknown"})
	linkNoStatus = declare(Finding{ID: "pci.link/no-link-status", Status: report.Skip,
		When:    "no function can be judged: none exposes its trained link (mlx4), or none says what it could train at",
		Message: "no RDMA function exposes its PCIe link status (current_link_* absent, as on mlx4): cannot judge",
		Fix:     "Read it by hand: `lspci -vv -s <address> | grep -e LnkCap -e LnkSta`."})
	linkNoNIC = declare(Finding{ID: "pci.link/no-nic", Status: report.Skip,
		When:    "the host has no RDMA NIC function",
		Message: "no RDMA NIC function to judge"})
	linkSoftwareOnly = declare(Finding{ID: "pci.link/software-only", Status: report.Skip,
		When:    "the host has only software RDMA (rxe, siw): no PCIe link to judge",
		Message: "no RDMA NIC function to judge (software RDMA only)"})
	linkVFsOnly = declare(Finding{ID: "pci.link/vfs-only", Status: report.Skip,
		When:    "the host shows only SR-IOV VFs (a VM): a VF's link is its PF's, which the host does not show",
		Message: "only SR-IOV VFs: their link is the PF's, which this host does not show"})
	linkBusUnreadable = declare(Finding{ID: "pci.link/bus-unreadable", Status: report.Error,
		When:    "the PCI bus (/sys/bus/pci/devices) could not be listed",
		Message: "could not list PCI functions: {cause}",
		Fix:     "Run where sysfs is mounted and readable; by hand: `lspci -vv -s <address> | grep -e LnkCap -e LnkSta` for each RDMA NIC."})
)

// linkJudgement is one function's verdict.
type linkJudgement struct {
	status   report.Status
	detail   string
	evidence map[string]any
	observed string
	expected string
	summary  string // the first finding's message
	// findings are the declared findings about the function: its link's,
	// and a deviation from the expectations file.
	findings []report.Finding
	// cur and curWidth are the trained link, when it could be read.
	cur      sysfs.LinkSpeed
	curWidth int
}

// found sets the judgement's finding about the function.
func (j *linkJudgement) found(f report.Finding) {
	j.status, j.summary, j.findings = f.Status, f.Message, []report.Finding{f}
}

func runPCILink(_ context.Context, env *Env) Result {
	s := env.Survey()
	if s.PCIErr != nil {
		r := linkBusUnreadable.result("", Slots{"cause": s.PCIErr.Error()})
		r.Observed, r.Expected = "PCI bus unreadable", "a readable "+sysfs.PCIDevicesDir
		return r
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
	m := env.Model()
	for _, n := range nics {
		if n.Fn.PhysFn != "" || guestVFHidden(m, n.Fn) {
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

// guestVFHidden reports whether fn is a VF in a virtual machine whose PCIe
// path the hypervisor hides (Hyper-V's vPCI): the guest sees neither its
// PF nor a link of its own to judge. A VF below a guest's emulated root
// port (QEMU) keeps the link the guest sees.
func guestVFHidden(m *HostModel, fn sysfs.PCIFunction) bool {
	_, hidden := sysfs.HiddenPCIePath(fn)
	return hidden && m.guestVFAt(fn.Address)
}

// noPhysicalFunction skips the check when there is no PF to judge: no RDMA
// NIC at all (perhaps software RDMA only), or only VFs whose PF is not here.
func noPhysicalFunction(s *Survey) Result {
	f := linkVFsOnly
	switch {
	case len(s.NICs) == 0 && len(s.SoftwareDevices()) > 0:
		f = linkSoftwareOnly
	case len(s.NICs) == 0:
		f = linkNoNIC
	}
	r := f.result("", nil)
	r.Observed, r.Expected = "no physical function to judge", "each RDMA PF at min(card max, path max)"
	return r
}

// pci.link's headlines: the summary when every function judged passes.
const (
	linkPassHead   headline = "{count} RDMA function(s) at their expected PCIe link: {links}"
	linkUnknownEnd headline = "; {count} without link status (not judged)"
)

// combineLinks folds the functions' findings into the check's result with
// the shared precedence (combineFindings): the findings of the worst status
// are the summary, each kind's fix for its first function the remedy. The
// observed and expected values are those of the first function of that
// status. All functions at their expected link pass with a count; none
// judged (no link status anywhere) skips.
func combineLinks(judged []linkJudgement) Result {
	var fs []report.Finding
	for _, j := range judged {
		fs = append(fs, j.findings...)
	}
	r := combineFindings(fs, true)
	first := linksWithStatus(judged, r.Status)[0]
	r.Observed, r.Expected = first.observed, first.expected
	switch r.Status {
	case report.Error:
		r.Observed, r.Expected = "link attributes unreadable", "readable current_link_*/max_link_* of each function and bridge"
		if first.observed != "" {
			r.Observed = first.observed + " (a bridge unreadable)"
		}
		if first.expected != "" {
			r.Expected = first.expected
		}
	case report.Pass:
		p := linksWithStatus(judged, report.Pass)
		r.Summary = linkPassHead.render(Slots{"count": fmt.Sprint(len(p)), "links": distinctLinks(p)})
		r.Observed, r.Expected = distinctLinks(p), "each function at min(card max, path max)"
		if unknown := len(linksWithStatus(judged, report.Skip)); unknown > 0 {
			r.Summary += linkUnknownEnd.render(Slots{"count": fmt.Sprint(unknown)})
		}
	case report.Skip:
		host := linkNoStatus.result("", nil)
		host.Findings = append(host.Findings, fs...)
		host.Observed, host.Expected = "no link status", "each RDMA PF at min(card max, path max)"
		return host
	}
	return r
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
	if j.status != report.Fail {
		j.expected = expectedLinkText(pe, j)
		j.evidence["status"] = "deviates"
	}
	msg := strings.Join(bad, ", ")
	j.detail += "; DEVIATES from the expectations: " + msg
	f := linkDeviates.At(n.Fn.Address, Slots{"address": n.Fn.Address, "link": fmt.Sprintf("%s x%d", j.cur.Short(), j.curWidth),
		"deviation": msg, "keys": strings.Join(keys, ", ")})
	if j.status == report.Fail {
		// The link is also below what its path allows: that finding leads.
		j.findings = append(j.findings, f)
		return
	}
	j.found(f)
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

// slots are the slots every finding about the function may use.
func (u linkUnit) slots(j linkJudgement) Slots {
	return Slots{"address": u.n.Fn.Address, "function": u.name, "link": j.observed, "expected": j.expected}
}

// unreadable is an error: the function's own link status could not be read.
func (u linkUnit) unreadable(j linkJudgement) linkJudgement {
	j.found(linkUnreadable.At(u.n.Fn.Address, u.slots(j)))
	j.detail = fmt.Sprintf("%s: %s", u.name, strings.Join(u.path.Function.Problems, "; "))
	j.evidence["status"] = "error"
	return j
}

// untrained is unknown, not failed: the function exposes no link status
// (mlx4) or one that is not a trained link.
func (u linkUnit) untrained(j linkJudgement) linkJudgement {
	fn := u.path.Function
	if fn.HasCur {
		j.found(linkNotTrained.At(u.n.Fn.Address, u.slots(j).with("speed", strconv.Quote(fn.Cur.Raw), "width", fmt.Sprint(fn.CurWidth))))
	} else {
		j.found(linkNoLinkFiles.At(u.n.Fn.Address, u.slots(j)))
	}
	j.detail = j.summary
	j.evidence["status"] = "unknown"
	return j
}

// noExpectation is unknown: the link trained, but neither the card nor a
// bridge says what it could train at.
func (u linkUnit) noExpectation(j linkJudgement) linkJudgement {
	j.found(linkNoExpectation.At(u.n.Fn.Address, u.slots(j)))
	j.detail = j.summary
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
	if len(u.bridgeProblems) > 0 {
		j.found(linkBridgeUnreadable.At(u.n.Fn.Address, u.slots(j)))
		j.detail = fmt.Sprintf("%s: trained at %s, expected %s from what could be read (%s); %s", u.name, j.observed, j.expected, u.capNote(), strings.Join(u.bridgeProblems, "; "))
		j.evidence["status"] = "error"
		return j
	}
	j.found(linkDegraded.At(u.n.Fn.Address, u.slots(j)))
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
		slots := u.slots(j).with("bridge", b.Address, "bridge_link", fmt.Sprintf("%s x%d", b.Cur.Short(), b.CurWidth),
			"bridge_gbps", fmt.Sprintf("%.1f", got), "need_gbps", fmt.Sprintf("%.1f", need))
		msg := fmt.Sprintf("bridge %s link trained at %s (≈%s GB/s) below the card's expected %s (≈%s GB/s)",
			b.Address, slots["bridge_link"], slots["bridge_gbps"], j.expected, slots["need_gbps"])
		if got < need {
			return u.limitedByBridge(j, b, slots, msg), true
		}
		if j.status != report.Warn {
			j = u.slowerBridge(j, slots, msg)
		}
	}
	return j, j.status == report.Warn
}

// limitedByBridge fails a function whose own link is right but a bridge
// above it carries less than that link: the card cannot use its bandwidth.
func (u linkUnit) limitedByBridge(j linkJudgement, b sysfs.LinkStatus, slots Slots, msg string) linkJudgement {
	j.found(linkLimitedByBridge.At(u.n.Fn.Address, slots))
	j.detail = fmt.Sprintf("%s: card trained at %s but the %s", u.name, j.observed, msg)
	j.observed = fmt.Sprintf("%s x%d at %s", b.Cur.Short(), b.CurWidth, b.Address)
	j.evidence["status"] = "degraded_upstream"
	return j
}

// slowerBridge warns: a bridge trained below the card's link in speed or
// width, but still carries as much bandwidth.
func (u linkUnit) slowerBridge(j linkJudgement, slots Slots, msg string) linkJudgement {
	j.found(linkSlowBridge.At(u.n.Fn.Address, slots))
	j.detail = fmt.Sprintf("%s: at %s as expected; %s (not limiting it)", u.name, j.observed, msg)
	j.evidence["status"] = "bridge_degraded"
	return j
}

// asExpected passes the function, noting whatever could not be read that
// did not stand in the way of the judgement.
func (u linkUnit) asExpected(j linkJudgement) linkJudgement {
	j.found(linkExpected.At(u.n.Fn.Address, u.slots(j).with("capacity", u.capNote())))
	j.detail = j.summary
	ps := append(append([]string(nil), u.path.Function.Problems...), u.bridgeProblems...)
	if len(ps) > 0 {
		j.detail += "; " + strings.Join(ps, "; ")
	}
	j.evidence["status"] = "ok"
	return j
}
