package checks

import (
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Survey is the host's RDMA hardware as several checks need it, read once.
type Survey struct {
	PCI    []sysfs.PCIFunction // every PCI function
	PCIErr error               // why the PCI bus could not be listed
	NICs   []NIC               // RDMA-capable PCI functions

	Devices    []sysfs.RDMADevice // /sys/class/infiniband
	DevicesErr error              // why that class could not be listed (not-exist = none)
}

// NIC is an RDMA-capable PCI function.
type NIC struct {
	Fn      sysfs.PCIFunction
	Driver  *Driver // the family it belongs to (by bound driver, or by ID when not bound to it)
	Product string
	Bound   bool // its RDMA driver (the table's) is bound
	// Foreign is the driver outside the table that holds the function
	// (vfio-pci, pci-stub, …): the host cannot use it for RDMA.
	Foreign string
}

// AssignedVF reports an SR-IOV VF held by a driver outside the table: a VF
// bound to vfio-pci is normally passed through to a VM on purpose.
func (n NIC) AssignedVF() bool { return n.Foreign != "" && n.Fn.PhysFn != "" }

func takeSurvey(h *sysfs.Host) *Survey {
	s := &Survey{}
	s.PCI, s.PCIErr = h.PCIFunctions()
	s.Devices, s.DevicesErr = h.RDMADevices()
	mods, _ := h.ReadModules()
	for _, fn := range s.PCI {
		if n, ok := classifyNIC(fn); ok && (!n.Driver.RDMAOptional || len(s.DevicesOf(fn.Address)) > 0 || moduleInUse(mods)(n.Driver.RDMAModule())) {
			s.NICs = append(s.NICs, n)
		}
	}
	for i, n := range s.NICs {
		name := ""
		if devs := s.DevicesOf(n.Fn.Address); len(devs) > 0 {
			name = devs[0].Name
		}
		s.NICs[i].Driver = legacyX722(n.Driver, name, moduleInUse(mods))
	}
	return s
}

// classifyNIC decides whether a PCI function is an RDMA NIC: its bound
// driver is in the driver table (for that device), or its IDs say RDMA NIC
// whatever driver holds it — a ConnectX bound to vfio-pci is still an RDMA
// NIC, one the host cannot use.
func classifyNIC(fn sysfs.PCIFunction) (NIC, bool) {
	product := ProductName(fn.Vendor, fn.Device, fn.Class)
	if fn.Driver != "" {
		if d := driverForFunction(fn); d != nil {
			return NIC{Fn: fn, Driver: d, Product: product, Bound: true}, true
		}
	}
	d, ok := rdmaNICByID(fn)
	if !ok {
		return NIC{}, false
	}
	return NIC{Fn: fn, Driver: d, Product: product, Foreign: fn.Driver}, true
}

// rdmaNICByID tells an RDMA NIC by its vendor, class and device IDs, and the
// table driver it needs. A Mellanox network function bound to a driver
// outside the table counts only when it is a known ConnectX/BlueField or the
// driver is a passthrough one: Mellanox also makes switch ASICs (mlxsw).
func rdmaNICByID(fn sysfs.PCIFunction) (*Driver, bool) {
	if fn.Vendor == 0x15b3 && fn.Class>>16 == 0x02 {
		_, known := mellanoxProducts[fn.Device]
		if fn.Driver == "" || known || passthroughDrivers[fn.Driver] {
			return DriverByPCI(mellanoxDriverFor(fn.Device)), true
		}
		return nil, false
	}
	if name, ok := knownRDMANICs[[2]uint16{fn.Vendor, fn.Device}]; ok {
		return DriverByPCI(name), true
	}
	return nil, false
}

// passthroughDrivers hand a function to a VM or to user space (DPDK) instead
// of a kernel network driver.
var passthroughDrivers = map[string]bool{
	"vfio-pci": true, "pci-stub": true, "uio_pci_generic": true, "igb_uio": true, "mlx5_vfio_pci": true,
}

// mellanoxDriverFor picks mlx4 for ConnectX-3 IDs and mlx5 for the rest.
func mellanoxDriverFor(device uint16) string {
	if device >= 0x1003 && device <= 0x1010 {
		return "mlx4_core"
	}
	return "mlx5_core"
}

// SoftwareDevices are the RDMA devices with no PCI function (rxe, siw).
func (s *Survey) SoftwareDevices() []sysfs.RDMADevice {
	var out []sysfs.RDMADevice
	for _, d := range s.Devices {
		if d.Software || d.PCIAddr == "" {
			out = append(out, d)
		}
	}
	return out
}

// DevicesOf returns the RDMA devices whose PCI function is addr.
func (s *Survey) DevicesOf(addr string) []sysfs.RDMADevice {
	var out []sysfs.RDMADevice
	for _, d := range s.Devices {
		if d.PCIAddr == addr {
			out = append(out, d)
		}
	}
	return out
}
