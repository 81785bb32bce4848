package checks

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

func init() {
	register(Check{
		ID: "pci.device", Code: 10, Level: 1,
		Title: "an RDMA-capable PCI function is present with its driver bound",
		Explain: Explanation{
			Judges: "Lists every PCI function under /sys/bus/pci/devices and keeps those that are RDMA NICs, whatever driver holds them: " +
				"a bound driver from the vendor-neutral table (mlx5_core, mlx4_core, bnxt_en, ice, i40e for the X722 only, efa, qede, hns3, cxgb4, erdma, mana), " +
				"or a function whose IDs are an RDMA NIC (every Mellanox/NVIDIA ConnectX/BlueField network function, EFA, erdma, MANA, X722) — unbound, " +
				"or held by a driver outside the table such as vfio-pci. An SR-IOV VF held by vfio-pci is assigned to a VM and not judged. " +
				"Software RDMA devices (rxe, siw) under /sys/class/infiniband count too.",
			Why: "Everything else in the RDMA stack hangs off this function. When the card is missing, disabled in firmware, " +
				"has no driver or is handed to a VM, every later error (no device, no provider, OFED 'mismatch') is an echo of this one.",
			Failures: []Failure{
				{report.Fail, "no RDMA-capable PCI function and no software RDMA device",
					"Check the card is seated and enabled (BIOS/UEFI; " + lspciHint + " lists the controllers and the driver bound to each); in a VM pass the function through. " +
						"For testing without hardware: `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <if>`."},
				{report.Fail, "an RDMA NIC has no driver bound",
					"Load its driver (`modprobe mlx5_core`, …) and read `dmesg` for probe errors (firmware, IOMMU, unsupported card)."},
				{report.Fail, "an RDMA NIC (a PF) is bound to vfio-pci or another driver outside the table: passed through, not usable on the host",
					"If it is meant for a VM, run rdmadoctor inside the VM. Otherwise give it back to its driver: `driverctl unset-override <addr>`, or unbind it " +
						"(`echo <addr> > /sys/bus/pci/devices/<addr>/driver/unbind`), clear driver_override and `echo <addr> > /sys/bus/pci/drivers_probe`; " +
						"remove the `vfio-pci.ids=` kernel parameter or modprobe.d option that claims it at boot."},
				{report.Warn, "only software RDMA (rxe/siw) is present",
					"Fine for development and tests; a production host needs an RDMA NIC. SoftRoCE latencies are not a NIC's."},
				{report.Error, "the PCI bus could not be listed", "Mount sysfs (`mount -t sysfs sysfs /sys`) or run where /sys is visible."},
			},
		},
		Run: runPCIDevice,
	})
}

func runPCIDevice(_ context.Context, env *Env) Result {
	s := env.Survey()
	if s.PCIErr != nil {
		r := errorf("could not list PCI functions: %v", s.PCIErr)
		r.Observed, r.Expected = "PCI bus unreadable", "a readable "+sysfs.PCIDevicesDir
		r.Remedy = "Run where sysfs is mounted and readable (`mount -t sysfs sysfs /sys`); by hand: " + lspciHint + "."
		return r
	}
	c := sortNICs(s)
	var r Result
	switch {
	case len(c.unbound) > 0 || len(c.foreign) > 0:
		r = unusableNICsResult(s, c)
	case len(c.boundNICs) > 0:
		r = boundNICsResult(c)
		r.Details = append(r.Details, c.untabled...)
	case len(c.untabled) > 0:
		r = untabledResult(c)
	case len(c.softNames) > 0:
		r = warn(fmt.Sprintf("only software RDMA: %s — no RDMA NIC", strings.Join(c.softNames, ", ")))
		r.Observed, r.Expected = "software RDMA only", "an RDMA NIC"
		r.Details = append([]string{"Soft-RoCE/Soft-iWARP run the real verbs API over an ordinary netdev: good for tests, not for production performance."}, c.assigned...)
		r.Remedy = "Nothing to fix for a test host; a production host needs an RDMA NIC."
	default:
		r = noNICResult(env, s, c)
	}
	r.Evidence = map[string]any{"pci_functions_scanned": len(s.PCI), "rdma_nics": c.nicEv, "software_devices": c.softNames}
	return r
}

// nicSort is the host's RDMA NIC functions sorted by what holds them.
type nicSort struct {
	nicEv                             []map[string]any
	unbound, foreign, assigned, bound []string
	boundNICs, foreignNICs            []NIC
	softNames                         []string
	untabled                          []string // RDMA devices on functions whose driver is outside the table
}

