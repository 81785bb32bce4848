package probe

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/verbs"
	"github.com/rdmadoctor/rdmadoctor/verbs/gpu"
)

// GPU-memory probe parameters. The registered region starts and ends on a
// 64 KiB boundary: the GPU's page size, which peer-memory registration
// pins in whole, and a multiple of the host page size, which a dma-buf
// export requires.
const (
	gpuAlign          = 64 << 10
	gpuRoundTrips     = 100
	gpuRoundTripsTime = 200 * time.Millisecond
	gpuPoison         = 0xa5 // what the region holds before the SEND
)

// gpuDriver is the child's GPU driver, opened once.
type gpuDriver struct {
	opened bool
	drv    gpu.Driver
	err    error
}

// driver opens the GPU driver libraries on the first call.
func (r *runner) driver() (gpu.Driver, error) {
	if !r.gpu.opened {
		r.gpu.opened = true
		r.gpu.drv, r.gpu.err = gpu.Open(r.opts.GPULibraries)
	}
	return r.gpu.drv, r.gpu.err
}

// gpuRig is the probe's objects: the loopback QPs, the host memory the
// SENDs come from, and the GPU region they go to.
type gpuRig struct {
	s      *session
	pd     *verbs.PD
	l      *rcLoop
	host   *verbs.Buffer
	hostMR *verbs.MR
	drv    gpu.Driver
	region gpu.Ptr // gpuAlign-aligned, inside the allocation
	n      int     // region bytes
	broken bool    // the last transfer left the QPs in error
}

// gpuMemory is probe.gpu_memory: GPU memory of the GPU nearest the NIC
// registered through peer memory and through DMA-BUF, each path then
// receiving a loopback RC SEND from host memory, read back through the GPU
// driver and compared, and timed.
func (r *runner) gpuMemory(resourcesFailed string) *GPUMemoryResult {
	res := &GPUMemoryResult{Probe: newProbe(GPUMemory), Software: r.software, Size: r.opts.Size, Paths: []GPUPath{}}
	t0 := time.Now()
	defer func() { res.Millis = millis(time.Since(t0)) }()
	if r.needsConnectedQP(&res.Probe, resourcesFailed) {
		return res
	}
	drv, ok := r.gpuDriverFor(res)
	if !ok {
		return res
	}
	s, ok := r.open(&res.Probe)
	if !ok {
		return res
	}
	defer r.teardown(&res.Probe, &s.td)
	g, ok := r.gpuSetup(res, s, drv)
	if !ok {
		return res
	}
	for _, path := range []string{PathPeerMemory, PathDMABuf} {
		res.Paths = append(res.Paths, r.gpuPath(res, g, path))
	}
	return res
}

// gpuDriverFor opens the GPU driver and picks the GPU: a host without a GPU
// driver library or without a GPU skips the probe, saying which; a driver
// that is there and fails is the probe's failed first step.
func (r *runner) gpuDriverFor(res *GPUMemoryResult) (gpu.Driver, bool) {
	p := &res.Probe
	r.begin(p, "open the GPU driver")
	drv, err := r.driver()
	var nl *gpu.NoLibraryError
	switch {
	case err == nil:
	case errors.As(err, &nl):
		p.Skipped = nl.Error()
		return nil, false
	case errors.Is(err, gpu.ErrNoDevice):
		p.Skipped = err.Error()
		return nil, false
	default:
		r.step(p, driverStep(err), func() error { return err })
		return nil, false
	}
	res.Vendor = drv.Vendor()
	res.Driver = drv.Vendor()
	if v := drv.Version(); v != "" {
		res.Driver += ", " + v
	}
	res.Driver += " (" + drv.Library() + ")"
	res.GPUs = drv.Devices()
	return drv, true
}

// driverStep names the step of a driver that failed to open: the call, or
// the library that lacks functions.
func driverStep(err error) string {
	var ge *gpu.Error
	var ms *gpu.MissingSymbolsError
	switch {
	case errors.As(err, &ge):
		return ge.Call
	case errors.As(err, &ms):
		return "dlsym " + ms.Path
	}
	return "open the GPU driver"
}

