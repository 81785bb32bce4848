package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The two-guest pair (pair.sh): node a's record NAME holds the client's
// runs (stdout, stdout.2 ...) and the scenario's meta; node b's record
// NAME.b holds the server's. These helpers judge what only a pair has: the
// server's side, the resource counts on both nodes, the reference tools'
// figures and the comparison table.

// pairServer judges node b's record of a scenario when there is one.
func (v *verifier) pairServer(o *outcome, name string, m meta, active bool) {
	dir := filepath.Join(v.dir, name+".b")
	bm, err := os.ReadFile(filepath.Join(dir, "meta"))
	if err != nil {
		if _, isPair := m.get("pair"); isPair {
			o.fail("no record came back from node b")
		}
		return
	}
	b := parseMeta(string(bm))
	if e, ok := b.get("meta_error"); ok {
		o.fail("node b: %s", e)
	}
	if e := b.exitOf("break_exit"); e != "" && e != "0" {
		o.fail("node b's --b-break failed (status %s): %s", e, firstLines(readTrim(filepath.Join(dir, "break.log")), 3))
	}
	if e := b.exitOf("repair_exit"); e != "0" {
		o.fail("node b: the healthy state could not be restored (status %q): %s", e, firstLines(readTrim(filepath.Join(dir, "repair.log")), 3))
	}
	if p, ok := m.get("server_problem"); ok {
		o.fail("node b: %s (server stderr: %s)", p, firstLines(readTrim(filepath.Join(dir, "stderr")), 3))
	}
	if !active {
		return
	}
	if want, ok := m.get("server-exit"); ok {
		got := readTrim(filepath.Join(dir, "exit"))
		if slices.Contains(splitList(want), got) {
			o.ok("server exit %s", got)
		} else {
			o.fail("node b's server: expected exit %s, observed %s%s: %s", want, got,
				map[bool]string{true: " (killed after 15 s: it did not end by itself)"}[firstOf(b, "server_killed") == "1"],
				firstLines(readTrim(filepath.Join(dir, "stderr")), 4))
		}
	}
	for _, word := range m.all("server-log") {
		text := readTrim(filepath.Join(dir, "stdout")) + "\n" + readTrim(filepath.Join(dir, "stderr"))
		if strings.Contains(strings.ToLower(text), strings.ToLower(word)) {
			o.ok("server log names %q", word)
		} else {
			o.fail("node b's server output does not name %q: %s", word, firstLines(text, 4))
		}
	}
	if firstOf(m, "same-resources") == "1" {
		v.sameResources(o, "node a", filepath.Join(v.dir, name))
		v.sameResources(o, "node b", dir)
	}
}

// sameResources compares `rdma -j resource` before the scenario and after
// its restore on one node.
func (v *verifier) sameResources(o *outcome, node, dir string) {
	before, err1 := os.ReadFile(filepath.Join(dir, "resource.before.json"))
	after, err2 := os.ReadFile(filepath.Join(dir, "resource.after.json"))
	if err1 != nil || err2 != nil {
		o.fail("%s: no resource counts (resource.before.json / resource.after.json)", node)
		return
	}
	b, err1 := parseResourceSummary(before)
	a, err2 := parseResourceSummary(after)
	if err1 != nil || err2 != nil {
		o.fail("%s: unreadable `rdma -j resource`: %v %v", node, err1, err2)
		return
	}
	for _, k := range resourceKeys {
		if a[k] != b[k] {
			o.fail("%s: verbs objects not back to their counts: before %s, after %s", node, countsText(b), countsText(a))
			return
		}
	}
	o.ok("%s: verbs objects back to %s", node, countsText(b))
}

// clientRuns lists node a's runs of a scenario: exit status, stdout and the
// seconds each took.
type clientRun struct {
	Exit    string
	Stdout  []byte
	Seconds float64
}

