package checks

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Versions the DMA-BUF path needs: the kernel's ib_umem_dmabuf (5.12),
// rdma-core's ibv_reg_dmabuf_mr (release 34, libibverbs IBVERBS_1.12) and,
// for NVIDIA, the open kernel modules from R515 (NVIDIA's GPU Operator and
// NCCL documentation).
var (
	dmabufKernel   = sysfs.KernelVersion{Major: 5, Minor: 12}
	dmabufRDMACore = 34
	dmabufNVIDIA   = 515
)

func init() {
	register(Check{
		ID: "gpu.peer_memory", Code: 24, Level: 1,
		Title: "the NIC can reach GPU memory: nvidia-peermem or DMA-BUF (NVIDIA), DMA-BUF (AMD)",
		Explain: Explanation{
			Judges: "Two paths let an RDMA NIC register GPU memory. Peer memory: NVIDIA's nvidia_peermem module (in the driver since R470) or the " +
				"older nv_peer_mem, loaded (/proc/modules, /sys/module). DMA-BUF: a kernel ≥ 5.12 (ib_umem_dmabuf) with CONFIG_DMA_SHARED_BUFFER " +
				"(read from /boot/config-<release> where it is readable), rdma-core ≥ 34 (ibv_reg_dmabuf_mr; the release is read from the " +
				"libibverbs file the loader cache resolves, libibverbs.so.1.<abi>.<release>.0, looked up among the cache entries of the host's own ABI — " +
				"the one its libc.so.6 is cached with: x86-64, or aarch64 (FLAG_AARCH64_LIB64) on Grace, Ampere and Kunpeng hosts, also when their snapshot " +
				"is judged on another machine) and a GPU driver that exports GPU memory as " +
				"dma-buf: NVIDIA's open kernel modules R515+ (/proc/driver/nvidia/version says \"Open Kernel Module\"), or amdgpu. Passes when " +
				"one path is available, naming both; fails when neither is. AMD's older PeerDirect path (amdkfd's peer-memory client in the ROCm " +
				"DKMS driver with MLNX_OFED) leaves no mark in sysfs and is not judged. Sources: NVIDIA GPU Operator \"GPUDirect RDMA\" (DMA-BUF " +
				"recommended over nvidia-peermem; open kernel modules), NCCL troubleshooting (modprobe nvidia-peermem; DMA-BUF with kernel 5.12+ " +
				"and the open driver R515+), ROCm's ROCmRDMA notes.",
			Why: "Without a peer-memory path, registering GPU memory fails (ibv_reg_mr on a cudaMalloc pointer returns EFAULT) and NCCL silently " +
				"falls back to staging every transfer through host memory — the job runs, at a fraction of its bandwidth.",
		},
		Run: runGPUPeerMemory,
	})
}

