package checks_test

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
)

// The host kinds a mixed fleet holds: each healthy one exits 0 at level 1,
// and each judgement names what the port really is. One case per kind of
// host that a gate once drained by mistake.

func TestHostKindsHealthyExitZero(t *testing.T) {
	for _, name := range []string{
		"cx5-roce-healthy", "cx6-ib-healthy", "rxe-softroce",
		"mlx5-roce-lag-bond", "roce-vlan-ip", "sriov-vfs-hypervisor", "sriov-switchdev-representors",
		"cxgb4-iwarp", "aws-efa", "hfi1-omnipath", "irdma-e810-roce", "bnxt-re-roce",
		"ib-port-disabled", "ib-hdr100-split-2x", "ib-link-degraded-1x", "roce-tos-default-zero",
	} {
		t.Run(name, func(t *testing.T) {
			r := hwRun(t, netFixture(name), checks.Options{})
			if r.ExitCode != 0 {
				for _, c := range r.Checks {
					if c.Status == report.Fail || c.Status == report.Error {
						t.Errorf("%s %s: %s", c.ID, c.Status, c.Summary)
					}
				}
				t.Fatalf("a healthy %s host exits %d (root cause %s)", name, r.ExitCode, deref(r.RootCause))
			}
		})
	}
}

func TestHostKindsRDMADevices(t *testing.T) {
	runNetCases(t, "rdma.devices", []netCase{
		// The PF that gave its RDMA device up to the LAG is served by it; a
		// reload or enable_rdma remedy would break the bond.
		{name: "mlx5 RoCE LAG", dir: netFixture("mlx5-roce-lag-bond"), status: report.Pass,
			findings: []findingRef{{"rdma.devices/registered", "0000:98:00.0"}, {"rdma.devices/lag-member", "0000:98:00.1"}, {"rdma.devices/present", ""}},
			contains: []string{"in RoCE LAG mlx5_bond_0 (bond bond0)"}, lacks: []string{"modprobe -r", "enable_rdma"}},
		{name: "Omni-Path is an RDMA NIC", dir: netFixture("hfi1-omnipath"), status: report.Pass,
			findings: []findingRef{{"rdma.devices/registered", "0000:5e:00.0"}, {"rdma.devices/present", ""}}, contains: []string{"Intel Omni-Path HFI 100: hfi1_0"}},
		{name: "EFA", dir: netFixture("aws-efa"), status: report.Pass,
			findings: []findingRef{{"rdma.devices/registered", "0000:00:06.0"}, {"rdma.devices/present", ""}},
			contains: []string{"AWS EFA (2nd gen): rdmap0s6"}, lacks: []string{"ENA"}},
		// Exclusive netns: the devices exist; the namespace is the whole
		// cause and comes first.
		{name: "exclusive netns container", dir: netFixture("netns-exclusive-container"), status: report.Fail, exit: 14, rootCause: "rdma.devices",
			findings: []findingRef{{"rdma.devices/other-netns", "0000:3b:00.0"}, {"rdma.devices/other-netns", "0000:3b:00.1"}},
			contains: []string{"`rdma dev set <device> netns <namespace>`", "hostNetwork"},
			lacks:    []string{"modprobe -r", "devlink"}},
	})
}

func TestHostKindsPortState(t *testing.T) {
	runNetCases(t, "port.state", []netCase{
		{name: "IB port disabled by management warns", dir: netFixture("ib-port-disabled"), status: report.Warn,
			findings: []findingRef{{"port.state/active", "mlx5_0/1"}, {"port.state/disabled", "mlx5_0/2"}},
			contains: []string{"ibportstate -C mlx5_0 -P 2 -D 0 2 enable", "unused = true"}},
		{name: "IB 1X link warns", dir: netFixture("ib-link-degraded-1x"), status: report.Warn,
			findings: []findingRef{{"port.state/one-lane", "mlx5_0/1"}}, contains: []string{"1 lane of 4"}},
		{name: "IB 1X link fails against --expect-rate", dir: netFixture("ib-link-degraded-1x"), opts: checks.Options{ExpectRate: 200},
			status: report.Fail, exit: 19, rootCause: "port.state",
			findings: []findingRef{{"port.state/one-lane", "mlx5_0/1"}, {"port.state/below-rate", "mlx5_0/1"}}, contains: []string{"below the expected 200 Gb/sec"}},
		{name: "HDR100 2X split passes", dir: netFixture("ib-hdr100-split-2x"), status: report.Pass,
			findings: []findingRef{{"port.state/active", "mlx5_0/1"}}, contains: []string{"100 Gb/sec (2X HDR)"}, lacks: []string{"lane"}},
		// mlx5 reports a carrier-less RoCE port Disabled: the netdev is
		// already up, so the cable or the switch port is the fix.
		{name: "RoCE Disabled without carrier", dir: netFixture("roce-disabled-no-carrier"), status: report.Fail, exit: 19, rootCause: "port.state",
			findings: []findingRef{{"port.state/active", "mlx5_0/1"}, {"port.state/no-carrier", "mlx5_1/1"}},
			contains: []string{"`ethtool ens1f1np1`"}, lacks: []string{"ip link set ens1f1np1 up", "ibportstate"}},
		{name: "EFA has no LID to judge", dir: netFixture("aws-efa"), status: report.Pass,
			findings: []findingRef{{"port.state/active", "rdmap0s6/1"}}, contains: []string{"EFA (SRD)"}, lacks: []string{"subnet manager"}},
		{name: "Omni-Path with LIDs", dir: netFixture("hfi1-omnipath"), status: report.Pass,
			findings: []findingRef{{"port.state/active", "hfi1_0/1"}}, contains: []string{"Omni-Path", "LID 0x3"}},
		{name: "iWARP fixed rate is not judged as a width", dir: netFixture("cxgb4-iwarp"), status: report.Pass,
			findings: []findingRef{{"port.state/active", "cxgb4_0/1"}}, contains: []string{"iWARP"}},
		{name: "representor ports", dir: netFixture("sriov-switchdev-representors"), status: report.Pass,
			findings: []findingRef{{"port.state/active", "mlx5_0/1"}, {"port.state/active", "mlx5_0/2"}, {"port.state/active", "mlx5_0/3"}, {"port.state/active", "mlx5_1/1"}}},
	})
}

func TestHostKindsKernelModules(t *testing.T) {
	// kernel.modules judges the host as a whole: which modules it needs
	// is said in words only.
	present := []findingRef{{"kernel.modules/present", ""}}
	runNetCases(t, "kernel.modules", []netCase{
		// EFA connects through libfabric's address handles, not rdma_cm.
		{name: "EFA needs no rdma_cm", dir: netFixture("aws-efa"), status: report.Pass, findings: present,
			contains: []string{"rdma_cm: not loaded (not needed: no port here connects through rdma_cm)"}, lacks: []string{"modprobe rdma_ucm"}},
		{name: "Omni-Path modules", dir: netFixture("hfi1-omnipath"), status: report.Pass, findings: present, contains: []string{"hfi1: loaded"}},
		{name: "iWARP modules", dir: netFixture("cxgb4-iwarp"), status: report.Pass, findings: present,
			contains: []string{"iw_cxgb4: loaded", "rdma_cm: loaded (librdmacm connections)"}},
	})
}
