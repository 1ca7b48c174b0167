package cuda

import (
	"fmt"
	"runtime"
	"unsafe"
)

// DriverLibrary is the soname of the CUDA driver library, installed with the NVIDIA driver (not the toolkit).
const DriverLibrary = "libcuda.so.1"

// driverDirs are where distributions, container runtimes and WSL put the driver library when the dynamic
// loader's own search does not find it. The toolkit's stubs directory is deliberately absent: its libcuda
// only answers CUDA_ERROR_STUB_LIBRARY.
var driverDirs = []string{
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu",
	"/usr/lib64",
	"/usr/lib",
	"/usr/local/nvidia/lib64",
	"/usr/lib/wsl/lib",
	"/run/opengl-driver/lib",
}

// DriverCandidates lists the paths Load tries, in order, when given no path.
func DriverCandidates() []string {
	return expandDirs([]string{DriverLibrary}, driverDirs)
}

// Device is a CUdevice ordinal handle.
type Device int32

// DevicePtr is a CUdeviceptr: an address in device memory.
type DevicePtr uint64

// Attribute is a CUdevice_attribute.
type Attribute int32

// Device attributes used here (values from cuda.h).
const (
	AttrMultiprocessorCount    Attribute = 16
	AttrComputeCapabilityMajor Attribute = 75
	AttrComputeCapabilityMinor Attribute = 76
)

// Driver is a loaded CUDA driver library with its functions resolved. It holds no CUDA state of its own;
// methods are safe for concurrent use.
type Driver struct {
	path string

	cuGetErrorName       func(r Result, s **byte) Result
	cuGetErrorString     func(r Result, s **byte) Result
	cuInit               func(flags uint32) Result
	cuDriverGetVersion   func(v *int32) Result
	cuDeviceGetCount     func(n *int32) Result
	cuDeviceGet          func(d *Device, ordinal int32) Result
	cuDeviceGetName      func(name *byte, n int32, d Device) Result
	cuDeviceTotalMem     func(bytes *uint64, d Device) Result
	cuDeviceGetAttribute func(v *int32, a Attribute, d Device) Result
	cuCtxCreate          func(c *uintptr, flags uint32, d Device) Result
	cuCtxDestroy         func(c uintptr) Result
	cuCtxPushCurrent     func(c uintptr) Result
	cuCtxPopCurrent      func(c *uintptr) Result
	cuMemAlloc           func(p *DevicePtr, n uintptr) Result
	cuMemFree            func(p DevicePtr) Result
	cuMemAllocHost       func(p *unsafe.Pointer, n uintptr) Result
	cuMemFreeHost        func(p unsafe.Pointer) Result
	cuMemHostRegister    func(p unsafe.Pointer, n uintptr, flags uint32) Result
	cuMemHostUnregister  func(p unsafe.Pointer) Result
	cuMemcpyHtoD         func(dst DevicePtr, src *byte, n uintptr) Result
	cuMemcpyDtoH         func(dst *byte, src DevicePtr, n uintptr) Result
	cuMemcpyHtoDAsync    func(dst DevicePtr, src unsafe.Pointer, n uintptr, s uintptr) Result
	cuMemcpyDtoHAsync    func(dst unsafe.Pointer, src DevicePtr, n uintptr, s uintptr) Result
	cuModuleLoadData     func(m *uintptr, image *byte) Result
	cuModuleUnload       func(m uintptr) Result
	cuModuleGetFunction  func(f *uintptr, m uintptr, name *byte) Result
	cuLaunchKernel       func(f uintptr, gx, gy, gz, bx, by, bz, shared uint32, s uintptr, params *unsafe.Pointer, extra *unsafe.Pointer) Result
	cuStreamCreate       func(s *uintptr, flags uint32) Result
	cuStreamQuery        func(s uintptr) Result
	cuStreamSynchronize  func(s uintptr) Result
	cuStreamDestroy      func(s uintptr) Result
}