func sortNICs(s *Survey) nicSort {
	var c nicSort
	for _, n := range s.NICs {
		desc := fmt.Sprintf("%s %s", n.Fn.Address, n.Product)
		if n.Fn.PhysFn != "" {
			desc += " (SR-IOV VF of " + n.Fn.PhysFn + ")"
		}
		nev := map[string]any{"address": n.Fn.Address, "product": n.Product,
			"vendor_id": fmt.Sprintf("0x%04x", n.Fn.Vendor), "device_id": fmt.Sprintf("0x%04x", n.Fn.Device),
			"driver": n.Fn.Driver}
		if n.Foreign != "" {
			nev["passthrough"] = true
		}
		c.nicEv = append(c.nicEv, nev)
		switch {
		case n.Bound:
			c.bound = append(c.bound, desc+": driver "+n.Fn.Driver)
			c.boundNICs = append(c.boundNICs, n)
		case n.AssignedVF():
			c.assigned = append(c.assigned, fmt.Sprintf("%s: bound to %s — assigned to a VM (passthrough), not judged", desc, n.Foreign))
		case n.Foreign != "":
			c.foreign = append(c.foreign, fmt.Sprintf("%s bound to %s (passthrough), not usable on the host", desc, n.Foreign))
			c.foreignNICs = append(c.foreignNICs, n)
		default:
			c.unbound = append(c.unbound, desc)
		}
	}
	c.untabled = untabledDevices(s)
	c.softNames = []string{}
	for _, d := range s.SoftwareDevices() {
		name := d.Name
		if d.Parent != "" {
			name += " on " + d.Parent
		}
		c.softNames = append(c.softNames, name)
	}
	return c
}

// unusableNICsResult fails NICs without a driver or held by a passthrough
// driver.
func unusableNICsResult(s *Survey, c nicSort) Result {
	var parts, observed, remedies []string
	if len(c.unbound) > 0 {
		parts = append(parts, fmt.Sprintf("%d RDMA NIC function(s) without a driver: %s", len(c.unbound), strings.Join(c.unbound, ", ")))
		observed = append(observed, fmt.Sprintf("%d unbound", len(c.unbound)))
		var mods []string
		for _, n := range s.NICs {
			if !n.Bound && n.Foreign == "" && n.Driver != nil {
				mods = appendUnique(mods, n.Driver.PCIDriver)
			}
		}
		remedies = append(remedies, fmt.Sprintf("Load the driver: `modprobe %s`, then read `dmesg | grep -i %s` for probe errors (firmware, IOMMU, unsupported card).",
			strings.Join(mods, " "), firstOr(mods, "<driver>")))
	}
	if len(c.foreign) > 0 {
		parts = append(parts, strings.Join(c.foreign, "; "))
		byDriver := map[string]int{}
		var drvs []string
		for _, n := range c.foreignNICs {
			if byDriver[n.Foreign] == 0 {
				drvs = append(drvs, n.Foreign)
			}
			byDriver[n.Foreign]++
		}
		for _, d := range drvs {
			observed = append(observed, fmt.Sprintf("%d bound to %s", byDriver[d], d))
		}
		for _, n := range c.foreignNICs {
			remedies = append(remedies, passthroughFix(n))
		}
	}
	r := fail(strings.Join(parts, "; "))
	r.Observed = strings.Join(observed, ", ")
	r.Expected = "every RDMA NIC function bound to its RDMA driver"
	r.Details = append(append(c.bound, c.assigned...), unboundDetails(s)...)
	r.Remedy = strings.Join(remedies, "\n")
	return r
}

// boundNICsResult passes the host's bound NICs, counted by product.
func boundNICsResult(c nicSort) Result {
	byProduct := map[string][]string{}
	for _, n := range c.boundNICs {
		k := n.Product + " (" + n.Fn.Driver + ")"
		byProduct[k] = append(byProduct[k], n.Fn.Address)
	}
	var parts []string
	for k, addrs := range byProduct {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, len(addrs)))
	}
	sort.Strings(parts)
	r := pass(fmt.Sprintf("%d RDMA NIC function(s): %s", len(c.boundNICs), strings.Join(parts, ", ")))
	if len(c.assigned) > 0 {
		r.Summary += fmt.Sprintf("; %d VF(s) assigned to VMs (passthrough), not judged", len(c.assigned))
	}
	r.Observed = fmt.Sprintf("%d bound", len(c.boundNICs))
	r.Expected = "an RDMA NIC with its driver bound"
	r.Details = append(append(c.bound, c.assigned...), c.softNames...)
	return r
}

