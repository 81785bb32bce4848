//go:build linux

package probe

import (
	"os"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// threadPolicies maps each thread of this process to its policy and nice.
func threadPolicies(t *testing.T) map[int][2]int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][2]int{}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		attr, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // the thread exited
		}
		out[tid] = [2]int{int(attr.Policy), int(attr.Nice)}
	}
	return out
}

// The data-path loop's threads go to the batch class and back, each
// keeping its nice value; a thread in another class is left alone.
func TestSetThreadsPolicyRoundTrip(t *testing.T) {
	// Never unlocked: the thread, reniced and reclassed, ends with the
	// test rather than return to the runtime's pool.
	runtime.LockOSThread()
	if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 5); err != nil {
		t.Skipf("cannot renice this thread: %v", err)
	}
	defer unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 0)
	setThreadsPolicy(policyNormal, policyBatch)
	for tid, pn := range threadPolicies(t) {
		if pn[0] != policyBatch {
			t.Errorf("thread %d: policy %d after the switch, want SCHED_BATCH", tid, pn[0])
		}
	}
	setThreadsPolicy(policyBatch, policyNormal)
	after := threadPolicies(t)
	for tid, pn := range after {
		if pn[0] != policyNormal {
			t.Errorf("thread %d: policy %d after the switch back, want SCHED_NORMAL", tid, pn[0])
		}
	}
	if pn := after[unix.Gettid()]; pn[1] != 5 {
		t.Errorf("this thread's nice is %d after the round trip, want 5", pn[1])
	}
	// A thread in neither class is not touched.
	idle := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
	if err := unix.SchedSetAttr(unix.Gettid(), idle, 0); err != nil {
		t.Fatalf("SCHED_IDLE: %v", err)
	}
	defer unix.SchedSetAttr(unix.Gettid(), &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: policyNormal}, 0)
	setThreadsPolicy(policyNormal, policyBatch)
	defer setThreadsPolicy(policyBatch, policyNormal)
	if pn := threadPolicies(t)[unix.Gettid()]; pn[0] != unix.SCHED_IDLE {
		t.Errorf("a SCHED_IDLE thread was moved to policy %d", pn[0])
	}
}
