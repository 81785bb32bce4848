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

// PortCounters reads the files of ports/<port>/counters and hw_counters
// under an RDMA device directory (the resolved /sys/devices path, or
// /sys/class/infiniband/<dev>) whose names want accepts (nil: every file).
// Each file stands alone: one unreadable or malformed file is an unknown
// counter, never an error for the rest. The returned errors are directories
// that exist but could not be listed.
//
// The port directory is opened once and every file read relative to it:
// a host with a thousand VFs has tens of thousands of counter files, and a
// path walk per file would cost more than the rest of level 1.
func (h *Host) PortCounters(devDir string, port int, want func(name string) bool) ([]Counter, []error) {
	portDir := path.Join(devDir, "ports", strconv.Itoa(port))
	var out []Counter
	var probs []error
	pr, err := h.openDirRoot(portDir)
	if err != nil {
		if !IsNotExist(err) {
			probs = append(probs, h.pathErr("open", portDir, err))
		}
		return nil, probs
	}
	defer pr.Close()
	buf := make([]byte, attrReadSize)
	for _, g := range []string{"counters", "hw_counters"} {
		dir := path.Join(portDir, g)
		h.note(dir, AccessList)
		names, gr, err := listRoot(pr, g)
		if err != nil {
			if !IsNotExist(err) {
				probs = append(probs, h.pathErr("list", dir, err))
			}
			continue
		}
		if len(names) > maxCountersPerDir {
			probs = append(probs, fmt.Errorf("%s: %d files, only the first %d read", h.Display(dir), len(names), maxCountersPerDir))
			names = names[:maxCountersPerDir]
		}
		for _, n := range names {
			if want != nil && !want(n) {
				continue
			}
			p := path.Join(dir, n)
			h.note(p, AccessRead)
			c := Counter{Name: n, Group: g, Path: h.Display(p)}
			s, err := readAttrIn(gr, n, buf)
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
			out = append(out, c)
		}
		gr.Close()
	}
	return out, probs
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
