package sysfs

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"syscall"
)

// Counter is one file of a port's counters/ or hw_counters/ directory.
type Counter struct {
	Name  string // "symbol_error"
	Group string // "counters" (the IB PMA PortCounters) or "hw_counters" (driver)
	Path  string // displayed path
	Value uint64
	Known bool
	// Unknown says why the value is not known: "N/A (no PMA)", the read
	// error, or the malformed content. Empty when Known.
	Unknown string
}

// ErrNoPMA is the content some drivers put in a PMA counter they cannot
// read ("N/A (no PMA)"): the counter is unknown, not zero.
var ErrNoPMA = errors.New("N/A (no PMA)")

// ParseCounter reads a counter file's content: a decimal number, or
// "N/A (no PMA)". Anything else is malformed.
func ParseCounter(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "N/A") {
		return 0, ErrNoPMA
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && errors.Is(ne.Err, strconv.ErrRange) {
			return 0, fmt.Errorf("%q: larger than 64 bits", trimForMsg(s))
		}
		return 0, fmt.Errorf("%q: not a counter value", trimForMsg(s))
	}
	return v, nil
}

// maxCountersPerDir bounds how many files one counters directory may hold.
const maxCountersPerDir = 512

// PortCounters reads every file of ports/<port>/counters and hw_counters of
// an RDMA device. Each file stands alone: one unreadable or malformed file
// is an unknown counter, never an error for the rest. The returned errors
// are directories that exist but could not be listed.
func (h *Host) PortCounters(dev string, port int) ([]Counter, []error) {
	var out []Counter
	var probs []error
	for _, g := range []string{"counters", "hw_counters"} {
		dir := path.Join(InfinibandClass, dev, "ports", strconv.Itoa(port), g)
		names, err := h.ReadDir(dir)
		if err != nil {
			if !IsNotExist(err) {
				probs = append(probs, err)
			}
			continue
		}
		if len(names) > maxCountersPerDir {
			probs = append(probs, fmt.Errorf("%s: %d files, only the first %d read", h.Display(dir), len(names), maxCountersPerDir))
			names = names[:maxCountersPerDir]
		}
		for _, n := range names {
			p := path.Join(dir, n)
			c := Counter{Name: n, Group: g, Path: h.Display(p)}
			s, err := h.ReadAttr(p)
			switch {
			case errors.Is(err, syscall.EINVAL):
				c.Unknown = "EINVAL: the driver refused the read"
			case err != nil:
				var pe *PathError
				if errors.As(err, &pe) {
					c.Unknown = describeErr(pe.Err)
				} else {
					c.Unknown = err.Error()
				}
			default:
				v, perr := ParseCounter(s)
				if perr != nil {
					c.Unknown = perr.Error()
				} else {
					c.Value, c.Known = v, true
				}
			}
			out = append(out, c)
		}
	}
	return out, probs
}
