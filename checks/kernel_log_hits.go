package checks

import (
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// flapThreshold is how many carrier losses on one port make a flapping
// link: gpud counts a flap incident at three down-then-up cycles.
const flapThreshold = 3

// logHit is every record of one known kind about one device.
type logHit struct {
	known   *knownMessage
	unit    string
	label   string
	inScope bool
	count   int
	last    sysfs.KernelRecord
	sources []string // the kernel sources of the messages matched, each once
}

// collectHits matches every record against the table and groups the
// matches by kind and device, in the order they first appear.
func collectHits(sc *logScope, recs []sysfs.KernelRecord) []*logHit {
	var hits []*logHit
	byKey := map[string]*logHit{}
	for _, r := range recs {
		k, named := matchKnown(r.Text)
		if k == nil {
			continue
		}
		unit, label, in := sc.place(sc.devicesOf(r, named))
		key := k.finding.ID + "\x00" + unit
		h := byKey[key]
		if h == nil {
			h = &logHit{known: k, unit: unit, label: label, inScope: in}
			byKey[key] = h
			hits = append(hits, h)
		}
		h.count++
		h.last = r
		h.sources = appendUnique(h.sources, k.source)
	}
	return hits
}

// finding is the hit's declared finding: its kind's, a flapping link's at
// flapThreshold carrier losses, or only a note about another device.
func (h *logHit) finding(sc *logScope, since string) report.Finding {
	word := h.unit
	if word == "" {
		word = "the NIC"
	}
	slots := Slots{"device": h.label, "device_word": word, "netdev": sc.netdevWord(h.unit), "count": fmt.Sprint(h.count), "since": since,
		"when": whenLogged(h.last), "line": h.last.Text}
	f := h.known.finding
	if !h.inScope {
		return klogOtherDevice.At(h.unit, slots.with("kind", strings.TrimPrefix(f.ID, "kernel.log/")))
	}
	if f == klogLinkDown && h.count >= flapThreshold {
		f = klogLinkFlaps
	}
	return f.At(h.unit, slots)
}

// whenLogged says when a record was logged, in seconds after boot as
// dmesg shows it (not "how long ago": a replay must say what the live run
// said).
func whenLogged(r sysfs.KernelRecord) string {
	if r.Time < 0 {
		return "(no timestamp)"
	}
	return fmt.Sprintf("at %.3f s after boot", r.Time.Seconds())
}

// hitDetails lists, per hit, the kernel source of its message and whether
// user space wrote it.
func hitDetails(hits []*logHit) []string {
	var out []string
	for _, h := range hits {
		scope := "judged"
		if !h.inScope {
			scope = "not an RDMA NIC: noted"
		}
		out = append(out, fmt.Sprintf("%s: %d × %s (%s) — message of %s", h.label, h.count, h.known.finding.ID, scope, strings.Join(h.sources, "; ")))
	}
	return out
}

func inScopeCount(hits []*logHit) int {
	n := 0
	for _, h := range hits {
		if h.inScope {
			n += h.count
		}
	}
	return n
}
