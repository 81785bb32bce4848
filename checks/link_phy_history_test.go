package checks

import (
	"encoding/json"
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

// runLinkPHYAt runs link.phy on dir at now with the kept state st.
func runLinkPHYAt(t *testing.T, dir string, st *state.State, now time.Time) report.CheckResult {
	t.Helper()
	return runCheckAt(t, "link.phy", dir, st, now)
}

// editFacts rewrites the facts file of the host at dir.
func editFacts(t *testing.T, dir string, edit func(f *sysfs.Facts)) {
	t.Helper()
	p := filepath.Join(dir, sysfs.FactsFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var f sysfs.Facts
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	edit(&f)
	if b, err = json.Marshal(&f); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// bump raises one of ens1f0np0's counters: FEC uncorrectable blocks
// ("fec_uncorrectable") or a driver statistic.
func bump(t *testing.T, dir, counter string, by uint64) { bumpOn(t, dir, "ens1f0np0", counter, by) }

func bumpOn(t *testing.T, dir, netdev, counter string, by uint64) {
	editFacts(t, dir, func(f *sysfs.Facts) {
		a := f.Ethtool[netdev]
		if counter == "fec_uncorrectable" {
			a.FEC.Uncorrectable.Total += by
		}
		for i := range a.Stats {
			if a.Stats[i].Name == counter {
				a.Stats[i].Value += by
			}
		}
		f.Ethtool[netdev] = a
	})
}

// Runs with --state over the fixture whose uncorrectable FEC blocks rise:
// the first run has only the count since boot (warn), the second sees them
// rise (fail), and the failure holds through clean runs until the third
// (pass); pause storms the same way.
func TestLinkPHYAcrossRuns(t *testing.T) {
	tree, err := sysfstest.Fixture("cx7-roce-fec-uncorrectable")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "host")
	if err := tree.Write(dir); err != nil {
		t.Fatal(err)
	}
	st := state.New("cx7")
	at := func(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }
	steps := []struct {
		counter  string
		by       uint64
		status   report.Status
		findings []string // about ens1f0np0, without the check's prefix
		has      string
	}{
		{status: report.Warn, findings: []string{"since-boot"}, has: "1873 uncorrectable FEC blocks since boot (10.0 days); whether they still rise needs a second run with --state"},
		{counter: "fec_uncorrectable", by: 337, status: report.Fail, findings: []string{"fec-uncorrectable"},
			has: "337 uncorrectable FEC blocks since the last run at 2026-02-01T08:00:00Z (1.0 h) (FEC RS): frames lost on the wire"},
		{status: report.Fail, findings: []string{"still-failing"}, has: "ens1f0np0 (mlx5_0 port 1): uncorrectable FEC blocks rising since 2026-02-01T09:00:00Z, " +
			"not this run; still failing: passes again after 3 clean runs (1 so far)"},
		{counter: "tx_pause_storm_error_events", by: 1, status: report.Fail, findings: []string{"still-failing", "pause-storm"},
			has: "1 pause-storm error events since the last run"},
		{counter: "tx_pause_storm_warning_events", by: 4, status: report.Fail, findings: []string{"still-failing", "pause-storm-warning"},
			has: "uncorrectable FEC blocks rising: clean for 3 runs after failing since 2026-02-01T09:00:00Z: passes again"},
		{status: report.Fail, findings: []string{"still-failing"}, has: "pause-storm error events rising since 2026-02-01T11:00:00Z, not this run; " +
			"still failing: passes again after 3 clean runs (2 so far)"},
		{status: report.Pass, findings: []string{"healthy"}, has: "pause-storm error events rising: clean for 3 runs after failing since 2026-02-01T11:00:00Z: passes again"},
	}
	for i, s := range steps {
		if s.counter != "" {
			bump(t, dir, s.counter, s.by)
		}
		r := runLinkPHYAt(t, dir, st, at(i))
		text := r.Summary + "\n" + strings.Join(r.Details, "\n")
		if r.Status != s.status {
			t.Fatalf("run %d: %s, want %s\n%s", i+1, r.Status, s.status, text)
		}
		var want []string
		for _, f := range s.findings {
			want = append(want, "link.phy/"+f)
		}
		if got := findingsAbout(r, "ens1f0np0"); !reflect.DeepEqual(got, want) {
			t.Errorf("run %d: findings about ens1f0np0 %v, want %v", i+1, got, want)
		}
		if !strings.Contains(text, s.has) {
			t.Errorf("run %d lacks %q:\n%s", i+1, s.has, text)
		}
		if i == 2 && (!strings.Contains(r.Remedy, "ens1f0np0 (mlx5_0 port 1) loses frames its FEC cannot correct") ||
			!strings.Contains(r.Remedy, "`rdmadoctor ack link.phy --unit ens1f0np0 --reason TEXT` ends the wait")) {
			t.Errorf("run 3: the held failure's remedy is not the failure's own, with the ack: %s", r.Remedy)
		}
	}
	if cs := st.Series("link.phy/ens1f0np0/fec_uncorrectable"); cs == nil || len(cs.Samples) != len(steps) || cs.Samples[1].Value != 2210 || !cs.FailingSince.IsZero() {
		t.Errorf("state series: %+v", cs)
	}
}

// Per-lane counts (FC-FEC, bnxt_en's and ice's BASE-R) name the lane whose
// uncorrectable blocks rose: the lane of the cable or module to look at.
func TestLinkPHYNamesTheLane(t *testing.T) {
	tree, err := sysfstest.Fixture("cx7-roce-phy-healthy")
	if err != nil {
		t.Fatal(err)
	}
	a := tree.Facts.Ethtool["ens1f0np0"]
	a.FEC.Active = "BaseR"
	a.FEC.Uncorrectable = &sysfs.FECCounter{Total: 5, Lanes: []uint64{0, 0, 5, 0}}
	tree.Facts.Ethtool["ens1f0np0"] = a
	dir := filepath.Join(t.TempDir(), "host")
	if err := tree.Write(dir); err != nil {
		t.Fatal(err)
	}
	st := state.New("cx7")
	runLinkPHYAt(t, dir, st, t0)
	editFacts(t, dir, func(f *sysfs.Facts) {
		a := f.Ethtool["ens1f0np0"]
		a.FEC.Uncorrectable = &sysfs.FECCounter{Total: 17, Lanes: []uint64{0, 0, 17, 0}}
		f.Ethtool["ens1f0np0"] = a
	})
	r := runLinkPHYAt(t, dir, st, t0.Add(time.Hour))
	if r.Status != report.Fail || !strings.Contains(r.Summary, "12 uncorrectable FEC blocks since the last run at 2026-02-01T08:00:00Z (1.0 h) (lane 2: 12) (FEC BaseR)") {
		t.Errorf("%s: %s", r.Status, r.Summary)
	}
}

// bnxt_en counts the bits it received (rx_bits): the pre-FEC BER of the
// interval is the corrected bits over those, judged against RS(528,514)'s
// limit on the 100G port's four 25G lanes.
func TestLinkPHYBERFromReceivedBits(t *testing.T) {
	tree, err := sysfstest.Fixture("bnxt-re-phy-healthy")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "host")
	if err := tree.Write(dir); err != nil {
		t.Fatal(err)
	}
	st := state.New("bnxt")
	if r := runLinkPHYAt(t, dir, st, t0); r.Status != report.Pass || !strings.Contains(r.Summary, "pre-FEC BER 1.0e-09 since boot (10.0 days)") {
		t.Fatalf("first run: %s %s", r.Status, r.Summary)
	}
	bumpOn(t, dir, "ens3f0np0", "rx_bits", 360000000000000) // an hour at 100 Gb/s
	bumpOn(t, dir, "ens3f0np0", "rx_corrected_bits", 36000000000)
	r := runLinkPHYAt(t, dir, st, t0.Add(time.Hour))
	want := "ens3f0np0 (bnxt_re0 port 1): pre-FEC BER 1.0e-04 since the last run at 2026-02-01T08:00:00Z (1.0 h) (rx_bits), above 5.0e-05 for RS(528,514) FEC on 25G NRZ lanes"
	if r.Status != report.Warn || r.Summary != want {
		t.Errorf("%s: %s\nwant %s", r.Status, r.Summary, want)
	}
}

func TestPreFECLimit(t *testing.T) {
	cases := []struct {
		fec          string
		speed, lanes uint32
		want         float64
		ok           bool
	}{
		{"RS", 400000, 4, 2.4e-4, true}, // 400GBASE-CR4: 100G PAM4 lanes
		{"RS", 100000, 4, 5e-5, true},   // 100GBASE-CR4: 25G NRZ lanes
		{"RS", 100000, 2, 2.4e-4, true}, // 100GBASE-CR2: 50G PAM4 lanes
		{"RS", 25000, 0, 5e-5, true},    // 25G is one NRZ lane
		{"RS", 200000, 0, 2.4e-4, true}, // 200G is PAM4
		{"RS", 100000, 0, 2.4e-4, true}, // lanes unknown: the looser limit
		{"BaseR", 25000, 1, 0, false},   // Firecode: not judged
		{"none active", 100000, 4, 0, false},
		{"RS", 0, 0, 0, false}, // speed unknown (link down)
	}
	for _, c := range cases {
		got, ok := preFECLimit(c.fec, c.speed, c.lanes)
		if ok != c.ok || got.value != c.want {
			t.Errorf("preFECLimit(%s, %d, %d) = %v %v, want %v %v", c.fec, c.speed, c.lanes, got.value, ok, c.want, c.ok)
		}
	}
}

// After a repair, an ack of the netdev ends the wait: the next run
// without a rise passes; a rise after the ack fails again.
func TestLinkPHYAckEndsTheHold(t *testing.T) {
	tree, err := sysfstest.Fixture("cx7-roce-fec-uncorrectable")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "host")
	if err := tree.Write(dir); err != nil {
		t.Fatal(err)
	}
	st := state.New("cx7")
	runLinkPHYAt(t, dir, st, t0)
	bump(t, dir, "fec_uncorrectable", 10)
	if r := runLinkPHYAt(t, dir, st, t0.Add(time.Hour)); r.Status != report.Fail {
		t.Fatalf("the rise: %s %s", r.Status, r.Summary)
	}
	if _, err := AckRises(st, "link.phy", "ens1f0np0", "cable replaced", t0.Add(90*time.Minute)); err != nil {
		t.Fatal(err)
	}
	r := runLinkPHYAt(t, dir, st, t0.Add(2*time.Hour))
	if r.Status != report.Pass || !reflect.DeepEqual(findingsAbout(r, "ens1f0np0"), []string{"link.phy/healthy"}) {
		t.Errorf("the run after the ack: %s %v %s", r.Status, findingsAbout(r, "ens1f0np0"), r.Summary)
	}
	if details := strings.Join(r.Details, "\n"); !strings.Contains(details, "; acknowledged at 2026-02-01T09:30:00Z: cable replaced") ||
		strings.Contains(r.Summary, "acknowledged") {
		t.Errorf("the ack belongs in the netdev's details only:\n%s\n%s", r.Summary, details)
	}
	bump(t, dir, "fec_uncorrectable", 1)
	if r := runLinkPHYAt(t, dir, st, t0.Add(3*time.Hour)); !reflect.DeepEqual(findingsAbout(r, "ens1f0np0"), []string{"link.phy/fec-uncorrectable"}) {
		t.Errorf("a rise after the ack: %v %s", findingsAbout(r, "ens1f0np0"), r.Summary)
	}
}
