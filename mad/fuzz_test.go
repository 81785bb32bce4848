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
		NewPathRecordQuery(GID{}, GID{}, 1), NewPortCountersQuery(1, 1), mustNodeRecordQuery(f, "Hca4"),
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, req := range reqs {
			_, _ = CheckResponse(req, b)
		}
		_, _ = DecodeDR(b)
		_, _ = SAComponentMask(b)
		_, _ = DecodeSMInfoRecords(b)
		_, _ = DecodeNodeRecords(b)
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

func mustNodeRecordQuery(f *testing.F, desc string) []byte {
	b, err := NewNodeRecordQuery(desc, 1)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzNodeRecordQuery encodes any description: one that fits is found in
// the request's NodeDescription with the component set, a longer one is
// an error.
func FuzzNodeRecordQuery(f *testing.F) {
	f.Add("Hca4")
	f.Add("")
	f.Add(strings.Repeat("x", 65))
	f.Fuzz(func(t *testing.T, desc string) {
		b, err := NewNodeRecordQuery(desc, 1)
		if len(desc) > 64 {
			if err == nil {
				t.Fatal("a description over 64 bytes was encoded")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		mask, _ := SAComponentMask(b)
		if (mask == NRCompNodeDesc) != (desc != "") || string(b[saDataOff+nodeRecDescOff:][:len(desc)]) != desc {
			t.Fatalf("mask 0x%x, description %q for %q", mask, b[saDataOff+nodeRecDescOff:saDataOff+nodeRecordLen], desc)
		}
	})
}
