package checks_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// The summary and remedy as a person reads them, and the exit code and
// root cause of a whole run; which finding each host gives is
// TestPCIDeviceFindings'.
func TestPCIDeviceFixtures(t *testing.T) {
	for _, tc := range []struct {
		fixture   string
		status    report.Status
		exit      int
		rootCause string
		says      string
		remedy    string
	}{
		{"cx5-roce-healthy", report.Pass, 0, "", "2 RDMA NIC function(s): ConnectX-5 (mlx5_core) ×2", ""},
		{"rxe-softroce", report.Warn, 0, "", "only software RDMA: rxe0 on enp0s3 — no RDMA NIC", "test host"},
		{"no-rdma-nic", report.Fail, 10, "pci.device", "no RDMA-capable PCI function", "`lspci -nnk -d ::0207; lspci -nnk -d ::0200`"},
		{"mlx5-vfio-passthrough", report.Fail, 10, "pci.device", "0000:3b:00.0 ConnectX-5 bound to vfio-pci (passthrough), not usable on the host",
			"`driverctl unset-override 0000:3b:00.0`"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			r := hwRun(t, filepath.Join(hostsDir, tc.fixture), checks.Options{}, "pci.device")
			c := hwResult(t, r, "pci.device")
			if c.Status != tc.status || !strings.HasPrefix(c.Summary, tc.says) {
				t.Fatalf("%s: %s; want %s saying %q", c.Status, c.Summary, tc.status, tc.says)
			}
			if !strings.Contains(c.Remedy, tc.remedy) {
				t.Errorf("remedy %q does not say %q", c.Remedy, tc.remedy)
			}
			if r.ExitCode != tc.exit || (tc.rootCause != "" && (r.RootCause == nil || *r.RootCause != tc.rootCause)) {
				t.Errorf("exit %d root cause %v, want %d %s", r.ExitCode, r.RootCause, tc.exit, tc.rootCause)
			}
		})
	}
}

// pciVariant builds a host with the given NICs (and modules) and runs one
// check on it alone.
func pciVariant(t *testing.T, id string, mods []string, nics ...sysfstest.NIC) checks.Result {
	t.Helper()
	return hwRunOne(t, pciVariantDir(t, mods, nics...), id, checks.Options{})
}

func pciVariantDir(t *testing.T, mods []string, nics ...sysfstest.NIC) string {
	t.Helper()
	h := sysfstest.CX5RoCE()
	h.NICs = nics
	h.Modules = append(h.Modules, mods...)
	return hwWrite(t, sysfstest.Build(h))
}

// pciNICs are NICs that test the vendor-neutral classification: an
// Intel X722 (RDMA through irdma), an X710 (no RDMA), a Spectrum switch
// ASIC (Mellanox, not a NIC), a ConnectX without a driver and an X722
// held by vfio-pci.
func pciNICs() (x722, x710, spectrum, unbound, x722vfio sysfstest.NIC) {
	x722 = sysfstest.NIC{Addr: "0000:1a:00.0", RootPort: "0000:17:00.0", Vendor: 0x8086, Device: 0x37d2, Class: 0x020000,
		SubVendor: 0x8086, SubDevice: 0x0001, Driver: "i40e", IBDev: "irdma0", NodeGUID: "a4bf:0100:0000:0001",
		Ports: []sysfstest.Port{{State: "4: ACTIVE", PhysState: "5: LinkUp", Rate: "10 Gb/sec (1X QDR)", LinkLayer: "Ethernet",
			Netdev: "eno1", MAC: "a4:bf:01:00:00:01", MTU: 1500, OperUp: true, Addrs: []string{"192.0.2.50/24"}}}}
	x710 = x722
	x710.Device, x710.IBDev, x710.Ports = 0x1572, "", nil
	spectrum = sysfstest.NIC{Addr: "0000:03:00.0", Vendor: 0x15b3, Device: 0xcf6c, Class: 0x020000, Driver: "mlxsw_spectrum2"}
	unbound = sysfstest.CX5RoCE().NICs[0]
	unbound.Driver, unbound.IBDev, unbound.Ports = "", "", nil
	x722vfio = x722
	x722vfio.Driver, x722vfio.IBDev, x722vfio.Ports = "vfio-pci", "", nil
	return
}

