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
		ID: "rdma.devices", Code: 14, Level: 1,
		Title: "every RDMA NIC has registered its device in /sys/class/infiniband",
		Needs: []string{"kernel.modules"},
		Explain: Explanation{
			Judges: "For every RDMA NIC function (PFs and VFs; a VF held by vfio-pci is assigned to a VM and not judged) looks for its RDMA device: <function>/infiniband/<dev> " +
				"or a /sys/class/infiniband entry whose device link points at the function. Software devices (rxe, siw) count for themselves. " +
				"A NIC without a device is named with the reason that can be seen: its driver unbound or a passthrough driver bound, its RDMA module (mlx5_ib, bnxt_re, irdma, …) " +
				"or ib_core not loaded, or the modules loaded and the device still not registered.",
			Why: "The NIC's Ethernet or IPoIB side can work while RDMA does not: without the device there is no uverbs node, libibverbs lists " +
				"nothing and every RDMA application fails with \"no devices found\", however healthy the rest looks.",
			Failures: []Failure{
				{report.Fail, "an RDMA NIC's driver is not bound", "Load and bind the driver (`modprobe mlx5_core`); see pci.device."},
				{report.Fail, "an RDMA NIC (a PF) is bound to vfio-pci or another passthrough driver", "If it is meant for a VM, run rdmadoctor there; otherwise give it back to its driver (see pci.device)."},
				{report.Fail, "the RDMA module of a NIC's driver, or ib_core, is not loaded", "`modprobe <module>` (mlx5_ib, bnxt_re, irdma, …); see kernel.modules."},
				{report.Fail, "the modules are loaded but the NIC registered no RDMA device",
					"Read `dmesg` for the driver's messages (firmware errors, a disabled capability); check the firmware " +
						"(`devlink dev info pci/<addr>`, `mlxfwmanager --query`); for mlx5 the devlink parameters `enable_rdma` (false: no RDMA device) and `enable_roce`, " +
						"and for a VF the PF's `devlink port function set <pci/PF/port> roce enable` (kernel 6.2+); for mlx4 the port types in " +
						"/sys/bus/pci/devices/<addr>/mlx4_port<n> (ib, eth, auto). The port link type in firmware (`mlxconfig -d <addr> query | grep LINK_TYPE`) " +
						"only decides InfiniBand or Ethernet ports, never whether the device registers. On exclusive RDMA netns mode the device may live in another namespace."},
				{report.Fail, "no RDMA device at all", "See pci.device and kernel.modules; for tests `rdma link add rxe0 type rxe netdev <if>`."},
				{report.Error, "/sys/class/infiniband could not be listed", "Run where sysfs is mounted and readable."},
			},
		},
		Run: runRDMADevices,
	})
}

