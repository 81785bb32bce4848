//go:build linux

package sysfs

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// statDevNode stats p (following a symlink, as open would) and, for a
// character device, opens it read-write and closes it again: that is what
// libibverbs does first, so it is the honest test of "this user can use it".
// O_NONBLOCK keeps a node of some other driver from blocking the open.
func statDevNode(p string) (DevNode, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return DevNode{}, &PathError{Op: "stat", Path: p, Err: unwrapPathError(err)}
	}
	n := DevNode{Path: p, Type: fileType(fi.Mode()), Mode: fmt.Sprintf("%04o", fi.Mode().Perm()|stickyBits(fi.Mode()))}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		n.UID, n.GID = int(st.Uid), int(st.Gid)
		if n.Type == DevChar || n.Type == "block" {
			n.Major, n.Minor = unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev))
		}
	}
	if n.Type != DevChar {
		return n, nil
	}
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		var errno unix.Errno
		if errors.As(err, &errno) {
			n.Open = unix.ErrnoName(errno)
		}
		if n.Open == "" {
			n.Open = err.Error()
		}
		return n, nil
	}
	unix.Close(fd)
	n.Open = DevOpenOK
	return n, nil
}

func stickyBits(m os.FileMode) os.FileMode {
	var b os.FileMode
	if m&os.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

func currentUser() string {
	return fmt.Sprintf("uid=%d gid=%d", os.Geteuid(), os.Getegid())
}
