package gpu

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The HIP runtime's and the HSA runtime's names: the development name
// ROCm installs as a link to the versioned soname (libamdhip64.so.6), and
// the HSA runtime's soname.
const (
	DefaultHIPLibrary = "libamdhip64.so"
	DefaultHSALibrary = "libhsa-runtime64.so.1"
)

// HIP values from hip_runtime_api.h and hsa.h.
const (
	hipSuccess            = 0
	hipErrorNoDevice      = 100
	hipMemcpyHostToDevice = 1
	hipMemcpyDeviceToHost = 2
	hsaStatusSuccess      = 0
	hipDMABufWhy          = "this ROCm runtime has no dma-buf export (hsa_amd_portable_export_dmabuf)"
)

// HIP is AMD's HIP runtime (libamdhip64.so), with the HSA runtime's
// dma-buf export, initialised, with its devices listed.
type HIP struct {
	path    string
	hsaPath string
	version int
	devices []Device
	device  int // the device made current, -1 none

	hipInit, hipDriverGetVersion, hipGetDeviceCount, hipDeviceGetName, hipDeviceGetPCIBusId uintptr
	hipSetDevice, hipMalloc, hipFree, hipMemcpy, hipGetErrorName                            uintptr
	hsaExportDMABuf                                                                         uintptr // optional
}

func (h *HIP) symbols() []cudaSymbol {
	return []cudaSymbol{
		{[]string{"hipInit"}, &h.hipInit, false},
		{[]string{"hipDriverGetVersion"}, &h.hipDriverGetVersion, true},
		{[]string{"hipGetDeviceCount"}, &h.hipGetDeviceCount, false},
		{[]string{"hipDeviceGetName"}, &h.hipDeviceGetName, false},
		{[]string{"hipDeviceGetPCIBusId"}, &h.hipDeviceGetPCIBusId, false},
		{[]string{"hipSetDevice"}, &h.hipSetDevice, false},
		{[]string{"hipMalloc"}, &h.hipMalloc, false},
		{[]string{"hipFree"}, &h.hipFree, false},
		{[]string{"hipMemcpy"}, &h.hipMemcpy, false},
		{[]string{"hipGetErrorName"}, &h.hipGetErrorName, true},
	}
}

// OpenHIP loads the HIP runtime (DefaultHIPLibrary when hipPath is
// empty) and, for the dma-buf export, the HSA runtime it runs on
// (DefaultHSALibrary when hsaPath is empty: the same library HIP loaded),
// initialises HIP and lists its devices. No GPU is an error wrapping
// ErrNoDevice.
func OpenHIP(hipPath, hsaPath string) (*HIP, error) {
	h := &HIP{path: hipName(hipPath), hsaPath: hsaPath, device: -1}
	if h.hsaPath == "" {
		h.hsaPath = DefaultHSALibrary
	}
	lib, err := dlopen(h.path)
	if err != nil {
		return nil, err
	}
	if err := resolve(lib, h.path, h.symbols()); err != nil {
		return nil, err
	}
	if err := h.status("hipInit", h.hipInit, 0); err != nil {
		if IsCode(err, hipErrorNoDevice) {
			return nil, fmt.Errorf("%w: %s: %v", ErrNoDevice, h.path, err)
		}
		return nil, err
	}
	if h.hipDriverGetVersion != 0 {
		if v, err := h.outInt("hipDriverGetVersion", h.hipDriverGetVersion); err == nil {
			h.version = int(v)
		}
	}
	n, err := h.outInt("hipGetDeviceCount", h.hipGetDeviceCount)
	switch {
	case IsCode(err, hipErrorNoDevice) || (err == nil && n == 0):
		return nil, fmt.Errorf("%w: %s: hipGetDeviceCount reports no device", ErrNoDevice, h.path)
	case err != nil:
		return nil, err
	}
	for i := 0; i < int(n); i++ {
		d, err := h.describe(i)
		if err != nil {
			return nil, err
		}
		h.devices = append(h.devices, d)
	}
	// The export lives in the HSA runtime; HIP has loaded it already,
	// so this finds the same copy.
	if hsa, err := dlopen(h.hsaPath); err == nil {
		if addr, err := purego.Dlsym(hsa, "hsa_amd_portable_export_dmabuf"); err == nil {
			h.hsaExportDMABuf = addr
		}
	}
	return h, nil
}

func (h *HIP) describe(i int) (Device, error) {
	d := Device{Index: i}
	buf := make([]byte, cudaNameLen)
	if err := h.status("hipDeviceGetName", h.hipDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(i)); err != nil {
		return d, err
	}
	d.Name = cString(buf)
	bus := make([]byte, cudaBusIDLen)
	if err := h.status("hipDeviceGetPCIBusId", h.hipDeviceGetPCIBusId, uintptr(unsafe.Pointer(&bus[0])), uintptr(len(bus)), uintptr(i)); err != nil {
		return d, err
	}
	d.PCIBusID = cString(bus)
	runtime.KeepAlive(buf)
	runtime.KeepAlive(bus)
	if a, err := ParsePCIAddr(d.PCIBusID); err == nil {
		d.PCIAddr = a
	}
	return d, nil
}

// Vendor is "AMD".
func (h *HIP) Vendor() string { return "AMD" }

// Library is the name the HIP runtime was opened by.
func (h *HIP) Library() string { return h.path }

