package gpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"filigrane/gpu/cuda"
)

// Environment variables read by OptionsFromEnv.
const (
	// EnvDriver is a path to the CUDA driver library (libcuda.so.1) to use instead of searching for it.
	EnvDriver = "FILIGRANE_CUDA_LIBRARY"
	// EnvNVRTC is a path to the NVRTC library (libnvrtc.so.*) to use instead of searching for it.
	EnvNVRTC = "FILIGRANE_NVRTC_LIBRARY"
	// EnvGPU set to "off" skips discovery: the node reports no GPU without loading any library.
	EnvGPU = "FILIGRANE_GPU"
)

// ErrUnavailable is wrapped by every Discover error: this process cannot use a GPU. The message says why.
var ErrUnavailable = errors.New("gpu unavailable")

// Options say where to find the libraries.
type Options struct {
	DriverPath string // empty: search cuda.DriverCandidates
	NVRTCPath  string // empty: search cuda.NVRTCCandidates
	Disabled   bool   // report unavailable without loading anything
}

// OptionsFromEnv reads EnvDriver, EnvNVRTC and EnvGPU.
func OptionsFromEnv() Options {
	return Options{
		DriverPath: os.Getenv(EnvDriver),
		NVRTCPath:  os.Getenv(EnvNVRTC),
		Disabled:   strings.EqualFold(strings.TrimSpace(os.Getenv(EnvGPU)), "off"),
	}
}

// Device is one CUDA device as the driver reports it.
type Device struct {
	Index           int    `json:"index"`
	Name            string `json:"name"`
	MemoryBytes     uint64 `json:"memory_bytes"`
	ComputeMajor    int    `json:"compute_major"`
	ComputeMinor    int    `json:"compute_minor"`
	Multiprocessors int    `json:"multiprocessors"`
}

// ComputeCapability is the device's "major.minor" compute capability, e.g. "9.0".
func (d Device) ComputeCapability() string {
	return fmt.Sprintf("%d.%d", d.ComputeMajor, d.ComputeMinor)
}

// Inventory is what discovery found. Fields are filled as far as discovery got, also when it fails.
type Inventory struct {
	DriverPath    string   `json:"driver_path,omitempty"`
	DriverVersion int      `json:"driver_version,omitempty"` // 1000*major + 10*minor: 12040 is CUDA 12.4
	Devices       []Device `json:"devices"`
	// NVRTCPath and NVRTCVersion describe the run-time compiler when it loaded; otherwise NVRTCMissing says
	// why not. Without NVRTC, kernels come from PTX embedded in the binary.
	NVRTCPath    string `json:"nvrtc_path,omitempty"`
	NVRTCVersion string `json:"nvrtc_version,omitempty"`
	NVRTCMissing string `json:"nvrtc_missing,omitempty"`
}

// TotalMemory is the sum of the devices' memory in bytes.
func (inv Inventory) TotalMemory() uint64 {
	var n uint64
	for _, d := range inv.Devices {
		n += d.MemoryBytes
	}
	return n
}

// DriverVersionString renders DriverVersion as "12.4", or "" when unknown.
func (inv Inventory) DriverVersionString() string {
	if inv.DriverVersion <= 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", inv.DriverVersion/1000, inv.DriverVersion%1000/10)
}

// Discover finds the CUDA devices this process can use, with options from the environment (OptionsFromEnv).
func Discover(ctx context.Context) (Inventory, error) { return DiscoverWith(ctx, OptionsFromEnv()) }

// DiscoverWith finds the CUDA devices this process can use. It loads the driver library, initialises it and
// reads each device's name, memory and compute capability, then tries to load NVRTC (whose absence is
// recorded, not an error: embedded PTX serves instead). An error wraps ErrUnavailable and says why: disabled,
// no driver library, not the driver library, cuInit failed (no device, stub library, driver too old), zero
// devices, or ctx ended first. cuInit can take seconds on a node without the persistence daemon; if ctx ends
// first, DiscoverWith returns at once and the probe finishes in the background.
func DiscoverWith(ctx context.Context, opts Options) (Inventory, error) {
	if opts.Disabled {
		return Inventory{}, fmt.Errorf("%w: disabled by %s=off", ErrUnavailable, EnvGPU)
	}
	if err := ctx.Err(); err != nil {
		return Inventory{}, fmt.Errorf("%w: discovery not started: %w", ErrUnavailable, err)
	}
	type result struct {
		inv Inventory
		err error
	}
	done := make(chan result, 1)
	go func() {
		inv, err := probe(opts)
		done <- result{inv, err}
	}()
	select {
	case r := <-done:
		return r.inv, r.err
	case <-ctx.Done():
		return Inventory{}, fmt.Errorf("%w: discovery did not finish: %w", ErrUnavailable, ctx.Err())
	}
}

