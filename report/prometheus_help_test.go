package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// frozenPrometheusMeta is every HELP and TYPE line WritePrometheus writes.
// They are frozen: node_exporter's textfile collector drops a metric,
// silently, when two files (two versions of rdmadoctor on one host, or an
// old file beside a new one) give it different HELP or TYPE text. A new
// metric adds lines here; changing one of these is a new metric name.
var frozenPrometheusMeta = []string{
	"# HELP rdmadoctor_check_status 1 for the status a check has on this host, 0 for the others.",
	"# TYPE rdmadoctor_check_status gauge",
	"# HELP rdmadoctor_finding 1 for each finding that is not a pass on this host (warn, fail, error; waived ones left out), by finding ID and unit.",
	"# TYPE rdmadoctor_finding gauge",
	"# HELP rdmadoctor_verdict 1 for the run's verdict (healthy, problem or unknown), 0 for the others.",
	"# TYPE rdmadoctor_verdict gauge",
	"# HELP rdmadoctor_exit_code The exit code of the run: 0 healthy, else the root cause's code.",
	"# TYPE rdmadoctor_exit_code gauge",
	"# HELP rdmadoctor_run_duration_seconds Wall time of the run.",
	"# TYPE rdmadoctor_run_duration_seconds gauge",
	"# HELP rdmadoctor_last_run_timestamp_seconds When the run started.",
	"# TYPE rdmadoctor_last_run_timestamp_seconds gauge",
}

func TestPrometheusHelpAndTypeFrozen(t *testing.T) {
	r := &Report{Started: time.Unix(1700000000, 0), Checks: []CheckResult{{ID: "pci.device", Code: 10, Status: Pass}}}
	r.Host.Hostname = "node17"
	var b bytes.Buffer
	if err := WritePrometheus(&b, r); err != nil {
		t.Fatal(err)
	}
	var meta []string
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "#") {
			meta = append(meta, line)
		}
	}
	if strings.Join(meta, "\n") != strings.Join(frozenPrometheusMeta, "\n") {
		t.Errorf("HELP/TYPE lines changed — node_exporter drops a metric whose files disagree:\ngot:\n%s\nwant:\n%s",
			strings.Join(meta, "\n"), strings.Join(frozenPrometheusMeta, "\n"))
	}
}

// TestPrometheusVerdict: the verdict is a state set with exactly one 1, the
// one Judge gives; a run that did not finish is unknown whatever its checks
// said; a report without a recorded verdict is judged from its checks.
func TestPrometheusVerdict(t *testing.T) {
	set := func(v string) string {
		var b strings.Builder
		for _, w := range []string{"healthy", "problem", "unknown"} {
			n := 0
			if w == v {
				n = 1
			}
			fmt.Fprintf(&b, "rdmadoctor_verdict{host=\"n\",verdict=\"%s\"} %d\n", w, n)
		}
		return b.String()
	}
	finished := func(exit int, statuses ...Status) *Report {
		r := &Report{Started: time.Unix(1700000000, 0)}
		r.Host.Hostname = "n"
		for i, s := range statuses {
			r.Checks = append(r.Checks, CheckResult{ID: fmt.Sprintf("c%d", i), Code: 10 + i, Status: s})
		}
		r.Finish(false)
		if exit >= 0 {
			r.ExitCode = exit
		}
		return r
	}
	unjudged := finished(-1, Pass, Error)
	unjudged.Verdict = ""
	for _, tc := range []struct {
		name string
		r    *Report
		want string
	}{
		{"healthy", finished(-1, Pass, Warn, Skip), set("healthy")},
		{"problem", finished(-1, Error, Fail), set("problem")},
		{"unknown", finished(-1, Pass, Error), set("unknown")},
		{"partial run", finished(ExitInternal, Pass, Skip), set("unknown")},
		{"no verdict recorded", unjudged, set("unknown")},
	} {
		var b bytes.Buffer
		if err := WritePrometheus(&b, tc.r); err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		for _, line := range strings.SplitAfter(b.String(), "\n") {
			if strings.HasPrefix(line, "rdmadoctor_verdict{") {
				got.WriteString(line)
			}
		}
		if got.String() != tc.want {
			t.Errorf("%s: verdict series\n%s\nwant\n%s", tc.name, got.String(), tc.want)
		}
	}
}
