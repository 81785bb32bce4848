package gpu

import (
	"errors"
	"fmt"
)

// Error is a failed driver call: the function and the status it returned.
type Error struct {
	Call string // "cuMemAlloc_v2"
	Code int    // the CUresult or hipError_t
	Name string // "CUDA_ERROR_OUT_OF_MEMORY"
}

func (e *Error) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("%s returned %d", e.Call, e.Code)
	}
	return fmt.Sprintf("%s: %s (%d)", e.Call, e.Name, e.Code)
}

// CUresult values the probe meets, from cuda.h. The driver's own
// cuGetErrorName is asked first; this table names a status when that call
// fails or is missing.
const (
	cudaSuccess              = 0
	cudaErrorInvalidValue    = 1
	cudaErrorOutOfMemory     = 2
	cudaErrorNotInitialized  = 3
	cudaErrorNoDevice        = 100
	cudaErrorInvalidDevice   = 101
	cudaErrorInvalidContext  = 201
	cudaErrorNotSupported    = 801
	cudaErrorDriverMismatch  = 803
	cudaErrorCompatNotOnDev  = 804
	cudaErrorStubLibrary     = 34
	cudaErrorDeviceUnavail   = 46
	cudaErrorOperatingSystem = 304
	cudaErrorNotPermitted    = 800
	cudaErrorSystemNotReady  = 802
	cudaErrorUnknown         = 999
)

var cudaErrorNames = map[int]string{
	cudaSuccess:              "CUDA_SUCCESS",
	cudaErrorInvalidValue:    "CUDA_ERROR_INVALID_VALUE",
	cudaErrorOutOfMemory:     "CUDA_ERROR_OUT_OF_MEMORY",
	cudaErrorNotInitialized:  "CUDA_ERROR_NOT_INITIALIZED",
	4:                        "CUDA_ERROR_DEINITIALIZED",
	cudaErrorStubLibrary:     "CUDA_ERROR_STUB_LIBRARY",
	cudaErrorDeviceUnavail:   "CUDA_ERROR_DEVICE_UNAVAILABLE",
	cudaErrorNoDevice:        "CUDA_ERROR_NO_DEVICE",
	cudaErrorInvalidDevice:   "CUDA_ERROR_INVALID_DEVICE",
	102:                      "CUDA_ERROR_DEVICE_NOT_LICENSED",
	cudaErrorInvalidContext:  "CUDA_ERROR_INVALID_CONTEXT",
	cudaErrorOperatingSystem: "CUDA_ERROR_OPERATING_SYSTEM",
	400:                      "CUDA_ERROR_INVALID_HANDLE",
	500:                      "CUDA_ERROR_NOT_FOUND",
	700:                      "CUDA_ERROR_ILLEGAL_ADDRESS",
	cudaErrorNotPermitted:    "CUDA_ERROR_NOT_PERMITTED",
	cudaErrorNotSupported:    "CUDA_ERROR_NOT_SUPPORTED",
	cudaErrorSystemNotReady:  "CUDA_ERROR_SYSTEM_NOT_READY",
	cudaErrorDriverMismatch:  "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	cudaErrorCompatNotOnDev:  "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
	cudaErrorUnknown:         "CUDA_ERROR_UNKNOWN",
}

// CUDAErrorName is the cuda.h name of a CUresult the table knows, ""
// otherwise.
func CUDAErrorName(code int) string { return cudaErrorNames[code] }

// IsCode reports whether err is a driver *Error with status code.
func IsCode(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// CUDA statuses callers judge by.
const (
	CUDAErrorNoDevice     = cudaErrorNoDevice
	CUDAErrorNotSupported = cudaErrorNotSupported
	CUDAErrorOutOfMemory  = cudaErrorOutOfMemory
)
