package adapter

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
)

// verdictRow is one row of docs/verdict.md's adapter table.
type verdictRow map[string]string

// readVerdictTable reads the table under "What each adapter does with it":
// its header names the columns, one row per verdict.
func readVerdictTable(t *testing.T) map[report.Verdict]verdictRow {
	t.Helper()
	data, err := os.ReadFile("../../docs/verdict.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "## What each adapter does with it")
	if !ok {
		t.Fatal("docs/verdict.md has no section \"What each adapter does with it\"")
	}
	var header []string
	rows := map[report.Verdict]verdictRow{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") {
			if header != nil {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case header == nil:
			header = cells
		case strings.HasPrefix(cells[0], "---"):
		default:
			row := verdictRow{}
			for i, h := range header {
				row[h] = cells[i]
			}
			rows[report.Verdict(cells[0])] = row
		}
	}
	for _, v := range report.Verdicts {
		if rows[v] == nil {
			t.Fatalf("docs/verdict.md's table has no row for %s", v)
		}
	}
	return rows
}

// systemdSuccess reads the shipped unit's SuccessExitStatus= codes.
func systemdSuccess(t *testing.T) map[int]bool {
	t.Helper()
	data, err := os.ReadFile("../../deploy/systemd/rdmadoctor.service")
	if err != nil {
		t.Fatal(err)
	}
	ok := map[int]bool{0: true}
	for _, line := range strings.Split(string(data), "\n") {
		if v, found := strings.CutPrefix(line, "SuccessExitStatus="); found {
			for _, f := range strings.Fields(v) {
				n, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("SuccessExitStatus %q", f)
				}
				ok[n] = true
			}
		}
	}
	return ok
}

var allStatuses = []report.Status{report.Pass, report.Warn, report.Fail, report.Skip, report.Error}

// combinations is every assignment of statuses to n checks.
func combinations(n int) [][]report.Status {
	out := [][]report.Status{{}}
	for range n {
		var next [][]report.Status
		for _, c := range out {
			for _, s := range allStatuses {
				next = append(next, append(append([]report.Status{}, c...), s))
			}
		}
		out = next
	}
	return out
}

// TestEveryAdapterFollowsTheVerdictTable judges every combination of
// statuses of three checks, with and without --fail-on warn, and holds each
// adapter to docs/verdict.md's row of the verdict: the exit code, npd's exit,
// Slurm's intent and the prolog's exit, the systemd unit's success.
func TestEveryAdapterFollowsTheVerdictTable(t *testing.T) {
	rows := readVerdictTable(t)
	success := systemdSuccess(t)
	alerts := alertExprs(t)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, sts := range combinations(3) {
		for _, failOnWarn := range []bool{false, true} {
			rep := &report.Report{Schema: report.Schema, Level: 1, Started: now}
			for i, s := range sts {
				rep.Checks = append(rep.Checks, report.CheckResult{ID: fmt.Sprintf("c.k%d", i), Code: 10 + i, Level: 1, Status: s, Summary: "s"})
			}
			rep.FinishPolicy(report.Policy{FailOnWarn: failOnWarn})
			name := fmt.Sprintf("%v warn=%v", sts, failOnWarn)
			row := rows[rep.Verdict]

			st := state.New("n")
			st.Merge(rep, func(string) bool { return true })
			st.Policy = state.Policy{FailOnWarn: failOnWarn}
			j := st.Judge(now, 0, st.Policy.Report())
			if j.Verdict != rep.Verdict {
				t.Fatalf("%s: the state judges %s, the run %s", name, j.Verdict, rep.Verdict)
			}
			checkExit(t, name, row, rep)
			if exit, _ := NPD(j); strconv.Itoa(exit) != row["npd exit"] {
				t.Errorf("%s (%s): npd exits %d, table %s", name, rep.Verdict, exit, row["npd exit"])
			}
			checkSlurm(t, name, row, Slurm(j, 1, SlurmOptions{}))
			if got, want := success[rep.ExitCode], row["systemd unit"] == "success"; got != want {
				t.Errorf("%s: exit %d succeeds the unit: %v, table %q", name, rep.ExitCode, got, row["systemd unit"])
			}
			checkPrometheusAndSummary(t, name, row, rep, alerts)
		}
	}
}

