package probe

import (
	"runtime"
	"time"
)

// A busy-poll loop and the Go runtime. The loop never blocks, so its
// goroutine is never rescheduled; after 10 ms (forcePreemptNS) the
// runtime's monitor treats it as running too long and, catching it inside
// a verb call, takes its P away, then falls back to waking every 20 µs.
// Each wake is a timer interrupt in the guest, and under emulation a timer
// costs the RDMA path itself: a background process sleeping 1 ms in a loop
// made ib_send_lat's round trip 2.9× longer between the VM suite's two
// guests. The ping-pong loops therefore run unlocked from their OS thread
// and yield to the Go scheduler every pollYieldEvery — in the wait for a
// completion too — so the monitor sees progress and sleeps (median round
// trip on the pair 1.07 ms against 1.59 ms without). A locked goroutine's
// yield would hand its thread over and back instead (1.41 ms measured).
//
// Each yield costs a thread wake-up of its own (the runtime starts a
// spinning thread for the idle second P), which on a one-CPU guest
// preempts the loop: so the yields are as rare as the monitor allows,
// every 8 ms, under its 10 ms. Against every 2 ms (with the yields inside
// completion waits in both): 0.18 against 0.45 yields per round trip, and
// the median round trip shorter in each of four rounds beside ib_send_lat
// (1.25–1.47× its figure against 1.42–2.07×).
const pollYieldEvery = 8 * time.Millisecond

// pollPacer yields to the Go scheduler at most every pollYieldEvery while
// a data-path loop runs (on), and never outside one: a goroutine locked to
// its thread would hand the thread over instead.
type pollPacer struct {
	on   bool
	last time.Time
}

// yieldAt yields when pollYieldEvery has passed since the last yield; now
// is the caller's clock reading, which the completion wait has anyway.
func (pp *pollPacer) yieldAt(now time.Time) {
	if pp.on && now.Sub(pp.last) >= pollYieldEvery {
		pp.last = now
		runtime.Gosched()
	}
}

// maybeYield is yieldAt with a clock reading of its own.
func (pp *pollPacer) maybeYield() { pp.yieldAt(time.Now()) }

// beginDataPath releases the child's OS-thread lock (ChildMain's) for a
// loop of data-path verbs only — post and poll, which keep no per-thread
// state and read no errno (call3) — and starts pacing its yields. The
// returned call stops the pacing and takes the lock again, on whichever
// thread the goroutine is then.
func (pp *pollPacer) beginDataPath() (end func()) {
	runtime.UnlockOSThread()
	*pp = pollPacer{on: true, last: time.Now()}
	return func() {
		pp.on = false
		runtime.LockOSThread()
	}
}
