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
		r := errorf("could not list PCI functions: %v", s.PCIErr)
		r.Observed, r.Expected = "PCI bus unreadable", "a readable "+sysfs.PCIDevicesDir
		r.Remedy = "Run where sysfs is mounted and readable; by hand: `lspci -vv -s <address> | grep -e LnkCap -e LnkSta` for each RDMA NIC."
		return r
	}
	var (
		judged   []linkJudgement
		vfs      int
		details  []string
		evidence []map[string]any
	)
	for _, n := range s.NICs {
		if n.Fn.PhysFn != "" {
			vfs++
			continue
		}
		j := judgeLink(env.Host, n)
		applyPCIeExpect(pcieExpectOf(env, n), n, &j)
		judged = append(judged, j)
		details = append(details, j.detail)
		evidence = append(evidence, j.evidence)
	}
	if vfs > 0 {
		details = append(details, fmt.Sprintf("%d SR-IOV VF(s) not judged: a VF has no link of its own, it shares its PF's", vfs))
	}
	ev := map[string]any{"functions": evidence, "vfs_skipped": vfs}
	if len(judged) == 0 {
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
		r.Details, r.Evidence = details, ev
		return r
	}
	worst := func(st report.Status) []linkJudgement {
		var out []linkJudgement
		for _, j := range judged {
			if j.status == st {
				out = append(out, j)
			}
		}
		return out
	}
	var r Result
	switch {
	case len(worst(report.Fail)) > 0:
		f := worst(report.Fail)
		r = fail(joinSummaries(f))
		r.Observed, r.Expected = f[0].observed, f[0].expected
		if !f[0].remedy {
			r.Remedy = pcieExpectRemedy(f[0])
			break
		}
		r.Remedy = "Reseat the card with the host powered off, or move it to another slot; replace a riser, retimer or cable in the path. " +
			"Check the slot's electrical width and lane sharing in the board manual and the BIOS PCIe link speed and bifurcation settings. " +
			"Compare `lspci -vv -s " + f[0].evidence["address"].(string) + " | grep -e LnkCap -e LnkSta` and read `dmesg | grep -i -e 'PCIe bandwidth' -e AER`."
		if len(f[0].deviates) > 0 {
			r.Remedy += " If the card or slot was changed on purpose, update " + strings.Join(f[0].deviates, ", ") + " in the expectations file."
		}
	case len(worst(report.Error)) > 0:
		e := worst(report.Error)
		r = errorf("%s", joinSummaries(e))
		r.Observed, r.Expected = "link attributes unreadable", "readable current_link_*/max_link_* of each function and bridge"
		if e[0].observed != "" {
			r.Observed = e[0].observed + " (a bridge unreadable)"
		}
		if e[0].expected != "" {
			r.Expected = e[0].expected
		}
		r.Remedy = "Run where /sys is readable (as root on a host with sysfs mounted); the details name the file. By hand: `lspci -vv -s " +
			e[0].evidence["address"].(string) + " | grep -e LnkCap -e LnkSta` and the same for each bridge above it (`lspci -tv`)."
	case len(worst(report.Warn)) > 0:
		w := worst(report.Warn)
		r = warn(joinSummaries(w))
		r.Observed, r.Expected = w[0].observed, w[0].expected
		r.Remedy = "The card's own link is fine; check the bridge's riser or cable when convenient (`lspci -vv -s <bridge>`)."
	case len(worst(report.Pass)) > 0:
		p := worst(report.Pass)
		r = pass(fmt.Sprintf("%d RDMA function(s) at their expected PCIe link: %s", len(p), distinctLinks(p)))
		r.Observed, r.Expected = distinctLinks(p), "each function at min(card max, path max)"
		if u := worst(report.Skip); len(u) > 0 {
			r.Summary += fmt.Sprintf("; %d without link status (not judged)", len(u))
		}
	default:
		r = skip("no RDMA function exposes its PCIe link status (current_link_* absent, as on mlx4): cannot judge")
		r.Observed, r.Expected = "no link status", "each RDMA PF at min(card max, path max)"
		r.Remedy = "Read it by hand: `lspci -vv -s <address> | grep -e LnkCap -e LnkSta`."
	}
	r.Details, r.Evidence = details, ev
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

