package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func sampleEndpoint() Endpoint {
	return Endpoint{Device: "rxe0", Port: 1, LinkLayer: "Ethernet", QPN: 0x11, PSN: 0xabcdef, GID: bytes.Repeat([]byte{1}, 16),
		GIDIndex: 1, GIDType: "RoCE v2", ActiveMTU: 1024, NetdevMTU: 1500, Netdev: "eth0", Addr: 0x7f0000001000, RKey: 0x1234, Len: 1 << 20}
}

func TestFrameRoundTrip(t *testing.T) {
	msgs := []struct {
		typ MsgType
		in  any
		out any
	}{
		{MsgServerHello, &ServerHello{Magic: Magic, Version: 1, MinVersion: 1, Nonce: make([]byte, NonceSize), TokenRequired: true}, &ServerHello{}},
		{MsgClientHello, &ClientHello{Magic: Magic, Version: 1, Proof: Proof("t", make([]byte, NonceSize))}, &ClientHello{}},
		{MsgSetup, &Setup{Endpoint: sampleEndpoint(), Host: HostReport{Hostname: "a", Counters: map[string]uint64{"x": 1}}, Params: Params{MsgSize: 4096, BufferSize: 1 << 20}}, &Setup{}},
		{MsgOp, &Op{Kind: OpSendRecv, Seed: 7, Len: 4096, WaitMS: 100}, &Op{}},
		{MsgOpReply, &OpReply{OK: true, Detail: "fine"}, &OpReply{}},
	}
	var buf bytes.Buffer
	for _, m := range msgs {
		if err := WriteFrame(&buf, m.typ, m.in); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range msgs {
		f, err := ReadFrame(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Decode(m.typ, m.out); err != nil {
			t.Fatalf("%s: %v", m.typ, err)
		}
		if !reflect.DeepEqual(m.in, m.out) {
			t.Fatalf("%s: sent %+v, got %+v", m.typ, m.in, m.out)
		}
	}
	if _, err := ReadFrame(&buf); err != io.EOF {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
}

func rawFrame(n uint32, typ uint16, payload string) []byte {
	b := make([]byte, 6+len(payload))
	binary.BigEndian.PutUint32(b, n)
	binary.BigEndian.PutUint16(b[4:], typ)
	copy(b[6:], payload)
	return b
}

func TestHostileFrames(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"oversized", rawFrame(MaxFrame+1, 1, ""), "exceeds the 65536-byte limit"},
		{"4 GiB", rawFrame(0xffffffff, 1, ""), "exceeds"},
		{"too short", rawFrame(1, 1, ""), "shorter than its type"},
		{"unknown type", rawFrame(2+2, 999, "{}"), "unknown message type 999"},
		{"reserved rdma_cm type", rawFrame(2+2, 52, "{}"), "rdma_cm message 52"}, // 48–51 are the rdma_cm exchange
		{"truncated payload", rawFrame(100, uint16(MsgSetup), "{}"), "cut short"},
		{"HTTP request", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), "exceeds"},
	} {
		_, err := ReadFrame(bytes.NewReader(tc.in))
		var fe *FrameError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a FrameError with %q", tc.name, err, tc.want)
		}
	}
}

func TestDecodeRefusesWrongOrBadPayloads(t *testing.T) {
	for _, tc := range []struct {
		name    string
		typ     MsgType
		payload string
		want    MsgType
		err     string
	}{
		{"wrong type", MsgOp, `{}`, MsgSetup, "expected Setup, got Op"},
		{"trailing data", MsgOp, `{"kind":"counters"} {}`, MsgOp, "trailing data"},
		{"garbage", MsgSetup, `\x00\x01`, MsgSetup, "Setup"},
		{"QPN 0", MsgSetup, `{"endpoint":{"qpn":0,"port":1,"active_mtu":1024},"params":{"msg_size":1,"buffer_size":4}}`, MsgSetup, "QPN"},
		{"QPN above 24 bits", MsgSetup, `{"endpoint":{"qpn":16777216,"port":1,"active_mtu":1024},"params":{"msg_size":1,"buffer_size":4}}`, MsgSetup, "QPN"},
		{"MTU 1500", MsgSetup, `{"endpoint":{"qpn":1,"port":1,"active_mtu":1500},"params":{"msg_size":1,"buffer_size":4}}`, MsgSetup, "active MTU 1500"},
		{"GID of 4 bytes", MsgSetup, `{"endpoint":{"qpn":1,"port":1,"active_mtu":1024,"gid":"AQIDBA=="},"params":{"msg_size":1,"buffer_size":4}}`, MsgSetup, "GID of 4 bytes"},
		{"huge buffer", MsgSetup, `{"endpoint":{"qpn":1,"port":1,"active_mtu":1024,"link_layer":"InfiniBand"},"params":{"msg_size":1,"buffer_size":1099511627776}}`, MsgSetup, "buffer"},
		{"link layer", MsgSetup, `{"endpoint":{"qpn":1,"port":1,"active_mtu":1024,"link_layer":"Ethernet\nforged log line"},"params":{"msg_size":1,"buffer_size":4}}`, MsgSetup, "link layer"},
		{"unknown op", MsgOp, `{"kind":"rm -rf"}`, MsgOp, "unknown operation"},
		{"echo count", MsgOp, `{"kind":"echo","count":100000000}`, MsgOp, "out of range"},
		{"bad magic", MsgClientHello, `{"magic":"ssh","version":1,"proof":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`, MsgClientHello, "not an rdmadoctor peer client"},
	} {
		f := Frame{Type: tc.typ, Payload: []byte(tc.payload)}
		v := map[MsgType]any{MsgSetup: &Setup{}, MsgOp: &Op{}, MsgClientHello: &ClientHello{}}[tc.want]
		err := f.Decode(tc.want, v)
		var fe *FrameError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want a FrameError with %q", tc.name, err, tc.err)
		}
	}
}