func probe(opts Options) (Inventory, error) {
	var inv Inventory
	d, err := cuda.Load(opts.DriverPath)
	if err != nil {
		if errors.Is(err, cuda.ErrLibraryNotFound) {
			return inv, fmt.Errorf("%w: no CUDA driver library (install the NVIDIA driver, or set %s): %w", ErrUnavailable, EnvDriver, err)
		}
		return inv, fmt.Errorf("%w: not a usable CUDA driver library: %w", ErrUnavailable, err)
	}
	inv.DriverPath = d.Path()
	if err := d.Init(); err != nil {
		return inv, fmt.Errorf("%w: CUDA driver %s did not initialise: %w", ErrUnavailable, d.Path(), err)
	}
	if inv.DriverVersion, err = d.Version(); err != nil {
		return inv, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	n, err := d.DeviceCount()
	if err != nil {
		return inv, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if n == 0 {
		return inv, fmt.Errorf("%w: the CUDA driver reports zero devices (check CUDA_VISIBLE_DEVICES and the container's device access)", ErrUnavailable)
	}
	for i := range n {
		dev, err := describe(d, i)
		if err != nil {
			return inv, fmt.Errorf("%w: device %d: %w", ErrUnavailable, i, err)
		}
		inv.Devices = append(inv.Devices, dev)
	}
	if nv, err := cuda.LoadNVRTC(opts.NVRTCPath); err != nil {
		inv.NVRTCMissing = err.Error()
	} else if major, minor, err := nv.Version(); err != nil {
		inv.NVRTCMissing = err.Error()
	} else {
		inv.NVRTCPath, inv.NVRTCVersion = nv.Path(), fmt.Sprintf("%d.%d", major, minor)
	}
	return inv, nil
}

func describe(d *cuda.Driver, i int) (Device, error) {
	h, err := d.Device(i)
	if err != nil {
		return Device{}, err
	}
	out := Device{Index: i}
	if out.Name, err = d.DeviceName(h); err != nil {
		return Device{}, err
	}
	if out.MemoryBytes, err = d.DeviceTotalMem(h); err != nil {
		return Device{}, err
	}
	if out.ComputeMajor, out.ComputeMinor, err = d.ComputeCapability(h); err != nil {
		return Device{}, err
	}
	if out.Multiprocessors, err = d.DeviceAttribute(h, cuda.AttrMultiprocessorCount); err != nil {
		return Device{}, err
	}
	return out, nil
}

// legacyDiscoveryTimeout bounds Devices, whose callers pass no context.
const legacyDiscoveryTimeout = 30 * time.Second

// Devices lists the names of the CUDA devices Discover finds (options from the environment, at most 30 s).
// An empty list means no usable GPU; Discover says why. Prefer Discover in new code.
func Devices() []string {
	ctx, cancel := context.WithTimeout(context.Background(), legacyDiscoveryTimeout)
	defer cancel()
	inv, err := Discover(ctx)
	if err != nil {
		return nil
	}
	names := make([]string, len(inv.Devices))
	for i, d := range inv.Devices {
		names[i] = d.Name
	}
	return names
}

// CodecAvailable reports whether this machine can run the GPU codec path: the driver finds a device (Devices)
// and NVRTC, which compiles the codec's kernels (package gpu/cudacodec) when a device is woken, can be loaded.
// Without NVRTC a node reports its accelerator unavailable: accepting accelerator=gpu work that would always run
// on the CPU would hold GPU credits for nothing.
func CodecAvailable() bool {
	opts := OptionsFromEnv()
	if opts.Disabled {
		return false
	}
	_, err := cuda.LoadNVRTC(opts.NVRTCPath)
	return err == nil
}
