package checks

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
)

func init() {
	register(Check{
		ID: "pci.device", Code: 10, Level: 1,
		Title: "an RDMA-capable PCI function is present with its driver bound",
		Explain: Explanation{
			Judges: "Lists every PCI function under /sys/bus/pci/devices and keeps those that are RDMA NICs: " +
				"a bound driver from the vendor-neutral table (mlx5_core, mlx4_core, bnxt_en, ice, efa, qede, hns3, cxgb4, erdma, mana), " +
				"or an unbound function whose IDs are an RDMA NIC (every Mellanox/NVIDIA network function, EFA, erdma, MANA). " +
				"Software RDMA devices (rxe, siw) under /sys/class/infiniband count too.",
			Why: "Everything else in the RDMA stack hangs off this function. When the card is missing, disabled in firmware " +
				"or has no driver, every later error (no device, no provider, OFED 'mismatch') is an echo of this one.",
			Failures: []Failure{
				{report.Fail, "no RDMA-capable PCI function and no software RDMA device",
					"Check the card is seated and enabled (BIOS/UEFI, `lspci -nn | grep -i -e mellanox -e infiniband -e 15b3`); in a VM pass the function through. " +
						"For testing without hardware: `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <if>`."},
				{report.Fail, "an RDMA NIC has no driver bound",
					"Load its driver (`modprobe mlx5_core`, …) and read `dmesg` for probe errors (firmware, IOMMU, unsupported card); " +
						"check it is not bound to vfio-pci for a VM."},
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
	soft := s.SoftwareDevices()
	if s.PCIErr != nil {
		r := errorf("could not list PCI functions: %v", s.PCIErr)
		r.Remedy = "Run where sysfs is mounted and readable (`mount -t sysfs sysfs /sys`)."
		return r
	}
	ev := map[string]any{"pci_functions_scanned": len(s.PCI)}
	var nics []map[string]any
	var unbound, bound []string
	for _, n := range s.NICs {
		desc := fmt.Sprintf("%s %s", n.Fn.Address, n.Product)
		if n.Fn.PhysFn != "" {
			desc += " (SR-IOV VF of " + n.Fn.PhysFn + ")"
		}
		nics = append(nics, map[string]any{"address": n.Fn.Address, "product": n.Product,
			"vendor_id": fmt.Sprintf("0x%04x", n.Fn.Vendor), "device_id": fmt.Sprintf("0x%04x", n.Fn.Device),
			"driver": n.Fn.Driver})
		if n.Bound {
			bound = append(bound, desc+": driver "+n.Fn.Driver)
		} else {
			unbound = append(unbound, desc)
		}
	}
	ev["rdma_nics"] = nics
	softNames := []string{}
	for _, d := range soft {
		name := d.Name
		if d.Parent != "" {
			name += " on " + d.Parent
		}
		softNames = append(softNames, name)
	}
	ev["software_devices"] = softNames

	switch {
	case len(unbound) > 0:
		r := fail(fmt.Sprintf("%d RDMA NIC function(s) without a driver: %s", len(unbound), strings.Join(unbound, ", ")))
		r.Observed = fmt.Sprintf("%d unbound", len(unbound))
		r.Expected = "every RDMA NIC function bound to its driver"
		r.Details = append(bound, unboundDetails(s)...)
		var mods []string
		for _, n := range s.NICs {
			if !n.Bound && n.Driver != nil {
				mods = appendUnique(mods, n.Driver.PCIDriver)
			}
		}
		r.Remedy = fmt.Sprintf("Load the driver: `modprobe %s`, then read `dmesg | grep -i %s` for probe errors (firmware, IOMMU, unsupported card). "+
			"If the function is meant for a VM it is bound to vfio-pci on purpose.", strings.Join(mods, " "), firstOr(mods, "<driver>"))
		r.Evidence = ev
		return r
	case len(s.NICs) > 0:
		byProduct := map[string][]string{}
		for _, n := range s.NICs {
			k := n.Product + " (" + n.Fn.Driver + ")"
			byProduct[k] = append(byProduct[k], n.Fn.Address)
		}
		var parts []string
		for k, addrs := range byProduct {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, len(addrs)))
		}
		sort.Strings(parts)
		r := pass(fmt.Sprintf("%d RDMA NIC function(s): %s", len(s.NICs), strings.Join(parts, ", ")))
		r.Observed = fmt.Sprintf("%d bound", len(s.NICs))
		r.Expected = "an RDMA NIC with its driver bound"
		r.Details = append(bound, softNames...)
		r.Evidence = ev
		return r
	case len(soft) > 0:
		r := warn(fmt.Sprintf("only software RDMA: %s — no RDMA NIC", strings.Join(softNames, ", ")))
		r.Observed = "software RDMA only"
		r.Expected = "an RDMA NIC"
		r.Details = []string{"Soft-RoCE/Soft-iWARP run the real verbs API over an ordinary netdev: good for tests, not for production performance."}
		r.Remedy = "Nothing to fix for a test host; a production host needs an RDMA NIC."
		r.Evidence = ev
		return r
	}
	r := fail(fmt.Sprintf("no RDMA-capable PCI function and no software RDMA device on this host (%d PCI functions scanned)", len(s.PCI)))
	r.Observed = "none"
	r.Expected = "an RDMA NIC (or a software RDMA device)"
	r.Details = unboundDetails(s)
	if mode, err := env.Host.RDMASystem(); err == nil && mode.NetnsMode == "exclusive" {
		r.Details = append(r.Details, "RDMA netns mode is exclusive: devices are visible only in their own network namespace; a container without host networking sees none")
	}
	r.Remedy = "Check the card is seated and enabled in BIOS/UEFI (`lspci -nn | grep -i -e mellanox -e infiniband`); in a VM, pass the function through. " +
		"To test without hardware: `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <interface>`."
	r.Evidence = ev
	return r
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
