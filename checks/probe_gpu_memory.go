package checks

import (
	"context"
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func init() {
	register(Check{
		ID: "probe.gpu_memory", Code: 36, Level: 2,
		Title: "the NIC registers GPU memory (peer memory or DMA-BUF) and a loopback RC SEND lands in it intact",
		Needs: []string{"probe.send_poll"},
		Privileges: append([]Need{{Kind: NeedDevice, Path: "/dev/nvidia*, /dev/kfd, /dev/dri",
			For: "the GPU driver library opens the GPU's nodes (where a GPU and its library are present; without the library the check skips)"}},
			level2Needs...),
		Explain: Explanation{
			Judges: "Only where a GPU and its driver library are present: the probe child opens NVIDIA's driver API (libcuda.so.1), or else " +
				"AMD's HIP runtime (libamdhip64.so, with the dma-buf export of libhsa-runtime64.so.1), at run time, as it opens libibverbs; " +
				"without either library, or when the one that loads reports no device, the check skips and says so. On every ACTIVE port it " +
				"picks the GPU nearest the NIC in the PCIe tree (the most bridges in common in their sysfs device paths; GPU 0 when the NIC " +
				"has no PCI device), makes it current (CUDA: its primary context; HIP: hipSetDevice), allocates 64 KiB-aligned device memory " +
				"(cuMemAlloc_v2, hipMalloc) and, on NVIDIA, sets CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on it, as NVIDIA's GPUDirect RDMA " +
				"documentation requires of memory a NIC writes (docs.nvidia.com/cuda/gpudirect-rdma). Then it registers that memory " +
				"through each path: peer memory — ibv_reg_mr on the device pointer, which the kernel pins only through a peer-memory client " +
				"(nvidia_peermem or the older nv_peer_mem; on AMD the amdgpu driver's, ROCmRDMA; EFAULT otherwise) — and DMA-BUF — the GPU " +
				"driver exports the range as a dma-buf (cuMemGetHandleForAddressRange with CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD; " +
				"hsa_amd_portable_export_dmabuf, which also gives the range's offset in the buffer), the kernel's buffer-sharing framework " +
				"(docs.kernel.org/driver-api/dma-buf.html), and ibv_reg_dmabuf_mr registers it at the device pointer as iova. Through each " +
				"registration the send/poll probe's two connected RC QPs carry a --probe-size SEND from host memory into GPU memory that was " +
				"filled with 0xa5 before; a synchronous device-to-host copy reads it back. A path passes when both completions are " +
				"IBV_WC_SUCCESS, byte_len is the size and the bytes read back are the bytes sent; up to 100 round trips (at most 200 ms) into " +
				"GPU memory are then timed. Pass: at least one path works and none that registered is broken; which worked is named, with " +
				"the reason for the other. Everything is torn down in order whatever happens: the MRs, the dma-buf descriptor, the GPU " +
				"memory, the context.",
			Why: "GPU clusters move their data between the NIC and GPU memory directly (NCCL, UCX, NVSHMEM, GPUDirect Storage). When the NIC " +
				"cannot register GPU memory, those libraries fall back to staging every byte through host memory — slower, and silent — or " +
				"stop at their first collective. Peer memory needs a kernel module and an RDMA stack with the peer-memory API; DMA-BUF needs " +
				"recent enough kernel, GPU driver and rdma-core. This check says which of the two this host has.",
			Failures: []Failure{
				{report.Fail, "neither path registers GPU memory (NVIDIA)", gpuFixes["NVIDIA"].peer + " Or: " + gpuFixes["NVIDIA"].dmabuf},
				{report.Fail, "neither path registers GPU memory (AMD)", gpuFixes["AMD"].peer + " Or: " + gpuFixes["AMD"].dmabuf},
				{report.Fail, "GPU memory registered, but the SEND into it completes in error or its bytes differ", gpuBrokenFix},
				{report.Fail, "a GPU driver call fails (cuInit, hipMalloc, ...) with its status", gpuDriverFix},
				{report.Error, "the GPU is taken: CUDA_ERROR_DEVICE_UNAVAILABLE (exclusive-process compute mode with a job on it)", gpuBusyFix},
				childFailure,
			},
		},
		Run: func(ctx context.Context, env *Env) Result {
			return runLevel2(ctx, env, probe.GPUMemory, nil, judgeGPUMemory)
		},
	})
}

// gpuFix is what enables each path on one vendor's GPUs, in full for a
// remedy and in short for a passing port's note on the path it lacks.
type gpuFix struct {
	peer, dmabuf           string
	peerShort, dmabufShort string
}

// gpuFixes are keyed by the GPU driver's vendor.
var gpuFixes = map[string]gpuFix{
	"NVIDIA": {
		peer: "Peer memory: load NVIDIA's peer-memory client, `modprobe nvidia-peermem` (it ships with the NVIDIA driver), and load it at boot " +
			"(`echo nvidia-peermem > /etc/modules-load.d/nvidia-peermem.conf`); stop and remove the older nv_peer_mem first (only one of them can be loaded). " +
			"It plugs into the peer-memory API of MLNX_OFED/DOCA-OFED's RDMA stack: on the distribution's inbox RDMA stack it cannot load, and DMA-BUF is the way.",
		dmabuf: "DMA-BUF needs every layer to support it: Linux 5.12 or newer with an RDMA driver that implements dma-buf memory regions " +
			"(mlx5 does), rdma-core 34 or newer (ibv_reg_dmabuf_mr), and NVIDIA driver R515 or newer (CUDA 11.7: cuMemGetHandleForAddressRange) " +
			"running the open GPU kernel modules (nvidia-open: the proprietary modules report CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 0).",
		peerShort:   "peer memory needs nvidia_peermem loaded, on MLNX_OFED/DOCA-OFED's RDMA stack",
		dmabufShort: "DMA-BUF needs Linux 5.12+, rdma-core 34+, NVIDIA driver R515+ with the open GPU kernel modules",
	},
	"AMD": {
		peer: "Peer memory: the peer-memory client for AMD GPUs (ROCmRDMA) is part of ROCm's amdgpu kernel driver (amdgpu-dkms), which " +
			"registers it with the peer-memory API of MLNX_OFED/DOCA-OFED's RDMA stack: install that stack and amdgpu-dkms, and check that " +
			"all GPU memory is exposed in a PCI BAR (large BAR) and the IOMMU is off or in pass-through, as ROCm's Remote Device " +
			"Programming documentation asks. On the distribution's inbox RDMA stack DMA-BUF is the way.",
		dmabuf: "DMA-BUF needs every layer to support it: Linux 5.12 or newer with an RDMA driver that implements dma-buf memory regions " +
			"(mlx5 does), rdma-core 34 or newer (ibv_reg_dmabuf_mr), and a ROCm runtime whose HSA library exports hsa_amd_portable_export_dmabuf.",
		peerShort:   "peer memory needs amdgpu-dkms's peer-memory client on MLNX_OFED/DOCA-OFED's RDMA stack",
		dmabufShort: "DMA-BUF needs Linux 5.12+, rdma-core 34+ and ROCm's hsa_amd_portable_export_dmabuf",
	},
}

// fixesFor is the vendor's table entry (NVIDIA's for a vendor not in it).
func fixesFor(vendor string) gpuFix {
	if f, ok := gpuFixes[vendor]; ok {
		return f
	}
	return gpuFixes["NVIDIA"]
}

const (
	gpuBrokenFix = "The NIC accepted the GPU memory but the data did not land in it intact: the peer-to-peer path between them is broken. " +
		"Check the PCIe path between NIC and GPU (ACS redirecting peer-to-peer requests, the IOMMU in translation mode), the NIC's and GPU's " +
		"firmware, and `dmesg` for NVRM Xid and mlx5 errors; compare with perftest built with CUDA: `ib_send_bw -d <device> -i <port> --use_cuda=<gpu>` " +
		"(`--use_cuda_dmabuf` for the DMA-BUF path) against a second run of it with the host's address."
	gpuBusyFix = "Run the check when the GPU is idle (`nvidia-smi --query-gpu=index,compute_mode --format=csv` shows the mode; " +
		"`nvidia-smi -q -d PIDS` who holds it); the probe needs a context of its own on the GPU."
	gpuDriverFix = "The GPU driver failed outside any registration path: `nvidia-smi` (`rocm-smi` on AMD) shows the same state. " +
		"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH means libcuda.so.1 and the loaded kernel module come from different driver versions (reboot, " +
		"or reload the module, after a driver upgrade); an out-of-memory status, a GPU full with other work; anything else — read `dmesg` " +
		"for NVRM Xid or amdgpu errors."
)

// judgeGPUMemory judges probe.gpu_memory on one port.
func judgeGPUMemory(label string, software bool, pr *probe.PortResult) (verdict, bool) {
	r := pr.GPUMemory
	if r == nil {
		return verdict{}, false
	}
	if r.Skipped != "" {
		return skippedVerdict(label, &r.Probe), true
	}
	ev := gpuEvidence(r, software)
	if st := r.Unexplained(); st != nil && strings.Contains(st.Error, "CUDA_ERROR_DEVICE_UNAVAILABLE") {
		// Exclusive-process compute mode with a job on the GPU: not a
		// fault, and nothing this run could judge.
		ev["failed_step"] = st
		return verdict{status: report.Error, evidence: ev, details: gpuDetails(r),
			line:   fmt.Sprintf("%s: could not use %s: %s — the GPU is taken (exclusive-process compute mode, a job on it)", label, gpuName(r), stepText(st)),
			remedy: gpuBusyFix}, true
	} else if st != nil {
		ev["failed_step"] = st
		return verdict{status: report.Fail, line: fmt.Sprintf("%s: %s", label, stepText(st)), evidence: ev,
			remedy: gpuSetupRemedy(st, label, r), details: gpuDetails(r)}, true
	}
	var works, broken []probe.GPUPath
	for _, p := range r.Paths {
		switch {
		case p.OK():
			works = append(works, p)
		case p.Registered:
			broken = append(broken, p)
		}
	}
	switch {
	case len(broken) > 0:
		b := broken[0]
		return verdict{status: report.Fail, evidence: ev, details: gpuDetails(r),
			line:   fmt.Sprintf("%s: GPU memory registered through %s, but %s", label, b.Name, stepText(b.Failed)),
			remedy: fillDevice(gpuBrokenFix, label)}, true
	case len(works) == 0:
		return verdict{status: report.Fail, evidence: ev, details: gpuDetails(r),
			line:   fmt.Sprintf("%s: the NIC cannot register GPU memory through either path — %s", label, gpuUnavailableText(r)),
			remedy: fixesFor(r.Vendor).peer + "\nOr: " + fixesFor(r.Vendor).dmabuf}, true
	}
	return gpuPass(label, r, works, ev), true
}

// gpuPass is the line of a port whose NIC reaches GPU memory through at
// least one path.
func gpuPass(label string, r *probe.GPUMemoryResult, works []probe.GPUPath, ev map[string]any) verdict {
	names := make([]string, len(works))
	for i, p := range works {
		names[i] = p.Name
	}
	w := works[0]
	line := fmt.Sprintf("%s: the NIC writes GPU memory through %s: %d-byte SEND into %s intact; %d round trips: min %s, median %s, p99 %s",
		label, strings.Join(names, " and "), r.Size, gpuName(r), w.Latency.N, fmtNS(w.Latency.MinNS), fmtNS(w.Latency.MedNS), fmtNS(w.Latency.P99NS))
	v := verdict{status: report.Pass, line: line, evidence: ev, details: gpuDetails(r)}
	for _, p := range r.Paths {
		if !p.Registered {
			v.details = append(v.details, fmt.Sprintf("%s not available: %s — %s", p.Name, p.Unavailable, gpuEnable(r.Vendor, p.Name)))
		}
	}
	return v
}

// gpuEnable is what makes a path available on the vendor's GPUs.
func gpuEnable(vendor, path string) string {
	if path == probe.PathPeerMemory {
		return fixesFor(vendor).peerShort
	}
	return fixesFor(vendor).dmabufShort
}

// gpuUnavailableText lists every path that did not register and why.
func gpuUnavailableText(r *probe.GPUMemoryResult) string {
	var parts []string
	for _, p := range r.Paths {
		s := fmt.Sprintf("%s: %s", p.Name, p.Unavailable)
		for _, st := range r.Steps {
			if st.Name == p.UnavailableStep && st.Cause != "" {
				s += " (" + st.Cause + ")"
			}
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func gpuName(r *probe.GPUMemoryResult) string {
	if r.GPU == nil {
		return "GPU memory"
	}
	return fmt.Sprintf("GPU %d (%s, %s)", r.GPU.Index, r.GPU.Name, r.GPU.PCIBusID)
}

// gpuDetails says which GPU was probed and why, through which driver.
func gpuDetails(r *probe.GPUMemoryResult) []string {
	var out []string
	if r.GPU != nil {
		out = append(out, fmt.Sprintf("%s: %s", gpuName(r), r.Choice))
	}
	if r.Driver != "" {
		out = append(out, "driver: "+r.Driver)
	}
	return out
}

// gpuSetupRemedy is the fix for a step outside the registration paths: a
// GPU driver call, or a verb of the loopback.
func gpuSetupRemedy(st *probe.Step, label string, r *probe.GPUMemoryResult) string {
	if strings.HasPrefix(st.Name, "cu") || strings.HasPrefix(st.Name, "hip") || strings.HasPrefix(st.Name, "dlsym") {
		return gpuDriverFix
	}
	if strings.Contains(st.Name, "ibv_modify_qp") || strings.Contains(st.Name, "resolve") {
		return rtrFixFor(label)
	}
	return resourcesRemedy(st, label, r.Addressing)
}

// fillDevice puts the port's device and number into a fix.
func fillDevice(fix, label string) string {
	dev, port := labelParts(label)
	return strings.NewReplacer("<device>", dev, "<port>", port).Replace(fix)
}

func gpuEvidence(r *probe.GPUMemoryResult, software bool) map[string]any {
	ev := map[string]any{
		"driver": r.Driver, "gpus": r.GPUs, "choice": r.Choice, "nic_pci_addr": r.NICPCIAddr, "size": r.Size,
		"region_bytes": r.RegionBytes, "paths": r.Paths, "software_device": software, "duration_ms": r.Millis,
	}
	if r.GPU != nil {
		ev["gpu"] = r.GPU
	}
	if r.Addressing != nil {
		ev["addressing"] = r.Addressing
	}
	return ev
}
