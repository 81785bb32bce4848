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
// The monitor's thread is in the idle class meanwhile (threadClasses), so
// it looks at the loop only in the time the loop leaves, and always finds
// a yield since its last look.
//
// Each yield with a second P idle wakes a spinning thread for it, so
// yields far apart are cheaper. But the monitor counts its 10 ms in wall
// time, and on one CPU the loop is off it for milliseconds at a time
// (softirqs, the device's work): a yield due every 8 ms came late often
// enough that the monitor took the P and started its fast polling over.
// Every 4 ms leaves 6 ms of slack: the median round trip was shorter than
// with every 8 ms in each of four rounds (1.15–1.59 against 1.33–1.84 ms,
// a host at half speed).
const pollYieldEvery = 4 * time.Millisecond

// pollPacer yields to the Go scheduler at most every pollYieldEvery while
// a data-path loop runs (on), and never outside one: a goroutine locked to
// its thread would hand the thread over instead.
type pollPacer struct {
	on      bool
	last    time.Time
	procs   int // GOMAXPROCS before onePAfterWarmup; 0 while unchanged
	threads threadClasses
}

// yieldAt yields when pollYieldEvery has passed since the last yield; now
// is the caller's clock reading, which the completion wait has anyway.
func (pp *pollPacer) yieldAt(now time.Time) {
	if pp.on && now.Sub(pp.last) >= pollYieldEvery {
		pp.last = now
		runtime.Gosched()
		pp.threads.follow()
	}
}

// onePAfterWarmup drops the process to one P for the rest of the loop,
// once its warm-up is over. With a second P idle, each yield wakes a
// spinning thread for it, which on a one-CPU guest preempts the loop;
// with none, the yield costs no thread switch: the client's context
// switches fell from 1.3–2.3 to 0.3–0.6 per round trip, the median round
// trip shorter in 4 of 6 rounds beside ib_send_lat (equal in one). Only
// after the warm-up: the monitor must have backed off to its slow ticks
// first, or with one P it takes the P away from every post it catches
// twice (ChildMain's two Ps). The server keeps two: switching it after
// 150 ms of echoing changed nothing measurable (1.1–2.4 switches per
// round trip either way).
func (pp *pollPacer) onePAfterWarmup() {
	if pp.on && pp.procs == 0 {
		pp.procs = runtime.GOMAXPROCS(1)
	}
}

// maybeYield is yieldAt with a clock reading of its own.
func (pp *pollPacer) maybeYield() { pp.yieldAt(time.Now()) }

// beginDataPath releases the child's OS-thread lock (ChildMain's) for a
// loop of data-path verbs only — post and poll, which keep no per-thread
// state and read no errno (call3) — starts pacing its yields, and gives
// the loop's thread the batch class and every other thread of the process
// the idle class while it runs (threadClasses). Measured on the VM suite's
// pair beside ib_send_lat, four rounds on a loaded host: the runtime's
// monitor ran 7–31 times during a peer.latency measurement against 177–591
// with the batch class alone (which had it fall back to its fast polling
// 6–46 times), and the median round trip was 0.97× of ib_send_lat's
// against 2.0×. The returned call undoes all of it, taking the lock on
// whichever thread the goroutine is then.
func (pp *pollPacer) beginDataPath() (end func()) {
	runtime.UnlockOSThread()
	*pp = pollPacer{on: true}
	pp.threads.begin()
	pp.last = time.Now()
	return func() {
		if pp.procs > 0 {
			runtime.GOMAXPROCS(pp.procs)
			pp.procs = 0
		}
		pp.threads.end()
		pp.on = false
		runtime.LockOSThread()
	}
}