// Version is the HIP driver version as the runtime reports it.
func (h *HIP) Version() string {
	if h.version == 0 {
		return ""
	}
	return fmt.Sprintf("HIP driver version %d", h.version)
}

// Devices lists the GPUs in HIP's order.
func (h *HIP) Devices() []Device { return h.devices }

// Calls names the HIP functions behind each method. HIP has no
// SYNC_MEMOPS attribute (its synchronous copies wait for the device) and
// nothing to release for hipSetDevice: those stay empty.
func (h *HIP) Calls() Calls {
	return Calls{Activate: "hipSetDevice", Alloc: "hipMalloc", Free: "hipFree", CopyIn: "hipMemcpy HostToDevice",
		CopyOut: "hipMemcpy DeviceToHost", Export: "hsa_amd_portable_export_dmabuf"}
}

// Activate is hipSetDevice.
func (h *HIP) Activate(dev Device) error {
	if err := h.status("hipSetDevice", h.hipSetDevice, uintptr(dev.Index)); err != nil {
		return err
	}
	h.device = dev.Index
	return nil
}

// Deactivate has nothing to undo.
func (h *HIP) Deactivate() error { return nil }

// Alloc is hipMalloc.
func (h *HIP) Alloc(size int) (Ptr, error) {
	out := new(uintptr)
	err := h.status("hipMalloc", h.hipMalloc, uintptr(unsafe.Pointer(out)), uintptr(size))
	runtime.KeepAlive(out)
	return Ptr(*out), err
}

// Free is hipFree.
func (h *HIP) Free(p Ptr) error { return h.status("hipFree", h.hipFree, uintptr(p)) }

// SyncMemops has no HIP counterpart.
func (h *HIP) SyncMemops(Ptr) error { return nil }

// CopyIn is hipMemcpy host to device (synchronous).
func (h *HIP) CopyIn(dst Ptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	err := h.status("hipMemcpy", h.hipMemcpy, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)), hipMemcpyHostToDevice)
	runtime.KeepAlive(src)
	return err
}

// CopyOut is hipMemcpy device to host (synchronous).
func (h *HIP) CopyOut(dst []byte, src Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	err := h.status("hipMemcpy", h.hipMemcpy, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)), hipMemcpyDeviceToHost)
	runtime.KeepAlive(dst)
	return err
}

// ExportDMABuf is hsa_amd_portable_export_dmabuf: the descriptor stands
// for the whole allocation, and offset says where the range starts in it.
func (h *HIP) ExportDMABuf(p Ptr, size int) (int, uint64, error) {
	if h.hsaExportDMABuf == 0 {
		return -1, 0, &UnavailableError{Call: "hsa_amd_portable_export_dmabuf", Why: hipDMABufWhy}
	}
	fd, off := new(int32), new(uint64)
	r, _, _ := purego.SyscallN(h.hsaExportDMABuf, uintptr(p), uintptr(size), uintptr(unsafe.Pointer(fd)), uintptr(unsafe.Pointer(off)))
	runtime.KeepAlive(fd)
	runtime.KeepAlive(off)
	if code := int(int32(r)); code != hsaStatusSuccess {
		return -1, 0, &Error{Call: "hsa_amd_portable_export_dmabuf", Code: code, Name: hsaStatusName(code)}
	}
	return int(*fd), *off, nil
}

// hsaStatusName names the hsa_status_t values the export returns (hsa.h).
func hsaStatusName(code int) string {
	return map[int]string{
		0x1000: "HSA_STATUS_ERROR", 0x1001: "HSA_STATUS_ERROR_INVALID_ARGUMENT",
		0x100b: "HSA_STATUS_ERROR_NOT_INITIALIZED", 0x1002: "HSA_STATUS_ERROR_INVALID_QUEUE_CREATION",
	}[code]
}

func (h *HIP) status(call string, fn uintptr, args ...uintptr) error {
	r, _, _ := purego.SyscallN(fn, args...)
	code := int(int32(r))
	if code == hipSuccess {
		return nil
	}
	name := ""
	if h.hipGetErrorName != 0 {
		if p, _, _ := purego.SyscallN(h.hipGetErrorName, uintptr(code)); p != 0 {
			name = goString(p, 64)
		}
	}
	return &Error{Call: call, Code: code, Name: name}
}

func (h *HIP) outInt(call string, fn uintptr, args ...uintptr) (int32, error) {
	out := new(int32)
	err := h.status(call, fn, append([]uintptr{uintptr(unsafe.Pointer(out))}, args...)...)
	runtime.KeepAlive(out)
	return *out, err
}

func hipName(path string) string {
	if path == "" {
		return DefaultHIPLibrary
	}
	return path
}

// resolve looks every symbol up in the library at handle lib; a
// *MissingSymbolsError names the required ones it lacks.
func resolve(lib uintptr, path string, syms []cudaSymbol) error {
	var missing []string
	for _, s := range syms {
		for _, name := range s.names {
			if addr, err := purego.Dlsym(lib, name); err == nil && addr != 0 {
				*s.addr = addr
				break
			}
		}
		if *s.addr == 0 && !s.optional {
			missing = append(missing, s.names[0])
		}
	}
	if len(missing) > 0 {
		return &MissingSymbolsError{Path: path, Symbols: missing}
	}
	return nil
}
