package sysfs

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fakeLive answers the ethtool requests as a virtio_net netdev does: no
// FEC (EOPNOTSUPP), a link, queue statistics.
func (fakeLive) Ethtool(ifnames []string) (map[string]EthtoolAnswer, error) {
	up := true
	out := map[string]EthtoolAnswer{}
	for _, n := range ifnames {
		out[n] = EthtoolAnswer{FECErr: ErrNotSupported, Link: &LinkState{Up: &up}, Modes: &LinkModes{},
			Stats: []EthtoolStat{{Name: "rx_kicks", Value: 4885}}}
	}
	return out, nil
}

// Replies are built as the kernel lays them out: struct genlmsghdr (cmd,
// version, reserved), then attributes (struct nlattr: u16 len, u16 type,
// payload padded to 4), nests holding attributes, u64 arrays in host order.
func genlReply(cmd byte, attrs ...[]byte) []byte {
	b := []byte{cmd, 1, 0, 0}
	for _, a := range attrs {
		b = append(b, a...)
	}
	return b
}

func u8Attr(typ uint16, v uint8) []byte { return nlAttrBytes(typ, []byte{v}) }

func u32Attr(typ uint16, v uint32) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, v)
	return nlAttrBytes(typ, b)
}

func u64Array(typ uint16, vs ...uint64) []byte {
	b := make([]byte, 8*len(vs))
	for i, v := range vs {
		binary.NativeEndian.PutUint64(b[i*8:], v)
	}
	return nlAttrBytes(typ, b)
}

func nest(typ uint16, attrs ...[]byte) []byte {
	var b []byte
	for _, a := range attrs {
		b = append(b, a...)
	}
	return nlAttrBytes(typ|nlaFNested, b)
}

// compactModes is a compact bitset (ETHTOOL_A_BITSET_NOMASK, SIZE, VALUE)
// of link-mode bits.
func compactModes(bits ...uint32) []byte {
	words := make([]byte, 12) // 96 bits: the FEC modes reach bit 74
	for _, bit := range bits {
		w := binary.NativeEndian.Uint32(words[bit/32*4:])
		binary.NativeEndian.PutUint32(words[bit/32*4:], w|1<<(bit%32))
	}
	return nest(ethtoolAFECModes, nlAttrBytes(1, nil), u32Attr(2, 96), nlAttrBytes(ethtoolABitsetValue, words))
}

// FEC_GET replies of the kinds the drivers give (net/ethtool/fec.c
// fec_fill_reply/fec_put_stats): mlx5 with RS active, totals only (RS-FEC
// counts across lanes); a BASE-R port with per-lane counts (fec_stats_recalc
// puts the sum first, then the lanes); a driver that counts no corrected
// bits (empty array, with the 64-bit pad attribute before it).
func TestParseFECReply(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		want FECState
	}{
		{"mlx5 RS 400G", genlReply(30, nest(1), compactModes(50), u8Attr(ethtoolAFECAuto, 0), u32Attr(ethtoolAFECActive, 50),
			nest(ethtoolAFECStats, u64Array(ethtoolAFECStatCorrected, 81234567), u64Array(ethtoolAFECStatUncorr, 0), u64Array(ethtoolAFECStatCorrBits))),
			FECState{Configured: []string{"RS"}, Active: "RS", Corrected: &FECCounter{Total: 81234567}, Uncorrectable: &FECCounter{}}},
		{"BASE-R per lane, auto", genlReply(30, compactModes(49, 51, 74), u8Attr(ethtoolAFECAuto, 1), u32Attr(ethtoolAFECActive, 51),
			nest(ethtoolAFECStats, nlAttrBytes(1, nil), u64Array(ethtoolAFECStatCorrected, 10, 1, 2, 3, 4), u64Array(ethtoolAFECStatUncorr, 5, 0, 0, 5, 0),
				u64Array(ethtoolAFECStatCorrBits, 99), u64Array(5, 1, 2, 3))),
			FECState{Configured: []string{"None", "BaseR", "LLRS"}, Auto: true, Active: "BaseR",
				Corrected: &FECCounter{Total: 10, Lanes: []uint64{1, 2, 3, 4}}, Uncorrectable: &FECCounter{Total: 5, Lanes: []uint64{0, 0, 5, 0}},
				CorrectedBits: &FECCounter{Total: 99}}},
		{"link down: no active mode, no stats", genlReply(30, compactModes(50), u8Attr(ethtoolAFECAuto, 0)),
			FECState{Configured: []string{"RS"}}},
	}
	for _, c := range cases {
		got, err := ParseFECReply(c.b)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v %v, want %+v", c.name, got, err, c.want)
		}
	}
	for _, bad := range [][]byte{
		{30, 1}, // shorter than genlmsghdr
		genlReply(30, u32Attr(ethtoolAFECActive, 50)[:6]),                                 // attribute cut
		genlReply(30, nest(ethtoolAFECStats, u64Array(2, 1)[:10])),                        // array not of u64
		genlReply(30, nest(ethtoolAFECStats, u64Array(2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10))), // more than 8 lanes
	} {
		if _, err := ParseFECReply(bad); err == nil {
			t.Errorf("no error for % x", bad)
		}
	}
}

