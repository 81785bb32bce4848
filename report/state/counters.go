package state

import (
	"sort"
	"time"
)

// Bounds on the counter history: samples kept per counter, and counters in
// all (a host has a few hundred; a state with more was not written by us).
const (
	MaxSamples  = 16
	MaxCounters = 4096
)

// CounterSeries is one error counter's history on one unit.
type CounterSeries struct {
	// Key names the counter: "mlx5_0/1/symbol_error" for a PortCounters
	// file, "mlx5_0/1/hw_counters/out_of_buffer" for a driver counter,
	// "efa_0/device/hw_counters/no_completion_cmds" for the device's own.
	Key string `json:"key"`
	// Samples, oldest first, at most MaxSamples.
	Samples []CounterSample `json:"samples"`
	// Baseline is the reading counts are judged from: zero at boot, the
	// value at a reset (a lower reading), at a new boot_id, when the clock
	// went back, or the value an operator accepted (`rdmadoctor ack`).
	// nil until a run has judged the counter.
	Baseline *CounterSample `json:"baseline,omitempty"`
	// BaselineWhy says why the baseline is where it is: "boot", "reset",
	// "new boot", "clock" or "ack".
	BaselineWhy string `json:"baseline_why,omitempty"`
	// FailingSince is when the counter was first judged failing, zero while
	// it is not: it passes again only after enough clean runs (hysteresis).
	FailingSince time.Time `json:"failing_since,omitzero"`
	// CleanRuns counts the clean runs since it last failed, while
	// FailingSince is set.
	CleanRuns int `json:"clean_runs,omitempty"`
}

// CounterSample is one reading of a counter.
type CounterSample struct {
	Value  uint64    `json:"value"`
	At     time.Time `json:"at"`
	BootID string    `json:"boot_id,omitempty"`
	// Ack marks a reading taken by `rdmadoctor ack` rather than by a run:
	// it starts the next run's interval but is not itself a run.
	Ack bool `json:"ack,omitempty"`
	// Rose says the run that took this reading saw the counter rise since
	// the reading before (or since boot, for the first): "in k of the last
	// n runs" counts them.
	Rose bool `json:"rose,omitempty"`
}

// Series returns the history of key, nil when there is none.
func (s *State) Series(key string) *CounterSeries { return seriesIn(s.Counters, key) }

// AddSample appends a reading to key's history, keeping MaxSamples.
func (s *State) AddSample(key string, v CounterSample) { addSample(&s.Counters, key, v) }

// Series returns the history of a devlink reporter's key, nil when none.
func (k *KernelLogState) Series(key string) *CounterSeries { return seriesIn(k.Devlink, key) }

// AddSample appends a reading to a devlink reporter's history.
func (k *KernelLogState) AddSample(key string, v CounterSample) { addSample(&k.Devlink, key, v) }

func seriesIn(cs []CounterSeries, key string) *CounterSeries {
	for i := range cs {
		if cs[i].Key == key {
			return &cs[i]
		}
	}
	return nil
}

func addSample(all *[]CounterSeries, key string, v CounterSample) {
	cs := seriesIn(*all, key)
	if cs == nil {
		*all = append(*all, CounterSeries{Key: key})
		cs = &(*all)[len(*all)-1]
	}
	cs.Samples = append(cs.Samples, v)
	if n := len(cs.Samples); n > MaxSamples {
		cs.Samples = append([]CounterSample(nil), cs.Samples[n-MaxSamples:]...)
	}
}

// cloneSeries copies counter series deeply.
func cloneSeries(in []CounterSeries) []CounterSeries {
	out := make([]CounterSeries, len(in))
	for i, cs := range in {
		out[i] = cs
		out[i].Samples = append([]CounterSample(nil), cs.Samples...)
		if cs.Baseline != nil {
			b := *cs.Baseline
			out[i].Baseline = &b
		}
	}
	return out
}

// boundCounters keeps at most MaxSamples per counter and MaxCounters
// counters, those read most recently.
func boundCounters(cs []CounterSeries) []CounterSeries {
	for i := range cs {
		if n := len(cs[i].Samples); n > MaxSamples {
			cs[i].Samples = cs[i].Samples[n-MaxSamples:]
		}
	}
	if len(cs) <= MaxCounters {
		return cs
	}
	last := func(c CounterSeries) time.Time {
		if len(c.Samples) == 0 {
			return time.Time{}
		}
		return c.Samples[len(c.Samples)-1].At
	}
	sort.SliceStable(cs, func(i, j int) bool { return last(cs[i]).After(last(cs[j])) })
	cs = cs[:MaxCounters]
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Key < cs[j].Key })
	return cs
}

// Clone is a copy of s for the checks of one run to write into: the
// counter history and the acks are copied deeply. nil stays nil.
func (s *State) Clone() *State {
	if s == nil {
		return nil
	}
	c := *s
	c.Counters = cloneSeries(s.Counters)
	if s.KernelLog != nil {
		k := KernelLogState{Devlink: cloneSeries(s.KernelLog.Devlink)}
		if s.KernelLog.Mark != nil {
			m := *s.KernelLog.Mark
			k.Mark = &m
		}
		c.KernelLog = &k
	}
	c.Acks = make([]Ack, len(s.Acks))
	for i, a := range s.Acks {
		c.Acks[i] = a
		if a.Values != nil {
			c.Acks[i].Values = make(map[string]uint64, len(a.Values))
			for k, v := range a.Values {
				c.Acks[i].Values[k] = v
			}
		}
	}
	return &c
}

// TakeHistory takes the counter history a run's checks wrote into work
// (the kernel.log check's with it), when they finished (ok); otherwise s
// keeps its own.
func (s *State) TakeHistory(work *State, ok bool) {
	if s == nil || work == nil || !ok {
		return
	}
	s.Counters, s.Acks, s.BootID, s.KernelLog = work.Counters, work.Acks, work.BootID, work.KernelLog
}
