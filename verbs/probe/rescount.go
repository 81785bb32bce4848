package probe

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// How probe.destroy_order counts the RDMA objects it leaves behind.
const (
	// CountsProcess counts only this child's objects: the per-object RDMA
	// netlink dumps (what `rdma resource show qp|cq|mr|pd` print), whose
	// user entries carry the owner's PID.
	CountsProcess = "process"
	// CountsDevice reads the device-wide summary (`rdma resource`), which
	// every other process and kernel user of the device (IPoIB, NFS or
	// NVMe over RDMA, other jobs) changes too.
	CountsDevice = "device"
)

// RDMA netlink (include/uapi/rdma/rdma_netlink.h) beyond what the netlink
// package names: the per-object dump commands and their attributes.
const (
	nldevCmdResQPGet  = 10
	nldevCmdResCQGet  = 12
	nldevCmdResMRGet  = 13
	nldevCmdResPDGet  = 14
	nldevCmdResCtxGet = 22

	nldevAttrResQP       = 19
	nldevAttrResQPEntry  = 20
	nldevAttrResPID      = 28
	nldevAttrResCQ       = 35
	nldevAttrResCQEntry  = 36
	nldevAttrResMR       = 40
	nldevAttrResMREntry  = 41
	nldevAttrResPD       = 46
	nldevAttrResPDEntry  = 47
	nldevAttrResCtx      = 86
	nldevAttrResCtxEntry = 87
	nlaTypeMask          = 0x3fff // without NLA_F_NESTED / NLA_F_NET_BYTEORDER
	rdmaNLClientShift    = nl.RDMA_NL_GET_CLIENT_SHIFT
	rdmaNLNldev          = nl.RDMA_NL_NLDEV
	nldevAttrDevIndex    = nl.RDMA_NLDEV_ATTR_DEV_INDEX
)

// objectKind is one per-object dump: the summary name of its objects, the
// command, the table attribute and its entries.
type objectKind struct {
	name         string
	cmd          int
	table, entry uint16
	optional     bool // absent from older kernels
}

var objectKinds = []objectKind{
	{"ctx", nldevCmdResCtxGet, nldevAttrResCtx, nldevAttrResCtxEntry, true},
	{"pd", nldevCmdResPDGet, nldevAttrResPD, nldevAttrResPDEntry, false},
	{"mr", nldevCmdResMRGet, nldevAttrResMR, nldevAttrResMREntry, false},
	{"cq", nldevCmdResCQGet, nldevAttrResCQ, nldevAttrResCQEntry, false},
	{"qp", nldevCmdResQPGet, nldevAttrResQP, nldevAttrResQPEntry, false},
}

// countedResources are the object kinds both methods count.
var countedResources = []string{"ctx", "pd", "mr", "cq", "qp"}

// ownResourceCounts counts the objects on dev that belong to this process
// (any of its threads: the kernel records the task that created each).
func ownResourceCounts(dev string) (map[string]uint64, error) {
	link, err := netlink.RdmaLinkByName(dev)
	if err != nil {
		return nil, fmt.Errorf("RDMA netlink device %s: %w", dev, err)
	}
	pids := ourTasks()
	out := map[string]uint64{}
	for _, k := range objectKinds {
		msgs, err := dumpObjects(link.Attrs.Index, k.cmd)
		if err != nil {
			if k.optional && (errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.EINVAL)) {
				continue // a kernel without this dump
			}
			return nil, fmt.Errorf("RDMA netlink %s dump of %s: %w", k.name, dev, err)
		}
		n, err := countOwned(msgs, k.table, k.entry, pids)
		if err != nil {
			return nil, fmt.Errorf("RDMA netlink %s dump of %s: %w", k.name, dev, err)
		}
		out[k.name] = uint64(n)
	}
	return out, nil
}

// dumpObjects asks for every object of one kind on the device with index
// idx (the kernel insists on the index).
func dumpObjects(idx uint32, cmd int) ([][]byte, error) {
	req := nl.NewNetlinkRequest(rdmaNLNldev<<rdmaNLClientShift|cmd, unix.NLM_F_ACK|unix.NLM_F_DUMP)
	req.AddData(nl.NewRtAttr(nldevAttrDevIndex, nl.Uint32Attr(idx)))
	msgs, err := req.Execute(unix.NETLINK_RDMA, 0)
	if errors.Is(err, nl.ErrDumpInterrupted) {
		// The table changed during the dump: ask once more.
		msgs, err = req.Execute(unix.NETLINK_RDMA, 0)
	}
	return msgs, err
}

// countOwned counts the entries of a per-object dump whose
// RDMA_NLDEV_ATTR_RES_PID is one of pids. Kernel objects carry a name
// (RDMA_NLDEV_ATTR_RES_KERN_NAME) instead of a PID and never count.
func countOwned(msgs [][]byte, table, entry uint16, pids map[uint32]bool) (int, error) {
	n := 0
	for _, m := range msgs {
		attrs, err := nl.ParseRouteAttr(m)
		if err != nil {
			return 0, err
		}
		for _, a := range attrs {
			if a.Attr.Type&nlaTypeMask != table {
				continue
			}
			entries, err := nl.ParseRouteAttr(a.Value)
			if err != nil {
				return 0, err
			}
			for _, e := range entries {
				if e.Attr.Type&nlaTypeMask != entry {
					continue
				}
				fields, err := nl.ParseRouteAttr(e.Value)
				if err != nil {
					return 0, err
				}
				for _, f := range fields {
					if f.Attr.Type&nlaTypeMask == nldevAttrResPID && len(f.Value) >= 4 && pids[nl.NativeEndian().Uint32(f.Value)] {
						n++
					}
				}
			}
		}
	}
	return n, nil
}

// ourTasks is the process ID and the IDs of its threads: the kernel
// records the thread that created an object, and a Go program's verbs may
// run on any of them.
func ourTasks() map[uint32]bool {
	pids := map[uint32]bool{uint32(os.Getpid()): true}
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return pids
	}
	for _, e := range ents {
		if id, err := strconv.ParseUint(e.Name(), 10, 32); err == nil {
			pids[uint32(id)] = true
		}
	}
	return pids
}

// deviceResourceCounts reads the device's RDMA netlink resource summary,
// the numbers `rdma resource show` prints.
func deviceResourceCounts(dev string) (map[string]uint64, error) {
	list, err := netlink.RdmaResourceList()
	if err != nil {
		return nil, fmt.Errorf("RDMA netlink resource dump: %w", err)
	}
	for _, r := range list {
		if r.Name == dev {
			out := map[string]uint64{}
			for _, k := range countedResources {
				out[k] = r.RdmaResourceSummaryEntries[k]
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("RDMA netlink lists no device %s", dev)
}

// leakedCounts describes the counts that differ, "" when none.
func leakedCounts(before, after map[string]uint64) string {
	var diffs []string
	for _, k := range countedResources {
		if before[k] != after[k] {
			diffs = append(diffs, fmt.Sprintf("%s %d→%d", k, before[k], after[k]))
		}
	}
	return strings.Join(diffs, ", ")
}

func fmtCounts(m map[string]uint64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
