package checks

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

const (
	gidTypeV1 = "IB/RoCE v1"
	gidTypeV2 = "RoCE v2"
)

func init() {
	register(Check{
		ID: "roce.config", Code: 20, Level: 1,
		Title: "RoCE ports: netdev up with an IP, RoCE v2 GIDs, default RoCE mode v2, MTU",
		// rdma.devices, not port.state: one DOWN port must not hide the
		// configuration of every other port. DOWN ports are listed, not judged.
		Needs: []string{"rdma.devices"},
		Explain: Explanation{
			Judges: "For every ACTIVE Ethernet (RoCE) port (the others are listed as not judged; port.state reports them): the netdev that carries it (gid_attrs/ndevs) is up and has an IP address; the GID table " +
				"holds RoCE v2 GIDs for that netdev's addresses; rdma_cm's default RoCE mode (/sys/kernel/config/rdma_cm/<dev>/ports/<n>/default_roce_mode) " +
				"is RoCE v2 where that file exists — rdmadoctor never creates configfs entries, so otherwise the mode is unknown and judged from the GID types; " +
				"and the netdev MTU with the RoCE active MTU it allows (the largest of 256…4096 that fits with the RoCE headers). InfiniBand-only hosts skip. " +
				"Kinds: a PF's port is judged on its netdev and the devices stacked on it (VLAN, macvlan, bond; a RoCE LAG on its bond). " +
				"A port whose netdev is an Open vSwitch port (master ovs-system, as a DPU's uplink is) is a switch port with no address of its own. " +
				"A VF's, sub-function's or representor's port (a DPU's representor of its host's PF, c1pf0, included) needs no address on the host (a hypervisor's pool: listed, not failed) and is not judged when its " +
				"netdev has moved to another namespace; a VF whose netdev is here while its PF's is not was handed to this namespace (a pod's SR-IOV VF) and " +
				"must have an address. In a pod or container in RDMA netns mode shared, a port whose netdev is the host's is judged through the interfaces of " +
				"this namespace that carry it — a Multus macvlan or ipvlan (net1), tied to the port by a GID of its own address under its name, as the kernel " +
				"adds them for upper devices in any namespace; ports no interface here carries are another namespace's and listed, and it fails only when " +
				"no ACTIVE port is carried here at all. In exclusive mode only the devices moved into this namespace are seen.",
			Why: "RoCE v2 GIDs are made from the netdev's IP addresses: no IP, no routable GID, and rdma_cm cannot resolve a peer. RoCE v1 is not " +
				"routable (it is a layer-2 protocol): a connection made with v1 fails across subnets and is not marked for the lossless class by DSCP. " +
				"The netdev MTU caps the RDMA MTU: 1500 allows 1024, jumbo frames ≥ 4192 (9000 recommended) allow 4096.",
		},
		Run: runRoCEConfig,
	})
}

