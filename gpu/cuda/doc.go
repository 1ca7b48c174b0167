// Package cuda loads the NVIDIA CUDA driver API (libcuda.so.1) and the NVRTC run-time compiler (libnvrtc.so*)
// at run time through purego, with no cgo and no CUDA toolkit at build time: `CGO_ENABLED=0 go build` works
// on any machine, and a machine without the libraries gets a clear error from Load or LoadNVRTC instead of a
// link failure or a panic.
//
// It owns the thin, typed bindings (devices, contexts, device and pinned host memory, modules, kernel
// launches, streams, program compilation) and the translation of CUresult and nvrtcResult codes into errors
// that carry the CUDA error name and message. It must not decide policy: which device to use, when to warm a
// GPU and what runs on it belong to package gpu and its callers.
//
// There is no package-level state: Load returns a Driver value holding the library handle and its resolved
// functions; two Loads of the same library share the handle (dlopen counts references) and the library stays
// mapped for the life of the process, because unloading libcuda under live contexts is unsafe.
//
// CUDA contexts are bound to OS threads. Every Context method locks the calling goroutine to its thread and
// pushes the context for the duration of the call, so a Context can be used from any goroutine.
//
// Binaries that import this package are dynamically linked against the C library (purego's dlopen comes
// from libc), even with CGO_ENABLED=0: they run on any glibc system, not on a bare "scratch" image.
package cuda