// untabledDevices names the hardware RDMA devices whose PCI function is no
// NIC of the table: the kernel registered them (ionic_rdma, usnic_verbs,
// or a driver newer than the table), so the function is an RDMA NIC the
// tool cannot judge — never "no RDMA NIC".
func untabledDevices(s *Survey) []string {
	known := map[string]bool{}
	for _, n := range s.NICs {
		known[n.Fn.Address] = true
	}
	var out []string
	for _, d := range s.Devices {
		if d.Software || d.PCIAddr == "" || known[d.PCIAddr] {
			continue
		}
		if pf, ok := subFunctionPF(d); ok && known[pf] {
			continue // an mlx5 sub-function of a NIC already judged
		}
		drv := d.Driver
		if drv == "" {
			drv = "unknown driver"
		}
		out = append(out, fmt.Sprintf("%s on %s (driver %s): driver not in rdmadoctor's table, not judged", d.Name, d.PCIAddr, drv))
	}
	return out
}

// untabledResult passes a host whose only RDMA devices belong to drivers
// outside the table: the device exists, which is all this check asks.
func untabledResult(c nicSort) Result {
	r := pass(fmt.Sprintf("%d RDMA device(s) of a driver outside rdmadoctor's table — present, not judged", len(c.untabled)))
	r.Observed = fmt.Sprintf("%d registered, driver not in the table", len(c.untabled))
	r.Expected = "an RDMA NIC with its driver bound"
	r.Details = append(append(c.untabled, c.assigned...), c.softNames...)
	return r
}

// noNICResult fails a host with no RDMA NIC and no software device.
func noNICResult(env *Env, s *Survey, c nicSort) Result {
	r := fail(fmt.Sprintf("no RDMA-capable PCI function and no software RDMA device on this host (%d PCI functions scanned)", len(s.PCI)))
	r.Observed = "none"
	r.Expected = "an RDMA NIC (or a software RDMA device)"
	r.Details = append(c.assigned, unboundDetails(s)...)
	if mode, err := env.Host.RDMASystem(); err == nil && mode.NetnsMode == "exclusive" {
		r.Details = append(r.Details, "RDMA netns mode is exclusive: devices are visible only in their own network namespace; a container without host networking sees none")
	}
	r.Remedy = "Check the card is seated and enabled in BIOS/UEFI: " + lspciHint + " lists InfiniBand and Ethernet controllers with the driver bound to each; " +
		"in a VM, pass the function through. To test without hardware: `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <interface>`."
	return r
}

// lspciHint lists the InfiniBand (class 0207) and Ethernet (0200)
// controllers with their IDs and bound driver, whatever the vendor.
const lspciHint = "`lspci -nnk -d ::0207; lspci -nnk -d ::0200`"

// passthroughFix is the way back for an RDMA NIC that a passthrough driver
// (vfio-pci, …) holds.
func passthroughFix(n NIC) string {
	addr, drv := n.Fn.Address, "its RDMA driver"
	if n.Driver != nil {
		drv = n.Driver.PCIDriver
	}
	return fmt.Sprintf("%s is bound to %s: it is reserved for a VM (or a user-space driver such as DPDK) and the host cannot use it for RDMA. "+
		"If that is intended, run rdmadoctor inside the VM instead. Otherwise give it back to %s: `driverctl unset-override %s` when driverctl set it; "+
		"else `echo %s > /sys/bus/pci/devices/%s/driver/unbind; echo > /sys/bus/pci/devices/%s/driver_override; echo %s > /sys/bus/pci/drivers_probe`, "+
		"and remove what binds it at boot (a `vfio-pci.ids=%04x:%04x` kernel parameter or an `options vfio-pci ids=` line in /etc/modprobe.d).",
		addr, n.Foreign, drv, addr, addr, addr, addr, addr, n.Fn.Vendor, n.Fn.Device)
}

// unboundDetails names the network-class functions that were seen and why
// they are not RDMA NICs, so "none found" shows what was looked at.
func unboundDetails(s *Survey) []string {
	var out []string
	for _, fn := range s.PCI {
		if fn.Class>>16 != 0x02 {
			continue
		}
		if _, isNIC := classifyNIC(fn); isNIC {
			continue
		}
		drv := fn.Driver
		if drv == "" {
			drv = "no driver"
		}
		out = append(out, fmt.Sprintf("%s %s (%s): not an RDMA NIC", fn.Address, ProductName(fn.Vendor, fn.Device, fn.Class), drv))
	}
	return out
}

func appendUnique(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}