// roce.config's findings, about a RoCE port ("mlx5_0/1") or, when there is
// none, the host. A port's line names the port and joins its failures (or,
// with none, its warnings); the fix of each goes to the remedy.
var (
	roceConfigOK = declare(Finding{ID: "roce.config/ok", Status: report.Pass,
		When:    "an ACTIVE RoCE port's netdev is up with an IP, the GID table holds RoCE v2 GIDs for its addresses, and the default RoCE mode is v2 or unknown",
		Message: "{observed}"})
	roceConfigPortDown = declare(Finding{ID: "roce.config/port-down", Status: report.Skip,
		When:    "a RoCE port is not ACTIVE: listed, not judged (port.state reports it)",
		Message: "{port}: not judged: {state}"})
	roceConfigNetdevAway = declare(Finding{ID: "roce.config/netdev-elsewhere", Status: report.Skip,
		When:    "a VF's or representor's netdev is in another network namespace (moved into a pod or guest)",
		Message: "{port} → {netdev}: the VF's netdev is in another network namespace (moved into a pod or guest): not judged here"})
	roceConfigNoNetdev = declare(Finding{ID: "roce.config/no-netdev", Status: report.Fail,
		When:    "no netdev carries an ACTIVE RoCE port (gid_attrs/ndevs empty)",
		Message: "{port}: no netdev carries it (gid_attrs/ndevs empty)",
		Fix:     "{port} has no netdev: check the Ethernet driver bound to {pci} and `dmesg`."})
	roceConfigNetdevUnreadable = declare(Finding{ID: "roce.config/netdev-unreadable", Status: report.Error,
		When:    "the netdev state could not be read",
		Message: "netdev state unknown", Fix: netdevByHand})
	roceConfigNetdevMissing = declare(Finding{ID: "roce.config/netdev-missing", Status: report.Fail,
		When:    "the netdev the port names is not listed in this network namespace",
		Message: "netdev {netdev} not found",
		Fix: "{port} names netdev {netdev}, which this network namespace does not list: check `ip link show {netdev}` and `rdma link show`; " +
			"a netdev moved to another namespace takes its RoCE GIDs with it."})
	roceConfigNetdevDown = declare(Finding{ID: "roce.config/netdev-down", Status: report.Fail,
		When:    "the netdev of a RoCE port is down",
		Message: "netdev {netdev} is {operstate}", Fix: "`ip link set {netdev} up`, and bring it up at boot in the network configuration."})
	roceConfigNoIP = declare(Finding{ID: "roce.config/no-ip", Status: report.Fail,
		When:    "the netdev of a RoCE port has no IP address",
		Message: "netdev {netdev} has no IP address", Fix: roceNoIPFix})
	roceConfigNoIPUppers = declare(Finding{ID: "roce.config/no-ip-uppers", Status: report.Fail,
		When:    "neither the netdev of a RoCE port nor its upper devices (VLAN, macvlan, bond) have an IP address",
		Message: "netdev {netdev} has no IP address (nor its upper devices {uppers})", Fix: roceNoIPFix})
	roceConfigMTUDeviates = declare(Finding{ID: "roce.config/mtu-deviates", Status: report.Fail,
		When:    "the netdev MTU is not the one the expectations file names",
		Message: "netdev {netdev} MTU {mtu}, expected {want} by {cite}",
		Fix:     "Set the MTU of {netdev} as its class says (`ip link set {netdev} mtu {want}`, and in the network configuration), or update the expectations file if it changed on purpose."})
	roceConfigSmallMTU = declare(Finding{ID: "roce.config/small-mtu", Status: report.Warn,
		When:    "the netdev MTU allows a RoCE MTU below 1024",
		Message: "netdev MTU {mtu} allows a RoCE MTU of only {active_mtu}",
		Fix:     "Raise the MTU of {netdev}: 1500 allows a RoCE MTU of 1024, 9000 allows 4096 (the switches must carry it too)."})
	roceConfigOnlyV1 = declare(Finding{ID: "roce.config/only-v1", Status: report.Fail,
		When:    "no RoCE v2 GID for the port's addresses (only v1)",
		Message: "only RoCE v1 GIDs (v1 is not routable)",
		Fix:     "{port} has no RoCE v2 GID: check the NIC and firmware support RoCE v2 (" + roceV2Cards + ") and the driver is current."})
	roceConfigNoGID = declare(Finding{ID: "roce.config/no-gid", Status: report.Fail,
		When:    "no RoCE GID at all",
		Message: "no RoCE GID at all",
		Fix: "{port} has no RoCE GID: bring {netdev} up and give it an address (`ip link set {netdev} up`, `ip addr add <addr>/<prefix> dev {netdev}`); " +
			"with IPv6 disabled and no IPv4 the table is empty."})
	roceConfigV2Missing = declare(Finding{ID: "roce.config/v2-missing", Status: report.Fail,
		When:    "some addresses of the netdev have no RoCE v2 GID",
		Message: "no RoCE v2 GID for {addresses}",
		Fix:     "{port} lacks RoCE v2 GIDs for some addresses of {netdev}: check `dmesg` for GID table errors (a full GID table, a VLAN or bond setup the driver does not follow)."})
	roceConfigModeV1 = declare(Finding{ID: "roce.config/mode-v1", Status: report.Fail,
		When:    "rdma_cm's default_roce_mode is IB/RoCE v1",
		Message: "rdma_cm default_roce_mode is {mode}",
		Fix:     "`echo \"RoCE v2\" > {path}` (configfs, rdma_cm loaded); it does not survive a reboot, so set it from a boot unit."})
	roceConfigNoneActive = declare(Finding{ID: "roce.config/none-active", Status: report.Skip,
		When:    "no RoCE port is ACTIVE: nothing to judge (port.state says why the ports are down)",
		Message: "no ACTIVE RoCE port to judge; port.state reports why"})
	roceConfigNoPort = declare(Finding{ID: "roce.config/no-rdma-port", Status: report.Skip,
		When:    "the host has no RDMA port",
		Message: "no RDMA port: RoCE does not apply"})
	roceConfigNotRoCE = declare(Finding{ID: "roce.config/not-roce", Status: report.Skip,
		When:    "the host's ports are InfiniBand, Omni-Path or another transport without RoCE",
		Message: "no RoCE port ({transports}): RoCE mode, GIDs and the netdev's address do not apply"})
	roceConfigIWARP = declare(Finding{ID: "roce.config/iwarp", Status: report.Skip,
		When:    "the host's Ethernet RDMA ports are iWARP",
		Message: "no RoCE port ({transports}): RoCE mode, GIDs and the netdev's address do not apply" + whyIWARP})
	roceConfigEFA = declare(Finding{ID: "roce.config/efa", Status: report.Skip,
		When:    "the host's RDMA ports are EFA",
		Message: "no RoCE port ({transports}): RoCE mode, GIDs and the netdev's address do not apply" + whyEFA})
	roceConfigUSNIC = declare(Finding{ID: "roce.config/usnic", Status: report.Skip,
		When:    "the host's RDMA ports are Cisco usNIC",
		Message: "no RoCE port ({transports}): RoCE mode, GIDs and the netdev's address do not apply" + whyUSNIC})
)

