// Package gpu holds the accelerator's state machine (spec 3.6: ready, starting, idle, unavailable; a ready GPU
// stays warm 15 minutes, work in progress keeps it longer, a wake call extends the 15 minutes) and device
// discovery. It must not be needed to build or test the rest of Filigrane, and it must not make a node
// accept GPU work it cannot do.
//
// # One binary, GPU found at run time
//
// Nothing CUDA is linked at build time: no cgo, no toolkit, no build tag. Discover loads the NVIDIA driver
// library (libcuda.so.1) through package gpu/cuda at run time, initialises it and lists the devices (name,
// memory, compute capability), then looks for NVRTC (libnvrtc.so*) to compile kernels at run time. The codec's
// kernels need NVRTC (a node without it reports its accelerator unavailable); the smoke kernel also comes as
// PTX embedded in the binary, which the driver alone JIT-compiles. On a machine without the driver Discover returns an error wrapping ErrUnavailable
// that says why (disabled, no driver library, not a driver library, cuInit failed, zero devices); everything
// else builds, tests and runs as usual.
//
// Environment: FILIGRANE_CUDA_LIBRARY and FILIGRANE_NVRTC_LIBRARY name the libraries' paths instead of
// searching (cuda.DriverCandidates, cuda.NVRTCCandidates); FILIGRANE_GPU=off skips discovery entirely.
// `filigrane gpu info [--smoke]` prints what Discover finds and can run the smoke kernel (Smoke).
//
// Build tags: `cuda` has no effect (kept so that `go build -tags cuda ./...` works for scripts that pass it;
// the GPU path is in every build). `nogpu` removes the dynamic loader: a CGO_ENABLED=0 binary then stays
// statically linked and Discover always reports the GPU unavailable. Without `nogpu`, a CGO_ENABLED=0
// binary is dynamically linked against the C library (the loader comes from libc).
//
// # Device owners
//
// Fleet owns a node's devices, one owner per device: its warm State and its CUDA context with the codec's
// kernels, opened through gpu/cuda and gpu/cudacodec when the device is woken (CUDAOpener) and destroyed when
// the warm time runs out. A starting device becomes ready only when its context is open; until then work runs
// on the CPU.
//
// # The codec path
//
// A device becomes ready only once the codec's kernels are compiled (NVRTC) and loaded into its context
// (package gpu/cudacodec); Fleet.Acquire hands them to a job for one piece of work. CodecAvailable is true where
// NVRTC is found; elsewhere the node reports its accelerator unavailable and every gpu request falls back as
// the API says (on the CPU at the normal charge, or 503 in strict mode). Devices and Discover describe the
// hardware, for `gpu info` and the cluster metadata (cluster.NodeMeta.GPUs and GPUMemory).
package gpu

import (
	"sync"
	"time"
)

// Status is the accelerator status of spec 3.6.
type Status string

// Statuses.
const (
	StatusReady       Status = "ready"
	StatusStarting    Status = "starting"
	StatusIdle        Status = "idle"
	StatusUnavailable Status = "unavailable"
)

// WarmFor is how long a ready GPU stays warm after a wake call or the end of its last work.
const WarmFor = 15 * time.Minute

// State is one accelerator's state: a pure machine driven by calls that carry the time (injected clock).
type State struct {
	Status    Status
	ReadyAt   time.Time // when a starting GPU becomes ready
	WarmUntil time.Time // when a ready GPU goes idle, unless work is running
	Running   int       // work items in progress
	startup   time.Duration
	// waitOpen: a starting device becomes ready when its context is open (Opened), not after startup.
	waitOpen bool
	// failed: unavailable because its last open failed; the next wake tries again.
	failed bool
}

// NewState returns the state of an accelerator that takes startup to become ready; available false gives a
// state that stays unavailable.
func NewState(available bool, startup time.Duration) *State {
	if !available {
		return &State{Status: StatusUnavailable}
	}
	return &State{Status: StatusIdle, startup: startup}
}

// Tick applies what time decided: a starting GPU whose start-up is over becomes ready; a ready GPU with no
// work past its warm time goes idle.
func (s *State) Tick(now time.Time) {
	switch s.Status {
	case StatusStarting:
		if !s.waitOpen && !now.Before(s.ReadyAt) {
			s.Status = StatusReady
		}
	case StatusReady:
		if s.Running == 0 && !now.Before(s.WarmUntil) {
			s.Status, s.WarmUntil = StatusIdle, time.Time{}
		}
	}
}

// Wake starts an idle GPU or extends a ready one's warm time by WarmFor from now.
func (s *State) Wake(now time.Time) {
	s.Tick(now)
	if s.failed {
		s.Status, s.failed = StatusIdle, false
	}
	switch s.Status {
	case StatusIdle:
		s.Status, s.ReadyAt = StatusStarting, now.Add(s.startup)
		s.WarmUntil = s.ReadyAt.Add(WarmFor)
	case StatusStarting:
		s.WarmUntil = maxTime(s.WarmUntil, s.ReadyAt.Add(WarmFor))
	case StatusReady:
		s.WarmUntil = maxTime(s.WarmUntil, now.Add(WarmFor))
	}
}

// Opened makes a starting device ready at now (its context is open); it stays warm WarmFor from now, or
// longer if a wake asked for it.
func (s *State) Opened(now time.Time) {
	if s.Status != StatusStarting {
		return
	}
	s.Status, s.ReadyAt = StatusReady, now
	s.WarmUntil = maxTime(s.WarmUntil, now.Add(WarmFor))
}

// Failed records that a starting device's context could not be opened: the device is unavailable until
// the next wake tries again.
func (s *State) Failed() {
	if s.Status == StatusStarting {
		s.Status, s.ReadyAt, s.WarmUntil, s.failed = StatusUnavailable, time.Time{}, time.Time{}, true
	}
}

// Begin records work starting on the GPU; it keeps the GPU warm until End.
func (s *State) Begin(now time.Time) bool {
	s.Tick(now)
	if s.Status != StatusReady {
		return false
	}
	s.Running++
	return true
}

// End records work finishing; the warm time runs WarmFor from the last end.
func (s *State) End(now time.Time) {
	if s.Running > 0 {
		s.Running--
	}
	s.WarmUntil = maxTime(s.WarmUntil, now.Add(WarmFor))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Tracker is a State shared by a node's request handlers.
type Tracker struct {
	mu    sync.Mutex
	state *State
}

// NewTracker wraps a state.
func NewTracker(s *State) *Tracker { return &Tracker{state: s} }

// Snapshot ticks the state to now and returns a copy.
func (t *Tracker) Snapshot(now time.Time) State {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.state.Tick(now)
	return *t.state
}

// Wake wakes the GPU at now and returns the new state.
func (t *Tracker) Wake(now time.Time) State {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.state.Wake(now)
	return *t.state
}