// chooseGPU picks the GPU nearest the NIC in the PCIe tree, from the
// sysfs device paths under the probe's sysfs root.
func (r *runner) chooseGPU(res *GPUMemoryResult) {
	devs := res.GPUs
	nic, err := filepath.EvalSymlinks(filepath.Join(r.opts.SysfsRoot, "class/infiniband", r.dev.Name, "device"))
	if err == nil {
		res.NICPCIAddr = filepath.Base(nic)
	}
	switch {
	case len(devs) == 1:
		res.GPU, res.Choice = &devs[0], "the only GPU"
		return
	case err != nil:
		res.GPU, res.Choice = &devs[0], fmt.Sprintf("GPU 0 of %d: %s has no PCI device to pair by (software RDMA, or sysfs unreadable)", len(devs), r.dev.Name)
		return
	}
	paths := make([]string, len(devs))
	for i, d := range devs {
		if d.PCIAddr != "" {
			paths[i] = r.devicePath(filepath.Join("bus/pci/devices", d.PCIAddr))
		}
	}
	i, shared := sysfs.Nearest(r.devicePath(filepath.Join("class/infiniband", r.dev.Name, "device")), paths)
	res.GPU = &devs[i]
	switch {
	case paths[i] == "":
		res.Choice = fmt.Sprintf("GPU %d of %d: no GPU's PCI device found in sysfs to pair with %s", i, len(devs), res.NICPCIAddr)
	case shared > 0:
		res.Choice = fmt.Sprintf("nearest of %d GPUs to %s (%s): %d PCIe bridge(s) in common below the root complex", len(devs), r.dev.Name, res.NICPCIAddr, shared)
	default:
		res.Choice = fmt.Sprintf("GPU %d of %d: none shares a PCIe switch with %s (%s)", i, len(devs), r.dev.Name, res.NICPCIAddr)
	}
}

// devicePath resolves rel below the probe's sysfs root to the /sys/devices
// path the kernel would show ("" when it does not resolve), so that a
// test's sysfs tree is read as /sys is.
func (r *runner) devicePath(rel string) string {
	p, err := filepath.EvalSymlinks(filepath.Join(r.opts.SysfsRoot, rel))
	if err != nil {
		return ""
	}
	if under, err := filepath.Rel(r.opts.SysfsRoot, p); err == nil {
		return filepath.Join("/sys", under)
	}
	return p
}

// gpuSetup builds the rig: PD, the host send buffer and its MR, the RC
// loopback, the GPU's context and a region of its memory with
// SYNC_MEMOPS set, every object on the session's teardown.
func (r *runner) gpuSetup(res *GPUMemoryResult, s *session, drv gpu.Driver) (*gpuRig, bool) {
	p := &res.Probe
	g := &gpuRig{s: s, drv: drv, n: (r.opts.Size + gpuAlign - 1) / gpuAlign * gpuAlign}
	res.RegionBytes = g.n
	r.chooseGPU(res)
	var ok bool
	if g.pd, ok = r.allocPD(p, s); !ok {
		return nil, false
	}
	if !r.step(p, "mmap page-aligned buffer", func() (err error) { g.host, err = verbs.NewBuffer(r.opts.Size); return err }) {
		return nil, false
	}
	s.td.push("munmap buffer", g.host.Free)
	if !r.step(p, "ibv_reg_mr (host buffer)", func() (err error) {
		g.hostMR, err = g.pd.RegMR(g.host, 0, r.opts.Size, verbs.AccessLocalWrite)
		return err
	}) {
		return nil, false
	}
	s.td.push("ibv_dereg_mr (host buffer)", g.hostMR.Dereg)
	g.l, ok = r.rcLoopback(p, s, g.pd)
	if g.l != nil {
		res.Addressing = g.l.addr.report(verbs.LinkLayerName(s.port.LinkLayer))
	}
	if !ok {
		return nil, false
	}
	return g, r.gpuRegion(p, g, *res.GPU)
}

