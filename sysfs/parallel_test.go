package sysfs

import (
	"sync/atomic"
	"testing"
)

// TestParallelRunsEachIndexOnce: every index from 0 to n-1 exactly once,
// whatever the number of workers.
func TestParallelRunsEachIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 1024} {
		seen := make([]atomic.Int32, n)
		parallel(n, func(i int) { seen[i].Add(1) })
		for i := range seen {
			if got := seen[i].Load(); got != 1 {
				t.Errorf("n=%d: index %d ran %d times, want once", n, i, got)
			}
		}
	}
}

func BenchmarkParallelGIDTable(b *testing.B) {
	var sink atomic.Int64
	for b.Loop() {
		parallel(1024, func(i int) { sink.Add(int64(i)) })
	}
}
