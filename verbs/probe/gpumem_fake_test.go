package probe

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/verbs/gpu"
)

// probe.gpu_memory through the real child, the real verbs and GPU
// bindings, against the fake libibverbs and the fake libcuda of package
// gpu (device memory over host memory, failures on demand).

var (
	variantsOnce sync.Once
	variants     map[string]string // "cuda", "cuda-NO_DMABUF", "ibverbs-NO_REG_DMABUF" → library
	variantsErr  string
)

// fakeVariant builds the fake libraries the GPU tests need beyond the
// plain fake libibverbs, once.
func fakeVariant(t *testing.T, name string) string {
	t.Helper()
	fakeLibrary(t) // the plain fake libibverbs, and gcc with it
	variantsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fakegpu")
		if err != nil {
			variantsErr = err.Error()
			return
		}
		variants = map[string]string{}
		for _, v := range []struct{ name, src, so, def string }{
			{"cuda", "../gpu/testdata/fakegpu.c", "libcuda.so.1", ""},
			{"cuda-NO_DMABUF", "../gpu/testdata/fakegpu.c", "libcuda-old.so.1", "-DNO_DMABUF"},
			{"ibverbs-NO_REG_DMABUF", "testdata/fakeibverbs.c", "libibverbs-old.so.1", "-DNO_REG_DMABUF"},
		} {
			so := filepath.Join(dir, v.so)
			args := []string{"-shared", "-fPIC", "-o", so, v.src}
			if v.def != "" {
				args = append(args, v.def)
			}
			if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
				variantsErr = "gcc: " + err.Error() + "\n" + string(out)
				return
			}
			variants[v.name] = so
		}
	})
	if variantsErr != "" {
		t.Fatal(variantsErr)
	}
	return variants[name]
}

// gpuRun is one probe.gpu_memory run and the fake libcuda's log of it.
type gpuRun struct {
	res *GPUMemoryResult
	log []string
}

// runGPU probes fake0 port 1 with the fake libcuda cuda ("" = the
// CUDA 11.7+ one; no HIP library) or the GPU libraries libs, and
// libibverbs ibverbs ("" = the plain fake), under the environment env.
func runGPU(t *testing.T, cuda, ibverbs string, env map[string]string, sysfsRoot string, libs ...gpu.Libraries) gpuRun {
	t.Helper()
	lib := withFake(t, "loop")
	if ibverbs != "" {
		lib = fakeVariant(t, ibverbs)
	}
	if cuda == "" {
		cuda = fakeVariant(t, "cuda")
	}
	gl := gpu.Libraries{CUDA: cuda, HIP: filepath.Join(t.TempDir(), "libamdhip64.so")}
	if len(libs) > 0 {
		gl = libs[0]
	}
	for _, k := range []string{"FAKE_GPU", "FAKE_GPU_BUSIDS", "FAKE_PEERMEM", "FAKE_IBV_DMABUF"} {
		t.Setenv(k, env[k])
	}
	if m, ok := env["FAKE_IBV"]; ok {
		t.Setenv("FAKE_IBV", m)
	}
	logPath := filepath.Join(t.TempDir(), "cuda.log")
	t.Setenv("FAKE_GPU_LOG", logPath)
	if sysfsRoot == "" {
		sysfsRoot = t.TempDir()
	}
	opts := Options{Library: lib, SysfsRoot: sysfsRoot, Probes: []string{Resources, GPUMemory},
		GPULibraries: gl}
	res := Run(context.Background(), testExe(t), []Target{{Device: "fake0", Ports: []int{1}}}, opts)
	d := res.Devices["fake0"]
	if d.Failure != nil {
		t.Fatalf("failure %+v\n%s", d.Failure, d.Stderr)
	}
	pr := d.Port(1)
	if pr == nil || pr.GPUMemory == nil {
		t.Fatalf("no probe.gpu_memory result: %+v", d)
	}
	raw, _ := os.ReadFile(logPath)
	var log []string
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if l != "" {
			log = append(log, l)
		}
	}
	return gpuRun{res: pr.GPUMemory, log: log}
}

