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
				"a bound driver from the vendor-neutral table (mlx5_core, mlx4_core, bnxt_en, ice, i40e for the X722 only, efa, qede, hns3, cxgb4, erdma, mana, " +
				"ionic, hfi1 for Intel OPA and Cornelis CN5000), " +
				"or a function whose IDs are an RDMA NIC (every Mellanox/NVIDIA ConnectX/BlueField network function, EFA, erdma, MANA, X722) — unbound, " +
				"or held by a driver outside the table such as vfio-pci. An SR-IOV VF held by vfio-pci is assigned to a VM and not judged. " +
				"Software RDMA devices (rxe, siw) under /sys/class/infiniband count too. A host with none is told apart by what it has: a cloud VM whose only NICs " +
				"are paravirtual ones without RDMA (gVNIC, ENA) has no RDMA by its machine type and skips, blocking the checks that need a device; " +
				"a host whose RoCE ports are integrated in Intel Gaudi accelerators without their network drivers fails naming them. ionic (AMD Pensando) " +
				"functions count only with their RDMA device or ionic_rdma loaded, since ionic also drives cards without RDMA.",
			Why: "Everything else in the RDMA stack hangs off this function. When the card is missing, disabled in firmware, " +
				"has no driver or is handed to a VM, every later error (no device, no provider, OFED 'mismatch') is an echo of this one.",
		},
		Run: runPCIDevice,
	})
}

// pci.device's findings: one about each RDMA NIC function (its PCI
// address) and each RDMA device on a function of a driver outside the
// table; one about the host when it has neither.
var (
	pciBound = declare(Finding{ID: "pci.device/bound", Status: report.Pass,
		When:    "an RDMA NIC function is bound to its driver from the table",
		Message: "{function}: driver {driver}"})
	pciUntabled = declare(Finding{ID: "pci.device/driver-not-in-table", Status: report.Pass,
		When:    "the kernel registered an RDMA device on a function whose driver is not in rdmadoctor's table (ocrdma, usnic_verbs, a newer driver): present, not judged",
		Message: "{device} on {address} (driver {driver}): driver not in rdmadoctor's table, not judged"})
	pciAssignedVF = declare(Finding{ID: "pci.device/vf-assigned", Status: report.Skip,
		When:    "an SR-IOV VF is held by vfio-pci or another driver outside the table: assigned to a VM, not judged",
		Message: "{function}: bound to {driver} — assigned to a VM (passthrough), not judged"})
	pciUnbound = declare(Finding{ID: "pci.device/unbound", Status: report.Fail,
		When:    "an RDMA NIC function has no driver bound",
		Message: "{function} without a driver",
		Fix:     "Load the driver: `modprobe {pci_driver}`, then read `dmesg | grep -i {pci_driver}` for probe errors (firmware, IOMMU, unsupported card)."})
	pciPassthrough = declare(Finding{ID: "pci.device/passthrough", Status: report.Fail,
		When:    "an RDMA NIC (a PF) is bound to vfio-pci or another driver outside the table: passed through, not usable on the host",
		Message: "{function} bound to {driver} (passthrough), not usable on the host",
		Fix: "{address} is bound to {driver}: it is reserved for a VM (or a user-space driver such as DPDK) and the host cannot use it for RDMA. " +
			"If that is intended, run rdmadoctor inside the VM instead. Otherwise give it back to {rdma_driver}: `driverctl unset-override {address}` when driverctl set it; " +
			"else `echo {address} > /sys/bus/pci/devices/{address}/driver/unbind; echo > /sys/bus/pci/devices/{address}/driver_override; echo {address} > /sys/bus/pci/drivers_probe`, " +
			"and remove what binds it at boot (a `vfio-pci.ids={ids}` kernel parameter or an `options vfio-pci ids=` line in /etc/modprobe.d)."})
	pciSoftwareOnly = declare(Finding{ID: "pci.device/software-only", Status: report.Warn,
		When:    "only software RDMA (rxe/siw) is present: no RDMA NIC",
		Message: "only software RDMA: {devices} — no RDMA NIC",
		Fix:     "Nothing to fix for a test host; a production host needs an RDMA NIC."})
	pciNoNIC = declare(Finding{ID: "pci.device/no-rdma-nic", Status: report.Fail,
		When:    "no RDMA-capable PCI function and no software RDMA device",
		Message: "no RDMA-capable PCI function and no software RDMA device on this host ({scanned} PCI functions scanned)",
		Fix: "Check the card is seated and enabled in BIOS/UEFI: " + lspciHint + " lists InfiniBand and Ethernet controllers with the driver bound to each; " +
			"in a VM, pass the function through. To test without hardware: `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <interface>`."})
	pciNoneInNetns = declare(Finding{ID: "pci.device/none-in-this-netns", Status: report.Fail,
		When: "no RDMA NIC function and no RDMA device in sight, while the RDMA subsystem is in exclusive netns mode and a software RDMA driver is loaded: " +
			"its devices belong to another network namespace (a pod or container that was given none)",
		Message: "no RDMA device in this network namespace: the RDMA subsystem is in exclusive netns mode and {modules} is loaded, " +
			"so its devices live in another namespace; no RDMA NIC function either ({scanned} PCI functions scanned)",
		Fix: "In exclusive mode a network namespace sees only the RDMA devices moved into it (`rdma dev set <dev> netns <ns>`, which an RDMA CNI or the SR-IOV " +
			"device plugin does for a VF's device), and this one holds none. Software devices (rxe, siw) cannot be moved: the kernel refuses with EOPNOTSUPP. " +
			"Give the pod a device of its own (an SR-IOV VF network with the RDMA CNI), run the software-RDMA test in the namespace that holds the device " +
			"(on the host: `rdma dev` lists it), or use shared mode (`rdma system set netns shared`, which the kernel refuses while other network namespaces exist; " +
			"do not switch a host whose containers rely on exclusive mode)."})
	pciCloudVNICOnly = declare(Finding{ID: "pci.device/cloud-vnic-only", Status: report.Skip,
		When: "no RDMA device, and every network function is a cloud VM's paravirtual NIC that has no RDMA engine (Google gVNIC, AWS ENA): " +
			"the machine type decides, nothing on the host can add RDMA — nothing to judge",
		Message: "no RDMA device: this VM's network is {vnics}, which has no RDMA engine — {platform}",
		Fix:     "Nothing to fix on this host. If this node should have RDMA: {how}"})
	pciAcceleratorPorts = declare(Finding{ID: "pci.device/accelerator-ports-no-driver", Status: report.Fail,
		When: "no RDMA device, and the host's RoCE ports are integrated in its accelerators (Intel Gaudi), which have no RDMA device " +
			"because their network and RDMA drivers are not installed",
		Message: "no RDMA device: the RoCE ports of {accelerators} are integrated in the accelerators, and no driver registered them",
		Fix: "The upstream kernel's habanalabs driver runs the accelerators' compute only; their integrated RoCE ports need Intel's Gaudi " +
			"software (its habanalabs driver package with the network and RDMA drivers, and its rdma-core provider): install it as Intel's " +
			"Gaudi installation guide says, then check the ports with `hl-smi` and `ibv_devices`."})
	pciDeviceBusUnreadable = declare(Finding{ID: "pci.device/bus-unreadable", Status: report.Error,
		When:    "the PCI bus (/sys/bus/pci/devices) could not be listed",
		Message: "could not list PCI functions: {cause}",
		Fix:     "Run where sysfs is mounted and readable (`mount -t sysfs sysfs /sys`); by hand: " + lspciHint + "."})
)

