package report

import (
	"bytes"
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
