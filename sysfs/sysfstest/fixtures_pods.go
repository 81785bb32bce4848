package sysfstest

import (
	"fmt"
	"path"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Fixtures of RDMA seen from inside Kubernetes pods, and of the SR-IOV
// hypervisors that feed them. Each fixture's comment says what it was
// made from (read: a source; inferred: what the source implies without
// showing it) and the verdict and exit code rdmadoctor must give it at
// level 1, stated before the checks were run against it; PodVerdicts
// holds the same for the test that asserts them.
//
// What every pod fixture shares (read):
//   - core/device.c: in RDMA netns mode "shared" (the default,
//     ib_devices_shared_netns) every RDMA device is visible in every
//     network namespace — add_compat_devs gives each namespace a
//     compat device with the ports' sysfs attributes; in "exclusive"
//     mode a device is visible only in the namespace it was moved to
//     (rdma dev set DEV netns NS, rdma_dev_change_netns).
//   - net/core/dev.c __netdev_adjacent_dev_insert: the lower_/upper_
//     links exist only between devices of one namespace, so a pod's
//     macvlan has no lower_ link to the host's netdev.
//   - core/roce_gid_mgmt.c: the kernel adds the addresses of the port
//     netdev's upper devices (macvlan, ipvlan, VLAN) to the port's GID
//     table whatever their namespace (rdma_is_upper_dev_rcu;
//     enum_all_gids_of_dev_cb walks for_each_net), and core/sysfs.c
//     show_port_gid_attr_ndev prints ndev->name: "net1", the name in
//     the pod. The project's RDMA facts record the same measured on
//     rxe (6.1): macvlan and ipvlan in other namespaces get RoCE v2 GIDs.
//   - the RDMA shared device plugin (k8s-rdma-shared-dev-plugin README)
//     mounts /dev/infiniband/uverbsN of its resource's devices and
//     rdma_cm into the pod; Multus attaches the macvlan/ipvlan as net1
//     (NetworkAttachmentDefinition, `master` the host's netdev).
//   - inferred: containerd's pods have no /.dockerenv and, with cgroup
//     v2 and a cgroup namespace, /proc/1/cgroup reads "0::/"; PID 1 is
//     the application, not an init. rdma_cm's configfs is not mounted in
//     a pod (no default_roce_tos there), and the image carries no
//     limits.d file of rdma-core's.

// podIface writes an interface that lives in the pod's network namespace
// (a veth eth0, a macvlan or ipvlan net1): a virtual netdev, with no
// lower_ link to the host's netdev it sits on, and no DCB of its own
// (macvlan and ipvlan have no dcbnl_ops).
func podIface(t *Tree, name, mac string, mtu int, addrs []string) {
	nd := writeNetdev(t, "/sys/devices/virtual/net", Port{Netdev: name, MAC: mac, MTU: mtu, OperUp: true, Addrs: addrs}, len(t.Facts.Netdevs)+1)
	t.Facts.Netdevs = append(t.Facts.Netdevs, nd)
	t.Facts.DCB[name] = sysfs.DCB{Err: sysfs.ErrNoDCB}
}

// podMarks makes the tree a containerd pod's view: PID 1 is the
// application, the cgroup namespace hides the pod's cgroup path.
func podMarks(t *Tree, comm string) {
	t.Attr("/proc/1/comm", comm)
	t.File("/proc/1/cgroup", "0::/\n")
	t.File(sysfs.ProcSelfCgroup, "0::/\n")
}

// podHost is a host's hardware as a pod sees it: every port's netdev in
// the host's namespace, no rdma_cm configfs, no limits.d file. uppers
// gives ports (by NIC index) an upper device that the pod holds; the
// GID table carries its addresses under its name.
func podHost(h Host, name string, uppers map[int]Upper) Host {
	h.Hostname, h.RoCETOS, h.UserMemlock = name, "", "none"
	for i := range h.NICs {
		for j := range h.NICs[i].Ports {
			p := &h.NICs[i].Ports[j]
			if p.Netdev == "" || h.NICs[i].PhysFn != "" {
				continue
			}
			p.Away = true
			if u, ok := uppers[i]; ok && j == 0 {
				p.Uppers = []Upper{u}
			}
		}
	}
	return h
}

// buildPod builds a pod's tree: the pod's eth0, the uppers it holds (as
// podHost set them), and the pod's marks.
func buildPod(h Host, comm string) *Tree {
	t := Build(h)
	podIface(t, "eth0", "0a:58:0a:f4:01:07", 1450, []string{"10.244.1.7/24"})
	for _, n := range h.NICs {
		for _, p := range n.Ports {
			if !p.Away {
				continue
			}
			for _, u := range p.Uppers {
				mac := u.MAC
				if mac == "" {
					mac = p.MAC // ipvlan shares its lower device's MAC
				}
				podIface(t, u.Name, mac, p.MTU, u.Addrs)
			}
		}
	}
	podMarks(t, comm)
	return t
}

// keepDevNodes leaves in /dev/infiniband only the uverbs nodes a device
// plugin mounted into the pod, and rdma_cm.
func keepDevNodes(t *Tree, keep ...int) {
	want := map[string]bool{}
	for _, k := range keep {
		want[fmt.Sprintf("/dev/infiniband/uverbs%d", k)] = true
	}
	for p := range t.Files {
		if path.Dir(p) == "/dev/infiniband" && path.Base(p) != "rdma_cm" && !want[p] {
			delete(t.Files, p)
		}
	}
}

// vfPod is a hypervisor's CX-5 with two VFs (mlx5_2 on 0000:3b:00.2,
// mlx5_3 on 0000:3b:00.3) seen from a pod that was given the first VF
// by the SR-IOV network device plugin and the SR-IOV CNI: the CNI moves
// the VF's netdev into the pod and renames it net1 (sriov-cni README),
// so the VF's GID table names net1; the second VF belongs to another pod.
// Read: mlx5 VFs carry a physfn link to their PF (drivers/pci/iov.c
// pci_iov_sysfs_link) and register their own RDMA device and netdev.
func vfPod(name string, vfAddrs []string) Host {
	h := withVFs(CX5RoCE(), false, true)
	h = podHost(h, name, nil)
	vf := &h.NICs[2].Ports[0]
	vf.Netdev, vf.Addrs = "net1", vfAddrs
	return h
}

func init() {
	registerSharedModePods()
	registerExclusiveModePods()
	registerSRIOVPodsAndHosts()
}

// registerSharedModePods registers the pods of RDMA netns mode shared
// given the RDMA shared device plugin's devices and Multus interfaces.
func registerSharedModePods() {
	// pod-shared-macvlan: a training pod on a dual-port CX-5 node with
	// the RDMA shared device plugin; Multus gave it a macvlan on each port
	// (net1 on ens1f0np0, net2 on ens1f1np1) with addresses from the
	// fabric's subnets; the pod has IPC_LOCK (the device plugin's README
	// examples add it). Must be: healthy, exit 0 — roce.config pass (both
	// ports judged through net1/net2), limits.memlock pass (cap held), no
	// limits.conf advice anywhere.
	register("pod-shared-macvlan", func() *Tree {
		h := podHost(CX5RoCE(), "rdma-train-0", map[int]Upper{
			0: {Name: "net1", MAC: "02:42:c0:00:02:1f", Addrs: []string{"192.0.2.31/24"}},
			1: {Name: "net2", MAC: "02:42:c6:33:64:1f", Addrs: []string{"198.51.100.31/24"}},
		})
		return buildPod(h, "python3")
	})
	// pod-shared-macvlan-memlock: the same pod without IPC_LOCK, its
	// memlock limit containerd's own (containerd.service sets no
	// LimitMEMLOCK, so systemd's default, 8 MiB since systemd 253; the
	// CRI sets no rlimits). Must be: limits.memlock fail, exit 18; the
	// remedy is the container runtime's (ulimits, IPC_LOCK), never
	// limits.conf; roce.config still passes.
	register("pod-shared-macvlan-memlock", func() *Tree {
		h := podHost(CX5RoCE(), "rdma-train-1", map[int]Upper{
			0: {Name: "net1", MAC: "02:42:c0:00:02:20", Addrs: []string{"192.0.2.32/24"}},
		})
		h.Memlock, h.CapIPCLock = "8388608", false
		return buildPod(h, "python3")
	})
	// pod-shared-ipvlan: Multus ipvlan (L2) net1 on ens1f0np0; ipvlan
	// shares the lower device's MAC (drivers/net/ipvlan: ipvlan_link_new
	// copies phy_dev->dev_addr), so net1's link-local GID has the same
	// value as the port's default GID, under net1's name. The second port
	// has no interface in the pod. Must be: healthy, exit 0 — roce.config
	// pass on port 1 via net1, port 2 listed as another namespace's, not
	// judged.
	register("pod-shared-ipvlan", func() *Tree {
		h := podHost(CX5RoCE(), "rdma-infer-0", map[int]Upper{
			0: {Name: "net1", Addrs: []string{"192.0.2.33/24"}},
		})
		return buildPod(h, "tritonserver")
	})
	// pod-shared-ipvlan-no-ip: the same ipvlan whose NetworkAttachment-
	// Definition has no ipam section: net1 holds only its IPv6 link-local
	// address. Must be: roce.config fail, exit 20, the fix naming the
	// NetworkAttachmentDefinition's ipam, not `ip addr add` on the host.
	register("pod-shared-ipvlan-no-ip", func() *Tree {
		h := podHost(CX5RoCE(), "rdma-infer-1", map[int]Upper{
			0: {Name: "net1", Addrs: []string{"fe80::e42:a1ff:fe2b:3c4c/64"}},
		})
		return buildPod(h, "tritonserver")
	})
	// pod-shared-no-network: a pod given the shared device plugin's
	// resource but no Multus network: it sees both devices and their GID
	// tables, but no interface of its namespace carries either port.
	// Must be: roce.config fail, exit 20 (rdma_cm has no RoCE address in
	// the pod), the fix naming a Multus network or hostNetwork.
	register("pod-shared-no-network", func() *Tree {
		return buildPod(podHost(CX5RoCE(), "rdma-train-2", nil), "python3")
	})
}

// registerExclusiveModePods registers the pods of RDMA netns mode
// exclusive, each holding its own VF's RDMA device.
func registerExclusiveModePods() {
	// pod-exclusive-vf: RDMA netns mode exclusive (rdma system set netns
	// exclusive); the SR-IOV CNI moved VF 0000:3b:00.2's netdev into the
	// pod as net1 and the RDMA CNI (k8s-rdma-cni README) moved its RDMA
	// device mlx5_2 with it (rdma dev set mlx5_2 netns …). The PFs'
	// devices and the other VF's stay in other namespaces: absent from
	// /sys/class/infiniband here, while /sys/class/infiniband_verbs (not
	// namespaced) still names them; libibverbs lists mlx5_2 alone; the
	// device plugin mounted uverbs2 only. Must be: healthy, exit 0 —
	// rdma.devices pass with the other functions listed as held by
	// another namespace, roce.config pass on net1.
	register("pod-exclusive-vf", func() *Tree {
		h := vfPod("rdma-vf-0", []string{"192.0.2.41/24"})
		h.NetnsMode = "exclusive"
		return buildExclusiveVFPod(h, "python3")
	})
	// pod-exclusive-vf-memlock: the same pod run without IPC_LOCK and
	// with a 64 KiB memlock limit (an older systemd's default that
	// containerd passed on). Must be: limits.memlock fail, exit 18, with
	// the container runtime's remedy and no limits.conf line.
	register("pod-exclusive-vf-memlock", func() *Tree {
		h := vfPod("rdma-vf-1", []string{"192.0.2.42/24"})
		h.NetnsMode, h.Memlock, h.CapIPCLock = "exclusive", "65536", false
		return buildExclusiveVFPod(h, "mpirun")
	})
}

// registerSRIOVPodsAndHosts registers SR-IOV VF pods and the hypervisor
// nodes that pool the VFs.
func registerSRIOVPodsAndHosts() {
	// pod-sriov-vf: RDMA netns mode shared, a pod given VF 0000:3b:00.2
	// (net1, renamed by the SR-IOV CNI) by the SR-IOV network device
	// plugin with isRdma (it mounts uverbs2 and rdma_cm). Shared mode
	// shows every device: the PFs' ports, whose netdevs are the host's,
	// and the other VF, whose netdev is another pod's. Must be: healthy,
	// exit 0 — roce.config pass on mlx5_2 via net1, the PF ports listed as
	// another namespace's and the other VF as elsewhere, none failed.
	register("pod-sriov-vf", func() *Tree {
		t := buildPod(vfPod("rdma-vf-2", []string{"192.0.2.43/24"}), "python3")
		keepDevNodes(t, 2)
		return t
	})
	// pod-sriov-vf-no-ip: the same with a SriovNetwork that has no ipam:
	// the VF is up in the pod without an address. Must be: roce.config
	// fail, exit 20 — this VF is the pod's own interface, so no address
	// is a fault here (on the hypervisor it is not) — the fix naming the
	// SR-IOV network's ipam.
	register("pod-sriov-vf-no-ip", func() *Tree {
		t := buildPod(vfPod("rdma-vf-3", nil), "python3")
		keepDevNodes(t, 2)
		return t
	})

	// sriov-hv-vf-pool: a Kubernetes node (the hypervisor's view: the
	// host's namespace) with a CX-5 PF addressed on the host and four
	// VFs the SR-IOV device plugin pools: two on the host, up, without an
	// address; two moved into pods (Away). Read: mlx5 VFs' netdevs have
	// no address until a pod or guest gives one; the pods' VF netdevs
	// leave the host's namespace with their names (dev_change_net_namespace).
	// Must be: healthy, exit 0 — roce.config pass with the VFs listed,
	// never failed for their missing addresses.
	register("sriov-hv-vf-pool", func() *Tree {
		h := withVFs(CX5RoCE(), false, false, true, true)
		h.Hostname = "k8s-sriov-node04"
		return Build(h)
	})
	// sriov-hv-vfs-down: an OpenStack-style hypervisor whose VFs sit on
	// the host bound to mlx5_core with their netdevs admin-down (nobody
	// brought them up; nothing uses them yet). mlx5_ib reports a RoCE
	// port ACTIVE only when its netdev is running with carrier
	// (mlx5_query_port_roce), so these ports read DOWN / Disabled. Must
	// be: healthy, exit 0 — port.state lists the unused VFs, not judged;
	// roce.config lists them as not ACTIVE.
	register("sriov-hv-vfs-down", func() *Tree {
		h := withVFs(CX5RoCE(), false, false)
		h.Hostname = "hv-compute17"
		for i := 2; i < len(h.NICs); i++ {
			p := &h.NICs[i].Ports[0]
			p.State, p.PhysState, p.OperUp = "1: DOWN", "3: Disabled", false
		}
		return Build(h)
	})
}

// buildExclusiveVFPod builds a pod of vfPod in exclusive mode: only the
// VF's RDMA device is in the pod's namespace.
func buildExclusiveVFPod(h Host, comm string) *Tree {
	t := buildPod(h, comm)
	for _, n := range h.NICs {
		if n.IBDev != "" && n.Addr != h.NICs[2].Addr {
			rmDevice(t, n.Addr, n.IBDev)
		}
	}
	vf := h.NICs[2]
	t.Facts.Libibverbs.Devices = []sysfs.VerbsDevice{{Name: vf.IBDev, NodeGUID: vf.NodeGUID, Uverbs: fmt.Sprintf("uverbs%d", vf.Uverbs)}}
	t.Facts.RDMAResources = []sysfs.RDMAResource{zeroResources(vf.IBDev)}
	keepDevNodes(t, vf.Uverbs)
	return t
}

// PodVerdict is the verdict a pod or SR-IOV fixture must get at level 1.
type PodVerdict struct {
	Exit  int
	Check string // the check the fixture is about
	// Status of Check: "pass", "fail", …
	Status string
}

// PodVerdicts are the verdicts stated above, by fixture.
var PodVerdicts = map[string]PodVerdict{
	"pod-shared-macvlan":         {0, "roce.config", "pass"},
	"pod-shared-macvlan-memlock": {18, "limits.memlock", "fail"},
	"pod-shared-ipvlan":          {0, "roce.config", "pass"},
	"pod-shared-ipvlan-no-ip":    {20, "roce.config", "fail"},
	"pod-shared-no-network":      {20, "roce.config", "fail"},
	"pod-exclusive-vf":           {0, "rdma.devices", "pass"},
	"pod-exclusive-vf-memlock":   {18, "limits.memlock", "fail"},
	"pod-sriov-vf":               {0, "roce.config", "pass"},
	"pod-sriov-vf-no-ip":         {20, "roce.config", "fail"},
	"sriov-hv-vf-pool":           {0, "roce.config", "pass"},
	"sriov-hv-vfs-down":          {0, "port.state", "pass"},
}
