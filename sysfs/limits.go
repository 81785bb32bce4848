package sysfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Where the locked-memory limit of this process and the defaults of other
// processes come from.
const (
	ProcSelfLimits  = "/proc/self/limits"
	ProcSelfStatus  = "/proc/self/status"
	LimitsConf      = "/etc/security/limits.conf"
	LimitsConfDir   = "/etc/security/limits.d"
	SystemdConf     = "/etc/systemd/system.conf"
	SystemdConfDirs = "/usr/lib/systemd/system.conf.d:/run/systemd/system.conf.d:/etc/systemd/system.conf.d"
)

// Unlimited is RLIM_INFINITY as a byte count.
const Unlimited = ^uint64(0)

// CapIPCLock is the capability bit that lets a process lock (and register)
// memory beyond RLIMIT_MEMLOCK.
const CapIPCLock = 14

// Rlimit is a soft and a hard resource limit; Unlimited means infinity.
type Rlimit struct {
	Soft, Hard uint64
}

// FormatBytes prints a limit for people: "unlimited", "64 KiB", "8 MiB", "1.5 GiB".
func FormatBytes(v uint64) string {
	if v == Unlimited {
		return "unlimited"
	}
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	for i := len(units) - 1; i > 0; i-- {
		if v >= 1<<(10*i) {
			f := float64(v) / float64(uint64(1)<<(10*i))
			return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64) + " " + units[i]
		}
	}
	return fmt.Sprintf("%d bytes", v)
}

// ParseProcLimits parses /proc/<pid>/limits into limit name → soft/hard
// ("Max locked memory" → {65536, 65536}). The kernel prints a header line
// and then one line per limit: the name (words), the soft and hard values
// (a number or "unlimited") and, for most, the unit.
func ParseProcLimits(data []byte) (map[string]Rlimit, error) {
	out := map[string]Rlimit{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 || (line == 1 && f[0] == "Limit") {
			continue
		}
		i := 0
		for i < len(f) && !isLimitValue(f[i]) {
			i++
		}
		if i == 0 || i+1 >= len(f) || !isLimitValue(f[i+1]) {
			return out, fmt.Errorf("line %d: %q is not \"<name> <soft> <hard> [unit]\"", line, trimForMsg(sc.Text()))
		}
		soft, err1 := parseLimitValue(f[i])
		hard, err2 := parseLimitValue(f[i+1])
		if err := errors.Join(err1, err2); err != nil {
			return out, fmt.Errorf("line %d: %w", line, err)
		}
		out[strings.Join(f[:i], " ")] = Rlimit{Soft: soft, Hard: hard}
	}
	if err := sc.Err(); err != nil {
		return out, err
	}
	if len(out) == 0 {
		return out, errors.New("no limits listed")
	}
	return out, nil
}

func isLimitValue(s string) bool {
	if s == "unlimited" {
		return true
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

func parseLimitValue(s string) (uint64, error) {
	if s == "unlimited" {
		return Unlimited, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad limit %q", trimForMsg(s))
	}
	return v, nil
}

// Memlock returns RLIMIT_MEMLOCK of the running process ("Max locked
// memory" in /proc/self/limits), in bytes.
func (h *Host) Memlock() (Rlimit, error) {
	data, err := h.ReadFile(ProcSelfLimits)
	if err != nil {
		return Rlimit{}, err
	}
	lim, err := ParseProcLimits(data)
	if r, ok := lim["Max locked memory"]; ok {
		return r, nil
	}
	if err != nil {
		return Rlimit{}, fmt.Errorf("%s: %w", h.Display(ProcSelfLimits), err)
	}
	return Rlimit{}, fmt.Errorf("%s: no \"Max locked memory\" line", h.Display(ProcSelfLimits))
}

// ParseCapEff returns the effective capability set from /proc/<pid>/status.
func ParseCapEff(data []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "CapEff" {
			continue
		}
		v = strings.TrimSpace(v)
		c, err := strconv.ParseUint(v, 16, 64)
		if err != nil {
			return 0, fmt.Errorf("CapEff %q: not a hexadecimal mask", trimForMsg(v))
		}
		return c, nil
	}
	return 0, errors.New("no CapEff line")
}

// ParseUID returns the real user ID from the "Uid:" line of
// /proc/<pid>/status ("Uid:\t1000\t1000\t1000\t1000": real, effective,
// saved, filesystem).
func ParseUID(data []byte) (uint32, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "Uid" {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0, errors.New("empty Uid line")
		}
		u, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil {
			return 0, fmt.Errorf("uid %q: not a user ID", trimForMsg(f[0]))
		}
		return uint32(u), nil
	}
	return 0, errors.New("no Uid line")
}

// ProcessUID returns the real user ID of the running process.
func (h *Host) ProcessUID() (uint32, error) {
	data, err := h.ReadFile(ProcSelfStatus)
	if err != nil {
		return 0, err
	}
	u, err := ParseUID(data)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", h.Display(ProcSelfStatus), err)
	}
	return u, nil
}

