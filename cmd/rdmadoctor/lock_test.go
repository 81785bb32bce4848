package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
)

func TestLockIsExclusiveAndReleased(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json.lock")
	l1, err := acquireLock(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = acquireLock(path)
	var busy errBusy
	if !errors.As(err, &busy) {
		t.Fatalf("second lock: err = %v, want errBusy", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "pid ") {
		t.Errorf("busy message %q names neither the lock nor its holder", err)
	}
	l1.release()
	l2, err := acquireLock(path)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.release()
}

func TestLockErrorNamesPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing-dir", "x.lock")
	_, err := acquireLock(path)
	if err == nil || errors.As(err, new(errBusy)) || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want an error naming %s", err, path)
	}
}

// A run whose state lock is held exits ExitBusy at once, says so, writes
// nothing and leaves the state as it was.
func TestOverlappingRunExitsBusy(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	os.WriteFile(state, []byte("kept"), 0o644)
	l, err := acquireLock(lockPathFor(state))
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	start := time.Now()
	code, stdout, stderr := runCLI(t, "--root", filepath.Join(hostsDir, "port-down"), "--level", "1", "--state", state)
	if code != ExitBusy || stdout != "" || !strings.Contains(stderr, "another rdmadoctor run holds") {
		t.Errorf("exit %d, stdout %q, stderr %q; want %d and a line saying so", code, stdout, stderr, ExitBusy)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("a busy run took %v: it must exit at once", time.Since(start))
	}
	if got, _ := os.ReadFile(state); string(got) != "kept" {
		t.Errorf("state changed to %q", got)
	}
	if ExitBusy == report.ExitOK || ExitBusy == report.ExitInternal || ExitBusy == report.ExitUsage {
		t.Errorf("ExitBusy %d collides with another exit code", ExitBusy)
	}
}

// --repeat runs again and again and stops with exit 0 on SIGTERM.
func TestRepeatStopsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("takes two seconds")
	}
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		c, o, e := runCLI(t, "--root", filepath.Join(hostsDir, "port-down"), "--level", "1", "--format", "prometheus",
			"--output", filepath.Join(dir, "r.prom"), "--state", state, "--repeat", "1s")
		done <- result{c, o, e}
	}()
	// Two runs: the second replaces the first's state.
	first := waitForFile(t, state, time.Time{})
	waitForFile(t, state, first)
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.code != 0 || !strings.Contains(r.stderr, "stopping") || strings.Count(r.stderr, "run exit ") < 2 {
			t.Errorf("exit %d, stderr:\n%s\nwant 0 after at least two runs", r.code, r.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("--repeat did not stop within 10 s of SIGTERM")
	}
	if _, err := acquireLock(lockPathFor(state)); err != nil {
		t.Errorf("the lock is still held after the loop stopped: %v", err)
	}
}

