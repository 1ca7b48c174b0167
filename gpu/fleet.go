package gpu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"filigrane/codec/accel"
	"filigrane/gpu/cuda"
	"filigrane/gpu/cudacodec"
	"filigrane/internal/clock"
)

// DeviceContext is what a device holds while warm: its CUDA context in production.
type DeviceContext interface{ Destroy() error }

// Opener opens device index's context. It runs outside the fleet's lock (creating a CUDA context takes
// hundreds of milliseconds); until it returns, the device is starting and work runs on the CPU.
type Opener func(ctx context.Context, index int) (DeviceContext, error)

// Fleet is a node's GPU devices, one owner per device: each holds its warm state (a State driven by the
// injected clock) and its context, opened when the device is woken and destroyed when it goes idle. Every
// change happens under one lock, so a device sees its events one at a time as an actor would. A fleet of no
// device reports unavailable. Fleet does not place work: callers Begin and End work on a ready device.
type Fleet struct {
	mu      sync.Mutex
	clk     clock.Clock
	open    Opener
	devices []*device
	opening sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
	onReady func(State) // see OnReady
}

// OnReady sets fn, called each time a starting device becomes ready (its context opened) with the fleet's
// state just after. It runs outside the fleet's lock on the goroutine that opened the context, so it may
// read the fleet; it must not block for long (Close waits for it).
func (f *Fleet) OnReady(fn func(State)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onReady = fn
}

type device struct {
	index int
	state *State
	ctx   DeviceContext
	err   error // why the last open failed
}

// NewFleet returns the owner of n devices, opened by open; startup is the ready_at estimate a wake reports.
func NewFleet(n int, startup time.Duration, clk clock.Clock, open Opener) *Fleet {
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fleet{clk: clk, open: open, ctx: ctx, cancel: cancel}
	for i := range n {
		st := NewState(true, startup)
		st.waitOpen = true
		f.devices = append(f.devices, &device{index: i, state: st})
	}
	return f
}

// Snapshot applies the clock to every device (a device past its warm time goes idle and drops its context)
// and returns the fleet's state: ready if a device is ready (the latest warm time), else starting, else idle,
// else unavailable. It starts nothing.
func (f *Fleet) Snapshot(now time.Time) State {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tickLocked(now)
	return f.summaryLocked()
}

// Wake starts every idle device and retries one whose last open failed (its context opens in the background) and extends the warm time of the
// ready and starting ones by WarmFor from now; it returns the fleet's state.
func (f *Fleet) Wake(now time.Time) State {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tickLocked(now)
	for _, d := range f.devices {
		was := d.state.Status
		d.state.Wake(now)
		if was != StatusStarting && d.state.Status == StatusStarting {
			f.opening.Add(1)
			go f.openDevice(d)
		}
	}
	return f.summaryLocked()
}

// Begin takes a ready device for one piece of work and returns its index, or false when none is ready (the
// work then runs on the CPU). The device stays warm until End.
func (f *Fleet) Begin(now time.Time) (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tickLocked(now)
	if d := f.leastBusyLocked(func(*device) bool { return true }); d != nil && d.state.Begin(now) {
		return d.index, true
	}
	return 0, false
}

// leastBusyLocked is the ready device that may take the work (ok) with the fewest pieces of work running, the
// lowest index on a tie: work spreads over a node's devices instead of queueing on the first. The states are
// as tickLocked left them at now.
func (f *Fleet) leastBusyLocked(ok func(*device) bool) *device {
	var best *device
	for _, d := range f.devices {
		if d.state.Status != StatusReady || !ok(d) {
			continue
		}
		if best == nil || d.state.Running < best.state.Running {
			best = d
		}
	}
	return best
}

// End returns device index after its work; its warm time runs WarmFor from now.
func (f *Fleet) End(index int, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if index >= 0 && index < len(f.devices) {
		f.devices[index].state.End(now)
	}
}

// CodecDevice is what a warm device's context offers when it carries the codec's kernels (CUDAOpener's
// contexts do).
type CodecDevice interface {
	Codec() accel.Device
}

// Acquire takes a ready device whose context carries the codec's kernels for one piece of work, as Begin does,
// and returns the kernels and the function that ends the work (End at the time given). False when none is
// ready: the work then runs on the CPU.
func (f *Fleet) Acquire(now time.Time) (accel.Device, func(end time.Time), bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tickLocked(now)
	d := f.leastBusyLocked(func(d *device) bool { _, ok := d.ctx.(CodecDevice); return ok })
	if d == nil || !d.state.Begin(now) {
		return nil, nil, false
	}
	index := d.index
	return d.ctx.(CodecDevice).Codec(), func(end time.Time) { f.End(index, end) }, true
}