// pci.device's headlines: the summary of a host whose NICs all pass.
const (
	pciBoundHead    headline = "{count} RDMA NIC function(s): {functions}"
	pciProductHead  headline = "{product} ×{count}"
	pciAssignedEnd  headline = "; {count} VF(s) assigned to VMs (passthrough), not judged"
	pciUntabledHead headline = "{count} RDMA device(s) of a driver outside rdmadoctor's table — present, not judged"
)

func runPCIDevice(_ context.Context, env *Env) Result {
	s := env.Survey()
	if s.PCIErr != nil {
		r := pciDeviceBusUnreadable.result("", Slots{"cause": s.PCIErr.Error()})
		r.Observed, r.Expected = "PCI bus unreadable", "a readable "+sysfs.PCIDevicesDir
		return r
	}
	c := sortNICs(s)
	fs := append(append([]report.Finding(nil), c.findings...), c.untabled...)
	var cloud Slots // set when the VM has no RDMA by its machine type
	if len(c.boundNICs)+len(c.foreignNICs)+len(c.unbound)+len(c.untabled) == 0 {
		// No RDMA NIC the host can use, nor one of a driver outside the table.
		if len(c.softNames) > 0 {
			fs = append(fs, pciSoftwareOnly.At("", Slots{"devices": strings.Join(c.softNames, ", ")}))
		} else if accel := acceleratorPorts(s.PCI); accel != "" {
			fs = append(fs, pciAcceleratorPorts.At("", Slots{"accelerators": accel}))
		} else if slots, ok := cloudVNICOnly(s.PCI); ok {
			fs = append(fs, pciCloudVNICOnly.At("", slots))
			cloud = slots
		} else {
			fs = append(fs, noDeviceFinding(env, s))
		}
	}
	r := combineFindings(fs, false)
	switch {
	case len(c.unbound) > 0 || len(c.foreign) > 0:
		unusableNICsView(s, c, &r)
	case len(c.boundNICs) > 0:
		boundNICsView(c, &r)
	case len(c.untabled) > 0:
		untabledView(c, &r)
	case len(c.softNames) > 0:
		r.Observed, r.Expected = "software RDMA only", "an RDMA NIC"
		r.Details = append([]string{"Soft-RoCE/Soft-iWARP run the real verbs API over an ordinary netdev: good for tests, not for production performance."}, c.assigned...)
	default:
		noNICView(env, s, c, &r)
		if cloud != nil {
			r.Expected, r.NothingBeyond = "an RDMA NIC, where the machine type has one", true
			r.Details = append(r.Details, "If this node should have RDMA: "+cloud["how"])
		}
	}
	r.Evidence = map[string]any{"pci_functions_scanned": len(s.PCI), "rdma_nics": c.nicEv, "software_devices": c.softNames}
	return r
}