func TestDecodeRejectAndError(t *testing.T) {
	var rj *RejectError
	f := Frame{Type: MsgReject, Payload: []byte(`{"code":"token","message":"no"}`)}
	if err := f.Decode(MsgWelcome, &Welcome{}); !errors.As(err, &rj) || rj.Reject.Code != RejectToken {
		t.Fatalf("Reject decoded as %v", err)
	}
	var pe *PeerError
	f = Frame{Type: MsgError, Payload: []byte(`{"message":"ibv_open_device: EACCES"}`)}
	if err := f.Decode(MsgSetupReply, &SetupReply{}); !errors.As(err, &pe) || !strings.Contains(pe.Msg, "EACCES") {
		t.Fatalf("Error decoded as %v", err)
	}
}

func TestProof(t *testing.T) {
	nonce := bytes.Repeat([]byte{7}, NonceSize)
	p := Proof("secret", nonce)
	if !ProofOK("secret", nonce, p) {
		t.Fatal("the right token is refused")
	}
	if ProofOK("secreT", nonce, p) || ProofOK("secret", bytes.Repeat([]byte{8}, NonceSize), p) || ProofOK("secret", nonce, p[:31]) {
		t.Fatal("a wrong token, another nonce or a short proof is accepted")
	}
}

func TestNegotiatePathMTU(t *testing.T) {
	for _, tc := range []struct {
		la, lb, na, nb int
		ll             string
		want           int
		note           string
	}{
		{4096, 4096, 9000, 9000, "Ethernet", 4096, ""},
		{1024, 1024, 1500, 1500, "Ethernet", 1024, ""},
		{4096, 1024, 9000, 1500, "Ethernet", 1024, "netdev MTU 9000 here, 1500 there"},
		// rxe's active_mtu follows its own netdev: 4096 on both when the
		// netdev MTU is 9000 here and 4200 there, but 4200 cannot carry 4096.
		{4096, 4096, 9000, 4150, "Ethernet", 2048, "netdev MTU 9000 here, 4150 there"},
		{2048, 4096, 0, 0, "InfiniBand", 2048, "active_mtu 2048 here, 4096 there"},
	} {
		a := &Endpoint{ActiveMTU: tc.la, NetdevMTU: tc.na, LinkLayer: tc.ll}
		b := &Endpoint{ActiveMTU: tc.lb, NetdevMTU: tc.nb, LinkLayer: tc.ll}
		got, note := NegotiatePathMTU(a, b)
		if got != tc.want || !strings.Contains(note, tc.note) || (tc.note == "" && note != "") {
			t.Errorf("%+v: %d %q, want %d %q", tc, got, note, tc.want, tc.note)
		}
		if back, _ := NegotiatePathMTU(b, a); back != got {
			t.Errorf("%+v: not symmetric: %d and %d", tc, got, back)
		}
	}
}

func TestPattern(t *testing.T) {
	a, b := make([]byte, 4096), make([]byte, 4096)
	Pattern(a, 1)
	Pattern(b, 2)
	if bytes.Equal(a, b) || PatternMismatch(a, 1) != -1 || PatternMismatch(b, 1) < 0 {
		t.Fatal("patterns of different seeds match, or a pattern does not match its own seed")
	}
	a[100] ^= 1
	if at := PatternMismatch(a, 1); at != 100 {
		t.Fatalf("mismatch at %d, want 100", at)
	}
	z := make([]byte, 64)
	Pattern(z, 0)
	if bytes.Equal(z, make([]byte, 64)) {
		t.Fatal("seed 0 gives zeros")
	}
}

func BenchmarkSetupEncodeDecode(b *testing.B) {
	s := Setup{Endpoint: sampleEndpoint(), Host: HostReport{Hostname: "node01", Kernel: "6.1.0"}, Params: Params{MsgSize: 4096, BufferSize: 4 << 20}}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := WriteFrame(&buf, MsgSetup, &s); err != nil {
			b.Fatal(err)
		}
		f, err := ReadFrame(&buf)
		if err != nil {
			b.Fatal(err)
		}
		var out Setup
		if err := f.Decode(MsgSetup, &out); err != nil {
			b.Fatal(err)
		}
	}
}