func checkExit(t *testing.T, name string, row verdictRow, rep *report.Report) {
	t.Helper()
	want := row["exit code"]
	switch {
	case want == "root cause's code":
		var code int
		for _, c := range rep.Checks {
			if c.ID == *rep.RootCause {
				code = c.Code
			}
		}
		if rep.ExitCode != code || code < 10 {
			t.Errorf("%s: exit %d, want the root cause's code %d", name, rep.ExitCode, code)
		}
	case strconv.Itoa(rep.ExitCode) != want:
		t.Errorf("%s (%s): exit %d, table %s", name, rep.Verdict, rep.ExitCode, want)
	}
}

func checkSlurm(t *testing.T, name string, row verdictRow, sv SlurmVerdict) {
	t.Helper()
	intent := map[SlurmIntent]string{SlurmResume: "resume", SlurmDrain: "drain", SlurmLeave: "leave"}[sv.Intent]
	if !strings.HasPrefix(row["Slurm healthcheck"], intent) {
		t.Errorf("%s: Slurm %s, table %q", name, intent, row["Slurm healthcheck"])
	}
	prolog := "0"
	if sv.Intent == SlurmDrain {
		prolog = "1"
	}
	if !strings.HasPrefix(row["Slurm prolog exit"], prolog) {
		t.Errorf("%s: prolog would exit %s, table %q", name, prolog, row["Slurm prolog exit"])
	}
	if sv.Intent == SlurmDrain && !strings.HasPrefix(sv.Reason, SlurmReasonPrefix+" ") {
		t.Errorf("%s: drain reason %q", name, sv.Reason)
	}
}

// Unknown drains only after the configured streak.
func TestSlurmUnknownDrainsAfterN(t *testing.T) {
	j := &state.Judged{Verdict: report.Unknown, Root: 0, Checks: []report.CheckResult{{ID: "gpu.acs", Code: 25, Status: report.Error, Summary: "needs CAP_SYS_ADMIN"}}}
	for _, c := range []struct {
		runs, after int
		want        SlurmIntent
	}{{1, 0, SlurmLeave}, {5, 0, SlurmLeave}, {2, 3, SlurmLeave}, {3, 3, SlurmDrain}, {4, 3, SlurmDrain}} {
		sv := Slurm(j, c.runs, SlurmOptions{UnknownDrainAfter: c.after})
		if sv.Intent != c.want {
			t.Errorf("%d unknown runs, after %d: intent %d, want %d", c.runs, c.after, sv.Intent, c.want)
		}
		if sv.Intent == SlurmDrain && sv.Reason != "rdmadoctor: gpu.acs(25) could not check (3 runs): needs CAP_SYS_ADMIN" && c.runs == 3 {
			t.Errorf("reason %q", sv.Reason)
		}
	}
}

func TestResumeWaitsFor(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	st := state.New("n")
	mk := func(t time.Time, lvl int, cs ...report.CheckResult) *report.Report {
		r := &report.Report{Schema: report.Schema, Level: lvl, Started: t, Checks: cs}
		r.Finish(false)
		return r
	}
	all := func(string) bool { return true }
	st.Merge(mk(at, 2, report.CheckResult{ID: "port.state", Code: 19, Level: 1, Status: report.Fail},
		report.CheckResult{ID: "probe.send_poll", Code: 32, Level: 2, Status: report.Fail}), all)
	st.Drain = &state.Drain{At: at.Add(time.Second), Checks: []string{"port.state", "probe.send_poll"}}
	st.Merge(mk(at.Add(time.Hour), 1, report.CheckResult{ID: "port.state", Code: 19, Level: 1, Status: report.Pass},
		report.CheckResult{ID: "probe.send_poll", Code: 32, Level: 2, Status: report.Skip, Summary: "level 2 check; run with --level 2"}), all)
	missing, _ := ResumeWaitsFor(st, "rdmadoctor: port.state(19) x", report.Policy{})
	if strings.Join(missing, ",") != "probe.send_poll" {
		t.Errorf("missing %q, want probe.send_poll", missing)
	}
	// Without a recorded drain, the reason's check is what a resume needs.
	run := state.New("n")
	run.Merge(mk(at, 1, report.CheckResult{ID: "kernel.version", Code: 12, Level: 1, Status: report.Pass}), all)
	if missing, _ := ResumeWaitsFor(run, "rdmadoctor: port.state(19) mlx5_1/1 DOWN", report.Policy{}); strings.Join(missing, ",") != "port.state" {
		t.Errorf("a --check kernel.version run: missing %q, want port.state", missing)
	}
	if missing, _ := ResumeWaitsFor(run, "rdmadoctor: run(1) could not check (2 runs): x", report.Policy{}); len(missing) != 0 {
		t.Errorf("an unknown drain waits for %q", missing)
	}
}

