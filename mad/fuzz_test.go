package mad

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixtureSeeds adds every captured answer as a seed.
func fixtureSeeds(f *testing.F) {
	names, _ := filepath.Glob(filepath.Join("testdata", "*.hex"))
	for _, n := range names {
		raw, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		b, err := hex.DecodeString(strings.Join(strings.Fields(string(raw)), ""))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add(make([]byte, HeaderSize))
}

// FuzzDecodeResponse feeds any bytes to the header check and to every
// attribute decoder: an error is fine, a panic is not.
func FuzzDecodeResponse(f *testing.F) {
	fixtureSeeds(f)
	reqs := [][]byte{
		mustSMP(f, Route{LID: 1}, AttrSMInfo), mustSMP(f, Route{Path: []uint8{1}}, AttrNodeInfo),
		NewPathRecordQuery(GID{}, GID{}, 1), NewPortCountersQuery(1, 1),
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, req := range reqs {
			_, _ = CheckResponse(req, b)
		}
		_, _ = DecodeDR(b)
		_, _ = SAComponentMask(b)
		_, _ = DecodeSMInfoRecords(b)
		for _, d := range [][]byte{SMPData(b), SAData(b), PMAData(b), b} {
			_, _ = DecodeSMInfo(d)
			_, _ = DecodeNodeInfo(d)
			_, _ = DecodeNodeDesc(d)
			_, _ = DecodePortInfo(d)
			_, _ = DecodePKeyBlock(d)
			_, _ = DecodePortCounters(d)
			_, _ = DecodePathRecord(d)
		}
	})
}

// FuzzDecodeDR checks the directed-route decoder on any hop count: the
// paths it returns are as long as the hop count it accepted.
func FuzzDecodeDR(f *testing.F) {
	fixtureSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeDR(b)
		if err == nil && (len(d.InitialPath) != int(d.HopCount) || len(d.ReturnPath) != int(d.HopCount)) {
			t.Fatalf("hop count %d with paths of %d and %d entries", d.HopCount, len(d.InitialPath), len(d.ReturnPath))
		}
	})
}

// FuzzDecodeStatus names any status word without panicking.
func FuzzDecodeStatus(f *testing.F) {
	f.Add(uint8(ClassSA), uint16(0x0300))
	f.Add(uint8(ClassSubnDR), uint16(0x801c))
	f.Fuzz(func(t *testing.T, class uint8, s uint16) {
		if StatusText(class, s) == "" {
			t.Fatal("empty status text")
		}
	})
}

func mustSMP(f *testing.F, r Route, attr uint16) []byte {
	b, err := NewSMP(r, attr, 0, 1)
	if err != nil {
		f.Fatal(err)
	}
	return b
}
