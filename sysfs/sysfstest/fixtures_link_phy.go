package sysfstest

import (
	"fmt"
	"path"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Fixtures of link.phy: a ConnectX-7 400GbE RoCE host whose ethtool
// answers (FEC_GET, LINKSTATE_GET, LINKMODES_GET, `ethtool -S`) are in its
// facts, healthy and in each failure the check names.

// CX7RoCE is a dual-port ConnectX-7 (MT2910) Ethernet host, mlx5, both
// ports ACTIVE at 400 Gb/s (400GBASE-CR4: four 100G PAM4 lanes, RS(544,514)
// FEC) on a Gen5 x16 slot; otherwise the ConnectX-5 RoCE host.
func CX7RoCE() Host {
	h := CX5RoCE()
	h.Hostname = "cx7-roce-node05"
	for i := range h.NICs {
		n := &h.NICs[i]
		n.Device = 0x1021
		n.Speed, n.MaxSpeed, n.BridgeSpeed = "32.0 GT/s PCIe", "32.0 GT/s PCIe", "32.0 GT/s PCIe"
		n.FW, n.HCAType, n.BoardID = "28.39.1002 (MT_0000000834)", "MT4129", "MT_0000000834"
		n.Ports[0].Rate = "400 Gb/sec (4X NDR)"
	}
	return h
}

// mlx5PHY are the values of one port's mlx5 counters a fixture sets.
type mlx5PHY struct {
	corrected, uncorrectable uint64 // FEC blocks (FEC_GET)
	correctedBits            uint64 // rx_corrected_bits_phy
	symbolErrors             uint64 // rx_symbol_err_phy
	linkDown                 uint64 // link_down_events_phy and LINKSTATE's down count
	pauseWarning, pauseError uint64 // tx_pause_storm_*_events
}

// mlx5StatsListing is `ethtool -S` of a ConnectX-7 port cut to the PHY
// groups link.phy reads: the names and their order are the ones mlx5's
// drivers/net/ethernet/mellanox/mlx5/core/en_stats.c prints (the 802.3
// group, RFC 2863's rx_discards_phy, the phy group's link_down_events_phy,
// then the statistical group's rx_pcs_symbol_err_phy,
// rx_corrected_bits_phy and per-lane rx_err_lane_N_phy, the PFC stall
// group's pause-storm events), each documented in the kernel's
// Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst.
// The values are this fixture's.
const mlx5StatsListing = `NIC statistics:
     rx_packets: 48211573602
     rx_bytes: 181530092384113
     tx_packets: 47990129833
     tx_bytes: 180996710453021
     rx_packets_phy: 48211574001
     rx_bytes_phy: 181530094110238
     tx_packets_phy: 47990130112
     tx_bytes_phy: 180996712018440
     rx_crc_errors_phy: 0
     rx_in_range_len_errors_phy: 0
     rx_out_of_range_len_phy: 0
     rx_oversize_pkts_phy: 0
     rx_symbol_err_phy: %d
     tx_mac_control_phy: 0
     rx_mac_control_phy: 0
     rx_unsupported_op_phy: 0
     rx_pause_ctrl_phy: 0
     tx_pause_ctrl_phy: 0
     rx_discards_phy: 0
     tx_discards_phy: 0
     tx_errors_phy: 0
     rx_undersize_pkts_phy: 0
     rx_fragments_phy: 0
     rx_jabbers_phy: 0
     link_down_events_phy: %d
     rx_pcs_symbol_err_phy: 0
     rx_corrected_bits_phy: %d
     rx_err_lane_0_phy: 0
     rx_err_lane_1_phy: 0
     rx_err_lane_2_phy: 0
     rx_err_lane_3_phy: 0
     rx_prio3_pause: 0
     tx_prio3_pause: 0
     tx_pause_storm_warning_events: %d
     tx_pause_storm_error_events: %d
     module_unplug: 0
     module_bus_stuck: 0
     module_high_temp: 0
     module_bad_shorted: 0
`

// mlx5Answer is the ethtool answer of one ConnectX-7 port: up at 400G on
// four lanes, RS FEC active (mlx5 reports RS-FEC's blocks as port totals,
// no lanes: mlx5e_get_fec_stats), with the counters c.
func mlx5Answer(c mlx5PHY) sysfs.EthtoolAnswer {
	up := true
	down := uint32(c.linkDown)
	return sysfs.EthtoolAnswer{
		FEC: &sysfs.FECState{Configured: []string{"RS"}, Active: "RS",
			Corrected: &sysfs.FECCounter{Total: c.corrected}, Uncorrectable: &sysfs.FECCounter{Total: c.uncorrectable}},
		Link:  &sysfs.LinkState{Up: &up, DownEvents: &down},
		Modes: &sysfs.LinkModes{SpeedMbps: 400000, Lanes: 4},
		Stats: sysfs.ParseEthtoolStatsListing(fmt.Sprintf(mlx5StatsListing,
			c.symbolErrors, c.linkDown, c.correctedBits, c.pauseWarning, c.pauseError)),
	}
}

// healthyMLX5 are a good 400G link's counters after the fixtures' ten
// days of uptime: FEC corrects (a pre-FEC BER of 1e-8 over 400 Gb/s × 10
// days is 3.456e9 corrected bits), nothing is lost, no flaps.
var healthyMLX5 = mlx5PHY{corrected: 81234567, correctedBits: 3456000000}

// withPHY records both ports' ethtool answers and the carrier counters of
// their netdevs: one carrier drop each, the driver's own when it opened the
// netdev.
func withPHY(t *Tree, h Host, ports ...mlx5PHY) *Tree {
	t.Facts.Ethtool = map[string]sysfs.EthtoolAnswer{}
	for i, n := range h.NICs {
		c := healthyMLX5
		if i < len(ports) {
			c = ports[i]
		}
		nd := n.Ports[0].Netdev
		t.Facts.Ethtool[nd] = mlx5Answer(c)
		dir := netdevDir(t, nd)
		t.Attr(path.Join(dir, "speed"), "400000")
		t.Attr(path.Join(dir, "carrier_changes"), "2")
		t.Attr(path.Join(dir, "carrier_down_count"), "1")
		t.Attr(path.Join(dir, "carrier_up_count"), "1")
	}
	return t
}

// netdevDir is the device directory /sys/class/net/<name> links to.
func netdevDir(t *Tree, name string) string {
	l := path.Join("/sys/class/net", name)
	target, ok := t.Links[l]
	if !ok {
		panic("sysfstest: no netdev " + name)
	}
	if strings.HasPrefix(target, "/") {
		return target
	}
	return path.Join(path.Dir(l), target)
}

// LinkPHYVerdict is the verdict a link.phy fixture must get on a level-1
// run without --state: link.phy's status, the finding it carries and the
// run's exit code.
type LinkPHYVerdict struct {
	Fixture, Status, Finding string
	Exit                     int
}

// LinkPHYVerdicts are the verdicts stated before the code ran against the
// fixtures.
var LinkPHYVerdicts = []LinkPHYVerdict{
	{"cx7-roce-phy-healthy", "pass", "link.phy/healthy", 0},
	// Without an earlier reading the uncorrectable blocks are a count
	// since boot: a warning until a second run shows them rising.
	{"cx7-roce-fec-uncorrectable", "warn", "link.phy/since-boot", 0},
	{"cx7-roce-pre-fec-ber", "warn", "link.phy/pre-fec-ber", 0},
	// port.state fails first (no carrier, 19); link.phy names the cause.
	{"cx7-roce-link-down-cable", "fail", "link.phy/down-cable", 19},
	{"cx7-roce-flapping", "fail", "link.phy/flapping-drain", 60},
	{"bnxt-re-phy-healthy", "pass", "link.phy/healthy", 0},
	{"irdma-e810-phy-healthy", "pass", "link.phy/healthy", 0},
}

// bnxtStatsListing is `ethtool -S` of a BCM57508 port cut to its port
// statistics: the names are bnxt_en's (drivers/net/ethernet/broadcom/bnxt/
// bnxt_ethtool.c, bnxt_port_stats_arr and bnxt_port_stats_ext_arr: the
// extended rx statistics carry link_down_events, rx_bits,
// rx_pcs_symbol_err, rx_corrected_bits and the FEC blocks); the per-ring
// lines ("[0]: rx_ucast_packets: …") are left out. The values are this
// fixture's: 100 Gb/s for ten days, a pre-FEC BER of 1e-9.
const bnxtStatsListing = `NIC statistics:
     rx_good_frames: 40217733810
     rx_fcs_err_frames: 0
     tx_good_frames: 39811023377
     link_down_events: 0
     continuous_pause_events: 0
     resume_pause_events: 0
     continuous_roce_pause_events: 0
     resume_roce_pause_events: 0
     rx_bits: 86400000000000000
     rx_buffer_passed_threshold: 0
     rx_pcs_symbol_err: 0
     rx_corrected_bits: 86400000
     rx_fec_corrected_blocks: 1534211
     rx_fec_uncorrectable_blocks: 0
     rx_filter_miss: 0
`

// iceStatsListing is `ethtool -S` of an E810 port cut to a few of its port
// statistics (drivers/net/ethernet/intel/ice/ice_ethtool.c ice_gstrings_pf_stats,
// the ".nic" names): ice has no PHY counter link.phy reads; its FEC blocks
// come from FEC_GET (ice_get_fec_stats).
const iceStatsListing = `NIC statistics:
     rx_bytes.nic: 30412299102231
     tx_bytes.nic: 29811022310001
     rx_unicast.nic: 20412233810
     tx_unicast.nic: 19911022377
     rx_crc_errors.nic: 0
     rx_length_errors.nic: 0
     link_xon_rx.nic: 0
     link_xoff_rx.nic: 0
`

// oneRSPort is the ethtool answer of a 100G port on four 25G NRZ lanes with
// RS(528,514) active and the blocks given, with the statistics listed.
func oneRSPort(corrected, uncorrectable uint64, listing string) sysfs.EthtoolAnswer {
	up := true
	return sysfs.EthtoolAnswer{
		FEC: &sysfs.FECState{Configured: []string{"RS"}, Active: "RS",
			Corrected: &sysfs.FECCounter{Total: corrected}, Uncorrectable: &sysfs.FECCounter{Total: uncorrectable}},
		Link:  &sysfs.LinkState{Up: &up},
		Modes: &sysfs.LinkModes{SpeedMbps: 100000, Lanes: 4},
		Stats: sysfs.ParseEthtoolStatsListing(listing),
	}
}

// withOnePort records one port's answer and its netdev's carrier counters.
func withOnePort(t *Tree, h Host, a sysfs.EthtoolAnswer) *Tree {
	nd := h.NICs[0].Ports[0].Netdev
	t.Facts.Ethtool = map[string]sysfs.EthtoolAnswer{nd: a}
	dir := netdevDir(t, nd)
	t.Attr(path.Join(dir, "speed"), "100000")
	t.Attr(path.Join(dir, "carrier_changes"), "2")
	t.Attr(path.Join(dir, "carrier_down_count"), "1")
	t.Attr(path.Join(dir, "carrier_up_count"), "1")
	return t
}

func init() {
	register("bnxt-re-phy-healthy", func() *Tree {
		h := BCM57508()
		return withOnePort(Build(h), h, oneRSPort(1534211, 0, bnxtStatsListing))
	})
	register("irdma-e810-phy-healthy", func() *Tree {
		h := E810()
		return withOnePort(Build(h), h, oneRSPort(2210987, 0, iceStatsListing))
	})
	register("cx7-roce-phy-healthy", func() *Tree {
		h := CX7RoCE()
		return withPHY(Build(h), h)
	})
	// ens1f0np0 lost 1873 blocks its RS-FEC could not correct since boot;
	// the test of two runs with --state raises them and expects a fail.
	register("cx7-roce-fec-uncorrectable", func() *Tree {
		h := CX7RoCE()
		bad := healthyMLX5
		bad.corrected, bad.uncorrectable, bad.correctedBits = 9912345678, 1873, 61000000000000
		return withPHY(Build(h), h, bad)
	})
	// ens1f0np0 corrects 1.2e14 bits in ten days at 400 Gb/s: a pre-FEC BER
	// of 3.5e-4, above RS(544,514)'s 2.4e-4; nothing lost yet.
	register("cx7-roce-pre-fec-ber", func() *Tree {
		h := CX7RoCE()
		worn := healthyMLX5
		worn.corrected, worn.correctedBits = 7012345678, 120000000000000
		return withPHY(Build(h), h, worn)
	})
	// ens1f0np0 is down: the driver says "Cable issue (Unsupported cable)"
	// (mlx5 reads it from the PDDR register).
	register("cx7-roce-link-down-cable", func() *Tree {
		h := CX7RoCE()
		p := &h.NICs[0].Ports[0]
		p.State, p.PhysState, p.OperUp, p.NoCarrier = "1: DOWN", "3: Disabled", false, true
		t := withPHY(Build(h), h)
		a := t.Facts.Ethtool[p.Netdev]
		down := false
		a.Link.Up, a.Link.ExtState, a.Link.ExtSubstate = &down, sysfs.LinkExtCable, "Unsupported cable"
		a.FEC.Active, a.Modes.SpeedMbps, a.Modes.Lanes = "", 0, 0
		t.Facts.Ethtool[p.Netdev] = a
		return t
	})
	// ens1f1np1 went down seven times in the 20 hours since boot.
	register("cx7-roce-flapping", func() *Tree {
		h := CX7RoCE()
		flappy := healthyMLX5
		flappy.linkDown = 7
		t := withPHY(Build(h), h, healthyMLX5, flappy)
		t.Attr(sysfs.UptimePath, "72000.00 143000.00")
		t.Attr(path.Join(netdevDir(t, "ens1f1np1"), "carrier_down_count"), "8")
		return t
	})
}
