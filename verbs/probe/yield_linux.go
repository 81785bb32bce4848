//go:build linux

package probe

import "syscall"

// yieldCPU lets the kernel run something else for a moment (sched_yield):
// the software device's own work, or the peer's poller on the same CPUs.
// The poller stays runnable, so a completion is seen at once.
func yieldCPU() { _, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