const roceNoIPFix = "Give {netdev} (or the VLAN/bond on it that the fabric uses) an address (`ip addr add <addr>/<prefix> dev {netdev}`) and make it persistent in the network configuration; its RoCE v2 GID appears with it."

// Why the RoCE checks do not apply to a transport that looks like Ethernet.
const (
	whyIWARP = "; iWARP runs over TCP and connects through rdma_cm"
	whyEFA   = "; EFA runs SRD over the AWS network, with no GID types or PFC to set"
	whyUSNIC = "; usNIC runs over plain UDP/IP, with no RoCE GIDs or PFC to set"
)

// roceConfigExpected is what roce.config expects of every ACTIVE RoCE port.
const roceConfigExpected = "every ACTIVE RoCE port: a netdev (or an upper device: VLAN, bond) up with an IP, RoCE v2 GIDs for it, default_roce_mode RoCE v2 (where set), RoCE MTU ≥ 1024"

// roceV2Cards names the NICs that speak RoCE v2.
const roceV2Cards = "ConnectX-3 Pro/ConnectX-4 or later, or the vendor's equivalent"

// netdevByHand says how to look at a RoCE port's netdev without rdmadoctor.
const netdevByHand = "Look by hand: `ip -br addr show`, `rdma link show` (which netdev carries each port) and " +
	"`grep . /sys/class/infiniband/*/ports/*/gid_attrs/types/*`; run on the host (netlink), or capture a snapshot that records netdevs."

// routableAddrs keeps the addresses a RoCE v2 GID can be made from for
// traffic to other hosts: not loopback, not IPv6 link-local.
func routableAddrs(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		ip, _, err := net.ParseCIDR(a)
		if err != nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, a)
	}
	return out
}

// gidForAddr is the GID a RoCE device makes from an address: the address
// itself for IPv6, the IPv4-mapped ::ffff:a.b.c.d for IPv4.
func gidForAddr(cidr string) net.IP {
	ip, _, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil
	}
	return ip.To16()
}

// portActive tells whether a port is ACTIVE with its link up: the ports
// whose configuration the RoCE checks judge.
func portActive(p sysfs.RDMAPort) bool {
	return p.State.Code == portStateActive && p.PhysState.Code == physLinkUp
}

