package gpu

import (
	"errors"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// DefaultHIPLibrary is the HIP runtime's development name, which ROCm
// installs as a link to the versioned soname (libamdhip64.so.6).
const DefaultHIPLibrary = "libamdhip64.so"

// hipErrorNoDevice is hipGetDeviceCount's status when the runtime finds no
// GPU (hip_runtime_api.h).
const hipErrorNoDevice = 100

func hipName(path string) string {
	if path == "" {
		return DefaultHIPLibrary
	}
	return path
}

// countHIPDevices loads the HIP runtime and asks how many GPUs it sees:
// all that is implemented for AMD. The memory probe there would take
// hipSetDevice, hipMalloc, hipMemcpy (hipMemcpyHostToDevice,
// hipMemcpyDeviceToHost), hipFree, and the dma-buf export
// hsa_amd_portable_export_dmabuf from libhsa-runtime64.so.1, behind the
// same Driver interface.
func countHIPDevices(path string) (int, error) {
	path = hipName(path)
	h, err := dlopen(path)
	if err != nil {
		return 0, err
	}
	fn, err := purego.Dlsym(h, "hipGetDeviceCount")
	if err != nil || fn == 0 {
		return 0, &MissingSymbolsError{Path: path, Symbols: []string{"hipGetDeviceCount"}}
	}
	n := new(int32)
	r, _, _ := purego.SyscallN(fn, uintptr(unsafe.Pointer(n)))
	runtime.KeepAlive(n)
	switch code := int(int32(r)); code {
	case 0:
		return int(*n), nil
	case hipErrorNoDevice:
		return 0, nil
	default:
		return 0, errors.Join(&Error{Call: "hipGetDeviceCount", Code: code})
	}
}