// gpuRegion makes the GPU current and allocates the region, one alignment
// unit more than it needs so that it can start on a boundary.
func (r *runner) gpuRegion(p *Probe, g *gpuRig, dev gpu.Device) bool {
	c := g.drv.Calls()
	if !r.step(p, fmt.Sprintf("%s (GPU %d)", c.Activate, dev.Index), func() error { return g.drv.Activate(dev) }) {
		return false
	}
	if c.Deactivate != "" {
		g.s.td.push(c.Deactivate, g.drv.Deactivate)
	}
	var base gpu.Ptr
	if !r.step(p, fmt.Sprintf("%s %d bytes", c.Alloc, g.n+gpuAlign), func() (err error) { base, err = g.drv.Alloc(g.n + gpuAlign); return err }) {
		return false
	}
	g.s.td.push(c.Free, func() error { return g.drv.Free(base) })
	g.region = (base + gpuAlign - 1) &^ (gpuAlign - 1)
	if c.SyncMemops == "" {
		return true // the vendor's synchronous copies wait without it
	}
	return r.step(p, c.SyncMemops, func() error { return g.drv.SyncMemops(g.region) })
}

// gpuPath registers the region through one path and, when the NIC takes
// it, sends into it.
func (r *runner) gpuPath(res *GPUMemoryResult, g *gpuRig, name string) GPUPath {
	p := &res.Probe
	path := GPUPath{Name: name}
	var mr *verbs.MR
	var err error
	if name == PathPeerMemory {
		mr, err = r.gpuPeerMR(p, g)
	} else {
		mr, err = r.gpuDMABufMR(p, g)
	}
	if err != nil {
		path.Unavailable = err.Error()
		path.UnavailableStep = p.Steps[len(p.Steps)-1].Name
		if why := gpuUnavailableCause(res.Vendor, name, err); why != "" {
			p.Steps[len(p.Steps)-1].Cause = why
		}
		return path
	}
	path.Registered = true
	r.gpuTransfer(p, g, mr, &path)
	return path
}

// pathStep runs fn as a step of path name; its error comes back too.
func (r *runner) pathStep(p *Probe, path, name string, fn func() error) error {
	var err error
	r.step(p, path+": "+name, func() error { err = fn(); return err })
	return err
}

// gpuPeerMR registers the device pointer with ibv_reg_mr: the kernel
// pins user pages, which device memory has none of unless a peer-memory
// client claims the range (EFAULT otherwise).
func (r *runner) gpuPeerMR(p *Probe, g *gpuRig) (*verbs.MR, error) {
	var mr *verbs.MR
	err := r.pathStep(p, PathPeerMemory, "ibv_reg_mr (GPU device pointer)", func() (err error) {
		mr, err = g.pd.RegMRAddr(uintptr(g.region), g.n, verbs.AccessLocalWrite)
		return err
	})
	if err != nil {
		return nil, err
	}
	g.s.td.push(PathPeerMemory+": ibv_dereg_mr", mr.Dereg)
	return mr, nil
}

// gpuDMABufMR exports the region as a dma-buf and registers it with
// ibv_reg_dmabuf_mr from the offset the export gave, at the device
// pointer as iova. The descriptor is
// closed after the MR is deregistered and before the memory is freed.
func (r *runner) gpuDMABufMR(p *Probe, g *gpuRig) (*verbs.MR, error) {
	if !r.lib.HasRegDMABufMR() {
		r.pathStep(p, PathDMABuf, "ibv_reg_dmabuf_mr", func() error { return verbs.ErrNoRegDMABufMR })
		return nil, verbs.ErrNoRegDMABufMR
	}
	fd, off := -1, uint64(0)
	err := r.pathStep(p, PathDMABuf, g.drv.Calls().Export, func() (err error) { fd, off, err = g.drv.ExportDMABuf(g.region, g.n); return err })
	if err != nil {
		return nil, err
	}
	g.s.td.push(PathDMABuf+": close the dma-buf fd", func() error { return unix.Close(fd) })
	var mr *verbs.MR
	err = r.pathStep(p, PathDMABuf, "ibv_reg_dmabuf_mr", func() (err error) {
		mr, err = g.pd.RegDMABufMR(off, g.n, uint64(g.region), fd, verbs.AccessLocalWrite)
		return err
	})
	if err != nil {
		return nil, err
	}
	g.s.td.push(PathDMABuf+": ibv_dereg_mr", mr.Dereg)
	return mr, nil
}

