package sysfs

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// maxProcScan bounds how many /proc entries ProcessesNamed looks at: a
// hostile snapshot cannot make a run read without end.
const maxProcScan = 1 << 17

// ProcessesNamed returns the PIDs whose /proc/PID/comm is name (the kernel
// keeps the first 15 bytes of the program's name there), in PID order.
// Processes that end while the list is read are skipped.
func (h *Host) ProcessesNamed(name string) ([]int, error) {
	names, err := h.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for i, n := range names {
		if i >= maxProcScan {
			break
		}
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			continue
		}
		comm, err := h.ReadAttr(path.Join("/proc", n, "comm"))
		if err == nil && strings.TrimSpace(comm) == name {
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out, nil
}

// ProcLimitsPath is /proc/PID/limits.
func ProcLimitsPath(pid int) string { return fmt.Sprintf("/proc/%d/limits", pid) }

// ProcessMemlock returns RLIMIT_MEMLOCK of process pid ("Max locked
// memory" in /proc/PID/limits; any process's is readable by anyone).
func (h *Host) ProcessMemlock(pid int) (Rlimit, error) {
	p := ProcLimitsPath(pid)
	data, err := h.ReadFile(p)
	if err != nil {
		return Rlimit{}, err
	}
	lim, err := ParseProcLimits(data)
	if r, ok := lim["Max locked memory"]; ok {
		return r, nil
	}
	if err != nil {
		return Rlimit{}, fmt.Errorf("%s: %w", h.Display(p), err)
	}
	return Rlimit{}, fmt.Errorf("%s: no \"Max locked memory\" line", h.Display(p))
}

// ParseConfFlag returns the configuration file a daemon was started with
// from its NUL-separated /proc/PID/cmdline: "-f FILE" or "-fFILE" (slurmd's
// option), "" when there is none.
func ParseConfFlag(cmdline []byte) string {
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return ""
		case a == "-f" && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, "-f") && len(a) > 2:
			return a[2:]
		}
	}
	return ""
}

// ParseEnvVar returns the value of key in a NUL-separated
// /proc/PID/environ, and whether it is set.
func ParseEnvVar(environ []byte, key string) (string, bool) {
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if k, v, ok := bytes.Cut(kv, []byte{'='}); ok && string(k) == key {
			return string(v), true
		}
	}
	return "", false
}

// DaemonConf returns the configuration file process pid names: its "-f"
// option, else the environment variable envKey (SLURM_CONF), "" when
// neither says; environ needs root and is skipped when unreadable.
func (h *Host) DaemonConf(pid int, envKey string) string {
	if data, err := h.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
		if f := ParseConfFlag(data); f != "" {
			return f
		}
	}
	if data, err := h.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil {
		if v, ok := ParseEnvVar(data, envKey); ok {
			return v
		}
	}
	return ""
}

// systemdSharedDirs hold libsystemd-shared-<version>.so, which every
// systemd since 231 installs: Debian's multiarch directories, the RHEL
// family's lib64, and upstream's default.
var systemdSharedDirs = []string{"/usr/lib/x86_64-linux-gnu/systemd", "/usr/lib/aarch64-linux-gnu/systemd", "/usr/lib64/systemd", "/usr/lib/systemd", "/lib/systemd"}

var systemdSharedRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^libsystemd-shared-([0-9]+)(?:\.[0-9a-z.~+-]*)?\.so$`)
})

// SystemdVersion returns the installed systemd's major version from the
// name of libsystemd-shared-<version>.so, with the file it came from; ok
// is false when none is found.
func (h *Host) SystemdVersion() (v int, from string, ok bool) {
	for _, d := range systemdSharedDirs {
		names, err := h.ReadDir(d)
		if err != nil {
			continue
		}
		for _, n := range names {
			if m := systemdSharedRe().FindStringSubmatch(n); m != nil {
				if n, err := strconv.Atoi(m[1]); err == nil && n > 0 {
					return n, h.Display(path.Join(d, m[0])), true
				}
			}
		}
	}
	return 0, "", false
}
