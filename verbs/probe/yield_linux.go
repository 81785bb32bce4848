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

// setThreadsPolicy moves every thread of this process whose scheduling
// policy is from to policy to, keeping its nice value and flags. It is a
// hint, and best effort: a thread that cannot be changed (a sandbox that
// forbids sched_setattr) keeps its policy and the probe runs as before.
func setThreadsPolicy(from, to uint32) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		attr, err := unix.SchedGetAttr(tid, 0)
		if err != nil || attr.Policy != from {
			continue
		}
		attr.Policy = to
		_ = unix.SchedSetAttr(tid, attr, 0)
	}
}

// The ping-pong's policy: SCHED_BATCH says a thread is CPU-bound, and the
// kernel then lets it run on when another thread of the batch class wakes
// (the Go runtime's monitor, the thread a yield wakes) instead of
// preempting it at once; the kernel's own work (softirqs, the software
// device's tasks) still preempts it.
const (
	policyNormal = unix.SCHED_NORMAL
	policyBatch  = unix.SCHED_BATCH
)
