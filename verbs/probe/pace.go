package probe

import (
	"runtime"
	"time"
)

// A busy-poll loop and the Go runtime. The loop never blocks, so its
// goroutine is never rescheduled; after 10 ms the runtime's monitor treats
// it as running too long and, catching it inside a verb call, takes its P
// away, then falls back to waking every 20 µs. Each wake is a timer
// interrupt in the guest, and under emulation a timer costs the RDMA path
// itself: a background process sleeping 1 ms in a loop made ib_send_lat's
// round trip 2.9× longer between the VM suite's two guests. The ping-pong
// loops therefore run unlocked from their OS thread and yield to the Go
// scheduler every pollYieldEvery, so the monitor sees progress and sleeps
// (median round trip on the pair 1.07 ms against 1.59 ms without, over
// five rounds beside ib_send_lat's 0.97 ms). A locked goroutine's yield
// would hand its thread over and back instead (1.41 ms measured). Every
// 8 ms and every 0.5 ms were both slower than every 2 ms (medians 2.94 and
// 2.33 ms against 2.25 ms, one boot of a host at half speed).
const pollYieldEvery = 2 * time.Millisecond

// pollPacer yields to the Go scheduler at most every pollYieldEvery.
type pollPacer struct{ last time.Time }

func (pp *pollPacer) maybeYield() {
	if now := time.Now(); now.Sub(pp.last) >= pollYieldEvery {
		pp.last = now
		runtime.Gosched()
	}
}

// unlockForDataPath releases the child's OS-thread lock (ChildMain's) for
// a loop of data-path verbs only — post and poll, which keep no per-thread
// state and read no errno (callFast) — and returns the call that takes the
// lock again, on whichever thread the goroutine is then.
func unlockForDataPath() (relock func()) {
	runtime.UnlockOSThread()
	return runtime.LockOSThread
}
