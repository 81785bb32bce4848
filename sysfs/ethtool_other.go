//go:build !linux

package sysfs

// Ethtool has no netlink or SIOCETHTOOL to ask outside Linux.
func (netlinkSource) Ethtool([]string) (map[string]EthtoolAnswer, error) { return nil, errNoNetlink }