func parseGID(s string) net.IP {
	b, err := hex.DecodeString(strings.ReplaceAll(s, ":", ""))
	if err != nil || len(b) != 16 {
		return nil
	}
	return net.IP(b)
}

// roce.config's headline: the summary when every RoCE port judged passes.
const roceConfigPassHead headline = "{count} RoCE port(s): netdev up with an IP, RoCE v2 GIDs present"

func runRoCEConfig(_ context.Context, env *Env) Result {
	m := env.Model()
	rj := newRoCEJudge(env)
	var vs []verdict
	var ports []any
	var other []*PortModel
	var notHere, notHereNetdevs []string
	for _, pm := range m.Ports {
		if pm.Transport != RoCE {
			other = append(other, pm)
			continue
		}
		v := rj.judge(pm)
		vs = append(vs, v)
		ports = append(ports, v.evidence)
		if len(v.findings) > 0 && v.findings[0].ID == roceConfigNotHere.ID {
			notHere, notHereNetdevs = append(notHere, pm.Label), appendUnique(notHereNetdevs, pm.Netdev)
		}
	}
	ev := map[string]any{"ports": nonNilAny(ports)}
	if len(vs) == 0 {
		r := notRoCEFinding(other)
		r.Evidence = ev
		return r
	}
	judged := 0
	for _, v := range vs {
		if v.status != report.Skip {
			judged++
		}
	}
	r := combineUnits(vs, "RoCE port", "RoCE ports")
	var details []string
	for _, v := range vs {
		details = append(details, v.details...)
	}
	if len(other) > 0 {
		details = append(details, "not RoCE, not judged here: "+transportTally(other))
	}
	r.Details = details
	if nr, none := noneHere(vs, notHere, notHereNetdevs, details); none {
		nr.Findings = append(nr.Findings, r.Findings...)
		nr.Expected, nr.Evidence = roceConfigExpected, ev
		return nr
	}
	switch {
	case judged == 0:
		fs := r.Findings
		r = roceConfigNoneActive.result("", nil)
		r.Details, r.Findings = details, append(r.Findings, fs...)
	case r.Status == report.Pass || r.Status == report.Skip:
		r.Status = report.Pass
		r.Summary = roceConfigPassHead.render(Slots{"count": fmt.Sprint(judged)})
		if n := len(vs) - judged; n > 0 {
			r.Summary += notJudgedEnd.render(Slots{"count": fmt.Sprint(n)})
		}
		r.Remedy = ""
	}
	if r.Status == report.Error {
		r.Remedy = joinRemedy(r.Remedy, netdevByHand)
	}
	r.Expected = roceConfigExpected
	r.Evidence = ev
	return r
}

func nonNilAny(v []any) []any {
	if v == nil {
		return []any{}
	}
	return v
}

// etherTransport is the first of ports whose transport looks like
// Ethernet (iWARP, EFA, usNIC), for saying why the RoCE checks do not
// apply; "" when none is.
func etherTransport(ports []*PortModel) Transport {
	for _, p := range ports {
		switch p.Transport {
		case IWARP, EFA, USNIC:
			return p.Transport
		}
	}
	return ""
}

// transportWhy says why the RoCE checks do not apply to a transport that
// looks like Ethernet.
func transportWhy(ports []*PortModel) string {
	return map[Transport]string{IWARP: whyIWARP, EFA: whyEFA, USNIC: whyUSNIC}[etherTransport(ports)]
}

// notRoCEFinding is roce.config's finding when the host has no RoCE port.
func notRoCEFinding(other []*PortModel) Result {
	if len(other) == 0 {
		return roceConfigNoPort.result("", nil)
	}
	f := map[Transport]*Finding{IWARP: roceConfigIWARP, EFA: roceConfigEFA, USNIC: roceConfigUSNIC}[etherTransport(other)]
	if f == nil {
		f = roceConfigNotRoCE
	}
	return f.result("", Slots{"transports": transportTally(other)})
}