// ProcSelfCgroup names the control groups of the running process.
const ProcSelfCgroup = "/proc/self/cgroup"

// ParseCgroupPath returns the process's cgroup path from /proc/<pid>/cgroup:
// the unified hierarchy's "0::/path", else the systemd hierarchy's
// "N:name=systemd:/path" (cgroup v1); "" when neither is there.
func ParseCgroupPath(data []byte) string {
	var v1 string
	for _, l := range strings.Split(string(data), "\n") {
		id, rest, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok {
			continue
		}
		ctrl, p, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(p, "/") {
			continue
		}
		switch {
		case id == "0" && ctrl == "":
			return p
		case ctrl == "name=systemd":
			v1 = p
		}
	}
	return v1
}

// SelfCgroup returns the running process's cgroup path ("/system.slice/slurmd.service").
func (h *Host) SelfCgroup() (string, error) {
	data, err := h.ReadFile(ProcSelfCgroup)
	if err != nil {
		return "", err
	}
	return ParseCgroupPath(data), nil
}

// EffectiveCaps returns the running process's effective capabilities.
func (h *Host) EffectiveCaps() (uint64, error) {
	data, err := h.ReadFile(ProcSelfStatus)
	if err != nil {
		return 0, err
	}
	c, err := ParseCapEff(data)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", h.Display(ProcSelfStatus), err)
	}
	return c, nil
}

// LimitsEntry is one line of limits.conf or a limits.d file.
type LimitsEntry struct {
	File   string // displayed path
	Line   int
	Domain string // "*", "user", "@group", "%group", "1000:2000"
	Type   string // "soft", "hard" or "-" (both)
	Item   string // "memlock", "nofile", ...
	Value  string
	// NoLimits marks a "<domain> -" line: a user or group it matches gets
	// no limits from pam_limits at all (the reading stops there).
	NoLimits bool
}

// ParseLimitsConf parses pam_limits syntax as pam_limits.c splits a line:
// '#' starts a comment, the domain, type and item are the first three
// blank-separated words and the value is the rest of the line, trimmed; the
// type, item and value are lower-cased, the domain is not. A line of two
// words whose type starts with '-' is a "no limits" line. Other lines are
// returned as problems and skipped, as pam_limits skips them.
func ParseLimitsConf(data []byte) ([]LimitsEntry, []error) {
	var out []LimitsEntry
	var probs []error
	err := configLines(data, func(n int, s, raw string) {
		f := splitPamLine(s)
		switch {
		case len(f) == 2 && strings.HasPrefix(f[1], "-"):
			out = append(out, LimitsEntry{Line: n, Domain: f[0], Type: "-", NoLimits: true})
		case len(f) < 4:
			probs = append(probs, fmt.Errorf("line %d: %q is not \"<domain> <type> <item> <value>\"", n, trimForMsg(raw)))
		default:
			out = append(out, LimitsEntry{Line: n, Domain: f[0], Type: strings.ToLower(f[1]), Item: strings.ToLower(f[2]), Value: strings.ToLower(f[3])})
		}
	})
	if err != nil {
		probs = append(probs, err)
	}
	return out, probs
}

// splitPamLine splits a line as pam_limits' split() does: three words
// separated by blanks or tabs, then the rest of the line, trimmed of blanks
// and tabs, as the value (so "1024 extra" is a value, and strtoull reads
// 1024 from it).
func splitPamLine(s string) []string {
	var f []string
	for len(f) < 3 {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return f
		}
		end := strings.IndexAny(s, " \t")
		if end < 0 {
			end = len(s)
		}
		f, s = append(f, s[:end]), s[end:]
	}
	if v := strings.Trim(s, " \t"); v != "" {
		f = append(f, v)
	}
	return f
}

// ParseLimitsMemlock reads a limits.conf memlock value, which pam_limits
// counts in KiB, into bytes, as process_limit does: "-1", "-", "unlimited"
// and "infinity" are Unlimited; otherwise strtoull: leading digits count
// and what follows is ignored ("64k" is 64 KiB), a value too large is
// Unlimited; a value with no digits is refused (pam_limits skips the line).
func ParseLimitsMemlock(v string) (uint64, error) {
	switch v = strings.ToLower(strings.TrimSpace(v)); v {
	case "unlimited", "infinity", "-1", "-":
		return Unlimited, nil
	}
	n, ok := strtoull(v)
	if !ok {
		return 0, fmt.Errorf("memlock value %q: want KiB or unlimited", trimForMsg(v))
	}
	if n >= Unlimited/1024 {
		return Unlimited, nil
	}
	return n * 1024, nil
}

// strtoull mirrors C's strtoull in base 10: blanks, an optional sign, the
// leading digits (a minus negates modulo 2^64, an overflow saturates);
// ok is false when there is no digit.
func strtoull(s string) (uint64, bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(s[:i], 10, 64)
	if err != nil {
		return Unlimited, true
	}
	if neg {
		n = -n
	}
	return n, true
}