func clientRuns(dir string, m meta) []clientRun {
	n, _ := strconv.Atoi(firstOf(m, "runs"))
	n = max(n, 1)
	secs := m.all("client_seconds")
	var out []clientRun
	for i := 1; i <= n; i++ {
		sfx := ""
		if i > 1 {
			sfx = "." + strconv.Itoa(i)
		}
		r := clientRun{Exit: readTrim(filepath.Join(dir, "exit"+sfx))}
		r.Stdout, _ = os.ReadFile(filepath.Join(dir, "stdout"+sfx))
		if i-1 < len(secs) {
			r.Seconds, _ = strconv.ParseFloat(secs[i-1], 64)
		}
		out = append(out, r)
	}
	return out
}

// figure is one measured quantity of one run.
type figure struct {
	Name  string // "latency", "bandwidth"
	Unit  string // "µs", "MB/s"
	Value float64
}

var (
	rcPingpongRe = regexp.MustCompile(`(\d+) iters in ([\d.]+) seconds = ([\d.]+) usec/iter`)
	perftestRow  = regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)(?:\s+([\d.]+))?(?:\s+([\d.]+))?(?:\s+([\d.]+))?`)
)

// toolFigures reads the figures of a reference tool's output: rdma-core's
// pingpongs print "N iters in S seconds = U usec/iter" (a round trip), and
// perftest prints one row under its header: ib_send_bw "#bytes #iterations
// BW peak BW average MsgRate", ib_write_lat "#bytes #iterations t_min t_max
// t_typical t_avg t_stdev 99% 99.9%" (one-way: half a round trip).
func toolFigures(out []byte) []figure {
	if m := rcPingpongRe.FindSubmatch(out); m != nil {
		us, _ := strconv.ParseFloat(string(m[3]), 64)
		return []figure{{"round trip", "µs", us}}
	}
	row := perftestRow.FindSubmatch(out)
	if row == nil {
		return nil
	}
	f := func(i int) float64 { x, _ := strconv.ParseFloat(string(row[i]), 64); return x }
	switch {
	case bytes.Contains(out, []byte("BW average[Gb/sec]")):
		return []figure{{"bandwidth", "Gb/s", f(4)}}
	case bytes.Contains(out, []byte("BW average")):
		return []figure{{"bandwidth", "MB/s", f(4)}}
	case bytes.Contains(out, []byte("t_typical")):
		// A round trip is two one-way latencies: what the pingpongs and
		// peer.latency time.
		return []figure{{"round trip (2 × one-way typical)", "µs", 2 * f(5)}, {"one-way latency (typical)", "µs", f(5)}}
	}
	return nil
}

// refTool judges a reference tool's runs: each exited 0 and printed its
// figures; their medians go to the comparison table.
func (v *verifier) refTool(o *outcome, name, dir string, m meta) {
	runs := clientRuns(dir, m)
	vals := map[string][]float64{}
	units := map[string]string{}
	var order []string
	for i, r := range runs {
		if r.Exit != "0" {
			o.fail("run %d: exit %s: %s", i+1, r.Exit, firstLines(readTrim(filepath.Join(dir, stderrName(i))), 3))
			continue
		}
		figs := toolFigures(r.Stdout)
		if len(figs) == 0 {
			o.fail("run %d: no figures in its output: %s", i+1, firstLines(string(r.Stdout), 3))
			continue
		}
		for _, f := range figs {
			if _, ok := units[f.Name]; !ok {
				order = append(order, f.Name)
			}
			units[f.Name] = f.Unit
			if f.Value == 0 {
				// perftest prints zeros when it could not calibrate its
				// clock ("Correlation coefficient r^2 < 0.9", a host too
				// loaded for its sampling): no figure, and the round's
				// place kept so the rounds still pair up.
				o.Extra = append(o.Extra, fmt.Sprintf("run %d: %s is 0 (%s): left out", i+1, f.Name, firstLines(readTrim(filepath.Join(dir, stderrName(i))), 1)))
				f.Value = math.NaN()
			}
			vals[f.Name] = append(vals[f.Name], f.Value)
		}
	}
	for _, k := range order {
		med := median(vals[k])
		what := k
		if strings.HasSuffix(name, "-after") {
			what += ", the run after `peer test`"
		}
		o.Extra = append(o.Extra, fmt.Sprintf("%s median %.1f %s over %d run(s) %v", k, med, units[k], len(vals[k]), vals[k]))
		v.pairRows = append(v.pairRows, pairRow{Source: name, Command: firstOf(m, "client"), What: what, Unit: units[k],
			Median: med, Runs: vals[k]})
	}
	if len(order) > 0 && len(o.Failures) == 0 {
		o.ok("%d run(s) with figures", len(runs))
	}
}

func stderrName(i int) string {
	if i == 0 {
		return "stderr"
	}
	return "stderr." + strconv.Itoa(i+1)
}

// maxSeconds holds node a's command to --max-seconds (the median of its runs).
func (v *verifier) maxSeconds(o *outcome, dir string, m meta) {
	lim, ok := m.get("max-seconds")
	if !ok {
		return
	}
	want, _ := strconv.ParseFloat(lim, 64)
	var secs []float64
	for _, r := range clientRuns(dir, m) {
		secs = append(secs, r.Seconds)
	}
	med := median(secs)
	o.Extra = append(o.Extra, fmt.Sprintf("client took %.2f s (median of %v)", med, secs))
	// A time is measured, not asserted: over the target it is a warning
	// (a failure with --strict), as the host's load moves TCG's speed.
	switch {
	case med <= want:
		o.ok("client within %s s", lim)
	case v.strict:
		o.fail("client took %.2f s (median), over the %s s target", med, lim)
	default:
		v.warnings = append(v.warnings, fmt.Sprintf("%s: the client took %.2f s (median), over the %s s target (a failure with --strict)", o.Name, med, lim))
	}
}

// pairRow is one line of the comparison table.
type pairRow struct {
	Source  string
	Command string
	What    string
	Unit    string
	Median  float64
	Runs    []float64
}

func median(xs []float64) float64 {
	s := slices.DeleteFunc(slices.Clone(xs), math.IsNaN)
	if len(s) == 0 {
		return 0
	}
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// pairTable prints the reference tools' and rdmadoctor's figures; with
// --pair-md it writes them into that file's "pair" section.
func (v *verifier) pairTable() error {
	if len(v.pairRows) == 0 {
		return nil
	}
	var t strings.Builder
	t.WriteString("| measured by | what | runs | median | all runs |\n|---|---|---:|---:|---|\n")
	for _, r := range v.pairRows {
		var all []string
		n := 0
		for _, x := range r.Runs {
			if math.IsNaN(x) {
				all = append(all, "–")
				continue
			}
			all = append(all, num(x))
			n++
		}
		fmt.Fprintf(&t, "| `%s` | %s | %d | %s %s | %s |\n", r.Command, r.What, n, num(r.Median), r.Unit, strings.Join(all, ", "))
	}
	cmp := v.comparisons()
	for _, line := range strings.Split(strings.TrimSpace(t.String()), "\n") {
		fmt.Printf("vm: %s\n", line)
	}
	for _, c := range cmp {
		fmt.Printf("vm: %s\n", c)
	}
	if v.pairMD == "" {
		return nil
	}
	var md strings.Builder
	md.WriteString("Two guests (qemu TCG, 1 vCPU each, joined by a dgram netdev on the host's loopback), rxe0 on each guest's virtio eth0, RoCE v2 GID index 1")
	if v.pairEnv != "" {
		fmt.Fprintf(&md, " (%s)", v.pairEnv)
	}
	md.WriteString(":\n\n")
	md.WriteString(t.String())
	if len(cmp) > 0 {
		md.WriteString("\n")
		for _, c := range cmp {
			md.WriteString("- " + c + "\n")
		}
	}
	md.WriteString("\nEmulated CPUs and an emulated wire: compare rdmadoctor with the tools beside it, not with hardware.\n")
	return writeSection(v.pairMD, "pair", md.String())
}

// writeSection replaces the text between "<!-- begin NAME -->" and
// "<!-- end NAME -->" in path (appends the section when it has none), so
// the single guest's and the pair's tables share TIMING.md.
func writeSection(path, name, body string) error {
	begin, end := "<!-- begin "+name+" -->\n", "<!-- end "+name+" -->\n"
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	text := string(old)
	section := begin + body + end
	i := strings.Index(text, begin)
	j := strings.Index(text, end)
	switch {
	case i >= 0 && j > i:
		text = text[:i] + section + text[j+len(end):]
	case text == "" || strings.HasSuffix(text, "\n"):
		text += section
	default:
		text += "\n" + section
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

// ourFigures reads peer.latency's median round trip and peer.bandwidth's
// rate per message size from each run's `peer test --format json` report,
// for the table beside the reference tools.
func (v *verifier) ourFigures(o *outcome, name, dir string, m meta) {
	lat, latMean := []float64{}, []float64{}
	bw := map[int][]float64{}
	for i, r := range clientRuns(dir, m) {
		var rep jsonReport
		if err := json.Unmarshal(r.Stdout, &rep); err != nil {
			o.fail("run %d: no JSON report: %v", i+1, err)
			continue
		}
		if c := rep.check("peer.latency"); c != nil {
			for _, ev := range c.Evidence {
				var e struct {
					Latency struct {
						MedianNS float64 `json:"median_ns"`
						MeanNS   float64 `json:"mean_ns"`
					} `json:"latency_ns"`
				}
				if json.Unmarshal(ev, &e) == nil && e.Latency.MedianNS > 0 {
					lat = append(lat, e.Latency.MedianNS/1000)
					latMean = append(latMean, e.Latency.MeanNS/1000)
				}
			}
		}
		if c := rep.check("peer.bandwidth"); c != nil {
			for _, ev := range c.Evidence {
				var e struct {
					Runs []struct {
						Size int     `json:"size"`
						Gbps float64 `json:"gbps"`
					} `json:"runs"`
				}
				if json.Unmarshal(ev, &e) == nil {
					for _, run := range e.Runs {
						bw[run.Size] = append(bw[run.Size], run.Gbps)
					}
				}
			}
		}
	}
	cmd := "rdmadoctor peer test " + firstOf(m, "args")
	if len(lat) > 0 {
		v.pairRows = append(v.pairRows, pairRow{Source: name, Command: cmd, What: "round trip (peer.latency median, 64 B SEND)",
			Unit: "µs", Median: median(lat), Runs: lat})
		v.pairRows = append(v.pairRows, pairRow{Source: name, Command: cmd, What: "round trip (peer.latency mean, 64 B SEND)",
			Unit: "µs", Median: median(latMean), Runs: latMean})
	}
	sizes := make([]int, 0, len(bw))
	for s := range bw {
		sizes = append(sizes, s)
	}
	sort.Ints(sizes)
	for _, s := range sizes {
		v.pairRows = append(v.pairRows, pairRow{Source: name, Command: cmd, What: fmt.Sprintf("bandwidth (peer.bandwidth, %d B WRITE)", s),
			Unit: "Gb/s", Median: median(bw[s]), Runs: bw[s]})
	}
	if len(lat) == 0 || len(sizes) == 0 {
		o.fail("no peer.latency or peer.bandwidth figures in the reports")
	}
}

// comparisons pairs rdmadoctor's figures with the reference tools' that
// measure the same thing: peer.latency's median round trip with twice
// ib_send_lat's t_typical (the median one-way figure of the same 64-byte
// SEND ping-pong), its mean with ibv_rc_pingpong's usec/iter (a mean), and
// the 64 KiB WRITE bandwidth with ib_write_bw's. A tool run both just
// before and just after `peer test` in each round (a scenario and its
// "-after" twin) is held by the mean of the two, so a load that drifts
// within the round weighs on both sides alike. The target is within
// ±25 %; a figure outside is said, not failed (speeds are measured, never
// asserted).
func (v *verifier) comparisons() []string {
	find := func(cmd, what, unit string) []*pairRow {
		var rows []*pairRow
		for i := range v.pairRows {
			r := &v.pairRows[i]
			if r.Unit == unit && strings.Contains(r.What, what) && strings.HasPrefix(r.Command, cmd) {
				rows = append(rows, r)
			}
		}
		return rows
	}
	var out []string
	for _, c := range []struct{ ours, refCmd, refWhat, unit string }{
		{"peer.latency median", "ib_send_lat", "round trip", "µs"},
		{"peer.latency mean", "ibv_rc_pingpong", "round trip", "µs"},
		{"65536 B WRITE", "ib_write_bw", "bandwidth", "Gb/s"},
	} {
		ours, refs := find("rdmadoctor", c.ours, c.unit), find(c.refCmd, c.refWhat, c.unit)
		if len(ours) == 0 || len(refs) == 0 {
			continue
		}
		a, b, how := ours[0], bracket(refs), ""
		if len(refs) > 1 && len(b.Runs) > 0 {
			how = ", the mean of its runs just before and just after"
		}
		if b.Median == 0 {
			continue
		}
		ratio := a.Median / b.Median
		verdict := "within ±25 %"
		if ratio < 0.75 || ratio > 1.25 {
			verdict = "outside ±25 %"
		}
		line := fmt.Sprintf("%s: rdmadoctor %s %s vs `%s` %s %s%s: %.2f× (%s)",
			a.What, num(a.Median), c.unit, c.refCmd, num(b.Median), c.unit, how, ratio, verdict)
		if rs := roundRatios(a.Runs, b.Runs); len(rs) > 1 {
			// The runs took turns round by round: each round's ratio
			// compares the two under one load.
			var each []string
			for _, r := range rs {
				each = append(each, fmt.Sprintf("%.2f", r))
			}
			line += fmt.Sprintf("; round by round %s×, median %.2f×", strings.Join(each, ", "), median(rs))
		}
		out = append(out, line)
	}
	return out
}

// bracket is the reference a figure is held against: the one row, or for
// a tool run before and after in every round, each round's mean of the
// two (the first row alone when their rounds do not match).
func bracket(refs []*pairRow) pairRow {
	if len(refs) < 2 || len(refs[0].Runs) == 0 || len(refs[0].Runs) != len(refs[1].Runs) {
		return *refs[0]
	}
	r := pairRow{Command: refs[0].Command, What: refs[0].What, Unit: refs[0].Unit}
	for i := range refs[0].Runs {
		r.Runs = append(r.Runs, (refs[0].Runs[i]+refs[1].Runs[i])/2)
	}
	r.Median = median(r.Runs)
	return r
}

// roundRatios divides each of ours by the reference's run of the same
// round; nil unless both ran the same number of rounds.
func roundRatios(ours, ref []float64) []float64 {
	if len(ours) != len(ref) {
		return nil
	}
	out := make([]float64, 0, len(ours))
	for i := range ours {
		if math.IsNaN(ours[i]) || math.IsNaN(ref[i]) {
			continue // a run without a figure (refTool)
		}
		if ref[i] == 0 {
			return nil
		}
		out = append(out, ours[i]/ref[i])
	}
	return out
}

func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = f[:n]
	}
	return strings.Join(f, " ")
}

// num prints a figure with three significant digits, whatever its scale
// (µs in the thousands, Gb/s below one under emulation).
func num(x float64) string {
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case x >= 1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}
