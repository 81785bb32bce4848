package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
)

const rulesFile, rulesTestFile = "prometheus/rdmadoctor.rules.yml", "prometheus/rdmadoctor.rules.test.yml"

// TestPromtool: promtool accepts the rules and their unit tests pass (each
// alert fires on the node it should, at the time it should, and no other).
func TestPromtool(t *testing.T) {
	tool := needTool(t, "promtool", "prometheus")
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		if out, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// emitted renders a report through WritePrometheus and returns the metric
// names and label names it writes.
func emitted(t *testing.T) (metrics, labels map[string]bool) {
	t.Helper()
	rep := &report.Report{Schema: report.Schema, Started: time.Unix(1e9, 0)}
	rep.Host.Hostname = "n1"
	rep.Checks = []report.CheckResult{{ID: "port.state", Code: 19, Status: report.Fail}}
	rep.Finish(false)
	var b bytes.Buffer
	if err := report.WritePrometheus(&b, rep); err != nil {
		t.Fatal(err)
	}
	metrics, labels = map[string]bool{}, map[string]bool{}
	sample := regexp.MustCompile(`(?m)^(rdmadoctor_\w+)\{([^}]*)\}`)
	for _, m := range sample.FindAllStringSubmatch(b.String(), -1) {
		metrics[m[1]] = true
		for _, l := range regexp.MustCompile(`(\w+)="`).FindAllStringSubmatch(m[2], -1) {
			labels[l[1]] = true
		}
	}
	if len(metrics) < 4 {
		t.Fatalf("WritePrometheus wrote %d metrics:\n%s", len(metrics), b.String())
	}
	return metrics, labels
}

// TestRulesUseEmittedNames: every rdmadoctor_ metric the rules and their
// tests name is one report/prometheus.go writes, every label they read is
// one it (or the scrape: job, instance) sets, and every metric it writes is
// watched by some rule — a rename on either side fails here, without promtool.
func TestRulesUseEmittedNames(t *testing.T) {
	metrics, labels := emitted(t)
	labels["job"], labels["instance"] = true, true
	used := map[string]bool{}
	for _, f := range []string{rulesFile, rulesTestFile} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`\brdmadoctor_\w+`).FindAllString(string(data), -1) {
			if !metrics[m] {
				t.Errorf("%s names %s, which report/prometheus.go does not write", f, m)
			}
			used[m] = true
		}
		for _, m := range regexp.MustCompile(`\$labels\.(\w+)`).FindAllStringSubmatch(string(data), -1) {
			if !labels[m[1]] {
				t.Errorf("%s reads label %q, which no rdmadoctor metric or scrape sets", f, m[1])
			}
		}
	}
	for _, m := range []string{"rdmadoctor_exit_code", "rdmadoctor_check_status", "rdmadoctor_last_run_timestamp_seconds", "rdmadoctor_verdict"} {
		if !used[m] {
			t.Errorf("no rule watches %s", m)
		}
	}
}
