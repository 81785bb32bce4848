// Package wire is the control protocol of `rdmadoctor peer`: the TCP
// conversation in which two hosts agree on everything an RC connection
// needs (QPN, PSN, GID or LID, MTU, remote keys), as perftest does out of
// band, before they talk RDMA only.
//
// A conversation is a sequence of frames. Each frame is a 4-byte
// big-endian length (of what follows), a 2-byte big-endian message type
// and a JSON payload; a frame longer than MaxFrame is refused before it is
// read. The server speaks first (ServerHello: the versions it speaks and a
// nonce), the client answers with its version and an HMAC-SHA256 of the
// nonce under the shared token (ClientHello), the server accepts (Welcome)
// or refuses with a reason code (Reject). After that the client drives:
// Setup / SetupReply exchange the endpoints, then Op / OpReply ask the
// server's side to take part in one test, and Bye ends the session.
//
// Message types are numbered in ranges so that a later version adds
// messages without renumbering: 1–15 handshake and errors, 16–31 endpoint
// exchange, 32–47 operations, 48–63 reserved for an rdma_cm exchange.
// A receiver refuses a type it does not know.
package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Protocol identity and versions.
const (
	// Magic names the protocol in ServerHello and ClientHello, so a
	// client that reached some other TCP service says so.
	Magic = "rdmadoctor-peer"
	// Version is the protocol version this build speaks; MinVersion the
	// oldest it still accepts. Version 2: an OpSendRecv may be shorter
	// than the session's message size (the client's one-packet SEND
	// before the full one); a client sends one only to a server that
	// speaks 2. Version 3: a CMListen may ask for MsgCMEchoed (the
	// client keeps its rdma_cm connection up until the server's echo is
	// acknowledged); a client asks only a server that speaks 3.
	Version    = 3
	MinVersion = 1
	// DefaultPort is the control port of `peer serve` and `peer test`.
	DefaultPort = 18516
	// MaxFrame bounds a frame's length (type and payload): anything
	// larger is refused unread.
	MaxFrame = 64 << 10
	// NonceSize is the length of the server's challenge.
	NonceSize = 32
	// headerSize is the length prefix and the type.
	headerSize = 6
)

// MsgType is a frame's message type.
type MsgType uint16

// Message types. Ranges: 1–15 handshake, 16–31 endpoint exchange, 32–47
// operations, 48–63 reserved for an rdma_cm exchange.
const (
	MsgServerHello MsgType = 1
	MsgClientHello MsgType = 2
	MsgWelcome     MsgType = 3
	MsgReject      MsgType = 4
	MsgError       MsgType = 5
	MsgBye         MsgType = 6

	MsgSetup      MsgType = 16
	MsgSetupReply MsgType = 17

	MsgOp      MsgType = 32
	MsgOpReady MsgType = 33
	MsgOpReply MsgType = 34

	// MsgRDMACMFirst … MsgRDMACMLast are reserved for an rdma_cm exchange.
	MsgRDMACMFirst MsgType = 48
	MsgRDMACMLast  MsgType = 63
)

var msgNames = map[MsgType]string{
	MsgServerHello: "ServerHello", MsgClientHello: "ClientHello", MsgWelcome: "Welcome",
	MsgReject: "Reject", MsgError: "Error", MsgBye: "Bye",
	MsgSetup: "Setup", MsgSetupReply: "SetupReply",
	MsgOp: "Op", MsgOpReady: "OpReady", MsgOpReply: "OpReply",
}

func (t MsgType) String() string {
	if n, ok := msgNames[t]; ok {
		return n
	}
	if t >= MsgRDMACMFirst && t <= MsgRDMACMLast {
		return fmt.Sprintf("rdma_cm message %d", uint16(t))
	}
	return fmt.Sprintf("unknown message type %d", uint16(t))
}

// Known reports whether this build understands t.
func (t MsgType) Known() bool { _, ok := msgNames[t]; return ok }

// Frame is one decoded frame.
type Frame struct {
	Type    MsgType
	Payload []byte
}

// FrameError is a frame that broke the protocol: too long, truncated, of
// an unknown type, or with a payload that does not decode.
type FrameError struct {
	Reason string
}

func (e *FrameError) Error() string { return "protocol violation: " + e.Reason }

// WriteFrame writes one frame of type t with v encoded as JSON.
func WriteFrame(w io.Writer, t MsgType, v any) error {
	payload, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", t, err)
	}
	if len(payload)+2 > MaxFrame {
		return fmt.Errorf("encode %s: %d bytes exceed the %d-byte frame limit", t, len(payload), MaxFrame)
	}
	buf := make([]byte, headerSize+len(payload))
	binary.BigEndian.PutUint32(buf, uint32(2+len(payload)))
	binary.BigEndian.PutUint16(buf[4:], uint16(t))
	copy(buf[headerSize:], payload)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("send %s: %w", t, err)
	}
	return nil
}

