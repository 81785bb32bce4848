package expect

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestCounterKeys(t *testing.T) {
	f := mustParse(t, `[class gpu]
hosts = gpu*
counters.symbol_error = { rate_per_hour = 240, absolute = 1000 }   # HDR links
counters.port_rcv_errors.absolute = 50
counters.port_rcv_errors.rate_per_hour = 0.5
counters.link_downed = { absolute = 3 }
counters.symbol_error.absolute = 2000
counters.clean_runs = 5
`)
	c := f.Classes[0]
	type lim struct {
		rate    float64
		rateKey string
		abs     uint64
		absLine int
	}
	got := map[string]lim{}
	for _, n := range c.CounterNames() {
		l := c.CounterLimit(n)
		var g lim
		if l.RatePerHour != nil {
			g.rate, g.rateKey = l.RatePerHour.V, l.RatePerHour.Key
		}
		if l.Absolute != nil {
			g.abs, g.absLine = l.Absolute.V, l.Absolute.Line
		}
		got[n] = g
	}
	want := map[string]lim{
		"symbol_error":    {rate: 240, rateKey: "counters.symbol_error.rate_per_hour", abs: 2000, absLine: 7}, // the later line wins
		"port_rcv_errors": {rate: 0.5, rateKey: "counters.port_rcv_errors.rate_per_hour", abs: 50, absLine: 4},
		"link_downed":     {abs: 3, absLine: 6},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("limits = %+v\nwant %+v", got, want)
	}
	if v := c.CounterCleanRuns(); v == nil || v.V != 5 || v.Cite() != "expect.conf:8 counters.clean_runs = 5" {
		t.Errorf("clean_runs = %+v", v)
	}
	if got := c.CounterLimit("symbol_error").RatePerHour.Cite(); got != "expect.conf:3 counters.symbol_error.rate_per_hour = 240" {
		t.Errorf("cite = %q", got)
	}
	var none *Class
	if none.CounterLimit("symbol_error") != nil || none.CounterCleanRuns() != nil || none.CounterNames() != nil {
		t.Error("a nil class sets counter limits")
	}
}

func TestCounterKeysRefuseBadValues(t *testing.T) {
	text := `[class gpu]
hosts = gpu*
counters.symbol_error = 240
counters.symbol_error = { rate_per_hour = fast }
counters.symbol_error = { rate_per_hour = -1 }
counters.symbol_error = { absolute = 1.5 }
counters.symbol_error = { }
counters.symbol_error = { absolute = 1, absolute = 2 }
counters.symbol_error = { speed = 1 }
counters.symbol_error.rate = 1
counters.9bad = { absolute = 1 }
counters.clean_runs = 0
counters.clean_runs = 101
counters.symbol_error = { rate_per_hour = NaN }
counters.symbol_error = { absolute = 5
`
	_, err := Parse("expect.conf", strings.NewReader(text))
	var errs ParseErrors
	if !errors.As(err, &errs) {
		t.Fatalf("err = %v", err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`expect.conf:3: counters.symbol_error: "240": want { rate_per_hour = N, absolute = N }`,
		`expect.conf:4: counters.symbol_error: rate_per_hour "fast" is not a number of errors per hour`,
		`expect.conf:5: counters.symbol_error: rate_per_hour -1 is out of range 0..1e+12`,
		`expect.conf:6: counters.symbol_error: absolute "1.5" is not a count 0..4611686018427387904`,
		`expect.conf:7: counters.symbol_error: { } sets nothing: give rate_per_hour, absolute or both`,
		`expect.conf:8: counters.symbol_error: absolute given twice`,
		`expect.conf:9: counters.symbol_error: unknown counter field "speed"; valid: rate_per_hour, absolute`,
		`expect.conf:10: counters.symbol_error.rate: unknown counter field "rate"; valid: rate_per_hour, absolute`,
		`expect.conf:11: counters.9bad: counter name "9bad": want the name of a counter file, such as symbol_error`,
		`expect.conf:12: counters.clean_runs: 0 is out of range 1..100`,
		`expect.conf:13: counters.clean_runs: 101 is out of range 1..100`,
		`expect.conf:14: counters.symbol_error: rate_per_hour "NaN" is not a number of errors per hour`,
		`expect.conf:15: counters.symbol_error: "{ absolute = 5": want { rate_per_hour = N, absolute = N }`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCounterKeysWriteBack(t *testing.T) {
	f := mustParse(t, `[class gpu]
hosts = gpu*
counters.symbol_error = { rate_per_hour = 240, absolute = 1000 }
counters.clean_runs = 5 # slow to forgive
`)
	var b strings.Builder
	if err := Write(&b, f.Classes[0]); err != nil {
		t.Fatal(err)
	}
	back := mustParse(t, b.String()).Classes[0]
	if !reflect.DeepEqual(back.CounterNames(), []string{"symbol_error"}) || back.CounterLimit("symbol_error").RatePerHour.V != 240 ||
		back.CounterLimit("symbol_error").Absolute.V != 1000 || back.CounterCleanRuns().V != 5 || back.CounterCleanRuns().Comment != "slow to forgive" {
		t.Errorf("written:\n%s", b.String())
	}
}
