package checks

import "github.com/rdmadoctor/rdmadoctor/sysfs"

// netdevTable is the host's network interfaces as one run sees them. Live,
// each read is a netlink dump: port.state, roce.config, the inventory and
// the expectations writer all look at the same interfaces, so the run
// dumps them once.
type netdevTable struct {
	list   []sysfs.Netdev
	byName map[string]sysfs.Netdev
	err    error // why they could not be listed
}

// Netdevs returns the run's netdev table, read on first use.
func (e *Env) Netdevs() *netdevTable {
	e.netdevOnce.Do(func() {
		t := &netdevTable{byName: map[string]sysfs.Netdev{}}
		t.list, t.err = e.Host.Netdevs()
		for _, nd := range t.list {
			t.byName[nd.Name] = nd
		}
		e.netdevs = t
	})
	return e.netdevs
}
