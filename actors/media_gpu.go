package actors

import (
	"errors"
	"time"

	"filigrane/actors/jobstate"
	"filigrane/codec"
	"filigrane/codec/accel"
	"filigrane/codec/imageio"
)

// GPUs hands a job a ready GPU's codec kernels for one piece of work (gpu.Fleet.Acquire): the kernels, and
// the function that ends the work at the time given. False when no GPU is ready.
type GPUs interface {
	Acquire(now time.Time) (accel.Device, func(end time.Time), bool)
}

// onGPU runs work on a ready GPU when the job asked for one (accelerator=gpu) and one is ready, else on the
// CPU (dev nil). A device failure (codec.ErrDevice) runs the work again on the CPU: the API promises the CPU
// fallback, never a failed job because of the accelerator. It reports where the work ran.
func (m Media) onGPU(rec *jobstate.Record, work func(dev accel.Device) error) (jobstate.Accelerator, error) {
	dev, done := m.gpuFor(rec.AcceleratorRequested)
	return runOn(dev, done, work)
}

// gpuFor takes a ready GPU for work asked with acc, and returns it with the function that ends the work on it;
// nil (and a done that does nothing) when acc is not the GPU, the node has none or none is ready.
func (m Media) gpuFor(acc jobstate.Accelerator) (accel.Device, func()) {
	if acc != jobstate.AcceleratorGPU || m.GPUs == nil {
		return nil, func() {}
	}
	dev, done, ok := m.GPUs.Acquire(m.now())
	if !ok {
		return nil, func() {}
	}
	return dev, func() { done(m.now()) }
}

// runOn runs work on dev from gpuFor (nil: the CPU) and ends the device's work with done; a device failure
// (codec.ErrDevice) runs it again on the CPU. It reports where the work ran.
func runOn(dev accel.Device, done func(), work func(dev accel.Device) error) (jobstate.Accelerator, error) {
	if dev == nil {
		return jobstate.AcceleratorCPU, work(nil)
	}
	err := work(dev)
	done()
	if errors.Is(err, codec.ErrDevice) {
		return jobstate.AcceleratorCPU, work(nil)
	}
	return jobstate.AcceleratorGPU, err
}

// devicePixels is the allocator a decode for dev uses: page-locked memory from dev (accel.HostMemory) for images
// of which DetectOn loads the pixels (codec.DeviceDetectMaxPixels; larger ones are analysed on the CPU and would
// only pin memory), so that the device loads them without a staging copy; and the function that gives back what
// it lent, to call once the decoded image is no longer used. nil (Go memory) for the CPU.
func devicePixels(dev accel.Device) (imageio.PixelAllocator, func()) {
	hm, ok := dev.(accel.HostMemory)
	if !ok {
		return nil, func() {}
	}
	release := func() {}
	alloc := func(n int) []byte {
		if n > 4*codec.DeviceDetectMaxPixels {
			return nil
		}
		pix, rel := hm.HostPixels(n)
		release = rel
		return pix
	}
	return alloc, func() { release() }
}

// chargeOn is the charge of work of price that ran on acc: GPUHoldMultiplier times the price on a GPU (spec 8:
// three times the credits are held for a GPU request), the price on a CPU.
func (m Media) chargeOn(acc jobstate.Accelerator, price int64) int64 {
	if acc == jobstate.AcceleratorGPU && m.Catalog.Prices.GPUHoldMultiplier > 0 {
		return price * m.Catalog.Prices.GPUHoldMultiplier
	}
	return price
}

func (m Media) now() time.Time {
	if m.Clock == nil {
		return time.Now()
	}
	return m.Clock.Now()
}