// waitForFile waits until path exists with a modification time after
// since, and returns that time.
func waitForFile(t *testing.T, path string, since time.Time) time.Time {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := os.Stat(path); err == nil && st.ModTime().After(since) {
			return st.ModTime()
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s was not (re)written within 10 s", path)
	return time.Time{}
}

// Periodic runs leave probe.cq_overflow out and say why; naming it runs it.
func TestPeriodicLeavesOutNoisyProbes(t *testing.T) {
	f := &flags{level: 2, fleet: fleetFlags{periodic: true}}
	sel := periodicSelection(f, allChecks(t))
	for _, c := range sel {
		if c.ID == "probe.cq_overflow" {
			t.Fatal("periodic selection kept probe.cq_overflow")
		}
	}
	res := withLeftOut(f, resultsFor(sel))
	if len(res) != len(allChecks(t)) {
		t.Fatalf("%d results, want one per catalog check (%d)", len(res), len(allChecks(t)))
	}
	for i, c := range allChecks(t) {
		if res[i].ID != c.ID {
			t.Fatalf("result %d is %s, want %s (catalog order)", i, res[i].ID, c.ID)
		}
	}
	for _, r := range res {
		if r.ID == "probe.cq_overflow" && (r.Status != report.Skip || !strings.Contains(r.Summary, "kernel log")) {
			t.Errorf("probe.cq_overflow: %s %q, want a skip saying it logs to the kernel", r.Status, r.Summary)
		}
	}
	named := &flags{level: 2, checkIDs: []string{"probe.cq_overflow"}, fleet: fleetFlags{periodic: true}}
	found := false
	for _, c := range periodicSelection(named, allChecks(t)) {
		found = found || c.ID == "probe.cq_overflow"
	}
	if !found {
		t.Error("--check probe.cq_overflow under --periodic left it out")
	}
}

// --repeat implies --periodic unless --periodic=false is given.
func TestRepeatImpliesPeriodic(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--repeat", "5m"}, true},
		{[]string{"--repeat", "5m", "--periodic=false"}, false},
		{[]string{"--periodic"}, true},
		{nil, false},
	} {
		f, err := parseFlags(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if f.fleet.periodic != tc.want {
			t.Errorf("%v: periodic = %v, want %v", tc.args, f.fleet.periodic, tc.want)
		}
	}
}

func allChecks(t *testing.T) []*checks.Check {
	t.Helper()
	return checks.Catalog()
}

// resultsFor is a passing result per selected check, in order.
func resultsFor(sel []*checks.Check) []report.CheckResult {
	out := make([]report.CheckResult, len(sel))
	for i, c := range sel {
		out[i] = report.CheckResult{ID: c.ID, Code: c.Code, Level: c.Level, Status: report.Pass}
	}
	return out
}

// Through the command line: --periodic at level 2 reports probe.cq_overflow
// as left out; without it, the probe is judged as usual.
func TestPeriodicThroughTheCLI(t *testing.T) {
	root := filepath.Join(hostsDir, "cx5-roce-healthy")
	summary := func(args ...string) string {
		_, out, stderr := runCLI(t, append([]string{"--root", root, "--format", "json"}, args...)...)
		var rep report.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v: %v %s", args, err, stderr)
		}
		for _, c := range rep.Checks {
			if c.ID == "probe.cq_overflow" {
				return c.Summary
			}
		}
		t.Fatalf("%v: no probe.cq_overflow in the report", args)
		return ""
	}
	if s := summary("--periodic"); !strings.HasPrefix(s, "left out of periodic runs") {
		t.Errorf("--periodic: %q", s)
	}
	if s := summary(); strings.Contains(s, "periodic") {
		t.Errorf("without --periodic: %q", s)
	}
	if s := summary("--periodic", "--check", "probe.cq_overflow"); strings.Contains(s, "periodic") {
		t.Errorf("--periodic --check probe.cq_overflow: %q", s)
	}
}

// --skip leaves checks out of a full run; the report still lists each, in
// catalog order, as a skip saying so, and a kept state keeps its record.
func TestSkipLeavesOutAndSays(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "state.json")
	root := filepath.Join(hostsDir, "port-down")
	if code, _, errOut := runCLI(t, "--root", root, "--level", "1", "--state", st); code != 19 {
		t.Fatalf("first run: exit %d %s", code, errOut)
	}
	code, out, errOut := runCLI(t, "--root", root, "--level", "1", "--format", "json", "--skip", "port.state,gpu.acs", "--state", st)
	if code != 0 {
		t.Fatalf("--skip port.state: exit %d, want 0 (the run proves what it ran) %s", code, errOut)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, c := range rep.Checks {
		if c.Status == report.Skip && c.Summary == "left out by --skip" {
			left = append(left, c.ID)
		}
	}
	if strings.Join(left, " ") != "port.state gpu.acs" {
		t.Errorf("left out %q, want port.state gpu.acs in catalog order", left)
	}
	if code, msg := npdCLI(t, "--state", st); code != npdProblem || !strings.HasPrefix(msg, "port.state/admin-down(19) ") {
		t.Errorf("npd after a --skip run: exit %d %q, want port.state's kept fault", code, msg)
	}
}
