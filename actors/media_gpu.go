package actors

import (
	"errors"
	"time"

	"filigrane/actors/jobstate"
	"filigrane/codec"
	"filigrane/codec/accel"
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
	if rec.AcceleratorRequested != jobstate.AcceleratorGPU || m.GPUs == nil {
		return jobstate.AcceleratorCPU, work(nil)
	}
	dev, done, ok := m.GPUs.Acquire(m.now())
	if !ok {
		return jobstate.AcceleratorCPU, work(nil)
	}
	err := work(dev)
	done(m.now())
	if errors.Is(err, codec.ErrDevice) {
		return jobstate.AcceleratorCPU, work(nil)
	}
	return jobstate.AcceleratorGPU, err
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
