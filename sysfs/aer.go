package sysfs

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// The kernel's AER statistics (drivers/pci/pcie/aer.c, aer_stats_dev_attr;
// Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats, since 4.19):
// every AER-capable PCIe function has aer_dev_correctable, aer_dev_nonfatal
// and aer_dev_fatal, each one "NAME COUNT" line per error kind the kernel
// names, a "<array>_bit[N] COUNT" line for a set bit it has no name for,
// and a last "TOTAL_ERR_COR N" (ERR_NONFATAL, ERR_FATAL) line: the number
// of error messages, which may be fewer than the errors above it since one
// message can carry several. Root ports (and root complex event
// collectors) also have aer_rootport_total_err_cor/_fatal/_nonfatal, one
// number each: every message received from the hierarchy below. Without
// CONFIG_PCIEAER, or on a function without the AER capability, none of the
// files exists.

// AER statistics files of a PCIe function.
const (
	AERCorrectable = "aer_dev_correctable"
	AERNonFatal    = "aer_dev_nonfatal"
	AERFatal       = "aer_dev_fatal"
)

// AERFiles are the per-function statistics files, correctable first.
var AERFiles = []string{AERCorrectable, AERNonFatal, AERFatal}

// AERRootPortFiles are a root port's totals of the messages it received.
var AERRootPortFiles = []string{"aer_rootport_total_err_cor", "aer_rootport_total_err_nonfatal", "aer_rootport_total_err_fatal"}

// AERCount is one error kind's count in an AER statistics file.
type AERCount struct {
	// Name is the kernel's current short name (RxErr, BadTLP, CmpltTO);
	// kernels before 5.x printed long names ("Receiver Error", "Bad
	// TLP"), which are mapped to the short ones so that a series keeps its
	// key across kernel versions. A kind neither spelling names keeps the
	// kernel's text with blanks as underscores ("dev_cor_errs_bit[9]").
	Name  string
	Value uint64
}

// AERStats is one parsed statistics file.
type AERStats struct {
	Counts []AERCount // in the file's order
	// Total is the TOTAL_ERR_* line: the number of error messages.
	Total    uint64
	HasTotal bool
}

// Count is the count of the kind name (0 when the file does not list it).
func (s AERStats) Count(name string) uint64 {
	for _, c := range s.Counts {
		if c.Name == name {
			return c.Value
		}
	}
	return 0
}

// aerLongNames maps the long names of the kernels from 4.19 (the ABI
// document's sample output) to the short ones aer.c prints now.
var aerLongNames = map[string]string{
	"Receiver Error": "RxErr", "Bad TLP": "BadTLP", "Bad DLLP": "BadDLLP", "RELAY_NUM Rollover": "Rollover",
	"Replay Timer Timeout": "Timeout", "Advisory Non-Fatal": "NonFatalErr", "Corrected Internal Error": "CorrIntErr",
	"Header Log Overflow": "HeaderOF",
	"Data Link Protocol":  "DLP", "Surprise Down Error": "SDES", "Poisoned TLP": "TLP", "Flow Control Protocol": "FCP",
	"Completion Timeout": "CmpltTO", "Completer Abort": "CmpltAbrt", "Unexpected Completion": "UnxCmplt",
	"Receiver Overflow": "RxOF", "Malformed TLP": "MalfTLP", "Unsupported Request": "UnsupReq", "ACS Violation": "ACSViol",
	"Uncorrectable Internal Error": "UncorrIntErr", "MC Blocked TLP": "BlockedTLP", "AtomicOp Egress Blocked": "AtomicOpBlocked",
	"TLP Prefix Blocked Error": "TLPBlockedErr",
}

// maxAERLines bounds a file: the kernel prints at most 33 lines.
const maxAERLines = 64