// Close stops opening and destroys every open context.
func (f *Fleet) Close() error {
	f.cancel()
	f.opening.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	var first error
	for _, d := range f.devices {
		if d.ctx != nil {
			if err := d.ctx.Destroy(); err != nil && first == nil {
				first = fmt.Errorf("gpu: device %d: destroy context: %w", d.index, err)
			}
			d.ctx = nil
		}
	}
	return first
}

func (f *Fleet) openDevice(d *device) {
	defer f.opening.Done()
	c, err := f.open(f.ctx, d.index)
	f.mu.Lock()
	now := f.clk.Now()
	var notify func(State)
	var st State
	switch {
	case err != nil:
		d.err = err
		d.state.Failed()
	case f.ctx.Err() != nil || d.state.Status != StatusStarting:
		_ = c.Destroy() // closed meanwhile
	default:
		d.ctx = c
		d.state.Opened(now)
		notify, st = f.onReady, f.summaryLocked()
	}
	f.mu.Unlock()
	if notify != nil {
		notify(st)
	}
}

func (f *Fleet) tickLocked(now time.Time) {
	for _, d := range f.devices {
		d.state.Tick(now)
		if d.state.Status == StatusIdle && d.ctx != nil {
			_ = d.ctx.Destroy() // a cold device holds no GPU memory
			d.ctx = nil
		}
	}
}

func (f *Fleet) summaryLocked() State {
	out := State{Status: StatusUnavailable}
	rank := map[Status]int{StatusUnavailable: 0, StatusIdle: 1, StatusStarting: 2, StatusReady: 3}
	for _, d := range f.devices {
		s := *d.state
		switch {
		case rank[s.Status] > rank[out.Status]:
			out = State{Status: s.Status, ReadyAt: s.ReadyAt, WarmUntil: s.WarmUntil}
		case s.Status == out.Status:
			out.WarmUntil = maxTime(out.WarmUntil, s.WarmUntil)
			if !s.ReadyAt.IsZero() && (out.ReadyAt.IsZero() || s.ReadyAt.Before(out.ReadyAt)) {
				out.ReadyAt = s.ReadyAt
			}
		}
		out.Running += s.Running
	}
	return out
}

// CUDAOpener opens a device's CUDA context through the driver that opts names (loaded once, on first use), and
// compiles and loads the codec's kernels into it (package gpu/cudacodec, with NVRTC): a device is ready only
// when it can run the codec.
func CUDAOpener(opts Options) Opener {
	var once sync.Once
	var drv *cuda.Driver
	var nv *cuda.NVRTC
	var loadErr error
	return func(ctx context.Context, index int) (DeviceContext, error) {
		once.Do(func() {
			if drv, loadErr = cuda.Load(opts.DriverPath); loadErr == nil {
				loadErr = drv.Init()
			}
			if loadErr == nil {
				nv, loadErr = cuda.LoadNVRTC(opts.NVRTCPath)
			}
		})
		if loadErr != nil {
			return nil, fmt.Errorf("gpu: open device %d: %w", index, loadErr)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		dev, err := drv.Device(index)
		if err != nil {
			return nil, fmt.Errorf("gpu: device %d: %w", index, err)
		}
		c, err := drv.NewContext(dev)
		if err != nil {
			return nil, fmt.Errorf("gpu: device %d: %w", index, err)
		}
		kernels, err := cudacodec.New(ctx, c, nv)
		if err != nil {
			c.Destroy()
			return nil, fmt.Errorf("gpu: device %d: %w", index, err)
		}
		return &warmDevice{ctx: c, codec: kernels}, nil
	}
}

// warmDevice is an open device: its context and the codec's kernels loaded in it.
type warmDevice struct {
	ctx   *cuda.Context
	codec *cudacodec.Device
}

func (w *warmDevice) Codec() accel.Device { return w.codec }

// Destroy unloads the kernels and destroys the context (and the memory left in it).
func (w *warmDevice) Destroy() error {
	err := w.codec.Close()
	if derr := w.ctx.Destroy(); derr != nil {
		return errors.Join(err, derr)
	}
	return err
}
