package sysfs

import "errors"

// errLiveNotBuilt is returned by the live source for facts whose netlink
// reader is not part of this build yet.
var errLiveNotBuilt = errors.New("live netlink reading is not available in this build")

type netlinkSource struct{}

func newLiveSource() LiveSource { return netlinkSource{} }

func (netlinkSource) Netdevs() ([]Netdev, error)             { return nil, errLiveNotBuilt }
func (netlinkSource) DCB(string) (DCB, error)                { return DCB{}, errLiveNotBuilt }
func (netlinkSource) RDMASystem() (RDMASystem, error)        { return RDMASystem{}, errLiveNotBuilt }
func (netlinkSource) RDMAResources() ([]RDMAResource, error) { return nil, errLiveNotBuilt }
