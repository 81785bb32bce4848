package sysfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// KernelLogFile is the RDMA part of the kernel log in a snapshot root: what
// `dmesg` showed of the RDMA drivers and core when the snapshot was taken,
// so that a remedy that says "read dmesg" can be followed on a replay.
const KernelLogFile = "kernel.log"

// Bounds of the kept kernel log: the most recent lines within them.
const (
	KernelLogMaxLines = 2000
	KernelLogMaxBytes = 256 << 10
	KernelLogMaxAge   = 7 * 24 * time.Hour
)

// kernelLogUnavailable is the facts key that says why a snapshot has no
// kernel log.
const kernelLogUnavailable = "kernel_log"

// KernelRecord is one kernel log message.
type KernelRecord struct {
	Level int           // syslog level 0 (emerg) … 7 (debug); -1 unknown
	Time  time.Duration // since boot; -1 when the line had no timestamp
	Text  string
	// Seq is the record's sequence number in the kernel's ring (/dev/kmsg
	// only; HasSeq says it is known).
	Seq    uint64
	HasSeq bool
	// Facility is the syslog facility: 0 the kernel, 1 (user) a line
	// written to /dev/kmsg from user space; -1 unknown.
	Facility int
	// Subsystem and Device are the record's dictionary (SUBSYSTEM=pci,
	// DEVICE=+pci:0000:3b:00.0 or n<ifindex>): the device a driver's
	// dev_printk named, "" when the record has none.
	Subsystem string
	Device    string
}

// String writes the record as dmesg does: "[  123.456789] text".
func (r KernelRecord) String() string {
	if r.Time < 0 {
		return r.Text
	}
	us := r.Time.Microseconds()
	return fmt.Sprintf("[%5d.%06d] %s", us/1e6, us%1e6, r.Text)
}

