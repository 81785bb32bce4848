package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// writeFixtureReports runs the real pipeline on fixture hosts and writes
// each JSON report into dir as <host>-<i>.json.
func writeFixtureReports(t *testing.T, dir string, hosts ...string) {
	t.Helper()
	for _, h := range hosts {
		code, out, errOut := runCLI(t, "--root", "../../testdata/hosts/"+h, "--level", "1", "--format", "json")
		if code == report.ExitInternal || code == report.ExitUsage {
			t.Fatalf("%s: exit %d: %s", h, code, errOut)
		}
		if err := os.WriteFile(filepath.Join(dir, h+".json"), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSummarizeDirectory: a fleet directory with good reports and a corrupt,
// a foreign and a non-JSON file, plus a missing file named on the command
// line: every bad one is named with its reason, the rest summarised, exit 1.
func TestSummarizeDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFixtureReports(t, dir, "cx5-roce-healthy", "port-down", "pcie-degraded", "cx6-ib-healthy")
	files := map[string]string{
		"corrupt.json": `{"schema":`,
		"foreign.json": `{"schema":"rdmadoctor.inventory/v1","inventory":{}}`,
		"notes.txt":    "not read: only *.json in a directory",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "gone", "node9.json")
	code, out, errOut := runCLI(t, "summarize", dir, missing)
	if code != 1 {
		t.Errorf("exit %d, want 1 (unreadable files); stderr %s", code, errOut)
	}
	for _, want := range []string{
		"4 report(s) of 3 host(s), 3 file(s) unreadable",
		"exit 19  port.state", "exit 11  pci.link", "fail   19 port.state",
		filepath.Join(dir, "corrupt.json") + ": corrupt JSON report",
		filepath.Join(dir, "foreign.json") + `: foreign schema "rdmadoctor.inventory/v1"`,
		missing + ": open: no such file or directory",
		"PCIe link ConnectX-5: 8.0 GT/s PCIe x16 on 2 node(s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "notes.txt") {
		t.Errorf("a non-JSON file of the directory was read:\n%s", out)
	}
}

func TestSummarizeJSONAndExitCodes(t *testing.T) {
	dir := t.TempDir()
	writeFixtureReports(t, dir, "cx5-roce-healthy", "port-down")
	code, out, errOut := runCLI(t, "summarize", "--format", "json", dir)
	if code != 0 {
		t.Fatalf("all files readable: exit %d, want 0: %s", code, errOut)
	}
	var s report.FleetSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.Schema != report.SummarySchema || s.Reports != 2 {
		t.Fatalf("JSON summary: %v %+v\n%s", err, s, out)
	}
	if len(s.Checks) == 0 || s.Checks[0].ID != "port.state" {
		t.Errorf("checks %+v, want port.state first", s.Checks)
	}
	for _, args := range [][]string{{"summarize"}, {"summarize", "--format", "yaml", dir}, {"summarize", "--bogus", dir},
		{"summarize", "--stale", "-1h", dir}, {"summarize", "--stale-after", "-1h", dir}, {"summarize", "--future-skew", "-1s", dir},
		{"summarize", "--max-age", "-1m", dir}, {"summarize", "--future-skew", "soon", dir}} {
		if code, _, errOut := runCLI(t, args...); code != 2 || errOut == "" {
			t.Errorf("%q: exit %d (%q), want 2 with a message", args, code, errOut)
		}
	}
	empty := t.TempDir()
	if code, out, _ := runCLI(t, "summarize", empty); code != 1 || !strings.Contains(out, empty+": directory holds no *.json file") {
		t.Errorf("empty directory: exit %d, want 1 naming it:\n%s", code, out)
	}
}

// generatedStart is when every generated report started.
var generatedStart = time.Unix(1.8e9, 0).UTC()

// setSummarizeClock sets summarize's clock to now for the test.
func setSummarizeClock(tb testing.TB, now time.Time) {
	tb.Helper()
	old := summarizeNow
	summarizeNow = func() time.Time { return now }
	tb.Cleanup(func() { summarizeNow = old })
}

// writeGeneratedFleet writes n reports made from the golden cx5-roce-healthy
// report (two ConnectX-5), named node0001…: every 100th has another firmware
// on its first device, every 250th a port down (exit 19), and node0500 an
// MTU of 1500 on its first port.
func writeGeneratedFleet(tb testing.TB, dir string, n int) {
	tb.Helper()
	base, err := os.ReadFile("../../testdata/golden/cx5-roce-healthy.json")
	if err != nil {
		tb.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		r, err := report.DecodeReport(base)
		if err != nil {
			tb.Fatal(err)
		}
		r.Host.Hostname = fmt.Sprintf("node%04d", i)
		r.Started = generatedStart
		if i%100 == 0 {
			r.Inventory.RDMADevices[0].FWVer = "16.31.1014 (MT_0000000008)"
		}
		if i%250 == 0 {
			for j := range r.Checks {
				if r.Checks[j].ID == "port.state" {
					r.Checks[j].Status = report.Fail
				}
			}
			r.Finish(false)
		}
		if i == 500 {
			r.Inventory.Netdevs[0].MTU = 1500
		}
		var b bytes.Buffer
		if err := report.WriteJSON(&b, r); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, r.Host.Hostname+".json"), b.Bytes(), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestSummarizeGeneratedFleet: 1,000 nodes fold into host ranges; the
// planted outliers, and only they, are found.
func TestSummarizeGeneratedFleet(t *testing.T) {
	setSummarizeClock(t, generatedStart.Add(10*time.Minute))
	dir := t.TempDir()
	writeGeneratedFleet(t, dir, 1000)
	start := time.Now()
	code, out, errOut := runCLI(t, "summarize", dir)
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"1000 report(s) of 1000 host(s)\n",
		"as of 2027-01-15T08:10:00Z: 996 healthy, 4 problem, 0 unknown\n",
		"exit 0   healthy                  996  node[0001-0249,0251-0499,0501-0749,0751-0999]",
		"exit 19  port.state                 4  node[0250,0500,0750,1000]",
		"firmware ConnectX-5: 16.35.2000 (MT_0000000008) on 990 node(s)",
		"16.31.1014 (MT_0000000008), 16.35.2000 (MT_0000000008) on 10: node[0100,0200,0300,0400,0500,0600,0700,0800,0900,1000]",
		"MTU ConnectX-5 port 1: 9000 on 999 node(s)\n    1500, 9000 on 1: node0500",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n  ") - strings.Count(out, "\n    "); n != 2+1+2 {
		t.Errorf("%d top-level lines in the sections, want 2 verdicts, 1 check, 2 outliers:\n%s", n, out)
	}
	if took > 10*time.Second {
		t.Errorf("1,000 reports took %v (the benchmark's budget is 1 s)", took)
	}
}

// BenchmarkSummarize1000: read, decode, summarise and print 1,000 reports.
func BenchmarkSummarize1000(b *testing.B) {
	setSummarizeClock(b, generatedStart.Add(10*time.Minute))
	dir := b.TempDir()
	writeGeneratedFleet(b, dir, 1000)
	b.ResetTimer()
	for b.Loop() {
		var out, errOut bytes.Buffer
		if code := run([]string{"summarize", dir}, &out, &errOut); code != 0 {
			b.Fatalf("exit %d: %s", code, errOut.String())
		}
	}
}