// gpuTransfer sends from host memory into the GPU region through mr:
// the region is poisoned first, so that the comparison after the copy
// back proves the NIC wrote it; then timed round trips.
func (r *runner) gpuTransfer(p *Probe, g *gpuRig, mr *verbs.MR, path *GPUPath) {
	failed := func() { st := p.Steps[len(p.Steps)-1]; path.Failed = &st }
	if g.broken && !r.gpuReconnect(p, g, path.Name) {
		failed()
		return
	}
	size, c := r.opts.Size, g.drv.Calls()
	if r.pathStep(p, path.Name, c.CopyIn+" (poison the region)", func() error {
		return g.drv.CopyIn(g.region, bytes.Repeat([]byte{gpuPoison}, size))
	}) != nil {
		failed()
		return
	}
	send := g.host.Bytes()[:size]
	fillPattern(send, byte(len(path.Name)))
	sendWR := verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGEs: []verbs.SGE{g.hostMR.SGE(0, size)}}
	recvWR := verbs.RecvWR{ID: 2, SGEs: []verbs.SGE{mr.SGE(0, size)}}
	g.broken = true // until both completions say otherwise
	wc, ok := r.gpuSend(p, g, path.Name, sendWR, recvWR)
	if !ok {
		failed()
		return
	}
	g.broken = false
	path.ByteLen = wc.ByteLen
	got := make([]byte, size)
	if r.pathStep(p, path.Name, c.CopyOut, func() error { return g.drv.CopyOut(got, g.region) }) != nil {
		failed()
		return
	}
	path.PayloadOK = bytes.Equal(send, got) && int(wc.ByteLen) == size
	if !r.note(p, path.Name+": payload in GPU memory intact", path.PayloadOK,
		gpuPayloadError(send, got, wc.ByteLen), fmt.Sprintf("%d bytes read back with %s", size, c.CopyOut)) {
		failed()
		return
	}
	var cpu Stats
	if r.timedRoundTrips(p, g.l, sendWR, recvWR, gpuRoundTrips, gpuRoundTripsTime, &path.Latency, &cpu); !p.Steps[len(p.Steps)-1].OK {
		g.broken = true
		p.Steps[len(p.Steps)-1].Name = path.Name + ": timed round trips"
		failed()
		return
	}
	p.Steps[len(p.Steps)-1].Name = path.Name + ": timed round trips"
}

// gpuSend posts the receive into GPU memory and the SEND from host memory
// and polls both completions, which must be IBV_WC_SUCCESS.
func (r *runner) gpuSend(p *Probe, g *gpuRig, path string, sendWR verbs.SendWR, recvWR verbs.RecvWR) (verbs.WC, bool) {
	var swc, rwc verbs.WC
	if r.pathStep(p, path, "ibv_post_recv B (into GPU memory)", func() error { return g.l.b.PostRecv(recvWR) }) != nil ||
		r.pathStep(p, path, "ibv_post_send A", func() error { return g.l.a.PostSend(sendWR) }) != nil ||
		r.pathStep(p, path, "ibv_poll_cq A (send completion)", func() (err error) { swc, err = pollOne(g.l.cqA, r.pollWait()); return err }) != nil {
		return rwc, false
	}
	if !r.note(p, path+": send completion IBV_WC_SUCCESS", swc.Status == verbs.WCSuccess,
		fmt.Sprintf("send completed with %s (vendor error %#x)", swc.Status, swc.VendorErr), "") {
		return rwc, false
	}
	if r.pathStep(p, path, "ibv_poll_cq B (receive completion)", func() (err error) { rwc, err = pollOne(g.l.cqB, r.pollWait()); return err }) != nil {
		return rwc, false
	}
	return rwc, r.note(p, path+": receive completion IBV_WC_SUCCESS", rwc.Status == verbs.WCSuccess,
		fmt.Sprintf("the receive into GPU memory completed with %s (vendor error %#x)", rwc.Status, rwc.VendorErr), "")
}

