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
	// Key names the counter: "mlx5_0/1/symbol_error" (port 0: the
	// device's own counters).
	Key string `json:"key"`
	// Samples, oldest first, at most MaxSamples.
	Samples []CounterSample `json:"samples"`
}

// CounterSample is one reading of a counter.
type CounterSample struct {
	Value  uint64    `json:"value"`
	At     time.Time `json:"at"`
	BootID string    `json:"boot_id,omitempty"`
}

// Series returns the history of key, nil when there is none.
func (s *State) Series(key string) *CounterSeries {
	for i := range s.Counters {
		if s.Counters[i].Key == key {
			return &s.Counters[i]
		}
	}
	return nil
}

// AddSample appends a reading to key's history, keeping MaxSamples.
func (s *State) AddSample(key string, v CounterSample) {
	cs := s.Series(key)
	if cs == nil {
		s.Counters = append(s.Counters, CounterSeries{Key: key})
		cs = &s.Counters[len(s.Counters)-1]
	}
	cs.Samples = append(cs.Samples, v)
	if n := len(cs.Samples); n > MaxSamples {
		cs.Samples = append([]CounterSample(nil), cs.Samples[n-MaxSamples:]...)
	}
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
