package state

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// run is a report of one run at level lvl started at t with these results.
func run(t time.Time, lvl int, checks ...report.CheckResult) *report.Report {
	r := &report.Report{Schema: report.Schema, Level: lvl, Started: t, Checks: checks}
	r.Finish(false)
	return r
}

func res(id string, code, level int, st report.Status) report.CheckResult {
	return report.CheckResult{ID: id, Code: code, Level: level, Status: st, Summary: id + " " + string(st)}
}

// statuses is the records as "id=status@ran" for whole-value comparison.
func statuses(s *State) []string {
	var out []string
	for _, c := range s.Checks {
		out = append(out, fmt.Sprintf("%s=%s@%s", c.ID, c.Status, c.Ran.Format("15:04")))
	}
	return out
}

func eq(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s:\n got  %q\n want %q", what, got, want)
	}
}

func TestMergeUpdatesOnlyWhatRan(t *testing.T) {
	s := New("n1")
	all := func(string) bool { return true }
	s.Merge(run(t0, 2, res("pci.device", 10, 1, report.Pass), res("port.state", 19, 1, report.Fail),
		res("probe.send_poll", 32, 2, report.Fail)), all)
	// A level-1 run of one check: the level-2 probe is listed as skipped
	// for its level, port.state was not selected.
	s.Merge(run(t0.Add(time.Hour), 1, res("pci.device", 10, 1, report.Pass), res("port.state", 19, 1, report.Pass),
		res("probe.send_poll", 32, 2, report.Skip)), func(id string) bool { return id == "pci.device" })
	eq(t, "records", statuses(s), []string{"pci.device=pass@11:00", "port.state=fail@10:00", "probe.send_poll=fail@10:00"})
	j := s.Judge(t0.Add(time.Hour), 0, report.Policy{})
	if j.Verdict != report.Problem || j.RootCheck().ID != "port.state" {
		t.Errorf("verdict %s root %v, want problem port.state", j.Verdict, j.RootCheck())
	}
	// A cut-off check and one left out by --skip prove nothing.
	cut := res("port.state", 19, 1, report.Skip)
	cut.Summary = "not run: the run ended before this check finished (context deadline exceeded)"
	cut.Findings = []report.Finding{{ID: report.FindingCut, Status: report.Skip, Message: cut.Summary}}
	left := res("probe.send_poll", 32, 2, report.Skip)
	left.Summary = "left out by --skip"
	left.Findings = []report.Finding{{ID: report.FindingLeftOutSkip, Status: report.Skip, Message: left.Summary}}
	s.Merge(run(t0.Add(2*time.Hour), 2, cut, left), all)
	eq(t, "after a cut run", statuses(s), []string{"pci.device=pass@11:00", "port.state=fail@10:00", "probe.send_poll=fail@10:00"})
	// Since is kept while the status stays.
	s.Merge(run(t0.Add(3*time.Hour), 1, res("pci.device", 10, 1, report.Pass)), all)
	if got := s.Record("pci.device"); !got.Since.Equal(t0) || !got.Ran.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("pci.device since %v ran %v, want since %v", got.Since, got.Ran, t0)
	}
}

func TestJudgeAgesRecords(t *testing.T) {
	s := New("n1")
	s.Merge(run(t0, 1, res("pci.device", 10, 1, report.Pass), res("port.state", 19, 1, report.Pass)), func(string) bool { return true })
	cases := []struct {
		now    time.Time
		maxAge time.Duration
		want   report.Verdict
		say    string
	}{
		{t0.Add(10 * time.Minute), 15 * time.Minute, report.Healthy, ""},
		{t0.Add(20 * time.Minute), 15 * time.Minute, report.Unknown, "older than the max age 15m0s, judged 2026-12-01T10:00:00Z;"},
		{t0.Add(100 * time.Hour), 0, report.Healthy, ""},
		{t0.Add(-time.Hour), 0, report.Unknown, "ahead of this clock"},
		{t0.Add(-time.Minute), 0, report.Healthy, ""}, // within the skew
	}
	for _, c := range cases {
		j := s.Judge(c.now, c.maxAge, report.Policy{})
		if j.Verdict != c.want {
			t.Errorf("now %v max %v: %s, want %s", c.now, c.maxAge, j.Verdict, c.want)
		}
		if c.say != "" && !strings.Contains(j.RootCheck().Summary, c.say) {
			t.Errorf("now %v: %q does not say %q", c.now, j.RootCheck().Summary, c.say)
		}
	}
	if j := New("x").Judge(t0, 0, report.Policy{}); j.Verdict != report.Unknown {
		t.Errorf("an empty state is %s, want unknown", j.Verdict)
	}
}

