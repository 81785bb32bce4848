package report

import (
	"fmt"
	"io"
	"strings"
)

// WritePrometheus renders the report in the Prometheus text exposition
// format, for node_exporter's textfile collector: one gauge per check and
// status (1 for the status it has), the verdict as a state set (1 for the
// verdict the run has), the exit code, and the run's duration. Alerts key
// on the verdict: an exit code alone cannot tell "could not judge" (4, or 1
// for a run that did not finish) from a finding.
func WritePrometheus(w io.Writer, r *Report) error {
	var b strings.Builder
	host := escapeLabel(r.Host.Hostname)
	b.WriteString("# HELP rdmadoctor_check_status 1 for the status a check has on this host, 0 for the others.\n")
	b.WriteString("# TYPE rdmadoctor_check_status gauge\n")
	for _, c := range r.Checks {
		for _, s := range []Status{Pass, Warn, Fail, Skip, Error} {
			fmt.Fprintf(&b, "rdmadoctor_check_status{host=\"%s\",check=\"%s\",code=\"%d\",status=\"%s\"} %d\n", host, escapeLabel(c.ID), c.Code, s, boolGauge(c.Status == s))
		}
	}
	b.WriteString("# HELP rdmadoctor_finding 1 for each finding that is not a pass on this host (warn, fail, error; waived ones left out), by finding ID and unit.\n")
	b.WriteString("# TYPE rdmadoctor_finding gauge\n")
	for _, c := range r.Checks {
		for _, f := range c.Findings {
			if f.Waived != "" || (f.Status != Warn && f.Status != Fail && f.Status != Error) {
				continue
			}
			fmt.Fprintf(&b, "rdmadoctor_finding{host=\"%s\",check=\"%s\",finding=\"%s\",unit=\"%s\",status=\"%s\"} 1\n",
				host, escapeLabel(c.ID), escapeLabel(f.ID), escapeLabel(f.Unit), f.Status)
		}
	}
	b.WriteString("# HELP rdmadoctor_verdict 1 for the run's verdict (healthy, problem or unknown), 0 for the others.\n")
	b.WriteString("# TYPE rdmadoctor_verdict gauge\n")
	verdict := runVerdict(r)
	for _, v := range Verdicts {
		fmt.Fprintf(&b, "rdmadoctor_verdict{host=\"%s\",verdict=\"%s\"} %d\n", host, v, boolGauge(v == verdict))
	}
	b.WriteString("# HELP rdmadoctor_exit_code The exit code of the run: 0 healthy, else the root cause's code.\n")
	b.WriteString("# TYPE rdmadoctor_exit_code gauge\n")
	fmt.Fprintf(&b, "rdmadoctor_exit_code{host=\"%s\"} %d\n", host, r.ExitCode)
	b.WriteString("# HELP rdmadoctor_run_duration_seconds Wall time of the run.\n")
	b.WriteString("# TYPE rdmadoctor_run_duration_seconds gauge\n")
	fmt.Fprintf(&b, "rdmadoctor_run_duration_seconds{host=\"%s\"} %g\n", host, r.DurationMS/1000)
	b.WriteString("# HELP rdmadoctor_last_run_timestamp_seconds When the run started.\n")
	b.WriteString("# TYPE rdmadoctor_last_run_timestamp_seconds gauge\n")
	fmt.Fprintf(&b, "rdmadoctor_last_run_timestamp_seconds{host=\"%s\"} %d\n", host, r.Started.Unix())
	_, err := io.WriteString(w, b.String())
	return err
}

// escapeLabel makes a label value valid in the exposition format: escaped,
// and valid UTF-8 (the textfile collector rejects a whole file otherwise).
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(strings.ToValidUTF8(s, "\uFFFD"))
}

// runVerdict is the verdict the textfile exports. A run that did not finish
// (exit 1: an internal error, or --timeout) proves nothing whatever its
// checks said, so it is unknown; a report made without Judge (no verdict
// recorded) is judged here from its checks.
func runVerdict(r *Report) Verdict {
	if r.ExitCode == ExitInternal {
		return Unknown
	}
	switch r.Verdict {
	case Healthy, Problem, Unknown:
		return r.Verdict
	}
	v, _ := Judge(r.Checks, Policy{})
	return v
}

func boolGauge(b bool) int {
	if b {
		return 1
	}
	return 0
}
