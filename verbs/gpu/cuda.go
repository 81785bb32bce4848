package gpu

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// DefaultCUDALibrary is the soname of NVIDIA's driver API, installed with
// the kernel driver (not with the CUDA toolkit).
const DefaultCUDALibrary = "libcuda.so.1"

// CUDA enum values from cuda.h.
const (
	cuPointerAttributeSyncMemops = 6   // CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
	cuMemRangeHandleTypeDMABufFD = 1   // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD
	cuDeviceAttrGPUDirectRDMA    = 116 // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED
	cuDeviceAttrDMABufSupported  = 124 // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
	cudaDMABufSince              = "the CUDA driver is older than 11.7 (R515), which added cuMemGetHandleForAddressRange"
	cudaNameLen                  = 256
	cudaBusIDLen                 = 64
)

// CUDA is libcuda.so.1, initialised, with its devices listed.
type CUDA struct {
	path    string
	version int // cuDriverGetVersion: 1000×major + 10×minor
	devices []Device
	ctx     uintptr // the retained primary context
	ctxDev  int32

	cuInit, cuDriverGetVersion, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName uintptr
	cuDeviceGetPCIBusId, cuDeviceGetAttribute, cuDevicePrimaryCtxRetain        uintptr
	cuDevicePrimaryCtxRelease, cuCtxSetCurrent, cuMemAlloc, cuMemFree          uintptr
	cuMemcpyHtoD, cuMemcpyDtoH, cuPointerSetAttribute, cuGetErrorName          uintptr
	cuMemGetHandleForAddressRange                                              uintptr // optional: CUDA 11.7+
}

type cudaSymbol struct {
	names    []string // the first one exported is used
	addr     *uintptr
	optional bool
}

