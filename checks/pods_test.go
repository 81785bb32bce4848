package checks_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// Each pod and SR-IOV fixture gets the verdict and exit code its comment
// states (sysfs/sysfstest/fixtures_pods.go), and no remedy that cannot be
// carried out where it runs: a pod has no limits.conf logins and cannot
// act on the host's netdev.
func TestPodFixtureVerdicts(t *testing.T) {
	names := make([]string, 0, len(sysfstest.PodVerdicts))
	for n := range sysfstest.PodVerdicts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		want := sysfstest.PodVerdicts[name]
		t.Run(name, func(t *testing.T) {
			r := hwRun(t, netFixture(name), checks.Options{})
			statedVerdict(t, r, want.Check, want.Status, "", want.Exit)
			for _, c := range r.Checks {
				if want.Exit == 0 && c.Status == report.Warn {
					t.Errorf("a healthy %s warns: %s %s", name, c.ID, c.Summary)
				}
				if strings.HasPrefix(name, "pod-") && strings.Contains(c.Remedy, "limits.conf") && !strings.Contains(c.Remedy, "not from /etc/security/limits.conf") {
					t.Errorf("%s advises limits.conf in a pod:\n%s", c.ID, c.Remedy)
				}
			}
		})
	}
}

// What the pod and SR-IOV fixtures' findings say: the interface that
// carries a port into the pod, and remedies a pod's owner can carry out.
func TestPodFindings(t *testing.T) {
	runNetCases(t, "roce.config", []netCase{
		{name: "macvlan net1 carries the port into the pod", dir: netFixture("pod-shared-macvlan"), status: report.Pass,
			contains: []string{"mlx5_0 port 1 → ens1f0np0 (in another network namespace), via net1 here: up, MTU 9000, 192.0.2.31/24",
				"mlx5_1 port 1 → ens1f1np1 (in another network namespace), via net2 here"}},
		{name: "ipvlan net1; the other port is not the pod's", dir: netFixture("pod-shared-ipvlan"), status: report.Pass,
			contains: []string{"via net1 here: up, MTU 9000, 192.0.2.33/24", "mlx5_1 port 1 → ens1f1np1: in another network namespace, and no interface here carries it"}},
		{name: "ipvlan without an address", dir: netFixture("pod-shared-ipvlan-no-ip"), status: report.Fail, exit: 20, rootCause: "roce.config",
			contains: []string{"net1 (carrying ens1f0np0 into this namespace) have no routable address", "ipam"},
			lacks:    []string{"ip addr add", "network configuration"}},
		{name: "the pod's macvlan down", dir: fixtureEdited(t, "pod-shared-macvlan", func(tr *sysfstest.Tree) {
			for i, nd := range tr.Facts.Netdevs {
				if nd.Name == "net1" {
					tr.Facts.Netdevs[i].OperState, tr.Facts.Netdevs[i].AdminUp, tr.Facts.Netdevs[i].Carrier = "down", false, false
				}
			}
		}), status: report.Fail, exit: 20, rootCause: "roce.config",
			contains: []string{"net1 (carrying ens1f0np0 into this namespace) is down", "Multus/CNI logs"}, lacks: []string{"ip link set ens1f0np0"}},
		{name: "no network on the RDMA NIC", dir: netFixture("pod-shared-no-network"), status: report.Fail, exit: 20, rootCause: "roce.config",
			contains: []string{"no ACTIVE RoCE port is carried by an interface of this network namespace: mlx5_0 port 1, mlx5_1 port 1",
				"NetworkAttachmentDefinition of type macvlan or ipvlan whose master is the port's netdev (ens1f0np0, ens1f1np1)", "hostNetwork"},
			lacks: []string{"not found", "ip link show"}},
		{name: "a VF pod judges its VF", dir: netFixture("pod-sriov-vf"), status: report.Pass,
			contains: []string{"mlx5_2 port 1 → net1: up, MTU 9000, 192.0.2.43/24 on net1", "mlx5_3 port 1 → ens1f0v1: the VF's netdev is in another network namespace"}},
		{name: "a VF pod's VF without an address", dir: netFixture("pod-sriov-vf-no-ip"), status: report.Fail, exit: 20, rootCause: "roce.config",
			contains: []string{"netdev net1 (a VF handed to this namespace) has no IP address", "SR-IOV network's `ipam`"},
			lacks:    []string{"normal for a VF"}},
		{name: "the hypervisor lists its VFs", dir: netFixture("sriov-hv-vf-pool"), status: report.Pass,
			contains: []string{"no IP on the host (normal for a VF or representor"}},
	})
	runNetCases(t, "limits.memlock", []netCase{
		{name: "a pod's memlock is the runtime's", dir: netFixture("pod-shared-macvlan-memlock"), status: report.Fail, exit: 18, rootCause: "limits.memlock",
			contains: []string{"IPC_LOCK", "containerd"}, lacks: []string{"* soft memlock", "log in again"}},
		// A pod with hostPID sees the host's systemd as PID 1; its
		// service account mount still says it is a pod.
		{name: "a hostPID pod's memlock is the runtime's", dir: fixtureEdited(t, "pod-shared-macvlan-memlock", func(tr *sysfstest.Tree) {
			tr.Attr("/proc/1/comm", "systemd")
			tr.File("/var/run/secrets/kubernetes.io/serviceaccount/namespace", "ml-training")
		}), status: report.Fail, exit: 18, rootCause: "limits.memlock",
			contains: []string{"kubepods: /var/run/secrets/kubernetes.io/serviceaccount exists", "IPC_LOCK"}, lacks: []string{"* soft memlock", "log in again"}},
	})
	runNetCases(t, "rdma.devices", []netCase{
		{name: "exclusive mode: the pod's VF device is judged, the others listed", dir: netFixture("pod-exclusive-vf"), status: report.Pass,
			contains: []string{"0000:3b:00.0 ConnectX-5: registered as mlx5_0, held by another network namespace (RDMA netns mode exclusive): not judged here"},
			lacks:    []string{"NO RDMA DEVICE"}},
	})
	runNetCases(t, "port.state", []netCase{
		{name: "a pod's port down: the netdev is the node's", dir: fixtureEdited(t, "pod-shared-macvlan", func(tr *sysfstest.Tree) {
			ports := "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1/infiniband/mlx5_1/ports/1/"
			tr.Attr(ports+"state", "1: DOWN")
			tr.Attr(ports+"phys_state", "3: Disabled")
		}), status: report.Fail, exit: 19, rootCause: "port.state",
			contains: []string{"no link; its netdev ens1f1np1 is in another network namespace", "on the node, `ip link show ens1f1np1`"},
			lacks:    []string{"`ip link set ens1f1np1 up`", "`ip link show <netdev>`"}},
		{name: "unused VFs on a hypervisor", dir: netFixture("sriov-hv-vfs-down"), status: report.Pass,
			contains: []string{"a VF not in use on this host (its netdev ens1f0v0 is admin-down)"}},
	})
}