// roceJudge judges one RoCE port with what the host offers.
type roceJudge struct {
	env    *Env
	h      *sysfs.Host
	byName map[string]sysfs.Netdev
	ndErr  error
}

func newRoCEJudge(env *Env) *roceJudge {
	t := env.Netdevs()
	return &roceJudge{env: env, h: env.Host, byName: t.byName, ndErr: t.err}
}

// roceFindings collects one port's findings.
type roceFindings struct {
	unit  string
	slots Slots
	fs    []report.Finding
}

func (f *roceFindings) add(d *Finding, kv ...string) {
	f.fs = append(f.fs, d.At(f.unit, f.slots.with(kv...)))
}

// texts are the messages of the findings of one status, in order.
func (f *roceFindings) texts(st report.Status) []string {
	var out []string
	for _, x := range f.fs {
		if x.Status == st {
			out = append(out, x.Message)
		}
	}
	return out
}

// remedy joins the fixes of every finding, once each.
func (f *roceFindings) remedy() string {
	var fixes []string
	for _, x := range f.fs {
		if x.Fix != "" && x.ID != roceConfigNetdevUnreadable.ID {
			// netdevByHand is added once to the check's remedy when
			// it ends in error.
			fixes = appendUnique(fixes, x.Fix)
		}
	}
	return strings.Join(fixes, "\n")
}

func (rj *roceJudge) judge(pm *PortModel) verdict {
	label, d, p := pm.Label, pm.Device.Dev, pm.Port
	ev := map[string]any{"device": d.Name, "port": p.Num, "judged": false}
	unit, slots := portUnit(pm), Slots{"port": label, "netdev": pm.Netdev, "state": stateText(p), "pci": valueOrUnknown(d.PCIAddr)}
	skipped := func(v verdict) verdict {
		v.details, v.evidence = []string{v.line}, ev
		return v
	}
	if !portActive(p) {
		ev["state"] = valueOrUnknown(p.State.String())
		return skipped(roceConfigPortDown.unit(unit, slots))
	}
	if pm.Netdev == "" {
		return skipped(roceConfigNoNetdev.unit(unit, slots))
	}
	ev["netdev"] = pm.Netdev
	if !pm.NetdevHere && (pm.IsVF() || pm.Representor) {
		return skipped(roceConfigNetdevAway.unit(unit, slots))
	}
	if pm.NetdevAway() && len(pm.Uppers) == 0 {
		return skipped(roceConfigNotHere.unit(unit, slots))
	}
	ev["judged"] = true
	f := roceFindings{unit: unit, slots: slots}
	line := fmt.Sprintf("%s → %s", label, pm.Netdev)
	netdevState := rj.netdevState
	if pm.NetdevAway() {
		netdevState = rj.upperHereState // roce_config_netns.go
	}
	addrs, ok := netdevState(pm, &f, ev, &line)
	if ok {
		rj.gids(pm, addrs, &f, ev, &line)
	}
	rj.defaultMode(pm, &f, ev, &line)
	if !ok {
		f.add(roceConfigNetdevUnreadable)
	}
	return roceVerdict(&f, label, line, ev)
}

// roceVerdict is one judged port's verdict from its findings: its
// failures, else its error, else its warnings, name the port's line.
func roceVerdict(f *roceFindings, label, line string, ev map[string]any) verdict {
	fails, warns := f.texts(report.Fail), f.texts(report.Warn)
	errs := f.texts(report.Error)
	var v verdict
	switch {
	case len(fails) > 0:
		v = verdict{status: report.Fail, line: label + ": " + strings.Join(fails, "; ")}
		line += " — " + strings.Join(fails, "; ")
	case len(errs) > 0:
		v = verdict{status: report.Error, line: label + ": " + strings.Join(errs, "; ")}
	case len(warns) > 0:
		v = verdict{status: report.Warn, line: label + ": " + strings.Join(warns, "; ")}
	default:
		v = roceConfigOK.unit(f.unit, f.slots.with("observed", line))
		f.fs = v.findings
	}
	v.evidence, v.findings = ev, f.fs
	ev["ok"] = v.status == report.Pass
	v.details = []string{line}
	v.remedy = f.remedy()
	return v
}