func (c *CUDA) symbols() []cudaSymbol {
	return []cudaSymbol{
		{[]string{"cuInit"}, &c.cuInit, false},
		{[]string{"cuDriverGetVersion"}, &c.cuDriverGetVersion, false},
		{[]string{"cuDeviceGetCount"}, &c.cuDeviceGetCount, false},
		{[]string{"cuDeviceGet"}, &c.cuDeviceGet, false},
		{[]string{"cuDeviceGetName"}, &c.cuDeviceGetName, false},
		{[]string{"cuDeviceGetPCIBusId"}, &c.cuDeviceGetPCIBusId, false},
		{[]string{"cuDeviceGetAttribute"}, &c.cuDeviceGetAttribute, false},
		{[]string{"cuDevicePrimaryCtxRetain"}, &c.cuDevicePrimaryCtxRetain, false},
		// cuda.h maps the name to _v2 since CUDA 11.0; older drivers
		// export the first only.
		{[]string{"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}, &c.cuDevicePrimaryCtxRelease, false},
		{[]string{"cuCtxSetCurrent"}, &c.cuCtxSetCurrent, false},
		{[]string{"cuMemAlloc_v2"}, &c.cuMemAlloc, false},
		{[]string{"cuMemFree_v2"}, &c.cuMemFree, false},
		{[]string{"cuMemcpyHtoD_v2"}, &c.cuMemcpyHtoD, false},
		{[]string{"cuMemcpyDtoH_v2"}, &c.cuMemcpyDtoH, false},
		{[]string{"cuPointerSetAttribute"}, &c.cuPointerSetAttribute, false},
		{[]string{"cuGetErrorName"}, &c.cuGetErrorName, true},
		{[]string{"cuMemGetHandleForAddressRange"}, &c.cuMemGetHandleForAddressRange, true},
	}
}

// OpenCUDA loads libcuda (DefaultCUDALibrary when path is empty),
// initialises it and lists its devices. A library that loads but sees no
// GPU (cuInit's CUDA_ERROR_NO_DEVICE, or a count of zero) is an error
// wrapping ErrNoDevice. Call it on the OS thread that will use the driver.
func OpenCUDA(path string) (*CUDA, error) {
	if path == "" {
		path = DefaultCUDALibrary
	}
	h, err := dlopen(path)
	if err != nil {
		return nil, err
	}
	c := &CUDA{path: path}
	if err := resolve(h, path, c.symbols()); err != nil {
		return nil, err
	}
	if err := c.status("cuInit", c.cuInit, 0); err != nil {
		if IsCode(err, CUDAErrorNoDevice) {
			return nil, fmt.Errorf("%w: %s: %v", ErrNoDevice, path, err)
		}
		return nil, err
	}
	if v, err := c.outInt("cuDriverGetVersion", c.cuDriverGetVersion); err == nil {
		c.version = int(v)
	}
	n, err := c.outInt("cuDeviceGetCount", c.cuDeviceGetCount)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: %s: cuDeviceGetCount reports 0 devices", ErrNoDevice, path)
	}
	for i := 0; i < int(n); i++ {
		d, err := c.device(i)
		if err != nil {
			return nil, err
		}
		c.devices = append(c.devices, d)
	}
	return c, nil
}

// device describes CUDA device i: name, PCI bus id and the two
// GPUDirect attributes.
func (c *CUDA) device(i int) (Device, error) {
	d := Device{Index: i}
	dev, err := c.outInt("cuDeviceGet", c.cuDeviceGet, uintptr(i))
	if err != nil {
		return d, err
	}
	buf := make([]byte, cudaNameLen)
	if err := c.status("cuDeviceGetName", c.cuDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(dev)); err != nil {
		return d, err
	}
	d.Name = cString(buf)
	runtime.KeepAlive(buf)
	bus := make([]byte, cudaBusIDLen)
	if err := c.status("cuDeviceGetPCIBusId", c.cuDeviceGetPCIBusId, uintptr(unsafe.Pointer(&bus[0])), uintptr(len(bus)), uintptr(dev)); err != nil {
		return d, err
	}
	d.PCIBusID = cString(bus)
	runtime.KeepAlive(bus)
	if a, err := ParsePCIAddr(d.PCIBusID); err == nil {
		d.PCIAddr = a
	}
	// An attribute the driver does not know (older than the attribute)
	// is left unknown, not false.
	if v, err := c.outInt("cuDeviceGetAttribute", c.cuDeviceGetAttribute, cuDeviceAttrGPUDirectRDMA, uintptr(dev)); err == nil {
		b := v != 0
		d.GPUDirectRDMA = &b
	}
	if v, err := c.outInt("cuDeviceGetAttribute", c.cuDeviceGetAttribute, cuDeviceAttrDMABufSupported, uintptr(dev)); err == nil {
		b := v != 0
		d.DMABuf = &b
	}
	return d, nil
}

// Vendor is "NVIDIA".
func (c *CUDA) Vendor() string { return "NVIDIA" }

// Library is the name libcuda was opened by.
func (c *CUDA) Library() string { return c.path }

// Version is the driver's CUDA version, "CUDA driver 12.4".
func (c *CUDA) Version() string {
	if c.version == 0 {
		return ""
	}
	return fmt.Sprintf("CUDA driver %d.%d", c.version/1000, c.version%1000/10)
}

// Devices lists the GPUs in CUDA's order.
func (c *CUDA) Devices() []Device { return c.devices }

// Calls names the driver API functions behind each method.
func (c *CUDA) Calls() Calls {
	return Calls{
		Activate: "cuDevicePrimaryCtxRetain", Deactivate: "cuDevicePrimaryCtxRelease",
		Alloc: "cuMemAlloc_v2", Free: "cuMemFree_v2", SyncMemops: "cuPointerSetAttribute SYNC_MEMOPS",
		CopyIn: "cuMemcpyHtoD_v2", CopyOut: "cuMemcpyDtoH_v2", Export: "cuMemGetHandleForAddressRange DMA_BUF_FD",
	}
}

// Activate retains dev's primary context and makes it current on this
// thread.
func (c *CUDA) Activate(dev Device) error {
	if c.ctx != 0 {
		return fmt.Errorf("cuDevicePrimaryCtxRetain: device %d's context is still held", c.ctxDev)
	}
	d, err := c.outInt("cuDeviceGet", c.cuDeviceGet, uintptr(dev.Index))
	if err != nil {
		return err
	}
	ctx, err := c.outPtr("cuDevicePrimaryCtxRetain", c.cuDevicePrimaryCtxRetain, uintptr(d))
	if err != nil {
		return err
	}
	c.ctx, c.ctxDev = ctx, d
	if err := c.status("cuCtxSetCurrent", c.cuCtxSetCurrent, ctx); err != nil {
		return errors.Join(err, c.Deactivate())
	}
	return nil
}

// Deactivate detaches the context from this thread and releases it.
func (c *CUDA) Deactivate() error {
	if c.ctx == 0 {
		return nil
	}
	_ = c.status("cuCtxSetCurrent", c.cuCtxSetCurrent, 0)
	if err := c.status("cuDevicePrimaryCtxRelease", c.cuDevicePrimaryCtxRelease, uintptr(c.ctxDev)); err != nil {
		return err
	}
	c.ctx = 0
	return nil
}

// Alloc is cuMemAlloc_v2.
func (c *CUDA) Alloc(size int) (Ptr, error) {
	p, err := c.outPtr("cuMemAlloc_v2", c.cuMemAlloc, uintptr(size))
	return Ptr(p), err
}

// Free is cuMemFree_v2.
func (c *CUDA) Free(p Ptr) error { return c.status("cuMemFree_v2", c.cuMemFree, uintptr(p)) }

// SyncMemops sets CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on the allocation.
func (c *CUDA) SyncMemops(p Ptr) error {
	one := new(uint32)
	*one = 1
	err := c.status("cuPointerSetAttribute", c.cuPointerSetAttribute, uintptr(unsafe.Pointer(one)), cuPointerAttributeSyncMemops, uintptr(p))
	runtime.KeepAlive(one)
	return err
}

// CopyIn is cuMemcpyHtoD_v2 (synchronous).
func (c *CUDA) CopyIn(dst Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	err := c.status("cuMemcpyHtoD_v2", c.cuMemcpyHtoD, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)))
	runtime.KeepAlive(src)
	return err
}

