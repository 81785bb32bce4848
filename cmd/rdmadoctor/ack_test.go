package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report/state"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// ackHost writes a CX6 InfiniBand host whose symbol_error reads 42, and an
// empty state for it.
func ackHost(t *testing.T) (root, statePath string) {
	t.Helper()
	dir := t.TempDir()
	root = filepath.Join(dir, "host")
	tr := sysfstest.Build(sysfstest.CX6IB())
	sysfstest.SetCounter(tr, "mlx5_0", 1, "counters", "symbol_error", "42")
	if err := tr.Write(root); err != nil {
		t.Fatal(err)
	}
	statePath = filepath.Join(dir, "state.json")
	if err := state.New("cx6").Save(statePath); err != nil {
		t.Fatal(err)
	}
	return root, statePath
}

func runAckCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := cmdAck(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestAckRecordsTheLevel(t *testing.T) {
	root, sp := ackHost(t)
	code, out, errText := runAckCmd("counters.errors", "--unit", "mlx5_0/1", "--reason", "optics cleaned", "--state", sp, "--root", root)
	if code != 0 || out != "acknowledged counters.errors on mlx5_0/1: 13 error counter(s) take their present values as the new baseline; reason: optics cleaned\n" || errText != "" {
		t.Fatalf("exit %d\n%s%s", code, out, errText)
	}
	st, err := state.Load(sp)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Acks) != 1 || st.Acks[0].Reason != "optics cleaned" || st.Acks[0].Unit != "mlx5_0/1" || st.Acks[0].Values["mlx5_0/1/symbol_error"] != 42 ||
		time.Since(st.Acks[0].At) > time.Minute {
		t.Errorf("acks = %+v", st.Acks)
	}
	cs := st.Series("mlx5_0/1/symbol_error")
	if cs == nil || cs.BaselineWhy != "ack" || cs.Baseline.Value != 42 || len(cs.Samples) != 1 || !cs.Samples[0].Ack || cs.Samples[0].BootID != sysfstest.FixtureBootID {
		t.Errorf("series = %+v", cs)
	}
}

func TestAckRefusals(t *testing.T) {
	root, sp := ackHost(t)
	dir := filepath.Dir(sp)
	corrupt := filepath.Join(dir, "corrupt.json")
	os.WriteFile(corrupt, []byte("{\"schema\": "), 0o644)
	cases := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"no check", []string{"--reason", "x", "--state", sp}, 2, "rdmadoctor ack: name one check to acknowledge (checks that take acks: counters.errors, pcie.aer, link.phy, ib.far_end)"},
		{"unknown check", []string{"counters.bogus", "--reason", "x", "--state", sp}, 2, `rdmadoctor ack: unknown check "counters.bogus"; valid checks: `},
		{"a check without acks", []string{"port.state", "--reason", "x", "--state", sp}, 2,
			"rdmadoctor ack: port.state takes no ack: it judges no level that can be accepted (checks that take acks: counters.errors, pcie.aer, link.phy, ib.far_end)"},
		{"no reason", []string{"counters.errors", "--state", sp, "--root", root}, 2, "rdmadoctor ack: --reason is required: say why this level is accepted"},
		{"unknown unit", []string{"counters.errors", "--unit", "mlx5_7/1", "--reason", "x", "--state", sp, "--root", root}, 2,
			`rdmadoctor ack: no counter unit "mlx5_7/1" on this host; units: mlx5_0/1, mlx5_0/device`},
		{"missing state", []string{"counters.errors", "--reason", "x", "--state", filepath.Join(dir, "none.json"), "--root", root}, 1,
			"rdmadoctor ack: no state file (no run has kept one): " + filepath.Join(dir, "none.json") + " (acks are kept in the state a run with --state writes: run once with --state first)"},
		{"corrupt state", []string{"counters.errors", "--reason", "x", "--state", corrupt, "--root", root}, 1,
			"rdmadoctor ack: state is not JSON (truncated): " + corrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errText := runAckCmd(tc.args...)
			if code != tc.code || !strings.HasPrefix(errText, tc.err) || out != "" {
				t.Errorf("exit %d, want %d\nstderr %q\nwant prefix %q\nstdout %q", code, tc.code, errText, tc.err, out)
			}
		})
	}
	if st, err := state.Load(sp); err != nil || len(st.Acks) != 0 {
		t.Errorf("a refused ack changed the state: %v %+v", err, st)
	}
}