func runRDMADevices(_ context.Context, env *Env) Result {
	s := env.Survey()
	h := env.Host
	if s.DevicesErr != nil && !sysfs.IsNotExist(s.DevicesErr) {
		r := errorf("could not list the RDMA devices: %v", s.DevicesErr)
		r.Observed, r.Expected = "/sys/class/infiniband unreadable", "a readable /sys/class/infiniband"
		r.Remedy = "Run where /sys is mounted and readable; by hand: `ls -l /sys/class/infiniband` or `rdma link show`."
		return r
	}
	mods, modErr := h.ReadModules()
	netns := ""
	if m, err := h.RDMASystem(); err == nil {
		netns = m.NetnsMode
	}

	byAddr := map[string][]string{} // PCI function → its devices, by the device link
	for _, d := range s.Devices {
		if d.PCIAddr != "" {
			byAddr[d.PCIAddr] = append(byAddr[d.PCIAddr], d.Name)
		}
	}
	claimed := map[string]bool{} // device names owned by a NIC
	var (
		details, missing, missingAddrs []string
		nicEv                          []map[string]any
		remedies                       []string
	)
	judged := 0
	for _, n := range s.NICs {
		if n.AssignedVF() {
			details = append(details, fmt.Sprintf("%s %s (VF of %s): bound to %s — assigned to a VM, not judged", n.Fn.Address, n.Product, n.Fn.PhysFn, n.Foreign))
			continue
		}
		judged++
		devs := append([]string(nil), n.Fn.RDMADevs...)
		for _, d := range byAddr[n.Fn.Address] {
			devs = appendUnique(devs, d)
		}
		sort.Strings(devs)
		for _, d := range devs {
			claimed[d] = true
		}
		desc := n.Fn.Address + " " + n.Product
		if n.Fn.PhysFn != "" {
			desc += " (VF of " + n.Fn.PhysFn + ")"
		}
		ev := map[string]any{"address": n.Fn.Address, "driver": n.Fn.Driver, "devices": nonNil(devs)}
		nicEv = append(nicEv, ev)
		if len(devs) > 0 {
			details = append(details, fmt.Sprintf("%s: %s", desc, strings.Join(devs, ", ")))
			continue
		}
		why, fix := whyNoDevice(h, n, mods, modErr, netns)
		ev["reason"] = why
		details = append(details, fmt.Sprintf("%s: NO RDMA DEVICE — %s", desc, why))
		missing = append(missing, n.Fn.Address+" ("+why+")")
		missingAddrs = append(missingAddrs, n.Fn.Address)
		remedies = appendUnique(remedies, fix)
	}
	var soft, other []string
	for _, d := range s.Devices {
		if claimed[d.Name] {
			continue
		}
		if d.Software || d.PCIAddr == "" {
			name := d.Name + " (software"
			if d.Parent != "" {
				name += " on " + d.Parent
			}
			soft = append(soft, name+")")
		} else {
			drv := d.Driver
			if drv == "" {
				drv = "no driver"
			}
			other = append(other, fmt.Sprintf("%s (%s, %s)", d.Name, d.PCIAddr, drv))
		}
	}
	details = append(details, soft...)
	for _, o := range other {
		details = append(details, o+": an RDMA device of a driver outside the table; not judged")
	}
	for _, d := range s.Devices {
		for _, p := range d.Problems {
			details = append(details, d.Name+": "+p)
		}
	}
	var names []string
	for _, d := range s.Devices {
		names = append(names, d.Name)
	}
	ev := map[string]any{"devices": nonNil(names), "nics": nicEv, "missing": nonNil(missingAddrs)}
	if netns != "" {
		ev["netns_mode"] = netns
	}
	expected := "an RDMA device for every RDMA NIC function"
	switch {
	case len(missing) > 0:
		r := fail(fmt.Sprintf("%d of %d RDMA NIC function(s) without an RDMA device: %s", len(missing), judged, strings.Join(missing, "; ")))
		r.Observed = fmt.Sprintf("%d device(s) for %d NIC function(s)", judged-len(missing), judged)
		r.Expected = expected
		r.Details, r.Remedy, r.Evidence = details, strings.Join(remedies, "\n"), ev
		return r
	case len(s.Devices) == 0:
		r := fail("no RDMA device in /sys/class/infiniband")
		r.Observed, r.Expected = "none", expected
		if netns == "exclusive" {
			details = append(details, "RDMA netns mode is exclusive: a device is visible only inside its own network namespace")
		}
		r.Details, r.Evidence = details, ev
		r.Remedy = "See pci.device and kernel.modules: the NIC, its driver and its RDMA module come first. " +
			"For a test host without an RDMA NIC: `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <interface>`."
		return r
	}
	r := pass(fmt.Sprintf("%d RDMA device(s): %s", len(s.Devices), strings.Join(names, ", ")))
	r.Observed = fmt.Sprintf("%d device(s)", len(s.Devices))
	r.Expected = expected
	r.Details, r.Evidence = details, ev
	return r
}

