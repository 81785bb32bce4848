package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/snapshot"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// capturedFixture is the snapshot the SoftRoCE VM suite took of a healthy
// rxe0 (`bash testdata/vm/suite.sh --update-captured` replaces it).
const capturedFixture = "rxe-vm-captured"

// capturedFixtures lists the host fixtures that are snapshots of real hosts
// (they hold a manifest) rather than the generator's output.
func capturedFixtures(t testing.TB) []string {
	t.Helper()
	ents, err := os.ReadDir(hostsDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(hostsDir, e.Name(), snapshot.ManifestFile)); err == nil {
			out = append(out, e.Name())
		}
	}
	return out
}

// allFixtures is every host fixture with golden reports: the generator's
// and the captured ones.
func allFixtures(t testing.TB) []string {
	names := append(sysfstest.Fixtures(), capturedFixtures(t)...)
	slices.Sort(names)
	return slices.Compact(names)
}

func TestCapturedFixturesFound(t *testing.T) {
	if !slices.Contains(capturedFixtures(t), capturedFixture) {
		t.Fatalf("testdata/hosts/%s is not found as a captured fixture (no %s?)", capturedFixture, snapshot.ManifestFile)
	}
	for _, name := range capturedFixtures(t) {
		if slices.Contains(sysfstest.Fixtures(), name) {
			t.Errorf("%s is both a generated and a captured fixture", name)
		}
	}
}

// TestCapturedFixtureVerdict: the VM's healthy rxe0 exits 0 at level 1;
// pci.device warns that the host has only software RDMA.
func TestCapturedFixtureVerdict(t *testing.T) {
	code, out, errOut := runCLI(t, "--root", filepath.Join(hostsDir, capturedFixture), "--level", "1", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d, want 0: %s", code, errOut)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.RootCause != nil {
		t.Errorf("root_cause %q, want none", *rep.RootCause)
	}
	found := false
	for _, c := range rep.Checks {
		if c.ID == "pci.device" {
			found = true
			if c.Status != report.Warn || !strings.Contains(c.Summary, "only software RDMA") {
				t.Errorf("pci.device: %s %q, want warn \"only software RDMA\"", c.Status, c.Summary)
			}
		}
	}
	if !found {
		t.Error("no pci.device in the report")
	}
}

// TestCapturedFixtureEqualsLive: replaying the captured snapshot gives the
// level-1 JSON report the VM gave live when it was captured, but for the
// fields of the run itself (start time, durations, root) and the tool's
// version. A difference means the snapshot lost something, or a check
// changed: re-capture with `bash testdata/vm/suite.sh --update-captured`.
func TestCapturedFixtureEqualsLive(t *testing.T) {
	liveRaw, err := os.ReadFile(filepath.Join(goldenDir, capturedFixture+".live.json"))
	if err != nil {
		t.Fatalf("the live report of the capture is missing: %v", err)
	}
	_, out, errOut := runCLI(t, "--root", filepath.Join(hostsDir, capturedFixture), "--level", "1", "--format", "json")
	live, replay := runFieldsBlanked(t, liveRaw), runFieldsBlanked(t, []byte(out))
	if live == replay {
		return
	}
	ll, rl := strings.Split(live, "\n"), strings.Split(replay, "\n")
	i := 0
	for i < len(ll) && i < len(rl) && ll[i] == rl[i] {
		i++
	}
	at := func(ls []string) string {
		if i < len(ls) {
			return strings.TrimSpace(ls[i])
		}
		return "<end>"
	}
	t.Errorf("the replay of testdata/hosts/%s differs from the VM's live report at line %d:\n  live:   %s\n  replay: %s\n"+
		"(stderr %q) if a check changed on purpose, re-capture: bash testdata/vm/suite.sh --update-captured",
		capturedFixture, i+1, at(ll), at(rl), errOut)
}

// runFieldsBlanked removes what differs between two runs of the same host:
// started, every duration_ms, host.root and version.
func runFieldsBlanked(t *testing.T, raw []byte) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not a JSON report: %v", err)
	}
	delete(m, "started")
	delete(m, "version")
	if h, ok := m["host"].(map[string]any); ok {
		delete(h, "root")
	}
	var drop func(v any)
	drop = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			delete(x, "duration_ms")
			for _, e := range x {
				drop(e)
			}
		case []any:
			for _, e := range x {
				drop(e)
			}
		}
	}
	drop(m)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
