package checks

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// A host without RDMA of its own cannot take part in a peer session at all.
// That is one finding, peer.connect's (the first check that drives this
// host's verbs), with the cause named; every later check that needs the
// local device is blocked by it — peer.rdma_cm too, though it needs only
// the control connection of the checks before it. The cause is found from
// sysfs before any verbs child starts where sysfs can tell (PeerLocalFault),
// else from the child's first step (probe.LocalStep).

// Fixes of a host that cannot take part.
const (
	peerNoDeviceFix = "Run `rdmadoctor` on this host: it names the missing piece (the adapter on PCI, its driver module, ib_uverbs). " +
		"To test a peer from a host without an RDMA adapter, give it a software one: " +
		"`modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <interface>` (SoftRoCE)."
	peerNoSuchDeviceFix = "Pass a device this host has (`rdmadoctor inventory` lists them), or leave --device out to take the port " +
		"on the peer's subnet or the first ACTIVE one."
	peerNoUverbsFix = "Load the userspace verbs interface: `modprobe ib_uverbs` (rdma-core's udev rules load it with the device's " +
		"driver); then `rdmadoctor` on this host judges the rest (kernel.modules, uverbs.nodes)."
	peerNoLibraryFix = "Install rdma-core's library and providers: `apt install libibverbs1 ibverbs-providers` (Debian/Ubuntu), " +
		"`dnf install libibverbs` (RHEL, Fedora), `zypper install libibverbs` (SUSE); or point --libibverbs at a libibverbs.so.1. " +
		"`rdmadoctor` on this host (libibverbs.install) says what the loader finds."
	peerNoProviderFix = "Install the provider of this host's device (`ibverbs-providers` on Debian/Ubuntu; part of `libibverbs` on RHEL, SUSE); " +
		"in a container, pass the device nodes in (`--device=/dev/infiniband/uverbsN`). `rdmadoctor` on this host " +
		"(uverbs.nodes, libibverbs.devices) says which."
	peerNoPortFix = "Name a device and port this host has with --device/--port (`rdmadoctor inventory` lists them), or bring a link up " +
		"(port.state on this host says why it is down)."
)

// PeerLocalFault judges, from sysfs alone and before any verbs child is
// started, whether this host can take part in a peer session. sysDir is
// the sysfs libibverbs will read, as a path of h ("/sys" on a live host).
// It wants a device under class/infiniband (the one named, when device is
// set) and the uverbs ABI file libibverbs reads before it lists anything
// (without it ibv_get_device_list fails with ENOSYS). It returns the step
// that failed, its Error the cause and its Cause the fix; nil when this
// host can take part, or when sysfs could not be read (the child's
// enumeration then judges).
func PeerLocalFault(h *sysfs.Host, sysDir, device string) *probe.Step {
	class := path.Join(sysDir, "class/infiniband")
	fault := func(fix, format string, args ...any) *probe.Step {
		return &probe.Step{Name: probe.StepLocalSysfs, Error: fmt.Sprintf(format, args...), Cause: fix}
	}
	names, err := h.ReadDir(class)
	switch {
	case sysfs.IsNotExist(err):
		return fault(peerNoDeviceFix, "no RDMA device on this host: %s does not exist (no RDMA driver is loaded)", h.Display(class))
	case err != nil:
		return nil
	case len(names) == 0:
		return fault(peerNoDeviceFix, "no RDMA device on this host: %s is empty", h.Display(class))
	case device != "" && !slices.Contains(names, device):
		return fault(peerNoSuchDeviceFix, "no RDMA device %q on this host: %s lists %s", device, h.Display(class), strings.Join(names, ", "))
	}
	abi := path.Join(sysDir, "class/infiniband_verbs/abi_version")
	if _, err := h.ReadAttr(abi); sysfs.IsNotExist(err) {
		return fault(peerNoUverbsFix, "this host's kernel offers no userspace verbs: %s does not exist (ib_uverbs is not loaded), "+
			"so libibverbs cannot list a device (ENOSYS)", h.Display(abi))
	}
	return nil
}

