package report

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestSummarizeOwnClock is issue 21's case: one node's clock in 2030 used
// to be "now", and every other node looked stale. Against the summary's own
// clock the fleet is fresh, the 2030 report is listed as from the future and
// is not the newest; a report within the skew is neither.
func TestSummarizeOwnClock(t *testing.T) {
	ok := map[string]Status{}
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	a, b, c, d := node("n1", "1", "r", 9000, 0, ok), node("n2", "1", "r", 9000, 0, ok), node("n3", "1", "r", 9000, 0, ok), node("n4", "1", "r", 9000, 0, ok)
	a.Started = now.Add(-10 * time.Minute)
	b.Started = now.Add(-3 * time.Minute)
	c.Started = now.Add(4 * time.Minute) // a little ahead: within the skew
	d.Started = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := Summarize(fleet(a, b, c, d), nil, SummaryOptions{Now: now, StaleAfter: time.Hour, FutureSkew: DefaultFutureSkew})
	got := struct {
		Now, Newest time.Time
		Stale       []StaleReport
		Future      []StaleReport
		Counts      VerdictCounts
	}{s.Now, s.Newest, s.Stale, s.Future, s.Counts}
	want := got
	want.Now, want.Newest = now, c.Started
	want.Stale, want.Future = []StaleReport{}, []StaleReport{{Node: "n4", Started: d.Started}}
	want.Counts = VerdictCounts{Healthy: 4}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	var text bytes.Buffer
	if err := WriteSummaryText(&text, s); err != nil {
		t.Fatal(err)
	}
	tail := "\nFROM THE FUTURE (started more than 5m0s after now, 2026-06-01T12:00:00Z: the node's clock is wrong; not taken as the newest)\n  2030-01-01T00:00:00Z  n4\n"
	if !strings.HasSuffix(text.String(), tail) || strings.Contains(text.String(), "STALE") {
		t.Errorf("text:\n%s\nwant it to end with%s", text.String(), tail)
	}
	// The same fleet an hour and a half on: all four are stale but the one
	// from the future, which is still ahead.
	s = Summarize(fleet(a, b, c, d), nil, SummaryOptions{Now: now.Add(90 * time.Minute), StaleAfter: time.Hour, FutureSkew: DefaultFutureSkew})
	if want := []StaleReport{{"n1", a.Started}, {"n2", b.Started}, {"n3", c.Started}}; !reflect.DeepEqual(s.Stale, want) || len(s.Future) != 1 {
		t.Errorf("90 min on: stale %+v future %+v, want %+v and n4", s.Stale, s.Future, want)
	}
}

