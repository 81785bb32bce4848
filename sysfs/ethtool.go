package sysfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The ethtool answers of one interface: what `ethtool --show-fec`,
// `ethtool <if>` (link state) and `ethtool -S` print, asked through the
// ethtool generic-netlink family (FEC_GET, LINKSTATE_GET, LINKMODES_GET)
// and the SIOCETHTOOL ioctl (driver statistics, which netlink does not
// carry). The layouts are the kernel's: include/uapi/linux/ethtool_netlink.h
// (ethtool_netlink_generated.h since 6.15) and net/ethtool/{fec,linkstate,
// linkmodes}.c.

// ErrNotSupported is the errno name an answer records when the driver has
// no such operation (dummy, virtio_net, rxe's netdev have no FEC): the
// kernel's EOPNOTSUPP, a state of the driver, not a failure.
const ErrNotSupported = "EOPNOTSUPP"

// EthtoolAnswer is one interface's answers. Each part is either present or
// has its error: the errno name ("EOPNOTSUPP", "EPERM") where the kernel
// refused, else the failure's words.
type EthtoolAnswer struct {
	FEC      *FECState     `json:"fec,omitempty"`
	FECErr   string        `json:"fec_error,omitempty"`
	Link     *LinkState    `json:"link,omitempty"`
	LinkErr  string        `json:"link_error,omitempty"`
	Modes    *LinkModes    `json:"link_modes,omitempty"`
	ModesErr string        `json:"link_modes_error,omitempty"`
	Stats    []EthtoolStat `json:"stats,omitempty"` // `ethtool -S`, in the driver's order
	StatsErr string        `json:"stats_error,omitempty"`
}

// EthtoolStat is one line of `ethtool -S`.
type EthtoolStat struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// Stat finds a driver statistic by name.
func (a EthtoolAnswer) Stat(name string) (uint64, bool) {
	for _, s := range a.Stats {
		if s.Name == name {
			return s.Value, true
		}
	}
	return 0, false
}

// FECState is the FEC_GET answer: the configured and the active FEC mode
// and, with ETHTOOL_FLAG_STATS, the FEC counters (IEEE 802.3 30.5.1.1.17
// aFECCorrectedBlocks, 30.5.1.1.18 aFECUncorrectableBlocks, and the
// non-standard corrected bits).
type FECState struct {
	// Configured are the modes set (ETHTOOL_A_FEC_MODES): "None", "RS",
	// "BaseR", "LLRS"; Auto is ETHTOOL_A_FEC_AUTO.
	Configured []string `json:"configured,omitempty"`
	Auto       bool     `json:"auto"`
	// Active is the mode in use (ETHTOOL_A_FEC_ACTIVE), "" when the driver
	// reports none (link down, or no FEC).
	Active        string      `json:"active,omitempty"`
	Corrected     *FECCounter `json:"corrected_blocks,omitempty"`
	Uncorrectable *FECCounter `json:"uncorrectable_blocks,omitempty"`
	CorrectedBits *FECCounter `json:"corrected_bits,omitempty"`
}

// FECCounter is one FEC statistic: the port's total and, where the driver
// gives them, the per-lane counts the total is the sum of.
type FECCounter struct {
	Total uint64   `json:"total"`
	Lanes []uint64 `json:"lanes,omitempty"`
}

// LinkState is the LINKSTATE_GET answer.
type LinkState struct {
	Up *bool `json:"up,omitempty"` // ETHTOOL_A_LINKSTATE_LINK; nil when not given
	// ExtState and ExtSubstate say why a link is down, where the driver
	// knows (enum ethtool_link_ext_state / _substate_*), by name.
	ExtState    string `json:"ext_state,omitempty"`
	ExtSubstate string `json:"ext_substate,omitempty"`
	// DownEvents is ETHTOOL_A_LINKSTATE_EXT_DOWN_CNT: link-down events
	// since the driver loaded (kernel 6.7+); nil when not given.
	DownEvents *uint32 `json:"down_events,omitempty"`
}

