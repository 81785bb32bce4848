package sysfs

import (
	"fmt"
	"sort"
	"strings"
)

// SlurmConfPaths are where slurm.conf is looked for, in order: the path
// Slurm's own packages use, Debian's older slurm-llnl path, and the copy a
// configless slurmd caches from slurmctld (SlurmdSpoolDir/conf-cache,
// linked from /run/slurm/conf).
var SlurmConfPaths = []string{"/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf", "/run/slurm/conf/slurm.conf"}

// SlurmSetting is one key of slurm.conf: its value and line ("" and 0
// when unset).
type SlurmSetting struct {
	Value string
	Line  int
}

// Set reports whether the key was given.
func (s SlurmSetting) Set() bool { return s.Line > 0 }

// SlurmConf is what rdmadoctor reads from slurm.conf: how resource limits
// propagate from the submitting shell to the job.
type SlurmConf struct {
	File      string // displayed path
	Propagate SlurmSetting
	Except    SlurmSetting
	Includes  []string // Include lines, which are not followed
}

// ParseSlurmConf reads the limit-propagation keys of slurm.conf. Keys are
// case-insensitive, '#' starts a comment, and the last assignment wins, as
// in Slurm's parser; values are kept as written (Slurm compares the limit
// names case-sensitively).
func ParseSlurmConf(data []byte) SlurmConf {
	var c SlurmConf
	configLines(data, func(n int, s, _ string) {
		if f := strings.Fields(s); len(f) >= 2 && strings.EqualFold(f[0], "include") {
			c.Includes = append(c.Includes, strings.Join(f[1:], " "))
			return
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return
		}
		v = strings.Trim(strings.TrimSpace(v), `"`)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "propagateresourcelimits":
			c.Propagate = SlurmSetting{Value: v, Line: n}
		case "propagateresourcelimitsexcept":
			c.Except = SlurmSetting{Value: v, Line: n}
		}
	})
	return c
}

// slurmLimitNames splits a limit list as Slurm does (commas, blanks) and
// drops the optional RLIMIT_ prefix.
func slurmLimitNames(v string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		out = append(out, strings.TrimPrefix(f, "RLIMIT_"))
	}
	return out
}

func hasLimit(v, name string) bool {
	for _, n := range slurmLimitNames(v) {
		if n == name {
			return true
		}
	}
	return false
}

// PropagatesMemlock tells whether jobs get the submitting shell's
// RLIMIT_MEMLOCK, following Slurm's read_config: PropagateResourceLimitsExcept,
// when set, decides alone (NONE: every limit propagates; ALL: none); else
// PropagateResourceLimits (default ALL; NONE: none; a list: those named).
// It returns the answer and the setting that decided it.
func (c SlurmConf) PropagatesMemlock() (bool, string) {
	at := func(key string, s SlurmSetting) string {
		return fmt.Sprintf("%s=%s (%s:%d)", key, s.Value, c.File, s.Line)
	}
	if c.Except.Set() {
		v := c.Except.Value
		switch {
		case v == "NONE":
			return true, at("PropagateResourceLimitsExcept", c.Except)
		case v == "ALL" || hasLimit(v, "MEMLOCK"):
			return false, at("PropagateResourceLimitsExcept", c.Except)
		}
		return true, at("PropagateResourceLimitsExcept", c.Except)
	}
	if !c.Propagate.Set() {
		return true, "PropagateResourceLimits not set (Slurm's default is ALL)"
	}
	v := c.Propagate.Value
	switch {
	case v == "ALL" || hasLimit(v, "MEMLOCK"):
		return true, at("PropagateResourceLimits", c.Propagate)
	}
	return false, at("PropagateResourceLimits", c.Propagate)
}

// SlurmConfig reads the first slurm.conf of SlurmConfPaths. found is false
// when none exists; a file that exists but cannot be read is an error.
func (h *Host) SlurmConfig() (SlurmConf, bool, error) {
	return h.SlurmConfigFrom(SlurmConfPaths...)
}

// SlurmConfigFrom reads the first of paths that exists (a running slurmd's
// "-f" file or SLURM_CONF first, then SlurmConfPaths).
func (h *Host) SlurmConfigFrom(paths ...string) (SlurmConf, bool, error) {
	for _, p := range paths {
		data, err := h.ReadFile(p)
		if IsNotExist(err) {
			continue
		}
		if err != nil {
			return SlurmConf{File: h.Display(p)}, true, err
		}
		c := ParseSlurmConf(data)
		c.File = h.Display(p)
		return c, true, nil
	}
	return SlurmConf{}, false, nil
}

// Where systemd looks for unit files and their drop-ins, most important
// first: the administrator's, the runtime's, the packages'.
var systemdUnitDirs = []string{"/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"}

// UnitSetting finds key in section [sect] of a systemd unit as systemd
// would: the unit file from the first directory that has it, then the
// drop-ins <unit>.d/*.conf of every directory, sorted by file name (a name
// in an earlier directory masking the same name in a later one); the last
// assignment wins. unitFound is false when no unit file exists.
func (h *Host) UnitSetting(unit, sect, key string) (s SystemdSetting, found, unitFound bool, probs []error) {
	look := func(p string) {
		data, err := h.ReadFile(p)
		if err != nil {
			if !IsNotExist(err) {
				probs = append(probs, err)
			}
			return
		}
		if v, line, ok := ParseSystemdConf(data, sect, key); ok {
			s, found = SystemdSetting{File: h.Display(p), Line: line, Value: v}, true
		}
	}
	for _, d := range systemdUnitDirs {
		p := d + "/" + unit
		if ok, _ := h.Exists(p); ok {
			unitFound = true
			look(p)
			break
		}
	}
	dropins := map[string]string{}
	var names []string
	for _, d := range systemdUnitDirs {
		dir := d + "/" + unit + ".d"
		ns, err := h.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, n := range ns {
			if _, seen := dropins[n]; !seen && strings.HasSuffix(n, ".conf") {
				dropins[n] = dir + "/" + n
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	for _, n := range names {
		look(dropins[n])
	}
	return s, found, unitFound, probs
}
