package gpu

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"filigrane/codec/accel"
	"filigrane/internal/clock"
)

// fakeContext counts destroys.
type fakeContext struct{ destroyed *atomic.Int32 }

func (c fakeContext) Destroy() error { c.destroyed.Add(1); return nil }

// gatedOpener opens contexts only when the test lets it: each open waits for a value on gate (nil: success).
type gatedOpener struct {
	gate      chan error
	opened    atomic.Int32
	destroyed atomic.Int32
}

func (g *gatedOpener) open(ctx context.Context, index int) (DeviceContext, error) {
	select {
	case err := <-g.gate:
		if err != nil {
			return nil, err
		}
		g.opened.Add(1)
		return fakeContext{&g.destroyed}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func TestFleetLifecycle(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g := &gatedOpener{gate: make(chan error)}
	f := NewFleet(1, 2*time.Second, clk, g.open)
	defer f.Close()
	t0 := clk.Now()
	if st := f.Snapshot(t0); st.Status != StatusIdle {
		t.Fatalf("new fleet: %s", st.Status)
	}
	if g.opened.Load() != 0 {
		t.Fatal("a status read opened a context")
	}
	st := f.Wake(t0)
	if st.Status != StatusStarting || !st.ReadyAt.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("after wake: %+v", st)
	}
	// Past the estimate but with the context not yet open, the device is still starting and takes no work.
	clk.Advance(10 * time.Second)
	if st := f.Snapshot(clk.Now()); st.Status != StatusStarting {
		t.Fatalf("ready before its context opened: %s", st.Status)
	}
	if _, ok := f.Begin(clk.Now()); ok {
		t.Fatal("work began on a starting device")
	}
	g.gate <- nil
	f.opening.Wait()
	opened := clk.Now()
	st = f.Snapshot(opened)
	if st.Status != StatusReady || !st.ReadyAt.Equal(opened) || !st.WarmUntil.Equal(opened.Add(WarmFor)) {
		t.Fatalf("after open: %+v", st)
	}
	// Work keeps it warm past 15 minutes; the 15 minutes run again from its end.
	idx, ok := f.Begin(clk.Now())
	if !ok || idx != 0 {
		t.Fatalf("begin on a ready device: %d %v", idx, ok)
	}
	clk.Advance(20 * time.Minute)
	if st := f.Snapshot(clk.Now()); st.Status != StatusReady || st.Running != 1 {
		t.Fatalf("went cold while working: %+v", st)
	}
	f.End(idx, clk.Now())
	ended := clk.Now()
	// A second wake while ready opens nothing and extends the warm time from now.
	clk.Advance(10 * time.Minute)
	if st := f.Wake(clk.Now()); st.Status != StatusReady || !st.WarmUntil.Equal(clk.Now().Add(WarmFor)) {
		t.Fatalf("wake while ready: %+v (ended %s)", st, ended)
	}
	clk.Advance(WarmFor - time.Second)
	if st := f.Snapshot(clk.Now()); st.Status != StatusReady || g.destroyed.Load() != 0 {
		t.Fatalf("cold before its warm time: %+v destroyed %d", st, g.destroyed.Load())
	}
	clk.Advance(time.Second)
	if st := f.Snapshot(clk.Now()); st.Status != StatusIdle || g.destroyed.Load() != 1 {
		t.Fatalf("after the warm time: %+v destroyed %d, want idle and the context destroyed", st, g.destroyed.Load())
	}
	if g.opened.Load() != 1 {
		t.Fatalf("opened %d contexts, want 1", g.opened.Load())
	}
	// Woken again, it opens a new context.
	f.Wake(clk.Now())
	g.gate <- nil
	f.opening.Wait()
	if st := f.Snapshot(clk.Now()); st.Status != StatusReady || g.opened.Load() != 2 {
		t.Fatalf("second wake: %+v opened %d", st, g.opened.Load())
	}
}

func TestFleetOpenFailureAndSummary(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g := &gatedOpener{gate: make(chan error)}
	f := NewFleet(2, time.Second, clk, g.open)
	defer f.Close()
	f.Wake(clk.Now())
	g.gate <- errors.New("out of memory")
	g.gate <- nil
	f.opening.Wait()
	// One device failed (unavailable), the other is ready: the fleet is ready and work goes to the ready one.
	st := f.Snapshot(clk.Now())
	if st.Status != StatusReady {
		t.Fatalf("one of two ready: %+v", st)
	}
	if _, ok := f.Begin(clk.Now()); !ok {
		t.Fatal("no work on the ready device")
	}
	if _, ok := f.Begin(clk.Now()); !ok {
		t.Fatal("a ready device takes several jobs")
	}
	// The next wake retries the failed device: both end up ready and work.
	f.Wake(clk.Now())
	g.gate <- nil
	f.opening.Wait()
	if g.opened.Load() != 2 {
		t.Fatalf("the failed device was not opened again: %d opens", g.opened.Load())
	}
	if st := f.Snapshot(clk.Now()); st.Status != StatusReady || st.Running != 2 {
		t.Fatalf("after the retry: %+v", st)
	}
	if NewFleet(0, 0, clk, g.open).Snapshot(clk.Now()).Status != StatusUnavailable {
		t.Fatal("a fleet of no device is not unavailable")
	}
}

// Close while a context is opening: the open is cancelled, nothing is left open.
func TestFleetCloseCancelsOpening(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g := &gatedOpener{gate: make(chan error)}
	f := NewFleet(1, time.Second, clk, g.open)
	f.Wake(clk.Now())
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if g.opened.Load() != 0 {
		t.Fatal("a context opened after Close")
	}
}

// TestFleetOnReady: the hook runs once per device that becomes ready (its context opened), with the fleet's
// ready state; a failed open and a wake of an already ready device do not call it.
func TestFleetOnReady(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g := &gatedOpener{gate: make(chan error)}
	f := NewFleet(1, 2*time.Second, clk, g.open)
	defer f.Close()
	var calls []State
	f.OnReady(func(st State) { calls = append(calls, st) }) // read after opening.Wait: no race
	f.Wake(clk.Now())
	g.gate <- errors.New("no context")
	f.opening.Wait()
	if len(calls) != 0 {
		t.Fatalf("hook called on a failed open: %+v", calls)
	}
	clk.Advance(time.Second)
	f.Wake(clk.Now())
	clk.Advance(3 * time.Second)
	g.gate <- nil
	f.opening.Wait()
	if len(calls) != 1 || calls[0].Status != StatusReady || !calls[0].ReadyAt.Equal(clk.Now()) || !calls[0].WarmUntil.Equal(clk.Now().Add(WarmFor)) {
		t.Fatalf("hook calls after the open: %+v", calls)
	}
	f.Wake(clk.Now())
	f.opening.Wait()
	if len(calls) != 1 {
		t.Fatalf("a wake of a ready device called the hook: %+v", calls)
	}
}

// codecContext is a fake context that carries "kernels": a device value naming its index.
type codecContext struct {
	fakeContext
	dev accel.Device
}

func (c codecContext) Codec() accel.Device { return c.dev }

type namedDevice int

func (namedDevice) Load(context.Context, accel.Image) (accel.Surface, error) { return nil, nil }

// Work spreads over a node's ready devices, the least busy first (lowest index on a tie), for Begin and
// Acquire alike; a device that is not ready takes none.
func TestFleetSpreadsWorkOverDevices(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var destroyed atomic.Int32
	f := NewFleet(3, time.Second, clk, func(_ context.Context, index int) (DeviceContext, error) {
		if index == 2 {
			return nil, errors.New("device 2 is broken")
		}
		return codecContext{fakeContext{&destroyed}, namedDevice(index)}, nil
	})
	defer f.Close()
	f.Wake(clk.Now())
	f.opening.Wait()
	var got []int
	var ends []func(time.Time)
	for range 4 {
		dev, end, ok := f.Acquire(clk.Now())
		if !ok {
			t.Fatal("no device for work while two are ready")
		}
		got = append(got, int(dev.(namedDevice)))
		ends = append(ends, end)
	}
	if want := []int{0, 1, 0, 1}; !slices.Equal(got, want) {
		t.Fatalf("acquired devices %v, want %v", got, want)
	}
	ends[1](clk.Now()) // device 1 now runs one piece of work, device 0 two
	if i, ok := f.Begin(clk.Now()); !ok || i != 1 {
		t.Fatalf("began on device %d (%v), want 1, the least busy", i, ok)
	}
	if st := f.Snapshot(clk.Now()); st.Running != 4 {
		t.Fatalf("running %d, want 4", st.Running)
	}
}