// netdevState judges the netdevs that carry a port: the port's netdev up,
// an address on it or on an upper device (VLAN, macvlan, the LAG's bond),
// its MTU. A VF or representor without an address on the host is normal:
// its traffic belongs to a guest or a pod. ok is false when the netdev
// state could not be read.
func (rj *roceJudge) netdevState(pm *PortModel, f *roceFindings, ev map[string]any, line *string) (addrs []string, ok bool) {
	name := pm.Netdev
	nd, found := rj.byName[name]
	switch {
	case rj.ndErr != nil:
		*line += fmt.Sprintf(": netdev state unknown (%v)", rj.ndErr)
		return nil, false
	case !found:
		f.add(roceConfigNetdevMissing)
		return nil, true
	}
	ev["operstate"], ev["mtu"], ev["addresses"] = nd.OperState, nd.MTU, nonNil(nd.Addresses)
	*line += fmt.Sprintf(": %s, MTU %d", nd.OperState, nd.MTU)
	if !nd.AdminUp || (nd.OperState != "up" && nd.OperState != "unknown") {
		f.add(roceConfigNetdevDown, "operstate", nd.OperState)
	}
	byCarrier := map[string][]string{}
	backup, note := backupSlaveCarriers(rj.env.Host, pm)
	*line += note
	for _, c := range pm.Carriers() {
		if backup[c] {
			continue
		}
		if cnd, ok := rj.byName[c]; ok {
			if a := routableAddrs(cnd.Addresses); len(a) > 0 {
				byCarrier[c] = a
				addrs = append(addrs, a...)
				*line += fmt.Sprintf(", %s on %s", strings.Join(a, " "), c)
			}
		}
	}
	if len(pm.Uppers) > 0 {
		ev["uppers"] = pm.Uppers
	}
	if len(addrs) == 0 {
		switch {
		case vfUsedHere(rj.env.Survey(), pm):
			f.add(roceConfigVFNoIP) // roce_config_netns.go
		case pm.IsVF() || pm.Representor:
			*line += "; no IP on the host (" + noIPWhy(pm) + ")"
		case pm.OVSPort:
			*line += "; no IP (an Open vSwitch port: the bridge forwards others' traffic through it; this host's own RDMA uses an interface of its own)"
		case len(backup) > 0:
			// Its addresses are the bond's: on the active slave's port.
		case len(pm.Uppers) > 0:
			f.add(roceConfigNoIPUppers, "uppers", strings.Join(pm.Uppers, ", "))
		default:
			f.add(roceConfigNoIP)
		}
	}
	if want := rj.env.Expect.Port(pm.Device.Dev.Name, pm.Port.Num).MTU; want != nil && nd.MTU != want.V {
		f.add(roceConfigMTUDeviates, "mtu", fmt.Sprint(nd.MTU), "want", fmt.Sprint(want.V), "cite", want.Cite())
	}
	if nd.MTU > 0 {
		am := RoCEActiveMTU(nd.MTU)
		ev["active_mtu"] = am
		*line += fmt.Sprintf(" (RoCE active MTU %d)", am)
		if am < 1024 {
			f.add(roceConfigSmallMTU, "mtu", fmt.Sprint(nd.MTU), "active_mtu", fmt.Sprint(am))
		}
	}
	return addrs, true
}

// backupSlaveCarriers are the carriers of a port whose netdev is a backup
// slave of a bond with one active slave (active-backup, balance-tlb,
// balance-alb: bond_uses_primary): the bond and the devices on it. The
// kernel gives such a bond's addresses only to its active slave's port and
// removes them from the others (roce_gid_mgmt.c,
// is_eth_active_slave_of_bonding_rcu; is_eth_port_inactive_slave_filter),
// so the backup's port has no GID for them, by design. note says so on
// the port's line.
func backupSlaveCarriers(h *sysfs.Host, pm *PortModel) (map[string]bool, string) {
	topo, err := h.NetdevTopology(pm.Netdev)
	if err != nil || topo.Master == "" {
		return nil, ""
	}
	mode, active, err := h.BondActiveSlave(topo.Master)
	if err != nil || active == "" || active == pm.Netdev || !bondUsesPrimary(mode) {
		return nil, ""
	}
	skip := map[string]bool{topo.Master: true}
	for _, u := range pm.Uppers {
		if ut, err := h.NetdevTopology(u); err == nil && slices.Contains(ut.Lowers, topo.Master) {
			skip[u] = true
		}
	}
	return skip, fmt.Sprintf(", backup slave of %s (%s; active slave %s): %s's addresses are on the active slave's port, not judged here",
		topo.Master, strings.Fields(mode)[0], active, topo.Master)
}

