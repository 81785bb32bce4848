package checks_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func TestProbeGPUMemoryFindings(t *testing.T) {
	peerOK := probe.GPUPath{Name: probe.PathPeerMemory, Registered: true, ByteLen: 1024, PayloadOK: true, Latency: probe.Stats{N: 100, MinNS: 3000, MedNS: 3500, P99NS: 9000}}
	peerNone := probe.GPUPath{Name: probe.PathPeerMemory, Unavailable: "ibv_reg_mr: EFAULT (bad address)",
		UnavailableStep: "peer memory: ibv_reg_mr (GPU device pointer)"}
	dmabufNone := probe.GPUPath{Name: probe.PathDMABuf, Unavailable: "cuMemGetHandleForAddressRange: CUDA_ERROR_NOT_SUPPORTED (801)",
		UnavailableStep: "DMA-BUF: cuMemGetHandleForAddressRange DMA_BUF_FD"}
	corrupt := probe.GPUPath{Name: probe.PathDMABuf, Registered: true, ByteLen: 1024,
		Failed: &probe.Step{Name: "DMA-BUF: payload in GPU memory intact", Error: "payload differs from byte 512 on"}}
	withStep := func(r *probe.GPUMemoryResult, st probe.Step) *probe.GPUMemoryResult {
		r.Steps = append(r.Steps, st)
		return r
	}
	amd := func(r *probe.GPUMemoryResult) *probe.GPUMemoryResult {
		r.Vendor = "AMD"
		return r
	}
	for _, tc := range []struct {
		name string
		r    *probe.GPUMemoryResult
		slug string
	}{
		{"peer memory works", checks.GPUResult(peerOK, dmabufNone), "writes-gpu-memory"},
		{"the GPU is taken", withStep(checks.GPUResult(), probe.Step{Name: "cuDevicePrimaryCtxRetain (GPU 3)",
			Error: "cuDevicePrimaryCtxRetain: CUDA_ERROR_DEVICE_UNAVAILABLE (46)"}), "gpu-busy"},
		{"driver mismatch", withStep(checks.GPUResult(), probe.Step{Name: "cuInit", Error: "cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)"}),
			"gpu-driver-failed"},
		{"INIT→RTR refused", withStep(checks.GPUResult(), probe.Step{Name: "ibv_modify_qp A INIT→RTR", ErrnoName: "EINVAL", Error: "ibv_modify_qp: EINVAL"}),
			"connect-refused"},
		{"a teardown fails", withStep(checks.GPUResult(peerOK), probe.Step{Name: "DMA-BUF: ibv_dereg_mr", Error: "ibv_dereg_mr: EBUSY"}), "step-failed"},
		{"a path delivers wrong bytes", checks.GPUResult(peerOK, corrupt), "path-broken"},
		{"neither path (NVIDIA)", checks.GPUResult(peerNone, dmabufNone), "no-path-nvidia"},
		{"neither path (AMD)", amd(checks.GPUResult(peerNone, dmabufNone)), "no-path-amd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := checks.RunLevel2Case(t, "probe.gpu_memory", level2One(&probe.PortResult{GPUMemory: tc.r}, nil))
			want := []findingRef{{"probe.gpu_memory/" + tc.slug, "mlx5_0/1"}}
			if diff := cmp.Diff(want, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
			}
		})
	}
}
