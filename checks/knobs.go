package checks

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// A knob is a flag a check owns, declared in the check's own file beside
// its judgement (as node_exporter's collectors own their flags): the
// command line only collects them (BindFlags) and has them validated
// (CheckFlags). The expectation keys a check reads are its own too
// (checks/expect's KeyDocs).
type knob struct {
	code  int // the owning check's code: --help lists knobs in catalog order
	bind  func(fs *pflag.FlagSet, o *Options)
	check func(o *Options, changed func(name string) bool) error // nil: nothing to validate
}

var knobs []knob

// declareKnob registers a check's flag; it is called from the check
// file's init.
func declareKnob(code int, bind func(fs *pflag.FlagSet, o *Options), check func(o *Options, changed func(string) bool) error) {
	knobs = append(knobs, knob{code, bind, check})
}

// BindFlags declares every check's flags on fs, writing into o, in catalog
// order.
func BindFlags(fs *pflag.FlagSet, o *Options) {
	sorted := append([]knob(nil), knobs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].code < sorted[j].code })
	for _, k := range sorted {
		k.bind(fs, o)
	}
}

// CheckFlags validates the checks' flags after fs parsed them; the error
// names the flag and what it takes.
func CheckFlags(fs *pflag.FlagSet, o *Options) error {
	var errs []error
	for _, k := range knobs {
		if k.check != nil {
			if err := k.check(o, fs.Changed); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// sizeFlag is a byte size flag ("65536", "64MiB", "unlimited").
type sizeFlag struct {
	p    *uint64
	text string
}

func newSizeFlag(p *uint64, def string) *sizeFlag {
	n, err := ParseSize(def)
	if err != nil {
		panic("checks: bad default size " + def)
	}
	*p = n
	return &sizeFlag{p, def}
}

func (s *sizeFlag) String() string { return s.text }
func (s *sizeFlag) Type() string   { return "size" }
func (s *sizeFlag) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	*s.p, s.text = n, v
	return nil
}

// ParseSize reads a size in bytes: a number, with an optional K, M or G
// suffix (KiB, MiB, GiB and KB, MB, GB are the same powers of two), or
// "unlimited".
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	if t == "unlimited" {
		return ^uint64(0), nil
	}
	mult := uint64(1)
	for _, u := range []struct {
		suf string
		m   uint64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}} {
		if strings.HasSuffix(t, u.suf) {
			t, mult = strings.TrimSuffix(t, u.suf), u.m
			break
		}
	}
	var n uint64
	if _, err := fmt.Sscanf(t, "%d", &n); err != nil || fmt.Sprint(n) != t {
		return 0, errors.New("want a size such as 65536, 64MiB or unlimited")
	}
	return n * mult, nil
}
