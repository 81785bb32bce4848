package wire

import (
	"fmt"
	"strings"
)

// The rdma_cm exchange (types 48–63): the client asks the server's session
// child to listen with the RDMA connection manager, the server answers
// with the address and port it listens on, the client connects there
// through rdma_cm (address and route resolution, CM REQ/REP), exchanges
// one message, and the server reports its side.
const (
	// MsgCMListen (client → server): listen for one rdma_cm connection
	// whose private data starts with Nonce.
	MsgCMListen MsgType = 48
	// MsgCMListening (server → client): where it listens, or why not.
	MsgCMListening MsgType = 49
	// MsgCMResult (server → client): how the server's side went.
	MsgCMResult MsgType = 50
	// MsgCMEchoed (server → client, version 3, when CMListen asked): the
	// echo's SEND completed, so the client's side has acknowledged it
	// and may disconnect.
	MsgCMEchoed MsgType = 51
)

func init() {
	msgNames[MsgCMListen] = "CMListen"
	msgNames[MsgCMListening] = "CMListening"
	msgNames[MsgCMResult] = "CMResult"
	msgNames[MsgCMEchoed] = "CMEchoed"
}

// CMNonceSize is the length of the connection's private-data nonce: within
// the 56 bytes an IB CM REQ carries for the application.
const CMNonceSize = 16

// CMListen asks for an rdma_cm listener. WaitMS bounds the server's wait
// for the connection and each step after it.
type CMListen struct {
	Nonce  []byte `json:"nonce"`
	WaitMS int    `json:"wait_ms"`
	Size   int    `json:"size"`
	// Echoed asks for MsgCMEchoed once the echo's SEND completed.
	Echoed bool `json:"echoed,omitempty"`
}

func (m *CMListen) Validate() error {
	if len(m.Nonce) != CMNonceSize {
		return fmt.Errorf("rdma_cm nonce of %d bytes, want %d", len(m.Nonce), CMNonceSize)
	}
	if m.WaitMS < 0 || m.WaitMS > 600000 || m.Size < 1 || m.Size > 1<<20 {
		return fmt.Errorf("rdma_cm wait %d ms or size %d out of range", m.WaitMS, m.Size)
	}
	return nil
}

// CMListening is where the server's listener is (Addr an IPv4 address of
// the server's RDMA netdev, Port the rdma_cm port), or Error.
type CMListening struct {
	Addr  string `json:"addr,omitempty"`
	Port  int    `json:"port,omitempty"`
	Error string `json:"error,omitempty"`
}

func (m *CMListening) Validate() error {
	if m.Error == "" && (m.Port < 1 || m.Port > 65535 || len(m.Addr) > 64 || m.Addr == "") {
		return fmt.Errorf("rdma_cm listener %q port %d", m.Addr, m.Port)
	}
	return nil
}

// CMResult is the server's side: OK, or the step that failed, its error
// and its cause.
type CMResult struct {
	OK      bool   `json:"ok"`
	Step    string `json:"step,omitempty"`
	Error   string `json:"error,omitempty"`
	Cause   string `json:"cause,omitempty"`
	PathMTU int    `json:"path_mtu,omitempty"`
	Device  string `json:"device,omitempty"`
}

func (m *CMResult) Validate() error { return nil }

// CMEchoed says the server's echo was acknowledged; it carries nothing.
type CMEchoed struct{}

func (m *CMEchoed) Validate() error { return nil }

// StepError is a failed step and its error as one text: "step: error",
// or the error alone when it already starts with the step's verb (a
// verbs error names its verb: "rdma_create_event_channel: ENODEV …"
// under the step "rdma_create_event_channel" is said once, not twice).
func StepError(step, err string) string {
	verb, _, _ := strings.Cut(step, " ")
	switch {
	case step == "":
		return err
	case err == "":
		return step + " failed"
	case err == step || strings.HasPrefix(err, step+": "):
		return err
	case strings.HasPrefix(err, verb+": "):
		return step + ": " + err[len(verb)+2:] // "ibv_modify_qp: EINVAL" under "ibv_modify_qp INIT→RTR"
	}
	return step + ": " + err
}

// Failure is the server's failed step and its error, said once.
func (m *CMResult) Failure() string { return StepError(m.Step, m.Error) }
