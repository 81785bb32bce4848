package sysfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
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
// case ignored, in one pass over its bytes: a bitset of the byte pairs a
// literal may start with (every case of the literals' first two bytes)
// says where one may start, so most bytes cost one load and one bit test.
// It runs on every record of the ring, so it allocates nothing and calls
// no search per literal. A string with a byte beyond ASCII says yes: case
// folding has non-ASCII forms of ASCII letters (the Kelvin sign folds to
// k) that a byte test does not see.
type literalSet struct {
	starts  [1 << 16 / 64]uint64 // bit c1<<8|c2: a literal may start with c1 c2
	byFirst [128][]string        // the literals by their first byte
}

func newLiteralSet(lits []string) *literalSet {
	ls := &literalSet{}
	set := func(c1, c2 byte) { ls.starts[int(c1)<<8>>6|int(c2)>>6] |= 1 << (c2 & 63) }
	for _, l := range lits {
		ls.byFirst[l[0]] = append(ls.byFirst[l[0]], l)
		for _, c1 := range caseForms(l[0]) {
			for _, c2 := range caseForms(l[1]) {
				set(c1, c2)
			}
		}
	}
	// A pair beginning beyond ASCII is a candidate too: holdsLiteral says
	// yes there. Such a first byte's pairs are four whole words.
	for w := 0x80 << 2; w < len(ls.starts); w++ {
		ls.starts[w] = ^uint64(0)
	}
	return ls
}

