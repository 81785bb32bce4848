package main

import (
	"context"
	"time"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
)

// A read of the host can block for good: a sysfs attribute whose driver
// waits on wedged firmware, a FIFO planted in a fixture. checks.Run cuts
// the checks at the run's deadline; what the command reads around them —
// the survey that sizes the check deadline, the inventory the report
// carries — is cut here, or the run would outlive --timeout and, stuck
// behind the survey, ignore SIGTERM too.

// pastDeadline is how long a read is still awaited once the run has ended:
// enough to build the inventory from a survey the checks already took; small
// enough that `npd --run` (4s) still answers within node-problem-detector's
// 5s plugin timeout.
const pastDeadline = 250 * time.Millisecond

// within runs read and returns its result, or false when ctx ends and the
// read has not returned pastDeadline later. A read left blocked ends with
// the process.
func within[T any](ctx context.Context, read func() T) (T, bool) {
	done := make(chan T, 1)
	go func() { done <- read() }()
	select {
	case v := <-done:
		return v, true
	case <-ctx.Done():
	}
	timer := time.NewTimer(pastDeadline)
	defer timer.Stop()
	select {
	case v := <-done:
		return v, true
	case <-timer.C:
		var zero T
		return zero, false
	}
}

// inventoryWithin is the report's inventory, or an empty one when reading
// it would outlast the run.
func inventoryWithin(ctx context.Context, env *checks.Env) report.Inventory {
	if inv, ok := within(ctx, func() report.Inventory { return checks.Inventory(env) }); ok {
		return inv
	}
	return report.NewInventory()
}