// TestPCIDeviceFindings: each host gives the findings named, function by
// function (its PCI address), or about the host when it has no RDMA NIC.
func TestPCIDeviceFindings(t *testing.T) {
	x722, x710, spectrum, unbound, x722vfio := pciNICs()
	busGone := func() string {
		tr := sysfstest.Build(sysfstest.CX5RoCE())
		tr.Remove("/sys/bus/pci")
		return hwWrite(t, tr)
	}()
	for _, tc := range []struct {
		name, dir string
		want      []findingRef
	}{
		{"healthy RoCE", netFixture("cx5-roce-healthy"), []findingRef{{"pci.device/bound", "0000:3b:00.0"}, {"pci.device/bound", "0000:3b:00.1"}}},
		{"software RDMA only", netFixture("rxe-softroce"), []findingRef{{"pci.device/software-only", ""}}},
		{"no RDMA NIC", netFixture("no-rdma-nic"), []findingRef{{"pci.device/no-rdma-nic", ""}}},
		{"a card passed through", netFixture("mlx5-vfio-passthrough"),
			[]findingRef{{"pci.device/passthrough", "0000:3b:00.0"}, {"pci.device/bound", "0000:3b:00.1"}}},
		{"a device of a driver outside the table", netFixture("unknown-driver-nic"), []findingRef{{"pci.device/driver-not-in-table", "0000:c3:00.0"}}},
		{"X722 bound to i40e is an RDMA NIC", pciVariantDir(t, []string{"i40e", "irdma"}, x722), []findingRef{{"pci.device/bound", "0000:1a:00.0"}}},
		{"X710 bound to i40e is not", pciVariantDir(t, []string{"i40e"}, x710), []findingRef{{"pci.device/no-rdma-nic", ""}}},
		{"a Spectrum switch ASIC is not", pciVariantDir(t, nil, spectrum), []findingRef{{"pci.device/no-rdma-nic", ""}}},
		{"unbound ConnectX", pciVariantDir(t, nil, unbound), []findingRef{{"pci.device/unbound", "0000:3b:00.0"}}},
		{"X722 bound to vfio-pci", pciVariantDir(t, nil, x722vfio), []findingRef{{"pci.device/passthrough", "0000:1a:00.0"}}},
		{"PCI bus unreadable", busGone, []findingRef{{"pci.device/bus-unreadable", ""}}},
		// A pod in exclusive netns mode whose host runs rxe: the device
		// stays in the host's namespace (rxe cannot move), the pod sees none.
		{"exclusive mode, rxe loaded, nothing here", fixtureEdited(t, "no-rdma-nic", func(tr *sysfstest.Tree) {
			tr.Facts.RDMASystem = &sysfs.RDMASystem{NetnsMode: "exclusive"}
			tr.Attr("/sys/module/rdma_rxe/refcnt", "0")
		}), []findingRef{{"pci.device/none-in-this-netns", ""}}},
		{"exclusive mode, no software driver", fixtureEdited(t, "no-rdma-nic", func(tr *sysfstest.Tree) {
			tr.Facts.RDMASystem = &sysfs.RDMASystem{NetnsMode: "exclusive"}
		}), []findingRef{{"pci.device/no-rdma-nic", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := hwRunOne(t, tc.dir, "pci.device", checks.Options{})
			if diff := cmp.Diff(tc.want, refs(res.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s: %s", diff, res.Status, res.Summary)
			}
		})
	}
}

func TestPCIDeviceClassification(t *testing.T) {
	x722, x710, _, unbound, _ := pciNICs()
	// A product the table names, with its driver, in the summary.
	if res := pciVariant(t, "pci.device", []string{"i40e", "irdma"}, x722); res.Summary != "1 RDMA NIC function(s): Intel X722 0x37d2 (i40e) ×1" {
		t.Errorf("X722: %s", res.Summary)
	}
	// A function without a driver is told to load the driver of its family.
	if res := pciVariant(t, "pci.device", nil, unbound); !strings.HasPrefix(res.Remedy, "Load the driver: `modprobe mlx5_core`") {
		t.Errorf("unbound ConnectX: %s", res.Remedy)
	}
	// The X722's RDMA module is irdma, the same as the E810's.
	km := pciVariant(t, "kernel.modules", []string{"i40e"}, x722)
	if km.Status != report.Fail || !strings.Contains(km.Summary, "irdma not loaded") {
		t.Errorf("kernel.modules on an X722 without irdma: %s: %s", km.Status, km.Summary)
	}
	// An X710 needs no RDMA module at all.
	km = pciVariant(t, "kernel.modules", []string{"i40e"}, x710)
	if strings.Contains(km.Expected, "irdma") {
		t.Errorf("kernel.modules asks an X710 for irdma: %s", km.Expected)
	}
}

// SR-IOV VFs bound to vfio-pci are passed through to VMs on purpose: listed,
// not failed, and not expected to have an RDMA device on the host.
func TestPCIDeviceAssignedVFs(t *testing.T) {
	tr := sysfstest.LargeHost(1, 1, 2)
	const vf = "/sys/devices/pci0000:10/0000:10:00.0/0000:11:00.3"
	tr.Dir("/sys/bus/pci/drivers/vfio-pci")
	tr.RelLink(vf+"/driver", "/sys/bus/pci/drivers/vfio-pci")
	tr.Remove(vf + "/infiniband")
	tr.Remove("/sys/class/infiniband/mlx5_2")
	dir := hwWrite(t, tr)
	pd := hwRunOne(t, dir, "pci.device", checks.Options{})
	var assigned []findingRef
	for _, f := range refs(pd.Findings) {
		if f.ID != "pci.device/bound" {
			assigned = append(assigned, f)
		}
	}
	if diff := cmp.Diff([]findingRef{{"pci.device/vf-assigned", "0000:11:00.3"}}, assigned); diff != "" || pd.Status != report.Pass || len(pd.Findings) != 6 {
		t.Errorf("pci.device: %s: %s; findings but the bound ones (-want +got):\n%s", pd.Status, pd.Summary, diff)
	}
	if !strings.HasSuffix(pd.Summary, "; 1 VF(s) assigned to VMs (passthrough), not judged") {
		t.Errorf("pci.device: %s", pd.Summary)
	}
	rd := hwRunOne(t, dir, "rdma.devices", checks.Options{})
	if rd.Status != report.Pass || !strings.Contains(strings.Join(rd.Details, "\n"), "0000:11:00.3 ConnectX-6 Dx/Lx VF (VF of 0000:11:00.0): bound to vfio-pci — assigned to a VM, not judged") {
		t.Errorf("rdma.devices: %s: %s\n%s", rd.Status, rd.Summary, strings.Join(rd.Details, "\n"))
	}
	km := hwRunOne(t, dir, "kernel.modules", checks.Options{})
	if km.Status != report.Pass {
		t.Errorf("kernel.modules: %s: %s", km.Status, km.Summary)
	}
}

// Every finding of the hardware-path checks states what was observed and
// what a healthy host has, and every fail, warn and error says what to do
// (for an error: how to look by hand) — on every fixture and on hosts whose
// files cannot be read.
func TestHardwareChecksStateObservedExpectedRemedy(t *testing.T) {
	ids := []string{"pci.device", "pci.link", "kernel.version", "kernel.modules", "rdma.devices", "uverbs.nodes", "libibverbs.install"}
	dirs := map[string]string{}
	for _, f := range sysfstest.Fixtures() {
		dirs[f] = filepath.Join(hostsDir, f)
	}
	broken := map[string]func(*sysfstest.Tree){
		"no PCI bus":    func(tr *sysfstest.Tree) { tr.Remove("/sys/bus/pci") },
		"no RDMA class": func(tr *sysfstest.Tree) { tr.Remove("/sys/class/infiniband"); tr.File("/sys/class/infiniband", "x") },
		"no uverbs class": func(tr *sysfstest.Tree) {
			tr.Remove("/sys/class/infiniband_verbs")
			tr.File("/sys/class/infiniband_verbs", "x")
		},
		"no proc":         func(tr *sysfstest.Tree) { tr.Remove("/proc") },
		"no loader cache": func(tr *sysfstest.Tree) { tr.File("/etc/ld.so.cache", "not a cache") },
		"no dev nodes":    func(tr *sysfstest.Tree) { tr.Facts.DevNodes = nil },
		"no link files": func(tr *sysfstest.Tree) {
			for p := range tr.Files {
				if strings.HasSuffix(p, "_link_speed") {
					tr.File(p, "")
				}
			}
		},
	}
	for name, mut := range broken {
		tr := sysfstest.Build(sysfstest.CX5RoCE())
		mut(tr)
		dirs[name] = hwWrite(t, tr)
	}
	for name, dir := range dirs {
		for _, id := range ids {
			res := hwRunOne(t, dir, id, checks.Options{})
			if res.Status == report.Pass {
				continue
			}
			if res.Observed == "" || res.Expected == "" {
				t.Errorf("%s on %s: %s without observed/expected: %s", id, name, res.Status, res.Summary)
			}
			if res.Status != report.Skip && res.Remedy == "" {
				t.Errorf("%s on %s: %s without a remedy: %s", id, name, res.Status, res.Summary)
			}
		}
	}
}
