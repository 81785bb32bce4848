package checks

import (
	"fmt"

	"github.com/spf13/pflag"
)

// counters.errors' flag: the sampling window.
func init() {
	declareKnob(22, func(fs *pflag.FlagSet, o *Options) {
		fs.DurationVar(&o.Interval, "interval", 0, "counters.errors: sample the error counters twice this far apart; a rising counter fails")
	}, func(o *Options, _ func(string) bool) error {
		if o.Interval < 0 {
			return fmt.Errorf("--interval %v: a window is not negative (0: one sample)", o.Interval)
		}
		return nil
	})
}
