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

// IsRDMAKernelMessage says whether a kernel log message is the RDMA stack's.
func IsRDMAKernelMessage(text string) bool { return rdmaKernelLog().MatchString(text) }

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

// KeepRDMA keeps the RDMA stack's records no older than KernelLogMaxAge
// before now (time since boot; 0: no age bound), the newest within the
// line and byte bounds, and formats them as dmesg does, oldest first.
func KeepRDMA(recs []KernelRecord, now time.Duration) []string {
	var kept []string
	size := 0
	for i := len(recs) - 1; i >= 0 && len(kept) < KernelLogMaxLines; i-- {
		r := recs[i]
		if !IsRDMAKernelMessage(r.Text) {
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

// ParseKmsgRecord reads one record of /dev/kmsg:
// "PRI,SEQ,USEC,FLAGS[,…];TEXT" followed by continuation lines of
// " KEY=VALUE" (dropped). PRI holds facility*8+level. Non-printable bytes of
// TEXT arrive escaped as \xNN by the kernel and are kept so.
func ParseKmsgRecord(rec []byte) (KernelRecord, bool) {
	head, text, ok := bytes.Cut(rec, []byte{';'})
	if !ok {
		return KernelRecord{}, false
	}
	if i := bytes.IndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	}
	f := strings.Split(string(head), ",")
	if len(f) < 3 {
		return KernelRecord{}, false
	}
	pri, err1 := strconv.Atoi(f[0])
	usec, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || pri < 0 || usec < 0 || usec > int64(time.Duration(1<<62)/time.Microsecond) {
		return KernelRecord{}, false
	}
	return KernelRecord{Level: pri & 7, Time: time.Duration(usec) * time.Microsecond, Text: string(text)}, true
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
		r := KernelRecord{Level: -1, Time: -1}
		if len(line) > 2 && line[0] == '<' {
			if end := bytes.IndexByte(line, '>'); end > 1 {
				if pri, err := strconv.Atoi(string(line[1:end])); err == nil && pri >= 0 {
					r.Level, line = pri&7, line[end+1:]
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
