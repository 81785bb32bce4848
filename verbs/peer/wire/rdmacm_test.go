package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// The rdma_cm messages travel like the others, and out-of-range ones are
// protocol violations, not values the server acts on.
func TestCMMessages(t *testing.T) {
	var buf bytes.Buffer
	in := CMListen{Nonce: bytes.Repeat([]byte{7}, CMNonceSize), WaitMS: 12000, Size: 4096, Echoed: true}
	if err := WriteFrame(&buf, MsgCMListen, in); err != nil {
		t.Fatal(err)
	}
	f, err := ReadFrame(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var out CMListen
	if err := f.Decode(MsgCMListen, &out); err != nil || !bytes.Equal(out.Nonce, in.Nonce) || out.Size != 4096 || !out.Echoed {
		t.Fatalf("decode %+v: %v", out, err)
	}
	if MsgCMListen.String() != "CMListen" || !MsgCMResult.Known() || MsgCMEchoed.String() != "CMEchoed" {
		t.Fatalf("names: %s %v %s", MsgCMListen, MsgCMResult.Known(), MsgCMEchoed)
	}
	bad := []any{
		CMListen{Nonce: []byte{1}, WaitMS: 1, Size: 1},
		CMListen{Nonce: make([]byte, CMNonceSize), WaitMS: -1, Size: 1},
		CMListen{Nonce: make([]byte, CMNonceSize), WaitMS: 1, Size: 1 << 30},
		CMListening{Addr: "", Port: 4000},
		CMListening{Addr: "192.0.2.2", Port: 70000},
	}
	for _, b := range bad {
		buf.Reset()
		typ := MsgCMListen
		var dst any = &CMListen{}
		if _, ok := b.(CMListening); ok {
			typ, dst = MsgCMListening, &CMListening{}
		}
		if err := WriteFrame(&buf, typ, b); err != nil {
			t.Fatal(err)
		}
		f, err := ReadFrame(&buf)
		if err != nil {
			t.Fatal(err)
		}
		var fe *FrameError
		if err := f.Decode(typ, dst); !errors.As(err, &fe) || !strings.Contains(err.Error(), "rdma_cm") {
			t.Errorf("%+v: decode error %v, want a protocol violation", b, err)
		}
	}
	// A listener that could not listen says why, with no address.
	buf.Reset()
	WriteFrame(&buf, MsgCMListening, CMListening{Error: "rdma_create_id: ENODEV"})
	f, _ = ReadFrame(&buf)
	var l CMListening
	if err := f.Decode(MsgCMListening, &l); err != nil || l.Error == "" {
		t.Fatalf("error listener: %+v %v", l, err)
	}
}

// A verbs error names its verb; under a step of that name it is said once.
func TestStepErrorSaysTheVerbOnce(t *testing.T) {
	for _, c := range []struct{ step, err, want string }{
		{"rdma_create_event_channel", "rdma_create_event_channel: ENODEV (no such device)", "rdma_create_event_channel: ENODEV (no such device)"},
		{"ibv_modify_qp INIT→RTR", "ibv_modify_qp: EINVAL (invalid argument)", "ibv_modify_qp INIT→RTR: EINVAL (invalid argument)"},
		{"rdma_resolve_addr", "timed out after 3s", "rdma_resolve_addr: timed out after 3s"},
		{"rdma_listen", "", "rdma_listen failed"},
		{"", "no librdmacm", "no librdmacm"},
	} {
		if got := StepError(c.step, c.err); got != c.want {
			t.Errorf("StepError(%q, %q) = %q, want %q", c.step, c.err, got, c.want)
		}
	}
	r := CMResult{Step: "rdma_create_event_channel", Error: "rdma_create_event_channel: ENODEV (no such device)"}
	if got := r.Failure(); strings.Count(got, "rdma_create_event_channel") != 1 {
		t.Errorf("Failure() = %q: the verb twice", got)
	}
}
