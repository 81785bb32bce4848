package checks

import (
	"context"
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// IB port states (ports/<n>/state) and physical states (phys_state).
const (
	portStateDown   = 1
	portStateInit   = 2
	portStateArmed  = 3
	portStateActive = 4
	physSleep       = 1
	physPolling     = 2
	physDisabled    = 3
	physLinkUp      = 5
)

func init() {
	register(Check{
		ID: "port.state", Code: 19, Level: 1,
		Title: "every port of every RDMA device is ACTIVE with its link up",
		Needs: []string{"rdma.devices"},
		Explain: Explanation{
			Judges: "Every port of every device under /sys/class/infiniband (never only port 1): ports/<n>/state must be ACTIVE and phys_state LinkUp. " +
				"On InfiniBand the port's LID and the subnet manager's LID (lid, sm_lid) must not be 0. With --expect-rate GBPS, a port whose rate " +
				"(\"100 Gb/sec (4X EDR)\") is below that fails.",
			Why: "A port that is not ACTIVE carries no RDMA traffic; applications that pick it hang or fail to connect. On InfiniBand the subnet " +
				"manager assigns LIDs and moves ports from INIT to ACTIVE: LID 0 means no SM answered and nothing can be addressed. " +
				"A port that trained at a lower rate (a bad cable, a 1X link) works but slowly.",
			Failures: []Failure{
				{report.Fail, "a port is DOWN (phys Polling: no link; Disabled: switched off)",
					"Check the cable and transceiver and the switch port (`ethtool <netdev>` on Ethernet, `ibstat` on InfiniBand); on Ethernet `ip link set <netdev> up`; " +
						"a Disabled local IB port is enabled by direct route, `ibportstate -C <dev> -P <port> -D 0 <port> enable`, or enable the switch side of the link."},
				{report.Fail, "an InfiniBand port is INIT/ARMED, or its LID or SM LID is 0: no subnet manager answered",
					"No subnet manager answered: " + smRemedy + ". `sminfo` and `ibstat` show whether one answers."},
				{report.Fail, "a device lists no ports", "Check `dmesg` for the driver's errors while it registered the device, and reload the driver."},
				{report.Fail, "a port's rate is below --expect-rate", "Reseat or replace the cable/transceiver; check the switch port's speed and width settings (`ibportstate`, `ethtool`) and the card's firmware."},
				{report.Error, "a port's state, phys_state or rate could not be read",
					"Read them by hand: `grep . /sys/class/infiniband/<dev>/ports/<port>/{state,phys_state,rate}`, `ibstat <dev> <port>` or `rdma link show <dev>/<port>`; run where /sys/class/infiniband is readable."},
			},
		},
		Run: runPortState,
	})
}

// portLabel names a port in messages: "mlx5_0 port 1".
func portLabel(dev string, port int) string { return fmt.Sprintf("%s port %d", dev, port) }

// portNetdev is the netdev that carries a RoCE port: the netdev named by its
// GID table (gid_attrs/ndevs), else a software device's parent, else the
// PCI function's only netdev.
func portNetdev(s *Survey, d sysfs.RDMADevice, p sysfs.RDMAPort) string {
	for _, g := range p.GIDs {
		if g.Netdev != "" {
			return g.Netdev
		}
	}
	if d.Parent != "" {
		return d.Parent
	}
	if d.PCIAddr != "" && p.LinkLayer == "Ethernet" {
		for _, n := range s.NICs {
			if n.Fn.Address == d.PCIAddr && len(n.Fn.Netdevs) == 1 {
				return n.Fn.Netdevs[0]
			}
		}
	}
	return ""
}

// stateText prints a port's state as a person reads it: "ACTIVE",
// "DOWN (phys Polling)".
func stateText(p sysfs.RDMAPort) string {
	st := p.State.String()
	if st == "" {
		st = "unknown"
	}
	if p.PhysState.Code == physLinkUp && p.State.Code == portStateActive {
		return st
	}
	ph := p.PhysState.String()
	if ph == "" {
		ph = "unknown"
	}
	return fmt.Sprintf("%s (phys %s)", st, ph)
}

func runPortState(_ context.Context, env *Env) Result {
	s := env.Survey()
	if s.DevicesErr != nil && !sysfs.IsNotExist(s.DevicesErr) {
		r := errorf("could not list RDMA devices: %v", s.DevicesErr)
		r.Observed, r.Expected = "device list unreadable", "a readable /sys/class/infiniband"
		r.Remedy = portsByHand
		return r
	}
	if len(s.Devices) == 0 {
		r := fail("no RDMA device: no port to judge")
		r.Observed, r.Expected = "no ports", "every port ACTIVE and LinkUp"
		r.Remedy = "Fix the RDMA devices first (see rdma.devices)."
		return r
	}
	var details, bad, noPorts, unknown []string
	remedies := map[string]bool{}
	var remedyOrder []string
	addRemedy := func(s string) {
		if !remedies[s] {
			remedies[s] = true
			remedyOrder = append(remedyOrder, s)
		}
	}
	var ports []map[string]any
	total, active := 0, 0
	for _, d := range s.Devices {
		if len(d.Ports) == 0 {
			// A device without ports is not a port: it is counted apart so
			// that "N of M ports" stays true.
			noPorts = append(noPorts, d.Name)
			line := fmt.Sprintf("%s: no ports under %s/%s/ports", d.Name, sysfs.InfinibandClass, d.Name)
			if len(d.Problems) > 0 {
				line += " (" + strings.Join(d.Problems, "; ") + ")"
			}
			details = append(details, line)
			addRemedy(fmt.Sprintf("%s lists no ports: check `dmesg` for the driver's errors while it registered the device, and reload the driver (%s).",
				d.Name, valueOrUnknown(d.Driver)))
			continue
		}
		for _, p := range d.Ports {
			total++
			label := portLabel(d.Name, p.Num)
			nd := portNetdev(s, d, p)
			ev := map[string]any{"device": d.Name, "port": p.Num, "state": p.State.String(), "phys_state": p.PhysState.String(),
				"rate": p.Rate, "link_layer": p.LinkLayer}
			line := fmt.Sprintf("%s: %s, %s, %s", label, stateText(p), valueOrUnknown(p.Rate), valueOrUnknown(p.LinkLayer))
			if nd != "" {
				line += ", netdev " + nd
				ev["netdev"] = nd
			}
			ib := p.LinkLayer == "InfiniBand"
			if ib && p.HasLID {
				line += fmt.Sprintf(", LID 0x%x, SM LID 0x%x", p.LID, p.SMLID)
				ev["lid"], ev["sm_lid"] = p.LID, p.SMLID
			}
			var findings []string
			if p.State.Name == "" || p.PhysState.Name == "" {
				unknown = append(unknown, fmt.Sprintf("%s: %s", label, strings.Join(p.Problems, "; ")))
				details = append(details, line+" — state unknown: "+strings.Join(p.Problems, "; "))
				ports = append(ports, ev)
				continue
			}
			switch {
			case p.PhysState.Code != physLinkUp:
				switch p.PhysState.Code {
				case physDisabled:
					findings = append(findings, stateText(p)+": port disabled")
					addRemedy(fmt.Sprintf("%s is Disabled: enable it (%s).", label, enableHint(ib, d.Name, p.Num, nd)))
				case physPolling, physSleep:
					findings = append(findings, stateText(p)+": no link")
					addRemedy(fmt.Sprintf("%s has no link (%s): check the cable and transceiver are seated and the switch port is up%s.", label, p.PhysState, linkHint(ib, nd)))
				default:
					findings = append(findings, stateText(p)+": link not up")
					addRemedy(fmt.Sprintf("%s is training (%s): if it stays there, check the cable and the switch port's speed/width settings%s.", label, p.PhysState, linkHint(ib, nd)))
				}
			case p.State.Code != portStateActive:
				findings = append(findings, stateText(p))
				if ib && (p.State.Code == portStateInit || p.State.Code == portStateArmed) {
					findings[len(findings)-1] += ": no subnet manager answered"
					addRemedy(smRemedyFor(label, p))
				} else {
					addRemedy(fmt.Sprintf("%s is %s with the link up: check `dmesg` for the driver's messages%s.", label, p.State, linkHint(ib, nd)))
				}
			}
			if ib && p.State.Code == portStateActive && p.HasLID && (p.LID == 0 || p.SMLID == 0) {
				findings = append(findings, fmt.Sprintf("LID 0x%x, SM LID 0x%x: no subnet manager answered", p.LID, p.SMLID))
				addRemedy(smRemedyFor(label, p))
			}
			if env.Opts.ExpectRate > 0 && p.State.Code == portStateActive {
				rate, err := sysfs.ParseRate(p.Rate)
				switch {
				case err != nil:
					unknown = append(unknown, fmt.Sprintf("%s: rate %v", label, err))
					line += fmt.Sprintf(" — rate unknown: %v", err)
				case rate.Gbps < env.Opts.ExpectRate:
					findings = append(findings, fmt.Sprintf("rate %s below the expected %g Gb/sec", p.Rate, env.Opts.ExpectRate))
					addRemedy(fmt.Sprintf("%s trained at %s: reseat or replace the cable/transceiver, check the switch port's speed and width, and the firmware.", label, p.Rate))
				default:
					ev["rate_gbps"] = rate.Gbps
				}
			}
			if len(findings) > 0 {
				bad = append(bad, fmt.Sprintf("%s %s", label, strings.Join(findings, "; ")))
				line += " — " + strings.Join(findings, "; ")
				ev["ok"] = false
			} else {
				active++
				ev["ok"] = true
			}
			details = append(details, line)
			ports = append(ports, ev)
		}
	}
	expected := "every port ACTIVE and LinkUp; InfiniBand LID and SM LID ≠ 0"
	if env.Opts.ExpectRate > 0 {
		expected += fmt.Sprintf("; rate ≥ %g Gb/sec", env.Opts.ExpectRate)
	}
	var r Result
	switch {
	case len(bad) > 0 || len(noPorts) > 0:
		var parts []string
		if len(bad) > 0 {
			parts = append(parts, fmt.Sprintf("%d of %d ports not usable: %s", len(bad), total, strings.Join(bad, "; ")))
		}
		if len(noPorts) > 0 {
			parts = append(parts, fmt.Sprintf("%d device(s) with no ports: %s", len(noPorts), strings.Join(noPorts, ", ")))
		}
		r = fail(strings.Join(parts, "; "))
		r.Remedy = strings.Join(remedyOrder, "\n")
		all := append(append([]string{}, bad...), noPortsFindings(noPorts)...)
		r.Observed = firstBad(s, all)
	case len(unknown) > 0:
		r = errorf("could not read the state of %d port(s): %s", len(unknown), strings.Join(unknown, "; "))
		r.Observed = fmt.Sprintf("%d of %d ports unknown", len(unknown), total)
		r.Remedy = portsByHand
	default:
		r = pass(fmt.Sprintf("all %d ports ACTIVE and LinkUp", total))
		r.Observed = fmt.Sprintf("%d of %d ports usable", active, total)
	}
	r.Expected, r.Details = expected, details
	r.Evidence = map[string]any{"ports": ports, "expect_rate_gbps": env.Opts.ExpectRate}
	return r
}

// smRemedy is the one wording of "run a subnet manager" that every check
// uses, so that a report reads the same advice wherever it appears.
const smRemedy = "install and start opensm on one host of the fabric (`apt install opensm` / `dnf install opensm`; `systemctl enable --now opensm`), " +
	"or enable the switch's SM; one opensm instance serves one port: `opensm -g <port GUID>` per fabric"

// portsByHand says how to read port states without rdmadoctor.
const portsByHand = "Read the port files by hand: `grep . /sys/class/infiniband/*/ports/*/{state,phys_state,rate}`, or `ibstat` / `rdma link show`."

// smRemedyFor is smRemedy for one port, with the port's GUID when its GID
// table shows it (the interface ID of GID 0 is the port GUID on InfiniBand).
func smRemedyFor(label string, p sysfs.RDMAPort) string {
	r := label + ": no subnet manager answered: " + smRemedy
	if g := portGUID(p); g != "" {
		r += " (this port's GUID: " + g + ")"
	}
	return r + ". `sminfo` shows whether one answers; `ibstat` shows the port become ACTIVE with a LID."
}

// portGUID is the port GUID as opensm -g takes it ("0x0c42a103002b3c4e"),
// read from GID 0 of an InfiniBand port; "" when unknown.
func portGUID(p sysfs.RDMAPort) string {
	for _, g := range p.GIDs {
		if g.Index != 0 {
			continue
		}
		ip := parseGID(g.GID)
		if ip == nil {
			return ""
		}
		id := ip[8:]
		if strings.Trim(string(id), "\x00") == "" {
			return ""
		}
		return fmt.Sprintf("0x%x", []byte(id))
	}
	return ""
}

func noPortsFindings(devs []string) []string {
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = d + ": no ports"
	}
	return out
}

// enableHint says how to enable a Disabled port. An InfiniBand port is
// enabled by direct route from this host (it may have no LID while
// disabled), or from the switch side of the link.
func enableHint(ib bool, dev string, port int, nd string) string {
	if ib {
		return fmt.Sprintf("`ibportstate -C %s -P %d -D 0 %d enable`, or enable the switch side of the link", dev, port, port)
	}
	if nd != "" {
		return "`ip link set " + nd + " up`"
	}
	return "`ip link set <netdev> up`"
}

func linkHint(ib bool, nd string) string {
	if ib {
		return " (`ibstat`, `iblinkinfo`)"
	}
	if nd != "" {
		return fmt.Sprintf(" (`ip link show %s`, `ethtool %s`)", nd, nd)
	}
	return " (`ethtool <netdev>`)"
}

// firstBad is the observed value for a failed run: the first bad port.
func firstBad(_ *Survey, bad []string) string {
	if len(bad) == 1 {
		return bad[0]
	}
	return fmt.Sprintf("%s (and %d more)", bad[0], len(bad)-1)
}

func valueOrUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
