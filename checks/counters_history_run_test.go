package checks

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// runCheckAt runs the check id (with its prerequisites) on dir at now with
// the kept state st (nil: none), as a run with --state does.
func runCheckAt(t *testing.T, id, dir string, st *state.State, now time.Time) report.CheckResult {
	t.Helper()
	countersNow = func() time.Time { return now }
	defer func() { countersNow = time.Now }()
	h, err := sysfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	sel, err := Select([]string{id})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Run(context.Background(), NewEnv(h, Options{Level: 1, State: st}), sel) {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no %s result", id)
	return report.CheckResult{}
}

// runWithState runs counters.errors on dir at now with the kept state st.
func runWithState(t *testing.T, dir string, st *state.State, now time.Time) report.CheckResult {
	t.Helper()
	return runCheckAt(t, "counters.errors", dir, st, now)
}

// findingsAbout lists the IDs of a result's findings about one unit.
func findingsAbout(r report.CheckResult, unit string) []string {
	var out []string
	for _, f := range r.Findings {
		if f.Unit == unit {
			out = append(out, f.ID)
		}
	}
	return out
}

func setFile(t *testing.T, p, v string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Runs over a fixture whose counter changes between them: rising, steady,
// reset by a driver reload, a new boot; an ack; each run's verdict, and
// the state carried from one to the next.
func TestCountersErrorsAcrossRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "host")
	if err := sysfstest.Build(sysfstest.CX6IB()).Write(dir); err != nil {
		t.Fatal(err)
	}
	sym := filepath.Join(dir, "sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error")
	bootID := filepath.Join(dir, "proc/sys/kernel/random/boot_id")
	st := state.New("cx6")
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	type step struct {
		set, boot string
		status    report.Status
		finding   string // the slug of the finding about mlx5_0/1
		has       []string
	}
	steps := []step{
		{status: report.Pass, finding: "none-rising", has: []string{"no error counter rising or beyond its threshold since its baseline on 1 port(s)"}},
		{set: "600", status: report.Fail, finding: "rate-exceeded", has: []string{"mlx5_0 port 1: symbol_error rose by 600 since 2026-02-01T08:00:00Z (600/h, above 120/h: " + srcBER + ")",
			"rising since 2026-02-01T09:00:00Z, in 1 of the last 2 runs"}},
		{status: report.Fail, finding: "still-failing", has: []string{"symbol_error = 600, 600 since boot, beyond the absolute 10 (rdma-core's error_thresholds), but not rising since 2026-02-01T09:00:00Z",
			"still failing: rising since 2026-02-01T09:00:00Z, in 1 of the last 3 runs; passes again after 3 clean runs (1 so far)"}},
		{set: "2", status: report.Fail, finding: "still-failing", has: []string{"new baseline: counter reset (driver reload?): 2 now, 600 at 2026-02-01T10:00:00Z", "(2 so far)"}},
		{set: "0", boot: "44444444-4444-4444-8444-444444444444", status: report.Pass, finding: "none-rising",
			has: []string{"symbol_error: new baseline: new boot (boot_id 44444444, was 3f1b2c4d); 0 now, 2 before",
				"symbol_error: clean for 3 runs after failing since 2026-02-01T09:00:00Z: passes again"}},
		{set: "7", status: report.Warn, finding: "rising-within-rate", has: []string{"symbol_error rose by 7 since 2026-02-01T12:00:00Z (7.0/h, within 120/h): 7 since the new baseline (new boot) at 2026-02-01T12:00:00Z (absolute 10)"}},
	}
	for i, s := range steps {
		if s.set != "" {
			setFile(t, sym, s.set)
		}
		if s.boot != "" {
			setFile(t, bootID, s.boot)
		}
		r := runWithState(t, dir, st, at(i))
		text := r.Summary + "\n" + strings.Join(r.Details, "\n")
		if r.Status != s.status {
			t.Fatalf("run %d: %s, want %s\n%s", i+1, r.Status, s.status, text)
		}
		if got := findingsAbout(r, "mlx5_0/1"); !reflect.DeepEqual(got, []string{"counters.errors/" + s.finding}) {
			t.Errorf("run %d: findings about mlx5_0/1 %v, want %s", i+1, got, s.finding)
		}
		for _, h := range s.has {
			if !strings.Contains(text, h) {
				t.Errorf("run %d lacks %q:\n%s", i+1, h, text)
			}
		}
	}
	cs := st.Series("mlx5_0/1/symbol_error")
	if cs == nil || len(cs.Samples) != len(steps) || cs.Samples[5].Value != 7 || st.BootID != "44444444-4444-4444-8444-444444444444" {
		t.Fatalf("state after the runs: %+v boot %s", cs, st.BootID)
	}

	// ack: the present level (7) is the new baseline; the next run, with
	// the counter unchanged, passes and says the ack.
	h, err := sysfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := AckCounters(h, st, "mlx5_0/1", "cable replaced, INC-1234", at(6))
	h.Close()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Units, ",") != "mlx5_0/1" || res.Counters != 13 {
		t.Errorf("ack = %+v", res)
	}
	a := st.Acks[len(st.Acks)-1]
	if a.Check != "counters.errors" || a.Unit != "mlx5_0/1" || a.Reason != "cable replaced, INC-1234" || !a.At.Equal(at(6)) || a.Values["mlx5_0/1/symbol_error"] != 7 || len(a.Values) != 13 {
		t.Errorf("ack recorded = %+v", a)
	}
	r := runWithState(t, dir, st, at(7))
	if got := findingsAbout(r, "mlx5_0/1"); r.Status != report.Pass || !reflect.DeepEqual(got, []string{"counters.errors/none-rising"}) || !strings.Contains(strings.Join(r.Details, "\n"), "acknowledged at 2026-02-01T14:00:00Z: cable replaced, INC-1234") {
		t.Errorf("after the ack: %s %s\n%s", r.Status, r.Summary, strings.Join(r.Details, "\n"))
	}
	if ev, _ := r.Evidence["units"].(map[string]any)["mlx5_0/1"].(map[string]any)["acknowledged"].(map[string]any); ev["reason"] != "cable replaced, INC-1234" {
		t.Errorf("evidence: %v", r.Evidence["units"])
	}

	// Unknown unit: said, with the units there are.
	h, _ = sysfs.Open(dir)
	defer h.Close()
	_, err = AckCounters(h, st, "mlx5_9/1", "x", at(8))
	if err == nil || err.Error() != `no counter unit "mlx5_9/1" on this host; units: mlx5_0/1, mlx5_0/device` {
		t.Errorf("unknown unit: %v", err)
	}
}

// Without a state the check is what it always was: counts since boot
// against the absolute thresholds.
func TestCountersErrorsWithoutStateUnchanged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "host")
	tr := sysfstest.Build(sysfstest.CX6IB())
	sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", "port_rcv_errors", "12")
	if err := tr.Write(dir); err != nil {
		t.Fatal(err)
	}
	h, err := sysfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, _ := Lookup("counters.errors")
	r := c.Run(context.Background(), NewEnv(h, Options{Level: 1}))
	if r.Status != report.Fail || len(r.Findings) != 1 || r.Findings[0].ID != "counters.errors/rcv-errors" || r.Evidence["history"] != nil {
		t.Errorf("%s %s %v", r.Status, r.Summary, r.Evidence["history"])
	}
}
