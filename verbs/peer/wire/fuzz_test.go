package wire

import (
	"bytes"
	"testing"
)

// FuzzReadFrame feeds arbitrary bytes to the frame reader and every
// message decoder: nothing panics, nothing is read past MaxFrame, and a
// frame that decodes re-encodes to one that decodes the same.
func FuzzReadFrame(f *testing.F) {
	var seed bytes.Buffer
	_ = WriteFrame(&seed, MsgSetup, &Setup{Endpoint: sampleEndpoint(), Params: Params{MsgSize: 8, BufferSize: 64}})
	f.Add(seed.Bytes())
	seed.Reset()
	_ = WriteFrame(&seed, MsgOp, &Op{Kind: OpEcho, Count: 3, Len: 8})
	f.Add(seed.Bytes())
	f.Add(rawFrame(MaxFrame+1, 1, ""))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			fr, err := ReadFrame(r)
			if err != nil {
				return
			}
			if len(fr.Payload)+2 > MaxFrame {
				t.Fatalf("a %d-byte payload passed the limit", len(fr.Payload))
			}
			for typ, v := range map[MsgType]any{
				MsgServerHello: &ServerHello{}, MsgClientHello: &ClientHello{}, MsgWelcome: &Welcome{},
				MsgSetup: &Setup{}, MsgSetupReply: &SetupReply{}, MsgOp: &Op{}, MsgOpReply: &OpReply{},
			} {
				if fr.Decode(typ, v) != nil {
					continue
				}
				var buf bytes.Buffer
				if err := WriteFrame(&buf, typ, v); err != nil {
					continue // valid JSON that grew past the limit when re-encoded
				}
				again, err := ReadFrame(&buf)
				if err != nil {
					t.Fatalf("%s re-encoded does not read back: %v", typ, err)
				}
				if err := again.Decode(typ, v); err != nil {
					t.Fatalf("%s re-encoded does not decode: %v", typ, err)
				}
			}
		}
	})
}
