package sysfs

import (
	"runtime"
	"sync"
)

// parallel runs fn(0..n-1) on a few goroutines. Reading a thousand devices
// is a few hundred thousand small syscalls; spreading them over the CPUs
// divides the wall time, and the results keep their order by index.
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
		next = make(chan int)
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}
