package main

import (
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
