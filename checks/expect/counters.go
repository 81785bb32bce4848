package expect

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// CounterRules are a class's thresholds for counters.errors, judged across
// runs with --state:
//
//	counters.symbol_error = { rate_per_hour = 240, absolute = 1000 }
//	counters.port_rcv_errors.absolute = 50      # the same, one key a line
//	counters.clean_runs = 5                      # clean runs before a failed counter passes
//
// A counter's rate_per_hour is the rise per hour between runs above which
// it fails (0: any rise fails); absolute is the count since its baseline
// beyond which a rise fails. Whether a name is one of the counters the
// check reads is for the check to say.
type CounterRules struct {
	Limits    map[string]*CounterLimits // by counter name
	CleanRuns *Value[int]
}

// CounterLimits are one counter's thresholds; a nil field keeps the default.
type CounterLimits struct {
	RatePerHour *Value[float64]
	Absolute    *Value[uint64]
}

// MaxCleanRuns bounds counters.clean_runs: more runs than a state keeps
// samples of could never be told.
const MaxCleanRuns = 100

// counterNameRE is what a counter file may be called (symbol_error,
// VL15_dropped, ip4InDiscards).
var counterNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`) })

// CounterLimit returns the class's thresholds for counter name, nil when it
// sets none (or there is no class).
func (c *Class) CounterLimit(name string) *CounterLimits {
	if c == nil {
		return nil
	}
	return c.Counters.Limits[name]
}

// CounterCleanRuns is counters.clean_runs, nil when not set.
func (c *Class) CounterCleanRuns() *Value[int] {
	if c == nil {
		return nil
	}
	return c.Counters.CleanRuns
}

// CounterNames lists the counters the class sets thresholds for, sorted.
func (c *Class) CounterNames() []string {
	if c == nil {
		return nil
	}
	out := make([]string, 0, len(c.Counters.Limits))
	for n := range c.Counters.Limits {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// setCounterKey reads a key below "counters." (rest is what follows it).
func (c *Class) setCounterKey(rest, key, value string, p pos) error {
	if rest == "clean_runs" {
		v, err := parseInt(value, 1, MaxCleanRuns)
		c.Counters.CleanRuns = orKeep(c.Counters.CleanRuns, mk(v, key, p), err)
		return err
	}
	name, field, hasField := strings.Cut(rest, ".")
	if !counterNameRE().MatchString(name) {
		return fmt.Errorf("counter name %q: want the name of a counter file, such as symbol_error", clip(name))
	}
	if !hasField {
		return c.setCounterTable(name, value, p)
	}
	return c.setCounterField(name, field, value, p)
}

// setCounterTable reads { rate_per_hour = N, absolute = N }. Nothing is
// set unless every field reads.
func (c *Class) setCounterTable(name, value string, p pos) error {
	inner, open := strings.CutPrefix(value, "{")
	inner, closed := strings.CutSuffix(inner, "}")
	if !open || !closed {
		return fmt.Errorf("%q: want { rate_per_hour = N, absolute = N }", clip(value))
	}
	var l CounterLimits
	seen := map[string]bool{}
	for _, part := range strings.Split(inner, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f, v, ok := strings.Cut(part, "=")
		f, v = strings.TrimSpace(f), strings.TrimSpace(v)
		if !ok || v == "" {
			return fmt.Errorf("%q: want FIELD = NUMBER inside { }", clip(part))
		}
		if seen[f] {
			return fmt.Errorf("%s given twice", clip(f))
		}
		seen[f] = true
		if err := l.set(f, v, "counters."+name+"."+f, p); err != nil {
			return err
		}
	}
	if len(seen) == 0 {
		return fmt.Errorf("{ } sets nothing: give rate_per_hour, absolute or both")
	}
	cur := c.counterLimits(name)
	if l.RatePerHour != nil {
		cur.RatePerHour = l.RatePerHour
	}
	if l.Absolute != nil {
		cur.Absolute = l.Absolute
	}
	return nil
}

func (c *Class) setCounterField(name, field, value string, p pos) error {
	var l CounterLimits
	if err := l.set(field, value, "counters."+name+"."+field, p); err != nil {
		return err
	}
	cur := c.counterLimits(name)
	if l.RatePerHour != nil {
		cur.RatePerHour = l.RatePerHour
	}
	if l.Absolute != nil {
		cur.Absolute = l.Absolute
	}
	return nil
}

func (c *Class) counterLimits(name string) *CounterLimits {
	if c.Counters.Limits == nil {
		c.Counters.Limits = map[string]*CounterLimits{}
	}
	l := c.Counters.Limits[name]
	if l == nil {
		l = &CounterLimits{}
		c.Counters.Limits[name] = l
	}
	return l
}

// Bounds on the values: a rate or count beyond them is a typo.
const (
	maxRatePerHour = 1e12
	maxAbsolute    = 1 << 62
)

func (l *CounterLimits) set(field, value, key string, p pos) error {
	switch field {
	case "rate_per_hour":
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || strings.ContainsAny(value, "xXpP_") {
			return fmt.Errorf("rate_per_hour %q is not a number of errors per hour", clip(value))
		}
		if v < 0 || v > maxRatePerHour {
			return fmt.Errorf("rate_per_hour %s is out of range 0..%g", value, float64(maxRatePerHour))
		}
		l.RatePerHour = mk(v, key, p)
	case "absolute":
		v, err := strconv.ParseUint(value, 10, 64)
		if err != nil || v > maxAbsolute {
			return fmt.Errorf("absolute %q is not a count 0..%d", clip(value), uint64(maxAbsolute))
		}
		l.Absolute = mk(v, key, p)
	default:
		return fmt.Errorf("unknown counter field %q; valid: rate_per_hour, absolute", clip(field))
	}
	return nil
}

// appendCounterEntries writes the counter thresholds back, one key a line.
func appendCounterEntries(es []entry, c *Class) []entry {
	es = appendValue(es, c.Counters.CleanRuns, "counters.clean_runs")
	for _, n := range c.CounterNames() {
		l := c.Counters.Limits[n]
		es = appendValue(es, l.RatePerHour, "counters."+n+".rate_per_hour")
		es = appendValue(es, l.Absolute, "counters."+n+".absolute")
	}
	return es
}