// CopyOut is cuMemcpyDtoH_v2 (synchronous).
func (c *CUDA) CopyOut(dst []byte, src Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	err := c.status("cuMemcpyDtoH_v2", c.cuMemcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)))
	runtime.KeepAlive(dst)
	return err
}

// ExportDMABuf is cuMemGetHandleForAddressRange with
// CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD. The range must be aligned to the
// host page size; the dma-buf starts at it (offset 0).
func (c *CUDA) ExportDMABuf(p Ptr, size int) (int, uint64, error) {
	if c.cuMemGetHandleForAddressRange == 0 {
		return -1, 0, &UnavailableError{Call: "cuMemGetHandleForAddressRange", Why: cudaDMABufSince}
	}
	fd := new(int32)
	*fd = -1
	err := c.status("cuMemGetHandleForAddressRange", c.cuMemGetHandleForAddressRange,
		uintptr(unsafe.Pointer(fd)), uintptr(p), uintptr(size), cuMemRangeHandleTypeDMABufFD, 0)
	runtime.KeepAlive(fd)
	if err != nil {
		return -1, 0, err
	}
	return int(*fd), 0, nil
}

// status calls fn and turns a CUresult other than CUDA_SUCCESS into an
// *Error named by the driver (cuGetErrorName) or the table.
func (c *CUDA) status(call string, fn uintptr, args ...uintptr) error {
	r, _, _ := purego.SyscallN(fn, args...)
	code := int(int32(r))
	if code == cudaSuccess {
		return nil
	}
	return &Error{Call: call, Code: code, Name: c.errorName(code)}
}

func (c *CUDA) errorName(code int) string {
	if c.cuGetErrorName != 0 {
		out := new(uintptr)
		r, _, _ := purego.SyscallN(c.cuGetErrorName, uintptr(code), uintptr(unsafe.Pointer(out)))
		runtime.KeepAlive(out)
		if int32(r) == cudaSuccess && *out != 0 {
			return goString(*out, 64)
		}
	}
	return CUDAErrorName(code)
}

// outInt calls fn(&out, args...) for a C int result.
func (c *CUDA) outInt(call string, fn uintptr, args ...uintptr) (int32, error) {
	out := new(int32)
	err := c.status(call, fn, append([]uintptr{uintptr(unsafe.Pointer(out))}, args...)...)
	runtime.KeepAlive(out)
	return *out, err
}

// outPtr calls fn(&out, args...) for a pointer-sized result.
func (c *CUDA) outPtr(call string, fn uintptr, args ...uintptr) (uintptr, error) {
	out := new(uintptr)
	err := c.status(call, fn, append([]uintptr{uintptr(unsafe.Pointer(out))}, args...)...)
	runtime.KeepAlive(out)
	return *out, err
}
