package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// Context is a CUDA context on one device. Its methods may be called from any goroutine: each one locks the
// goroutine to its OS thread and makes the context current for the duration of the call only.
type Context struct {
	d   *Driver
	h   uintptr
	dev Device
}

// Device is the device the context was created on.
func (c *Context) Device() Device { return c.dev }

// do runs fn with c current on the calling OS thread, and leaves the thread as it found it.
func (c *Context) do(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.d.check("cuCtxPushCurrent_v2", c.d.cuCtxPushCurrent(c.h)); err != nil {
		return err
	}
	err := fn()
	var popped uintptr
	if perr := c.d.check("cuCtxPopCurrent_v2", c.d.cuCtxPopCurrent(&popped)); perr != nil && err == nil {
		err = perr
	}
	return err
}

// Destroy destroys the context and everything allocated in it. The Context must not be used afterwards.
func (c *Context) Destroy() error {
	return c.d.check("cuCtxDestroy_v2", c.d.cuCtxDestroy(c.h))
}

// Alloc allocates n bytes of device memory.
func (c *Context) Alloc(n int) (DevicePtr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("cuda: alloc %d bytes: size must be positive", n)
	}
	var p DevicePtr
	err := c.do(func() error { return c.d.check("cuMemAlloc_v2", c.d.cuMemAlloc(&p, uintptr(n))) })
	return p, err
}

// Free releases device memory from Alloc.
func (c *Context) Free(p DevicePtr) error {
	return c.do(func() error { return c.d.check("cuMemFree_v2", c.d.cuMemFree(p)) })
}

// CopyToDevice copies src to dst synchronously. dst must hold len(src) bytes.
func (c *Context) CopyToDevice(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return c.do(func() error {
		return c.d.check("cuMemcpyHtoD_v2", c.d.cuMemcpyHtoD(dst, &src[0], uintptr(len(src))))
	})
}

// CopyFromDevice copies len(dst) bytes from src synchronously.
func (c *Context) CopyFromDevice(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return c.do(func() error {
		return c.d.check("cuMemcpyDtoH_v2", c.d.cuMemcpyDtoH(&dst[0], src, uintptr(len(dst))))
	})
}

// HostBuffer is page-locked (pinned) host memory, from cuMemAllocHost (AllocHost) or mapped here and registered
// with the driver (RegisterHost): the only host memory that asynchronous copies overlap with kernels from. It
// lives outside the Go heap; call Free.
type HostBuffer struct {
	c *Context
	p unsafe.Pointer
	n int
	// mapped is the mapping of a RegisterHost buffer (nil for AllocHost's), which Free unmaps.
	mapped []byte
}

// AllocHost allocates n bytes of pinned host memory. Destroying the context frees it.
func (c *Context) AllocHost(n int) (*HostBuffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: alloc %d pinned bytes: size must be positive", n)
	}
	var p unsafe.Pointer
	if err := c.do(func() error { return c.d.check("cuMemAllocHost_v2", c.d.cuMemAllocHost(&p, uintptr(n))) }); err != nil {
		return nil, err
	}
	return &HostBuffer{c: c, p: p, n: n}, nil
}

// RegisterHost maps n bytes of host memory and page-locks them for c (cuMemHostRegister). Unlike AllocHost's,
// the memory stays valid when the context is destroyed (it is only no longer pinned) until Free unmaps it, so
// that host code still reading it (a decoded image handed to a device that has since closed) never reads freed
// memory.
func (c *Context) RegisterHost(n int) (*HostBuffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: register %d host bytes: size must be positive", n)
	}
	m, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("cuda: map %d host bytes: %w", n, err)
	}
	p := unsafe.Pointer(&m[0])
	if err := c.do(func() error {
		return c.d.check("cuMemHostRegister_v2", c.d.cuMemHostRegister(p, uintptr(n), 0))
	}); err != nil {
		syscall.Munmap(m)
		return nil, err
	}
	return &HostBuffer{c: c, p: p, n: n, mapped: m}, nil
}

// Abandon releases what the process still owns of a buffer whose context is destroyed, without a driver call
// (the destroyed context ended its registration): a RegisterHost buffer's mapping. An AllocHost buffer was freed
// with its context; Abandon only forgets it.
func (h *HostBuffer) Abandon() error {
	m := h.mapped
	h.p, h.n, h.mapped = nil, 0, nil
	if m == nil {
		return nil
	}
	if err := syscall.Munmap(m); err != nil {
		return fmt.Errorf("cuda: unmap host bytes: %w", err)
	}
	return nil
}

