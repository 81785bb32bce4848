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

func readKmsg(path string) ([]KernelRecord, error) {
	var out []KernelRecord
	_, err := scanKmsg(path, func(r KernelRecord) { out = append(out, r) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanKmsg reads every record of the ring at path, oldest first, without
// blocking and without consuming it, and hands each to keep. It returns how
// many times the ring overwrote the record it was about to read (EPIPE:
// the read position moves on to the oldest record left).
func scanKmsg(path string, keep func(KernelRecord)) (overrun int, err error) {
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
		if r, ok := ParseKmsgRecord(buf[:n]); ok {
			keep(r)
		}
	}
	return overrun, nil
}

// readLiveKernelLogSince reads the ring from sequence number from:
// /dev/kmsg (sequenced), else syslog(2) (the whole buffer, unsequenced).
func readLiveKernelLogSince(from uint64) (*KmsgReading, error) {
	const kmsg = "/dev/kmsg"
	var all []KernelRecord
	overrun, kerr := scanKmsg(kmsg, func(r KernelRecord) { all = append(all, r) })
	if kerr == nil {
		rd := sinceMark(all, from)
		rd.Source, rd.Overrun = kmsg, overrun
		return rd, nil
	}
	recs, serr := readSyslogAll()
	if serr == nil {
		return &KmsgReading{Records: recs, Source: "syslog(2) (/dev/kmsg: " + kerr.Error() + ")"}, nil
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