// nicSort is the host's RDMA NIC functions sorted by what holds them, with
// the finding about each.
type nicSort struct {
	nicEv                      []map[string]any
	findings                   []report.Finding
	unbound, foreign, assigned []string
	bound                      []string
	boundNICs, foreignNICs     []NIC
	softNames                  []string
	untabled                   []report.Finding // RDMA devices on functions whose driver is outside the table
}

func sortNICs(s *Survey) nicSort {
	var c nicSort
	for _, n := range s.NICs {
		f := judgeNIC(n)
		c.findings = append(c.findings, f)
		c.nicEv = append(c.nicEv, nicEvidence(n))
		switch f.ID {
		case pciBound.ID:
			c.bound = append(c.bound, f.Message)
			c.boundNICs = append(c.boundNICs, n)
		case pciAssignedVF.ID:
			c.assigned = append(c.assigned, f.Message)
		case pciPassthrough.ID:
			c.foreign = append(c.foreign, f.Message)
			c.foreignNICs = append(c.foreignNICs, n)
		default:
			c.unbound = append(c.unbound, f.Message)
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

// judgeNIC is the finding about one RDMA NIC function: bound to its
// driver, a VF assigned to a VM, passed through, or without a driver.
func judgeNIC(n NIC) report.Finding {
	desc := fmt.Sprintf("%s %s", n.Fn.Address, n.Product)
	if n.Fn.PhysFn != "" {
		desc += " (SR-IOV VF of " + n.Fn.PhysFn + ")"
	}
	slots := Slots{"function": desc, "address": n.Fn.Address}
	switch {
	case n.Bound:
		return pciBound.At(n.Fn.Address, slots.with("driver", n.Fn.Driver))
	case n.AssignedVF():
		return pciAssignedVF.At(n.Fn.Address, slots.with("driver", n.Foreign))
	case n.Foreign != "":
		return pciPassthrough.At(n.Fn.Address, passthroughSlots(n, slots))
	}
	drv := "<driver>"
	if n.Driver != nil {
		drv = n.Driver.PCIDriver
	}
	return pciUnbound.At(n.Fn.Address, slots.with("pci_driver", drv))
}

// nicEvidence is what the evidence says of one RDMA NIC function.
func nicEvidence(n NIC) map[string]any {
	nev := map[string]any{"address": n.Fn.Address, "product": n.Product,
		"vendor_id": fmt.Sprintf("0x%04x", n.Fn.Vendor), "device_id": fmt.Sprintf("0x%04x", n.Fn.Device),
		"driver": n.Fn.Driver}
	if n.Foreign != "" {
		nev["passthrough"] = true
	}
	return nev
}

// unusableNICsView is what a host with NICs without a driver or held by a
// passthrough driver shows: how many of each, and the functions that are fine.
func unusableNICsView(s *Survey, c nicSort, r *Result) {
	var observed []string
	if len(c.unbound) > 0 {
		observed = append(observed, fmt.Sprintf("%d unbound", len(c.unbound)))
	}
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
	r.Observed = strings.Join(observed, ", ")
	r.Expected = "every RDMA NIC function bound to its RDMA driver"
	r.Details = append(append(c.bound, c.assigned...), unboundDetails(s)...)
}

// boundNICsView passes the host's bound NICs, counted by product.
func boundNICsView(c nicSort, r *Result) {
	byProduct := map[string][]string{}
	for _, n := range c.boundNICs {
		k := n.Product + " (" + n.Fn.Driver + ")"
		byProduct[k] = append(byProduct[k], n.Fn.Address)
	}
	var parts []string
	for k, addrs := range byProduct {
		parts = append(parts, pciProductHead.render(Slots{"product": k, "count": fmt.Sprint(len(addrs))}))
	}
	sort.Strings(parts)
	r.Summary = pciBoundHead.render(Slots{"count": fmt.Sprint(len(c.boundNICs)), "functions": strings.Join(parts, ", ")})
	if len(c.assigned) > 0 {
		r.Summary += pciAssignedEnd.render(Slots{"count": fmt.Sprint(len(c.assigned))})
	}
	r.Observed = fmt.Sprintf("%d bound", len(c.boundNICs))
	r.Expected = "an RDMA NIC with its driver bound"
	r.Details = append(append(append(c.bound, c.assigned...), c.softNames...), messagesOf(c.untabled)...)
}

// untabledDevices are the findings about the hardware RDMA devices whose
// PCI function is no NIC of the table: the kernel registered them
// (ionic_rdma, usnic_verbs, or a driver newer than the table), so the
// function is an RDMA NIC the tool cannot judge — never "no RDMA NIC".
func untabledDevices(s *Survey) []report.Finding {
	known := map[string]bool{}
	for _, n := range s.NICs {
		known[n.Fn.Address] = true
	}
	var out []report.Finding
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
		out = append(out, pciUntabled.At(d.PCIAddr, Slots{"device": d.Name, "address": d.PCIAddr, "driver": drv}))
	}
	return out
}

// untabledView passes a host whose only RDMA devices belong to drivers
// outside the table: the device exists, which is all this check asks.
func untabledView(c nicSort, r *Result) {
	r.Summary = pciUntabledHead.render(Slots{"count": fmt.Sprint(len(c.untabled))})
	r.Observed = fmt.Sprintf("%d registered, driver not in the table", len(c.untabled))
	r.Expected = "an RDMA NIC with its driver bound"
	r.Details = append(append(messagesOf(c.untabled), c.assigned...), c.softNames...)
}

// noNICView is what a host with no RDMA NIC and no software device shows:
// the network functions that were looked at, and why RDMA devices may be
// out of sight.
func noNICView(env *Env, s *Survey, c nicSort, r *Result) {
	r.Observed = "none"
	r.Expected = "an RDMA NIC (or a software RDMA device)"
	r.Details = append(c.assigned, unboundDetails(s)...)
	if mode, err := env.Host.RDMASystem(); err == nil && mode.NetnsMode == "exclusive" {
		r.Details = append(r.Details, "RDMA netns mode is exclusive: devices are visible only in their own network namespace; a container without host networking sees none")
	}
}

// softwareRDMAModules are the kernel modules of the software RDMA drivers,
// by the name /sys/module shows.
var softwareRDMAModules = []string{"rdma_rxe", "siw"}

// noDeviceFinding is the finding of a host that shows no RDMA NIC and no
// RDMA device: in exclusive netns mode with a software RDMA driver loaded,
// the devices are in another namespace (a pod that was given none) — not
// a missing card.
func noDeviceFinding(env *Env, s *Survey) report.Finding {
	slots := Slots{"scanned": fmt.Sprint(len(s.PCI))}
	if mode, err := env.Host.RDMASystem(); err != nil || mode.NetnsMode != "exclusive" {
		return pciNoNIC.At("", slots)
	}
	var loaded []string
	for _, m := range softwareRDMAModules {
		if ok, _ := env.Host.Exists("/sys/module/" + m); ok {
			loaded = append(loaded, m)
		}
	}
	if len(loaded) == 0 {
		return pciNoNIC.At("", slots)
	}
	return pciNoneInNetns.At("", slots.with("modules", strings.Join(loaded, " and ")))
}

// messagesOf are the findings' rendered messages, one line each.
func messagesOf(fs []report.Finding) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.Message)
	}
	return out
}