func TestPassedSince(t *testing.T) {
	s := New("n1")
	all := func(string) bool { return true }
	s.Merge(run(t0, 2, res("port.state", 19, 1, report.Fail), res("probe.send_poll", 32, 2, report.Fail)), all)
	drain := t0.Add(time.Minute)
	s.Merge(run(t0.Add(time.Hour), 1, res("port.state", 19, 1, report.Pass), res("probe.send_poll", 32, 2, report.Skip)), all)
	eq(t, "after a level-1 run", s.PassedSince([]string{"port.state", "probe.send_poll"}, drain, report.Policy{}), []string{"probe.send_poll"})
	s.Merge(run(t0.Add(2*time.Hour), 2, res("probe.send_poll", 32, 2, report.Warn)), all)
	eq(t, "after level 2", s.PassedSince([]string{"port.state", "probe.send_poll"}, drain, report.Policy{}), nil)
	eq(t, "warnings counted", s.PassedSince([]string{"probe.send_poll"}, drain, report.Policy{FailOnWarn: true}), []string{"probe.send_poll"})
	blocked := res("port.state", 19, 1, report.Skip)
	blocked.Summary = "blocked by rdma.devices"
	blocked.Findings = []report.Finding{{ID: report.FindingBlocked, Status: report.Skip, Message: blocked.Summary}}
	s.Merge(run(t0.Add(3*time.Hour), 1, blocked), all)
	eq(t, "blocked", s.PassedSince([]string{"port.state"}, drain, report.Policy{}), []string{"port.state"})
	// A record an earlier version wrote has no finding IDs: its summary
	// says it was blocked.
	s.Record("port.state").Findings, s.Record("port.state").Lead = nil, ""
	eq(t, "blocked, recorded before findings", s.PassedSince([]string{"port.state"}, drain, report.Policy{}), []string{"port.state"})
	// A skip whose summary merely reads like one is judged by its ID.
	s.Record("port.state").Findings = []string{"port.state/unused"}
	eq(t, "a skip that was not blocked", s.PassedSince([]string{"port.state"}, drain, report.Policy{}), nil)
}

func TestDecode(t *testing.T) {
	rep := run(t0, 1, res("pci.device", 10, 1, report.Pass), res("port.state", 19, 1, report.Fail), res("probe.ud", 35, 2, report.Skip))
	v1, _ := json.Marshal(rep)
	s, err := Decode(v1)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "migrated", statuses(s), []string{"pci.device=pass@10:00", "port.state=fail@10:00"})
	if s.Migrated != report.Schema || s.Schema != Schema {
		t.Errorf("migrated %q schema %q", s.Migrated, s.Schema)
	}
	enc, _ := s.Encode()
	again, err := Decode(enc)
	if err != nil || strings.Join(statuses(again), " ") != strings.Join(statuses(s), " ") {
		t.Errorf("round trip: %v %q", err, statuses(again))
	}
	for in, want := range map[string]string{
		``:                                  "empty",
		`{"schema":"rdmadoctor.state/v2"`:   "truncated",
		`[1,2]`:                             "not JSON",
		`{}`:                                `no "schema"`,
		`{"schema":"rdmadoctor.state/v1"}`:  "not one this version reads",
		`{"schema":"rdmadoctor.state/v3"}`:  "move the file aside",
		`{"schema":"rdmadoctor.report/v1"}`: "report",
		`{"schema":"rdmadoctor.state/v2","checks":[{"id":"a","status":"maybe"}]}`: `status "maybe"`,
		`{"schema":"rdmadoctor.state/v2","checks":[{"status":"pass"}]}`:           "no id",
		`{"schema":"rdmadoctor.state/v2","unknown_runs":-1}`:                      "unknown_runs",
	} {
		if _, err := Decode([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Decode(%q) = %v, want an error saying %q", in, err, want)
		}
	}
}