// alertExprs reads the shipped Prometheus rules: alert name → expression.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("../../deploy/prometheus/rdmadoctor.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out[r.Alert] = r.Expr
			}
		}
	}
	return out
}

// checkPrometheusAndSummary: the textfile exports the verdict as the one
// series at 1, the table's alert keys on exactly that series, and summarize
// counts the node under the verdict's column.
func checkPrometheusAndSummary(t *testing.T, name string, row verdictRow, rep *report.Report, alerts map[string]string) {
	t.Helper()
	var b strings.Builder
	if err := report.WritePrometheus(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, v := range report.Verdicts {
		series := fmt.Sprintf(`rdmadoctor_verdict{host="",verdict="%s"} `, v)
		want := series + "0"
		if v == rep.Verdict {
			want = series + "1"
		}
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("%s: textfile lacks %q", name, want)
		}
	}
	if alert := row["Prometheus alert"]; alert != "none" {
		if expr := alerts[alert]; !strings.Contains(expr, fmt.Sprintf(`verdict="%s"`, rep.Verdict)) {
			t.Errorf("%s: alert %s's expression %q does not key on verdict %q", name, alert, expr, rep.Verdict)
		}
	}
	for alert, expr := range alerts {
		for _, v := range report.Verdicts {
			if strings.Contains(expr, fmt.Sprintf(`verdict="%s"`, v)) && v != report.Healthy && row["verdict"] == string(v) && alert != row["Prometheus alert"] {
				t.Errorf("%s: alert %s also fires on %s; the table names %s", name, alert, v, row["Prometheus alert"])
			}
		}
	}
	sum := report.Summarize([]report.FleetReport{{Path: "n.json", Report: rep}}, nil, report.SummaryOptions{Now: rep.Started})
	got := map[string]int{"healthy": sum.Counts.Healthy, "problem": sum.Counts.Problem, "unknown": sum.Counts.Unknown}
	if got[row["summarize column"]] != 1 {
		t.Errorf("%s: summarize counts %v, want the node under %s", name, got, row["summarize column"])
	}
}

// A problem that comes from a kept record says so in the log line.
func TestSlurmSaysWhenTheResultIsKept(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	st := state.New("n")
	mk := func(t time.Time, cs ...report.CheckResult) *report.Report {
		r := &report.Report{Schema: report.Schema, Level: 1, Started: t, Checks: cs}
		r.Finish(false)
		return r
	}
	all := func(string) bool { return true }
	st.Merge(mk(at, report.CheckResult{ID: "port.state", Code: 19, Level: 1, Status: report.Fail, Summary: "mlx5_1 port 1 DOWN"}), all)
	st.Merge(mk(at.Add(time.Hour), report.CheckResult{ID: "kernel.version", Code: 12, Level: 1, Status: report.Pass}), all)
	sv := Slurm(st.Judge(at.Add(time.Hour), 0, report.Policy{}), 0, SlurmOptions{RunStarted: at.Add(time.Hour)})
	if want := "port.state(19) fail: mlx5_1 port 1 DOWN (kept from the run at 2026-12-01T10:00:00Z; this run did not judge it)"; sv.What != want {
		t.Errorf("what %q, want %q", sv.What, want)
	}
	if sv.Reason != "rdmadoctor: port.state(19) mlx5_1 port 1 DOWN" {
		t.Errorf("reason %q: the drain reason stays the finding's", sv.Reason)
	}
}
