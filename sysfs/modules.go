package sysfs

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"strings"
)

// ProcModules lists the loadable modules currently in the kernel.
const ProcModules = "/proc/modules"

// Module is one line of /proc/modules.
type Module struct {
	Name   string
	Size   uint64
	Refs   int
	UsedBy []string
	State  string // Live, Loading, Unloading
}

// ParseProcModules parses the /proc/modules format:
// "name size refcount deps state address [taints]". Malformed lines are
// returned as errors with their line number; good lines are kept.
func ParseProcModules(data []byte) ([]Module, []error) {
	var (
		mods []Module
		errs []error
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 5 || !validModuleName(f[0]) {
			errs = append(errs, fmt.Errorf("line %d: %q is not a module line", line, trimForMsg(sc.Text())))
			continue
		}
		m := Module{Name: f[0], State: f[4]}
		fmt.Sscanf(f[1], "%d", &m.Size)
		fmt.Sscanf(f[2], "%d", &m.Refs)
		if f[3] != "-" {
			for _, u := range strings.Split(strings.TrimSuffix(f[3], ","), ",") {
				if u != "" {
					m.UsedBy = append(m.UsedBy, u)
				}
			}
		}
		mods = append(mods, m)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("after line %d: %w", line, err))
	}
	return mods, errs
}

func validModuleName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func trimForMsg(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// ModuleState says how a module is present in the kernel.
type ModuleState int

const (
	ModuleAbsent  ModuleState = iota
	ModuleLoaded              // listed in /proc/modules
	ModuleBuiltin             // in /sys/module but not in /proc/modules
	ModuleUnknown             // could not be determined
)

func (s ModuleState) String() string {
	return [...]string{"not loaded", "loaded", "built in", "unknown"}[s]
}

// Modules answers which kernel modules are present. Built-in modules do not
// appear in /proc/modules; they do appear as /sys/module/<name> (when they
// have parameters or a version), and modules.builtin lists them all.
type Modules struct {
	Loaded  map[string]Module
	builtin map[string]bool
	h       *Host
	// ParseErrors are malformed /proc/modules lines.
	ParseErrors []error
}

// ReadModules reads /proc/modules and the built-in list of the running kernel.
func (h *Host) ReadModules() (*Modules, error) {
	data, err := h.ReadFile(ProcModules)
	if err != nil {
		return nil, err
	}
	mods, errs := ParseProcModules(data)
	m := &Modules{Loaded: make(map[string]Module, len(mods)), builtin: map[string]bool{}, h: h, ParseErrors: errs}
	for _, mod := range mods {
		m.Loaded[mod.Name] = mod
	}
	if rel, err := h.KernelRelease(); err == nil {
		if data, err := h.ReadFile(path.Join("/lib/modules", rel, "modules.builtin")); err == nil {
			for _, l := range strings.Split(string(data), "\n") {
				b := path.Base(strings.TrimSpace(l))
				if b = strings.TrimSuffix(b, ".ko"); b != "" && b != "." {
					m.builtin[NormalizeModule(b)] = true
				}
			}
		}
	}
	return m, nil
}

// NormalizeModule spells a module name as the kernel lists it ("mlx5-ib" → "mlx5_ib").
func NormalizeModule(name string) string { return strings.ReplaceAll(name, "-", "_") }

// State reports how the named module is present.
func (m *Modules) State(name string) ModuleState {
	name = NormalizeModule(name)
	if _, ok := m.Loaded[name]; ok {
		return ModuleLoaded
	}
	if m.builtin[name] {
		return ModuleBuiltin
	}
	ok, err := m.h.Exists(path.Join("/sys/module", name))
	switch {
	case err != nil:
		return ModuleUnknown
	case ok:
		// /sys/module/<name> without a /proc/modules line is a built-in
		// (a loadable module being inserted has an initstate file).
		if st, err := m.h.ReadAttr(path.Join("/sys/module", name, "initstate")); err == nil && strings.TrimSpace(st) != "" {
			return ModuleLoaded
		}
		return ModuleBuiltin
	}
	return ModuleAbsent
}

// Available reports whether the module exists on disk for the running kernel
// (modules.dep names it), so `modprobe` can load it. ok=false with err=nil
// means the kernel's module list was read and does not have it.
func (m *Modules) Available(name string) (bool, error) {
	rel, err := m.h.KernelRelease()
	if err != nil {
		return false, err
	}
	data, err := m.h.ReadFile(path.Join("/lib/modules", rel, "modules.dep"))
	if err != nil {
		return false, err
	}
	want := NormalizeModule(name)
	for _, l := range strings.Split(string(data), "\n") {
		i := strings.IndexByte(l, ':')
		if i < 0 {
			continue
		}
		b := strings.TrimSuffix(path.Base(l[:i]), ".xz")
		b = strings.TrimSuffix(strings.TrimSuffix(b, ".zst"), ".gz")
		if NormalizeModule(strings.TrimSuffix(b, ".ko")) == want {
			return true, nil
		}
	}
	return false, nil
}