// lspciHint lists the InfiniBand (class 0207) and Ethernet (0200)
// controllers with their IDs and bound driver, whatever the vendor.
const lspciHint = "`lspci -nnk -d ::0207; lspci -nnk -d ::0200`"

// passthroughSlots are the slots of the way back for an RDMA NIC that a
// passthrough driver (vfio-pci, …) holds.
func passthroughSlots(n NIC, slots Slots) Slots {
	drv := "its RDMA driver"
	if n.Driver != nil {
		drv = n.Driver.PCIDriver
	}
	return slots.with("address", n.Fn.Address, "driver", n.Foreign, "rdma_driver", drv, "ids", fmt.Sprintf("%04x:%04x", n.Fn.Vendor, n.Fn.Device))
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

// cloudVNIC is a cloud VM's paravirtual NIC that has no RDMA engine: on
// its platform RDMA comes as other functions (an EFA beside the ENA;
// ConnectX-7 VFs on GCP's RDMA machine types), never from it.
type cloudVNIC struct {
	name, driver string
	platform     string // what moves the accelerators' data there instead
	how          string // how a node of that cloud gets RDMA
}

// cloudVNICs are the paravirtual NICs known to have no RDMA engine, by
// vendor:device: gVNIC (drivers/net/ethernet/google/gve: PCI_VENDOR_ID_GOOGLE
// 0x1ae0, PCI_DEV_ID_GVNIC 0x0042) and ENA (drivers/net/ethernet/amazon/ena:
// 1d0f:ec20, ec21; EFA is its own function, 1d0f:efa*).
var cloudVNICs = map[[2]uint16]cloudVNIC{
	{0x1ae0, 0x0042}: {name: "Google gVNIC", driver: "gve",
		platform: "on Google Cloud, A3 High and A3 Mega move GPU data with GPUDirect-TCPX/TCPXO over gVNIC (TCP, not RDMA; rdmadoctor does not judge it)",
		how:      "use a machine type with an RDMA network (A3 Ultra, A4, H4D: ConnectX-7 VFs running RoCE) and attach its RDMA network interfaces (nic-type MRDMA/IRDMA) at creation."},
	{0x1d0f, 0xec20}: {name: "AWS ENA", driver: "ena", platform: "on EC2, RDMA is an EFA, a PCI function of its own that this instance does not have",
		how: "launch an EFA-capable instance type with EFA network interfaces (`--network-interfaces ... InterfaceType=efa`), or attach one to the stopped instance; then install the EFA driver (the AWS EFA installer)."},
	{0x1d0f, 0xec21}: {name: "AWS ENA", driver: "ena", platform: "on EC2, RDMA is an EFA, a PCI function of its own that this instance does not have",
		how: "launch an EFA-capable instance type with EFA network interfaces (`--network-interfaces ... InterfaceType=efa`), or attach one to the stopped instance; then install the EFA driver (the AWS EFA installer)."},
}

// cloudVNICOnly reports whether every network-class function of the host
// is one cloud's paravirtual NIC without RDMA, with the finding's slots:
// such a VM has no RDMA by its machine type, not by a fault on it.
func cloudVNICOnly(fns []sysfs.PCIFunction) (Slots, bool) {
	var kind *cloudVNIC
	count := 0
	for _, fn := range fns {
		if fn.Class>>16 != 0x02 {
			continue // not a network controller
		}
		v, ok := cloudVNICs[[2]uint16{fn.Vendor, fn.Device}]
		if !ok || (kind != nil && kind.name != v.name) {
			return nil, false
		}
		kind = &v
		count++
	}
	if kind == nil {
		return nil, false
	}
	return Slots{"vnics": fmt.Sprintf("%d × %s (%s)", count, kind.name, kind.driver), "platform": kind.platform, "how": kind.how}, true
}

// rdmaAccelerators are accelerators whose RoCE ports are integrated on the
// accelerator's own PCI function (read: drivers/accel/habanalabs, PCI
// vendor 0x1da3; Gaudi 2 is 0x1020; Gaudi 3's 0x1060 is inferred). The
// upstream kernel drives their compute only: the network and RDMA drivers
// come with Intel's Gaudi software.
var rdmaAccelerators = map[[2]uint16]string{
	{0x1da3, 0x1020}: "Intel Gaudi 2", {0x1da3, 0x1060}: "Intel Gaudi 3",
}

// acceleratorPorts names the host's accelerators with integrated RoCE
// ports ("8 × Intel Gaudi 3"), "" when it has none.
func acceleratorPorts(fns []sysfs.PCIFunction) string {
	counts := map[string]int{}
	var names []string
	for _, fn := range fns {
		name, ok := rdmaAccelerators[[2]uint16{fn.Vendor, fn.Device}]
		if !ok {
			continue
		}
		if counts[name] == 0 {
			names = append(names, name)
		}
		counts[name]++
	}
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%d × %s", counts[n], n))
	}
	return strings.Join(parts, ", ")
}
