package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// run is one timed run: its wall time and exit status.
type run struct {
	D    time.Duration
	Exit int
}

func readRuns(path string) ([]run, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []run
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		ns, err1 := strconv.ParseInt(f[0], 10, 64)
		code, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: bad line %q", path, line)
		}
		out = append(out, run{time.Duration(ns), code})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no runs", path)
	}
	return out, nil
}

type stats struct {
	N                int
	Median, Min, Max time.Duration
	NonZero          int // runs whose exit status was not 0
}

func summarize(rs []run) stats {
	ds := make([]time.Duration, len(rs))
	s := stats{N: len(rs)}
	for i, r := range rs {
		ds[i] = r.D
		if r.Exit != 0 {
			s.NonZero++
		}
	}
	slices.Sort(ds)
	s.Min, s.Max = ds[0], ds[len(ds)-1]
	if len(ds)%2 == 1 {
		s.Median = ds[len(ds)/2]
	} else {
		s.Median = (ds[len(ds)/2-1] + ds[len(ds)/2]) / 2
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// timing judges the timing record: rdmadoctor --level 1 against the
// reference command, N runs each in the same guest; median and ratio go to
// the log and to the Markdown file docs/timing.md quotes.
func (v *verifier) timing(o *outcome, dir string, active bool) {
	m := parseMeta(readTrim(filepath.Join(dir, "meta")))
	args, _ := m.get("args")
	ref, _ := m.get("ref")
	mine, err := readRuns(filepath.Join(dir, "timing.rdmadoctor"))
	if err != nil {
		if active {
			o.fail("timing: %v (%s)", err, firstLines(readTrim(filepath.Join(dir, "stderr")), 3))
		}
		return
	}
	theirs, err := readRuns(filepath.Join(dir, "timing.ref"))
	if err != nil {
		o.fail("timing of %s: %v", ref, err)
		return
	}
	a, b := summarize(mine), summarize(theirs)
	ratio := float64(a.Median) / float64(b.Median)
	level1 := 0
	for _, e := range v.catalog {
		if e.Level == 1 {
			level1++
		}
	}
	env := readTrim(filepath.Join(dir, "env"))
	var t strings.Builder
	fmt.Fprintf(&t, "| command (SoftRoCE guest: qemu TCG, 2 vCPUs) | runs | median | min | max |\n")
	fmt.Fprintf(&t, "|---|---:|---:|---:|---:|\n")
	fmt.Fprintf(&t, "| `rdmadoctor %s` (%d level-1 checks) | %d | %s | %s | %s |\n", args, level1, a.N, ms(a.Median), ms(a.Min), ms(a.Max))
	fmt.Fprintf(&t, "| `%s` | %d | %s | %s | %s |\n", ref, b.N, ms(b.Median), ms(b.Min), ms(b.Max))
	verdict := "within"
	if ratio > v.maxRatio {
		verdict = "OVER"
	}
	summary := fmt.Sprintf("ratio of medians: %.2f× (target ≤ %g×: %s)", ratio, v.maxRatio, verdict)
	o.Extra = append(o.Extra, strings.TrimSpace(t.String()), summary)
	if a.NonZero > 0 {
		o.fail("timing: %d of %d rdmadoctor runs exited non-zero on the healthy guest", a.NonZero, a.N)
	}
	// Over the target is a loud warning, a failure only with --strict: TCG
	// timings move with the host's load, and a flaky gate helps no one.
	if active {
		msg := fmt.Sprintf("timing: level 1 took %.2f× %s (median %s vs %s); the target is ≤ %g×", ratio, ref, ms(a.Median), ms(b.Median), v.maxRatio)
		switch {
		case ratio <= v.maxRatio:
			o.ok("level 1 at %.2f× %s", ratio, ref)
		case v.strict:
			o.fail("%s", msg)
		default:
			v.warnings = append(v.warnings, msg+" (a failure with --strict)")
		}
	}
	if v.timingMD == "" {
		return
	}
	var md strings.Builder
	md.WriteString("<!-- Written by `bash testdata/vm/suite.sh --update-timing` (rdvm verify --timing-md); a plain run only prints the table. -->\n")
	md.WriteString("Level 1 against `ibv_devinfo -v` over the same device (rxe0 on dummy0), in the suite's guest")
	if env != "" {
		fmt.Fprintf(&md, " (%s)", strings.Join(strings.Split(env, "\n"), ", "))
	}
	md.WriteString(":\n\n")
	md.WriteString(t.String())
	fmt.Fprintf(&md, "\n%s. Emulated CPUs: compare the ratio, not the absolute times.\n", strings.Replace(summary, "ratio", "Ratio", 1))
	if err := writeSection(v.timingMD, "single", md.String()); err != nil {
		o.fail("write %s: %v", v.timingMD, err)
	}
}
