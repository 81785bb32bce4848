//go:build linux

package sysfs

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxKmsgRecords bounds one read of /dev/kmsg: a kernel that logs faster
// than it is read must not keep a capture reading forever.
const maxKmsgRecords = 1 << 20

// readLiveKernelLog reads the kernel's ring buffer without consuming it:
// /dev/kmsg opened non-blocking (each read is one record, EAGAIN at the
// end), else syslog(2) SYSLOG_ACTION_READ_ALL. Both need CAP_SYSLOG when
// kernel.dmesg_restrict is 1.
func readLiveKernelLog() ([]KernelRecord, error) {
	recs, kerr := readKmsg("/dev/kmsg")
	if kerr == nil {
		return recs, nil
	}
	recs, serr := readSyslogAll()
	if serr == nil {
		return recs, nil
	}
	return nil, fmt.Errorf("the kernel log could not be read: %v; syslog(2): %v%s", kerr, serr, restrictHint(kerr, serr))
}

func restrictHint(errs ...error) string {
	for _, err := range errs {
		if isDenied(err) {
			return " (kernel.dmesg_restrict=1 lets only CAP_SYSLOG read it: take the snapshot as root)"
		}
	}
	return ""
}

// readKmsg reads the records of the ring at path that the snapshot may
// keep (the literal test of IsKeptKernelMessage; KeepRDMA applies the rest).
func readKmsg(path string) ([]KernelRecord, error) {
	var out []KernelRecord
	_, err := scanKmsg(path, func(h kmsgHeader, text, dict []byte) {
		if mayBeKept(text) {
			out = append(out, h.record(text, dict))
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanKmsg reads every record of the ring at path, oldest first, without
// blocking and without consuming it, and hands each, split but not yet
// parsed, to look (the slices are valid only during the call). It returns
// how many times the ring overwrote the record it was about to read
// (EPIPE: the read position moves on to the oldest record left).
func scanKmsg(path string, look func(h kmsgHeader, text, dict []byte)) (overrun int, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fd := int(f.Fd())
	buf := make([]byte, 16<<10) // one record is at most about 8 KiB with its dictionary
	for range maxKmsgRecords {
		n, err := unix.Read(fd, buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return overrun, nil
		case errors.Is(err, unix.EPIPE):
			overrun++ // the record was overwritten while we read: go on with the next
			continue
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return overrun, fmt.Errorf("read %s: %w", path, err)
		case n == 0:
			return overrun, nil
		}
		if h, text, dict, ok := splitKmsg(buf[:n]); ok {
			look(h, text, dict)
		}
	}
	return overrun, nil
}

// readLiveKernelLogSince reads the ring's kept records from sequence
// number from: /dev/kmsg (sequenced), else syslog(2) (the whole buffer,
// unsequenced). Every record's sequence number counts for the mark; only
// a record whose text may be kept is parsed.
func readLiveKernelLogSince(from uint64) (*KmsgReading, error) {
	const kmsg = "/dev/kmsg"
	span := seqSpan{from: from}
	var kept []KernelRecord
	overrun, kerr := scanKmsg(kmsg, func(h kmsgHeader, text, dict []byte) {
		if !h.hasSeq {
			return
		}
		span.add(h.seq)
		if mayBeKept(text) {
			if r := h.record(text, dict); IsKeptKernelMessage(r.Text) {
				kept = append(kept, r)
			}
		}
	})
	if kerr == nil {
		rd := span.since(kept)
		rd.Source, rd.Overrun = kmsg, overrun
		return rd, nil
	}
	recs, serr := readSyslogAll()
	if serr == nil {
		return &KmsgReading{Records: keptOnly(recs), Source: "syslog(2) (/dev/kmsg: " + kerr.Error() + ")"}, nil
	}
	return nil, &KernelLogError{Err: fmt.Errorf("the kernel log could not be read: %v; syslog(2): %v%s", kerr, serr, restrictHint(kerr, serr)),
		Denied: isDenied(kerr) || isDenied(serr)}
}

func isDenied(err error) bool {
	return errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EPERM)
}

func readSyslogAll() ([]KernelRecord, error) {
	const actionSizeBuffer, actionReadAll = 10, 3
	size, err := unix.Klogctl(actionSizeBuffer, nil)
	if err != nil {
		return nil, err
	}
	if size <= 0 || size > 64<<20 {
		size = 1 << 20
	}
	buf := make([]byte, size)
	n, err := unix.Klogctl(actionReadAll, buf)
	if err != nil {
		return nil, err
	}
	return ParseSyslogBuffer(buf[:n]), nil
}

// monotonicNow is the time since boot on the clock the kernel log stamps
// its records with.
func monotonicNow() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
