package checks

import (
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// roce.config's findings about ports whose netdev lives in another network
// namespace while this process reads the port (a Kubernetes pod with the
// RDMA shared device plugin: RDMA netns mode shared shows it every device,
// its own namespace holds only the macvlan or ipvlan that Multus made on
// the host's netdev, or none).
var (
	roceConfigNotHere = declare(Finding{ID: "roce.config/not-this-namespace", Status: report.Skip,
		When: "a PF's RoCE port whose netdev is in another network namespace, with no interface of this namespace among the netdevs its GIDs name, " +
			"while another RoCE port is carried here: the port belongs to another namespace (the host's, another pod's)",
		Message: "{port} → {netdev}: in another network namespace, and no interface here carries it: another namespace's port, not judged here"})
	roceConfigNoneHere = declare(Finding{ID: "roce.config/none-in-this-namespace", Status: report.Fail,
		When: "no ACTIVE RoCE port is carried by an interface of this network namespace: every port's netdev is in another namespace and no upper device " +
			"of it (macvlan, ipvlan, VLAN) lives here, so rdma_cm here has no RoCE address to bind",
		Message: "no ACTIVE RoCE port is carried by an interface of this network namespace: {ports} (their netdevs live in another namespace)",
		Fix: "This network namespace (a pod's or a container's) sees the RDMA devices but none of their networks: rdma_cm resolves addresses in the caller's namespace, " +
			"so it has no RoCE address to use. Give the pod an interface on the RDMA NIC: a Multus NetworkAttachmentDefinition of type macvlan or ipvlan whose master " +
			"is the port's netdev ({netdevs}) in the pod's `k8s.v1.cni.cncf.io/networks` annotation (the kernel adds its addresses to the port's GID table), " +
			"or an SR-IOV VF network; or run the pod with `hostNetwork: true`."})
	roceConfigVFNoIP = declare(Finding{ID: "roce.config/vf-here-no-ip", Status: report.Fail,
		When: "a VF's (or sub-function's) netdev is in this namespace while its PF's is not — the VF was handed here to be used (a pod's SR-IOV network) — " +
			"and it has no address",
		Message: "netdev {netdev} (a VF handed to this namespace) has no IP address",
		Fix: "{netdev} is the VF this namespace was given, without a routable address, so its port has no routable RoCE v2 GID: " +
			"give it one where the VF is attached — in Kubernetes the SR-IOV network's `ipam` section (SriovNetwork spec.ipam, or the NetworkAttachmentDefinition's: whereabouts, host-local, static)."})
	roceConfigUpperDown = declare(Finding{ID: "roce.config/upper-here-down", Status: report.Fail,
		When:    "the interface of this namespace that carries a port whose netdev is elsewhere (a pod's macvlan/ipvlan) is down",
		Message: "{upper} (carrying {netdev} into this namespace) is {operstate}",
		Fix:     "`ip link set {upper} up` in this namespace; in a pod the CNI brings it up: check the pod's events and the Multus/CNI logs on its node."})
	roceConfigUpperNoIP = declare(Finding{ID: "roce.config/upper-here-no-ip", Status: report.Fail,
		When:    "the interfaces of this namespace that carry a port whose netdev is elsewhere have no routable address (only link-local)",
		Message: "{uppers} (carrying {netdev} into this namespace) have no routable address",
		Fix: "{uppers} carry {port} into this namespace without a routable address, so the port has no routable RoCE v2 GID here: " +
			"give it one where the interface is made — in Kubernetes the NetworkAttachmentDefinition's `ipam` section (whereabouts, host-local, static)."})
)

// upperHereState judges a port whose netdev is in another namespace
// through the interfaces here that carry it (pm.Uppers): up, with a
// routable address, and an MTU that allows RoCE. The port's own netdev
// cannot be read here; the port being ACTIVE says it is up with carrier
// (mlx5, bnxt_re and irdma report a RoCE port ACTIVE only then).
func (rj *roceJudge) upperHereState(pm *PortModel, f *roceFindings, ev map[string]any, line *string) (addrs []string, ok bool) {
	if rj.ndErr != nil {
		*line += fmt.Sprintf(": netdev state unknown (%v)", rj.ndErr)
		return nil, false
	}
	ev["netdev_namespace"] = "another"
	ev["uppers_here"] = pm.Uppers
	*line += " (in another network namespace)"
	minMTU, minUpper := 0, ""
	for _, u := range pm.Uppers {
		nd, found := rj.byName[u]
		if !found {
			continue
		}
		*line += fmt.Sprintf(", via %s here: %s, MTU %d", u, nd.OperState, nd.MTU)
		if !nd.AdminUp || (nd.OperState != "up" && nd.OperState != "unknown") {
			f.add(roceConfigUpperDown, "upper", u, "operstate", nd.OperState)
		}
		if a := routableAddrs(nd.Addresses); len(a) > 0 {
			addrs = append(addrs, a...)
			*line += ", " + strings.Join(a, " ")
		}
		if nd.MTU > 0 && (minMTU == 0 || nd.MTU < minMTU) {
			minMTU, minUpper = nd.MTU, u
		}
	}
	if len(addrs) == 0 {
		f.add(roceConfigUpperNoIP, "uppers", strings.Join(pm.Uppers, ", "))
	}
	if minMTU > 0 {
		am := RoCEActiveMTU(minMTU)
		ev["mtu"], ev["active_mtu"] = minMTU, am
		*line += fmt.Sprintf(" (RoCE active MTU %d)", am)
		if am < 1024 {
			// The interface here is what the pod can change (a macvlan's
			// MTU is at most its lower device's).
			f.add(roceConfigSmallMTU, "mtu", fmt.Sprint(minMTU), "active_mtu", fmt.Sprint(am), "netdev", minUpper)
		}
	}
	return addrs, true
}

// noneHere turns roce.config's result into a failure when no ACTIVE port
// was judged because every one of them belongs to another namespace.
func noneHere(vs []verdict, notHere []string, netdevs []string, details []string) (Result, bool) {
	if len(notHere) == 0 {
		return Result{}, false
	}
	for _, v := range vs {
		if v.status != report.Skip {
			return Result{}, false
		}
	}
	r := roceConfigNoneHere.result("", Slots{"ports": strings.Join(notHere, ", "), "netdevs": strings.Join(netdevs, ", ")})
	r.Details = details
	r.Observed = fmt.Sprintf("%d ACTIVE RoCE port(s), none carried by an interface here", len(notHere))
	return r, true
}