// LINKSTATE_GET replies (net/ethtool/linkstate.c): a down mlx5 port with
// its extended state and substate and its down count; an up port; a state
// newer than this table.
func TestParseLinkStateReply(t *testing.T) {
	cnt := uint32(7)
	up, down := true, false
	cases := []struct {
		b    []byte
		want LinkState
	}{
		{genlReply(6, nest(1), u8Attr(ethtoolALinkstateLink, 0), u8Attr(ethtoolALinkstateExtState, 5), u8Attr(ethtoolALinkstateExtSubst, 1),
			u32Attr(ethtoolALinkstateExtDownCnt, 7)),
			LinkState{Up: &down, ExtState: "Cable issue", ExtSubstate: "Unsupported cable", DownEvents: &cnt}},
		{genlReply(6, u8Attr(ethtoolALinkstateLink, 1)), LinkState{Up: &up}},
		{genlReply(6, u8Attr(ethtoolALinkstateLink, 0), u8Attr(ethtoolALinkstateExtState, 42), u8Attr(ethtoolALinkstateExtSubst, 3)),
			LinkState{Up: &down, ExtState: "state 42", ExtSubstate: "substate 3"}},
		{genlReply(6, u8Attr(ethtoolALinkstateLink, 0), u8Attr(ethtoolALinkstateExtState, 10), u8Attr(ethtoolALinkstateExtSubst, 1)),
			LinkState{Up: &down, ExtState: LinkExtModule, ExtSubstate: "CMIS module is not in ModuleReady state"}},
	}
	for i, c := range cases {
		got, err := ParseLinkStateReply(c.b)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("case %d: %+v %v, want %+v", i, got, err, c.want)
		}
	}
	if _, err := ParseLinkStateReply(genlReply(6, nlAttrBytes(ethtoolALinkstateExtDownCnt, []byte{1}))); err == nil {
		t.Error("a 1-byte down count decoded")
	}
}

func TestParseLinkModesReply(t *testing.T) {
	got, err := ParseLinkModesReply(genlReply(4, nest(1), u8Attr(2, 1), nest(3, nlAttrBytes(1, nil)), u32Attr(ethtoolALinkmodesSpeed, 400000),
		u8Attr(6, 1), u32Attr(ethtoolALinkmodesLanes, 4)))
	if err != nil || got != (LinkModes{SpeedMbps: 400000, Lanes: 4}) {
		t.Errorf("%+v %v", got, err)
	}
	got, err = ParseLinkModesReply(genlReply(4, u32Attr(ethtoolALinkmodesSpeed, 0xffffffff)))
	if err != nil || got != (LinkModes{}) {
		t.Errorf("SPEED_UNKNOWN: %+v %v", got, err)
	}
}

// The request header nest, as ethnl_parse_header_dev_get reads it.
func TestEncodeEthtoolHeader(t *testing.T) {
	b := EncodeEthtoolHeader("ens1f0np0", ethtoolFlagStats)
	outer, err := parseNLAttrs(b)
	if err != nil || len(outer) != 1 || outer[0].typ != 1 {
		t.Fatalf("outer %+v %v", outer, err)
	}
	if binary.NativeEndian.Uint16(b[2:])&nlaFNested == 0 {
		t.Error("header nest without NLA_F_NESTED")
	}
	inner, err := parseNLAttrs(outer[0].val)
	if err != nil || len(inner) != 2 || string(inner[0].val) != "ens1f0np0\x00" || binary.NativeEndian.Uint32(inner[1].val) != ethtoolFlagStats {
		t.Errorf("inner %+v %v", inner, err)
	}
}