// gpuReconnect brings the loopback QPs back after a path left them in
// error: both to RESET, the CQs drained, and connected again.
func (r *runner) gpuReconnect(p *Probe, g *gpuRig, path string) bool {
	reset := verbs.QPAttr{QPState: verbs.QPSReset}
	for _, q := range []struct {
		name string
		qp   *verbs.QP
	}{{"A", g.l.a}, {"B", g.l.b}} {
		if r.pathStep(p, path, "ibv_modify_qp "+q.name+" →RESET", func() error { return q.qp.Modify(&reset, verbs.MaskState) }) != nil {
			return false
		}
	}
	var wc [4]verbs.WC
	for _, cq := range []*verbs.CQ{g.l.cqA, g.l.cqB} {
		for n, err := cq.Poll(wc[:]); n > 0 && err == nil; n, err = cq.Poll(wc[:]) {
		}
	}
	if !r.connect(p, g.l.a, g.l.b, g.l.addr) {
		return false
	}
	g.broken = false
	return true
}

// gpuPayloadError says how what was read back differs from what was sent.
func gpuPayloadError(want, got []byte, byteLen uint32) string {
	if int(byteLen) != len(want) {
		return fmt.Sprintf("byte_len %d, sent %d", byteLen, len(want))
	}
	d := payloadDiff(want, got)
	if bytes.Equal(got[:min(len(got), 16)], bytes.Repeat([]byte{gpuPoison}, min(len(got), 16))) {
		d += " (the region still holds what was there before the SEND: the NIC's write did not reach GPU memory)"
	}
	return d
}

// gpuUnavailableCause is what a refused export or registration means on
// each path; empty when the generic cause of the errno says it better.
func gpuUnavailableCause(vendor, path string, err error) string {
	errno := verbs.ErrnoOf(err)
	switch {
	case path == PathPeerMemory && (errno == unix.EFAULT || errno == unix.EINVAL) && vendor == "AMD":
		return "no peer-memory client claimed the GPU address range: ROCm's amdgpu driver (amdgpu-dkms) provides it through the peer-memory " +
			"API of MLNX_OFED/DOCA-OFED's RDMA stack, with all GPU memory exposed in a PCI BAR (large BAR)"
	case path == PathPeerMemory && (errno == unix.EFAULT || errno == unix.EINVAL):
		return "no peer-memory client claimed the GPU address range: nvidia_peermem (or the older nv_peer_mem) is not loaded, " +
			"or the kernel lacks the peer-memory API it plugs into (MLNX_OFED/DOCA-OFED or a kernel patched for it)"
	case errors.Is(err, verbs.ErrNoRegDMABufMR):
		return "ibv_reg_dmabuf_mr came with rdma-core 34"
	case vendor == "NVIDIA" && gpu.IsCode(err, gpu.CUDAErrorNotSupported):
		return "the GPU driver does not export dma-bufs: that takes NVIDIA's open GPU kernel modules (R515 or newer) on Linux 5.12 or newer"
	case errno == unix.EOPNOTSUPP:
		return "the RDMA provider or its kernel driver has no dma-buf memory regions (Linux 5.12 added them, for drivers that implement them)"
	}
	var ue *gpu.UnavailableError
	if errors.As(err, &ue) {
		return ue.Why
	}
	return ""
}