// TestSummarizeVerdicts: each node lands under its verdict — a check in
// error alone is unknown, not a problem; a run cut short is unknown; a
// report written before the verdict existed is judged from its checks; a
// kept state's merged verdict wins over its last run's.
func TestSummarizeVerdicts(t *testing.T) {
	ok := map[string]Status{}
	healthy := node("h1", "1", "r", 9000, 0, ok)
	problem := node("p1", "1", "r", 9000, 0, map[string]Status{"port.state": Fail, "pci.link": Error})
	blind := node("u1", "1", "r", 9000, 0, map[string]Status{"pci.link": Error})
	cut := node("u2", "1", "r", 9000, 0, ok)
	cut.ExitCode = ExitInternal
	legacy := node("u3", "1", "r", 9000, 0, map[string]Status{"pci.link": Error})
	legacy.Verdict, legacy.ExitCode = "", 11 // report/v1 before the verdict: an error exited its check's code
	legacyWarn := node("p2", "1", "r", 9000, 0, map[string]Status{"counters.errors": Warn})
	warnCause := "counters.errors"
	legacyWarn.Verdict, legacyWarn.ExitCode, legacyWarn.RootCause = "", 22, &warnCause // --fail-on warn
	keptLast := node("p3", "1", "r", 9000, 0, ok)                                      // its last run was partial and passed
	reports := fleet(healthy, problem, blind, cut, legacy, legacyWarn, keptLast)
	reports[6].Kept = &KeptVerdict{Verdict: Problem, RootCause: "port.state", ExitCode: 19,
		Checks: []CheckResult{{ID: "port.state", Code: 19, Status: Fail}}}
	s := Summarize(reports, nil, SummaryOptions{Now: time.Unix(1e9, 0)})
	want := []ExitGroup{
		{Verdict: Healthy, ExitCode: 0, Nodes: []string{"h1"}},
		{Verdict: Problem, ExitCode: 19, RootCause: "port.state", Nodes: []string{"p1", "p3"}},
		{Verdict: Problem, ExitCode: 22, RootCause: "counters.errors", Nodes: []string{"p2"}},
		{Verdict: Unknown, ExitCode: 1, Nodes: []string{"u2"}},
		{Verdict: Unknown, ExitCode: 4, RootCause: "pci.link", Nodes: []string{"u1"}},
		{Verdict: Unknown, ExitCode: 11, RootCause: "pci.link", Nodes: []string{"u3"}},
	}
	if !reflect.DeepEqual(s.Verdicts, want) || s.Counts != (VerdictCounts{Healthy: 1, Problem: 3, Unknown: 3}) {
		t.Errorf("verdicts %+v counts %+v\nwant %+v", s.Verdicts, s.Counts, want)
	}
	var text bytes.Buffer
	if err := WriteSummaryText(&text, s); err != nil {
		t.Fatal(err)
	}
	wantHead := `rdmadoctor summarize: 7 report(s) of 7 host(s)
as of 2001-09-09T01:46:40Z: 1 healthy, 3 problem, 3 unknown

HEALTHY
  exit 0   healthy                    1  h1

PROBLEM (a check found a fault)
  exit 19  port.state                 2  p[1,3]
  exit 22  counters.errors            1  p2

UNKNOWN (could not judge: a check could not look, or the run did not finish — not a fault found)
  exit 1   run did not finish         1  u2
  exit 4   pci.link                   1  u1
  exit 11  pci.link                   1  u3

CHECKS NOT PASSING
`
	if !strings.HasPrefix(text.String(), wantHead) {
		t.Errorf("text:\n%s\nwant it to start with:\n%s", text.String(), wantHead)
	}
}

// TestSummaryTextEscapesReportFields: a hostile node's host name, check id
// and firmware cannot start a line of their own or send an escape sequence
// to the terminal.
func TestSummaryTextEscapesReportFields(t *testing.T) {
	evil := node("n1\n  exit 0   healthy   999  all\x1b[2J", "1\r\nFAKE\u202e", "r", 9000, 0, map[string]Status{"port.state": Fail})
	evil.Checks[1].ID = "port.state\x1b]0;x\x07"
	evil.Finish(false)
	good := node("n2", "2", "r", 9000, 0, map[string]Status{})
	var b bytes.Buffer
	if err := WriteSummaryText(&b, Summarize(fleet(evil, good), []FileProblem{{Path: "/d/\x1b[1mx.json", Error: "e\nf"}}, SummaryOptions{Now: time.Unix(1e9, 0)})); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\r\a\u202e") {
		t.Errorf("control characters reached the output: %q", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "exit 0") && strings.Contains(line, "999") || strings.HasPrefix(line, "FAKE") || line == "f" {
			t.Errorf("a report forged the line %q:\n%s", line, out)
		}
	}
	for _, want := range []string{`n1\n  exit 0   healthy   999  all\x1b[2J`, `1\r\nFAKE\u202e`, `port.state\x1b]0;x\x07`, `/d/\x1b[1mx.json: e\nf`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks the escaped %q:\n%s", want, out)
		}
	}
}

func TestDecodeReportVerdict(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Verdict
		err  string
	}{
		{`{"schema":"rdmadoctor.report/v1","verdict":"unknown"}`, Unknown, ""},
		{`{"schema":"rdmadoctor.report/v1"}`, "", ""},
		{`{"schema":"rdmadoctor.report/v1","verdict":"fine"}`, "", `corrupt report: verdict "fine" is not healthy, problem or unknown`},
	} {
		r, err := DecodeReport([]byte(tc.in))
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || r.Verdict != tc.want {
			t.Errorf("%s: %v, verdict %q, want %q", tc.in, err, r.Verdict, tc.want)
		}
	}
}
