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
				"and the netdev MTU with the RoCE active MTU it allows (the largest of 256…4096 that fits with the RoCE headers). InfiniBand-only hosts skip.",
			Why: "RoCE v2 GIDs are made from the netdev's IP addresses: no IP, no routable GID, and rdma_cm cannot resolve a peer. RoCE v1 is not " +
				"routable (it is a layer-2 protocol): a connection made with v1 fails across subnets and is not marked for the lossless class by DSCP. " +
				"The netdev MTU caps the RDMA MTU: 1500 allows 1024, jumbo frames ≥ 4192 (9000 recommended) allow 4096.",
			Failures: []Failure{
				{report.Fail, "the netdev of a RoCE port has no IP address",
					"Give it one (`ip addr add <addr>/<prefix> dev <netdev>`) and make it persistent in the network configuration (netplan, NetworkManager, ifupdown)."},
				{report.Fail, "the netdev of a RoCE port is down", "`ip link set <netdev> up`, and bring it up at boot in the network configuration."},
				{report.Fail, "no RoCE v2 GID for the port's addresses (only v1)",
					"Check the NIC and firmware support RoCE v2 (" + roceV2Cards + ") and that the driver is current; GIDs appear per IP address once the netdev has one."},
				{report.Fail, "no RoCE GID at all", roceNoGIDFix("<netdev>")},
				{report.Fail, "rdma_cm's default_roce_mode is IB/RoCE v1",
					"`echo \"RoCE v2\" > /sys/kernel/config/rdma_cm/<dev>/ports/<port>/default_roce_mode` (needs configfs mounted and rdma_cm loaded; the directory " +
						"is made with `mkdir /sys/kernel/config/rdma_cm/<dev>`); it does not survive a reboot — set it from a boot unit."},
				{report.Warn, "the netdev MTU allows a RoCE MTU below 1024", "Raise the netdev MTU: 1500 allows 1024, ≥ 4192 (9000 recommended, and the switches must carry it) allows 4096."},
				{report.Skip, "no RoCE port is ACTIVE", "Nothing to judge here: port.state says why the ports are down."},
				{report.Error, "the netdev state could not be read", netdevByHand},
			},
		},
		Run: runRoCEConfig,
	})
}

// roceV2Cards names the NICs that speak RoCE v2.
const roceV2Cards = "ConnectX-3 Pro/ConnectX-4 or later, or the vendor's equivalent"

// netdevByHand says how to look at a RoCE port's netdev without rdmadoctor.
const netdevByHand = "Look by hand: `ip -br addr show`, `rdma link show` (which netdev carries each port) and " +
	"`grep . /sys/class/infiniband/*/ports/*/gid_attrs/types/*`; run on the host (netlink), or capture a snapshot that records netdevs."

// roceNoGIDFix is the remedy for a RoCE port whose GID table is empty: GIDs
// are made from the netdev's addresses, IPv6 link-local included.
func roceNoGIDFix(netdev string) string {
	return fmt.Sprintf("Bring %s up and give it an address (`ip link set %s up`, `ip addr add <addr>/<prefix> dev %s`); "+
		"with IPv6 disabled and no IPv4 the table is empty.", netdev, netdev, netdev)
}

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

// lowerFirst lowers the first letter of a sentence that follows a colon.
func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func parseGID(s string) net.IP {
	b, err := hex.DecodeString(strings.ReplaceAll(s, ":", ""))
	if err != nil || len(b) != 16 {
		return nil
	}
	return net.IP(b)
}