// LinkModes is the part of the LINKMODES_GET answer that tells the line
// coding: the speed and the number of lanes (25G/lane NRZ or 50G+/lane
// PAM4 use different RS-FECs).
type LinkModes struct {
	SpeedMbps uint32 `json:"speed_mbps,omitempty"` // 0 (or SPEED_UNKNOWN) when down
	Lanes     uint32 `json:"lanes,omitempty"`      // 0 when not given
}

// ethtool generic-netlink attributes (include/uapi/linux/ethtool_netlink.h).
const (
	ethtoolAHeaderDevName = 2 // ETHTOOL_A_HEADER_DEV_NAME
	ethtoolAHeaderFlags   = 3 // ETHTOOL_A_HEADER_FLAGS
	ethtoolFlagCompact    = 1 // ETHTOOL_FLAG_COMPACT_BITSETS
	ethtoolFlagStats      = 4 // ETHTOOL_FLAG_STATS

	ethtoolAFECModes  = 2 // bitset
	ethtoolAFECAuto   = 3 // u8
	ethtoolAFECActive = 4 // u32: a link-mode bit
	ethtoolAFECStats  = 5 // nest of ETHTOOL_A_FEC_STAT_*

	ethtoolAFECStatCorrected = 2 // u64 array: total, then lanes
	ethtoolAFECStatUncorr    = 3
	ethtoolAFECStatCorrBits  = 4

	ethtoolABitsetValue = 4 // ETHTOOL_A_BITSET_VALUE: u32 words (compact form)

	ethtoolALinkstateLink       = 2 // u8 bool
	ethtoolALinkstateExtState   = 5 // u8
	ethtoolALinkstateExtSubst   = 6 // u8
	ethtoolALinkstateExtDownCnt = 7 // u32

	ethtoolALinkmodesSpeed = 5 // u32
	ethtoolALinkmodesLanes = 9 // u32

	genlHdrLen = 4 // struct genlmsghdr: u8 cmd, u8 version, u16 reserved

	// ethGStringLen is ETH_GSTRING_LEN, the fixed width of a statistic's name.
	ethGStringLen = 32

	// ethtoolMaxLanes is ETHTOOL_MAX_LANES: a FEC statistic holds at most
	// the total and eight lanes.
	ethtoolMaxLanes = 8
)

// fecModeNames are the link-mode bits of the FEC modes
// (ETHTOOL_LINK_MODE_FEC_*_BIT in include/uapi/linux/ethtool.h), by the
// names `ethtool --show-fec` prints.
var fecModeNames = map[uint32]string{49: "None", 50: "RS", 51: "BaseR", 74: "LLRS"}

// FECModeName names a FEC link-mode bit: "RS", or "mode-<bit>" for a bit
// outside the known FEC modes.
func FECModeName(bit uint32) string {
	if n, ok := fecModeNames[bit]; ok {
		return n
	}
	return "mode-" + strconv.FormatUint(uint64(bit), 10)
}