// rdmaKernelLog matches the messages of the RDMA drivers and core: a driver
// or module name as a word ("mlx5_core 0000:3b:00.0: …", "infiniband
// mlx5_0: …", "rdma_rxe: …", "rxe0: …").
var rdmaKernelLog = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(^|[^a-z0-9_])(` + strings.Join([]string{
		`mlx[45]_(core|ib)`, `ib_(core|uverbs|umad|ipoib|cm|mad|srp|iser)`, `rdma_(rxe|cm|ucm)`, `rdma\w*`, `rxe\d*`,
		`irdma\d*`, `bnxt_re\d*`, `efa(_\d+)?`, `qedr\d*`, `hns_roce\w*`, `hns_\d+`, `i40iw\w*`, `iw_cxgb4`,
		`cxgb4_\d+`, `erdma\w*`, `mana_ib`, `mana_\d+`, `siw\d*`, `hfi1(_\d+)?`, `infiniband`, `uverbs\d*`, `ipoib`,
		`roce`, `mlx5_bond_\d+`,
	}, "|") + `)($|[^a-z0-9_])`)
})

// rdmaKernelStems are literals, one in every alternative of rdmaKernelLog
// (lower case): a message holding none cannot match, and most of a ring
// holds none. The test is far cheaper than the pattern, which a first run
// of kernel.log applies to every record since boot.
var rdmaKernelStems = []string{"mlx", "ib_", "rdma", "rxe", "bnxt_re", "efa", "qedr", "hns_", "i40iw", "cxgb4",
	"mana_", "siw", "hfi1", "infiniband", "uverbs", "ipoib", "roce"}

var rdmaStemSet = sync.OnceValue(func() *literalSet { return newLiteralSet(rdmaKernelStems) })

// IsRDMAKernelMessage says whether a kernel log message is the RDMA stack's.
func IsRDMAKernelMessage(text string) bool {
	return rdmaStemSet().in(text) && rdmaKernelLog().MatchString(text)
}

// literalSet finds any of a few lower-case literals in a string, ASCII
// case ignored, in one pass over its bytes: a table of the literals' first
// two bytes says where one may start. It runs on every record of the ring,
// so it allocates nothing and calls no search per literal. A string with a
// byte beyond ASCII says yes: case folding has non-ASCII forms of ASCII
// letters (the Kelvin sign folds to k) that a byte test does not see.
type literalSet struct {
	start [256][256]bool
	lits  []string
}

func newLiteralSet(lits []string) *literalSet {
	ls := &literalSet{lits: lits}
	for _, l := range lits {
		ls.start[l[0]][l[1]] = true
	}
	return ls
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// in says whether s holds one of the literals.
func (ls *literalSet) in(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return true
		}
		if i+1 >= len(s) || !ls.start[lowerASCII(s[i])][lowerASCII(s[i+1])] {
			continue
		}
		for _, l := range ls.lits {
			if hasPrefixFoldASCII(s[i:], l) {
				return true
			}
		}
	}
	return false
}

// hasPrefixFoldASCII says whether s begins with the lower-case literal l,
// ASCII case ignored.
func hasPrefixFoldASCII(s, l string) bool {
	if len(s) < len(l) {
		return false
	}
	for j := 0; j < len(l); j++ {
		if lowerASCII(s[j]) != l[j] {
			return false
		}
	}
	return true
}

// linkHealthLog matches the messages of the PCIe core and the network core
// that speak of an RDMA NIC's link without naming its driver: AER reports
// (drivers/pci/pcie/aer.c, often logged by the switch or root port above the
// NIC), the PCI core's bandwidth line (drivers/pci/pci.c), the netdev
// watchdog (net/sched/sch_generic.c) and carrier messages. A snapshot keeps
// them beside the RDMA lines, so the kernel.log check judges a replay as it
// judged the host.
var linkHealthLog = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`AER: |PCIe Bus Error|available PCIe bandwidth, limited by|NETDEV WATCHDOG|TX timeout|tx_timeout|(?i:link is down|link is not ready|link down)`)
})

// linkHealthStems are literals of linkHealthLog's alternatives, lower case.
var linkHealthStems = []string{"aer: ", "pcie bus error", "available pcie bandwidth", "netdev watchdog", "tx timeout", "tx_timeout", "link"}

var linkStemSet = sync.OnceValue(func() *literalSet { return newLiteralSet(linkHealthStems) })

// IsLinkHealthMessage says whether a kernel log message is one of those the
// kernel.log check judges that IsRDMAKernelMessage does not catch.
func IsLinkHealthMessage(text string) bool {
	return linkStemSet().in(text) && linkHealthLog().MatchString(text)
}

// KernelLog is the RDMA part of the kernel log: live, read from the
// kernel's ring buffer (read-only; /dev/kmsg, else syslog(2)); in a
// snapshot root, its kernel.log. The lines are dmesg's format, oldest
// first, bounded by KernelLogMaxLines, KernelLogMaxBytes and
// KernelLogMaxAge.
func (h *Host) KernelLog() ([]string, error) {
	if h.Live() {
		recs, err := readLiveKernelLog()
		if err != nil {
			return nil, err
		}
		return KeepRDMA(recs, monotonicNow()), nil
	}
	data, err := h.ReadFile(KernelLogFile)
	if errors.Is(err, fs.ErrNotExist) {
		if h.facts != nil {
			if r, ok := h.facts.Unavailable[kernelLogUnavailable]; ok {
				return nil, fmt.Errorf("the snapshot has no kernel log: %s", r)
			}
		}
		return nil, fmt.Errorf("no %s in %s", KernelLogFile, h.Display("/"))
	}
	if err != nil {
		return nil, err
	}
	text := strings.TrimRight(string(data), "\n")
	if text == "" {
		return []string{}, nil
	}
	return strings.Split(text, "\n"), nil
}

// KeepRDMA keeps the RDMA stack's records (and the link-health messages
// of the PCIe and network cores, IsLinkHealthMessage) no older than KernelLogMaxAge
// before now (time since boot; 0: no age bound), the newest within the
// line and byte bounds, and formats them as dmesg does, oldest first.
func KeepRDMA(recs []KernelRecord, now time.Duration) []string {
	var kept []string
	size := 0
	for i := len(recs) - 1; i >= 0 && len(kept) < KernelLogMaxLines; i-- {
		r := recs[i]
		if !IsRDMAKernelMessage(r.Text) && !IsLinkHealthMessage(r.Text) {
			continue
		}
		if now > 0 && r.Time >= 0 && now-r.Time > KernelLogMaxAge {
			break // older records come before this one
		}
		line := r.String()
		if size+len(line)+1 > KernelLogMaxBytes {
			break
		}
		size += len(line) + 1
		kept = append(kept, line)
	}
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	return kept
}

// ParseKmsgRecord reads one record of /dev/kmsg as devkmsg_read
// (kernel/printk/printk.c) writes it and Documentation/ABI/testing/dev-kmsg
// describes it: "PRI,SEQ,USEC,FLAGS[,…];TEXT\n" followed by continuation
// lines " KEY=VALUE\n" (the dictionary: SUBSYSTEM= and DEVICE= are kept).
// PRI holds facility*8+level. Non-printable bytes of TEXT arrive escaped as
// \xNN by the kernel and are kept so. A record that is not of this form is
// refused (false), never a panic.
func ParseKmsgRecord(rec []byte) (KernelRecord, bool) {
	head, body, ok := bytes.Cut(rec, []byte{';'})
	if !ok {
		return KernelRecord{}, false
	}
	text, dict, _ := bytes.Cut(body, []byte{'\n'})
	f := strings.Split(string(head), ",")
	if len(f) < 3 {
		return KernelRecord{}, false
	}
	pri, err1 := strconv.Atoi(f[0])
	usec, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || pri < 0 || usec < 0 || usec > int64(time.Duration(1<<62)/time.Microsecond) {
		return KernelRecord{}, false
	}
	r := KernelRecord{Level: pri & 7, Facility: pri >> 3, Time: time.Duration(usec) * time.Microsecond, Text: string(text)}
	if seq, err := strconv.ParseUint(f[1], 10, 64); err == nil {
		r.Seq, r.HasSeq = seq, true
	}
	for _, line := range bytes.Split(dict, []byte{'\n'}) {
		if len(line) < 2 || line[0] != ' ' {
			continue // the dictionary's lines each begin with a space
		}
		k, v, ok := bytes.Cut(line[1:], []byte{'='})
		if !ok {
			continue
		}
		switch string(k) {
		case "SUBSYSTEM":
			r.Subsystem = string(v)
		case "DEVICE":
			r.Device = string(v)
		}
	}
	return r, true
}

// ParseSyslogBuffer reads what syslog(2) SYSLOG_ACTION_READ_ALL returns:
// lines "<PRI>[  SEC.USEC] TEXT", the prefix and the timestamp each optional
// (printk.time=0 drops the timestamp).
func ParseSyslogBuffer(buf []byte) []KernelRecord {
	var out []KernelRecord
	for _, line := range bytes.Split(buf, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		r := KernelRecord{Level: -1, Time: -1, Facility: -1}
		if len(line) > 2 && line[0] == '<' {
			if end := bytes.IndexByte(line, '>'); end > 1 {
				if pri, err := strconv.Atoi(string(line[1:end])); err == nil && pri >= 0 {
					r.Level, r.Facility, line = pri&7, pri>>3, line[end+1:]
				}
			}
		}
		if len(line) > 2 && line[0] == '[' {
			if end := bytes.IndexByte(line, ']'); end > 1 {
				if d, ok := parseSeconds(string(bytes.TrimSpace(line[1:end]))); ok {
					r.Time, line = d, bytes.TrimPrefix(line[end+1:], []byte{' '})
				}
			}
		}
		r.Text = string(line)
		out = append(out, r)
	}
	return out
}

// parseSeconds reads "123.456789" seconds.
func parseSeconds(s string) (time.Duration, bool) {
	sec, frac, _ := strings.Cut(s, ".")
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || n < 0 || n > 1<<32 || len(frac) > 9 {
		return 0, false
	}
	d := time.Duration(n) * time.Second
	if frac != "" {
		f, err := strconv.ParseInt(frac, 10, 64)
		if err != nil || f < 0 {
			return 0, false
		}
		for i := len(frac); i < 9; i++ {
			f *= 10
		}
		d += time.Duration(f)
	}
	return d, true
}

// KmsgReading is what one reading of the kernel log found since a mark.
type KmsgReading struct {
	// Records are the records read, oldest first.
	Records []KernelRecord
	// Sequenced says the records carry the ring's sequence numbers
	// (/dev/kmsg): Next and Lost mean something. A reading of syslog(2) or
	// of a snapshot's kernel.log has none: all of it is since boot, or
	// since the capture.
	Sequenced bool
	// Source says where the records came from ("/dev/kmsg", "the
	// snapshot's kernel.log").
	Source string
	// From is the first sequence number asked for; Next the one the next
	// reading starts from (the newest read + 1, or From when none was).
	From, Next uint64
	// Lost counts the records between From and the oldest record the ring
	// still held: written after the mark, overwritten before this reading.
	Lost uint64
	// Overrun counts the reads that found their record overwritten while
	// the ring was being read (EPIPE).
	Overrun int
	// Restarted says the ring's newest record was older than From (the
	// ring restarted: a new boot whose boot_id could not be read), so
	// the reading began at the oldest record.
	Restarted bool
}

// KernelLogError is a kernel log that could not be read; Denied says the
// kernel refused it (kernel.dmesg_restrict=1 without CAP_SYSLOG).
type KernelLogError struct {
	Err    error
	Denied bool
}

func (e *KernelLogError) Error() string { return e.Err.Error() }
func (e *KernelLogError) Unwrap() error { return e.Err }

// ErrNoKernelLog says a fixture or snapshot root holds no kernel log.
var ErrNoKernelLog = errors.New("no kernel log in the root")

// sinceMark keeps the records from sequence number from on, oldest first,
// and says what lies between the mark and them.
func sinceMark(all []KernelRecord, from uint64) *KmsgReading {
	rd := &KmsgReading{Sequenced: true, From: from, Next: from}
	var newest uint64
	for _, r := range all {
		if r.HasSeq && r.Seq >= newest {
			newest = r.Seq
		}
	}
	if len(all) > 0 && newest+1 < from {
		from, rd.Restarted, rd.From, rd.Next = 0, true, 0, 0
	}
	for _, r := range all {
		if !r.HasSeq || r.Seq < from {
			continue
		}
		if len(rd.Records) == 0 && r.Seq > from {
			rd.Lost = r.Seq - from
		}
		rd.Records = append(rd.Records, r)
		if r.Seq+1 > rd.Next {
			rd.Next = r.Seq + 1
		}
	}
	return rd
}

// KernelLogSince reads the kernel log from the ring's sequence number
// from (0: since boot). Live, the ring itself (/dev/kmsg without blocking,
// else syslog(2)); in a snapshot root, its kernel.log, whose lines carry no
// sequence numbers: all of them are since the capture. A root without a
// kernel log answers ErrNoKernelLog; a ring the kernel refuses, a
// *KernelLogError with Denied set.
func (h *Host) KernelLogSince(from uint64) (*KmsgReading, error) {
	if h.Live() {
		return readLiveKernelLogSince(from)
	}
	data, err := h.ReadFile(KernelLogFile)
	if errors.Is(err, fs.ErrNotExist) {
		why := "the root has no " + KernelLogFile + " (a fixture; a snapshot keeps one)"
		if h.facts != nil {
			if r, ok := h.facts.Unavailable[kernelLogUnavailable]; ok {
				why = "the snapshot has no kernel log: " + r
			}
		}
		return nil, fmt.Errorf("%s: %w", why, ErrNoKernelLog)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", h.Display(KernelLogFile), err)
	}
	return &KmsgReading{Records: ParseSyslogBuffer(data), Source: "the snapshot's " + KernelLogFile}, nil
}
