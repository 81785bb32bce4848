//go:build linux

package probe

import (
	"os"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// threadPolicies maps each thread of this process to its policy and nice.
func threadPolicies(t *testing.T) map[int][2]int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][2]int{}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		attr, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // the thread exited
		}
		out[tid] = [2]int{int(attr.Policy), int(attr.Nice)}
	}
	return out
}

// lockedThread is a goroutine locked to a thread of its own (never given
// back: it ends with the test), running what it is sent.
type lockedThread struct {
	tid   int
	run   chan func()
	ready chan int
}

// do runs fn on the thread and waits for it.
func (lt *lockedThread) do(fn func()) {
	lt.run <- fn
	<-lt.ready
}

func newLockedThread(t *testing.T) *lockedThread {
	lt := &lockedThread{run: make(chan func())}
	ready := make(chan int)
	go func() {
		runtime.LockOSThread()
		ready <- unix.Gettid()
		for fn := range lt.run {
			fn()
			ready <- 0
		}
	}()
	lt.tid = <-ready
	lt.ready = ready
	t.Cleanup(func() { close(lt.run) })
	return lt
}

// The loop's thread goes to the batch class and every other one to the
// idle class, keeping their nice values; when the loop's goroutine moves
// to another thread the classes follow it; at the end every thread is
// back in the normal class, and a thread somebody put in another class
// is never touched.
func TestThreadClassesFollowTheLoopAndComeBack(t *testing.T) {
	// Never unlocked: the thread, reniced and reclassed, ends with the
	// test rather than return to the runtime's pool.
	runtime.LockOSThread()
	me := unix.Gettid()
	if err := unix.Setpriority(unix.PRIO_PROCESS, me, 5); err != nil {
		t.Skipf("cannot renice this thread: %v", err)
	}
	defer unix.Setpriority(unix.PRIO_PROCESS, me, 0)
	other, chosen := newLockedThread(t), newLockedThread(t)
	chosenAttr := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
	if err := unix.SchedSetAttr(chosen.tid, chosenAttr, 0); err != nil {
		t.Fatalf("SCHED_IDLE: %v", err)
	}
	want := func(when string, classes map[int]int) {
		t.Helper()
		got := threadPolicies(t)
		for tid, class := range classes {
			if got[tid][0] != class {
				t.Errorf("%s: thread %d in class %d, want %d", when, tid, got[tid][0], class)
			}
		}
		if got[me][1] != 5 {
			t.Errorf("%s: the loop thread's nice is %d, want 5", when, got[me][1])
		}
	}
	// Threads somebody put in another class before the loop (chosen, and a
	// chosen of an earlier run of this test whose thread has not exited
	// yet) stay in it.
	before := threadPolicies(t)
	var tc threadClasses
	tc.begin()
	want("begun", map[int]int{me: policyBatch, other.tid: policyIdle, chosen.tid: policyIdle})
	for tid, pn := range threadPolicies(t) {
		if tid != me && pn[0] != policyIdle {
			t.Errorf("begun: runtime thread %d in class %d, want SCHED_IDLE", tid, pn[0])
		}
	}
	other.do(tc.follow)
	want("moved", map[int]int{me: policyIdle, other.tid: policyBatch, chosen.tid: policyIdle})
	tc.end()
	after := threadPolicies(t)
	for tid, pn := range after {
		if pb, ok := before[tid]; ok && pb[0] != policyNormal {
			continue
		}
		if pn[0] != policyNormal {
			t.Errorf("ended: thread %d in class %d, want SCHED_NORMAL", tid, pn[0])
		}
	}
	want("ended", map[int]int{me: policyNormal, chosen.tid: policyIdle})
	// A thread started during the loop is in its creator's class: it goes
	// back to the class the loop thread had.
	if tc.was(1<<30) != policyNormal {
		t.Errorf("an unknown thread would go back to class %d", tc.was(1<<30))
	}
}