// Bytes is the buffer's memory. It is invalid after Free or Abandon.
func (h *HostBuffer) Bytes() []byte { return unsafe.Slice((*byte)(h.p), h.n) }

// Free releases the buffer: AllocHost's to the driver, RegisterHost's unregistered (which fails harmlessly once
// the context is gone) and unmapped.
func (h *HostBuffer) Free() error {
	if h.p == nil {
		return nil
	}
	p, m := h.p, h.mapped
	h.p, h.n, h.mapped = nil, 0, nil
	if m == nil {
		return h.c.do(func() error { return h.c.d.check("cuMemFreeHost", h.c.d.cuMemFreeHost(p)) })
	}
	err := h.c.do(func() error { return h.c.d.check("cuMemHostUnregister", h.c.d.cuMemHostUnregister(p)) })
	if uerr := syscall.Munmap(m); uerr != nil {
		return errors.Join(err, fmt.Errorf("cuda: unmap host bytes: %w", uerr))
	}
	return err
}

// CopyToDeviceAsync queues a copy of all of src to dst on s. dst must hold len(src.Bytes()) bytes.
func (c *Context) CopyToDeviceAsync(dst DevicePtr, src *HostBuffer, s *Stream) error {
	return c.do(func() error {
		return c.d.check("cuMemcpyHtoDAsync_v2", c.d.cuMemcpyHtoDAsync(dst, src.p, uintptr(src.n), s.h))
	})
}

// CopyFromDeviceAsync queues a copy from src filling all of dst on s.
func (c *Context) CopyFromDeviceAsync(dst *HostBuffer, src DevicePtr, s *Stream) error {
	return c.do(func() error {
		return c.d.check("cuMemcpyDtoHAsync_v2", c.d.cuMemcpyDtoHAsync(dst.p, src, uintptr(dst.n), s.h))
	})
}

// CopyRangeToDeviceAsync queues a copy of n bytes of src from offset off to dst on s.
func (c *Context) CopyRangeToDeviceAsync(dst DevicePtr, src *HostBuffer, off, n int, s *Stream) error {
	if off < 0 || n < 0 || off+n > src.n {
		return fmt.Errorf("cuda: copy to device: range %d+%d outside a %d-byte host buffer", off, n, src.n)
	}
	if n == 0 {
		return nil
	}
	return c.do(func() error {
		return c.d.check("cuMemcpyHtoDAsync_v2", c.d.cuMemcpyHtoDAsync(dst, unsafe.Add(src.p, off), uintptr(n), s.h))
	})
}

// CopyRangeFromDeviceAsync queues a copy of n bytes from src into dst at offset off on s.
func (c *Context) CopyRangeFromDeviceAsync(dst *HostBuffer, off, n int, src DevicePtr, s *Stream) error {
	if off < 0 || n < 0 || off+n > dst.n {
		return fmt.Errorf("cuda: copy from device: range %d+%d outside a %d-byte host buffer", off, n, dst.n)
	}
	if n == 0 {
		return nil
	}
	return c.do(func() error {
		return c.d.check("cuMemcpyDtoHAsync_v2", c.d.cuMemcpyDtoHAsync(unsafe.Add(dst.p, off), src, uintptr(n), s.h))
	})
}

// ComputeCapability is the compute capability of the context's device.
func (c *Context) ComputeCapability() (major, minor int, err error) {
	return c.d.ComputeCapability(c.dev)
}

// Stream is a CUDA stream: work queued on it runs in order, asynchronously to the host.
type Stream struct {
	c *Context
	h uintptr
}

// NewStream creates a stream in c.
func (c *Context) NewStream() (*Stream, error) {
	s := &Stream{c: c}
	if err := c.do(func() error { return c.d.check("cuStreamCreate", c.d.cuStreamCreate(&s.h, 0)) }); err != nil {
		return nil, err
	}
	return s, nil
}

// Synchronize waits until all work queued on s is done, or ctx ends. A cancelled wait does not cancel the
// GPU work: it stays queued and the stream must still be synchronized or destroyed. Without a cancellable
// ctx it blocks in cuStreamSynchronize; otherwise it polls cuStreamQuery with a backoff capped at 200 µs, so
// cancellation is noticed promptly. The cap bounds what a wait adds to the work it waits for: a 12 MP embed
// waits about fifteen times for device work of 0.1 to 6 ms, and a 1 ms cap added several ms to a 30 ms job.
func (s *Stream) Synchronize(ctx context.Context) error {
	if ctx.Done() == nil {
		return s.c.do(func() error { return s.c.d.check("cuStreamSynchronize", s.c.d.cuStreamSynchronize(s.h)) })
	}
	wait := 20 * time.Microsecond
	var timer *time.Timer
	for {
		var r Result
		if err := s.c.do(func() error { r = s.c.d.cuStreamQuery(s.h); return nil }); err != nil {
			return err
		}
		if r != ErrorNotReady {
			return s.c.d.check("cuStreamQuery", r)
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cuda: synchronize stream: %w", ctx.Err())
		case <-timer.C:
		}
		wait = min(2*wait, 200*time.Microsecond)
	}
}

