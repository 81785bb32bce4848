package checks_test

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
)

// RDMA NICs of vendors other than Mellanox/NVIDIA, each as its driver
// registers it (sysfs/sysfstest/fixtures_unseen_vendors.go): a healthy one
// exits 0 and is named for what it is.

func TestUnseenVendorsPCIDevice(t *testing.T) {
	runNetCases(t, "pci.device", []netCase{
		{name: "qedr RoCE", dir: netFixture("qedr-roce"), status: report.Pass, contains: []string{"Marvell FastLinQ QL41000 (qede) ×1"}},
		{name: "HNS on Kunpeng", dir: netFixture("hns-roce-arm64"), status: report.Pass, contains: []string{"HiSilicon HNS3 25GE RDMA (hns3) ×2"}},
		{name: "erdma", dir: netFixture("erdma-ecs"), status: report.Pass, contains: []string{"Alibaba Elastic RDMA (erdma) ×1"}},
		{name: "X722", dir: netFixture("x722-iwarp"), status: report.Pass, contains: []string{"Intel X722 0x37d2 (i40e) ×1"}},
		{name: "many EFAs", dir: netFixture("efa-p5-many"), status: report.Pass, contains: []string{"32 RDMA NIC function(s): AWS EFA (3rd gen) (efa) ×32"},
			lacks: []string{"ENA"}},
		{name: "siw only warns", dir: netFixture("siw-softiwarp"), status: report.Warn, contains: []string{"only software RDMA: siw0 on enp0s3"}},
		// ionic_rdma registered ionic_0: an RDMA NIC the table does not
		// know is present, not missing; it was once "no RDMA-capable PCI
		// function" (exit 10) on a working host.
		{name: "driver outside the table", dir: netFixture("unknown-driver-nic"), status: report.Pass,
			contains: []string{"present, not judged", "ionic_0 on 0000:c3:00.0 (driver ionic): driver not in rdmadoctor's table, not judged"},
			lacks:    []string{"no RDMA-capable PCI function", "seated"}},
	})
}

func TestUnseenVendorsHealthyExitZero(t *testing.T) {
	for _, name := range []string{"qedr-roce", "qedr-iwarp", "hns-roce-arm64", "erdma-ecs", "x722-iwarp", "irdma-e810-iwarp",
		"siw-softiwarp", "efa-p5-many", "unknown-driver-nic", "mana-azure", "bnxt-re-pma", "rxe-on-vlan", "usnic-cisco-vic", "x722-i40iw-old-kernel"} {
		t.Run(name, func(t *testing.T) {
			r := hwRun(t, netFixture(name), checks.Options{})
			for _, c := range r.Checks {
				if c.Status == report.Fail || c.Status == report.Error {
					t.Errorf("%s %s: %s", c.ID, c.Status, c.Summary)
				}
			}
			if r.ExitCode != 0 {
				t.Fatalf("a healthy %s host exits %d (root cause %s)", name, r.ExitCode, deref(r.RootCause))
			}
		})
	}
}

func TestUnseenVendorsTransport(t *testing.T) {
	runNetCases(t, "roce.config", []netCase{
		{name: "qedr RoCE", dir: netFixture("qedr-roce"), status: report.Pass, contains: []string{"RoCE v2 GIDs present"}},
		{name: "qedr iWARP", dir: netFixture("qedr-iwarp"), status: report.Skip, contains: []string{"iWARP: qedr0 port 1"}},
		{name: "erdma is iWARP", dir: netFixture("erdma-ecs"), status: report.Skip, contains: []string{"iWARP: erdma_0 port 1"}},
		{name: "E810 iWARP", dir: netFixture("irdma-e810-iwarp"), status: report.Skip, contains: []string{"iWARP: irdma0 port 1"}},
		{name: "X722 iWARP", dir: netFixture("x722-iwarp"), status: report.Skip, contains: []string{"iWARP: irdma0 port 1"}},
		// usNIC: link layer Ethernet, node_type 6 (usNIC UDP). Judged as
		// RoCE it failed with "no netdev carries it" (exit 20).
		{name: "usNIC is not RoCE", dir: netFixture("usnic-cisco-vic"), status: report.Skip,
			contains: []string{"no RoCE port (usNIC (UDP): usnic_0 port 1)", "plain UDP/IP"}, lacks: []string{"no netdev carries it"}},
	})
}

func TestUnseenVendorsNetdevs(t *testing.T) {
	runNetCases(t, "rdma.devices", []netCase{
		// hv_netvsc's eth0 is the MANA VF's master but no bond: not a LAG.
		{name: "MANA under netvsc is no LAG", dir: netFixture("mana-azure"), status: report.Pass,
			contains: []string{"7870:00:00.0 Microsoft Azure MANA: mana_0"}, lacks: []string{"LAG"}},
	})
	runNetCases(t, "roce.config", []netCase{
		{name: "MANA port on netvsc's eth0", dir: netFixture("mana-azure"), status: report.Pass,
			contains: []string{"mana_0 port 1 → eth0: up", "10.0.0.4/24 on eth0"}},
		{name: "rxe on a VLAN", dir: netFixture("rxe-on-vlan"), status: report.Pass,
			contains: []string{"rxe0 port 1 → enp0s3.100: up", "192.0.2.31/24 on enp0s3.100"}},
	})
	runNetCases(t, "counters.errors", []netCase{
		// PMA counters beside hw_counters: both read, none double-failed.
		{name: "bnxt_re with PMA counters", dir: netFixture("bnxt-re-pma"), status: report.Pass,
			contains: []string{"bnxt_re0 port 1: 17 error counters read, all zero"}},
	})
}

func TestUnseenVendorsX722BeforeIrdma(t *testing.T) {
	// Before Linux 5.14 i40iw drives the X722: requiring irdma failed the
	// host (exit 13) with a modprobe of a module that kernel lacks.
	runNetCases(t, "kernel.modules", []netCase{
		{name: "i40iw, not irdma", dir: netFixture("x722-i40iw-old-kernel"), status: report.Pass,
			contains: []string{"i40iw: loaded (needed by Intel X722 (i40iw, iWARP))"}, lacks: []string{"irdma"}},
		{name: "irdma on a current kernel", dir: netFixture("x722-iwarp"), status: report.Pass,
			contains: []string{"irdma: loaded (needed by Intel X722 (irdma, iWARP))"}, lacks: []string{"i40iw"}},
	})
	runNetCases(t, "libibverbs.install", []netCase{
		{name: "the i40iw provider", dir: netFixture("x722-i40iw-old-kernel"), status: report.Pass,
			contains: []string{"provider i40iw for i40iw0"}},
	})
}