// ParseAERStats parses an aer_dev_* file. Every line must be a name and a
// decimal count; the TOTAL_ERR_ line may come anywhere but only once. An
// empty file, a line without a count, a count that is not a number, a
// name given twice or more lines than the kernel prints is an error.
func ParseAERStats(s string) (AERStats, error) {
	var st AERStats
	seen := map[string]bool{}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if strings.TrimSpace(s) == "" {
		return st, fmt.Errorf("empty AER statistics")
	}
	if len(lines) > maxAERLines {
		return st, fmt.Errorf("%d lines, more than the kernel prints", len(lines))
	}
	for i, line := range lines {
		name, v, err := parseAERLine(line)
		if err != nil {
			return st, fmt.Errorf("line %d: %w", i+1, err)
		}
		if strings.HasPrefix(name, "TOTAL_ERR_") {
			if st.HasTotal {
				return st, fmt.Errorf("line %d: a second %s", i+1, name)
			}
			st.Total, st.HasTotal = v, true
			continue
		}
		if seen[name] {
			return st, fmt.Errorf("line %d: %s given twice", i+1, name)
		}
		seen[name] = true
		st.Counts = append(st.Counts, AERCount{Name: name, Value: v})
	}
	if !st.HasTotal {
		return st, fmt.Errorf("no TOTAL_ERR_ line")
	}
	return st, nil
}

// parseAERLine splits "NAME COUNT": the count is the last field, the name
// everything before it (the old long names have blanks).
func parseAERLine(line string) (string, uint64, error) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return "", 0, fmt.Errorf("%q is not \"NAME COUNT\"", trimForMsg(line))
	}
	v, err := strconv.ParseUint(f[len(f)-1], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%q: the count is not a number", trimForMsg(line))
	}
	name := strings.Join(f[:len(f)-1], " ")
	if short, ok := aerLongNames[name]; ok {
		return short, v, nil
	}
	return strings.Join(f[:len(f)-1], "_"), v, nil
}

// AERDevice is what one PCIe function shows of its AER statistics.
type AERDevice struct {
	Address string
	Dir     string // the directory the files were read from
	// Stats are the parsed files by name (AERFiles); a file that is absent
	// or could not be read is missing here.
	Stats map[string]AERStats
	// RootPort are a root port's totals by file name (AERRootPortFiles).
	RootPort map[string]uint64
	// Problems are the files present that could not be read or parsed,
	// each naming its path.
	Problems []string
}

// Exposed reports whether any statistics file was there to read: absent
// ones mean no AER capability, or a kernel without CONFIG_PCIEAER (or one
// older than 4.19).
func (d AERDevice) Exposed() bool { return len(d.Stats) > 0 || len(d.Problems) > 0 }

// ReadAER reads the AER statistics of the function at dir (its
// /sys/devices directory, or /sys/bus/pci/devices/<addr>).
func (h *Host) ReadAER(addr, dir string) AERDevice {
	d := AERDevice{Address: addr, Dir: dir, Stats: map[string]AERStats{}}
	for _, name := range AERFiles {
		p := path.Join(dir, name)
		s, err := h.ReadAttr(p)
		if IsNotExist(err) {
			continue
		}
		if err != nil {
			d.Problems = append(d.Problems, err.Error())
			continue
		}
		st, err := ParseAERStats(s)
		if err != nil {
			d.Problems = append(d.Problems, fmt.Sprintf("parse %s: %v", h.Display(p), err))
			continue
		}
		d.Stats[name] = st
	}
	if len(d.Stats) == 0 {
		return d // no AER statistics: a root port's totals would be alone
	}
	for _, name := range AERRootPortFiles {
		p := path.Join(dir, name)
		s, err := h.ReadAttr(p)
		if IsNotExist(err) {
			continue
		}
		v, perr := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		switch {
		case err != nil:
			d.Problems = append(d.Problems, err.Error())
		case perr != nil:
			d.Problems = append(d.Problems, fmt.Sprintf("parse %s: %q is not a count", h.Display(p), trimForMsg(s)))
		default:
			if d.RootPort == nil {
				d.RootPort = map[string]uint64{}
			}
			d.RootPort[name] = v
		}
	}
	return d
}
