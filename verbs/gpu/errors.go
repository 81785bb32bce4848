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

// CUresult values the binding and its callers judge by (cuda.h).
const (
	cudaSuccess           = 0
	CUDAErrorNoDevice     = 100
	CUDAErrorNotSupported = 801
)

// cudaErrorNames names the CUresults the probe meets, from cuda.h. The
// driver's own cuGetErrorName is asked first; this table names a status
// when that call fails or is missing.
var cudaErrorNames = map[int]string{
	0:   "CUDA_SUCCESS",
	1:   "CUDA_ERROR_INVALID_VALUE",
	2:   "CUDA_ERROR_OUT_OF_MEMORY",
	3:   "CUDA_ERROR_NOT_INITIALIZED",
	4:   "CUDA_ERROR_DEINITIALIZED",
	34:  "CUDA_ERROR_STUB_LIBRARY",
	46:  "CUDA_ERROR_DEVICE_UNAVAILABLE",
	100: "CUDA_ERROR_NO_DEVICE",
	101: "CUDA_ERROR_INVALID_DEVICE",
	102: "CUDA_ERROR_DEVICE_NOT_LICENSED",
	201: "CUDA_ERROR_INVALID_CONTEXT",
	304: "CUDA_ERROR_OPERATING_SYSTEM",
	400: "CUDA_ERROR_INVALID_HANDLE",
	500: "CUDA_ERROR_NOT_FOUND",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	800: "CUDA_ERROR_NOT_PERMITTED",
	801: "CUDA_ERROR_NOT_SUPPORTED",
	802: "CUDA_ERROR_SYSTEM_NOT_READY",
	803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
	999: "CUDA_ERROR_UNKNOWN",
}

// CUDAErrorName is the cuda.h name of a CUresult the table knows, ""
// otherwise.
func CUDAErrorName(code int) string { return cudaErrorNames[code] }

// IsCode reports whether err is a driver *Error with status code.
func IsCode(err error, code int) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
