package checks

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
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
	s := env.Survey()
	h := env.Host
	nds, ndErr := h.Netdevs()
	byName := map[string]sysfs.Netdev{}
	for _, nd := range nds {
		byName[nd.Name] = nd
	}
	var details, bad, unknown, warns []string
	var remedy []string
	addRemedy := func(r string) {
		for _, x := range remedy {
			if x == r {
				return
			}
		}
		remedy = append(remedy, r)
	}
	var ports []map[string]any
	var notJudged []string
	roce := 0
	for _, d := range s.Devices {
		for _, p := range d.Ports {
			if p.LinkLayer != "Ethernet" {
				continue
			}
			label := portLabel(d.Name, p.Num)
			if !portActive(p) {
				notJudged = append(notJudged, fmt.Sprintf("%s: not judged: %s", label, stateText(p)))
				ports = append(ports, map[string]any{"device": d.Name, "port": p.Num, "judged": false, "state": valueOrUnknown(p.State.String())})
				continue
			}
			roce++
			ev := map[string]any{"device": d.Name, "port": p.Num, "judged": true}
			ports = append(ports, ev)
			var find []string
			name := portNetdev(s, d, p)
			if name == "" {
				find = append(find, "no netdev carries it (gid_attrs/ndevs empty)")
				addRemedy(fmt.Sprintf("%s has no netdev: check the Ethernet driver bound to %s and `dmesg`.", label, valueOrUnknown(d.PCIAddr)))
				bad = append(bad, label+": "+strings.Join(find, "; "))
				details = append(details, label+": "+strings.Join(find, "; "))
				continue
			}
			ev["netdev"] = name
			line := fmt.Sprintf("%s → %s", label, name)

			// netdev state, addresses and MTU
			var addrs []string
			switch nd, ok := byName[name]; {
			case ndErr != nil:
				unknown = append(unknown, fmt.Sprintf("%s: netdev %s: %v", label, name, ndErr))
				line += ": netdev state unknown"
			case !ok:
				find = append(find, fmt.Sprintf("netdev %s not found", name))
				addRemedy(fmt.Sprintf("%s names netdev %s, which this network namespace does not list: check `ip link show %s` and `rdma link show`; "+
					"a netdev moved to another namespace takes its RoCE GIDs with it.", label, name, name))
			default:
				ev["operstate"], ev["mtu"], ev["addresses"] = nd.OperState, nd.MTU, nonNil(nd.Addresses)
				line += fmt.Sprintf(": %s, MTU %d", nd.OperState, nd.MTU)
				if !nd.AdminUp || (nd.OperState != "up" && nd.OperState != "unknown") {
					find = append(find, fmt.Sprintf("netdev %s is %s", name, nd.OperState))
					addRemedy(fmt.Sprintf("`ip link set %s up`, and bring it up at boot in the network configuration.", name))
				}
				addrs = routableAddrs(nd.Addresses)
				if len(addrs) == 0 {
					find = append(find, fmt.Sprintf("netdev %s has no IP address", name))
					addRemedy(fmt.Sprintf("Give %s an address (`ip addr add <addr>/<prefix> dev %s`) and make it persistent in the network configuration; its RoCE v2 GID appears with it.", name, name))
				} else {
					line += ", " + strings.Join(addrs, " ")
				}
				if nd.MTU > 0 {
					am := RoCEActiveMTU(nd.MTU)
					ev["active_mtu"] = am
					line += fmt.Sprintf(" (RoCE active MTU %d)", am)
					if am < 1024 {
						warns = append(warns, fmt.Sprintf("%s: netdev MTU %d allows a RoCE MTU of only %d", label, nd.MTU, am))
						addRemedy(fmt.Sprintf("Raise the MTU of %s: 1500 allows a RoCE MTU of 1024, 9000 allows 4096 (the switches must carry it too).", name))
					}
				}
			}

			// GID types
			var v1, v2 int
			v2ByIP := map[string]bool{}
			for _, g := range p.GIDs {
				if g.Netdev != "" && g.Netdev != name {
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
			line += fmt.Sprintf("; GIDs: %d RoCE v2, %d v1", v2, v1)
			var missing []string
			for _, a := range addrs {
				if ip := gidForAddr(a); ip != nil && !v2ByIP[ip.String()] {
					missing = append(missing, a)
				}
			}
			switch {
			case v2 == 0 && v1 > 0:
				find = append(find, "only RoCE v1 GIDs (v1 is not routable)")
				addRemedy(fmt.Sprintf("%s has no RoCE v2 GID: check the NIC and firmware support RoCE v2 (%s) and the driver is current.", label, roceV2Cards))
			case v2 == 0:
				find = append(find, "no RoCE GID at all")
				addRemedy(fmt.Sprintf("%s has no RoCE GID: %s", label, lowerFirst(roceNoGIDFix(name))))
			case len(missing) > 0:
				find = append(find, "no RoCE v2 GID for "+strings.Join(missing, ", "))
				addRemedy(fmt.Sprintf("%s lacks RoCE v2 GIDs for some addresses of %s: check `dmesg` for GID table errors (a full GID table, a VLAN or bond setup the driver does not follow).", label, name))
			}

			// rdma_cm default mode
			mode, err := h.DefaultRoCEMode(d.Name, p.Num)
			switch {
			case err == nil:
				ev["default_roce_mode"] = mode
				line += fmt.Sprintf("; default_roce_mode %q", mode)
				switch mode {
				case gidTypeV2:
				case gidTypeV1:
					find = append(find, fmt.Sprintf("rdma_cm default_roce_mode is %q", mode))
					addRemedy(fmt.Sprintf("`echo \"RoCE v2\" > %s` (configfs, rdma_cm loaded); it does not survive a reboot, so set it from a boot unit.",
						sysfs.RoCEModePath(d.Name, p.Num)))
				default:
					ev["default_roce_mode"] = "unknown"
					line += " (not a mode rdma_cm writes: unknown)"
				}
			case sysfs.IsNotExist(err):
				ev["default_roce_mode"] = "unknown"
				line += "; default_roce_mode unknown (no rdma_cm configfs entry), judged from GID types"
			default:
				ev["default_roce_mode"] = "unknown"
				line += fmt.Sprintf("; default_roce_mode unknown (%v)", err)
			}
			if len(find) > 0 {
				bad = append(bad, label+": "+strings.Join(find, "; "))
				line += " — " + strings.Join(find, "; ")
				ev["ok"] = false
			} else {
				ev["ok"] = true
			}
			details = append(details, line)
		}
	}
	details = append(details, notJudged...)
	ev := map[string]any{"ports": ports}
	if roce == 0 && len(notJudged) == 0 {
		r := skip("no Ethernet ports (InfiniBand only): RoCE does not apply")
		r.Evidence = ev
		return r
	}
	if roce == 0 {
		r := skip(fmt.Sprintf("no ACTIVE RoCE port to judge (%s); port.state reports why", strings.Join(notJudged, "; ")))
		r.Details, r.Evidence = details, ev
		return r
	}
	var r Result
	switch {
	case len(bad) > 0:
		r = fail(fmt.Sprintf("%d of %d RoCE ports misconfigured: %s", len(bad), roce, strings.Join(bad, "; ")))
		r.Observed = firstBad(s, bad)
	case len(unknown) > 0:
		r = errorf("could not judge %d RoCE port(s): %s", len(unknown), strings.Join(unknown, "; "))
		r.Observed = "netdev state unknown"
		addRemedy(netdevByHand)
	case len(warns) > 0:
		r = warn(strings.Join(warns, "; "))
		r.Observed = warns[0]
	default:
		r = pass(fmt.Sprintf("%d RoCE port(s): netdev up with an IP, RoCE v2 GIDs present", roce))
		r.Observed = fmt.Sprintf("%d RoCE ports configured", roce)
	}
	if len(notJudged) > 0 && r.Status != report.Error {
		r.Summary += fmt.Sprintf("; %d not judged (not ACTIVE, see port.state)", len(notJudged))
	}
	if r.Status != report.Pass {
		r.Remedy = strings.Join(remedy, "\n")
	}
	r.Expected = "every ACTIVE RoCE port: netdev up with an IP, RoCE v2 GIDs, default_roce_mode RoCE v2 (where set), RoCE MTU ≥ 1024"
	r.Details, r.Evidence = details, ev
	return r
}
