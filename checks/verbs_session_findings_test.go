package checks_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// level2InFindings are the level-2 checks written in findings: each has
// the frame's findings under its own ID.
var level2InFindings = []string{"verbs.resources", "verbs.qp_state", "probe.send_poll", "probe.cq_overflow", "probe.destroy_order", "probe.ud", "probe.gpu_memory"}

// level2One is one probed port, mlx5_0 port 1, with its result.
func level2One(pr *probe.PortResult, dr *probe.DeviceResult) checks.Level2Case {
	if dr == nil {
		dr = &probe.DeviceResult{Device: "mlx5_0"}
	}
	if pr != nil {
		pr.Port = 1
		dr.Ports = append(dr.Ports, *pr)
	}
	return checks.Level2Case{Targets: []probe.Target{{Device: "mlx5_0", Ports: []int{1}}},
		Results: &probe.Results{Devices: map[string]*probe.DeviceResult{"mlx5_0": dr}}}
}

// TestLevel2FrameFindings: what the frame of every level-2 check finds —
// the host cannot be probed, the child said nothing or died, the probe was
// left out — comes under the check's own ID.
func TestLevel2FrameFindings(t *testing.T) {
	died := func(f probe.ChildFailure) checks.Level2Case {
		return level2One(nil, &probe.DeviceResult{Device: "mlx5_0", Failure: &f, Stderr: "x"})
	}
	for _, id := range level2InFindings {
		in, before := "port 1 "+id+": a verb", "port 1 other.probe: a verb"
		gpuIn, gpuBefore := "port 1 "+id+": open the GPU driver", "port 1 other.probe: open the GPU driver"
		skipped := func(outOfTime bool) checks.Level2Case {
			pr := checks.RecordedPort(t, "rxe0-level2.json")
			if id == probe.GPUMemory {
				pr.GPUMemory = &probe.GPUMemoryResult{}
			}
			p := checks.ProbeOf(pr, id)
			p.Skipped, p.OutOfTime = "not run here", outOfTime
			return level2One(pr, nil)
		}
		for _, tc := range []struct {
			slug string
			c    checks.Level2Case
			unit string
		}{
			{"snapshot", checks.Level2Case{Snapshot: true}, ""},
			{"devices-unreadable", checks.Level2Case{PlanErr: errors.New("boom")}, ""},
			{"no-active-port", checks.Level2Case{Skipped: []string{"mlx5_0 port 1: DOWN, not probed"}}, ""},
			{"unfinished", checks.Level2Case{Targets: []probe.Target{{Device: "mlx5_0", Ports: []int{1}}}, Unfinished: true}, ""},
			{"child-silent", checks.Level2Case{Targets: []probe.Target{{Device: "mlx5_0", Ports: []int{1}}}, Results: &probe.Results{}}, "mlx5_0/1"},
			{"no-result", level2One(&probe.PortResult{}, nil), "mlx5_0/1"},
			{"child-gpu-timeout", died(probe.ChildFailure{Error: "timed out", TimedOut: true, InProgress: gpuIn}), "mlx5_0/1"},
			{"child-timeout", died(probe.ChildFailure{Error: "timed out", TimedOut: true, InProgress: in}), "mlx5_0/1"},
			{"child-crash", died(probe.ChildFailure{Error: "crashed", Signal: "SIGSEGV", InProgress: in}), "mlx5_0/1"},
			{"child-failed", died(probe.ChildFailure{Error: "could not start"}), "mlx5_0/1"},
			{"not-run-gpu-timeout", died(probe.ChildFailure{Error: "timed out", TimedOut: true, InProgress: gpuBefore}), "mlx5_0/1"},
			{"not-run-timeout", died(probe.ChildFailure{Error: "timed out", TimedOut: true, InProgress: before}), "mlx5_0/1"},
			{"not-run-crash", died(probe.ChildFailure{Error: "crashed", Signal: "SIGSEGV", InProgress: before}), "mlx5_0/1"},
			{"not-run", died(probe.ChildFailure{Error: "exited 1", InProgress: before}), "mlx5_0/1"},
			{"skipped", skipped(false), "mlx5_0/1"},
			{"out-of-time", skipped(true), "mlx5_0/1"},
		} {
			t.Run(id+"/"+tc.slug, func(t *testing.T) {
				r := checks.RunLevel2Case(t, id, tc.c)
				want := []findingRef{{id + "/" + tc.slug, tc.unit}}
				if diff := cmp.Diff(want, refs(r.Findings)); diff != "" {
					t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
				}
			})
		}
	}
}
