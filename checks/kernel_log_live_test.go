package checks_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report/state"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// TestKernelLogLiveMark reads this host's ring: a watchdog line written to
// /dev/kmsg after a run is found by the next run with the same state, and
// not by the run after it (root only: /dev/kmsg takes writes from root).
// The line names a netdev that does not exist, so it is only noted.
func TestKernelLogLiveMark(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("writing a line into the kernel log needs root")
	}
	w, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no writable /dev/kmsg: %v", err)
	}
	defer w.Close()
	b := make([]byte, 4)
	rand.Read(b)
	ifname := "rdt" + hex.EncodeToString(b)
	st := state.New("live")
	run := func() checks.Result {
		h := sysfs.OpenLive()
		c, _ := checks.Lookup("kernel.log")
		r := c.Run(context.Background(), checks.NewEnv(h, checks.Options{Level: 1, State: st}))
		checks.RecordResult("kernel.log", r)
		return r
	}
	found := func(r checks.Result) bool {
		for _, f := range r.Findings {
			if f.Unit == ifname {
				return true
			}
		}
		return false
	}
	first := run()
	if st.KernelLog == nil || st.KernelLog.Mark == nil {
		t.Skipf("the ring was not read through /dev/kmsg: %s", first.Summary)
	}
	if _, err := w.Write([]byte("<4>NETDEV WATCHDOG: " + ifname + " (dummy): transmit queue 0 timed out 5120 ms\n")); err != nil {
		t.Fatal(err)
	}
	if r := run(); !found(r) {
		t.Fatalf("the next run did not find the line naming %s: %s\n%v", ifname, r.Summary, r.Details)
	}
	if r := run(); found(r) {
		t.Fatalf("the run after found it again: %s", r.Summary)
	}
}