// A history with a million entries is bounded, the newest kept.
func TestBounds(t *testing.T) {
	s := New("n1")
	for i := range 1000 {
		s.Counters = append(s.Counters, CounterSeries{Key: fmt.Sprintf("mlx5_0/1/c%d", i)})
		for k := range 1000 {
			s.Counters[i].Samples = append(s.Counters[i].Samples, CounterSample{Value: uint64(k), At: t0.Add(time.Duration(i*1000+k) * time.Second)})
		}
	}
	for i := range MaxChecks + 10 {
		s.Checks = append(s.Checks, CheckRecord{ID: fmt.Sprintf("c%03d", i), Code: i, Status: report.Pass, Ran: t0.Add(time.Duration(i) * time.Minute)})
	}
	enc, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Checks) != MaxChecks || back.Checks[0].ID != "c010" {
		t.Errorf("%d checks from %s, want %d from c010", len(back.Checks), back.Checks[0].ID, MaxChecks)
	}
	for _, c := range back.Counters {
		if len(c.Samples) != MaxSamples || c.Samples[MaxSamples-1].Value != 999 {
			t.Fatalf("%s: %d samples ending %d", c.Key, len(c.Samples), c.Samples[len(c.Samples)-1].Value)
		}
	}
	big := make([]byte, MaxBytes+1)
	if _, err := Decode(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("huge: %v", err)
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "no state file") {
		t.Errorf("missing: %v", err)
	}
	s, err := LoadOrNew(p, "n1")
	if err != nil || s.Host != "n1" {
		t.Fatalf("LoadOrNew: %v %+v", err, s)
	}
	s.Merge(run(t0, 1, res("pci.device", 10, 1, report.Pass)), func(string) bool { return true })
	if err := s.Save(p); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != Mode {
		t.Errorf("mode %v", st.Mode())
	}
	link := filepath.Join(dir, "link.json")
	os.Symlink(p, link)
	if _, err := Load(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("symlink: %v", err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	// Concurrent savers never leave a torn file behind.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := *s
			c.UnknownRuns = i
			c.Save(p)
		}()
	}
	wg.Wait()
	if _, err := Load(p); err != nil {
		t.Errorf("after concurrent saves: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	rep := run(t0, 1, res("pci.device", 10, 1, report.Pass), res("port.state", 19, 1, report.Fail))
	v1, _ := json.Marshal(rep)
	f.Add(v1)
	s, _ := Decode(v1)
	v2, _ := s.Encode()
	f.Add(v2)
	f.Add([]byte(`{"schema":"rdmadoctor.state/v2","checks":[{"id":"x","status":"error","ran":"2099-01-01T00:00:00Z"}],"drain":{"checks":["x"]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(data)
		if err != nil {
			return
		}
		j := s.Judge(t0, time.Hour, s.Policy.Report())
		if j.Verdict == report.Healthy && j.RootCheck() != nil {
			t.Errorf("healthy with a root cause")
		}
		if _, err := s.Encode(); err != nil {
			t.Errorf("encode: %v", err)
		}
	})
}

// A run's checks write into a clone; the kept state takes the history only
// when they finished, and the clone shares nothing with it.
func TestCloneAndTakeHistory(t *testing.T) {
	s := New("n1")
	s.AddSample("mlx5_0/1/symbol_error", CounterSample{Value: 1, At: t0})
	s.Counters[0].Baseline = &CounterSample{Value: 1}
	s.Acks = []Ack{{Check: "counters.errors", Values: map[string]uint64{"k": 1}}}
	w := s.Clone()
	w.AddSample("mlx5_0/1/symbol_error", CounterSample{Value: 2, At: t0.Add(time.Hour)})
	w.Counters[0].Samples[0].Value = 99
	w.Counters[0].Baseline.Value = 99
	w.Acks[0].Values["k"] = 99
	w.BootID = "b2"
	if got := s.Counters[0]; len(got.Samples) != 1 || got.Samples[0].Value != 1 || got.Baseline.Value != 1 || s.Acks[0].Values["k"] != 1 {
		t.Fatalf("the clone shares memory with the kept state: %+v %+v", got, s.Acks)
	}
	s.TakeHistory(w, false)
	if len(s.Counters[0].Samples) != 1 || s.BootID != "" {
		t.Errorf("an abandoned run's history was taken")
	}
	s.TakeHistory(w, true)
	if len(s.Counters[0].Samples) != 2 || s.BootID != "b2" {
		t.Errorf("a finished run's history was not taken: %+v", s.Counters[0])
	}
}
