//go:build !linux

package probe

import "runtime"

// yieldCPU gives other goroutines a turn; other systems have no software
// RDMA device to share the CPU with.
func yieldCPU() { runtime.Gosched() }

// threadClasses does nothing: scheduling classes are Linux's.
type threadClasses struct{}

func (*threadClasses) begin()  {}
func (*threadClasses) follow() {}
func (*threadClasses) end()    {}
