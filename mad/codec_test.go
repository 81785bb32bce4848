package mad

import (
	"errors"
	"strings"
	"testing"
)

// answer turns a request into the response a healthy responder sends:
// the response method, the D bit on a directed-route SMP, data at off.
func answer(req []byte, off int, data []byte) []byte {
	b := append([]byte(nil), req...)
	b[3] |= 0x80
	if b[1] == ClassSubnDR {
		b[4] |= 0x80
	}
	copy(b[off:], data)
	return b
}

func TestCheckResponse(t *testing.T) {
	req, err := NewSMP(Route{LID: 1}, AttrSMInfo, 0, 0xabcd0001)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b []byte)) []byte {
		b := answer(req, smpDataOff, nil)
		f(b)
		return b
	}
	cases := []struct {
		name string
		resp []byte
		want string // "" = accepted
		is   func(error) bool
	}{
		{"healthy", answer(req, smpDataOff, nil), "", nil},
		{"high TID bits are the kernel's", edit(func(b []byte) { b[8] = 0x55 }), "", nil},
		{"truncated header", answer(req, 0, nil)[:10], "truncated MAD header: 10 bytes, need 24", isA[*TruncatedError]},
		{"base version", edit(func(b []byte) { b[0] = 2 }), "unexpected base version in the answer: got 2, want 1", isA[*UnexpectedError]},
		{"class", edit(func(b []byte) { b[1] = ClassPerf }), "got PMA, want SMP", isA[*UnexpectedError]},
		{"unknown class version", edit(func(b []byte) { b[2] = 9 }), "unexpected class version in the answer: got SMP version 9, want version 1", isA[*UnexpectedError]},
		{"method", edit(func(b []byte) { b[3] = MethodGet }), "unexpected method in the answer: got 0x01, want 0x81", isA[*UnexpectedError]},
		{"other transaction", edit(func(b []byte) { b[15] = 2 }), "unexpected transaction ID", isA[*UnexpectedError]},
		{"unexpected attribute", edit(func(b []byte) { b[17] = byte(AttrNodeInfo) }), "unexpected attribute in the answer: got NodeInfo, want SMInfo", isA[*UnexpectedError]},
		{"bad status", edit(func(b []byte) { b[5] = 7 << 2 }), "SMP SMInfo answered with status 0x001c: invalid attribute or attribute modifier value", isA[*StatusError]},
		{"busy", edit(func(b []byte) { b[5] = 1 }), "busy, try again later", isA[*StatusError]},
		{"unsupported version status", edit(func(b []byte) { b[5] = 1 << 2 }), "bad class version", isA[*StatusError]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := CheckResponse(req, c.resp)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case c.want == "":
				return
			case err == nil:
				t.Fatalf("accepted, want %q", c.want)
			case !strings.Contains(err.Error(), c.want):
				t.Errorf("error %q, want it to say %q", err, c.want)
			}
			if !c.is(err) {
				t.Errorf("error %T is not of the expected type", err)
			}
		})
	}
}

func TestSAStatusNamed(t *testing.T) {
	req := NewPathRecordQuery(GID{Prefix: 0xfe80 << 48, GUID: 1}, GID{Prefix: 0xfe80 << 48, GUID: 2}, 7)
	resp := answer(req, 0, nil)
	resp[4] = 3 // class-specific status 3 in bits 8-15
	_, err := CheckResponse(req, resp)
	var se *StatusError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "ERR_NO_RECORDS") || se.Busy() {
		t.Fatalf("error %v, want an SA ERR_NO_RECORDS status", err)
	}
}

func TestDecodersRejectShortData(t *testing.T) {
	short := make([]byte, 10)
	for name, f := range map[string]func([]byte) error{
		"SMInfo":       func(b []byte) error { _, err := DecodeSMInfo(b); return err },
		"NodeInfo":     func(b []byte) error { _, err := DecodeNodeInfo(b); return err },
		"NodeDesc":     func(b []byte) error { _, err := DecodeNodeDesc(b); return err },
		"PortInfo":     func(b []byte) error { _, err := DecodePortInfo(b); return err },
		"PKeyBlock":    func(b []byte) error { _, err := DecodePKeyBlock(b); return err },
		"PortCounters": func(b []byte) error { _, err := DecodePortCounters(b); return err },
		"PathRecord":   func(b []byte) error { _, err := DecodePathRecord(b); return err },
		"DR":           func(b []byte) error { _, err := DecodeDR(b); return err },
	} {
		var te *TruncatedError
		if err := f(short); !errors.As(err, &te) || te.Got != 10 {
			t.Errorf("%s of 10 bytes: %v, want a TruncatedError", name, err)
		}
	}
}

