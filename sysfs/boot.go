package sysfs

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Where the kernel tells which boot this is and how long it has run.
const (
	// BootIDPath is a random UUID the kernel draws at each boot: a
	// different one means the machine rebooted and every counter started
	// again from zero.
	BootIDPath = "/proc/sys/kernel/random/boot_id"
	// UptimePath holds the seconds since boot, then the idle seconds.
	UptimePath = "/proc/uptime"
)

// BootID returns the host's boot_id ("a0b1c2d3-..."). A fixture carries its
// own, so a test can play a reboot by writing another one.
func (h *Host) BootID() (string, error) {
	s, err := h.ReadAttr(BootIDPath)
	if err != nil {
		return "", err
	}
	id, err := ParseBootID(s)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", h.Display(BootIDPath), err)
	}
	return id, nil
}

// ParseBootID accepts what the kernel writes: a UUID in its 36-character
// text form. Anything else (empty, binary, a planted essay) is refused: the
// value is kept in the state and printed in reports.
func ParseBootID(s string) (string, error) {
	s = strings.TrimSpace(s)
	if len(s) != 36 {
		return "", fmt.Errorf("boot_id %q is not a UUID", trimForMsg(s))
	}
	for i, r := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if r != '-' {
				return "", fmt.Errorf("boot_id %q is not a UUID", trimForMsg(s))
			}
		case r >= '0' && r <= '9', r >= 'a' && r <= 'f', r >= 'A' && r <= 'F':
		default:
			return "", fmt.Errorf("boot_id %q is not a UUID", trimForMsg(s))
		}
	}
	return strings.ToLower(s), nil
}

// Uptime returns how long the host has run since boot (/proc/uptime's first
// field).
func (h *Host) Uptime() (time.Duration, error) {
	s, err := h.ReadAttr(UptimePath)
	if err != nil {
		return 0, err
	}
	d, err := ParseUptime(s)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", h.Display(UptimePath), err)
	}
	return d, nil
}

// maxUptime bounds a believable uptime: a century. A larger value is a
// corrupt file, and would overflow a Duration.
const maxUptime = 100 * 365 * 24 * time.Hour

// ParseUptime reads "12345.67 54321.00": seconds since boot, then idle.
func ParseUptime(s string) (time.Duration, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, fmt.Errorf("uptime is empty")
	}
	secs, err := strconv.ParseFloat(f[0], 64)
	if err != nil || math.IsNaN(secs) || secs < 0 || secs > maxUptime.Seconds() {
		return 0, fmt.Errorf("uptime %q is not a number of seconds since boot", trimForMsg(f[0]))
	}
	return time.Duration(secs * float64(time.Second)), nil
}
