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
		},
		Run: func(ctx context.Context, env *Env) Result {
			return runLevel2(ctx, env, probe.GPUMemory, gpuMemoryFrame, judgeGPUMemory)
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

// probe.gpu_memory's findings.
var (
	gpuMemoryFrame  = declareLevel2Frame("probe.gpu_memory")
	gpuMemoryWrites = declare(Finding{ID: "probe.gpu_memory/writes-gpu-memory", Status: report.Pass,
		When: "at least one path (peer memory, DMA-BUF) registers GPU memory and a SEND into it arrives intact, and no path that registered is broken",
		Message: "{label}: the NIC writes GPU memory through {paths}: {size}-byte SEND into {gpu} intact; {n} round trips: " +
			"min {min}, median {median}, p99 {p99}"})
	gpuMemoryBusy = declare(Finding{ID: "probe.gpu_memory/gpu-busy", Status: report.Error,
		When:    "the GPU is taken: CUDA_ERROR_DEVICE_UNAVAILABLE (exclusive-process compute mode with a job on it)",
		Message: "{label}: could not use {gpu}: {step} — the GPU is taken (exclusive-process compute mode, a job on it)", Fix: gpuBusyFix})
	gpuMemoryDriverFailed = declare(Finding{ID: "probe.gpu_memory/gpu-driver-failed", Status: report.Fail,
		When: "a GPU driver call fails (cuInit, hipMalloc, ...) with its status", Message: "{label}: {step}", Fix: gpuDriverFix})
	gpuMemoryConnect = declare(Finding{ID: "probe.gpu_memory/connect-refused", Status: report.Fail,
		When:    "connecting the two QPs fails (the loopback address, or a transition of ibv_modify_qp)",
		Message: "{label}: {step}", Fix: rtrFixTemplate})
	gpuMemoryStepFailed = declare(Finding{ID: "probe.gpu_memory/step-failed", Status: report.Fail,
		When: verbsStepFixWhen, Message: "{label}: {step}", Fix: "{verbs_fix}"})
	gpuMemoryPathBroken = declare(Finding{ID: "probe.gpu_memory/path-broken", Status: report.Fail,
		When:    "GPU memory registered, but the SEND into it completes in error or its bytes differ",
		Message: "{label}: GPU memory registered through {path}, but {step}",
		Fix:     strings.NewReplacer("<device>", "{device}", "<port>", "{num}").Replace(gpuBrokenFix)})
	gpuMemoryNoPathNVIDIA = declare(Finding{ID: "probe.gpu_memory/no-path-nvidia", Status: report.Fail,
		When:    "neither path registers GPU memory (NVIDIA, or a GPU driver of another vendor)",
		Message: "{label}: the NIC cannot register GPU memory through either path — {unavailable}",
		Fix:     gpuFixes["NVIDIA"].peer + "\nOr: " + gpuFixes["NVIDIA"].dmabuf})
	gpuMemoryNoPathAMD = declare(Finding{ID: "probe.gpu_memory/no-path-amd", Status: report.Fail,
		When:    "neither path registers GPU memory (AMD)",
		Message: "{label}: the NIC cannot register GPU memory through either path — {unavailable}",
		Fix:     gpuFixes["AMD"].peer + "\nOr: " + gpuFixes["AMD"].dmabuf})
)

// judgeGPUMemory judges probe.gpu_memory on one port.
func judgeGPUMemory(label string, software bool, pr *probe.PortResult) (verdict, bool) {
	r := pr.GPUMemory
	if r == nil {
		return verdict{}, false
	}
	if r.Skipped != "" {
		return gpuMemoryFrame.skippedVerdict(label, &r.Probe), true
	}
	ev := gpuEvidence(r, software)
	var v verdict
	if st := r.Unexplained(); st != nil {
		ev["failed_step"] = st
		v = gpuSetupFailure(st, label, r)
	} else {
		v = gpuPaths(label, r)
	}
	if v.status == "" {
		return gpuPass(label, r, ev), true
	}
	v.evidence, v.details = ev, gpuDetails(r)
	return v, true
}

// gpuSetupFailure is the verdict for a step outside the registration paths:
// the GPU is taken (exclusive-process compute mode with a job on it: not a
// fault, and nothing this run could judge), a GPU driver call, the
// connection, or another verb.
func gpuSetupFailure(st *probe.Step, label string, r *probe.GPUMemoryResult) verdict {
	unit, slots := portUnitOf(label), Slots{"label": label, "step": stepText(st)}
	switch {
	case strings.Contains(st.Error, "CUDA_ERROR_DEVICE_UNAVAILABLE"):
		return gpuMemoryBusy.unit(unit, slots.with("gpu", gpuName(r)))
	case strings.HasPrefix(st.Name, "cu") || strings.HasPrefix(st.Name, "hip") || strings.HasPrefix(st.Name, "dlsym"):
		return gpuMemoryDriverFailed.unit(unit, slots)
	case strings.Contains(st.Name, "ibv_modify_qp") || strings.Contains(st.Name, "resolve"):
		return gpuMemoryConnect.unit(unit, slots.with(slotPairs(rtrSlots(label))...))
	}
	return gpuMemoryStepFailed.unit(unit, slots.with("verbs_fix", resourcesRemedy(st, label, r.Addressing)))
}

// gpuPaths judges the registration paths: one that registered but broke
// the data fails, and so does having none that works; the zero verdict
// when at least one works and none is broken.
func gpuPaths(label string, r *probe.GPUMemoryResult) verdict {
	var works, broken []probe.GPUPath
	for _, p := range r.Paths {
		switch {
		case p.OK():
			works = append(works, p)
		case p.Registered:
			broken = append(broken, p)
		}
	}
	unit := portUnitOf(label)
	switch {
	case len(broken) > 0:
		b := broken[0]
		return gpuMemoryPathBroken.unit(unit, rtrSlots(label).with("label", label, "path", b.Name, "step", stepText(b.Failed)))
	case len(works) == 0:
		fd := gpuMemoryNoPathNVIDIA
		if r.Vendor == "AMD" {
			fd = gpuMemoryNoPathAMD
		}
		return fd.unit(unit, Slots{"label": label, "unavailable": gpuUnavailableText(r)})
	}
	return verdict{}
}

// gpuPass is the verdict of a port whose NIC reaches GPU memory through at
// least one path.
func gpuPass(label string, r *probe.GPUMemoryResult, ev map[string]any) verdict {
	var names []string
	var w *probe.GPUPath
	for i, p := range r.Paths {
		if p.OK() {
			names = append(names, p.Name)
			if w == nil {
				w = &r.Paths[i]
			}
		}
	}
	v := gpuMemoryWrites.unit(portUnitOf(label), Slots{"label": label, "paths": strings.Join(names, " and "), "size": fmt.Sprint(r.Size),
		"gpu": gpuName(r), "n": fmt.Sprint(w.Latency.N), "min": fmtNS(w.Latency.MinNS), "median": fmtNS(w.Latency.MedNS), "p99": fmtNS(w.Latency.P99NS)})
	v.evidence, v.details = ev, gpuDetails(r)
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
