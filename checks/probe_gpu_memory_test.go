package checks

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/gpu"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// gpuResult is a probe.gpu_memory result as the child reports it, with
// the paths given: a path that registered carries its transfer steps, one
// that did not carries its refused step.
func gpuResult(paths ...probe.GPUPath) *probe.GPUMemoryResult {
	dev := gpu.Device{Index: 3, Name: "NVIDIA H100 80GB HBM3", PCIBusID: "00000000:3B:00.0", PCIAddr: "0000:3b:00.0"}
	r := &probe.GPUMemoryResult{Probe: probe.Probe{Name: probe.GPUMemory}, Vendor: "NVIDIA", Driver: "NVIDIA, CUDA driver 12.4 (libcuda.so.1)",
		GPUs: []gpu.Device{dev}, GPU: &dev, Choice: "nearest of 8 GPUs to mlx5_0 (0000:3a:00.0): 2 PCIe bridge(s) in common below the root complex",
		Size: 1024, RegionBytes: 65536}
	for _, name := range []string{"ibv_open_device", "ibv_alloc_pd", "cuDevicePrimaryCtxRetain (GPU 3)", "cuMemAlloc_v2 131072 bytes"} {
		r.Steps = append(r.Steps, probe.Step{Name: name, OK: true})
	}
	for _, p := range paths {
		switch {
		case p.UnavailableStep != "":
			r.Steps = append(r.Steps, probe.Step{Name: p.UnavailableStep, Error: p.Unavailable, Cause: "why " + p.Name})
		case p.Failed != nil:
			r.Steps = append(r.Steps, *p.Failed)
		default:
			r.Steps = append(r.Steps, probe.Step{Name: p.Name + ": payload in GPU memory intact", OK: true})
		}
	}
	r.Paths = paths
	r.Steps = append(r.Steps, probe.Step{Name: "cuMemFree_v2", OK: true}, probe.Step{Name: "ibv_close_device", OK: true})
	return r
}

var (
	peerOK   = probe.GPUPath{Name: probe.PathPeerMemory, Registered: true, ByteLen: 1024, PayloadOK: true, Latency: probe.Stats{N: 100, MinNS: 3000, MedNS: 3500, P99NS: 9000}}
	dmabufOK = probe.GPUPath{Name: probe.PathDMABuf, Registered: true, ByteLen: 1024, PayloadOK: true, Latency: probe.Stats{N: 100, MinNS: 3100, MedNS: 3600, P99NS: 9100}}
	peerNone = probe.GPUPath{Name: probe.PathPeerMemory, Unavailable: "ibv_reg_mr: EFAULT (bad address)",
		UnavailableStep: "peer memory: ibv_reg_mr (GPU device pointer)"}
	dmabufNone = probe.GPUPath{Name: probe.PathDMABuf, Unavailable: "cuMemGetHandleForAddressRange: CUDA_ERROR_NOT_SUPPORTED (801)",
		UnavailableStep: "DMA-BUF: cuMemGetHandleForAddressRange DMA_BUF_FD"}
)

func amd(r *probe.GPUMemoryResult) *probe.GPUMemoryResult {
	r.Vendor, r.Driver = "AMD", "AMD, HIP driver version 60032830 (libamdhip64.so)"
	return r
}