// gpu.peer_memory's findings. The verdict is the host's (unit ""): a path
// found, none, or none found and DMA-BUF's availability unknown; when none
// is found each vendor without a path adds a finding about its driver
// ("nvidia", "amdgpu") whose fix is the remedy.
var (
	peerPre               = declareGPUPre("gpu.peer_memory")
	peerModulesUnreadable = declare(Finding{ID: "gpu.peer_memory/modules-unreadable", Status: report.Error,
		When:    "the module list (/proc/modules) could not be read",
		Message: "could not read the module list: {cause}",
		Fix:     "Run where /proc is readable; by hand: `lsmod | grep -e nvidia -e amdgpu`."})
	peerKernelUnreadable = declare(Finding{ID: "gpu.peer_memory/kernel-unreadable", Status: report.Error,
		When:    "the kernel release could not be read or parsed",
		Message: "could not read the kernel release: {cause}",
		Fix:     "Run where /proc is readable; by hand: `uname -r`."})
	peerAvailable = declare(Finding{ID: "gpu.peer_memory/available", Status: report.Pass,
		When:    "every GPU vendor of the host has a path for the NIC into GPU memory (peer memory or DMA-BUF)",
		Message: "{vendors} GPUs: {available}"})
	peerNoPath = declare(Finding{ID: "gpu.peer_memory/no-path", Status: report.Fail,
		When:    "a GPU vendor of the host has no path for the NIC into GPU memory (its finding below says which and the fix)",
		Message: "{vendors} GPUs: no path for the NIC into GPU memory — {missing}"})
	peerPathUnknown = declare(Finding{ID: "gpu.peer_memory/path-unknown", Status: report.Error,
		When:    "no path was found, and what decides DMA-BUF (the NVIDIA driver's version, rdma-core's release) could not be read",
		Message: "{vendors} GPUs: no path into GPU memory found, and whether DMA-BUF is available could not be told — {missing}",
		Fix: "Run where /proc and the loader cache are readable; by hand: `cat /proc/driver/nvidia/version` (\"Open Kernel Module\", R515+), " +
			"`ls -l $(ldconfig -p | awk '/libibverbs.so.1 /{print $NF; exit}')` (rdma-core 34+), `uname -r` (5.12+). Otherwise:"})
	peerNVIDIADriverMissing = declare(Finding{ID: "gpu.peer_memory/nvidia-driver-missing", Status: report.Fail,
		When:    "NVIDIA GPUs without the nvidia driver loaded",
		Message: "the nvidia driver is not loaded",
		Fix:     "Install and load the NVIDIA driver (`modprobe nvidia`); `nvidia-smi` must list the GPUs."})
	peerNVIDIANoPath = declare(Finding{ID: "gpu.peer_memory/nvidia-no-path", Status: report.Fail,
		When:    "NVIDIA GPUs and neither nvidia_peermem loaded nor DMA-BUF available",
		Message: "nvidia_peermem not loaded and no DMA-BUF: {why}",
		Fix: "Load the peer-memory module: `modprobe nvidia-peermem`, and at boot: `echo nvidia-peermem > /etc/modules-load.d/nvidia-peermem.conf` " +
			"(it ships with the NVIDIA driver since R470; it needs the RDMA stack's ib_core loaded first). Or move to DMA-BUF, which NVIDIA now recommends: " +
			"the open kernel modules R515+ (`nvidia-driver-<branch>-open`), kernel 5.12+, rdma-core 34+."})
	peerAMDNoPath = declare(Finding{ID: "gpu.peer_memory/amd-no-path", Status: report.Fail,
		When:    "AMD GPUs and no DMA-BUF path (amdgpu not bound, kernel < 5.12 or rdma-core < 34)",
		Message: "no DMA-BUF for the AMD GPUs: {why}",
		Fix: "For AMD GPUs load amdgpu (the ROCm driver: `amdgpu-install --usecase=dkms`), run a 5.12+ kernel and rdma-core 34+ " +
			"so that the NIC registers GPU memory through DMA-BUF (ibv_reg_dmabuf_mr)."})
)

// peerPaths is what was found of each path to GPU memory.
type peerPaths struct {
	ev         map[string]any
	have, lack []string
	// causes are the findings of the vendors without a path.
	causes []report.Finding
	// unknown: what DMA-BUF needs could not all be read, so a host with
	// no path found may still have one — could not look, not a fault.
	unknown bool
}

func runGPUPeerMemory(_ context.Context, env *Env) Result {
	if r, stop := gpuPrecondition(env, peerPre); stop {
		return r
	}
	h := env.Host
	mods, err := h.ReadModules()
	if err != nil {
		return peerModulesUnreadable.result("", Slots{"cause": err.Error()})
	}
	rel, err := h.KernelRelease()
	kv, perr := sysfs.ParseKernelRelease(rel)
	if err != nil || perr != nil {
		return peerKernelUnreadable.result("", Slots{"cause": firstNonNil(err, perr).Error()})
	}
	p := &peerPaths{ev: map[string]any{"kernel": rel}}
	dmabufBase := p.dmabufBase(h, rel, kv)
	var vendors []string
	if hasGPUVendor(env.GPUs(), sysfs.VendorNVIDIA) {
		vendors = append(vendors, "NVIDIA")
		p.nvidia(h, mods, dmabufBase)
	}
	if hasGPUVendor(env.GPUs(), sysfs.VendorAMD) {
		vendors = append(vendors, "AMD")
		p.amd(env.GPUs(), mods, dmabufBase)
	}
	p.ev["available"], p.ev["missing"] = nonNil(p.have), nonNil(p.lack)
	r := p.result(strings.Join(vendors, " and "))
	r.Observed = strings.Join(p.have, "; ")
	if r.Observed == "" {
		r.Observed = "no peer-memory path"
	}
	r.Expected = "nvidia_peermem loaded or DMA-BUF (kernel ≥ 5.12, rdma-core ≥ 34, NVIDIA open modules R515+ / amdgpu)"
	r.Details = append(append([]string(nil), prefixAll("available: ", p.have)...), prefixAll("missing: ", p.lack)...)
	r.Evidence = p.ev
	return r
}

