package adapter

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
)

// SlurmReasonPrefix starts every drain reason rdmadoctor sets. A node is
// resumed only when its reason starts with it: a reason set by an
// administrator, NHC or Slurm itself is never touched (NHC's convention).
const SlurmReasonPrefix = "rdmadoctor:"

// SlurmIntent is what the verdict asks of the node.
type SlurmIntent int

const (
	// SlurmResume: healthy; resume the node if rdmadoctor drained it and
	// every check it was drained for has passed since.
	SlurmResume SlurmIntent = iota
	// SlurmDrain: a problem (or unknown for too many runs in a row).
	SlurmDrain
	// SlurmLeave: unknown; neither drain nor resume, and say why.
	SlurmLeave
)

// SlurmVerdict is the Slurm adapter's reading of a judged state.
type SlurmVerdict struct {
	Intent SlurmIntent
	What   string // one line for the log: the check and its summary, or why it is unknown
	Reason string // the drain reason, for SlurmDrain
	// For are the checks a drain is for: every check that is a problem
	// now (a resume waits for all of them), or the unknown root cause.
	For []string
}

// SlurmOptions are the site's choices.
type SlurmOptions struct {
	// UnknownDrainAfter drains after this many consecutive unknown runs
	// (0: never; an unknown verdict alone is the doctor's blind spot).
	UnknownDrainAfter int
	// RunStarted is when this run started: a result judged before it is
	// the kept record of an earlier run, and the log line says so.
	RunStarted time.Time
}

// Slurm maps a judged state (the kept state with this run merged in, or this
// run alone) onto the node: drain on a problem, resume on healthy, leave it
// on unknown unless it has lasted UnknownDrainAfter runs (unknownRuns).
func Slurm(j *state.Judged, unknownRuns int, o SlurmOptions) SlurmVerdict {
	v := slurmVerdict(j, unknownRuns, o)
	// What goes to slurmd's log, one line: ASCII like the reason, whatever
	// the locale of the node.
	v.What = ASCIILine(v.What, slurmMaxWhat)
	return v
}

// slurmMaxWhat bounds the log line: a check's summary is clipped to 200
// bytes in it, and a kept result adds its time.
const slurmMaxWhat = 1024

func slurmVerdict(j *state.Judged, unknownRuns int, o SlurmOptions) SlurmVerdict {
	root := j.RootCheck()
	switch j.Verdict {
	case report.Problem:
		return SlurmVerdict{Intent: SlurmDrain, What: checkLine(root) + kept(root, o.RunStarted),
			Reason: SlurmReason(root.FindingID(), root.Code, root.Summary), For: problems(j)}
	case report.Unknown:
		what := "unknown: no check result"
		id, finding, code, summary := "run", "run", report.ExitInternal, "no check result"
		if root != nil {
			what, id, finding, code, summary = checkLine(root), root.ID, root.FindingID(), root.Code, root.Summary
		}
		if o.UnknownDrainAfter > 0 && unknownRuns >= o.UnknownDrainAfter {
			return SlurmVerdict{Intent: SlurmDrain, What: fmt.Sprintf("%s; unknown for %d runs in a row (--unknown-drain-after %d)", what, unknownRuns, o.UnknownDrainAfter),
				Reason: SlurmReason(finding, code, fmt.Sprintf("could not check (%d runs): %s", unknownRuns, summary)), For: []string{id}}
		}
		return SlurmVerdict{Intent: SlurmLeave, What: what}
	}
	pass, warn, _ := j.Tally()
	return SlurmVerdict{Intent: SlurmResume, What: fmt.Sprintf("healthy (%d checks passed, %d warned)", pass, warn)}
}

// problems lists every check of j that counts as a problem, in order.
func problems(j *state.Judged) []string {
	var ids []string
	for _, c := range j.Checks {
		if c.Status == report.Fail || (c.Status == report.Warn && j.Verdict == report.Problem && isRoot(j, c.ID)) {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

func isRoot(j *state.Judged, id string) bool { r := j.RootCheck(); return r != nil && r.ID == id }

// kept says when a result comes from an earlier run than this one.
func kept(c *report.CheckResult, runStarted time.Time) string {
	ran, ok := c.Evidence["ran"].(time.Time)
	if !ok || runStarted.IsZero() || !ran.Before(runStarted) {
		return ""
	}
	return " (kept from the run at " + ran.UTC().Format(time.RFC3339) + "; this run did not judge it)"
}

func checkLine(c *report.CheckResult) string {
	return fmt.Sprintf("%s(%d) %s: %s", c.FindingID(), c.Code, c.Status, clip(c.Summary, 200))
}

// reasonCheck finds the check a reason names: "rdmadoctor:
// port.state/admin-down(19) …" (a finding's ID), or "rdmadoctor:
// port.state(19) …" as versions before findings wrote it.
var reasonCheck = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(SlurmReasonPrefix) + ` ([a-z][a-z0-9_]*\.[a-z0-9_.]+)(?:/[a-z0-9-]+)?\(\d+\)`)
})

// ResumeWaitsFor is what a resume must see pass first: the checks the state
// recorded the drain for, and the check the node's reason names (a node
// drained by another host's run, or before the state was kept). It returns
// those that have not passed since the drain (since is its time; zero when
// unknown: then a result of any time counts, which for a run without a
// state is this run's). A node is resumed only when the list is empty.
func ResumeWaitsFor(st *state.State, nodeReason string, p report.Policy) (missing []string, since time.Time) {
	var ids []string
	if st.Drain != nil {
		ids = append(ids, st.Drain.Checks...)
		since = st.Drain.At
	}
	if m := reasonCheck().FindStringSubmatch(nodeReason); m != nil && !contains(ids, m[1]) {
		ids = append(ids, m[1])
	}
	return st.PassedSince(ids, since, p), since
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// SlurmReason builds the drain reason: "rdmadoctor: <finding>(<code>) <summary>",
// printable ASCII on one line, at most SlurmMaxReason bytes. Control
// characters and newlines become spaces, other non-ASCII is spelled as
// ASCIILine spells it (asciiRune), a
// double quote becomes a single one (scontrol strips a trailing '"' from a
// reason), and runs of spaces collapse.
func SlurmReason(id string, code int, summary string) string {
	r := fmt.Sprintf("%s %s(%d) %s", SlurmReasonPrefix, id, code, summary)
	var spelled strings.Builder
	for _, c := range strings.ToValidUTF8(r, "?") {
		switch {
		case c < 0x20 || (c >= 0x7f && c < 0xa0):
			spelled.WriteByte(' ')
		case c > 0x7e:
			spelled.WriteString(asciiRune(c))
		default:
			spelled.WriteRune(c)
		}
	}
	var b strings.Builder
	space := false
	for _, c := range spelled.String() {
		if c == '"' {
			c = '\''
		}
		if c == ' ' && space {
			continue
		}
		space = c == ' '
		b.WriteRune(c)
	}
	out := strings.TrimSpace(b.String())
	if len(out) > SlurmMaxReason {
		out = strings.TrimRight(out[:SlurmMaxReason-3], " ") + "..."
	}
	return out
}

// SlurmMaxReason bounds the reason: sinfo -R and scontrol show node print it
// whole, and an operator reads it on one line.
const SlurmMaxReason = 120

// clip shortens s to n bytes, on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return ASCIILine(s, n)
}
