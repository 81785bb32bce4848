package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Outputs as rdma-core 44 and perftest 4.5 print them (trimmed).
const (
	rcPingpongOut = `  local address:  LID 0x0000, QPN 0x000011, PSN 0x6b1c8e, GID ::ffff:192.0.2.1
  remote address: LID 0x0000, QPN 0x000011, PSN 0x2f3a51, GID ::ffff:192.0.2.2
2048000 bytes in 0.39 seconds = 42.01 Mbit/sec
500 iters in 0.39 seconds = 779.40 usec/iter
`
	sendBWOut = `---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      200              14.71              9.92   		   0.000159
---------------------------------------------------------------------------------------
`
	sendBWGbitsOut = ` #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      200              0.12               0.09   		   0.000172
`
	writeLatOut = `---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 64      500          194.30         2210.43      281.44     	306.12      	120.55 		1012.33 		2210.43 	
---------------------------------------------------------------------------------------
`
)

func TestToolFigures(t *testing.T) {
	cases := []struct {
		out  string
		want []figure
	}{
		{rcPingpongOut, []figure{{"round trip", "µs", 779.40}}},
		{sendBWOut, []figure{{"bandwidth", "MB/s", 9.92}}},
		{writeLatOut, []figure{{"round trip (2 × one-way typical)", "µs", 562.88}, {"one-way latency (typical)", "µs", 281.44}}},
		{sendBWGbitsOut, []figure{{"bandwidth", "Gb/s", 0.09}}},
		{"Couldn't connect to 192.0.2.2:18515\n", nil},
		{"", nil},
	}
	for _, c := range cases {
		got := toolFigures([]byte(c.out))
		if len(got) != len(c.want) {
			t.Errorf("%q: got %+v, want %+v", firstLines(c.out, 1), got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%q: figure %d = %+v, want %+v", firstLines(c.out, 1), i, got[i], c.want[i])
			}
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// The single guest's and the pair's tables share TIMING.md: writing one
// section keeps the other.
func TestWriteSection(t *testing.T) {
	p := filepath.Join(t.TempDir(), "TIMING.md")
	if err := writeSection(p, "single", "one\n"); err != nil {
		t.Fatal(err)
	}
	if err := writeSection(p, "pair", "two\n"); err != nil {
		t.Fatal(err)
	}
	if err := writeSection(p, "single", "three\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	want := "<!-- begin single -->\nthree\n<!-- end single -->\n<!-- begin pair -->\ntwo\n<!-- end pair -->\n"
	if string(b) != want {
		t.Fatalf("TIMING.md:\n%s\nwant:\n%s", b, want)
	}
}

// A pair scenario whose server record is missing fails; one whose
// resources did not come back fails naming the node.
func TestPairServerJudgement(t *testing.T) {
	dir := t.TempDir()
	v := &verifier{dir: dir, catalog: map[string]catalogEntry{}}
	o := &outcome{}
	m := parseMeta("pair 1\nruns 1\nsame-resources 1\n")
	v.pairServer(o, "x", m, true)
	if len(o.Failures) != 1 || !strings.Contains(o.Failures[0], "node b") {
		t.Fatalf("missing node b record: failures %v", o.Failures)
	}
	before := `[{"ifindex":1,"ifname":"rxe0","pd":1,"cq":1,"qp":1}]`
	after := `[{"ifindex":1,"ifname":"rxe0","pd":2,"cq":1,"qp":1}]`
	for node, files := range map[string][2]string{"x": {before, before}, "x.b": {before, after}} {
		d := filepath.Join(dir, node)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "meta"), []byte("repair_exit 0\n"), 0o644)
		os.WriteFile(filepath.Join(d, "resource.before.json"), []byte(files[0]), 0o644)
		os.WriteFile(filepath.Join(d, "resource.after.json"), []byte(files[1]), 0o644)
	}
	o = &outcome{}
	v.pairServer(o, "x", m, true)
	if len(o.Failures) != 1 || !strings.Contains(o.Failures[0], "node b: verbs objects not back") {
		t.Fatalf("leak on node b: failures %v, passed %v", o.Failures, o.Passed)
	}
}

// Each of rdmadoctor's figures is held against the tool that measures the
// same thing: the median round trip against ib_send_lat's, the mean against
// ibv_rc_pingpong's, the WRITE bandwidth against ib_write_bw's.
func TestComparisonsPairLikeWithLike(t *testing.T) {
	v := &verifier{pairRows: []pairRow{
		{Command: "ibv_rc_pingpong -g 1", What: "round trip", Unit: "µs", Median: 2000},
		{Command: "ib_write_lat -x 1", What: "round trip (2 × one-way typical)", Unit: "µs", Median: 5000},
		{Command: "ib_send_lat -x 1", What: "round trip (2 × one-way typical)", Unit: "µs", Median: 1000, Runs: []float64{1000, 500, 2000}},
		{Command: "ib_send_bw -x 1", What: "bandwidth", Unit: "Gb/s", Median: 1},
		{Command: "ib_write_bw -x 1", What: "bandwidth", Unit: "Gb/s", Median: 0.1},
		{Command: "rdmadoctor peer test", What: "round trip (peer.latency median, 64 B SEND)", Unit: "µs", Median: 1200, Runs: []float64{1200, 600, 2000}},
		{Command: "rdmadoctor peer test", What: "round trip (peer.latency mean, 64 B SEND)", Unit: "µs", Median: 3000},
		{Command: "rdmadoctor peer test", What: "bandwidth (peer.bandwidth, 65536 B WRITE)", Unit: "Gb/s", Median: 0.11},
	}}
	got := v.comparisons()
	want := []string{
		"vs `ib_send_lat` 1000 µs: 1.20× (within ±25 %); round by round 1.20, 1.20, 1.00×, median 1.20×",
		"vs `ibv_rc_pingpong` 2000 µs: 1.50× (outside ±25 %)",
		"vs `ib_write_bw` 0.1 Gb/s: 1.10× (within ±25 %)",
	}
	if len(got) != len(want) {
		t.Fatalf("comparisons = %q, want %d lines", got, len(want))
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("comparison %d = %q, want it to contain %q", i, got[i], want[i])
		}
	}

	// ib_send_lat run again after each peer test: each round is held by
	// the mean of the runs before and after it.
	v.pairRows = append(v.pairRows, pairRow{Command: "ib_send_lat -x 1", What: "round trip (2 × one-way typical), the run after `peer test`",
		Unit: "µs", Median: 1000, Runs: []float64{1400, 700, 2000}})
	got = v.comparisons()
	if want := "vs `ib_send_lat` 1200 µs, the mean of its runs just before and just after: 1.00× (within ±25 %); round by round 1.00, 1.00, 1.00×"; !strings.Contains(got[0], want) {
		t.Errorf("bracketed comparison = %q, want it to contain %q", got[0], want)
	}
}

// A scenario run in rounds is listed once, though each round has its line
// (indented, in a loop); an exit status recorded per round is its worst.
func TestRoundsOfAScenario(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pair-scenarios.sh")
	text := "pair_scenario one --kind ref\nfor round in 1/3 2/3 3/3; do\n\tpair_scenario two --round $round\n\tpair_scenario three --round $round\ndone\n"
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(expectedScenarios(p, ""), ","); got != "one,two,three" {
		t.Errorf("expectedScenarios = %s, want one,two,three", got)
	}
	m := parseMeta("repair_exit 0\nrepair_exit 1\nrepair_exit 0\nbreak_exit 0\n")
	if got := m.exitOf("repair_exit"); got != "1" {
		t.Errorf("exitOf(repair_exit) = %q, want 1", got)
	}
	if got := m.exitOf("break_exit"); got != "0" {
		t.Errorf("exitOf(break_exit) = %q, want 0", got)
	}
	if got := m.exitOf("absent"); got != "" {
		t.Errorf("exitOf(absent) = %q, want empty", got)
	}
}

// A reference run without a figure (perftest's zeros when it cannot
// calibrate its clock) is left out of the median and of its round's
// ratio; the other rounds still pair up.
func TestRunWithoutFigureIsLeftOut(t *testing.T) {
	ref := []float64{1000, math.NaN(), 2000}
	if m := median(ref); m != 1500 {
		t.Errorf("median = %v, want 1500", m)
	}
	rs := roundRatios([]float64{1100, 900, 2200}, ref)
	if len(rs) != 2 || math.Abs(rs[0]-1.1) > 1e-9 || math.Abs(rs[1]-1.1) > 1e-9 {
		t.Errorf("round ratios = %v, want [1.1 1.1]", rs)
	}
	b := bracket([]*pairRow{{Runs: []float64{1000, 1000, math.NaN()}}, {Runs: []float64{1200, 1400, 1000}}})
	if !math.IsNaN(b.Runs[2]) || b.Median != 1150 {
		t.Errorf("bracket = %+v, want the third round without a figure and median 1150", b)
	}
}

// The time column of a scenario run in rounds is the median of its
// rounds, not the last one's.
func TestScenarioSecondsOfRounds(t *testing.T) {
	for meta, want := range map[string]string{
		"":              "",
		"seconds 6.2\n": "6.2 s",
		"seconds 9.0\nseconds 4.0\nseconds 5.5\n": "5.5 s (median of 3 rounds)",
		"seconds 2.0\nseconds x\nseconds 4.0\n":   "3.0 s (median of 3 rounds)",
	} {
		if got := scenarioSeconds(parseMeta(meta)); got != want {
			t.Errorf("%q: %q, want %q", meta, got, want)
		}
	}
}
