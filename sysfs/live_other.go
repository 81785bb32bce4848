//go:build !linux

package sysfs

import "errors"

// errNoNetlink is the answer of the live source where there is no netlink.
var errNoNetlink = errors.New("netlink is only available on Linux")

type netlinkSource struct{}

func newLiveSource() LiveSource { return netlinkSource{} }

func (netlinkSource) Netdevs() ([]Netdev, error)             { return nil, errNoNetlink }
func (netlinkSource) DCB(string) (DCB, error)                { return DCB{}, errNoNetlink }
func (netlinkSource) RDMASystem() (RDMASystem, error)        { return RDMASystem{}, errNoNetlink }
func (netlinkSource) RDMAResources() ([]RDMAResource, error) { return nil, errNoNetlink }
