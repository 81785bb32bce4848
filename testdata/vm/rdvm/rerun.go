package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// rerun judges a rerun record: three runs with one --state — the first
// (prime.json) sets the state's marks, the --between lines run, the second
// is the scenario's own report (its --exit, --root, --status, --mentions),
// the third (after.json) must no longer report what the second found once.
// --prime-status and --after-status hold a check's status in the first and
// third runs, --after-exit the third run's exit code.
func (v *verifier) rerun(o *outcome, dir string, m meta, active bool) {
	if !active {
		return
	}
	if e := m.exitOf("between_exit"); e != "" && e != "0" {
		o.fail("its --between failed (status %s): %s", e, firstLines(readTrim(filepath.Join(dir, "between.log")), 3))
	}
	prime := v.rerunReport(o, dir, "prime")
	after := v.rerunReport(o, dir, "after")
	if exp, ok := m.get("after-exit"); ok {
		if obs := readTrim(filepath.Join(dir, "after.exit")); slices.Contains(splitList(exp), obs) {
			o.ok("the run after: exit %s", obs)
		} else {
			o.fail("the run after: exit code expected %s, observed %s (stderr: %s)", exp, obs, firstLines(readTrim(filepath.Join(dir, "after.stderr")), 3))
		}
	}
	v.statusesIn(o, "the first run", m.all("prime-status"), prime)
	v.statusesIn(o, "the run after", m.all("after-status"), after)
}

// rerunReport reads one of the rerun's other runs (NAME.json); nil, with
// the failure said, when it is no JSON report.
func (v *verifier) rerunReport(o *outcome, dir, name string) *jsonReport {
	raw, _ := os.ReadFile(filepath.Join(dir, name+".json"))
	rep := &jsonReport{}
	if err := json.Unmarshal(raw, rep); err != nil {
		o.fail("%s.json is not a JSON report: %v (stderr: %s)", name, err, firstLines(readTrim(filepath.Join(dir, name+".stderr")), 3))
		return nil
	}
	return rep
}

// statusesIn holds each ID=S[|S] of wants to the report of one run.
func (v *verifier) statusesIn(o *outcome, run string, wants []string, rep *jsonReport) {
	for _, st := range wants {
		id, want, _ := strings.Cut(st, "=")
		if _, ok := v.catalog[id]; !ok {
			o.pending("%s not in `rdmadoctor list`", id)
			continue
		}
		c := (*jsonCheck)(nil)
		if rep != nil {
			c = rep.check(id)
		}
		switch {
		case c == nil:
			o.fail("%s: %s is missing from the report", run, id)
		case slices.Contains(splitList(want), c.Status):
			o.ok("%s: %s %s", run, id, c.Status)
		default:
			o.fail("%s: %s expected %s, observed %s: %s", run, id, want, c.Status, c.Summary)
		}
	}
}