// result is the host's verdict from the paths found: the verdict's
// finding, then the vendors' causes, whose fixes are the remedy.
func (p *peerPaths) result(vendors string) Result {
	slots := Slots{"vendors": vendors, "available": strings.Join(p.have, "; "), "missing": strings.Join(p.lack, "; ")}
	var main *Finding
	switch {
	case len(p.causes) > 0 && p.unknown:
		main = peerPathUnknown
	case len(p.causes) > 0:
		main = peerNoPath
	default:
		return peerAvailable.result("", slots)
	}
	r := main.result("", slots)
	// The remedy is the verdict's fix, then the causes' (shared combine).
	r.Remedy = combineFindings(append(r.Findings, p.causes...), false).Remedy
	if main == peerNoPath {
		// With DMA-BUF's availability unknown a cause is not established:
		// its fix follows path-unknown's "Otherwise:", it is no finding.
		r.Findings = append(r.Findings, p.causes...)
	}
	return r
}

func prefixAll(pre string, s []string) []string {
	var out []string
	for _, v := range s {
		out = append(out, pre+v)
	}
	return out
}

func firstNonNil(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func hasGPUVendor(g *gpuSurvey, vendor uint16) bool {
	for _, gpu := range g.GPUs {
		if gpu.Fn.Vendor == vendor {
			return true
		}
	}
	return false
}

// dmabufBase judges what DMA-BUF needs beyond the GPU driver — the kernel
// and rdma-core — and returns "" when both are there, else what is missing.
func (p *peerPaths) dmabufBase(h *sysfs.Host, rel string, kv sysfs.KernelVersion) string {
	var miss []string
	if kv.Less(dmabufKernel) {
		miss = append(miss, fmt.Sprintf("kernel %s < 5.12", rel))
	}
	if v, ok, _ := h.KernelConfig(rel, "CONFIG_DMA_SHARED_BUFFER"); ok {
		p.ev["config_dma_shared_buffer"] = v
		if v != "y" {
			miss = append(miss, "CONFIG_DMA_SHARED_BUFFER not set in /boot/config-"+rel)
		}
	}
	core, where := rdmaCoreRelease(h)
	p.ev["rdma_core"], p.ev["libibverbs"] = core, where
	switch {
	case core == 0:
		miss = append(miss, "rdma-core release unknown ("+where+")")
		p.unknown = true
	case core < dmabufRDMACore:
		miss = append(miss, fmt.Sprintf("rdma-core %d < 34 (no ibv_reg_dmabuf_mr; %s)", core, where))
	}
	return strings.Join(miss, ", ")
}

// libibverbsReleaseRE reads rdma-core's release from the library file
// name its build gives libibverbs: libibverbs.so.1.<abi>.<release>.0 —
// distributions' "…1.14.44.0"; a vendor build's release may carry a
// suffix after its number ("…1.14.58mlnx43.0"), which is not needed.
var libibverbsReleaseRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^libibverbs\.so\.1\.[0-9]+\.([0-9]{1,6})(?:[^0-9]|$)`)
})

// rdmaCoreRelease finds libibverbs.so.1 through the loader cache, as
// libibverbs.install does, and reads rdma-core's release from the file it
// resolves to; 0 when it cannot be told, with why.
func rdmaCoreRelease(h *sysfs.Host) (int, string) {
	cache, err := h.ReadLDCache()
	if err != nil {
		return 0, "loader cache unreadable: " + err.Error()
	}
	// The host's ABI, not this program's: a snapshot of an aarch64 host
	// judged on x86-64 lists its libraries with FLAG_AARCH64_LIB64.
	abi := cache.HostABI(sysfs.NativeLDFlags())
	entries := cache.Lookup(LibibverbsSoname, abi)
	if len(entries) == 0 {
		return 0, fmt.Sprintf("libibverbs.so.1 (%s) not in the loader cache", abiName(abi))
	}
	chain := h.FollowLinks(entries[0].Path)
	if !chain.OK() {
		return 0, fmt.Sprintf("%s: %v", entries[0].Path, chain.Err)
	}
	m := libibverbsReleaseRE().FindStringSubmatch(lastElem(chain.Final))
	if m == nil {
		return 0, chain.Final + " does not name its release"
	}
	n, _ := strconv.Atoi(m[1])
	return n, chain.Final
}

// abiName names a required-ABI value the way `ldconfig -p` does ("libc6,aarch64").
func abiName(abi int32) string {
	if n := sysfs.LDArchName(abi); n != "" {
		return "libc6," + n
	}
	return "libc6"
}

func lastElem(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// nvidia judges the NVIDIA paths: a peer-memory module, or DMA-BUF with
// the open kernel modules R515+.
func (p *peerPaths) nvidia(h *sysfs.Host, mods *sysfs.Modules, base string) {
	drv, err := h.ReadNVIDIADriver()
	if err != nil && mods.State("nvidia") == sysfs.ModuleAbsent {
		p.lack = append(p.lack, "the nvidia driver is not loaded")
		p.causes = append(p.causes, peerNVIDIADriverMissing.At("nvidia", nil))
		return
	}
	p.ev["nvidia_driver"] = map[string]any{"version": drv.Version, "open_kernel_modules": drv.Open, "line": drv.Line}
	peer := ""
	for _, m := range []string{"nvidia_peermem", "nv_peer_mem"} {
		if st := mods.State(m); st == sysfs.ModuleLoaded || st == sysfs.ModuleBuiltin {
			peer = m
		}
	}
	if peer != "" {
		p.have = append(p.have, peer+" loaded (peer memory)")
	} else {
		p.lack = append(p.lack, "nvidia_peermem not loaded")
	}
	var why []string
	if base != "" {
		why = append(why, base)
	}
	switch {
	case drv.Major == 0:
		why = append(why, "NVIDIA driver version unknown ("+sysfs.NVIDIAVersion+" unreadable)")
		p.unknown = true
	case !drv.Open:
		why = append(why, fmt.Sprintf("NVIDIA driver %s is the proprietary kernel module (DMA-BUF needs the open kernel modules)", drv.Version))
	case drv.Major < dmabufNVIDIA:
		why = append(why, fmt.Sprintf("NVIDIA driver %s < R515", drv.Version))
	}
	if len(why) == 0 {
		p.have = append(p.have, fmt.Sprintf("DMA-BUF (NVIDIA open kernel modules %s, ibv_reg_dmabuf_mr)", drv.Version))
	} else {
		p.lack = append(p.lack, "DMA-BUF: "+strings.Join(why, ", "))
	}
	if peer == "" && len(why) > 0 {
		p.causes = append(p.causes, peerNVIDIANoPath.At("nvidia", Slots{"why": strings.Join(why, ", ")}))
	}
}

// amd judges AMD's path: amdgpu bound to the GPUs and DMA-BUF.
func (p *peerPaths) amd(g *gpuSurvey, mods *sysfs.Modules, base string) {
	bound := true
	for _, gpu := range g.GPUs {
		if gpu.Fn.Vendor == sysfs.VendorAMD && gpu.Fn.Driver != "amdgpu" {
			bound = false
		}
	}
	var why []string
	if !bound || mods.State("amdgpu") == sysfs.ModuleAbsent {
		why = append(why, "amdgpu is not bound to every AMD GPU")
	}
	if base != "" {
		why = append(why, base)
	}
	if len(why) == 0 {
		p.have = append(p.have, "DMA-BUF (amdgpu exports GPU memory, ibv_reg_dmabuf_mr)")
		return
	}
	p.lack = append(p.lack, "AMD DMA-BUF: "+strings.Join(why, ", "))
	p.causes = append(p.causes, peerAMDNoPath.At("amdgpu", Slots{"why": strings.Join(why, ", ")}))
}