// ParseFECReply decodes the payload of an ETHTOOL_MSG_FEC_GET_REPLY (the
// bytes after the netlink header: struct genlmsghdr, then attributes), as
// net/ethtool/fec.c's fec_fill_reply and fec_put_stats write it: the
// configured modes as a compact bitset, ETHTOOL_A_FEC_AUTO,
// ETHTOOL_A_FEC_ACTIVE when a mode is active, and ETHTOOL_A_FEC_STATS with
// one u64 array per statistic (total, then one per lane) that is empty
// when the driver does not count it.
func ParseFECReply(b []byte) (FECState, error) {
	var f FECState
	attrs, err := genlAttrs(b)
	if err != nil {
		return f, fmt.Errorf("FEC_GET reply: %w", err)
	}
	for _, a := range attrs {
		switch a.typ {
		case ethtoolAFECModes:
			bits, err := compactBitset(a.val)
			if err != nil {
				return f, fmt.Errorf("ETHTOOL_A_FEC_MODES: %w", err)
			}
			for _, bit := range bits {
				f.Configured = append(f.Configured, FECModeName(bit))
			}
		case ethtoolAFECAuto:
			if len(a.val) < 1 {
				return f, errors.New("ETHTOOL_A_FEC_AUTO: empty")
			}
			f.Auto = a.val[0] != 0
		case ethtoolAFECActive:
			v, err := nlU32(a.val)
			if err != nil {
				return f, fmt.Errorf("ETHTOOL_A_FEC_ACTIVE: %w", err)
			}
			f.Active = FECModeName(v)
		case ethtoolAFECStats:
			if err := parseFECStats(a.val, &f); err != nil {
				return f, fmt.Errorf("ETHTOOL_A_FEC_STATS: %w", err)
			}
		}
	}
	return f, nil
}

// parseFECStats decodes the ETHTOOL_A_FEC_STATS nest. A statistic with an
// empty array is one the driver does not count; ETHTOOL_A_FEC_STAT_PAD and
// later attributes (histograms, 6.17+) are skipped.
func parseFECStats(b []byte, f *FECState) error {
	attrs, err := parseNLAttrs(b)
	if err != nil {
		return err
	}
	for _, a := range attrs {
		var dst **FECCounter
		switch a.typ {
		case ethtoolAFECStatCorrected:
			dst = &f.Corrected
		case ethtoolAFECStatUncorr:
			dst = &f.Uncorrectable
		case ethtoolAFECStatCorrBits:
			dst = &f.CorrectedBits
		default:
			continue
		}
		if len(a.val) == 0 {
			continue
		}
		if len(a.val)%8 != 0 || len(a.val) > 8*(1+ethtoolMaxLanes) {
			return fmt.Errorf("statistic %d: %d bytes, not a total and at most %d lanes of u64", a.typ, len(a.val), ethtoolMaxLanes)
		}
		c := &FECCounter{Total: binary.NativeEndian.Uint64(a.val)}
		for off := 8; off < len(a.val); off += 8 {
			c.Lanes = append(c.Lanes, binary.NativeEndian.Uint64(a.val[off:]))
		}
		*dst = c
	}
	return nil
}

// ParseLinkStateReply decodes the payload of an
// ETHTOOL_MSG_LINKSTATE_GET_REPLY (net/ethtool/linkstate.c
// linkstate_fill_reply): the link (u8), the extended state and substate
// (u8 each, only when the driver gives them) and the link-down count (u32).
func ParseLinkStateReply(b []byte) (LinkState, error) {
	var l LinkState
	attrs, err := genlAttrs(b)
	if err != nil {
		return l, fmt.Errorf("LINKSTATE_GET reply: %w", err)
	}
	var state, sub = -1, -1
	for _, a := range attrs {
		switch a.typ {
		case ethtoolALinkstateLink, ethtoolALinkstateExtState, ethtoolALinkstateExtSubst:
			if len(a.val) < 1 {
				return l, fmt.Errorf("linkstate attribute %d: empty", a.typ)
			}
			switch a.typ {
			case ethtoolALinkstateLink:
				up := a.val[0] != 0
				l.Up = &up
			case ethtoolALinkstateExtState:
				state = int(a.val[0])
			default:
				sub = int(a.val[0])
			}
		case ethtoolALinkstateExtDownCnt:
			v, err := nlU32(a.val)
			if err != nil {
				return l, fmt.Errorf("ETHTOOL_A_LINKSTATE_EXT_DOWN_CNT: %w", err)
			}
			l.DownEvents = &v
		}
	}
	if state >= 0 {
		l.ExtState = LinkExtStateName(state)
		if sub >= 0 {
			l.ExtSubstate = LinkExtSubstateName(state, sub)
		}
	}
	return l, nil
}

