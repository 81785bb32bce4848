package checks

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// Level2Case is a level-2 check's run as the findings tests (package
// checks_test) set it up: the probes already done, or never finished, on a
// live host, or a snapshot.
type Level2Case struct {
	Snapshot   bool  // run on a snapshot of a host
	PlanErr    error // the device list could not be read
	Targets    []probe.Target
	Software   map[string]bool
	Skipped    []string
	Results    *probe.Results
	Unfinished bool // the probes never finish: the check's context ends
}

// RunLevel2Case runs level-2 check id on c.
func RunLevel2Case(t *testing.T, id string, c Level2Case) Result {
	t.Helper()
	chk, ok := Lookup(id)
	if !ok {
		t.Fatalf("no check %s", id)
	}
	if c.Snapshot {
		h, err := sysfs.Open(filepath.Join("..", "testdata", "hosts", "rxe-softroce"))
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		r := chk.Run(context.Background(), NewEnv(h, Options{Level: 2}))
		recordResult(id, r)
		return r
	}
	env := NewEnv(sysfs.OpenLive(), Options{Level: 2})
	UseVerbs(env, &fakeVerbs{})
	s := verbsOf(env)
	s.probeStarted, s.probeDone, s.probes = true, make(chan struct{}), c.Results
	s.plan = probePlan{targets: c.Targets, software: c.Software, skipped: c.Skipped, err: c.PlanErr}
	if c.Software == nil {
		s.plan.software = map[string]bool{}
	}
	ctx := context.Background()
	if c.Unfinished {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		ctx = cctx
	} else {
		close(s.probeDone)
	}
	r := chk.Run(ctx, env)
	recordResult(id, r)
	return r
}

// RecordedPort is a port result recorded from a real run on rxe0.
func RecordedPort(t *testing.T, file string) *probe.PortResult { return recordedPort(t, file) }

// ProbeOf is the result of probe id in pr (nil when pr has none).
func ProbeOf(pr *probe.PortResult, id string) *probe.Probe {
	switch {
	case id == probe.Resources && pr.Resources != nil:
		return &pr.Resources.Probe
	case id == probe.QPState && pr.QPState != nil:
		return &pr.QPState.Probe
	case id == probe.SendPoll && pr.SendPoll != nil:
		return &pr.SendPoll.Probe
	case id == probe.CQOverflow && pr.CQOverflow != nil:
		return &pr.CQOverflow.Probe
	case id == probe.DestroyOrder && pr.DestroyOrder != nil:
		return &pr.DestroyOrder.Probe
	case id == probe.UD && pr.UD != nil:
		return &pr.UD.Probe
	case id == probe.GPUMemory && pr.GPUMemory != nil:
		return &pr.GPUMemory.Probe
	}
	return nil
}

// GPUResult is a probe.gpu_memory result with the paths given (gpuResult).
func GPUResult(paths ...probe.GPUPath) *probe.GPUMemoryResult { return gpuResult(paths...) }
