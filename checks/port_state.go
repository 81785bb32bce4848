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
					"Check the cable and transceiver and the switch port (`ethtool <netdev>` on Ethernet, `ibstat` on InfiniBand); on Ethernet `ip link set <netdev> up`; a Disabled IB port is re-enabled with `ibportstate <lid> <port> enable` or by the SM."},
				{report.Fail, "an InfiniBand port is INIT/ARMED, or its LID or SM LID is 0: no subnet manager answered",
					"Run a subnet manager on the fabric: enable it on a managed switch or UFM, or `systemctl enable --now opensm` on one host; `sminfo` and `ibstat` show whether one answers."},
				{report.Fail, "a port's rate is below --expect-rate", "Reseat or replace the cable/transceiver; check the switch port's speed and width settings (`ibportstate`, `ethtool`) and the card's firmware."},
				{report.Error, "a port's state, phys_state or rate could not be read", "Run where /sys/class/infiniband is readable."},
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
		return errorf("could not list RDMA devices: %v", s.DevicesErr)
	}
	if len(s.Devices) == 0 {
		r := fail("no RDMA device: no port to judge")
		r.Observed, r.Expected = "no ports", "every port ACTIVE and LinkUp"
		r.Remedy = "Fix the RDMA devices first (see rdma.devices)."
		return r
	}
	var details, bad, unknown []string
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
			bad = append(bad, d.Name+": no ports")
			details = append(details, fmt.Sprintf("%s: no ports under %s/ports (%s)", d.Name, d.Name, strings.Join(d.Problems, "; ")))
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
					addRemedy(fmt.Sprintf("%s is Disabled: enable it (%s).", label, enableHint(ib, nd)))
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
					addRemedy(smRemedy)
				} else {
					addRemedy(fmt.Sprintf("%s is %s with the link up: check `dmesg` for the driver's messages%s.", label, p.State, linkHint(ib, nd)))
				}
			}
			if ib && p.State.Code == portStateActive && p.HasLID && (p.LID == 0 || p.SMLID == 0) {
				findings = append(findings, fmt.Sprintf("LID 0x%x, SM LID 0x%x: no subnet manager answered", p.LID, p.SMLID))
				addRemedy(smRemedy)
			}
			if env.Opts.ExpectRate > 0 && p.State.Code == portStateActive {
				rate, err := sysfs.ParseRate(p.Rate)
				switch {
				case err != nil:
					unknown = append(unknown, fmt.Sprintf("%s: rate %v", label, err))
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
	case len(bad) > 0:
		r = fail(fmt.Sprintf("%d of %d ports not usable: %s", len(bad), total, strings.Join(bad, "; ")))
		r.Remedy = strings.Join(remedyOrder, "\n")
	case len(unknown) > 0:
		r = errorf("could not read the state of %d port(s): %s", len(unknown), strings.Join(unknown, "; "))
	default:
		r = pass(fmt.Sprintf("all %d ports ACTIVE and LinkUp", total))
	}
	r.Observed = fmt.Sprintf("%d of %d ports usable", active, total)
	if len(bad) > 0 {
		r.Observed = firstBad(s, bad)
	}
	r.Expected, r.Details = expected, details
	r.Evidence = map[string]any{"ports": ports, "expect_rate_gbps": env.Opts.ExpectRate}
	return r
}

const smRemedy = "Start a subnet manager on the fabric: enable it on a managed switch or UFM, or `systemctl enable --now opensm` on one host. " +
	"`sminfo` shows whether one answers; `ibstat` shows the port become ACTIVE with a LID."

func enableHint(ib bool, nd string) string {
	if ib {
		return "`ibportstate <lid> <port> enable`, or ask the subnet manager's operator"
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