func runRoCEConfig(_ context.Context, env *Env) Result {
	m := env.Model()
	rj := newRoCEJudge(env)
	var vs []verdict
	var ports []any
	var other []*PortModel
	for _, pm := range m.Ports {
		if pm.Transport != RoCE {
			other = append(other, pm)
			continue
		}
		v := rj.judge(pm)
		vs = append(vs, v)
		ports = append(ports, v.evidence)
	}
	ev := map[string]any{"ports": nonNilAny(ports)}
	if len(vs) == 0 {
		r := skip(notRoCEText(other))
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
	r.Details = nil
	for _, v := range vs {
		r.Details = append(r.Details, v.details...)
	}
	if len(other) > 0 {
		r.Details = append(r.Details, "not RoCE, not judged here: "+transportTally(other))
	}
	switch {
	case judged == 0:
		r = Result{Status: report.Skip, Summary: "no ACTIVE RoCE port to judge; port.state reports why", Details: r.Details}
	case r.Status == report.Pass || r.Status == report.Skip:
		r.Status = report.Pass
		r.Summary = fmt.Sprintf("%d RoCE port(s): netdev up with an IP, RoCE v2 GIDs present", judged)
		if n := len(vs) - judged; n > 0 {
			r.Summary += fmt.Sprintf("; %d not judged (see details)", n)
		}
		r.Remedy = ""
	}
	if r.Status == report.Error {
		r.Remedy = joinRemedy(r.Remedy, netdevByHand)
	}
	r.Expected = "every ACTIVE RoCE port: a netdev (or an upper device: VLAN, bond) up with an IP, RoCE v2 GIDs for it, default_roce_mode RoCE v2 (where set), RoCE MTU ≥ 1024"
	r.Evidence = ev
	return r
}

func nonNilAny(v []any) []any {
	if v == nil {
		return []any{}
	}
	return v
}

// notRoCEText says why roce.config judged nothing: the host's ports are of
// other transports, each named.
func notRoCEText(other []*PortModel) string {
	if len(other) == 0 {
		return "no RDMA port: RoCE does not apply"
	}
	return "no RoCE port (" + transportTally(other) + "): RoCE mode, GIDs and the netdev's address do not apply" + transportWhy(other)
}

// transportWhy adds the reason the RoCE checks do not apply to a transport
// that looks like Ethernet.
func transportWhy(ports []*PortModel) string {
	for _, p := range ports {
		switch p.Transport {
		case IWARP:
			return "; iWARP runs over TCP and connects through rdma_cm"
		case EFA:
			return "; EFA runs SRD over the AWS network, with no GID types or PFC to set"
		case USNIC:
			return "; usNIC runs over plain UDP/IP, with no RoCE GIDs or PFC to set"
		}
	}
	return ""
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

// roceFindings collects one port's findings and fixes.
type roceFindings struct {
	fail, warn []string
	fixes      []string
}

func (f *roceFindings) add(status report.Status, text, fix string) {
	if status == report.Warn {
		f.warn = append(f.warn, text)
	} else {
		f.fail = append(f.fail, text)
	}
	if fix != "" {
		f.fixes = appendUnique(f.fixes, fix)
	}
}

func (rj *roceJudge) judge(pm *PortModel) verdict {
	label, d, p := pm.Label, pm.Device.Dev, pm.Port
	ev := map[string]any{"device": d.Name, "port": p.Num, "judged": false}
	if !portActive(p) {
		line := fmt.Sprintf("%s: not judged: %s", label, stateText(p))
		ev["state"] = valueOrUnknown(p.State.String())
		return verdict{status: report.Skip, line: line, details: []string{line}, evidence: ev}
	}
	if pm.Netdev == "" {
		line := label + ": no netdev carries it (gid_attrs/ndevs empty)"
		return verdict{status: report.Fail, line: line, details: []string{line}, evidence: ev,
			remedy: fmt.Sprintf("%s has no netdev: check the Ethernet driver bound to %s and `dmesg`.", label, valueOrUnknown(d.PCIAddr))}
	}
	ev["netdev"] = pm.Netdev
	if !pm.NetdevHere && (pm.IsVF() || pm.Representor) {
		line := fmt.Sprintf("%s → %s: the VF's netdev is in another network namespace (moved into a pod or guest): not judged here", label, pm.Netdev)
		return verdict{status: report.Skip, line: line, details: []string{line}, evidence: ev}
	}
	ev["judged"] = true
	var f roceFindings
	line := fmt.Sprintf("%s → %s", label, pm.Netdev)
	addrs, ok := rj.netdevState(pm, &f, ev, &line)
	if ok {
		rj.gids(pm, addrs, &f, ev, &line)
	}
	rj.defaultMode(pm, &f, ev, &line)
	v := verdict{status: report.Pass, line: line, evidence: ev}
	switch {
	case len(f.fail) > 0:
		v.status, v.line = report.Fail, label+": "+strings.Join(f.fail, "; ")
		line += " — " + strings.Join(f.fail, "; ")
	case !ok:
		v.status, v.line = report.Error, label+": netdev state unknown"
	case len(f.warn) > 0:
		v.status, v.line = report.Warn, label+": "+strings.Join(f.warn, "; ")
	}
	ev["ok"] = v.status == report.Pass
	v.details = []string{line}
	v.remedy = strings.Join(f.fixes, "\n")
	return v
}

// netdevState judges the netdevs that carry a port: the port's netdev up,
// an address on it or on an upper device (VLAN, macvlan, the LAG's bond),
// its MTU. A VF or representor without an address on the host is normal:
// its traffic belongs to a guest or a pod. ok is false when the netdev
// state could not be read.
func (rj *roceJudge) netdevState(pm *PortModel, f *roceFindings, ev map[string]any, line *string) (addrs []string, ok bool) {
	name, label := pm.Netdev, pm.Label
	nd, found := rj.byName[name]
	switch {
	case rj.ndErr != nil:
		*line += fmt.Sprintf(": netdev state unknown (%v)", rj.ndErr)
		return nil, false
	case !found:
		f.add(report.Fail, fmt.Sprintf("netdev %s not found", name), fmt.Sprintf("%s names netdev %s, which this network namespace does not list: check `ip link show %s` and `rdma link show`; "+
			"a netdev moved to another namespace takes its RoCE GIDs with it.", label, name, name))
		return nil, true
	}
	ev["operstate"], ev["mtu"], ev["addresses"] = nd.OperState, nd.MTU, nonNil(nd.Addresses)
	*line += fmt.Sprintf(": %s, MTU %d", nd.OperState, nd.MTU)
	if !nd.AdminUp || (nd.OperState != "up" && nd.OperState != "unknown") {
		f.add(report.Fail, fmt.Sprintf("netdev %s is %s", name, nd.OperState), fmt.Sprintf("`ip link set %s up`, and bring it up at boot in the network configuration.", name))
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
		case pm.IsVF() || pm.Representor:
			*line += "; no IP on the host (" + noIPWhy(pm) + ")"
		case len(backup) > 0:
			// Its addresses are the bond's: on the active slave's port.
		default:
			f.add(report.Fail, fmt.Sprintf("netdev %s has no IP address", name)+upperText(pm),
				fmt.Sprintf("Give %s (or the VLAN/bond on it that the fabric uses) an address (`ip addr add <addr>/<prefix> dev %s`) and make it persistent in the network configuration; its RoCE v2 GID appears with it.", name, name))
		}
	}
	if want := rj.env.Expect.Port(pm.Device.Dev.Name, pm.Port.Num).MTU; want != nil && nd.MTU != want.V {
		f.add(report.Fail, fmt.Sprintf("netdev %s MTU %d, expected %d by %s", name, nd.MTU, want.V, want.Cite()),
			fmt.Sprintf("Set the MTU of %s as its class says (`ip link set %s mtu %d`, and in the network configuration), or update the expectations file if it changed on purpose.", name, name, want.V))
	}
	if nd.MTU > 0 {
		am := RoCEActiveMTU(nd.MTU)
		ev["active_mtu"] = am
		*line += fmt.Sprintf(" (RoCE active MTU %d)", am)
		if am < 1024 {
			f.add(report.Warn, fmt.Sprintf("netdev MTU %d allows a RoCE MTU of only %d", nd.MTU, am),
				fmt.Sprintf("Raise the MTU of %s: 1500 allows a RoCE MTU of 1024, 9000 allows 4096 (the switches must carry it too).", name))
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

func upperText(pm *PortModel) string {
	if len(pm.Uppers) == 0 {
		return ""
	}
	return " (nor its upper devices " + strings.Join(pm.Uppers, ", ") + ")"
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
		f.add(report.Fail, "only RoCE v1 GIDs (v1 is not routable)", fmt.Sprintf("%s has no RoCE v2 GID: check the NIC and firmware support RoCE v2 (%s) and the driver is current.", pm.Label, roceV2Cards))
	case v2 == 0:
		f.add(report.Fail, "no RoCE GID at all", fmt.Sprintf("%s has no RoCE GID: %s", pm.Label, lowerFirst(roceNoGIDFix(pm.Netdev))))
	case len(missing) > 0:
		f.add(report.Fail, "no RoCE v2 GID for "+strings.Join(missing, ", "), fmt.Sprintf("%s lacks RoCE v2 GIDs for some addresses of %s: check `dmesg` for GID table errors (a full GID table, a VLAN or bond setup the driver does not follow).", pm.Label, pm.Netdev))
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
		f.add(report.Fail, fmt.Sprintf("rdma_cm default_roce_mode is %q", mode), fmt.Sprintf("`echo \"RoCE v2\" > %s` (configfs, rdma_cm loaded); it does not survive a reboot, so set it from a boot unit.",
			sysfs.RoCEModePath(d.Name, p.Num)))
	case err == nil:
		*line += fmt.Sprintf("; default_roce_mode %q (not a mode rdma_cm writes: unknown)", mode)
	case sysfs.IsNotExist(err):
		*line += "; default_roce_mode unknown (no rdma_cm configfs entry), judged from GID types"
	default:
		*line += fmt.Sprintf("; default_roce_mode unknown (%v)", err)
	}
}
