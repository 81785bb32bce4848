package checks

import (
	"net"
	"slices"
	"sort"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// uppersHere are the interfaces of this network namespace that carry a
// port whose own netdev lives in another namespace: a pod's macvlan or
// ipvlan (Multus `net1`) on the host's RoCE netdev, in the RDMA netns
// mode "shared".
//
// The kernel adds GIDs for the addresses of every upper device of the
// port's netdev, in every namespace (roce_gid_mgmt.c: the netdev notifier
// filters with is_eth_port_of_netdev_filter, which accepts any upper
// device through rdma_is_upper_dev_rcu, and enum_all_gids_of_dev_cb walks
// for_each_net), and gid_attrs/ndevs prints the GID's ndev->name, the name
// the upper has in its own namespace. The link between the two is not in
// this namespace's sysfs (lower_/upper_ links are made only between
// devices of one namespace: __netdev_adjacent_dev_insert), so the GID
// table is what ties an interface here to the port. A name alone does not
// (another namespace may have its own net1): an interface counts only when
// the GID table holds one of its addresses under its name.
func uppersHere(h *sysfs.Host, p sysfs.RDMAPort, own string) []string {
	named := map[string]map[string]bool{} // ndev → the GIDs it names
	for _, g := range p.GIDs {
		if g.Netdev == "" || g.Netdev == own {
			continue
		}
		if ip := parseGID(g.GID); ip != nil {
			if named[g.Netdev] == nil {
				named[g.Netdev] = map[string]bool{}
			}
			named[g.Netdev][ip.String()] = true
		}
	}
	if len(named) == 0 {
		return nil
	}
	netdevs, err := h.Netdevs()
	if err != nil {
		return nil
	}
	var out []string
	for _, nd := range netdevs {
		gids := named[nd.Name]
		if gids == nil || slices.Contains(out, nd.Name) {
			continue
		}
		for _, a := range nd.Addresses {
			if ip, _, err := net.ParseCIDR(a); err == nil && gids[ip.To16().String()] {
				out = append(out, nd.Name)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// NetdevAway reports a port whose own netdev lives in another network
// namespace: the reader is in a pod or a container (or the netdev was
// moved into one). Uppers then lists what carries the port here.
func (p *PortModel) NetdevAway() bool { return p.Netdev != "" && !p.NetdevHere }

// vfUsedHere reports a VF (or sub-function) port whose netdev is in this
// network namespace while its PF's netdev is not: the VF was handed to
// this namespace to be used here (the SR-IOV CNI moves a VF's netdev into
// a pod and renames it net1; in exclusive mode the RDMA CNI moves its RDMA
// device too). On the hypervisor, where the PF's netdev is, a VF without
// an address or with its netdev down is one of a pool that pods and guests
// draw from; here it is the interface the pod runs on.
func vfUsedHere(s *Survey, pm *PortModel) bool {
	if !pm.IsVF() || !pm.NetdevHere || pm.Device.PhysFn == "" {
		return false
	}
	for _, n := range s.NICs {
		if n.Fn.Address == pm.Device.PhysFn {
			return len(n.Fn.Netdevs) == 0
		}
	}
	// The PF is not listed at all (a VM's guest sees its VF alone): the
	// VF is this host's own interface.
	return true
}
