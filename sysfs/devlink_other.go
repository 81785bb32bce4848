//go:build !linux

package sysfs

func readDevlinkHealth() (*DevlinkHealth, error) { return nil, errNoNetlink }
