//go:build linux

package sysfs

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// readDevlinkHealth dumps every health reporter (`devlink health show`).
// A kernel without the devlink family answers no reporters, with the reason.
func readDevlinkHealth() (*DevlinkHealth, error) {
	c, err := genetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("generic netlink: %w", err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(netlinkTimeout)); err != nil {
		return nil, fmt.Errorf("generic netlink: %w", err)
	}
	fam, err := c.GetFamily(devlinkFamily)
	if errors.Is(err, os.ErrNotExist) {
		return &DevlinkHealth{Reporters: []DevlinkReporter{}, Absent: "the kernel has no devlink generic netlink family"}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("generic netlink: family %q: %w", devlinkFamily, err)
	}
	req := genetlink.Message{Header: genetlink.Header{Command: devlinkCmdHealthReporterGet, Version: fam.Version}}
	msgs, err := c.Execute(req, fam.ID, netlink.Request|netlink.Dump)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
		// A devlink older than its health reporters (Linux 5.1).
		return &DevlinkHealth{Reporters: []DevlinkReporter{}, Absent: "the kernel's devlink has no health reporters (" + err.Error() + ")"}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("devlink: DEVLINK_CMD_HEALTH_REPORTER_GET: %w", err)
	}
	out := &DevlinkHealth{Reporters: []DevlinkReporter{}}
	for _, m := range msgs {
		r, err := ParseDevlinkHealthReporter(m.Data)
		if err != nil {
			return nil, err
		}
		out.Reporters = append(out.Reporters, r)
	}
	return out, nil
}
