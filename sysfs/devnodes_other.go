//go:build !linux

package sysfs

import (
	"errors"
	"fmt"
	"os"
)

// statDevNode exists on Linux only: RDMA device nodes are a Linux interface.
func statDevNode(p string) (DevNode, error) {
	return DevNode{}, &PathError{Op: "stat", Path: p, Err: errors.New("device nodes are read on Linux only")}
}

func currentUser() string { return fmt.Sprintf("uid=%d gid=%d", os.Geteuid(), os.Getegid()) }
