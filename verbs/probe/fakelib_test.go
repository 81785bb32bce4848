package probe

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs/probe/fakeverbs"
)

// The real ChildMain and the real binding, against a fake libibverbs built
// from testdata/fakeibverbs.c that hangs, crashes or fails on demand.

func fakeLibrary(t *testing.T) string {
	t.Helper()
	return fakeverbs.Library(t)
}

func withFake(t *testing.T, mode string) string {
	lib := fakeLibrary(t)
	t.Setenv(behaviourEnv, "")
	t.Setenv("FAKE_IBV", mode)
	return lib
}

func TestFakeEnumerateENOSYS(t *testing.T) {
	lib := withFake(t, "enosys")
	en, err := Enumerate(context.Background(), testExe(t), lib, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if en.ListErrnoName != "ENOSYS" || en.ListErrno != 38 || len(en.Devices) != 0 {
		t.Fatalf("enumeration %+v", en)
	}
}

func TestFakeEnumerateDevices(t *testing.T) {
	lib := withFake(t, "two")
	en, err := Enumerate(context.Background(), testExe(t), lib, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(en.Devices) != 2 || en.Devices[0].Name != "mlx5_0" || en.Devices[0].NodeGUID != "0002:c903:00a1:b2c3" ||
		en.Devices[1].UverbsDev != "uverbs1" {
		t.Fatalf("devices %+v", en.Devices)
	}
	if len(en.Warnings) != 1 || !strings.Contains(en.Warnings[0], "couldn't load driver") {
		t.Fatalf("warnings %q", en.Warnings)
	}
	if en.LoadedFrom != lib {
		t.Fatalf("loaded from %q, want %q", en.LoadedFrom, lib)
	}
}

func TestFakeEnumerateHangIsCut(t *testing.T) {
	lib := withFake(t, "hang-list")
	t0 := time.Now()
	_, err := Enumerate(context.Background(), testExe(t), lib, 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "in ibv_get_device_list") || time.Since(t0) > 3*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(t0))
	}
}

func TestFakeEnumerateCrash(t *testing.T) {
	lib := withFake(t, "segv-list")
	_, err := Enumerate(context.Background(), testExe(t), lib, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "crashed with SIGSEGV in ibv_get_device_list") {
		t.Fatalf("err %v", err)
	}
}

func TestFakeProbeOpenEACCES(t *testing.T) {
	lib := withFake(t, "eacces-open")
	res := Run(context.Background(), testExe(t), []Target{{Device: "fake0", Ports: []int{1}}}, Options{Library: lib})
	d := res.Devices["fake0"]
	if d.Failure != nil {
		t.Fatalf("failure %+v", d.Failure)
	}
	pr := d.Port(1)
	st := pr.Resources.Failed()
	if st == nil || st.Name != "ibv_open_device" || st.ErrnoName != "EACCES" || !strings.Contains(st.Cause, "/dev/infiniband/uverbs0") {
		t.Fatalf("resources step %+v", st)
	}
	for name, p := range map[string]*Probe{QPState: &pr.QPState.Probe, SendPoll: &pr.SendPoll.Probe,
		CQOverflow: &pr.CQOverflow.Probe, DestroyOrder: &pr.DestroyOrder.Probe} {
		if !strings.HasPrefix(p.Skipped, "blocked by verbs.resources: ibv_open_device") {
			t.Errorf("%s: skipped %q", name, p.Skipped)
		}
	}
}