func TestJudgeGPUMemory(t *testing.T) {
	corrupt := dmabufOK
	corrupt.PayloadOK = false
	corrupt.Failed = &probe.Step{Name: "DMA-BUF: payload in GPU memory intact", Error: "payload differs from byte 512 on"}
	for _, c := range []struct {
		name    string
		r       *probe.GPUMemoryResult
		status  report.Status
		finding string
		// Which path worked is said in words only (one finding for any),
		// and so is the GPU chosen and what a missing path needs.
		contains []string
		remedy   string
	}{
		{"both paths", gpuResult(peerOK, dmabufOK), report.Pass, "writes-gpu-memory",
			[]string{"through peer memory and DMA-BUF", "GPU 3 (NVIDIA H100 80GB HBM3, 00000000:3B:00.0)"}, ""},
		{"DMA-BUF only", gpuResult(peerNone, dmabufOK), report.Pass, "writes-gpu-memory",
			[]string{"through DMA-BUF:", "needs nvidia_peermem loaded"}, ""},
		{"peer memory only", gpuResult(peerOK, dmabufNone), report.Pass, "writes-gpu-memory",
			[]string{"through peer memory:", "open GPU kernel modules"}, ""},
		{"neither", gpuResult(peerNone, dmabufNone), report.Fail, "no-path-nvidia",
			[]string{"peer memory: ibv_reg_mr: EFAULT (bad address) (why peer memory)", "DMA-BUF: cuMemGetHandleForAddressRange"},
			"modprobe nvidia-peermem"},
		{"neither on AMD", amd(gpuResult(peerNone, dmabufNone)), report.Fail, "no-path-amd", nil, "amdgpu-dkms"},
		{"DMA-BUF only on AMD", amd(gpuResult(peerNone, dmabufOK)), report.Pass, "writes-gpu-memory",
			[]string{"through DMA-BUF:", "peer memory needs amdgpu-dkms's peer-memory client"}, ""},
		{"corrupt payload", gpuResult(peerOK, corrupt), report.Fail, "path-broken", []string{"payload differs from byte 512"}, "--use_cuda=<gpu>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, ok := judgeGPUMemory("mlx5_0 port 1", false, &probe.PortResult{Port: 1, GPUMemory: c.r})
			if !ok || v.status != c.status {
				t.Fatalf("status %s, want %s: %s", v.status, c.status, v.line)
			}
			if diff := cmp.Diff(onlyFinding("probe.gpu_memory/"+c.finding, "mlx5_0/1"), unitFindings(v.findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			text := v.line + "\n" + strings.Join(v.details, "\n")
			for _, w := range c.contains {
				if !strings.Contains(text, w) {
					t.Errorf("verdict does not say %q:\n%s", w, text)
				}
			}
			if c.remedy != "" && !strings.Contains(v.remedy, c.remedy) {
				t.Errorf("remedy %q does not say %q", v.remedy, c.remedy)
			}
			if c.status == report.Fail && v.remedy == "" {
				t.Error("a fail without a remedy")
			}
		})
	}
}

func TestJudgeGPUMemorySetupAndSkips(t *testing.T) {
	r := gpuResult()
	r.Steps = []probe.Step{{Name: "cuInit", Error: "cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)"}}
	v, _ := judgeGPUMemory("mlx5_0 port 1", false, &probe.PortResult{GPUMemory: r})
	if v.status != report.Fail || !strings.Contains(v.line, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH") || !strings.Contains(v.remedy, "different driver versions") {
		t.Errorf("driver mismatch: %s %q, remedy %q", v.status, v.line, v.remedy)
	}
	r = gpuResult()
	r.Steps = append(r.Steps, probe.Step{Name: "cuDevicePrimaryCtxRetain (GPU 3)", Error: "cuDevicePrimaryCtxRetain: CUDA_ERROR_DEVICE_UNAVAILABLE (46)"})
	if v, _ := judgeGPUMemory("mlx5_0 port 1", false, &probe.PortResult{GPUMemory: r}); v.status != report.Error ||
		!cmp.Equal(onlyFinding("probe.gpu_memory/gpu-busy", "mlx5_0/1"), unitFindings(v.findings)) {
		t.Errorf("busy GPU: %s %q %v", v.status, v.line, unitFindings(v.findings))
	}
	// A teardown that fails after both paths worked is no pass.
	r = gpuResult(peerOK, dmabufOK)
	r.Steps = append(r.Steps, probe.Step{Name: "DMA-BUF: ibv_dereg_mr", Error: "ibv_dereg_mr: EBUSY"})
	if v, _ := judgeGPUMemory("mlx5_0 port 1", false, &probe.PortResult{GPUMemory: r}); v.status != report.Fail ||
		!cmp.Equal(onlyFinding("probe.gpu_memory/step-failed", "mlx5_0/1"), unitFindings(v.findings)) || !strings.Contains(v.line, "ibv_dereg_mr") {
		t.Errorf("failed teardown: %s %q %v", v.status, v.line, unitFindings(v.findings))
	}
	for _, why := range []string{"no GPU driver library loads: dlopen libcuda.so.1: libcuda.so.1: cannot open shared object file: No such file or directory; dlopen libamdhip64.so: ...",
		"no GPU: libcuda.so.1: cuInit: CUDA_ERROR_NO_DEVICE (100); dlopen libamdhip64.so: libamdhip64.so: cannot open shared object file"} {
		r := &probe.GPUMemoryResult{Probe: probe.Probe{Name: probe.GPUMemory, Skipped: why}}
		v, _ := judgeGPUMemory("mlx5_0 port 1", false, &probe.PortResult{GPUMemory: r})
		if v.status != report.Skip || !strings.Contains(v.line, why) {
			t.Errorf("%s: %s %q", why, v.status, v.line)
		}
	}
	if _, ok := judgeGPUMemory("mlx5_0 port 1", false, &probe.PortResult{}); ok {
		t.Error("a verdict without a result")
	}
}

// A child killed while cuInit brought the GPUs up says how to give the
// driver its time, not that a verb hangs.
func TestGPUDriverTimeout(t *testing.T) {
	dr := &probe.DeviceResult{Device: "mlx5_0", Failure: &probe.ChildFailure{TimedOut: true,
		Error:      "the verbs child did not finish within 7s in port 1 probe.gpu_memory: open the GPU driver; it was killed",
		InProgress: "port 1 probe.gpu_memory: open the GPU driver"}}
	v := childFailureVerdict("mlx5_0 port 1", probe.GPUMemory, dr)
	if v.status != report.Error || !strings.Contains(v.remedy, "nvidia-persistenced") {
		t.Fatalf("%s %q, remedy %q", v.status, v.line, v.remedy)
	}
}