// bondUsesPrimary: the bonding modes with one active slave (bonding's
// bond_uses_primary).
func bondUsesPrimary(mode string) bool {
	f := strings.Fields(mode)
	return len(f) > 0 && (f[0] == "active-backup" || f[0] == "balance-tlb" || f[0] == "balance-alb")
}

// noIPWhy says why a VF's, SF's or representor's port needs no address
// on the host.
func noIPWhy(pm *PortModel) string {
	if pm.Device.Function == SubFunction && !pm.Representor {
		return "normal for an mlx5 sub-function: it is handed to a container, a VM or a service that addresses it"
	}
	return "normal for a VF or representor: its traffic belongs to a guest or a pod"
}

// gids judges the GID table of a port: RoCE v2 GIDs for the addresses of
// the netdevs that carry it.
func (rj *roceJudge) gids(pm *PortModel, addrs []string, f *roceFindings, ev map[string]any, line *string) {
	carriers := map[string]bool{}
	for _, c := range pm.Carriers() {
		carriers[c] = true
	}
	var v1, v2 int
	v2ByIP := map[string]bool{}
	for _, g := range pm.Port.GIDs {
		if g.Netdev != "" && !carriers[g.Netdev] {
			continue
		}
		switch g.Type {
		case gidTypeV2:
			v2++
			if ip := parseGID(g.GID); ip != nil {
				v2ByIP[ip.String()] = true
			}
		case gidTypeV1:
			v1++
		}
	}
	ev["gids_v1"], ev["gids_v2"] = v1, v2
	*line += fmt.Sprintf("; GIDs: %d RoCE v2, %d v1", v2, v1)
	var missing []string
	for _, a := range addrs {
		if ip := gidForAddr(a); ip != nil && !v2ByIP[ip.String()] {
			missing = append(missing, a)
		}
	}
	switch {
	case v2 == 0 && v1 > 0:
		f.add(roceConfigOnlyV1)
	case v2 == 0:
		f.add(roceConfigNoGID)
	case len(missing) > 0:
		f.add(roceConfigV2Missing, "addresses", strings.Join(missing, ", "))
	}
}

// defaultMode reads rdma_cm's default RoCE mode of the port, where its
// configfs entry exists.
func (rj *roceJudge) defaultMode(pm *PortModel, f *roceFindings, ev map[string]any, line *string) {
	d, p := pm.Device.Dev, pm.Port
	mode, err := rj.h.DefaultRoCEMode(d.Name, p.Num)
	ev["default_roce_mode"] = "unknown"
	switch {
	case err == nil && mode == gidTypeV2:
		ev["default_roce_mode"] = mode
		*line += fmt.Sprintf("; default_roce_mode %q", mode)
	case err == nil && mode == gidTypeV1:
		ev["default_roce_mode"] = mode
		*line += fmt.Sprintf("; default_roce_mode %q", mode)
		f.add(roceConfigModeV1, "mode", fmt.Sprintf("%q", mode), "path", sysfs.RoCEModePath(d.Name, p.Num))
	case err == nil:
		*line += fmt.Sprintf("; default_roce_mode %q (not a mode rdma_cm writes: unknown)", mode)
	case sysfs.IsNotExist(err):
		*line += "; default_roce_mode unknown (no rdma_cm configfs entry), judged from GID types"
	default:
		*line += fmt.Sprintf("; default_roce_mode unknown (%v)", err)
	}
}
