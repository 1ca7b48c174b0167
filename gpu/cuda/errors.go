package cuda

import "fmt"

// Result is a CUresult code of the driver API. It is an error so that errors.Is(err, cuda.ErrorNoDevice)
// matches an *Error carrying that code.
type Result int32

func (r Result) Error() string { return fmt.Sprintf("CUresult %d", int32(r)) }

// CUresult codes this package and its callers test for (values from the driver API's cuda.h).
const (
	Success                    Result = 0
	ErrorInvalidValue          Result = 1
	ErrorOutOfMemory           Result = 2
	ErrorNotInitialized        Result = 3
	ErrorStubLibrary           Result = 34
	ErrorInsufficientDriver    Result = 35
	ErrorNoDevice              Result = 100
	ErrorInvalidDevice         Result = 101
	ErrorNoBinaryForGPU        Result = 209
	ErrorInvalidPTX            Result = 218
	ErrorUnsupportedPTXVersion Result = 222
	ErrorNotFound              Result = 500
	ErrorNotReady              Result = 600
	ErrorLaunchFailed          Result = 719
)

// Error is a failed driver API call: the function, the CUresult code and the driver's own name and
// description of it (from cuGetErrorName and cuGetErrorString).
type Error struct {
	Func    string
	Code    Result
	Name    string // e.g. CUDA_ERROR_NO_DEVICE
	Message string // e.g. no CUDA-capable device is detected
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%d): %s", e.Func, e.Name, int32(e.Code), e.Message)
}

// Is matches a Result target with the same code.
func (e *Error) Is(target error) bool {
	r, ok := target.(Result)
	return ok && r == e.Code
}

// NVRTCResult is an nvrtcResult code.
type NVRTCResult int32

func (r NVRTCResult) Error() string { return fmt.Sprintf("nvrtcResult %d", int32(r)) }

// NVRTC codes callers test for.
const (
	NVRTCSuccess          NVRTCResult = 0
	NVRTCErrorInvalidOpt  NVRTCResult = 5
	NVRTCErrorCompilation NVRTCResult = 6
)

// NVRTCError is a failed NVRTC call, with NVRTC's description and, for a compilation, the program log.
type NVRTCError struct {
	Func    string
	Code    NVRTCResult
	Message string // from nvrtcGetErrorString, e.g. NVRTC_ERROR_COMPILATION
	Log     string // compiler output, when there is one
}

func (e *NVRTCError) Error() string {
	s := fmt.Sprintf("%s: %s (%d)", e.Func, e.Message, int32(e.Code))
	if e.Log != "" {
		s += ":\n" + e.Log
	}
	return s
}

// Is matches an NVRTCResult target with the same code.
func (e *NVRTCError) Is(target error) bool {
	r, ok := target.(NVRTCResult)
	return ok && r == e.Code
}