// ack takes the lock a run takes, waiting for a run that holds it.
func TestAckWaitsForARun(t *testing.T) {
	root, sp := ackHost(t)
	l, err := acquireLock(lockPathFor(sp))
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(400 * time.Millisecond); l.release() }()
	start := time.Now()
	code, out, errText := runAckCmd("counters.errors", "--reason", "burst during the switch upgrade", "--state", sp, "--root", root)
	if code != 0 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("exit %d after %v\n%s%s", code, time.Since(start), out, errText)
	}
	if st, err := state.Load(sp); err != nil || len(st.Acks) != 1 || st.Acks[0].Unit != "" {
		t.Errorf("state: %v %+v", err, st)
	}
}

// An ack of pcie.aer or link.phy clears the failures they hold in the
// state, on one unit or all; it reads no counters (no --root needed).
func TestAckClearsHeldRises(t *testing.T) {
	sp := filepath.Join(t.TempDir(), "state.json")
	since := time.Date(2026, 2, 1, 8, 0, 0, 0, time.UTC)
	st := state.New("cx7")
	for _, k := range []string{"link.phy/eth0/fec_uncorrectable", "link.phy/eth1/tx_pause_storm_error_events", "pcie.aer/0000:17:00.0"} {
		st.Counters = append(st.Counters, state.CounterSeries{Key: k, FailingSince: since, CleanRuns: 1})
	}
	if err := st.Save(sp); err != nil {
		t.Fatal(err)
	}
	code, out, errText := runAckCmd("link.phy", "--unit", "eth0", "--reason", "cable replaced", "--state", sp)
	if code != 0 || out != "acknowledged link.phy on eth0: 1 held failure(s) cleared; later runs judge new rises only; reason: cable replaced\n" || errText != "" {
		t.Fatalf("exit %d\n%s%s", code, out, errText)
	}
	code, _, errText = runAckCmd("pcie.aer", "--unit", "0000:99:00.0", "--reason", "x", "--state", sp)
	if code != 2 || errText != "rdmadoctor ack: no counter unit \"0000:99:00.0\" in the state's history of pcie.aer; units: 0000:17:00.0\n" {
		t.Errorf("unknown hop: exit %d %q", code, errText)
	}
	got, err := state.Load(sp)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, cs := range got.Counters {
		held[cs.Key] = !cs.FailingSince.IsZero()
	}
	want := map[string]bool{"link.phy/eth0/fec_uncorrectable": false, "link.phy/eth1/tx_pause_storm_error_events": true, "pcie.aer/0000:17:00.0": true}
	if !reflect.DeepEqual(held, want) {
		t.Errorf("held after the ack: %v, want %v", held, want)
	}
	if len(got.Acks) != 1 || got.Acks[0].Check != "link.phy" || got.Acks[0].Unit != "eth0" || got.Acks[0].Reason != "cable replaced" || time.Since(got.Acks[0].At) > time.Minute {
		t.Errorf("acks: %+v", got.Acks)
	}
}

// An ack of ib.far_end names the neighbour's port (GUID:port), the unit
// of its series' keys; an unknown one lists those the state holds.
func TestAckIBFarEnd(t *testing.T) {
	sp := filepath.Join(t.TempDir(), "state.json")
	st := state.New("ib")
	since := time.Date(2026, 2, 1, 8, 0, 0, 0, time.UTC)
	for _, k := range []string{"ib.far_end/0x0002c90300beef00:17/LinkDownedCounter", "ib.far_end/0x0002c90300beef00:17/SymbolErrorCounter"} {
		st.Counters = append(st.Counters, state.CounterSeries{Key: k, FailingSince: since, CleanRuns: 1})
	}
	if err := st.Save(sp); err != nil {
		t.Fatal(err)
	}
	code, _, errText := runAckCmd("ib.far_end", "--unit", "0x0002c90300beef00:18", "--reason", "x", "--state", sp)
	if code != 2 || errText != "rdmadoctor ack: no counter unit \"0x0002c90300beef00:18\" in the state's history of ib.far_end; units: 0x0002c90300beef00:17\n" {
		t.Errorf("unknown neighbour port: exit %d %q", code, errText)
	}
	code, out, errText := runAckCmd("ib.far_end", "--unit", "0x0002c90300beef00:17", "--reason", "cable replaced", "--state", sp)
	if code != 0 || out != "acknowledged ib.far_end on 0x0002c90300beef00:17: 2 held failure(s) cleared; later runs judge new rises only; reason: cable replaced\n" || errText != "" {
		t.Fatalf("exit %d\n%s%s", code, out, errText)
	}
}
