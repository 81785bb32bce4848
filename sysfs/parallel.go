package sysfs

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// parallel runs fn(0..n-1) on a few goroutines. Reading a thousand devices
// is a few hundred thousand small syscalls; spreading them over the CPUs
// divides the wall time, and the results keep their order by index. Each
// worker takes the next index from a shared counter rather than a channel:
// a 1,024-entry GID table is then 1,024 atomic adds instead of 1,024
// hand-offs between goroutines, each of which may wake a parked thread.
func parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0)*2, n, 16)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var (
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		}()
	}
	wg.Wait()
}
