package probe

import (
	"strings"
	"syscall"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// The server's listener error (what the client reports as ListenError)
// names the failed verb once: its step and its verbs error both name it.
func TestFailedTextNamesTheVerbOnce(t *testing.T) {
	err := &verbs.Error{Verb: "rdma_create_event_channel", Errno: syscall.ENODEV}
	p := Probe{Name: RDMACM, Steps: []Step{{Name: "rdma_create_event_channel", Error: err.Error(), Cause: "rdma_ucm is not loaded"}}}
	got := failedText(&p)
	if n := strings.Count(got, "rdma_create_event_channel"); n != 1 || !strings.Contains(got, "ENODEV") || !strings.HasSuffix(got, "(rdma_ucm is not loaded)") {
		t.Errorf("failedText = %q: want the verb once, the errno and the cause", got)
	}
}
