package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
)

// goldenReport reads a golden JSON report as node host, started at t.
func goldenReport(t *testing.T, name, host string, started time.Time) *report.Report {
	t.Helper()
	data, err := os.ReadFile("../../testdata/golden/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.DecodeReport(data)
	if err != nil {
		t.Fatal(err)
	}
	r.Host.Hostname, r.Started = host, started
	r.Finish(false)
	return r
}

func writeJSON(t *testing.T, path string, r *report.Report) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := report.WriteJSON(f, r); err != nil {
		t.Fatal(err)
	}
}

func all(string) bool { return true }

// TestSummarizeStateFiles: a state file is summarised by its merged
// verdict, not its last run: a node whose port went down and whose last run
// checked only the kernel is still a problem; a node with only a check in
// error is unknown, apart from the problems; records older than --max-age
// make a node unknown, and without it they still count.
func TestSummarizeStateFiles(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 4, 0, 0, 0, time.UTC)
	setSummarizeClock(t, t0.Add(2*time.Hour+time.Minute))
	dir := t.TempDir()

	drained := state.New("drained")
	drained.Merge(goldenReport(t, "port-down", "drained", t0), all)
	drained.Merge(goldenReport(t, "cx5-roce-healthy", "drained", t0.Add(time.Hour)), func(id string) bool { return id == "kernel.version" })
	blindRun := goldenReport(t, "cx5-roce-healthy", "blind", t0.Add(time.Hour))
	for i := range blindRun.Checks {
		if blindRun.Checks[i].ID == "gpu.acs" {
			blindRun.Checks[i].Status, blindRun.Checks[i].Summary = report.Error, "needs CAP_SYS_ADMIN"
		}
	}
	blindRun.Finish(false)
	blind := state.New("blind")
	blind.Merge(blindRun, all)
	for name, s := range map[string]*state.State{"drained.json": drained, "blind.json": blind} {
		if err := s.Save(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	writeJSON(t, filepath.Join(dir, "fresh.json"), goldenReport(t, "cx5-roce-healthy", "fresh", t0.Add(110*time.Minute)))

	summary := func(args ...string) report.FleetSummary {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"summarize", "--format", "json"}, args...)...)
		var s report.FleetSummary
		if err := json.Unmarshal([]byte(out), &s); code != 0 || err != nil {
			t.Fatalf("exit %d (%s), %v:\n%s", code, errOut, err, out)
		}
		return s
	}
	s := summary("--stale-after", "0", dir)
	want := []report.ExitGroup{
		{Verdict: report.Healthy, ExitCode: 0, Nodes: []string{"fresh"}},
		{Verdict: report.Problem, ExitCode: 19, RootCause: "port.state", Nodes: []string{"drained"}},
		{Verdict: report.Unknown, ExitCode: report.ExitUnknown, RootCause: "gpu.acs", Nodes: []string{"blind"}},
	}
	if !reflect.DeepEqual(s.Verdicts, want) || s.Counts != (report.VerdictCounts{Healthy: 1, Problem: 1, Unknown: 1}) {
		t.Errorf("verdicts %+v counts %+v\nwant %+v", s.Verdicts, s.Counts, want)
	}

	// With --max-age 90m drained's records of t0, port.state's fault among
	// them, have aged out: a fault seen two hours ago is no longer proof,
	// so drained is unknown, its first aged record (catalog order) the
	// cause; its kernel.version of t0+1h and blind's records still count.
	s = summary("--stale-after", "0", "--max-age", "90m", dir)
	want = []report.ExitGroup{
		{Verdict: report.Healthy, ExitCode: 0, Nodes: []string{"fresh"}},
		{Verdict: report.Unknown, ExitCode: report.ExitUnknown, RootCause: "gpu.acs", Nodes: []string{"blind"}},
		{Verdict: report.Unknown, ExitCode: report.ExitUnknown, RootCause: "pci.device", Nodes: []string{"drained"}},
	}
	if !reflect.DeepEqual(s.Verdicts, want) {
		t.Errorf("--max-age 90m: verdicts %+v\nwant %+v", s.Verdicts, want)
	}

	code, out, _ := runCLI(t, "summarize", dir)
	for _, w := range []string{"3 report(s) of 3 host(s)\nas of 2026-03-01T06:01:00Z: 1 healthy, 1 problem, 1 unknown\n",
		"\nPROBLEM (a check found a fault)\n  exit 19  port.state                 1  drained\n",
		"not a fault found)\n  exit 4   gpu.acs                    1  blind\n",
		"\nSTALE (started more than 1h0m0s before now, 2026-03-01T06:01:00Z)\n  2026-03-01T05:00:00Z  blind\n  2026-03-01T05:00:00Z  drained\n"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("exit %d; text lacks %q:\n%s", code, w, out)
		}
	}
}

// TestSummarizeReportFromTheFuture: issue 21 — one node's clock in 2030
// made every other node of the fleet stale. Against summarize's own clock
// the fleet is fresh and the 2030 report is named as from the future.
func TestSummarizeReportFromTheFuture(t *testing.T) {
	now := time.Date(2026, 3, 1, 4, 0, 0, 0, time.UTC)
	setSummarizeClock(t, now)
	dir := t.TempDir()
	for i, h := range []string{"n1", "n2", "n3"} {
		writeJSON(t, filepath.Join(dir, h+".json"), goldenReport(t, "cx5-roce-healthy", h, now.Add(-time.Duration(i+1)*10*time.Minute)))
	}
	future := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	writeJSON(t, filepath.Join(dir, "n4.json"), goldenReport(t, "cx5-roce-healthy", "n4", future))
	code, out, errOut := runCLI(t, "summarize", "--format", "json", dir)
	var s report.FleetSummary
	if err := json.Unmarshal([]byte(out), &s); code != 0 || err != nil {
		t.Fatalf("exit %d (%s), %v:\n%s", code, errOut, err, out)
	}
	got := []any{s.Now, s.Newest, s.Stale, s.Future, s.StaleAfter, s.FutureSkew}
	want := []any{now, now.Add(-10 * time.Minute), []report.StaleReport{}, []report.StaleReport{{Node: "n4", Started: future}}, "1h0m0s", "5m0s"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("now, newest, stale, future, stale_after, future_skew:\n got %v\nwant %v", got, want)
	}
	// With a skew of ten years, 2030 is tolerated and is the newest.
	code, out, _ = runCLI(t, "summarize", "--format", "json", "--future-skew", "87600h", dir)
	s = report.FleetSummary{}
	if err := json.Unmarshal([]byte(out), &s); code != 0 || err != nil || len(s.Future) != 0 || !s.Newest.Equal(future) {
		t.Errorf("--future-skew 87600h: exit %d, %v, future %+v newest %v", code, err, s.Future, s.Newest)
	}
}
