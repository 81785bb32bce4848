package report

import (
	"fmt"
	"io"
	"strings"
)

// WritePrometheus renders the report in the Prometheus text exposition
// format, for node_exporter's textfile collector: one gauge per check and
// status (1 for the status it has), the exit code, and the run's duration.
// A scheduler can then alert on rdmadoctor_check_status{status="fail"} == 1.
func WritePrometheus(w io.Writer, r *Report) error {
	var b strings.Builder
	host := escapeLabel(r.Host.Hostname)
	b.WriteString("# HELP rdmadoctor_check_status 1 for the status a check has on this host, 0 for the others.\n")
	b.WriteString("# TYPE rdmadoctor_check_status gauge\n")
	for _, c := range r.Checks {
		for _, s := range []Status{Pass, Warn, Fail, Skip, Error} {
			v := 0
			if c.Status == s {
				v = 1
			}
			fmt.Fprintf(&b, "rdmadoctor_check_status{host=\"%s\",check=\"%s\",code=\"%d\",status=\"%s\"} %d\n", host, escapeLabel(c.ID), c.Code, s, v)
		}
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
