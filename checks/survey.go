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
	Driver  *Driver // the family it belongs to (by bound driver, or by ID when unbound)
	Product string
	Bound   bool // its driver is bound
}

func takeSurvey(h *sysfs.Host) *Survey {
	s := &Survey{}
	s.PCI, s.PCIErr = h.PCIFunctions()
	for _, fn := range s.PCI {
		if n, ok := classifyNIC(fn); ok {
			s.NICs = append(s.NICs, n)
		}
	}
	s.Devices, s.DevicesErr = h.RDMADevices()
	return s
}

// classifyNIC decides whether a PCI function is an RDMA NIC: its bound
// driver is in the driver table, or it is unbound but its IDs say RDMA.
func classifyNIC(fn sysfs.PCIFunction) (NIC, bool) {
	product := ProductName(fn.Vendor, fn.Device, fn.Class)
	if fn.Driver != "" {
		if d := DriverByPCI(fn.Driver); d != nil {
			return NIC{Fn: fn, Driver: d, Product: product, Bound: true}, true
		}
		return NIC{}, false
	}
	isNet := fn.Class>>16 == 0x02
	if fn.Vendor == 0x15b3 && isNet {
		return NIC{Fn: fn, Driver: DriverByPCI(mellanoxDriverFor(fn.Device)), Product: product}, true
	}
	if name, ok := knownUnboundRDMA[[2]uint16{fn.Vendor, fn.Device}]; ok {
		return NIC{Fn: fn, Driver: DriverByPCI(name), Product: product}, true
	}
	return NIC{}, false
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
