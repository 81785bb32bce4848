//go:build linux

package sysfs

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netlinkTimeout bounds every netlink exchange: a kernel answer never takes
// this long, and a doctor must not hang waiting for one.
const netlinkTimeout = 5 * time.Second

// netlinkSource answers the non-file facts of a live host through netlink:
// links and addresses (rtnetlink), the DCB IEEE state (RTM_GETDCB), the RDMA
// netns mode and resource counts (NETLINK_RDMA). It reads the network
// namespace ns, or the caller's own when ns is not open.
type netlinkSource struct {
	ns netns.NsHandle
}

func newLiveSource() LiveSource { return netlinkSource{ns: netns.None()} }

// handle opens a netlink handle for one family in the source's namespace.
func (s netlinkSource) handle(family int) (*netlink.Handle, error) {
	var (
		h   *netlink.Handle
		err error
	)
	if s.ns.IsOpen() {
		h, err = netlink.NewHandleAt(s.ns, family)
	} else {
		h, err = netlink.NewHandle(family)
	}
	if err != nil {
		return nil, err
	}
	if err := h.SetSocketTimeout(netlinkTimeout); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// Netdevs lists every interface with its state, MTU and addresses.
func (s netlinkSource) Netdevs() ([]Netdev, error) {
	h, err := s.handle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink (route): %w", err)
	}
	defer h.Close()
	links, err := retryDump(h.LinkList)
	if err != nil {
		return nil, fmt.Errorf("netlink RTM_GETLINK: %w", err)
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return h.AddrList(nil, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, fmt.Errorf("netlink RTM_GETADDR: %w", err)
	}
	byIndex := map[int][]string{}
	for _, a := range addrs {
		if a.IPNet != nil {
			byIndex[a.LinkIndex] = append(byIndex[a.LinkIndex], a.IPNet.String())
		}
	}
	out := make([]Netdev, 0, len(links))
	for _, l := range links {
		a := l.Attrs()
		nd := Netdev{
			Name: a.Name, Index: a.Index, OperState: a.OperState.String(),
			AdminUp: a.Flags&net.FlagUp != 0, Carrier: a.RawFlags&unix.IFF_LOWER_UP != 0,
			MTU: a.MTU, Addresses: byIndex[a.Index],
		}
		if len(a.HardwareAddr) > 0 {
			nd.MAC = a.HardwareAddr.String()
		}
		out = append(out, nd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, nil
}

// retryDump repeats a netlink dump once when the kernel says the dump was
// interrupted by a concurrent change, so the answer is consistent.
func retryDump[T any](dump func() ([]T, error)) ([]T, error) {
	v, err := dump()
	if errors.Is(err, netlink.ErrDumpInterrupted) {
		v, err = dump()
	}
	return v, err
}

// DCB asks the kernel for one interface's IEEE DCB state with RTM_GETDCB /
// DCB_CMD_IEEE_GET. The netlink library has no DCB support, so the request
// is built and the answer decoded here; the library carries the bytes.
// A driver without DCB operations (and a kernel without DCB) answers
// EOPNOTSUPP, which is a state (DCB.Err), not an error.
func (s netlinkSource) DCB(ifname string) (DCB, error) {
	sock, err := nl.GetNetlinkSocketAt(s.ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return DCB{}, fmt.Errorf("netlink (route): %w", err)
	}
	defer sock.Close()
	tv := unix.NsecToTimeval(netlinkTimeout.Nanoseconds())
	if err := sock.SetReceiveTimeout(&tv); err != nil {
		return DCB{}, err
	}
	if err := sock.SetSendTimeout(&tv); err != nil {
		return DCB{}, err
	}
	req := nl.NewNetlinkRequest(rtmGetDCB, 0)
	req.AddRawData(encodeDCBRequest(ifname))
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: {Socket: sock}}
	msgs, err := req.Execute(unix.NETLINK_ROUTE, rtmGetDCB)
	switch {
	case errors.Is(err, unix.EOPNOTSUPP):
		return DCB{Err: ErrNoDCB}, nil
	case errors.Is(err, unix.ENODEV):
		return DCB{}, fmt.Errorf("DCB of %s: no such interface", ifname)
	case err != nil:
		return DCB{}, fmt.Errorf("netlink RTM_GETDCB %s: %w", ifname, err)
	case len(msgs) == 0:
		return DCB{}, fmt.Errorf("netlink RTM_GETDCB %s: no answer", ifname)
	}
	d, err := ParseDCBReply(msgs[0])
	if err != nil {
		return DCB{}, fmt.Errorf("RTM_GETDCB %s: %w", ifname, err)
	}
	return d, nil
}

// rdmaHandle opens NETLINK_RDMA. Without ib_core the kernel has no such
// netlink family and socket(2) fails with EPROTONOSUPPORT: say so.
func (s netlinkSource) rdmaHandle() (*netlink.Handle, error) {
	h, err := s.handle(unix.NETLINK_RDMA)
	if errors.Is(err, unix.EPROTONOSUPPORT) {
		return nil, fmt.Errorf("netlink (rdma): %w: the RDMA core (ib_core) is not loaded", err)
	}
	if err != nil {
		return nil, fmt.Errorf("netlink (rdma): %w", err)
	}
	return h, nil
}

// RDMASystem is `rdma system`: whether RDMA devices are shared by all
// network namespaces or each belongs to one.
func (s netlinkSource) RDMASystem() (RDMASystem, error) {
	h, err := s.rdmaHandle()
	if err != nil {
		return RDMASystem{}, err
	}
	defer h.Close()
	mode, err := h.RdmaSystemGetNetnsMode()
	if err != nil {
		return RDMASystem{}, fmt.Errorf("netlink RDMA_NLDEV_CMD_SYS_GET: %w", err)
	}
	return RDMASystem{NetnsMode: mode}, nil
}

// RDMAResources is `rdma resource`: the objects each device holds.
func (s netlinkSource) RDMAResources() ([]RDMAResource, error) {
	h, err := s.rdmaHandle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	res, err := h.RdmaResourceList()
	if err != nil {
		// A kernel with no RDMA device answers the dump with nothing.
		if err.Error() == "No valid response from kernel" {
			return []RDMAResource{}, nil
		}
		return nil, fmt.Errorf("netlink RDMA_NLDEV_CMD_RES_GET: %w", err)
	}
	out := make([]RDMAResource, 0, len(res))
	for _, r := range res {
		counts := make(map[string]int, len(r.RdmaResourceSummaryEntries))
		for k, v := range r.RdmaResourceSummaryEntries {
			counts[k] = int(v)
		}
		out = append(out, RDMAResource{Device: r.Name, Counts: counts})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Device < out[j].Device })
	return out, nil
}