func TestNewSMP(t *testing.T) {
	b, err := NewSMP(Route{Path: []uint8{1, 5}}, AttrNodeInfo, 0, 42)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := DecodeHeader(b)
	d, err := DecodeDR(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.Class != ClassSubnDR || h.Method != MethodGet || h.AttrID != AttrNodeInfo || h.TID != 42 ||
		d.HopPointer != 0 || d.HopCount != 2 || d.Direction || d.DrSLID != PermissiveLID || d.DrDLID != PermissiveLID ||
		string(d.InitialPath) != "\x01\x05" {
		t.Errorf("directed-route SMP: header %+v, DR %+v", h, d)
	}
	for _, r := range []Route{{LID: 0}, {LID: 0xc001}, {Path: make([]uint8, 64)}} {
		if _, err := NewSMP(r, AttrNodeInfo, 0, 1); err == nil {
			t.Errorf("NewSMP(%v) accepted", r)
		}
	}
	if got := (Route{Path: []uint8{1, 5}}).String(); got != "directed route 0,1,5" {
		t.Errorf("route %q", got)
	}
}

func TestPathRecordRoundTrip(t *testing.T) {
	want := PathRecord{DGID: GID{0xfe80 << 48, 0x10004}, SGID: GID{0xfe80 << 48, 0x20001}, DLID: 4, SLID: 9,
		FlowLabel: 0x12345, HopLimit: 3, TClass: 106, Reversible: true, NumbPath: 1, PKey: 0xffff, SL: 3,
		MTU: 5, Rate: 16, PktLifeTime: 18, MTUSelector: 2, RateSelector: 2, Preference: 1}
	d := make([]byte, pathRecordLen)
	want.put(d)
	got, err := DecodePathRecord(d)
	if err != nil || got != want {
		t.Errorf("round trip: %+v, %v; want %+v", got, err, want)
	}
	if s := want.DGID.String(); s != "fe80::1:4" {
		t.Errorf("GID %q", s)
	}
	if RateName(16) != "100 Gb/s" || RateName(99) != "rate code 99" || MTUBytes(5) != 4096 || MTUBytes(9) != 0 {
		t.Error("rate or MTU names")
	}
}

func TestNames(t *testing.T) {
	for got, want := range map[string]string{
		SMStateName(SMMaster): "MASTER", SMStateName(2): "STANDBY", SMStateName(9): "state 9",
		PortStateName(4): "Active", PhysStateName(5): "LinkUp", WidthName(1): "1X", WidthName(2): "4X",
		(PortInfo{LinkSpeedExtActive: 4}).SpeedName(): "HDR", (PortInfo{LinkSpeedActive: 4}).SpeedName(): "QDR",
		NodeTypeName(NodeSwitch): "switch", AttrName(ClassSubnDR, AttrPKeyTable): "P_KeyTable",
		AttrName(ClassPerf, 0x42): "attribute 0x0042", ClassName(0x33): "class 0x33",
	} {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}

// isA reports whether err is (or wraps) a T.
func isA[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

func TestSMInfoRecordsEnd(t *testing.T) {
	resp := answer(NewSMInfoRecordQuery(1), 0, nil)
	resp[saHdrOff+9] = 4 // 32-byte records
	for i, lid := range []byte{1, 9} {
		resp[saDataOff+32*i+1] = lid
	}
	// A 256-byte MAD: the zero padding after the two records is no record.
	if recs, err := DecodeSMInfoRecords(resp); err != nil || len(recs) != 2 || recs[1].LID != 9 {
		t.Errorf("padded: %+v, %v", recs, err)
	}
	// RMPP active with a payload of the SA header and one record.
	resp[26] = 1
	resp[35] = 20 + 32
	if recs, err := DecodeSMInfoRecords(resp); err != nil || len(recs) != 1 {
		t.Errorf("RMPP payload of one record: %+v, %v", recs, err)
	}
}