// ParseLinkModesReply decodes the speed and lane count of an
// ETHTOOL_MSG_LINKMODES_GET_REPLY (net/ethtool/linkmodes.c); the bitsets
// of advertised modes are not needed.
func ParseLinkModesReply(b []byte) (LinkModes, error) {
	var m LinkModes
	attrs, err := genlAttrs(b)
	if err != nil {
		return m, fmt.Errorf("LINKMODES_GET reply: %w", err)
	}
	for _, a := range attrs {
		var dst *uint32
		switch a.typ {
		case ethtoolALinkmodesSpeed:
			dst = &m.SpeedMbps
		case ethtoolALinkmodesLanes:
			dst = &m.Lanes
		default:
			continue
		}
		v, err := nlU32(a.val)
		if err != nil {
			return m, fmt.Errorf("linkmodes attribute %d: %w", a.typ, err)
		}
		*dst = v
	}
	if m.SpeedMbps == 0xffffffff { // SPEED_UNKNOWN
		m.SpeedMbps = 0
	}
	return m, nil
}

// genlAttrs skips struct genlmsghdr and splits the attributes after it.
func genlAttrs(b []byte) ([]nlAttr, error) {
	if len(b) < genlHdrLen {
		return nil, fmt.Errorf("%d bytes: shorter than struct genlmsghdr", len(b))
	}
	return parseNLAttrs(b[genlHdrLen:])
}

func nlU32(b []byte) (uint32, error) {
	if len(b) < 4 {
		return 0, fmt.Errorf("%d bytes, want a u32", len(b))
	}
	return binary.NativeEndian.Uint32(b), nil
}

// maxBitsetWords bounds a compact bitset: the link modes are about a
// hundred bits; a longer one is not an answer of this kernel family.
const maxBitsetWords = 64

// compactBitset lists the bits set in a compact bitset
// (ETHTOOL_A_BITSET_VALUE: u32 words, net/ethtool/bitset.c).
func compactBitset(b []byte) ([]uint32, error) {
	attrs, err := parseNLAttrs(b)
	if err != nil {
		return nil, err
	}
	var bits []uint32
	for _, a := range attrs {
		if a.typ != ethtoolABitsetValue {
			continue
		}
		if len(a.val)%4 != 0 || len(a.val) > 4*maxBitsetWords {
			return nil, fmt.Errorf("bitset value of %d bytes", len(a.val))
		}
		for w := 0; w*4 < len(a.val); w++ {
			word := binary.NativeEndian.Uint32(a.val[w*4:])
			for i := uint32(0); i < 32; i++ {
				if word&(1<<i) != 0 {
					bits = append(bits, uint32(w)*32+i)
				}
			}
		}
	}
	return bits, nil
}

// EncodeEthtoolHeader is the request header nest (ETHTOOL_A_*_HEADER, type
// 1 in every ethtool message) naming the interface, with flags.
func EncodeEthtoolHeader(ifname string, flags uint32) []byte {
	name := nlAttrBytes(ethtoolAHeaderDevName, append([]byte(ifname), 0))
	fl := make([]byte, 4)
	binary.NativeEndian.PutUint32(fl, flags)
	inner := append(name, nlAttrBytes(ethtoolAHeaderFlags, fl)...)
	return nlAttrBytes(1|nlaFNested, inner)
}

const nlaFNested = 0x8000 // NLA_F_NESTED: the kernel's strict policy wants it on nests

// nlAttrBytes encodes one attribute, padded to 4 bytes.
func nlAttrBytes(typ uint16, val []byte) []byte {
	l := nlaHdrLen + len(val)
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint16(b, uint16(l))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[nlaHdrLen:], val)
	return b
}

