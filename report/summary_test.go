package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDecodeReport(t *testing.T) {
	good, err := os.ReadFile("../testdata/golden/port-down.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodeReport(good)
	if err != nil || r.ExitCode != 19 || r.RootCause == nil || *r.RootCause != "port.state" {
		t.Fatalf("golden port-down: %v, %+v", err, r)
	}
	lite, err := DecodeReportForSummary(good)
	if err != nil || len(lite.Checks) != len(r.Checks) {
		t.Fatalf("DecodeReportForSummary: %v", err)
	}
	for i, c := range r.Checks {
		kept := lite.Checks[i].Evidence != nil
		if c.Evidence == nil || kept != (c.ID == "counters.errors") || lite.Checks[i].Status != c.Status {
			t.Errorf("%s: full evidence %v, summary keeps evidence %v, status %s/%s", c.ID, c.Evidence != nil, kept, c.Status, lite.Checks[i].Status)
		}
	}
	for _, tc := range []struct{ name, in, want string }{
		{"truncated", string(good[:300]), "corrupt JSON report"},
		{"empty", "", "corrupt JSON report"},
		{"array", "[1,2]", "corrupt JSON report"},
		{"null", "null", "no \"schema\""},
		{"no schema", `{"version":"1"}`, "no \"schema\""},
		{"inventory", `{"schema":"rdmadoctor.inventory/v1","inventory":{}}`, `foreign schema "rdmadoctor.inventory/v1"`},
		{"foreign with other types", `{"schema":"x/v9","checks":"none"}`, `foreign schema "x/v9"`},
		{"wrong types", `{"schema":"rdmadoctor.report/v1","checks":"none"}`, "corrupt JSON report"},
		{"exit code", `{"schema":"rdmadoctor.report/v1","exit_code":300}`, "outside 0-125"},
		{"check without id", `{"schema":"rdmadoctor.report/v1","checks":[{"status":"pass"}]}`, "check 0 has no id"},
		{"evidence not an object", `{"schema":"rdmadoctor.report/v1","checks":[{"id":"a","evidence":[1]}]}`, "evidence of a"},
	} {
		_, err := DecodeReport([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// FuzzDecodeReport: any bytes give a report of the right schema or an error,
// and a decoded report summarises and renders without panicking.
func FuzzDecodeReport(f *testing.F) {
	for _, g := range []string{"port-down.json", "cx6-ib-healthy.json", "counters-above-threshold.json"} {
		if data, err := os.ReadFile("../testdata/golden/" + g); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"schema":"rdmadoctor.report/v1","checks":[{"id":"counters.errors","status":"warn","evidence":{"units":{"a":{"nonzero_or_unknown":{"x":1e300,"y":"N/A"}}}}}]}`))
	f.Add([]byte(`{"schema":"rdmadoctor.report/v1","inventory":{"rdma_devices":[{"ports":[{"port":1,"rate":"1"}]}],"pci_functions":[{"link":{}}]}}`))
	f.Add([]byte(`{"schema":"rdmadoctor.report/v1","host":{"hostname":"a"},"inventory":{"rdma_devices":[{"name":"m","ports":[{"port":1,"link_layer":"InfiniBand","lid":7,"port_guid":"0000:0000:0000:0001","subnet_prefix":"fe80::/64"},{"port":2,"link_layer":"InfiniBand","lid":-1,"port_guid":"x"}]}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeReport(data)
		lite, liteErr := DecodeReportForSummary(data)
		if (err == nil) != (liteErr == nil) && !strings.Contains(fmt.Sprint(err), "evidence of") {
			t.Fatalf("DecodeReport: %v; DecodeReportForSummary: %v", err, liteErr)
		}
		if liteErr == nil {
			Summarize([]FleetReport{{Path: "l.json", Report: lite}}, nil, SummaryOptions{})
		}
		if err != nil {
			return
		}
		if r.Schema != Schema {
			t.Fatalf("decoded schema %q", r.Schema)
		}
		s := Summarize([]FleetReport{{Path: "a.json", Report: r}, {Path: "b.json", Report: r}}, nil, SummaryOptions{StaleAfter: time.Hour})
		if err := WriteSummaryText(&bytes.Buffer{}, s); err != nil {
			t.Fatal(err)
		}
		if err := WriteSummaryJSON(&bytes.Buffer{}, s); err != nil {
			t.Fatal(err)
		}
	})
}

// node builds a report of one host: one ConnectX-6 with one port and its
// netdev, firmware fw, port rate, MTU, the check statuses given.
func node(host, fw, rate string, mtu int, rcvErrors float64, statuses map[string]Status) *Report {
	r := &Report{Schema: Schema, Started: time.Unix(1e9, 0)}
	r.Host.Hostname, r.Host.Kernel = host, "6.1.0"
	r.Inventory.PCIFunctions = []PCIFunction{{Address: "0000:c1:00.0", Product: "ConnectX-6",
		Link: &PCILink{Speed: "16.0 GT/s PCIe", Width: 16}}}
	r.Inventory.RDMADevices = []RDMADevice{{Name: "mlx5_0", PCI: "0000:c1:00.0", FWVer: fw, Function: "PF",
		Ports: []Port{{Port: 1, Rate: rate, Netdev: "eth0"}}}}
	r.Inventory.Netdevs = []Netdev{{Name: "eth0", MTU: mtu}}
	nz := map[string]any{}
	if rcvErrors > 0 {
		nz["port_rcv_errors"] = rcvErrors
	}
	counters := CheckResult{ID: "counters.errors", Code: 22, Status: Pass,
		Evidence: map[string]any{"units": map[string]any{"mlx5_0/1": map[string]any{"nonzero_or_unknown": nz}}}}
	r.Checks = []CheckResult{{ID: "pci.link", Code: 11, Status: Pass}, {ID: "port.state", Code: 19, Status: Pass}, counters}
	for i := range r.Checks {
		if s, ok := statuses[r.Checks[i].ID]; ok {
			r.Checks[i].Status = s
		}
	}
	r.Finish(false)
	return r
}

func fleet(reports ...*Report) []FleetReport {
	out := make([]FleetReport, len(reports))
	for i, r := range reports {
		out[i] = FleetReport{Path: "/x/" + r.Host.Hostname + ".json", Report: r}
	}
	return out
}

func TestSummarize(t *testing.T) {
	ok := map[string]Status{}
	s := Summarize(fleet(
		node("n1", "20.1", "200 Gb/sec (4X HDR)", 9000, 0, ok),
		node("n2", "20.1", "200 Gb/sec (4X HDR)", 9000, 0, ok),
		node("n10", "20.1", "200 Gb/sec (4X HDR)", 1500, 0, map[string]Status{"port.state": Fail, "counters.errors": Warn}),
		node("n3", "19.9", "100 Gb/sec (4X HDR)", 9000, 1234, map[string]Status{"pci.link": Fail, "port.state": Error}),
	), []FileProblem{{Path: "/x/bad.json", Error: "corrupt"}}, SummaryOptions{})
	got, _ := json.MarshalIndent(s, "", " ")
	check := func(cond bool, what string) {
		t.Helper()
		if !cond {
			t.Errorf("%s; summary:\n%s", what, got)
		}
	}
	check(s.Reports == 4 && s.Hosts == 4 && len(s.Unreadable) == 1, "counts")
	check(len(s.Verdicts) == 3 && s.Verdicts[0].ExitCode == 0 && strings.Join(s.Verdicts[0].Nodes, " ") == "n1 n2" &&
		s.Verdicts[1].ExitCode == 11 && s.Verdicts[1].RootCause == "pci.link" && s.Verdicts[2].RootCause == "port.state", "verdicts")
	check(len(s.Checks) == 4 && s.Checks[0].ID == "pci.link" && s.Checks[1].Status == Fail && s.Checks[2].Status == Error &&
		s.Checks[3].ID == "counters.errors" && s.Checks[3].Status == Warn, "checks in catalog order, fail before error")
	want := map[string]string{
		"firmware ConnectX-6":           "20.1/3 19.9:n3",
		"port rate ConnectX-6 port 1":   "200 Gb/sec (4X HDR)/3 100 Gb/sec (4X HDR):n3",
		"MTU ConnectX-6 port 1":         "9000/3 1500:n10",
		"error counter port_rcv_errors": "0/3 1000-9999:n3",
	}
	check(len(s.Outliers) == len(want), "outlier count")
	for _, o := range s.Outliers {
		var b strings.Builder
		b.WriteString(o.Majority + "/" + strconv.Itoa(o.MajorityNodes))
		for _, v := range o.Others {
			b.WriteString(" " + v.Value + ":" + strings.Join(v.Nodes, ","))
		}
		k := o.Attribute + " " + o.Subject
		check(want[k] == b.String(), k+" = "+b.String()+", want "+want[k])
	}
}

// TestSummarizeSplitAndDuplicates: no majority is said as such; two files
// of one host stay two nodes, each named with its file.
func TestSummarizeSplitAndDuplicates(t *testing.T) {
	ok := map[string]Status{}
	a, b := node("h", "1", "r", 9000, 0, ok), node("h", "2", "r", 9000, 0, ok)
	s := Summarize([]FleetReport{{Path: "/d/a.json", Report: a}, {Path: "/d/b.json", Report: b}}, nil, SummaryOptions{})
	if s.Hosts != 1 || strings.Join(s.Verdicts[0].Nodes, ";") != "h (a.json);h (b.json)" {
		t.Errorf("hosts %d, nodes %q", s.Hosts, s.Verdicts[0].Nodes)
	}
	if len(s.Outliers) != 1 || s.Outliers[0].Majority != "" || len(s.Outliers[0].Others) != 2 {
		t.Errorf("want one split firmware outlier without a majority: %+v", s.Outliers)
	}
	var text bytes.Buffer
	if err := WriteSummaryText(&text, s); err != nil || !strings.Contains(text.String(), "firmware ConnectX-6: no majority") {
		t.Errorf("%v:\n%s", err, text.String())
	}
}

func TestSummaryTextNamesUnreadable(t *testing.T) {
	s := Summarize(nil, []FileProblem{{Path: "/d/c.json", Error: "corrupt JSON report: unexpected end of JSON input"}}, SummaryOptions{StaleAfter: time.Hour})
	var b bytes.Buffer
	if err := WriteSummaryText(&b, s); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"0 report(s) of 0 host(s), 1 file(s) unreadable", "/d/c.json: corrupt JSON report"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("text lacks %q:\n%s", w, b.String())
		}
	}
	var j bytes.Buffer
	if err := WriteSummaryJSON(&j, s); err != nil || !strings.Contains(j.String(), `"verdicts": []`) {
		t.Errorf("JSON has null lists or failed (%v):\n%s", err, j.String())
	}
}

func TestHostRanges(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{"node01", "node02", "node03", "node07"}, "node[01-03,07]"},
		{[]string{"gpu-a1", "gpu-b1", "gpu-a2"}, "gpu-a[1-2], gpu-b1"},
		{[]string{"n9", "n10", "n11"}, "n9, n[10-11]"},
		{[]string{"rack1-n05"}, "rack1-n05"},
		{[]string{"login", "h (a.json)", "x3"}, "x3, login, h (a.json)"},
		{[]string{"a1", "a1"}, "a1"},
		{nil, ""},
	} {
		if got := HostRanges(tc.in); got != tc.want {
			t.Errorf("HostRanges(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSortNodes(t *testing.T) {
	n := []string{"n10", "n2", "m", "n1", "n02"}
	SortNodes(n)
	if got := strings.Join(n, " "); got != "m n1 n02 n2 n10" {
		t.Errorf("got %q", got)
	}
}

// TestSummarizeStaleAndVersions: a report far older than the newest is
// listed, one within the window is not; a node on another rdmadoctor
// version is an outlier.
func TestSummarizeStaleAndVersions(t *testing.T) {
	ok := map[string]Status{}
	newest, recent, old := node("n1", "1", "r", 9000, 0, ok), node("n2", "1", "r", 9000, 0, ok), node("n3", "1", "r", 9000, 0, ok)
	newest.Started = time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	recent.Started = newest.Started.Add(-59 * time.Minute)
	old.Started = newest.Started.Add(-26 * time.Hour)
	newest.Version, recent.Version, old.Version = "0.2.0", "0.2.0", "0.1.0"
	now := newest.Started.Add(time.Minute)
	s := Summarize(fleet(newest, recent, old), nil, SummaryOptions{Now: now, StaleAfter: time.Hour, FutureSkew: DefaultFutureSkew})
	if len(s.Stale) != 1 || s.Stale[0].Node != "n3" || !s.Newest.Equal(newest.Started) {
		t.Errorf("stale %+v newest %v, want n3 only", s.Stale, s.Newest)
	}
	if len(s.Outliers) != 1 || s.Outliers[0].Attribute != "rdmadoctor version" || s.Outliers[0].Majority != "0.2.0" {
		t.Errorf("outliers %+v, want the version of n3", s.Outliers)
	}
	var b bytes.Buffer
	if err := WriteSummaryText(&b, s); err != nil || !strings.Contains(b.String(), "STALE (started more than 1h0m0s before now, 2026-01-02T12:01:00Z)\n  2026-01-01T10:00:00Z  n3\n") {
		t.Errorf("%v:\n%s", err, b.String())
	}
	if s := Summarize(fleet(newest, old), nil, SummaryOptions{Now: now}); len(s.Stale) != 0 {
		t.Errorf("StaleAfter 0 listed %+v", s.Stale)
	}
}
