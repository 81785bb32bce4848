package adapter

import (
	"fmt"
	"regexp"
	"sync"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
)

// node-problem-detector's custom-plugin protocol: exit 0 is OK, 1 a
// problem, anything else (or a killed plugin) Unknown; the message is
// stdout, cut by NPD at max_output_length (80 bytes by default).
const (
	NPDOK      = 0
	NPDProblem = 1
	NPDUnknown = 2
	// NPDMaxMessage is NPD's default max_output_length.
	NPDMaxMessage = 80
)

// NPDExit is the plugin's exit code for a verdict: a problem is 1, and only
// a problem — a check that could not look is Unknown (2), so the node is
// never tainted for the doctor's blind spot.
func NPDExit(v report.Verdict) int {
	switch v {
	case report.Healthy:
		return NPDOK
	case report.Problem:
		return NPDProblem
	}
	return NPDUnknown
}

// NPDProblemOnly maps the plugin's exit for a condition that is True only
// on a problem: unknown becomes OK (False). A controller that taints
// continuously while a condition is not False keys on such a condition, so
// that a node is tainted for a fault seen, never for one that could not be
// looked for; a second condition with the full mapping gates a node's first
// admission (no resume without proof).
func NPDProblemOnly(exit int) int {
	if exit == NPDProblem {
		return NPDProblem
	}
	return NPDOK
}

// NPD is the plugin's answer for a judged state: its exit code and its one
// line (printable ASCII, at most NPDMaxMessage bytes). The line is stable
// while the host stays as it is — no ages or durations — since every change
// of it is a write to the API server.
func NPD(j *state.Judged) (int, string) {
	exit := NPDExit(j.Verdict)
	switch root := j.RootCheck(); {
	case j.Verdict == report.Healthy:
		return exit, ASCIILine(healthyLine(j), NPDMaxMessage)
	case root != nil && j.Verdict == report.Problem:
		return exit, ASCIILine(fmt.Sprintf("%s(%d) %s", root.FindingID(), root.Code, compactSummary(root.Summary)), NPDMaxMessage)
	case root != nil && root.Code == 0:
		return exit, ASCIILine("unknown: "+root.Summary, NPDMaxMessage)
	case root != nil:
		return exit, ASCIILine(fmt.Sprintf("unknown: %s(%d) %s", root.FindingID(), root.Code, compactSummary(root.Summary)), NPDMaxMessage)
	}
	return NPDUnknown, "unknown: no verdict"
}

// healthyLine: the counts and the first warning.
func healthyLine(j *state.Judged) string {
	pass, warn, first := j.Tally()
	if first != "" {
		first = " (" + first + ")"
	}
	return fmt.Sprintf("ok: level %d, %d pass, %d warn%s", j.Level, pass, warn, first)
}

var portWords = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\b(\S+) port (\d+)\b`) })

// compactSummary says "mlx5_1/1" for "mlx5_1 port 1": the line is short.
func compactSummary(s string) string { return portWords().ReplaceAllString(s, "$1/$2") }