// ParseEthtoolStatsListing reads the text `ethtool -S <if>` prints ("NIC
// statistics:" then "     name: value" lines) into statistics in order;
// fixtures are written from public listings of real cards with it. Lines
// that are not "name: unsigned value" are skipped.
func ParseEthtoolStatsListing(text string) []EthtoolStat {
	var out []EthtoolStat
	for _, line := range strings.Split(text, "\n") {
		name, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(val), 10, 64)
		if err != nil {
			continue
		}
		out = append(out, EthtoolStat{Name: name, Value: v})
	}
	return out
}

// Ethtool answers the ethtool requests for the interfaces named: live,
// over one generic-netlink socket and one ioctl socket for them all;
// from a fixture or snapshot, its facts file. An interface the facts do
// not hold gets an answer whose parts all say so.
func (h *Host) Ethtool(ifnames []string) (map[string]EthtoolAnswer, error) {
	if h.Live() {
		src, ok := h.live.(EthtoolSource)
		if !ok {
			return nil, errors.New("ethtool unknown: the live source has no ethtool requests")
		}
		return src.Ethtool(ifnames)
	}
	if h.facts != nil && h.facts.Ethtool == nil && h.facts.Unavailable["ethtool"] != "" {
		// The capture asked and failed: the host's failure, not a lack.
		return nil, h.noFacts("ethtool")
	}
	if h.facts == nil {
		return nil, fmt.Errorf("%w: the root has no %s", ErrEthtoolNotRecorded, FactsFile)
	}
	if h.facts.Ethtool == nil {
		return nil, fmt.Errorf("%w in its %s", ErrEthtoolNotRecorded, FactsFile)
	}
	out := make(map[string]EthtoolAnswer, len(ifnames))
	for _, n := range ifnames {
		a, ok := h.facts.Ethtool[n]
		if !ok {
			miss := "not recorded in " + h.Display(FactsFile)
			a = EthtoolAnswer{FECErr: miss, LinkErr: miss, ModesErr: miss, StatsErr: miss}
		}
		out[n] = a
	}
	return out, nil
}

// ErrEthtoolNotRecorded says a fixture or snapshot holds no ethtool
// answers (one taken before they were captured).
var ErrEthtoolNotRecorded = errors.New("no ethtool answers recorded")

// EthtoolSource is a live source that asks the ethtool requests.
type EthtoolSource interface {
	Ethtool(ifnames []string) (map[string]EthtoolAnswer, error)
}

// DecodeEthtoolStats pairs the names of ETHTOOL_GSTRINGS (n fixed-width,
// NUL-padded ETH_GSTRING_LEN names) with the u64 values of ETHTOOL_GSTATS;
// it stops at the shorter of the two.
func DecodeEthtoolStats(names, vals []byte, n int) []EthtoolStat {
	n = max(0, min(n, len(names)/ethGStringLen, len(vals)/8))
	out := make([]EthtoolStat, 0, n)
	for i := 0; i < n && (i+1)*ethGStringLen <= len(names) && (i+1)*8 <= len(vals); i++ {
		raw := names[i*ethGStringLen : (i+1)*ethGStringLen]
		if z := strings.IndexByte(string(raw), 0); z >= 0 {
			raw = raw[:z]
		}
		out = append(out, EthtoolStat{Name: string(raw), Value: binary.NativeEndian.Uint64(vals[i*8:])})
	}
	return out
}

// gatherEthtool records the ethtool answers of every interface (as many as
// DCB is asked for) in a capture's facts.
func gatherEthtool(h *Host, f *Facts, nds []Netdev) {
	names := make([]string, 0, len(nds))
	for i, nd := range nds {
		if i >= maxDCBQueries {
			f.Unavailable["ethtool"] = fmt.Sprintf("asked only the first %d interfaces", maxDCBQueries)
			break
		}
		names = append(names, nd.Name)
	}
	ans, err := h.Ethtool(names)
	if err != nil {
		f.Unavailable["ethtool"] = err.Error()
		return
	}
	f.Ethtool = ans
}
