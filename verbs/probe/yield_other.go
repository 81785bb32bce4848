//go:build !linux

package probe

import "runtime"

// yieldCPU gives other goroutines a turn; other systems have no software
// RDMA device to share the CPU with.
func yieldCPU() { runtime.Gosched() }

// setThreadsPolicy does nothing: scheduling policies are Linux's.
func setThreadsPolicy(from, to uint32) {}

const (
	policyNormal = 0
	policyBatch  = 3
)