// ReadFrame reads one frame. The length is checked against MaxFrame before
// anything else is read, and the type against the known ones.
func ReadFrame(r io.Reader) (Frame, error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r, hdr[:4]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < 2 {
		return Frame{}, &FrameError{fmt.Sprintf("frame length %d is shorter than its type", n)}
	}
	if n > MaxFrame {
		return Frame{}, &FrameError{fmt.Sprintf("frame length %d exceeds the %d-byte limit", n, MaxFrame)}
	}
	if _, err := io.ReadFull(r, hdr[4:]); err != nil {
		return Frame{}, truncated(err)
	}
	f := Frame{Type: MsgType(binary.BigEndian.Uint16(hdr[4:]))}
	if !f.Type.Known() {
		return Frame{}, &FrameError{f.Type.String()}
	}
	f.Payload = make([]byte, n-2)
	if _, err := io.ReadFull(r, f.Payload); err != nil {
		return Frame{}, truncated(err)
	}
	return f, nil
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &FrameError{"frame cut short by the end of the connection"}
	}
	return err
}

// Decode decodes f's payload into v, which must be the payload type of
// want; any other type is a protocol violation, except MsgError, which is
// returned as a *PeerError, and MsgReject, as a *RejectError.
func (f Frame) Decode(want MsgType, v any) error {
	switch {
	case f.Type == want:
	case f.Type == MsgError:
		var e ErrorMsg
		if err := decodeStrict(f.Payload, &e); err != nil {
			return &FrameError{"Error: " + err.Error()}
		}
		return &PeerError{Msg: e.Message}
	case f.Type == MsgReject:
		var rj Reject
		if err := decodeStrict(f.Payload, &rj); err != nil {
			return &FrameError{"Reject: " + err.Error()}
		}
		return &RejectError{Reject: rj}
	default:
		return &FrameError{fmt.Sprintf("expected %s, got %s", want, f.Type)}
	}
	if err := decodeStrict(f.Payload, v); err != nil {
		return &FrameError{fmt.Sprintf("%s: %v", f.Type, err)}
	}
	if c, ok := v.(interface{ Validate() error }); ok {
		if err := c.Validate(); err != nil {
			return &FrameError{fmt.Sprintf("%s: %v", f.Type, err)}
		}
	}
	return nil
}

// decodeStrict decodes one JSON object; unknown fields are allowed (a
// newer peer may add some), trailing data is not.
func decodeStrict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after the payload")
	}
	return nil
}

// Conn is a net.Conn with a deadline on every read and write.
type Conn struct {
	net.Conn
	// IOTimeout bounds each frame read or written; a peer slower than
	// that is dropped.
	IOTimeout time.Duration
	// Deadline, when set, bounds the whole conversation.
	Deadline time.Time
}

func (c *Conn) deadline(d time.Duration) time.Time {
	t := time.Now().Add(d)
	if !c.Deadline.IsZero() && c.Deadline.Before(t) {
		t = c.Deadline
	}
	return t
}

// Send writes one frame.
func (c *Conn) Send(t MsgType, v any) error {
	if err := c.SetWriteDeadline(c.deadline(c.IOTimeout)); err != nil {
		return err
	}
	return WriteFrame(c.Conn, t, v)
}

// Recv reads one frame. Its first byte may take wait (when longer than
// IOTimeout: the peer is carrying out an operation, or thinking between
// two); once it has come, the rest of the frame must come within
// IOTimeout, so a peer that trickles a frame byte by byte is dropped.
func (c *Conn) Recv(wait time.Duration) (Frame, error) {
	if wait < c.IOTimeout {
		wait = c.IOTimeout
	}
	if err := c.SetReadDeadline(c.deadline(wait)); err != nil {
		return Frame{}, err
	}
	return ReadFrame(&frameReader{c: c})
}

// frameReader tightens the read deadline to IOTimeout at a frame's first
// byte.
type frameReader struct {
	c       *Conn
	started bool
}

func (r *frameReader) Read(p []byte) (int, error) {
	n, err := r.c.Conn.Read(p)
	if n > 0 && !r.started {
		r.started = true
		if derr := r.c.SetReadDeadline(r.c.deadline(r.c.IOTimeout)); derr != nil && err == nil {
			err = derr
		}
	}
	return n, err
}

// Expect reads one frame and decodes it as want into v.
func (c *Conn) Expect(wait time.Duration, want MsgType, v any) error {
	f, err := c.Recv(wait)
	if err != nil {
		return err
	}
	return f.Decode(want, v)
}

// Proof is the client's answer to the server's nonce: HMAC-SHA256 under
// the token. An empty token still yields a proof; a server without a
// token ignores it.
func Proof(token string, nonce []byte) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(Magic))
	m.Write(nonce)
	return m.Sum(nil)
}

// ProofOK compares a proof in constant time.
func ProofOK(token string, nonce, proof []byte) bool {
	return hmac.Equal(Proof(token, nonce), proof)
}