// `ethtool -S` listings of real drivers' names: mlx5 (en_stats.c), bnxt_en
// (bnxt_ethtool.c's port_stats_ext: rx_bits, rx_corrected_bits,
// rx_fec_uncorrectable_blocks), and the gstrings/gstats pairing the ioctl
// answers.
func TestEthtoolStats(t *testing.T) {
	listing := "NIC statistics:\n     rx_corrected_bits_phy: 3456000000\n     link_down_events_phy: 0\n" +
		"     rx_bits: 12\n     rx_fec_uncorrectable_blocks: 5\n     garbage line\n     rx_x: -1\n"
	got := ParseEthtoolStatsListing(listing)
	want := []EthtoolStat{{"rx_corrected_bits_phy", 3456000000}, {"link_down_events_phy", 0}, {"rx_bits", 12}, {"rx_fec_uncorrectable_blocks", 5}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("listing: %+v", got)
	}
	names := make([]byte, 2*ethGStringLen)
	copy(names, "rx_bits")
	copy(names[ethGStringLen:], "rx_fec_uncorrectable_blocks")
	vals := make([]byte, 16)
	binary.NativeEndian.PutUint64(vals, 12)
	binary.NativeEndian.PutUint64(vals[8:], 5)
	if got := DecodeEthtoolStats(names, vals, 2); !reflect.DeepEqual(got, want[2:]) {
		t.Errorf("gstrings/gstats: %+v", got)
	}
	if got := DecodeEthtoolStats(names, vals[:8], 2); len(got) != 1 {
		t.Errorf("short values: %+v", got)
	}
	a := EthtoolAnswer{Stats: want}
	if v, ok := a.Stat("rx_bits"); !ok || v != 12 {
		t.Error("Stat")
	}
}

// A fixture's facts answer for the interfaces recorded; one not recorded
// says so; a root without ethtool answers is ErrEthtoolNotRecorded; a
// capture that failed to ask is its error.
func TestHostEthtoolFromFacts(t *testing.T) {
	dir := t.TempDir()
	write := func(f Facts) *Host {
		f.Schema = FactsSchema
		b, _ := json.Marshal(f)
		if err := os.WriteFile(filepath.Join(dir, FactsFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		h, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	h := write(Facts{Ethtool: map[string]EthtoolAnswer{"eth0": {FECErr: ErrNotSupported}}})
	got, err := h.Ethtool([]string{"eth0", "eth1"})
	if err != nil || got["eth0"].FECErr != ErrNotSupported || got["eth1"].StatsErr == "" {
		t.Errorf("%+v %v", got, err)
	}
	if _, err := write(Facts{}).Ethtool([]string{"eth0"}); !errors.Is(err, ErrEthtoolNotRecorded) {
		t.Errorf("no answers: %v", err)
	}
	_, err = write(Facts{Unavailable: map[string]string{"ethtool": "permission denied"}}).Ethtool([]string{"eth0"})
	if err == nil || errors.Is(err, ErrEthtoolNotRecorded) {
		t.Errorf("failed capture: %v", err)
	}
}

func FuzzParseFECReply(f *testing.F) {
	f.Add(genlReply(30, compactModes(50), u8Attr(ethtoolAFECAuto, 0), u32Attr(ethtoolAFECActive, 50),
		nest(ethtoolAFECStats, u64Array(ethtoolAFECStatCorrected, 1, 2), u64Array(ethtoolAFECStatUncorr, 0))))
	f.Add([]byte{30, 1, 0, 0, 4, 0, 5, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseFECReply(b)
		if err == nil && s.Corrected != nil && len(s.Corrected.Lanes) > ethtoolMaxLanes {
			t.Errorf("%d lanes", len(s.Corrected.Lanes))
		}
	})
}

func FuzzParseLinkStateReply(f *testing.F) {
	f.Add(genlReply(6, u8Attr(ethtoolALinkstateLink, 0), u8Attr(ethtoolALinkstateExtState, 5), u8Attr(ethtoolALinkstateExtSubst, 1)))
	f.Add(genlReply(6, u8Attr(ethtoolALinkstateLink, 0), u8Attr(ethtoolALinkstateExtState, 255), u8Attr(ethtoolALinkstateExtSubst, 255)))
	f.Fuzz(func(t *testing.T, b []byte) {
		if l, err := ParseLinkStateReply(b); err == nil && l.ExtSubstate != "" && l.ExtState == "" {
			t.Error("a substate without its state")
		}
		_, _ = ParseLinkModesReply(b)
	})
}

func FuzzEthtoolStats(f *testing.F) {
	f.Add("NIC statistics:\n     rx_corrected_bits_phy: 3456000000\n", []byte("rx_bits\x00"), []byte{1, 2, 3, 4, 5, 6, 7, 8}, 1)
	f.Fuzz(func(t *testing.T, listing string, names, vals []byte, n int) {
		for _, s := range ParseEthtoolStatsListing(listing) {
			if s.Name == "" {
				t.Error("a statistic without a name")
			}
		}
		if n > 1<<12 {
			n = 1 << 12
		}
		if got := DecodeEthtoolStats(names, vals, n); len(got) > len(vals)/8 {
			t.Errorf("%d statistics from %d bytes of values", len(got), len(vals))
		}
	})
}