// Load opens the CUDA driver library and resolves the functions this package uses. An empty path searches
// DriverCandidates; a non-empty path is the only one tried, so an operator's override is never silently
// replaced by another copy. Load does not initialise CUDA (see Init), so it is cheap and safe on a machine
// without a GPU: there it fails with ErrLibraryNotFound.
func Load(path string) (*Driver, error) {
	candidates := DriverCandidates()
	if path != "" {
		candidates = []string{path}
	}
	lib, err := openFirst("CUDA driver", candidates)
	if err != nil {
		return nil, err
	}
	d := &Driver{path: lib.path}
	b := &binder{lib: lib}
	b.bind(&d.cuGetErrorName, "cuGetErrorName")
	b.bind(&d.cuGetErrorString, "cuGetErrorString")
	b.bind(&d.cuInit, "cuInit")
	b.bind(&d.cuDriverGetVersion, "cuDriverGetVersion")
	b.bind(&d.cuDeviceGetCount, "cuDeviceGetCount")
	b.bind(&d.cuDeviceGet, "cuDeviceGet")
	b.bind(&d.cuDeviceGetName, "cuDeviceGetName")
	b.bind(&d.cuDeviceTotalMem, "cuDeviceTotalMem_v2")
	b.bind(&d.cuDeviceGetAttribute, "cuDeviceGetAttribute")
	b.bind(&d.cuCtxCreate, "cuCtxCreate_v2")
	b.bind(&d.cuCtxDestroy, "cuCtxDestroy_v2")
	b.bind(&d.cuCtxPushCurrent, "cuCtxPushCurrent_v2")
	b.bind(&d.cuCtxPopCurrent, "cuCtxPopCurrent_v2")
	b.bind(&d.cuMemAlloc, "cuMemAlloc_v2")
	b.bind(&d.cuMemFree, "cuMemFree_v2")
	b.bind(&d.cuMemAllocHost, "cuMemAllocHost_v2")
	b.bind(&d.cuMemFreeHost, "cuMemFreeHost")
	b.bind(&d.cuMemHostRegister, "cuMemHostRegister_v2")
	b.bind(&d.cuMemHostUnregister, "cuMemHostUnregister")
	b.bind(&d.cuMemcpyHtoD, "cuMemcpyHtoD_v2")
	b.bind(&d.cuMemcpyDtoH, "cuMemcpyDtoH_v2")
	b.bind(&d.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")
	b.bind(&d.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")
	b.bind(&d.cuModuleLoadData, "cuModuleLoadData")
	b.bind(&d.cuModuleUnload, "cuModuleUnload")
	b.bind(&d.cuModuleGetFunction, "cuModuleGetFunction")
	b.bind(&d.cuLaunchKernel, "cuLaunchKernel")
	b.bind(&d.cuStreamCreate, "cuStreamCreate")
	b.bind(&d.cuStreamQuery, "cuStreamQuery")
	b.bind(&d.cuStreamSynchronize, "cuStreamSynchronize")
	b.bind(&d.cuStreamDestroy, "cuStreamDestroy_v2")
	if b.err != nil {
		return nil, fmt.Errorf("load CUDA driver: %w", b.err)
	}
	return d, nil
}

// Path is the library path (or soname) that was opened.
func (d *Driver) Path() string { return d.path }

// check turns a CUresult into nil or an *Error named after fn.
func (d *Driver) check(fn string, r Result) error {
	if r == Success {
		return nil
	}
	e := &Error{Func: fn, Code: r, Name: "CUDA_ERROR_UNKNOWN", Message: "unknown error code"}
	var s *byte
	if d.cuGetErrorName(r, &s) == Success && s != nil {
		e.Name = goString(s)
	}
	s = nil
	if d.cuGetErrorString(r, &s) == Success && s != nil {
		e.Message = goString(s)
	}
	return e
}

// Init initialises the driver API (cuInit). It may take seconds on a node whose driver is not kept loaded
// (no persistence daemon). It fails with ErrorNoDevice when the driver sees no GPU and with
// ErrorStubLibrary when the loaded library is the toolkit's link stub.
func (d *Driver) Init() error { return d.check("cuInit", d.cuInit(0)) }

// Version is the CUDA version the driver supports, as 1000*major + 10*minor (12040 is 12.4).
func (d *Driver) Version() (int, error) {
	var v int32
	if err := d.check("cuDriverGetVersion", d.cuDriverGetVersion(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// DeviceCount is the number of CUDA devices visible to this process (CUDA_VISIBLE_DEVICES applies).
func (d *Driver) DeviceCount() (int, error) {
	var n int32
	if err := d.check("cuDeviceGetCount", d.cuDeviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Device returns the handle of device ordinal i.
func (d *Driver) Device(i int) (Device, error) {
	var dev Device
	if err := d.check("cuDeviceGet", d.cuDeviceGet(&dev, int32(i))); err != nil {
		return 0, err
	}
	return dev, nil
}

// DeviceName is the product name, e.g. "NVIDIA H100 80GB HBM3".
func (d *Driver) DeviceName(dev Device) (string, error) {
	buf := make([]byte, 256)
	if err := d.check("cuDeviceGetName", d.cuDeviceGetName(&buf[0], int32(len(buf)), dev)); err != nil {
		return "", err
	}
	return goString(&buf[0]), nil
}

// DeviceTotalMem is the device's memory in bytes.
func (d *Driver) DeviceTotalMem(dev Device) (uint64, error) {
	var n uint64
	if err := d.check("cuDeviceTotalMem_v2", d.cuDeviceTotalMem(&n, dev)); err != nil {
		return 0, err
	}
	return n, nil
}

// DeviceAttribute reads one integer attribute of a device.
func (d *Driver) DeviceAttribute(dev Device, a Attribute) (int, error) {
	var v int32
	if err := d.check("cuDeviceGetAttribute", d.cuDeviceGetAttribute(&v, a, dev)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// ComputeCapability is the device's major and minor compute capability (9, 0 for an H100).
func (d *Driver) ComputeCapability(dev Device) (major, minor int, err error) {
	if major, err = d.DeviceAttribute(dev, AttrComputeCapabilityMajor); err != nil {
		return 0, 0, err
	}
	if minor, err = d.DeviceAttribute(dev, AttrComputeCapabilityMinor); err != nil {
		return 0, 0, err
	}
	return major, minor, nil
}

// ctxSchedBlockingSync is CU_CTX_SCHED_BLOCKING_SYNC: a thread waiting in cuStreamSynchronize sleeps on a
// synchronisation primitive. The default (CU_CTX_SCHED_AUTO) spins when the process has fewer contexts than
// the machine has cores, so every job waiting for the device would burn a core that the other jobs' JPEG
// decoding and deflate need.
const ctxSchedBlockingSync = 0x04

// NewContext creates a CUDA context on dev. The context is not left current on any thread; Context methods
// push it around each call. Threads that wait for the device sleep (ctxSchedBlockingSync). Destroy it when
// done.
func (d *Driver) NewContext(dev Device) (*Context, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var h uintptr
	if err := d.check("cuCtxCreate_v2", d.cuCtxCreate(&h, ctxSchedBlockingSync, dev)); err != nil {
		return nil, err
	}
	// cuCtxCreate made it current on this thread; take it off so the thread carries no CUDA state.
	var popped uintptr
	if err := d.check("cuCtxPopCurrent_v2", d.cuCtxPopCurrent(&popped)); err != nil {
		_ = d.cuCtxDestroy(h)
		return nil, err
	}
	return &Context{d: d, h: h, dev: dev}, nil
}