// Destroy destroys the stream; work still queued on it completes first.
func (s *Stream) Destroy() error {
	return s.c.do(func() error { return s.c.d.check("cuStreamDestroy_v2", s.c.d.cuStreamDestroy(s.h)) })
}

// Module is loaded device code.
type Module struct {
	c *Context
	h uintptr
}

// LoadModule loads PTX text (JIT-compiled by the driver for this device) or a cubin/fatbin image.
func (c *Context) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("cuda: load module: empty image")
	}
	// PTX must be NUL-terminated; the copy also keeps the driver away from memory the caller may reuse.
	img := make([]byte, len(image)+1)
	copy(img, image)
	m := &Module{c: c}
	err := c.do(func() error { return c.d.check("cuModuleLoadData", c.d.cuModuleLoadData(&m.h, &img[0])) })
	runtime.KeepAlive(img)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Unload unloads the module.
func (m *Module) Unload() error {
	return m.c.do(func() error { return m.c.d.check("cuModuleUnload", m.c.d.cuModuleUnload(m.h)) })
}

// Function is a kernel in a loaded module.
type Function struct {
	m    *Module
	h    uintptr
	name string
}

// Function looks up a kernel by its (unmangled, extern "C") name.
func (m *Module) Function(name string) (Function, error) {
	f := Function{m: m, name: name}
	cname := cString(name)
	err := m.c.do(func() error {
		return m.c.d.check("cuModuleGetFunction("+name+")", m.c.d.cuModuleGetFunction(&f.h, m.h, &cname[0]))
	})
	if err != nil {
		return Function{}, err
	}
	return f, nil
}

// Dim3 is a grid or block size.
type Dim3 struct{ X, Y, Z uint32 }

// Launch queues f on s with grid and block sizes and the kernel's arguments in order. Each argument must be
// a DevicePtr, an integer type or a float of the size the kernel's parameter has (uint32 for an unsigned
// int, DevicePtr for a pointer). The driver copies the arguments at launch, so they may be reused after.
func (f Function) Launch(grid, block Dim3, sharedMem uint32, s *Stream, args ...any) error {
	if f.h == 0 {
		return fmt.Errorf("cuda: launch of an unresolved function")
	}
	// Every argument gets an 8-byte slot (enough for any scalar or pointer); the driver reads as many bytes
	// as the kernel's parameter has, from the slot's start, which is right on little-endian machines.
	slots := make([]uint64, len(args)+1)
	ptrs := make([]unsafe.Pointer, len(args)+1)
	for i, a := range args {
		v, err := argBits(a)
		if err != nil {
			return fmt.Errorf("cuda: launch %s: argument %d: %w", f.name, i, err)
		}
		slots[i] = v
		ptrs[i] = unsafe.Pointer(&slots[i])
	}
	// ptrs is Go memory holding Go pointers handed to C: pin both for the call.
	var pin runtime.Pinner
	pin.Pin(&slots[0])
	pin.Pin(&ptrs[0])
	defer pin.Unpin()
	c := f.m.c
	return c.do(func() error {
		return c.d.check("cuLaunchKernel("+f.name+")", c.d.cuLaunchKernel(f.h,
			grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, sharedMem, s.h, &ptrs[0], nil))
	})
}

func argBits(a any) (uint64, error) {
	switch v := a.(type) {
	case DevicePtr:
		return uint64(v), nil
	case uint64:
		return v, nil
	case int64:
		return uint64(v), nil
	case uint32:
		return uint64(v), nil
	case int32:
		return uint64(uint32(v)), nil
	case uint16:
		return uint64(v), nil
	case int16:
		return uint64(uint16(v)), nil
	case uint8:
		return uint64(v), nil
	case int8:
		return uint64(uint8(v)), nil
	case float32:
		return uint64(math.Float32bits(v)), nil
	case float64:
		return math.Float64bits(v), nil
	default:
		return 0, fmt.Errorf("unsupported type %T (use a sized integer, float or DevicePtr)", a)
	}
}
