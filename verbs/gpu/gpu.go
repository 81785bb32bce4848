// Package gpu binds the GPU vendors' driver libraries for the GPU-memory
// probe: enough of each to find the GPUs, allocate device memory, copy to
// and from it and export it as a dma-buf, so that a NIC can be asked to
// register it.
//
// Like libibverbs in package verbs, each library is opened at run time
// with purego (dlopen/dlsym), so a binary built with CGO_ENABLED=0 starts
// on a host without any GPU stack; Open then says which library did not
// load and why. Every failed driver call is an *Error that names the call
// and the driver's own status (CUDA_ERROR_NO_DEVICE, ...).
//
// NVIDIA's driver API (libcuda.so.1) and AMD's HIP runtime
// (libamdhip64.so, with the dma-buf export of the HSA runtime under it,
// libhsa-runtime64.so.1) stand behind one interface, Driver.
//
// The CUDA driver keeps the current context per OS thread: a Driver must
// be used from one goroutine locked to its OS thread
// (runtime.LockOSThread), as the probe child is.
package gpu

import (
	"errors"
	"fmt"
	"strings"
)

// Ptr is a device address (CUdeviceptr, a HIP device pointer). It is not
// host memory: the CPU reads and writes it only through the Copy calls.
type Ptr uintptr

// Device is one GPU as its driver numbers it.
type Device struct {
	Index int    `json:"index"` // the driver's ordinal (CUDA device N)
	Name  string `json:"name"`  // "NVIDIA H100 80GB HBM3"
	// PCIBusID is the driver's bus id as it gave it ("0000:3B:00.0");
	// PCIAddr is the same normalised to sysfs' form ("0000:3b:00.0"),
	// empty when the driver's text does not parse.
	PCIBusID string `json:"pci_bus_id"`
	PCIAddr  string `json:"pci_addr,omitempty"`
	// GPUDirectRDMA and DMABuf are the device attributes the driver
	// reports (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED,
	// CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED); nil when it could not say.
	GPUDirectRDMA *bool `json:"gpudirect_rdma_supported,omitempty"`
	DMABuf        *bool `json:"dma_buf_supported,omitempty"`
}

// Calls names the vendor's functions behind each Driver method, for the
// probe's step names.
type Calls struct {
	Activate, Deactivate, Alloc, Free, SyncMemops, CopyIn, CopyOut, Export string
}

// Driver is one vendor's driver library, initialised, with its GPUs.
type Driver interface {
	Vendor() string  // "NVIDIA"
	Library() string // the name it was opened by
	Version() string // "CUDA driver 12.4"; empty when unknown
	Calls() Calls
	Devices() []Device
	// Activate makes dev the GPU the calls below use (CUDA: retain its
	// primary context and make it current). Deactivate undoes it.
	Activate(dev Device) error
	Deactivate() error
	Alloc(size int) (Ptr, error)
	Free(p Ptr) error
	// SyncMemops makes every synchronous copy on p wait for earlier work
	// on it to finish, as GPUDirect RDMA requires of memory a NIC writes.
	SyncMemops(p Ptr) error
	CopyIn(dst Ptr, src []byte) error
	CopyOut(dst []byte, src Ptr) error
	// ExportDMABuf returns a dma-buf file descriptor for [p, p+size) and
	// the offset of p in the buffer it stands for (CUDA's starts at p, 0;
	// ROCm's is the whole allocation): the caller closes it. An
	// *UnavailableError when the library lacks the export call.
	ExportDMABuf(p Ptr, size int) (fd int, offset uint64, err error)
}

// LoadError says the dynamic loader could not open a driver library.
type LoadError struct {
	Path   string
	Loader string // dlerror's message
}

func (e *LoadError) Error() string { return fmt.Sprintf("dlopen %s: %s", e.Path, e.Loader) }

// MissingSymbolsError lists the functions a library must have and lacks.
type MissingSymbolsError struct {
	Path    string
	Symbols []string
}

func (e *MissingSymbolsError) Error() string {
	return fmt.Sprintf("%s lacks %d function(s) the probe needs: %s", e.Path, len(e.Symbols), strings.Join(e.Symbols, ", "))
}

// UnavailableError is an optional function the loaded library lacks, and
// what that means.
type UnavailableError struct {
	Call string // "cuMemGetHandleForAddressRange"
	Why  string // "the CUDA driver is older than 11.7 (R515)"
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("%s: not exported by this library: %s", e.Call, e.Why)
}

// ErrNoDevice is wrapped by Open when the library loads but reports no
// GPU: the probe does not apply.
var ErrNoDevice = errors.New("no GPU")

// NoLibraryError is Open's answer when no vendor's library loads: each
// library's loader message.
type NoLibraryError struct {
	Errs []error
}

func (e *NoLibraryError) Error() string {
	parts := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		parts[i] = err.Error()
	}
	return "no GPU driver library loads: " + strings.Join(parts, "; ")
}

// Libraries are the driver libraries Open tries; empty fields take the
// sonames a program linked against them loads.
type Libraries struct {
	CUDA string // libcuda.so.1
	HIP  string // libamdhip64.so
	HSA  string // libhsa-runtime64.so.1
}

// Open loads the first vendor library that has GPUs: CUDA, then HIP.
// It returns a *NoLibraryError when neither loads, an error wrapping
// ErrNoDevice when those that load see no GPU, and any other error (an
// *Error, a *MissingSymbolsError) when a library that is there fails.
func Open(libs Libraries) (Driver, error) {
	cuda, cerr := OpenCUDA(libs.CUDA)
	if cerr == nil {
		return cuda, nil
	}
	if !absent(cerr) {
		return nil, cerr // CUDA is there and broken: that is the finding
	}
	hip, herr := OpenHIP(libs.HIP, libs.HSA)
	switch {
	case herr == nil:
		return hip, nil
	case !absent(herr):
		return nil, herr
	case errors.As(cerr, new(*LoadError)) && errors.As(herr, new(*LoadError)):
		return nil, &NoLibraryError{Errs: []error{cerr, herr}}
	case errors.Is(cerr, ErrNoDevice):
		return nil, fmt.Errorf("%w; %v", cerr, herr)
	}
	return nil, fmt.Errorf("%w; %v", herr, cerr)
}

// absent tells a library that is not there, or sees no GPU, from one that
// failed.
func absent(err error) bool {
	return errors.As(err, new(*LoadError)) || errors.Is(err, ErrNoDevice)
}