// balanced checks that every GPU allocation was freed and every context
// retained was released, that no exported descriptor outlived its memory,
// and that every teardown step of the probe succeeded.
func (g gpuRun) balanced(t *testing.T, wantAllocs int) {
	t.Helper()
	count := map[string]int{}
	for _, l := range g.log {
		count[strings.Fields(l)[0]]++
	}
	if count["alloc"] != wantAllocs || count["free"] != count["alloc"] || count["retain"] != count["release"] || count["leak"] != 0 {
		t.Errorf("fake libcuda log: %v\n%s", count, strings.Join(g.log, "\n"))
	}
	for _, st := range g.res.Steps {
		if isTeardown(st.Name) && !st.OK {
			t.Errorf("teardown step %q failed: %s", st.Name, st.Error)
		}
	}
	if st := g.res.Unexplained(); st != nil && len(g.res.Paths) > 0 {
		t.Errorf("a failed step no path accounts for: %+v", st)
	}
}

func isTeardown(name string) bool {
	for _, p := range []string{"ibv_dereg_mr", "ibv_destroy", "ibv_dealloc", "ibv_close", "munmap", "cuMemFree", "cuDevicePrimaryCtxRelease", "close the dma-buf"} {
		if strings.Contains(name, p) {
			return true
		}
	}
	return false
}