// peer.connect's findings about a host that cannot take part: each names
// the cause, its fix the missing piece.
var (
	peerConnectNoDevice = declarePeerLocal("no-device",
		"no RDMA device on this host (/sys/class/infiniband missing or empty), or libibverbs could not list the devices", peerNoDeviceFix)
	peerConnectNoSuchDevice = declarePeerLocal("no-such-device", "this host has no device of the name --device gives", peerNoSuchDeviceFix)
	peerConnectNoUverbs     = declarePeerLocal("no-uverbs",
		"this host's kernel offers no userspace verbs: ib_uverbs is not loaded (no abi_version file, or ibv_get_device_list fails with ENOSYS)", peerNoUverbsFix)
	peerConnectNoLibrary  = declarePeerLocal("no-libibverbs", "libibverbs could not be loaded on this host", peerNoLibraryFix)
	peerConnectNoProvider = declarePeerLocal("no-provider", "libibverbs lists no device though sysfs has some: no provider claims them", peerNoProviderFix)
	peerConnectNoPort     = declarePeerLocal("no-port", "this host has no port to test: no ACTIVE port, or none of the --device/--port given", peerNoPortFix)
)

func declarePeerLocal(slug, when, fix string) *Finding {
	return declare(Finding{ID: probe.PeerConnect + "/" + slug, Status: report.Fail,
		When: when + "; every later check is blocked by it", Message: "{pair}: {cause}", Fix: fix})
}

// peerLocalFinding is the finding of a local-device step and its cause,
// the same whether sysfs or the verbs child found it; nil when the step is
// not one of those.
func peerLocalFinding(st *probe.Step) (*Finding, string) {
	switch {
	case st == nil || !probe.IsLocalStep(st.Name):
		return nil, ""
	case st.Name == probe.StepLocalSysfs:
		// PeerLocalFault's step carries its finding's fix as the cause.
		for _, f := range []*Finding{peerConnectNoSuchDevice, peerConnectNoUverbs} {
			if st.Cause == f.Fix {
				return f, st.Error
			}
		}
		return peerConnectNoDevice, st.Error
	case st.Name == probe.StepLocalLoad:
		return peerConnectNoLibrary, "libibverbs could not be loaded on this host: " + st.Error
	case st.Name == probe.StepLocalList && st.ErrnoName == "ENOSYS":
		// rdma-core's ibverbs_init returns ENOSYS when it cannot read
		// class/infiniband_verbs/abi_version or the kernel's ABI is not one
		// it speaks; find_sysfs_devs when class/infiniband_verbs is missing.
		return peerConnectNoUverbs, "this host's kernel offers no userspace verbs: ibv_get_device_list failed with ENOSYS " +
			"(libibverbs found no readable /sys/class/infiniband_verbs/abi_version: ib_uverbs is not loaded, or its ABI is not the library's)"
	case st.Name == probe.StepLocalList && st.Errno == 0:
		return peerConnectNoProvider, "no RDMA device on this host that libibverbs can use: " + st.Error
	case st.Name == probe.StepLocalList:
		return peerConnectNoDevice, "libibverbs could not list this host's RDMA devices: " + st.Error
	}
	return peerConnectNoPort, "this host has no port to test: " + st.Error
}

// PeerLocalFaultText is a local-device step's cause and fix, the same
// whether sysfs or the verbs child found it; "" when the step is not one
// of those.
func PeerLocalFaultText(st *probe.Step) (cause, fix string) {
	f, cause := peerLocalFinding(st)
	if f == nil {
		return "", ""
	}
	return cause, f.Fix
}

// peerLocalFault is the local-device step peer.connect failed at on this
// pair; nil when it failed elsewhere or passed.
func peerLocalFault(p *peer.Pair) *probe.Step {
	if p.Verbs == nil || p.Verbs.Connect == nil {
		return nil
	}
	if st := p.Verbs.Connect.Failed(); st != nil && probe.IsLocalStep(st.Name) {
		return st
	}
	return nil
}

// judgePeerLocal is peer.connect's verdict on a pair this host could not
// take part in.
func judgePeerLocal(p *peer.Pair, st *probe.Step) verdict {
	f, cause := peerLocalFinding(st)
	name := pairName(p)
	v := f.unit(name, Slots{"pair": name, "cause": cause})
	v.evidence = map[string]any{"failed_step": st}
	return v
}
