package state

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A history that grew without bound (or was planted) is cut back to the
// bounds, the newest kept: a million series, and one series with a million
// samples.
func TestCounterHistoryIsBoundedOldestDropped(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New("node1")
	s.Counters = make([]CounterSeries, 1_000_000)
	for i := range s.Counters {
		s.Counters[i] = CounterSeries{Key: fmt.Sprintf("mlx5_%07d/1/symbol_error", i),
			Samples: []CounterSample{{Value: uint64(i), At: t0.Add(time.Duration(i) * time.Second)}}}
	}
	long := make([]CounterSample, 1_000_000)
	for i := range long {
		long[i] = CounterSample{Value: uint64(i), At: t0.Add(time.Duration(i) * time.Second)}
	}
	s.Counters[0].Samples = long // the oldest key, but read last of all
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Counters) != MaxCounters {
		t.Fatalf("%d series kept, want %d", len(s.Counters), MaxCounters)
	}
	// Kept: the series read most recently (the last MaxCounters-1 and the
	// long one), sorted by key.
	if got, want := s.Counters[0].Key, "mlx5_0000000/1/symbol_error"; got != want {
		t.Errorf("first kept = %s, want %s", got, want)
	}
	if got, want := s.Counters[1].Key, fmt.Sprintf("mlx5_%07d/1/symbol_error", 1_000_000-MaxCounters+1); got != want {
		t.Errorf("second kept = %s, want %s", got, want)
	}
	first := s.Counters[0].Samples
	if len(first) != MaxSamples || first[0].Value != 1_000_000-MaxSamples || first[MaxSamples-1].Value != 999_999 {
		t.Errorf("long series kept %d samples, %d..%d; want the newest %d", len(first), first[0].Value, first[len(first)-1].Value, MaxSamples)
	}
	back, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Counters) != MaxCounters || len(back.Counters[0].Samples) != MaxSamples {
		t.Errorf("decoded: %d series, %d samples", len(back.Counters), len(back.Counters[0].Samples))
	}
}

// A file written by hand with more samples than the bound (but under the
// size limit) is read, bounded.
func TestDecodeBoundsALongSeries(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"schema":"` + Schema + `","host":"n","updated":"2026-01-01T00:00:00Z","last_run":null,"checks":[],"unknown_runs":0,"counters":[{"key":"mlx5_0/1/link_downed","samples":[`)
	for i := 0; i < 100_000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"value":%d,"at":"2026-01-01T00:00:00Z"}`, i)
	}
	b.WriteString(`]}]}`)
	s, err := Decode(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	got := s.Series("mlx5_0/1/link_downed").Samples
	if len(got) != MaxSamples || got[0].Value != 100_000-MaxSamples {
		t.Fatalf("%d samples from %d", len(got), got[0].Value)
	}
}

func TestCounterSeriesRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := New("node1")
	s.AddSample("mlx5_0/1/symbol_error", CounterSample{Value: 7, At: t0, BootID: "b1"})
	s.AddSample("mlx5_0/1/symbol_error", CounterSample{Value: 9, At: t0.Add(time.Hour), BootID: "b1", Ack: true})
	cs := s.Series("mlx5_0/1/symbol_error")
	cs.Baseline = &CounterSample{Value: 9, At: t0.Add(time.Hour), BootID: "b1"}
	cs.BaselineWhy, cs.FailingSince, cs.CleanRuns = "ack", t0, 2
	data, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"failing_since": "2026-03-01T12:00:00Z"`) {
		t.Errorf("encoded:\n%s", data)
	}
	back, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Counters, s.Counters) {
		t.Errorf("round trip:\n%v\nwant\n%v", back.Counters, s.Counters)
	}
}

// The kernel.log check's part travels like the counter history: a run's
// checks move it in their copy, and the kept state takes it only from a
// run whose history finished.
func TestKernelLogStateCloneAndTake(t *testing.T) {
	kept := New("h")
	kept.KernelLog = &KernelLogState{Mark: &KernelLogMark{BootID: "b1", Seq: 10}}
	kept.KernelLog.AddSample("kernel.log/devlink/pci/0000:3b:00.0/tx/error_count", CounterSample{Value: 1, BootID: "b1"})
	work := kept.Clone()
	work.KernelLog.Mark.Seq = 25
	work.KernelLog.AddSample("kernel.log/devlink/pci/0000:3b:00.0/tx/error_count", CounterSample{Value: 2, BootID: "b1", Rose: true})
	if kept.KernelLog.Mark.Seq != 10 || len(kept.KernelLog.Devlink[0].Samples) != 1 {
		t.Fatalf("the copy shares the kernel log's state: %+v", kept.KernelLog)
	}
	kept.TakeHistory(work, false)
	if kept.KernelLog.Mark.Seq != 10 {
		t.Fatalf("an unfinished run moved the mark: %+v", kept.KernelLog.Mark)
	}
	kept.TakeHistory(work, true)
	if *kept.KernelLog.Mark != (KernelLogMark{BootID: "b1", Seq: 25}) || len(kept.KernelLog.Series("kernel.log/devlink/pci/0000:3b:00.0/tx/error_count").Samples) != 2 {
		t.Fatalf("not taken: %+v", kept.KernelLog)
	}
	for i := 0; i < MaxSamples+4; i++ {
		kept.KernelLog.Devlink[0].Samples = append(kept.KernelLog.Devlink[0].Samples, CounterSample{Value: uint64(i)})
	}
	data, err := kept.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(data)
	if err != nil || back.KernelLog == nil || *back.KernelLog.Mark != *kept.KernelLog.Mark || len(back.KernelLog.Devlink[0].Samples) != MaxSamples {
		t.Fatalf("round trip: %v %+v", err, back.KernelLog)
	}
}