// whyNoDevice tells why a NIC has no RDMA device, and the fix for that reason.
func whyNoDevice(h *sysfs.Host, n NIC, mods *sysfs.Modules, modErr error, netns string) (string, string) {
	addr := n.Fn.Address
	if n.Foreign != "" {
		return "bound to " + n.Foreign + " (passthrough), not usable on the host", passthroughFix(n)
	}
	if !n.Bound {
		drv := "its driver"
		if n.Driver != nil {
			drv = n.Driver.PCIDriver
		}
		return "no driver bound (" + drv + ")", fmt.Sprintf("Bind the driver first: `modprobe %s` and read `dmesg` for probe errors (see pci.device).", drv)
	}
	if n.Driver == nil {
		return "driver " + n.Fn.Driver + " is not an RDMA driver", "Bind the function to its RDMA-capable driver."
	}
	if modErr == nil {
		for _, m := range append([]string{"ib_core"}, n.Driver.RDMAModule()) {
			switch mods.State(m) {
			case sysfs.ModuleAbsent:
				return "module " + m + " not loaded", fmt.Sprintf("`modprobe %s` (and add it to /etc/modules-load.d/rdma.conf); see kernel.modules.", m)
			}
		}
	}
	mod := n.Driver.RDMAModule()
	why := mod + " is loaded but registered no RDMA device for this function"
	if modErr != nil {
		why = "no RDMA device registered (modules unknown: " + modErr.Error() + ")"
	}
	var fix strings.Builder
	fmt.Fprintf(&fix, "%s: the RDMA module is loaded and the device still did not register. Read `dmesg | grep -i -e %s -e infiniband` for the driver's reason "+
		"(firmware errors, a capability disabled). Check the firmware (`devlink dev info pci/%s`", addr, strings.TrimSuffix(n.Driver.DevPrefix, "_"), addr)
	switch {
	case n.Driver.PCIDriver == "mlx4_core":
		fix.WriteString(", `mlxfwmanager --query`). ")
		fmt.Fprintf(&fix, "mlx4: each port's type is /sys/bus/pci/devices/%s/mlx4_port<n> (ib, eth or auto): `cat /sys/bus/pci/devices/%s/mlx4_port*`, "+
			"set one with `echo ib > /sys/bus/pci/devices/%s/mlx4_port1` (or eth), or persistently with mlx4_core's port_type_array module option.", addr, addr, addr)
	case n.Driver.Vendor == 0x15b3:
		fmt.Fprintf(&fix, ", `mlxfwmanager --query`). "+
			"mlx5: `devlink dev param show pci/%s name enable_rdma` — false means no RDMA device is created "+
			"(`devlink dev param set pci/%s name enable_rdma value true cmode driverinit && devlink dev reload pci/%s`); "+
			"with `enable_roce` false an Ethernet port's device has no RoCE (raw Ethernet QPs only).", addr, addr, addr)
		if n.Fn.PhysFn != "" {
			fmt.Fprintf(&fix, " For a VF, the PF's owner can have disabled its RoCE capability: `devlink port show` lists the PF %s's VF ports (eswitch in switchdev mode), "+
				"`devlink port function set pci/%s/<port index> roce enable` turns it back on (kernel 6.2 or newer; set it while the VF is not bound to mlx5_core).",
				n.Fn.PhysFn, n.Fn.PhysFn)
		}
		fmt.Fprintf(&fix, " The port link type in firmware (`mlxconfig -d %s query | grep LINK_TYPE`: LINK_TYPE_P<n> 1 = InfiniBand, 2 = Ethernet) "+
			"decides whether a port is InfiniBand or RoCE, never whether the device registers.", addr)
	default:
		fix.WriteString(") and that RDMA/RoCE is enabled in the NIC's firmware or NVM configuration.")
	}
	fmt.Fprintf(&fix, " Reloading the module retries the registration: `modprobe -r %s && modprobe %s`.", mod, mod)
	if netns == "exclusive" {
		why += "; RDMA netns mode is exclusive, so the device may exist in another network namespace"
		fix.WriteString(" RDMA netns mode is exclusive: a device moved to another namespace (`rdma dev set <dev> netns <ns>`) is invisible here; run in that namespace or use `rdma system set netns shared`.")
	}
	return why, fix.String()
}
