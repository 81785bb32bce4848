package sysfs

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// LinkSpeed is a PCIe link speed as sysfs prints it in current_link_speed and
// max_link_speed: "16.0 GT/s PCIe" (kernels since 4.19), "8 GT/s" (older),
// or "Unknown" / "Unknown speed" when the kernel cannot tell.
type LinkSpeed struct {
	GTs float64 // transfers per second per lane, in GT/s; 0 when unknown
	Raw string  // the attribute as read, trimmed
}

// Known reports whether the speed is a number of GT/s.
func (s LinkSpeed) Known() bool { return s.GTs > 0 }

// Gen is the PCIe generation the speed belongs to (1 for 2.5 GT/s … 6 for
// 64 GT/s), 0 when unknown or not a standard rate.
func (s LinkSpeed) Gen() int {
	for i, v := range pcieRates {
		if s.GTs == v {
			return i + 1
		}
	}
	return 0
}

// String prints the speed the way the kernel's newer format does, with the
// generation: "16.0 GT/s (Gen4)".
func (s LinkSpeed) String() string {
	if !s.Known() {
		if s.Raw == "" {
			return "unknown"
		}
		return s.Raw
	}
	v := strconv.FormatFloat(s.GTs, 'f', 1, 64)
	if g := s.Gen(); g > 0 {
		return fmt.Sprintf("%s GT/s (Gen%d)", v, g)
	}
	return v + " GT/s"
}

// Short prints "16.0 GT/s" without the generation.
func (s LinkSpeed) Short() string {
	if !s.Known() {
		return s.String()
	}
	return strconv.FormatFloat(s.GTs, 'f', 1, 64) + " GT/s"
}

// pcieRates are the per-lane rates of PCIe generations 1 to 6.
var pcieRates = []float64{2.5, 5, 8, 16, 32, 64}

// LaneGBps is the usable bandwidth of one lane at this speed in GB/s, after
// line coding: 8b/10b up to 5 GT/s, 128b/130b from 8 GT/s, and FLIT mode's
// 242/256 at 64 GT/s.
func (s LinkSpeed) LaneGBps() float64 {
	switch {
	case !s.Known():
		return 0
	case s.GTs <= 5:
		return s.GTs * 0.8 / 8
	case s.GTs < 64:
		return s.GTs * 128 / 130 / 8
	}
	return s.GTs * 242 / 256 / 8
}