// LimitsFiles lists the pam_limits files in the order pam_limits reads
// them: limits.conf, then limits.d/*.conf sorted. Files that do not exist
// are left out; a limits.d that cannot be listed is returned as a problem.
func (h *Host) LimitsFiles() ([]string, []error) {
	var files []string
	var probs []error
	if ok, err := h.Exists(LimitsConf); ok {
		files = append(files, LimitsConf)
	} else if err != nil {
		probs = append(probs, err)
	}
	names, err := h.ReadDir(LimitsConfDir)
	if err != nil && !IsNotExist(err) {
		probs = append(probs, err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".conf") && !strings.HasPrefix(n, ".") {
			files = append(files, path.Join(LimitsConfDir, n))
		}
	}
	return files, probs
}

// MemlockEntries returns every memlock line of the pam_limits files, in the
// order they are read, and the problems met reading them.
func (h *Host) MemlockEntries() ([]LimitsEntry, []string, []error) {
	files, probs := h.LimitsFiles()
	var out []LimitsEntry
	var read []string
	for _, f := range files {
		data, err := h.ReadFile(f)
		if err != nil {
			probs = append(probs, err)
			continue
		}
		read = append(read, h.Display(f))
		entries, bad := ParseLimitsConf(data)
		for _, b := range bad {
			probs = append(probs, fmt.Errorf("%s: %w", h.Display(f), b))
		}
		for _, e := range entries {
			if e.Item == "memlock" || e.NoLimits {
				e.File = h.Display(f)
				out = append(out, e)
			}
		}
	}
	return out, read, probs
}

// SystemdSetting is where a systemd manager setting was found.
type SystemdSetting struct {
	File  string // displayed path
	Line  int
	Value string
}

// ParseSystemdConf returns the value of key in section [sect] of a systemd
// INI file (the last assignment wins), and whether it was set.
func ParseSystemdConf(data []byte, sect, key string) (string, int, bool) {
	var val string
	var at int
	found := false
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' || s[0] == ';' {
			continue
		}
		if s[0] == '[' && strings.HasSuffix(s, "]") {
			cur = s[1 : len(s)-1]
			continue
		}
		k, v, ok := strings.Cut(s, "=")
		if ok && cur == sect && strings.TrimSpace(k) == key {
			val, at, found = strings.TrimSpace(v), n, true
		}
	}
	return val, at, found
}

// ParseSystemdLimit reads a systemd Limit*= value for a byte limit:
// "infinity", a size with an optional K/M/G/T/P/E suffix (base 1024), or
// "soft:hard".
func ParseSystemdLimit(v string) (Rlimit, error) {
	v = strings.TrimSpace(v)
	soft, hard, pair := strings.Cut(v, ":")
	s, err := parseSystemdSize(soft)
	if err != nil {
		return Rlimit{}, err
	}
	if !pair {
		return Rlimit{Soft: s, Hard: s}, nil
	}
	h, err := parseSystemdSize(hard)
	if err != nil {
		return Rlimit{}, err
	}
	return Rlimit{Soft: s, Hard: h}, nil
}

func parseSystemdSize(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if s == "infinity" {
		return Unlimited, nil
	}
	mult := uint64(1)
	if n := len(s); n > 0 {
		if i := strings.IndexByte("BKMGTPE", s[n-1]&^0x20); i >= 0 {
			mult = 1 << (10 * i)
			s = strings.TrimSpace(s[:n-1])
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("limit %q: want bytes with an optional K/M/G suffix, or infinity", trimForMsg(s))
	}
	if v > Unlimited/mult {
		return 0, fmt.Errorf("limit %q overflows", trimForMsg(s))
	}
	return v * mult, nil
}

// SystemdDefaultMemlock finds DefaultLimitMEMLOCK= in system.conf and its
// drop-ins (drop-ins are read after system.conf, sorted by file name, a
// name in /etc masking the same name in /run and /usr/lib). It returns the
// effective setting, or found=false when nothing sets it.
func (h *Host) SystemdDefaultMemlock() (SystemdSetting, bool, []error) {
	var probs []error
	var best SystemdSetting
	found := false
	look := func(p string) {
		data, err := h.ReadFile(p)
		if err != nil {
			if !IsNotExist(err) {
				probs = append(probs, err)
			}
			return
		}
		if v, line, ok := ParseSystemdConf(data, "Manager", "DefaultLimitMEMLOCK"); ok {
			best, found = SystemdSetting{File: h.Display(p), Line: line, Value: v}, true
		}
	}
	look(SystemdConf)
	dropins := map[string]string{} // file name → path; later dirs mask earlier ones
	for _, dir := range strings.Split(SystemdConfDirs, ":") {
		names, err := h.ReadDir(dir)
		if err != nil {
			if !IsNotExist(err) {
				probs = append(probs, err)
			}
			continue
		}
		for _, n := range names {
			if strings.HasSuffix(n, ".conf") {
				dropins[n] = path.Join(dir, n)
			}
		}
	}
	names := make([]string, 0, len(dropins))
	for n := range dropins {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		look(dropins[n])
	}
	return best, found, probs
}