func gpuPath(t *testing.T, r *GPUMemoryResult, name string) GPUPath {
	t.Helper()
	for _, p := range r.Paths {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no %s path in %+v (steps %+v)", name, r.Paths, r.Steps)
	return GPUPath{}
}

func TestFakeGPUBothPaths(t *testing.T) {
	g := runGPU(t, "", "", map[string]string{"FAKE_PEERMEM": "1"}, "")
	r := g.res
	if r.Skipped != "" || r.Driver != "NVIDIA, CUDA driver 12.4 ("+fakeVariant(t, "cuda")+")" || r.GPU == nil || r.GPU.PCIAddr != "0000:3b:00.0" {
		t.Fatalf("skipped %q, driver %q, gpu %+v", r.Skipped, r.Driver, r.GPU)
	}
	for _, name := range []string{PathPeerMemory, PathDMABuf} {
		p := gpuPath(t, r, name)
		if !p.OK() || p.ByteLen != 1024 || p.Latency.N == 0 {
			t.Errorf("%s: %+v", name, p)
		}
	}
	if r.RegionBytes != 64<<10 || r.Choice != "the only GPU" {
		t.Errorf("region %d, choice %q", r.RegionBytes, r.Choice)
	}
	g.balanced(t, 1)
	if !strings.Contains(strings.Join(g.log, "\n"), "export fd") {
		t.Errorf("no dma-buf export in the log:\n%s", strings.Join(g.log, "\n"))
	}
}

// Without a peer-memory client the kernel cannot pin device memory:
// ibv_reg_mr fails with EFAULT, and DMA-BUF still works.
func TestFakeGPUPeerMemoryNotLoaded(t *testing.T) {
	g := runGPU(t, "", "", nil, "")
	peer, dmabuf := gpuPath(t, g.res, PathPeerMemory), gpuPath(t, g.res, PathDMABuf)
	if peer.Registered || !strings.Contains(peer.Unavailable, "ibv_reg_mr: EFAULT") {
		t.Errorf("peer memory: %+v", peer)
	}
	if !dmabuf.OK() {
		t.Errorf("DMA-BUF: %+v", dmabuf)
	}
	g.balanced(t, 1)
}

func TestFakeGPUNeitherPath(t *testing.T) {
	g := runGPU(t, "", "", map[string]string{"FAKE_GPU": "fail=cuMemGetHandleForAddressRange:801"}, "")
	peer, dmabuf := gpuPath(t, g.res, PathPeerMemory), gpuPath(t, g.res, PathDMABuf)
	if peer.Registered || dmabuf.Registered || !strings.Contains(dmabuf.Unavailable, "cuMemGetHandleForAddressRange: CUDA_ERROR_NOT_SUPPORTED (801)") {
		t.Fatalf("paths %+v", g.res.Paths)
	}
	g.balanced(t, 1)
}

// A driver before CUDA 11.7 has no dma-buf export; a libibverbs before
// rdma-core 34 has no ibv_reg_dmabuf_mr: each is named.
func TestFakeGPUOldStacks(t *testing.T) {
	g := runGPU(t, fakeVariant(t, "cuda-NO_DMABUF"), "", map[string]string{"FAKE_PEERMEM": "1"}, "")
	if d := gpuPath(t, g.res, PathDMABuf); d.Registered || !strings.Contains(d.Unavailable, "older than 11.7") {
		t.Errorf("old CUDA driver: %+v", d)
	}
	if !gpuPath(t, g.res, PathPeerMemory).OK() {
		t.Errorf("peer memory: %+v", g.res.Paths)
	}
	g.balanced(t, 1)
	g = runGPU(t, "", "ibverbs-NO_REG_DMABUF", map[string]string{"FAKE_PEERMEM": "1"}, "")
	if d := gpuPath(t, g.res, PathDMABuf); d.Registered || !strings.Contains(d.Unavailable, "older than rdma-core 34") {
		t.Errorf("old libibverbs: %+v", d)
	}
	g.balanced(t, 1)
	g = runGPU(t, "", "", map[string]string{"FAKE_PEERMEM": "1", "FAKE_IBV_DMABUF": "eopnotsupp"}, "")
	if d := gpuPath(t, g.res, PathDMABuf); d.Registered || !strings.Contains(d.Unavailable, "ibv_reg_dmabuf_mr: ENOTSUP (operation not supported)") {
		t.Errorf("provider without dma-buf MRs: %+v", d)
	}
	g.balanced(t, 1)
}

// What the NIC wrote differs from what the GPU reads back: both paths
// fail at the comparison, and everything is still torn down.
func TestFakeGPUPayloadCorrupt(t *testing.T) {
	g := runGPU(t, "", "", map[string]string{"FAKE_PEERMEM": "1", "FAKE_GPU": "corrupt"}, "")
	for _, name := range []string{PathPeerMemory, PathDMABuf} {
		p := gpuPath(t, g.res, name)
		if !p.Registered || p.PayloadOK || p.Failed == nil || p.Failed.Name != name+": payload in GPU memory intact" ||
			!strings.Contains(p.Failed.Error, "payload differs from byte 512") {
			t.Errorf("%s: %+v", name, p)
		}
	}
	g.balanced(t, 1)
}

// A failure of the GPU driver during set-up is the probe's failed step,
// with its CUresult, and what was set up is torn down.
func TestFakeGPUAllocFails(t *testing.T) {
	g := runGPU(t, "", "", map[string]string{"FAKE_GPU": "fail=cuMemAlloc_v2:2"}, "")
	st := g.res.Failed()
	if st == nil || !strings.HasPrefix(st.Name, "cuMemAlloc_v2") || !strings.Contains(st.Error, "CUDA_ERROR_OUT_OF_MEMORY (2)") || len(g.res.Paths) != 0 {
		t.Fatalf("failed step %+v, paths %+v", st, g.res.Paths)
	}
	g.balanced(t, 0)
}

func TestFakeGPUSkips(t *testing.T) {
	g := runGPU(t, "", "", map[string]string{"FAKE_GPU": "nodevice"}, "")
	if !strings.Contains(g.res.Skipped, "CUDA_ERROR_NO_DEVICE") || len(g.res.Steps) != 0 {
		t.Errorf("no device: skipped %q, steps %+v", g.res.Skipped, g.res.Steps)
	}
	g = runGPU(t, filepath.Join(t.TempDir(), "libcuda.so.1"), "", nil, "")
	if !strings.HasPrefix(g.res.Skipped, "no GPU driver library loads: dlopen ") || !strings.Contains(g.res.Skipped, "libamdhip64.so") || len(g.res.Steps) != 0 {
		t.Errorf("no library: skipped %q, steps %+v", g.res.Skipped, g.res.Steps)
	}
	g = runGPU(t, "", "", map[string]string{"FAKE_GPU": "fail=cuInit:803"}, "")
	if st := g.res.Failed(); st == nil || st.Name != "cuInit" || !strings.Contains(st.Error, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH") {
		t.Errorf("broken driver: %+v", st)
	}
}

// With several GPUs the one sharing a PCIe switch with the NIC is probed.
func TestFakeGPUNearestChosen(t *testing.T) {
	root := t.TempDir()
	dev := func(p string) string {
		full := filepath.Join(root, "devices", p)
		if err := os.MkdirAll(full, 0o755); err != nil {
			t.Fatal(err)
		}
		return full
	}
	link := func(target, at string) {
		if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, at); err != nil {
			t.Fatal(err)
		}
	}
	nic := dev("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:3b:00.0")
	far := dev("pci0000:80/0000:80:01.0/0000:af:00.0")
	near := dev("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:3c:00.0")
	link(nic, filepath.Join(root, "class/infiniband/fake0/device"))
	link(far, filepath.Join(root, "bus/pci/devices/0000:af:00.0"))
	link(near, filepath.Join(root, "bus/pci/devices/0000:3c:00.0"))
	g := runGPU(t, "", "", map[string]string{"FAKE_PEERMEM": "1", "FAKE_GPU_BUSIDS": "0000:AF:00.0,0000:3C:00.0"}, root)
	r := g.res
	if r.GPU == nil || r.GPU.Index != 1 || r.NICPCIAddr != "0000:3b:00.0" || !strings.Contains(r.Choice, "2 PCIe bridge(s) in common") {
		t.Fatalf("gpu %+v, nic %q, choice %q", r.GPU, r.NICPCIAddr, r.Choice)
	}
	if strings.Join(g.log, " ") == "" || !strings.Contains(strings.Join(g.log, " "), "retain 1") {
		t.Errorf("log %q", g.log)
	}
}

