package checks_test

import (
	"fmt"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
)

// RDMA NICs of vendors other than Mellanox/NVIDIA, each as its driver
// registers it (sysfs/sysfstest/fixtures_unseen_vendors.go): a healthy one
// exits 0 and is named for what it is.

func TestUnseenVendorsPCIDevice(t *testing.T) {
	bound := func(addrs ...string) []findingRef {
		var out []findingRef
		for _, a := range addrs {
			out = append(out, findingRef{"pci.device/bound", a})
		}
		return out
	}
	var efas []string
	for bus := 0x10; bus <= 0x2f; bus++ {
		efas = append(efas, fmt.Sprintf("0000:%02x:00.0", bus))
	}
	// The vendor's name is the point: each NIC is named for what it is.
	runNetCases(t, "pci.device", []netCase{
		{name: "qedr RoCE", dir: netFixture("qedr-roce"), status: report.Pass, findings: bound("0000:41:00.0"),
			contains: []string{"Marvell FastLinQ QL41000 (qede) ×1"}},
		{name: "HNS on Kunpeng", dir: netFixture("hns-roce-arm64"), status: report.Pass, findings: bound("0000:7d:00.0", "0000:7d:00.1"),
			contains: []string{"HiSilicon HNS3 25GE RDMA (hns3) ×2"}},
		{name: "erdma", dir: netFixture("erdma-ecs"), status: report.Pass, findings: bound("0000:00:06.0"),
			contains: []string{"Alibaba Elastic RDMA (erdma) ×1"}},
		{name: "X722", dir: netFixture("x722-iwarp"), status: report.Pass, findings: bound("0000:3d:00.0"),
			contains: []string{"Intel X722 0x37d2 (i40e) ×1"}},
		{name: "many EFAs", dir: netFixture("efa-p5-many"), status: report.Pass, findings: bound(efas...),
			contains: []string{"AWS EFA (3rd gen) (efa) ×32"}, lacks: []string{"ENA"}},
		{name: "siw only warns", dir: netFixture("siw-softiwarp"), status: report.Warn, findings: []findingRef{{"pci.device/software-only", ""}},
			contains: []string{"siw0 on enp0s3"}},
		// ocrdma registered ocrdma0: an RDMA NIC the table does not
		// know is present, not missing; it was once "no RDMA-capable PCI
		// function" (exit 10) on a working host.
		{name: "driver outside the table", dir: netFixture("unknown-driver-nic"), status: report.Pass,
			findings: []findingRef{{"pci.device/driver-not-in-table", "0000:c3:00.0"}},
			contains: []string{"ocrdma0 on 0000:c3:00.0 (driver be2net)"}, lacks: []string{"no RDMA-capable PCI function", "seated"}},
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
	iwarp := []findingRef{{"roce.config/iwarp", ""}}
	runNetCases(t, "roce.config", []netCase{
		{name: "qedr RoCE", dir: netFixture("qedr-roce"), status: report.Pass, findings: []findingRef{{"roce.config/ok", "qedr0/1"}}},
		{name: "qedr iWARP", dir: netFixture("qedr-iwarp"), status: report.Skip, findings: iwarp},
		{name: "erdma is iWARP", dir: netFixture("erdma-ecs"), status: report.Skip, findings: iwarp},
		{name: "E810 iWARP", dir: netFixture("irdma-e810-iwarp"), status: report.Skip, findings: iwarp},
		{name: "X722 iWARP", dir: netFixture("x722-iwarp"), status: report.Skip, findings: iwarp},
		// usNIC: link layer Ethernet, node_type 6 (usNIC UDP). Judged as
		// RoCE it failed with "no netdev carries it" (exit 20).
		{name: "usNIC is not RoCE", dir: netFixture("usnic-cisco-vic"), status: report.Skip,
			findings: []findingRef{{"roce.config/usnic", ""}}, lacks: []string{"no netdev carries it"}},
	})
}

func TestUnseenVendorsNetdevs(t *testing.T) {
	runNetCases(t, "rdma.devices", []netCase{
		// hv_netvsc's eth0 is the MANA VF's master but no bond: not a LAG.
		{name: "MANA under netvsc is no LAG", dir: netFixture("mana-azure"), status: report.Pass,
			findings: []findingRef{{"rdma.devices/registered", "7870:00:00.0"}, {"rdma.devices/present", ""}},
			contains: []string{"Microsoft Azure MANA: mana_0"}, lacks: []string{"LAG"}},
	})
	runNetCases(t, "roce.config", []netCase{
		{name: "MANA port on netvsc's eth0", dir: netFixture("mana-azure"), status: report.Pass,
			findings: []findingRef{{"roce.config/ok", "mana_0/1"}}, contains: []string{"mana_0 port 1 → eth0: up"}},
		{name: "rxe on a VLAN", dir: netFixture("rxe-on-vlan"), status: report.Pass,
			findings: []findingRef{{"roce.config/ok", "rxe0/1"}}, contains: []string{"rxe0 port 1 → enp0s3.100: up"}},
	})
	runNetCases(t, "counters.errors", []netCase{
		// PMA counters beside hw_counters: both read, none double-failed.
		{name: "bnxt_re with PMA counters", dir: netFixture("bnxt-re-pma"), status: report.Pass,
			findings: []findingRef{{"counters.errors/zero", "bnxt_re0/1"}}, contains: []string{"17 error counters read"}},
	})
}

func TestUnseenVendorsX722BeforeIrdma(t *testing.T) {
	// Before Linux 5.14 i40iw drives the X722: requiring irdma failed the
	// host (exit 13) with a modprobe of a module that kernel lacks.
	runNetCases(t, "kernel.modules", []netCase{
		{name: "i40iw, not irdma", dir: netFixture("x722-i40iw-old-kernel"), status: report.Pass, findings: []findingRef{{"kernel.modules/present", ""}},
			contains: []string{"i40iw: loaded (needed by Intel X722 (i40iw, iWARP))"}, lacks: []string{"irdma"}},
		{name: "irdma on a current kernel", dir: netFixture("x722-iwarp"), status: report.Pass, findings: []findingRef{{"kernel.modules/present", ""}},
			contains: []string{"irdma: loaded (needed by Intel X722 (irdma, iWARP))"}, lacks: []string{"i40iw"}},
	})
	runNetCases(t, "libibverbs.install", []netCase{
		{name: "the i40iw provider", dir: netFixture("x722-i40iw-old-kernel"), status: report.Pass,
			findings: []findingRef{{"libibverbs.install/provider", "i40iw"}, {"libibverbs.install/ok", "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"}}},
	})
}
