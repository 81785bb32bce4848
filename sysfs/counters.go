package sysfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
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

// CounterGroups are the counter directories below a port: the IB PMA
// PortCounters (created by the core only for drivers with process_mad,
// drivers/infiniband/core/sysfs.c) and the driver's own hw_counters.
var CounterGroups = []string{"counters", "hw_counters"}

// PortCounters reads the files of ports/<port>/counters and hw_counters
// under an RDMA device directory (the resolved /sys/devices path, or
// /sys/class/infiniband/<dev>) whose group and name want accepts (nil: every
// file). Each file stands alone: one unreadable or malformed file is an
// unknown counter, never an error for the rest. The returned errors are
// directories that exist but could not be listed; groups lists the counter
// directories that exist.
//
// The port directory is opened once and every file read relative to it:
// a host with a thousand VFs has tens of thousands of counter files, and a
// path walk per file would cost more than the rest of level 1.
func (h *Host) PortCounters(devDir string, port int, want func(group, name string) bool) (cs []Counter, groups []string, probs []error) {
	return h.readCounterDirs(path.Join(devDir, "ports", strconv.Itoa(port)), CounterGroups, want)
}

// DeviceCounters reads <devDir>/hw_counters: the statistics a driver
// registers for the whole device (alloc_hw_device_stats) rather than per
// port. groups is empty when the device has none.
func (h *Host) DeviceCounters(devDir string, want func(group, name string) bool) (cs []Counter, groups []string, probs []error) {
	return h.readCounterDirs(devDir, []string{"hw_counters"}, want)
}

// readCounterDirs reads the counter directories names below base.
func (h *Host) readCounterDirs(base string, names []string, want func(group, name string) bool) ([]Counter, []string, []error) {
	var out []Counter
	var groups []string
	var probs []error
	br, err := h.openDirRoot(base)
	if err != nil {
		if !IsNotExist(err) {
			probs = append(probs, h.pathErr("open", base, err))
		}
		return nil, nil, probs
	}
	defer br.Close()
	buf := make([]byte, attrReadSize)
	for _, g := range names {
		cs, bounded, err := h.readCounterDir(br, base, g, want, buf)
		if err != nil {
			if !IsNotExist(err) {
				probs = append(probs, err)
			}
			continue
		}
		if bounded != nil {
			probs = append(probs, bounded)
		}
		groups = append(groups, g)
		out = append(out, cs...)
	}
	return out, groups, probs
}

// readCounterDir lists and reads one counter directory g below br (whose
// host path is base). err is a directory that could not be listed; bounded
// says that only the first maxCountersPerDir files were read.
func (h *Host) readCounterDir(br *os.Root, base, g string, want func(group, name string) bool, buf []byte) (out []Counter, bounded, err error) {
	dir := path.Join(base, g)
	h.note(dir, AccessList)
	names, gr, err := listRoot(br, g)
	if err != nil {
		if IsNotExist(err) {
			return nil, nil, err
		}
		return nil, nil, h.pathErr("list", dir, err)
	}
	defer gr.Close()
	if len(names) > maxCountersPerDir {
		bounded = fmt.Errorf("%s: %d files, only the first %d read", h.Display(dir), len(names), maxCountersPerDir)
		names = names[:maxCountersPerDir]
	}
	for _, n := range names {
		if want != nil && !want(g, n) {
			continue
		}
		out = append(out, h.readCounter(gr, path.Join(dir, n), g, n, buf))
	}
	return out, bounded, nil
}

// readCounter reads one counter file p (named n in gr). A read error the
// facts file records for p (a snapshot of a host whose driver refused the
// read) is replayed as that error, as ReadAttr does.
func (h *Host) readCounter(gr *os.Root, p, g, n string, buf []byte) Counter {
	h.note(p, AccessRead)
	c := Counter{Name: n, Group: g, Path: h.Display(p)}
	var s string
	err := h.recordedReadError(p)
	if err == nil {
		s, err = readAttrIn(gr, n, buf)
	}
	switch {
	case errors.Is(err, syscall.EINVAL):
		c.Unknown = "EINVAL: the driver refused the read"
	case err != nil:
		c.Unknown = describeErr(unwrapPathError(err))
	default:
		v, perr := ParseCounter(s)
		if perr != nil {
			c.Unknown = perr.Error()
		} else {
			c.Value, c.Known = v, true
		}
	}
	return c
}

// openDirRoot opens a host directory as an os.Root: inside the fixture
// root (so nothing escapes it), or directly on a live host.
func (h *Host) openDirRoot(dir string) (*os.Root, error) {
	if h.root == nil {
		r, err := os.OpenRoot(path.Clean("/" + dir))
		return r, unwrapPathError(err)
	}
	r, err := h.root.OpenRoot(rel(dir))
	return r, unwrapPathError(err)
}

// listRoot opens the directory name below r and lists it, sorted.
func listRoot(r *os.Root, name string) ([]string, *os.Root, error) {
	sub, err := r.OpenRoot(name)
	if err != nil {
		return nil, nil, unwrapPathError(err)
	}
	f, err := sub.Open(".")
	if err != nil {
		sub.Close()
		return nil, nil, unwrapPathError(err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		sub.Close()
		return nil, nil, unwrapPathError(err)
	}
	sort.Strings(names)
	return names, sub, nil
}

// readAttrIn reads a small attribute below r with one read(2), as ReadAttr does.
func readAttrIn(r *os.Root, name string, buf []byte) (string, error) {
	f, err := r.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	n, err := f.Read(buf)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimRight(string(buf[:n]), "\n"), nil
}