// On AMD the same probe runs through HIP: no SYNC_MEMOPS step, nothing to
// release for the device, and the dma-buf registered from the offset
// ROCm's export gives (its descriptor stands for the whole allocation).
func TestFakeGPUAMD(t *testing.T) {
	fake := fakeVariant(t, "cuda")
	libs := gpu.Libraries{CUDA: filepath.Join(t.TempDir(), "libcuda.so.1"), HIP: fake, HSA: fake}
	g := runGPU(t, "", "", map[string]string{"FAKE_GPU_BUSIDS": "0000:c1:00.0"}, "", libs)
	r := g.res
	if r.Vendor != "AMD" || r.GPU == nil || r.GPU.PCIAddr != "0000:c1:00.0" {
		t.Fatalf("vendor %q, gpu %+v, skipped %q, failed %+v", r.Vendor, r.GPU, r.Skipped, r.Failed())
	}
	peer, dmabuf := gpuPath(t, r, PathPeerMemory), gpuPath(t, r, PathDMABuf)
	if peer.Registered || !strings.Contains(peer.Unavailable, "EFAULT") || !dmabuf.OK() {
		t.Fatalf("paths %+v", r.Paths)
	}
	for _, st := range r.Steps {
		if strings.HasPrefix(st.Name, "cu") || strings.Contains(st.Name, "SYNC_MEMOPS") {
			t.Errorf("a CUDA step on AMD: %q", st.Name)
		}
		if st.Name == PathPeerMemory+": ibv_reg_mr (GPU device pointer)" && !strings.Contains(st.Cause, "amdgpu") {
			t.Errorf("peer-memory cause on AMD: %q", st.Cause)
		}
	}
	g.balanced(t, 1)
}

// A SEND into GPU memory that completes in error breaks that path; the
// next path gets the QPs back (→RESET, connected again) and is judged on
// its own.
func TestFakeGPUSendError(t *testing.T) {
	g := runGPU(t, "", "", map[string]string{"FAKE_PEERMEM": "1", "FAKE_IBV": "send-err"}, "")
	for _, name := range []string{PathPeerMemory, PathDMABuf} {
		p := gpuPath(t, g.res, name)
		if !p.Registered || p.Failed == nil || p.Failed.Name != name+": send completion IBV_WC_SUCCESS" ||
			!strings.Contains(p.Failed.Error, "IBV_WC_RETRY_EXC_ERR") {
			t.Errorf("%s: %+v", name, p)
		}
	}
	reset := false
	for _, st := range g.res.Steps {
		if st.Name == PathDMABuf+": ibv_modify_qp B →RESET" && st.OK {
			reset = true
		}
	}
	if !reset {
		t.Errorf("the QPs were not reset before the second path: %+v", g.res.Steps)
	}
	g.balanced(t, 1)
}