// ParseLinkSpeed parses a link speed attribute. "Unknown" and "Unknown speed"
// parse without error into an unknown speed; anything that is not a speed
// in GT/s is an error.
func ParseLinkSpeed(s string) (LinkSpeed, error) {
	s = strings.TrimSpace(s)
	sp := LinkSpeed{Raw: s}
	if s == "" {
		return sp, fmt.Errorf("empty link speed")
	}
	if strings.HasPrefix(s, "Unknown") {
		return sp, nil
	}
	f := strings.Fields(s)
	if len(f) < 2 || len(f) > 3 || f[1] != "GT/s" || (len(f) == 3 && f[2] != "PCIe") {
		return sp, fmt.Errorf("%q is not a PCIe link speed (\"16.0 GT/s PCIe\")", trimForMsg(s))
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 || v > 1024 {
		return sp, fmt.Errorf("%q: bad number of GT/s", trimForMsg(s))
	}
	sp.GTs = v
	return sp, nil
}

// ParseLinkWidth parses current_link_width / max_link_width: a lane count
// ("16"; "x16" is tolerated). 0 means the link is not trained.
func ParseLinkWidth(s string) (int, error) {
	s = strings.TrimSpace(s)
	t := strings.TrimPrefix(strings.TrimPrefix(s, "x"), "X")
	n, err := strconv.Atoi(t)
	if err != nil || n < 0 || n > 255 || t == "" || t[0] == '+' || t[0] == '-' {
		return 0, fmt.Errorf("%q is not a PCIe link width", trimForMsg(s))
	}
	return n, nil
}

// LinkStatus is the PCIe link of one function or bridge as sysfs shows it.
// Has* are false when the attribute does not exist (mlx4 functions and some
// virtual bridges have none); a present attribute that could not be read or
// parsed is a Problem, not a missing one.
type LinkStatus struct {
	Address    string // PCI address, "0000:3a:00.0"
	SysPath    string // /sys/devices/... directory
	Cur, Max   LinkSpeed
	CurWidth   int
	MaxWidth   int
	HasCur     bool // current_link_speed and current_link_width both read
	HasMax     bool // max_link_speed and max_link_width both read
	Problems   []string
	missingAll bool
}

// Exposed reports whether the node has any link attribute at all.
func (l LinkStatus) Exposed() bool { return !l.missingAll }

// PCIPath is a function's link and the links of every bridge above it, up to
// and including the root port. On a PCIe tree each bridge's link status is a
// link on the way from the function to the CPU: a root or downstream port
// shows the link below it, a switch's upstream port the link above it.
type PCIPath struct {
	Function LinkStatus
	Upstream []LinkStatus // nearest bridge first, the root port last
}

// pciAddrRE matches a PCI function address as a /sys/devices path element;
// domains may be longer than four digits (Intel VMD uses 10000).
var pciAddrRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`) })

// IsPCIAddress reports whether s looks like "0000:3b:00.0".
func IsPCIAddress(s string) bool { return pciAddrRE().MatchString(s) }

// maxPCIDepth bounds the walk up a device path; real trees are a few levels deep.
const maxPCIDepth = 32

// PCIPathOf reads the link of a function and of every PCI bridge above it.
// The walk follows the function's resolved /sys/devices path upwards and
// stops at the host bridge directory (pci0000:00) or /sys/devices.
func (h *Host) PCIPathOf(fn PCIFunction) PCIPath {
	sp := fn.SysPath
	if sp == "" || !strings.HasPrefix(sp, "/sys/devices/") {
		p, err := h.ResolveLink(path.Join(PCIDevicesDir, fn.Address))
		if err == nil {
			sp = p
		}
	}
	out := PCIPath{Function: h.readLink(fn.Address, path.Join(PCIDevicesDir, fn.Address))}
	out.Function.SysPath = sp
	if !strings.HasPrefix(sp, "/sys/devices/") {
		out.Function.Problems = append(out.Function.Problems,
			fmt.Sprintf("%s: not a link into /sys/devices, the bridges above it cannot be found", h.Display(path.Join(PCIDevicesDir, fn.Address))))
		return out
	}
	dir := path.Dir(sp)
	for i := 0; i < maxPCIDepth && dir != "/sys/devices" && dir != "/" && dir != "."; i++ {
		if base := path.Base(dir); IsPCIAddress(base) {
			out.Upstream = append(out.Upstream, h.readLink(base, dir))
		}
		dir = path.Dir(dir)
	}
	return out
}

// readLink reads the four link attributes of the PCI node at dir.
func (h *Host) readLink(addr, dir string) LinkStatus {
	l := LinkStatus{Address: addr, SysPath: dir}
	missing := 0
	read := func(name string) (string, bool) {
		p := path.Join(dir, name)
		s, err := h.ReadAttr(p)
		if err != nil {
			if IsNotExist(err) {
				missing++
			} else {
				l.Problems = append(l.Problems, err.Error())
			}
			return "", false
		}
		return s, true
	}
	speed := func(name string) (LinkSpeed, bool) {
		s, ok := read(name)
		if !ok {
			return LinkSpeed{}, false
		}
		v, err := ParseLinkSpeed(s)
		if err != nil {
			l.Problems = append(l.Problems, fmt.Sprintf("%s: %v", h.Display(path.Join(dir, name)), err))
			return v, false
		}
		return v, true
	}
	width := func(name string) (int, bool) {
		s, ok := read(name)
		if !ok {
			return 0, false
		}
		v, err := ParseLinkWidth(s)
		if err != nil {
			l.Problems = append(l.Problems, fmt.Sprintf("%s: %v", h.Display(path.Join(dir, name)), err))
			return 0, false
		}
		return v, true
	}
	var okCS, okCW, okMS, okMW bool
	l.Cur, okCS = speed("current_link_speed")
	l.CurWidth, okCW = width("current_link_width")
	l.Max, okMS = speed("max_link_speed")
	l.MaxWidth, okMW = width("max_link_width")
	l.HasCur = okCS && okCW
	l.HasMax = okMS && okMW
	l.missingAll = missing == 4
	return l
}