// caseForms is a lower-case byte and its upper case, if it has one.
func caseForms(c byte) []byte {
	if 'a' <= c && c <= 'z' {
		return []byte{c, c - 'a' + 'A'}
	}
	return []byte{c}
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// in says whether s holds one of the literals.
func (ls *literalSet) in(s string) bool { return holdsLiteral(ls, s) }

// holdsLiteral is literalSet.in for a string or the raw bytes of a record
// not yet parsed (no copy to look).
func holdsLiteral[T ~string | ~[]byte](ls *literalSet, s T) bool {
	if len(s) > 0 && s[len(s)-1] >= 0x80 {
		return true // the one byte no pair begins with
	}
	for i := 0; i+1 < len(s); i++ {
		c1, c2 := s[i], s[i+1]
		if ls.starts[int(c1)<<8>>6|int(c2)>>6]&(1<<(c2&63)) == 0 {
			continue
		}
		if c1 >= 0x80 {
			return true
		}
		for _, l := range ls.byFirst[lowerASCII(c1)] {
			if hasPrefixFoldASCII(s[i:], l) {
				return true
			}
		}
	}
	return false
}

// hasPrefixFoldASCII says whether s begins with the lower-case literal l,
// ASCII case ignored.
func hasPrefixFoldASCII[T ~string | ~[]byte](s T, l string) bool {
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

// IsKeptKernelMessage is the rule of what is kept of the kernel log, by a
// snapshot (KeepRDMA) and by a reading since a mark (KernelLogSince): the
// RDMA stack's messages and the link-health ones.
func IsKeptKernelMessage(text string) bool {
	return IsRDMAKernelMessage(text) || IsLinkHealthMessage(text)
}

// mayBeKept is IsKeptKernelMessage's literal test alone, on a record's raw
// text: false says the record cannot be kept, so it is never parsed. Most
// records of a ring are not (a run without a mark reads them all).
func mayBeKept(text []byte) bool { return holdsLiteral(keptStemSet(), text) }

// keptStemSet is both sets' literals in one: one pass over a record.
var keptStemSet = sync.OnceValue(func() *literalSet {
	return newLiteralSet(append(slices.Clip(rdmaKernelStems), linkHealthStems...))
})

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
		if !IsKeptKernelMessage(r.Text) {
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
	h, text, dict, ok := splitKmsg(rec)
	if !ok {
		return KernelRecord{}, false
	}
	return h.record(text, dict), true
}

// kmsgHeader is what a /dev/kmsg record says before its text.
type kmsgHeader struct {
	pri    int
	seq    uint64
	hasSeq bool
	usec   int64
}

// splitKmsg reads a record's header and splits off its text (to the first
// newline) and its dictionary, allocating nothing: a reading looks at
// every record of the ring and parses only those it may keep.
func splitKmsg(rec []byte) (h kmsgHeader, text, dict []byte, ok bool) {
	head, body, ok := bytes.Cut(rec, []byte{';'})
	if !ok {
		return h, nil, nil, false
	}
	text, dict, _ = bytes.Cut(body, []byte{'\n'})
	priField, rest, ok1 := bytes.Cut(head, []byte{','})
	seqField, rest, ok2 := bytes.Cut(rest, []byte{','})
	usecField, _, _ := bytes.Cut(rest, []byte{','})
	if !ok1 || !ok2 {
		return h, nil, nil, false
	}
	// string(b) for a call whose argument does not escape is no allocation.
	pri, err1 := strconv.Atoi(string(priField))
	usec, err2 := strconv.ParseInt(string(usecField), 10, 64)
	if err1 != nil || err2 != nil || pri < 0 || usec < 0 || usec > int64(time.Duration(1<<62)/time.Microsecond) {
		return h, nil, nil, false
	}
	h = kmsgHeader{pri: pri, usec: usec}
	if seq, err := strconv.ParseUint(string(seqField), 10, 64); err == nil {
		h.seq, h.hasSeq = seq, true
	}
	return h, text, dict, true
}

// record builds the record, the dictionary's SUBSYSTEM and DEVICE kept.
func (h kmsgHeader) record(text, dict []byte) KernelRecord {
	r := KernelRecord{Level: h.pri & 7, Facility: h.pri >> 3, Time: time.Duration(h.usec) * time.Microsecond, Text: string(text),
		Seq: h.seq, HasSeq: h.hasSeq}
	for len(dict) > 0 {
		var line []byte
		line, dict, _ = bytes.Cut(dict, []byte{'\n'})
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
	return r
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
	// Records are the records kept (IsKeptKernelMessage: the RDMA stack's
	// and the link-health messages, what a snapshot keeps), oldest first.
	// The others are read, counted in the sequence numbers, and dropped
	// unparsed.
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

// seqSpan is what a reading learned of the sequence numbers of every
// record it read, kept or not: where the mark lies among them.
type seqSpan struct {
	from           uint64 // the mark: the first sequence number asked for
	seen           bool
	oldest, newest uint64
	// firstFrom is the first sequence number at or after from, when
	// atFrom.
	firstFrom uint64
	atFrom    bool
}

func (s *seqSpan) add(seq uint64) {
	if !s.seen || seq < s.oldest {
		s.oldest = seq
	}
	if !s.seen || seq > s.newest {
		s.newest = seq
	}
	s.seen = true
	if seq >= s.from && (!s.atFrom || seq < s.firstFrom) {
		s.firstFrom, s.atFrom = seq, true
	}
}

// since keeps the records from the mark on, oldest first, and says what
// lies between the mark and them. A ring whose newest record is older
// than the mark restarted: the reading begins at its oldest record.
func (s seqSpan) since(kept []KernelRecord) *KmsgReading {
	rd := &KmsgReading{Sequenced: true, From: s.from, Next: s.from}
	from, first, any := s.from, s.firstFrom, s.atFrom
	if s.seen && s.newest+1 < s.from {
		from, first, any = 0, s.oldest, true
		rd.Restarted, rd.From, rd.Next = true, 0, 0
	}
	if any {
		if first > from {
			rd.Lost = first - from
		}
		rd.Next = s.newest + 1
	}
	for _, r := range kept {
		if r.HasSeq && r.Seq >= from {
			rd.Records = append(rd.Records, r)
		}
	}
	return rd
}

// keptOnly is the records IsKeptKernelMessage keeps.
func keptOnly(recs []KernelRecord) []KernelRecord {
	var out []KernelRecord
	for _, r := range recs {
		if IsKeptKernelMessage(r.Text) {
			out = append(out, r)
		}
	}
	return out
}

// KernelLogSince reads the kernel log's RDMA and link-health records
// (IsKeptKernelMessage) from the ring's sequence number from (0: since boot). Live, the ring itself (/dev/kmsg without blocking,
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
	return &KmsgReading{Records: keptOnly(ParseSyslogBuffer(data)), Source: "the snapshot's " + KernelLogFile}, nil
}