func TestFakeProbeHangInVerbIsCut(t *testing.T) {
	lib := withFake(t, "hang-open")
	t0 := time.Now()
	res := Run(context.Background(), testExe(t), []Target{{Device: "fake0", Ports: []int{1}}},
		Options{Library: lib, Timeout: 500 * time.Millisecond})
	f := res.Devices["fake0"].Failure
	if f == nil || !f.TimedOut || f.InProgress != "port 1 verbs.resources: ibv_open_device" {
		t.Fatalf("failure %+v", f)
	}
	if d := time.Since(t0); d > 500*time.Millisecond+startupMargin+2*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestFakeProbeUnknownDevice(t *testing.T) {
	lib := withFake(t, "two")
	res := Run(context.Background(), testExe(t), []Target{{Device: "mlx5_9", Ports: []int{1}}}, Options{Library: lib})
	st := res.Devices["mlx5_9"].Port(1).Resources.Failed()
	if st == nil || st.Name != "ibv_get_device_list" || !strings.Contains(st.Error, "mlx5_0, mlx5_1") {
		t.Fatalf("step %+v", st)
	}
}

func TestProbeWithoutLibrary(t *testing.T) {
	t.Setenv(behaviourEnv, "")
	path := filepath.Join(t.TempDir(), "libibverbs.so.1")
	res := Run(context.Background(), testExe(t), []Target{{Device: "mlx5_0", Ports: []int{1}}}, Options{Library: path})
	st := res.Devices["mlx5_0"].Port(1).Resources.Failed()
	if st == nil || st.Name != "dlopen "+path || !strings.Contains(st.Error, "No such file") {
		t.Fatalf("step %+v", st)
	}
}

// runLoop probes fake0 through the fake library's loopback device in mode.
func runLoop(t *testing.T, mode string, opts Options) (*DeviceResult, *PortResult) {
	t.Helper()
	opts.Library = withFake(t, mode)
	opts.SysfsRoot = t.TempDir()
	res := Run(context.Background(), testExe(t), []Target{{Device: "fake0", Ports: []int{1}}}, opts)
	d := res.Devices["fake0"]
	pr := d.Port(1)
	if pr == nil {
		t.Fatalf("no port 1 result: %+v", d)
	}
	return d, pr
}

func TestFakeLoopHealthy(t *testing.T) {
	d, pr := runLoop(t, "loop", Options{})
	if d.Failure != nil {
		t.Fatalf("failure %+v\n%s", d.Failure, d.Stderr)
	}
	for _, p := range []*Probe{&pr.Resources.Probe, &pr.QPState.Probe, &pr.SendPoll.Probe, &pr.CQOverflow.Probe, &pr.DestroyOrder.Probe, &pr.UD.Probe} {
		if !p.OK() {
			t.Errorf("%s: skipped %q, failed %+v", p.Name, p.Skipped, p.Failed())
		}
	}
	t.Logf("%+v", pr.CQOverflow)
	t.Logf("%+v", pr.DestroyOrder)
}

// iWARP RC QPs connect only through rdma_cm: the probes that connect QPs
// with ibv_modify_qp are skipped, saying so, while verbs.resources runs.
func TestFakeIWARPSkipsConnectedProbes(t *testing.T) {
	d, pr := runLoop(t, "iwarp", Options{})
	if d.Failure != nil {
		t.Fatalf("failure %+v", d.Failure)
	}
	if !pr.Resources.OK() {
		t.Fatalf("verbs.resources on iWARP: %+v", pr.Resources.Failed())
	}
	for _, p := range []*Probe{&pr.QPState.Probe, &pr.SendPoll.Probe, &pr.CQOverflow.Probe, &pr.DestroyOrder.Probe} {
		if p.Skipped != iwarpSkip || p.Failed() != nil {
			t.Errorf("%s: skipped %q, failed %+v", p.Name, p.Skipped, p.Failed())
		}
	}
	if pr.UD.Skipped != iwarpNoUD || len(pr.UD.Steps) != 0 {
		t.Errorf("probe.ud on iWARP: skipped %q, steps %+v", pr.UD.Skipped, pr.UD.Steps)
	}
}

// A SEND that completed in error delivers nothing: the probe does not
// wait for a receive completion that cannot come.
func TestFakeSendErrorSkipsReceiveWait(t *testing.T) {
	_, pr := runLoop(t, "send-err", Options{Timeout: 5 * time.Second})
	sp := pr.SendPoll
	st := sp.Failed()
	if st == nil || st.Name != "send completion IBV_WC_SUCCESS" || !strings.Contains(st.Error, "IBV_WC_RETRY_EXC_ERR") {
		t.Fatalf("failed step %+v", st)
	}
	if sp.SendStatus != "IBV_WC_RETRY_EXC_ERR" || sp.Millis > 1000 {
		t.Fatalf("send status %q after %.0f ms", sp.SendStatus, sp.Millis)
	}
}

// Once a port's deadline has passed, the probes left are not run, and
// each says why; the child finishes instead of being killed.
func TestFakeDeadlineSkipsRemainingProbes(t *testing.T) {
	t0 := time.Now()
	d, pr := runLoop(t, "silent", Options{Timeout: time.Second})
	if d.Failure != nil {
		t.Fatalf("failure %+v", d.Failure)
	}
	if st := pr.SendPoll.Failed(); st == nil || !strings.Contains(st.Error, "no completion") {
		t.Fatalf("send_poll step %+v", st)
	}
	for _, p := range []*Probe{&pr.CQOverflow.Probe, &pr.DestroyOrder.Probe} {
		if !p.OutOfTime || !strings.Contains(p.Skipped, "deadline") || !strings.Contains(p.Skipped, "1s") {
			t.Errorf("%s: out of time %v, skipped %q", p.Name, p.OutOfTime, p.Skipped)
		}
	}
	if el := time.Since(t0); el > 2500*time.Millisecond {
		t.Fatalf("a 1s port deadline took %v", el)
	}
}

// pollWait never waits past the port's deadline.
func TestPollWaitHonoursDeadline(t *testing.T) {
	r := &runner{deadline: time.Now().Add(-time.Second)}
	if w := r.pollWait(); w != 0 {
		t.Fatalf("pollWait after the deadline = %v", w)
	}
	r.deadline = time.Now().Add(30 * time.Millisecond)
	if w := r.pollWait(); w > 30*time.Millisecond || w <= 0 {
		t.Fatalf("pollWait 30ms before the deadline = %v", w)
	}
	r.deadline = time.Now().Add(time.Minute)
	if w := r.pollWait(); w != 2*time.Second {
		t.Fatalf("pollWait a minute before the deadline = %v", w)
	}
}

// When the CQ_ERR came and nothing more arrives (the provider flushed the
// rest), the overflow probe stops waiting instead of sitting out its
// whole window.
func TestFakeCQOverflowEndsWhenSettled(t *testing.T) {
	_, pr := runLoop(t, "cq-err-partial", Options{Timeout: 5 * time.Second})
	c := pr.CQOverflow
	if !c.OK() || c.CQErrOnCQ == 0 {
		t.Fatalf("cq_overflow %+v", c.Failed())
	}
	if c.WaitedMS > 1000 {
		t.Fatalf("waited %.0f ms after IBV_EVENT_CQ_ERR with nothing more to come", c.WaitedMS)
	}
}

// A provider that grants far more than the one entry asked is not
// overrun with thousands of SENDs: the probe caps them and says the CQ
// could not be overrun.
func TestFakeCQOverflowCapsSends(t *testing.T) {
	d, pr := runLoop(t, "cq-page", Options{})
	if d.Failure != nil {
		t.Fatalf("failure %+v\n%s", d.Failure, d.Stderr)
	}
	c := pr.CQOverflow
	st := c.Failed()
	if c.CQEGranted != 4096 || c.SendsPosted > maxOverflowSends || st == nil || st.Name != "IBV_EVENT_CQ_ERR for the overrun CQ" ||
		!strings.Contains(st.Error, "4096") {
		t.Fatalf("granted %d, posted %d, step %+v", c.CQEGranted, c.SendsPosted, st)
	}
}

// mlx5's poll returns -2 for a CQ in error: that is reported as the raw
// return, not as ENOENT.
func TestFakePollNegativeIsRaw(t *testing.T) {
	_, pr := runLoop(t, "poll-neg", Options{})
	st := pr.SendPoll.Failed()
	if st == nil || !strings.HasPrefix(st.Name, "ibv_poll_cq") || st.ErrnoName != "" || st.Errno != 0 ||
		!strings.Contains(st.Error, "returned -2") {
		t.Fatalf("poll step %+v", st)
	}
}
