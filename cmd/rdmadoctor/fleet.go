package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
)

// DefaultStatePath is where a fleet run keeps its last JSON report
// (--state) and where `rdmadoctor npd` looks for it.
const DefaultStatePath = "/var/lib/rdmadoctor/state.json"

// noisyProbes are the checks that make the kernel log a line by design:
// an overrun CQ makes mlx5_core log "CQ error on CQN …" (the async CQ
// error event the probe waits for). Periodic runs leave them out unless
// asked for by name, so a fleet's log scanners do not page on our probe.
var noisyProbes = map[string]string{
	"probe.cq_overflow": `an overrun CQ makes the driver log "CQ error" in the kernel log`,
}

// fleetFlags are the flags that make a run fit a fleet: where its report
// goes, where its state is kept, and how often it runs.
type fleetFlags struct {
	output   string
	state    string
	repeat   time.Duration
	periodic bool
	// periodicSet is true when --periodic was given explicitly.
	periodicSet bool
}

func addFleetFlags(fs *pflag.FlagSet, f *fleetFlags) {
	fs.StringVarP(&f.output, "output", "o", "", "write the report to this file atomically (a temporary file in the same directory, fsync, rename) instead of stdout")
	fs.StringVar(&f.state, "state", "", "keep each check's last result (and the counter history) in `FILE`, atomically, for rdmadoctor npd and other adapters (they default to "+DefaultStatePath+"); a run updates only the checks it ran; an overlapping run holding FILE.lock exits 3 at once")
	fs.DurationVar(&f.repeat, "repeat", 0, "run again every DURATION (±10% jitter) until SIGTERM or SIGINT, then exit 0; implies --periodic")
	fs.BoolVar(&f.periodic, "periodic", false, "leave out the probes that make the kernel log a line (probe.cq_overflow) unless --check names them; on by default with --repeat")
}

// validate checks the fleet flags once parsed; fs tells which were given.
func (f *fleetFlags) validate(fs *pflag.FlagSet) error {
	if f.repeat < 0 || (fs.Changed("repeat") && f.repeat < time.Second) {
		return usageError{fmt.Sprintf("--repeat %v: want a period of at least 1s, such as 5m", f.repeat)}
	}
	f.periodicSet = fs.Changed("periodic")
	if f.repeat > 0 && !f.periodicSet {
		f.periodic = true
	}
	if f.output != "" && f.output == f.state {
		return usageError{fmt.Sprintf("--output and --state name the same file %q; the state is always JSON, give the report its own file", f.output)}
	}
	return nil
}

// periodicSelection drops the noisy probes from sel when the run is
// periodic and the user did not name them with --check.
func periodicSelection(f *flags, sel []*checks.Check) []*checks.Check {
	if !f.fleet.periodic {
		return sel
	}
	named := namedChecks(f.checkIDs)
	out := make([]*checks.Check, 0, len(sel))
	for _, c := range sel {
		if _, noisy := noisyProbes[c.ID]; noisy && !named[c.ID] {
			continue
		}
		out = append(out, c)
	}
	return out
}

// leftOut says why each check a full run leaves out did not run: the noisy
// probes of a periodic run (the reason), and the checks --skip names ("").
// A run of named checks (--check) leaves nothing out: it never claimed the
// rest.
func leftOut(f *flags) map[string]string {
	why := map[string]string{}
	if len(f.checkIDs) > 0 {
		return why
	}
	if f.fleet.periodic {
		for id, w := range noisyProbes {
			why[id] = w
		}
	}
	for id := range namedChecks(f.skipIDs) {
		why[id] = ""
	}
	return why
}

// withLeftOut puts back, in catalog order, a skip result for each check the
// run left out, so the report still has every check of the catalog and
// says why one did not run (a kept state keeps the check's last result: a
// left-out finding proves nothing).
func withLeftOut(f *flags, results []report.CheckResult) []report.CheckResult {
	why := leftOut(f)
	if len(why) == 0 {
		return results
	}
	out := make([]report.CheckResult, 0, len(results)+len(why))
	i := 0
	for _, c := range checks.Catalog() {
		if i < len(results) && results[i].ID == c.ID {
			out = append(out, results[i])
			i++
			continue
		}
		w, left := why[c.ID]
		if !left {
			continue
		}
		fd := checks.LeftOut(c, f.level, w)
		out = append(out, report.CheckResult{ID: c.ID, Code: c.Code, Title: c.Title, Level: c.Level,
			Status: report.Skip, Summary: fd.Message, Details: []string{}, Evidence: map[string]any{}, Findings: []report.Finding{fd}})
	}
	return append(out, results[i:]...)
}
