package checks

import (
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Driver describes one RDMA driver family: the kernel PCI driver, the
// modules that must be loaded for its RDMA device to exist, and the
// rdma-core provider that user space needs. Source: RDMA-FACTS, "Drivers,
// modules, providers".
type Driver struct {
	PCIDriver string   // driver bound to the PCI function ("mlx5_core"); "" for software
	Modules   []string // beyond ib_core + ib_uverbs, in load order
	Provider  string   // rdma-core provider name: lib<Provider>-rdmav*.so, <Provider>.driver
	Vendor    uint16   // PCI vendor ID; 0 for software devices
	Family    string   // human name of the family
	Software  bool
	DevPrefix string // RDMA device name prefix ("mlx5_")
	// DeviceIDs, when set, are the only device IDs (of Vendor) that are RDMA
	// NICs under this PCI driver: i40e drives many Intel NICs, and only the
	// X722 has an RDMA engine.
	DeviceIDs []uint16
	// RDMAOptional: the PCI driver also drives functions that run no
	// RDMA (ionic: the RDMA engine is a firmware capability of the LIF,
	// IONIC_LIF_CAP_RDMA), so a function is an RDMA NIC only when an RDMA
	// device sits on it or the RDMA module is loaded.
	RDMAOptional bool
}

// covers reports whether a function bound to d's PCI driver is an RDMA NIC.
func (d *Driver) covers(fn sysfs.PCIFunction) bool {
	if len(d.DeviceIDs) == 0 {
		return true
	}
	if fn.Vendor != d.Vendor {
		return false
	}
	for _, id := range d.DeviceIDs {
		if id == fn.Device {
			return true
		}
	}
	return false
}

// RDMAModule is the module that registers the RDMA device: the last one.
func (d *Driver) RDMAModule() string { return d.Modules[len(d.Modules)-1] }

// drivers is the vendor-neutral driver table.
var drivers = []*Driver{
	{PCIDriver: "mlx5_core", Modules: []string{"mlx5_core", "mlx5_ib"}, Provider: "mlx5", Vendor: 0x15b3, Family: "NVIDIA ConnectX (mlx5)", DevPrefix: "mlx5_"},
	{PCIDriver: "mlx4_core", Modules: []string{"mlx4_core", "mlx4_ib"}, Provider: "mlx4", Vendor: 0x15b3, Family: "Mellanox ConnectX-3 (mlx4)", DevPrefix: "mlx4_"},
	{PCIDriver: "bnxt_en", Modules: []string{"bnxt_en", "bnxt_re"}, Provider: "bnxt_re", Vendor: 0x14e4, Family: "Broadcom NetXtreme-E", DevPrefix: "bnxt_re"},
	{PCIDriver: "ice", Modules: []string{"ice", "irdma"}, Provider: "irdma", Vendor: 0x8086, Family: "Intel E810 (irdma)", DevPrefix: "irdma"},
	{PCIDriver: "i40e", Modules: []string{"i40e", "irdma"}, Provider: "irdma", Vendor: 0x8086, Family: "Intel X722 (irdma, iWARP)", DevPrefix: "irdma",
		DeviceIDs: x722DeviceIDs},
	{PCIDriver: "efa", Modules: []string{"efa"}, Provider: "efa", Vendor: 0x1d0f, Family: "AWS Elastic Fabric Adapter", DevPrefix: "efa"},
	{PCIDriver: "qede", Modules: []string{"qede", "qedr"}, Provider: "qedr", Vendor: 0x1077, Family: "Marvell FastLinQ (qedr)", DevPrefix: "qedr"},
	{PCIDriver: "hns3", Modules: []string{"hns3", "hns_roce_hw_v2"}, Provider: "hns", Vendor: 0x19e5, Family: "HiSilicon HNS RoCE", DevPrefix: "hns_"},
	{PCIDriver: "cxgb4", Modules: []string{"cxgb4", "iw_cxgb4"}, Provider: "cxgb4", Vendor: 0x1425, Family: "Chelsio T5/T6 iWARP", DevPrefix: "cxgb4_"},
	{PCIDriver: "erdma", Modules: []string{"erdma"}, Provider: "erdma", Vendor: 0x1ded, Family: "Alibaba Elastic RDMA", DevPrefix: "erdma"},
	{PCIDriver: "mana", Modules: []string{"mana", "mana_ib"}, Provider: "mana", Vendor: 0x1414, Family: "Microsoft Azure MANA", DevPrefix: "mana_"},
	// AMD Pensando (Pollara 400, DSC): the ionic Ethernet driver adds an
	// auxiliary device for a LIF with IONIC_LIF_CAP_RDMA
	// (ionic_auxbus_register), ionic_rdma (drivers/infiniband/hw/ionic)
	// registers "ionic_%d" on the PCI function; rdma-core's provider is
	// ionic.
	{PCIDriver: "ionic", Modules: []string{"ionic", "ionic_rdma"}, Provider: "ionic", Vendor: 0x1dd8, Family: "AMD Pensando (ionic)", DevPrefix: "ionic_",
		RDMAOptional: true},
	{PCIDriver: "hfi1", Modules: []string{"hfi1"}, Provider: "hfi1verbs", Vendor: 0x8086, Family: "Intel Omni-Path (hfi1)", DevPrefix: "hfi1_",
		DeviceIDs: []uint16{0x24f0, 0x24f1}},
	// Cornelis Omni-Path Express (CN5000) under the hfi1 of Cornelis's OPX
	// suite: the same driver, modules and provider as Intel's OPA 100
	// (the IDs are inferred: vendor 0x434e).
	{PCIDriver: "hfi1", Modules: []string{"hfi1"}, Provider: "hfi1verbs", Vendor: 0x434e, Family: "Cornelis Omni-Path Express (hfi1)", DevPrefix: "hfi1_",
		DeviceIDs: []uint16{0x0001}},
	{Modules: []string{"rdma_rxe"}, Provider: "rxe", Family: "Soft-RoCE (rxe)", Software: true, DevPrefix: "rxe"},
	{Modules: []string{"siw"}, Provider: "siw", Family: "Soft-iWARP (siw)", Software: true, DevPrefix: "siw"},
}

// i40iwDriver is the X722's RDMA driver before Linux 5.14 (and on
// distribution kernels that never took irdma): i40iw registered the
// device as "i40iw%d" (i40iw_verbs.c, i40iw_register_rdma_device) and
// rdma-core had the i40iw provider until irdma replaced it (rdma-core 36).
// It is not in drivers: i40e functions map to irdma unless the host shows
// i40iw (legacyX722).
var i40iwDriver = &Driver{PCIDriver: "i40e", Modules: []string{"i40e", "i40iw"}, Provider: "i40iw", Vendor: 0x8086,
	Family: "Intel X722 (i40iw, iWARP)", DevPrefix: "i40iw", DeviceIDs: x722DeviceIDs}

// legacyX722 returns the i40iw entry for an X722 served by i40iw — its
// module is loaded or built in, or its device is named i40iw* — else d:
// requiring irdma there failed working hosts on kernels before 5.14 with
// "irdma not loaded" and a modprobe of a module that does not exist.
func legacyX722(d *Driver, devName string, loaded func(string) bool) *Driver {
	if d == nil || d.PCIDriver != "i40e" {
		return d
	}
	if strings.HasPrefix(devName, "i40iw") || (loaded != nil && loaded("i40iw") && !loaded("irdma")) {
		return i40iwDriver
	}
	return d
}

// CoreModules are needed by every RDMA device used from user space.
var CoreModules = []string{"ib_core", "ib_uverbs"}

// CMModules are needed by applications that connect through librdmacm
// (most MPI, NCCL and storage stacks); without them verbs still work.
var CMModules = []string{"rdma_cm", "rdma_ucm"}

// x722DeviceIDs are the X722 physical functions of the kernel's i40e
// (i40e_devids.h: KX, QSFP, SFP, 1G BASE-T, 10G BASE-T, SFP-I, SFP-A), the
// i40e functions whose iWARP engine irdma (i40iw before Linux 5.14) drives.
var x722DeviceIDs = []uint16{0x37ce, 0x37cf, 0x37d0, 0x37d1, 0x37d2, 0x37d3, 0x0dda}

// DriverByPCI returns the table entry for a PCI driver name, whatever the
// device: an RDMA device that exists on an i40e function is an X722's.
func DriverByPCI(name string) *Driver {
	for _, d := range drivers {
		if d.PCIDriver != "" && d.PCIDriver == name {
			return d
		}
	}
	return nil
}

// driverForFunction returns the table entry of the driver bound to fn when
// that driver makes fn an RDMA NIC, nil otherwise.
func driverForFunction(fn sysfs.PCIFunction) *Driver {
	for _, d := range drivers {
		if d.PCIDriver != "" && d.PCIDriver == fn.Driver && d.covers(fn) {
			return d
		}
	}
	return nil
}

// softwareDriver guesses a software device's driver from its name or the
// loaded modules ("rxe0", "siw_eth0"); rxe when nothing tells.
func softwareDriver(devName string, loaded func(string) bool) *Driver {
	rxe, siw := drivers[len(drivers)-2], drivers[len(drivers)-1]
	switch {
	case len(devName) >= 3 && devName[:3] == "siw":
		return siw
	case len(devName) >= 3 && devName[:3] == "rxe":
		return rxe
	case loaded != nil && loaded("siw") && !loaded("rdma_rxe"):
		return siw
	}
	return rxe
}

// moduleInUse reports, for softwareDriver, whether a module is loaded or
// built in; without a module list (it could not be read) none is.
func moduleInUse(mods *sysfs.Modules) func(string) bool {
	return func(m string) bool {
		if mods == nil {
			return false
		}
		st := mods.State(m)
		return st == sysfs.ModuleLoaded || st == sysfs.ModuleBuiltin
	}
}

// deviceDriver is the driver an RDMA device belongs to: a hardware device's
// by its PCI driver, a software device's (or one without a PCI address)
// guessed from its name and the modules in use; nil when unknown.
func deviceDriver(d sysfs.RDMADevice, loaded func(string) bool) *Driver {
	if d.Software || d.PCIAddr == "" {
		return softwareDriver(d.Name, loaded)
	}
	if _, ok := subFunctionPF(d); ok {
		return DriverByPCI("mlx5_core")
	}
	return legacyX722(DriverByPCI(d.Driver), d.Name, loaded)
}

// subFunctionPF tells an mlx5 sub-function's RDMA device and returns its
// PF. mlx5_ib registers an SF's device below the SF's auxiliary device
// (ib_dev.dev.parent = mdev->device; mlx5/core/sf/dev/dev.c names it
// mlx5_core.sf.<id>, below the PF), so its "device" link names
// mlx5_core.sf.N and its driver is the auxiliary mlx5_core.sf driver, not
// a PCI function and a PCI driver: the provider is still mlx5's.
func subFunctionPF(d sysfs.RDMADevice) (string, bool) {
	parts := strings.Split(d.SysPath, "/")
	for i, part := range parts {
		if strings.HasPrefix(part, "mlx5_core.sf.") && i > 0 && sysfs.IsPCIAddress(parts[i-1]) {
			return parts[i-1], true
		}
	}
	return "", false
}

// mellanoxProducts names the Mellanox/NVIDIA device IDs (PF and VF).
var mellanoxProducts = map[uint16]string{
	0x1003: "ConnectX-3", 0x1004: "ConnectX-3 VF", 0x1007: "ConnectX-3 Pro",
	0x1013: "ConnectX-4", 0x1014: "ConnectX-4 VF",
	0x1015: "ConnectX-4 Lx", 0x1016: "ConnectX-4 Lx VF",
	0x1017: "ConnectX-5", 0x1018: "ConnectX-5 VF",
	0x1019: "ConnectX-5 Ex", 0x101a: "ConnectX-5 Ex VF",
	0x101b: "ConnectX-6", 0x101c: "ConnectX-6 VF",
	0x101d: "ConnectX-6 Dx", 0x101e: "ConnectX-6 Dx/Lx VF",
	0x101f: "ConnectX-6 Lx", 0x1021: "ConnectX-7", 0x1023: "ConnectX-8",
	0xa2d6: "BlueField-2", 0xa2dc: "BlueField-3",
}

var vendorNames = map[uint16]string{
	0x15b3: "Mellanox/NVIDIA", 0x14e4: "Broadcom", 0x8086: "Intel", 0x1d0f: "Amazon",
	0x1077: "QLogic/Marvell", 0x19e5: "Huawei", 0x1425: "Chelsio", 0x1ded: "Alibaba",
	0x1414: "Microsoft", 0x1af4: "Red Hat (virtio)", 0x1ae0: "Google", 0x1dd8: "AMD Pensando", 0x434e: "Cornelis Networks",
}

// VendorName names a PCI vendor ID, or prints it.
func VendorName(id uint16) string {
	if n, ok := vendorNames[id]; ok {
		return n
	}
	return fmt.Sprintf("vendor 0x%04x", id)
}

// ProductName names a PCI function for people: the ConnectX generation for
// Mellanox IDs, else the vendor and the class.
func ProductName(vendor, device uint16, class uint32) string {
	if vendor == 0x15b3 {
		if p, ok := mellanoxProducts[device]; ok {
			return p
		}
		return fmt.Sprintf("Mellanox device 0x%04x", device)
	}
	if p, ok := productNames[[2]uint16{vendor, device}]; ok {
		return p
	}
	if vendor == 0x8086 {
		for _, id := range x722DeviceIDs {
			if id == device {
				return fmt.Sprintf("Intel X722 0x%04x", device)
			}
		}
	}
	kind := "device"
	switch class >> 8 {
	case 0x0200:
		kind = "Ethernet controller"
	case 0x0207:
		kind = "InfiniBand controller"
	case 0x0280:
		kind = "network controller"
	case 0x0208:
		kind = "fabric controller"
	}
	return fmt.Sprintf("%s %s 0x%04x", VendorName(vendor), kind, device)
}

// knownRDMANICs lists vendor:device pairs that are RDMA NICs whatever driver
// is bound, or none (so an unbound or passed-through one is a finding, not
// noise). Mellanox network-class functions are all RDMA-capable and handled
// by vendor.
var knownRDMANICs = map[[2]uint16]string{
	{0x1d0f, 0xefa0}: "efa", {0x1d0f, 0xefa1}: "efa", {0x1d0f, 0xefa2}: "efa", {0x1d0f, 0xefa3}: "efa",
	{0x1ded, 0x107f}: "erdma", {0x1414, 0x00ba}: "mana",
	// Intel X722 (x722DeviceIDs).
	{0x8086, 0x37ce}: "i40e", {0x8086, 0x37cf}: "i40e", {0x8086, 0x37d0}: "i40e", {0x8086, 0x37d1}: "i40e",
	{0x8086, 0x37d2}: "i40e", {0x8086, 0x37d3}: "i40e", {0x8086, 0x0dda}: "i40e",
	// Intel Omni-Path HFI 100 (discrete, integrated).
	{0x8086, 0x24f0}: "hfi1", {0x8086, 0x24f1}: "hfi1",
}

// productNames names RDMA NICs of other vendors by their PCI IDs (the
// pci.ids names), where the ID alone says more than "Ethernet controller".
var productNames = map[[2]uint16]string{
	{0x8086, 0x24f0}: "Intel Omni-Path HFI 100", {0x8086, 0x24f1}: "Intel Omni-Path HFI 100 (integrated)", {0x434e, 0x0001}: "Cornelis CN5000",
	{0x8086, 0x1592}: "Intel E810-C (QSFP)", {0x8086, 0x1593}: "Intel E810-C (SFP)", {0x8086, 0x159b}: "Intel E810-XXV (SFP)",
	{0x14e4, 0x1750}: "Broadcom BCM57508", {0x14e4, 0x1751}: "Broadcom BCM57504", {0x14e4, 0x1760}: "Broadcom BCM57608",
	{0x1d0f, 0xefa0}: "AWS EFA", {0x1d0f, 0xefa1}: "AWS EFA (2nd gen)", {0x1d0f, 0xefa2}: "AWS EFA (3rd gen)", {0x1d0f, 0xefa3}: "AWS EFA (4th gen)",
	{0x1077, 0x8070}: "Marvell FastLinQ QL41000", {0x1077, 0x8170}: "Marvell FastLinQ QL41000 VF",
	{0x19e5, 0xa222}: "HiSilicon HNS3 25GE RDMA", {0x19e5, 0xa224}: "HiSilicon HNS3 50GE RDMA", {0x19e5, 0xa226}: "HiSilicon HNS3 100GE RDMA",
	{0x19e5, 0xa228}: "HiSilicon HNS3 200GE RDMA", {0x1ded, 0x107f}: "Alibaba Elastic RDMA", {0x1414, 0x00ba}: "Microsoft Azure MANA",
	{0x1425, 0x6408}: "Chelsio T62100-CR", {0x1425, 0x6410}: "Chelsio T6225-CR", {0x1d0f, 0xec20}: "AWS ENA",
	{0x1ae0, 0x0042}: "Google gVNIC", {0x1dd8, 0x1002}: "AMD Pensando DSC/Pollara Ethernet PF",
}
