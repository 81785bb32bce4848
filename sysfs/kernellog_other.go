//go:build !linux

package sysfs

import (
	"errors"
	"time"
)

func readLiveKernelLog() ([]KernelRecord, error) {
	return nil, errors.New("the kernel log is read only on Linux")
}

func readLiveKernelLogSince(uint64) (*KmsgReading, error) {
	return nil, errors.New("the kernel log is read only on Linux")
}

func monotonicNow() time.Duration { return 0 }
