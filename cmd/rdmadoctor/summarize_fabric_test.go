package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// TestSummarizeFabricClash: two hosts cloned from one image (the same
// InfiniBand fixture under two host names) carry the same LID and port
// GUID: summarize names both, from the reports' sysfs-read LID and GID 0;
// a RoCE host beside them adds nothing.
func TestSummarizeFabricClash(t *testing.T) {
	dir := t.TempDir()
	writeFixtureReports(t, dir, "cx6-ib-healthy", "cx5-roce-healthy")
	data, err := os.ReadFile(filepath.Join(dir, "cx6-ib-healthy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	r.Host.Hostname = "cx6-ib-clone"
	clone, _ := json.Marshal(r)
	if err := os.WriteFile(filepath.Join(dir, "clone.json"), clone, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "summarize", "--format", "json", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var s report.FleetSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, f := range s.Fabric {
		ids[f.ID] = strings.Join(f.Nodes, " ")
	}
	for _, id := range []string{report.FabricDuplicateLID, report.FabricDuplicateGUID} {
		if ids[id] != "cx6-ib-clone cx6-ib-node07" {
			t.Errorf("%s: nodes %q, want both clones; fabric %+v", id, ids[id], s.Fabric)
		}
	}
	if len(s.Fabric) != 2 {
		t.Errorf("want the LID and the GUID only (one subnet prefix), got %+v", s.Fabric)
	}
	_, text, _ := runCLI(t, "summarize", dir)
	if !strings.Contains(text, "INFINIBAND FABRIC") || !strings.Contains(text, "port GUID b83f:d203:00a1:2c6e is on ports of 2 hosts") {
		t.Errorf("text summary lacks the clash:\n%s", text)
	}
}
