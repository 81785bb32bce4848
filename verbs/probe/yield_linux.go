//go:build linux

package probe

import (
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// yieldCPU lets the kernel run something else for a moment (sched_yield):
// the software device's own work, or the peer's poller on the same CPUs.
// The poller stays runnable, so a completion is seen at once.
func yieldCPU() { _, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }

// The classes a data-path loop puts this process's threads in. The loop's
// own thread goes to SCHED_BATCH: it is CPU-bound, and the kernel's work
// (softirqs, the software device's tasks) still preempts it. Every other
// thread — the Go runtime's monitor, the threads a yield wakes for an idle
// P — goes to SCHED_IDLE: it never preempts the loop when it wakes and
// runs in what time the loop leaves, so the monitor, which would wake
// every 20 µs to 10 ms, runs at the kernel's tick at most and always sees
// the loop's yields between two of its looks (it then never preempts the
// loop, takes its P, or falls back to its fast polling). The price: on a
// host whose CPUs are all busy, a runtime thread waits longer for one; the
// loop allocates nothing and needs none of them between its yields, and
// the classes last only as long as the loop.
const (
	policyNormal = unix.SCHED_NORMAL
	policyBatch  = unix.SCHED_BATCH
	policyIdle   = unix.SCHED_IDLE
)

// eachThread calls fn with each thread of this process and its attributes;
// a thread that exits meanwhile is skipped.
func eachThread(fn func(tid int, attr *unix.SchedAttr)) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if attr, err := unix.SchedGetAttr(tid, 0); err == nil {
			fn(tid, attr)
		}
	}
}

// threadClasses sets and restores the loop's classes. It is a hint, and
// best effort: a thread that cannot be changed (a sandbox that forbids
// sched_setattr) keeps its class and the probe runs as before.
type threadClasses struct {
	found   map[int]uint32 // each thread's policy when the loop began
	initial uint32         // the loop thread's then, for threads started since
	loop    int            // the thread the loop runs on
}

// begin records every thread's class and applies the loop's, with the
// calling thread as the loop's. Only the first pass records classes: a
// thread first seen in a later pass was started during the one before, and
// its class is its starter's, perhaps one begin had just set; it counts as
// started since, in the loop thread's class before (was).
func (tc *threadClasses) begin() {
	tc.found, tc.loop, tc.initial = map[int]uint32{}, unix.Gettid(), policyNormal
	seen := map[int]bool{}
	inPasses(func(pass, tid int, attr *unix.SchedAttr) bool {
		if seen[tid] {
			return false
		}
		seen[tid] = true
		if pass == 0 {
			tc.found[tid] = attr.Policy
			if tid == tc.loop {
				tc.initial = attr.Policy
			}
		}
		tc.place(tid, attr)
		return true
	})
}

// inPasses calls fn on every thread, pass after pass, until a pass in
// which fn reports no thread it had to act on (a few passes at most). A
// thread the runtime starts during a pass is started by one the pass may
// not have reached, so it has that thread's old class, and the listing the
// pass walks was read before it existed; once a pass finds nothing to do, a
// thread started later inherits a class already set.
func inPasses(fn func(pass, tid int, attr *unix.SchedAttr) bool) {
	for pass := range maxClassPasses {
		acted := false
		eachThread(func(tid int, attr *unix.SchedAttr) {
			if fn(pass, tid, attr) {
				acted = true
			}
		})
		if !acted {
			return
		}
	}
}

// maxClassPasses bounds inPasses.
const maxClassPasses = 4

// was is a thread's class before the loop.
func (tc *threadClasses) was(tid int) uint32 {
	if p, ok := tc.found[tid]; ok {
		return p
	}
	return tc.initial
}

// place puts the loop's thread in the batch class and any other in the
// idle class; a thread that was not in the normal class (somebody's
// choice) is left alone.
func (tc *threadClasses) place(tid int, attr *unix.SchedAttr) {
	if tc.was(tid) != policyNormal {
		return
	}
	want := uint32(policyIdle)
	if tid == tc.loop {
		want = policyBatch
	}
	setPolicy(tid, attr, want)
}

// follow re-applies the classes when the loop's goroutine has moved to
// another thread (it is not locked to one; see beginDataPath).
func (tc *threadClasses) follow() {
	if tid := unix.Gettid(); tid != tc.loop {
		tc.loop = tid
		eachThread(tc.place)
	}
}

// end puts every thread the loop's classes touched back in its class,
// threads started during the loop (which inherit their creator's) in the
// loop thread's.
func (tc *threadClasses) end() {
	inPasses(func(_, tid int, attr *unix.SchedAttr) bool {
		if was := tc.was(tid); was == policyNormal && attr.Policy != was {
			setPolicy(tid, attr, was)
			return true
		}
		return false
	})
	tc.found = nil
}

// setPolicy moves a thread to policy, keeping its nice value and flags.
func setPolicy(tid int, attr *unix.SchedAttr, policy uint32) {
	if attr.Policy == policy {
		return
	}
	attr.Policy = policy
	_ = unix.SchedSetAttr(tid, attr, 0)
}