// judgeLink compares one function's trained link with the best its path allows.
func judgeLink(h *sysfs.Host, n NIC) linkJudgement {
	p := h.PCIPathOf(n.Fn)
	fn := p.Function
	name := fmt.Sprintf("%s %s", n.Fn.Address, n.Product)
	ev := map[string]any{"address": n.Fn.Address, "product": n.Product}
	j := linkJudgement{evidence: ev}
	problems := append([]string(nil), fn.Problems...)
	var bridgeProblems []string

	// Expected: the smallest max along the path, for speed and width.
	exp := fn.Max
	expW := fn.MaxWidth
	limitS, limitW := "card", "card"
	if !fn.HasMax {
		exp, expW, limitS, limitW = sysfs.LinkSpeed{}, 0, "", ""
	}
	var up []map[string]any
	for _, b := range p.Upstream {
		bridgeProblems = append(bridgeProblems, b.Problems...)
		bev := map[string]any{"address": b.Address}
		if b.HasMax {
			bev["max_speed"], bev["max_width"] = b.Max.Short(), b.MaxWidth
			if b.Max.Known() && (!exp.Known() || b.Max.GTs < exp.GTs) {
				exp, limitS = b.Max, "bridge "+b.Address
			}
			if b.MaxWidth > 0 && (expW == 0 || b.MaxWidth < expW) {
				expW, limitW = b.MaxWidth, "bridge "+b.Address
			}
		}
		if b.HasCur {
			bev["current_speed"], bev["current_width"] = b.Cur.Short(), b.CurWidth
		}
		up = append(up, bev)
	}
	ev["upstream"] = up
	if fn.HasCur {
		ev["current_speed"], ev["current_width"] = fn.Cur.Short(), fn.CurWidth
	}
	if fn.HasMax {
		ev["max_speed"], ev["max_width"] = fn.Max.Short(), fn.MaxWidth
	}
	if exp.Known() && expW > 0 {
		ev["expected_speed"], ev["expected_width"] = exp.Short(), expW
		ev["limited_by"] = map[string]string{"speed": limitS, "width": limitW}
		j.expected = fmt.Sprintf("%s x%d", exp.Short(), expW)
	}

	if len(problems) > 0 && !fn.HasCur {
		j.status = report.Error
		j.summary = fmt.Sprintf("%s: link status unreadable", n.Fn.Address)
		j.detail = fmt.Sprintf("%s: %s", name, strings.Join(problems, "; "))
		ev["status"] = "error"
		return j
	}
	if !fn.HasCur || !fn.Cur.Known() || fn.CurWidth == 0 {
		j.status = report.Skip
		why := "no current_link_speed/current_link_width (the driver or kernel does not expose it, as on mlx4)"
		if fn.HasCur {
			why = fmt.Sprintf("link status reads %q x%d (not trained or not reported)", fn.Cur.Raw, fn.CurWidth)
		}
		j.detail = fmt.Sprintf("%s: unknown — %s", name, why)
		j.summary = n.Fn.Address + ": unknown"
		ev["status"] = "unknown"
		return j
	}
	j.observed = fmt.Sprintf("%s x%d", fn.Cur.Short(), fn.CurWidth)
	j.cur, j.curWidth = fn.Cur, fn.CurWidth
	if !exp.Known() || expW == 0 {
		j.status = report.Skip
		j.detail = fmt.Sprintf("%s: trained at %s; no max_link_* on the card or its bridges, so the expected link is unknown", name, j.observed)
		j.summary = n.Fn.Address + ": expected link unknown"
		ev["status"] = "unknown"
		return j
	}

	var bad []string
	if fn.Cur.GTs < exp.GTs {
		bad = append(bad, fmt.Sprintf("speed %s below %s", fn.Cur.String(), exp.String()))
	}
	if fn.CurWidth < expW {
		bad = append(bad, fmt.Sprintf("width x%d below x%d", fn.CurWidth, expW))
	}
	capNote := "card max unknown"
	if fn.HasMax && fn.Max.Known() {
		capNote = fmt.Sprintf("card max %s x%d", fn.Max.Short(), fn.MaxWidth)
	}
	if limitS != "card" || limitW != "card" {
		capNote += fmt.Sprintf("; path allows %s x%d (speed limited by %s, width by %s)", exp.Short(), expW, limitS, limitW)
	}
	if len(bad) > 0 && len(bridgeProblems) > 0 {
		// An unreadable bridge may be the one that limits the card: do not
		// call the link degraded on half the path.
		j.status = report.Error
		j.summary = fmt.Sprintf("%s trained at %s, below %s, but a bridge's link could not be read", n.Fn.Address, j.observed, j.expected)
		j.detail = fmt.Sprintf("%s: trained at %s, expected %s from what could be read (%s); %s", name, j.observed, j.expected, capNote, strings.Join(bridgeProblems, "; "))
		ev["status"] = "error"
		return j
	}
	if len(bad) > 0 {
		j.status, j.remedy = report.Fail, true
		j.summary = fmt.Sprintf("%s trained at %s, expected %s", n.Fn.Address, j.observed, j.expected)
		j.detail = fmt.Sprintf("%s: DEGRADED — trained at %s, expected %s: %s (%s)", name, j.observed, j.expected, strings.Join(bad, ", "), capNote)
		ev["status"] = "degraded"
		return j
	}
	// The function's own link is right; every other link on the way to the
	// root port must carry at least as much.
	need := float64(expW) * exp.LaneGBps()
	for _, b := range p.Upstream {
		if !b.HasCur || !b.Cur.Known() || b.CurWidth == 0 {
			continue
		}
		if b.Cur.GTs >= exp.GTs && b.CurWidth >= expW {
			continue
		}
		got := float64(b.CurWidth) * b.Cur.LaneGBps()
		msg := fmt.Sprintf("bridge %s link trained at %s x%d (≈%.1f GB/s) below the card's expected %s (≈%.1f GB/s)",
			b.Address, b.Cur.Short(), b.CurWidth, got, j.expected, need)
		if got < need {
			j.status, j.remedy = report.Fail, true
			j.summary = fmt.Sprintf("%s limited by %s", n.Fn.Address, msg)
			j.detail = fmt.Sprintf("%s: card trained at %s but the %s", name, j.observed, msg)
			j.observed = fmt.Sprintf("%s x%d at %s", b.Cur.Short(), b.CurWidth, b.Address)
			ev["status"] = "degraded_upstream"
			return j
		}
		if j.status != report.Warn {
			j.status = report.Warn
			j.summary = fmt.Sprintf("%s: %s, without limiting the card", n.Fn.Address, msg)
			j.detail = fmt.Sprintf("%s: at %s as expected; %s (not limiting it)", name, j.observed, msg)
			ev["status"] = "bridge_degraded"
		}
	}
	if j.status == report.Warn {
		return j
	}
	j.status = report.Pass
	j.detail = fmt.Sprintf("%s: %s as expected (%s)", name, j.observed, capNote)
	if ps := append(problems, bridgeProblems...); len(ps) > 0 {
		j.detail += "; " + strings.Join(ps, "; ")
	}
	ev["status"] = "ok"
	return j
}
