package checks

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Capability is a Linux capability by its number (include/uapi/linux/capability.h).
type Capability int

// The capabilities a check may declare. Only those some check needs are
// named here; the numbers are the kernel's and never change.
const (
	CapNetAdmin Capability = 12 // CAP_NET_ADMIN
	CapIPCLock  Capability = 14 // CAP_IPC_LOCK
	CapSysAdmin Capability = 21 // CAP_SYS_ADMIN
	CapSyslog   Capability = 34 // CAP_SYSLOG
)

var capNames = map[Capability]string{
	CapNetAdmin: "CAP_NET_ADMIN", CapIPCLock: "CAP_IPC_LOCK", CapSysAdmin: "CAP_SYS_ADMIN", CapSyslog: "CAP_SYSLOG",
}

// String is the capability's kernel name, "CAP_SYS_ADMIN".
func (c Capability) String() string {
	if n, ok := capNames[c]; ok {
		return n
	}
	return fmt.Sprintf("capability %d", int(c))
}

// ParseCapability reads a capability as systemd ("CAP_SYS_ADMIN"),
// Kubernetes ("SYS_ADMIN") or setpriv ("sys_admin") write it.
func ParseCapability(s string) (Capability, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	if !strings.HasPrefix(u, "CAP_") {
		u = "CAP_" + u
	}
	for c, n := range capNames {
		if n == u {
			return c, nil
		}
	}
	return 0, fmt.Errorf("capability %q: not one rdmadoctor knows", s)
}

// NeedKind is what kind of privilege a Need is.
type NeedKind uint8

const (
	// NeedCapability is a capability in the effective set.
	NeedCapability NeedKind = iota + 1
	// NeedDevice is a device node the check (or its verbs child) opens
	// read-write: it must exist in the process's /dev and the device
	// policy (a container's device cgroup, systemd's DevicePolicy=) must
	// let it open.
	NeedDevice
	// NeedMemlock is the right to pin memory: CAP_IPC_LOCK, or an
	// RLIMIT_MEMLOCK large enough for the probes' buffers and queues.
	NeedMemlock
)

// Need is one privilege a check needs on a live host. With --root nothing
// is live and no Need applies.
type Need struct {
	Kind NeedKind
	Cap  Capability // NeedCapability
	Path string     // NeedDevice: the node or the directory of nodes
	// For says what the check does with it, one phrase.
	For string
	// Optional marks a need without which the check still judges every
	// unit and only shows less (a value it reports but does not judge).
	// A deployment need not grant it.
	Optional bool
}

// String says the need in one line, as `explain` prints it.
func (n Need) String() string {
	var s string
	switch n.Kind {
	case NeedCapability:
		s = n.Cap.String()
	case NeedDevice:
		s = "device " + n.Path + " (opened read-write)"
	case NeedMemlock:
		s = "CAP_IPC_LOCK or a locked-memory limit (RLIMIT_MEMLOCK) large enough for its buffers"
	default:
		s = fmt.Sprintf("need kind %d", n.Kind)
	}
	if n.For != "" {
		s += ": " + n.For
	}
	if n.Optional {
		s += " (optional: without it the check judges and shows less)"
	}
	return s
}

// Required returns the needs of the selected checks that a deployment
// running them must grant (the optional ones left out), each once, in a
// stable order: by kind, then capability or path.
func Required(sel []*Check) []Need {
	type key struct {
		k NeedKind
		c Capability
		p string
	}
	seen := map[key]Need{}
	for _, c := range sel {
		for _, n := range c.Privileges {
			if n.Optional {
				continue
			}
			k := key{n.Kind, n.Cap, n.Path}
			if _, ok := seen[k]; !ok {
				seen[k] = Need{Kind: n.Kind, Cap: n.Cap, Path: n.Path}
			}
		}
	}
	out := make([]Need, 0, len(seen))
	for _, n := range seen {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Cap != b.Cap {
			return a.Cap < b.Cap
		}
		return a.Path < b.Path
	})
	return out
}

// liveCapability says whether the running process holds c in its
// effective set: known is false on a fixture or snapshot (--root: not this
// process) and when /proc/self/status cannot be read or parsed.
func liveCapability(h *sysfs.Host, c Capability) (held, known bool) {
	if h == nil || !h.Live() {
		return false, false
	}
	eff, err := h.EffectiveCaps()
	if err != nil {
		return false, false
	}
	return eff&(1<<uint(c)) != 0, true
}

// configSpaceShort says why a function's configuration space read came
// back short (size bytes) of the extended space a check needs, naming the
// privilege where that is the cause; what names the registers looked for
// ("ACS"). The kernel returns only the 64-byte header (128 for CardBus) to
// an opener without CAP_SYS_ADMIN in the initial user namespace
// (drivers/pci/pci-sysfs.c, pci_read_config).
func configSpaceShort(h *sysfs.Host, size int, what string) string {
	held, known := liveCapability(h, CapSysAdmin)
	return configSpaceShortText(size, held, known, what)
}

// configSpaceShortText is configSpaceShort once the process's capability
// is known (known false: a fixture or snapshot, where the recorded bytes
// are all there is, or /proc/self/status unreadable).
func configSpaceShortText(size int, held, known bool, what string) string {
	switch {
	case known && !held && size <= 128:
		return fmt.Sprintf("needs CAP_SYS_ADMIN to read PCI config space beyond %d bytes (the kernel shows %d bytes without it); %s lies beyond",
			size, size, what)
	case known && held && size <= 128:
		return fmt.Sprintf("only %d bytes of configuration space readable although this process holds CAP_SYS_ADMIN: in a user namespace "+
			"(a rootless container) the kernel wants it in the host's own namespace; %s lies beyond", size, what)
	case known:
		return fmt.Sprintf("only %d bytes of configuration space: the function has no PCIe extended space, where %s lies", size, what)
	}
	return fmt.Sprintf("only %d bytes of configuration space readable — reading %s needs root (CAP_SYS_ADMIN)", size, what)
}

// The needs several checks share, declared once.
var (
	// needUverbsNodes: libibverbs talks to the kernel only through these
	// nodes; a process that cannot open them cannot build a verbs object.
	needUverbsNodes = Need{Kind: NeedDevice, Path: sysfs.DevInfiniband,
		For: "opens /dev/infiniband/uverbsN (and rdma_cm) read-write, as an application does"}
	// needPinning: memory registration and the provider's queues pin
	// pages against RLIMIT_MEMLOCK unless CAP_IPC_LOCK is held.
	needPinning = Need{Kind: NeedMemlock, For: "registers its buffers and creates queues whose pages the kernel pins"}
	// level2Needs are every verbs probe's.
	level2Needs = []Need{needUverbsNodes, needPinning}
)
