package expect

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Unit is one RDMA device of a host and its port numbers: what a class's
// rules are matched against by Unmatched.
type Unit struct {
	Device string
	Ports  []int
}

// Unmatched is a rule of a class that names no device or port of a host:
// most often a typo in a device glob, which would otherwise silently
// judge nothing.
type Unmatched struct {
	Rule    string // "mlx5_*x", "mlx5_0/2"
	Key     string // the first key the rule sets, as written
	File    string
	Line    int    // the line of that key
	Reason  string // "matches no RDMA device on this host"
	Nearest string // the host's closest unit name, "" when none is close
}

// Error says the rule, its line and the nearest unit, as a finding and
// `expect --check` print it.
func (u Unmatched) Error() string {
	where := filepath.Base(u.File)
	if u.File == "" {
		where = "expectations"
	}
	s := fmt.Sprintf("%s:%d %s: %s %s", where, u.Line, u.Key, u.Rule, u.Reason)
	if u.Nearest != "" {
		s += " (did you mean " + u.Nearest + "?)"
	}
	return s
}

// site is where a rule's first value was written.
type site struct {
	key, file string
	line      int
}

func siteOf[T any](s *site, v *Value[T]) {
	if v != nil && (s.line == 0 || v.Line < s.line) {
		*s = site{key: v.Key, file: v.File, line: v.Line}
	}
}

func (r *DeviceRule) site() site {
	var s site
	siteOf(&s, r.FW)
	siteOf(&s, r.PCIeSpeed)
	siteOf(&s, r.PCIeWidth)
	siteOf(&s, r.Ports)
	return s
}

func (r *PortRule) site() site {
	var s site
	siteOf(&s, r.LinkLayer)
	siteOf(&s, r.Rate)
	siteOf(&s, r.Width)
	siteOf(&s, r.MTU)
	siteOf(&s, r.PFCPriority)
	siteOf(&s, r.Unused)
	siteOf(&s, r.ModuleVendor)
	siteOf(&s, r.ModulePart)
	siteOf(&s, r.ModuleFirmware)
	return s
}

// Unmatched lists the class's device and port rules that match no unit of
// the host, in file order. A nil class has none.
func (c *Class) Unmatched(units []Unit) []Unmatched {
	if c == nil {
		return nil
	}
	var devs, ports []string
	for _, u := range units {
		devs = append(devs, u.Device)
		for _, p := range u.Ports {
			ports = append(ports, fmt.Sprintf("%s/%d", u.Device, p))
		}
	}
	var out []Unmatched
	for _, r := range c.DeviceRules {
		s := r.site()
		if s.line == 0 || matchesDevice(r.Glob, units) {
			continue
		}
		out = append(out, Unmatched{Rule: r.Glob, Key: s.key, File: s.file, Line: s.line,
			Reason: "matches no RDMA device on this host", Nearest: Nearest(r.Glob, devs)})
	}
	for _, r := range c.PortRules {
		s := r.site()
		if s.line == 0 {
			continue
		}
		u := Unmatched{Rule: portName(r.Glob, r.Port), Key: s.key, File: s.file, Line: s.line}
		switch {
		case !matchesDevice(r.Glob, units):
			u.Reason, u.Nearest = "matches no RDMA device on this host", Nearest(u.Rule, ports)
		case r.Port != 0 && !hasPort(r.Glob, r.Port, units):
			u.Reason, u.Nearest = fmt.Sprintf("matches no port: no device %s matches has a port %d", r.Glob, r.Port), Nearest(u.Rule, ports)
		default:
			continue
		}
		out = append(out, u)
	}
	sortUnmatched(out)
	return out
}

func matchesDevice(glob string, units []Unit) bool {
	for _, u := range units {
		if globMatch(glob, u.Device) {
			return true
		}
	}
	return false
}

func hasPort(glob string, port int, units []Unit) bool {
	for _, u := range units {
		if !globMatch(glob, u.Device) {
			continue
		}
		for _, p := range u.Ports {
			if p == port {
				return true
			}
		}
	}
	return false
}

// sortUnmatched puts the rules in line order (device and port rules are
// kept apart in the class).
func sortUnmatched(us []Unmatched) {
	for i := 1; i < len(us); i++ {
		for j := i; j > 0 && us[j].Line < us[j-1].Line; j-- {
			us[j], us[j-1] = us[j-1], us[j]
		}
	}
}

// Candidate is a line Write puts in the file as a comment: a key the
// operator may uncomment (a port that was down when the file was written
// may be unused on purpose — or broken, which only the operator knows).
type Candidate struct {
	Key, Value, Comment string
	Line                int
}

// SetCandidate records KEY = VALUE as a commented candidate, after the
// validation Set does, so that uncommenting it gives a line Parse reads.
func (c *Class) SetCandidate(key, value, comment string) error {
	if c == nil {
		return fmt.Errorf("no class")
	}
	scratch := &Class{Name: c.Name, Hosts: c.Hosts, lastLine: c.lastLine}
	if err := scratch.Set(key, value, ""); err != nil {
		return err
	}
	c.lastLine++
	c.Candidates = append(c.Candidates, Candidate{Key: strings.TrimSpace(key), Value: strings.TrimSpace(value), Comment: comment, Line: c.lastLine})
	return nil
}
