package actors_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"filigrane/actors"
)

// TestDecodeBudgetRandomized drives goroutines through random sequences of the decode budget's calls (plain
// reservations; work with one to three later parts, reserved one after another or at once as a PDF
// detection's render workers do; sizes from nothing to more than the budget; contexts that end before the
// call, at a random point or never; releases in random orders, a work's first part sometimes before its
// parts) and checks from outside what a user of the budget relies on: no more than the capacity is held at
// once; every call is answered; a part that can never fit beside its work's first part is refused as too
// large; busy only when the call's context ended, or for a part of work refused to break a deadlock (which
// takes two works holding their first parts, and refuses that work's later parts too); and once everything
// is released the budget is empty (nothing waits, the whole capacity is granted at once).
//
// Each run takes a new seed, printed on failure; DECODE_BUDGET_SEED=<seed> replays its choices (the
// goroutines' interleaving is the scheduler's).
func TestDecodeBudgetRandomized(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("DECODE_BUDGET_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("DECODE_BUDGET_SEED=%q: %v", s, err)
		}
	}
	const capacity, callers, calls = 100, 8, 50
	h := &budgetHarness{t: t, seed: seed, b: actors.NewDecodeBudget(capacity), capacity: capacity,
		watchers: map[*partWatch]bool{}, endable: map[*context.CancelFunc]bool{}}
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			for range calls {
				if rng.IntN(3) == 0 {
					h.plain(rng)
				} else {
					h.work(rng)
				}
			}
		})
	}
	// The deadline only turns a caller left waiting into a failure: every call is answered long before it.
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("seed %d: callers still waiting for the decode budget after 30 s (%d reservations queued, %d bytes held by callers)\n%s",
			seed, h.b.Waiting(), h.heldNow(), buf)
	}
	if held := h.heldNow(); held != 0 {
		t.Fatalf("seed %d: the harness counts %d bytes still held", seed, held)
	}
	if n := h.b.Waiting(); n != 0 {
		t.Fatalf("seed %d: %d reservations wait in an idle budget", seed, n)
	}
	guard, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	release, err := h.b.Acquire(guard, capacity)
	if err != nil {
		t.Fatalf("seed %d: the whole budget once everything is released: %v", seed, err)
	}
	release()
	if h.deadlocks > 0 {
		t.Logf("seed %d: %d parts refused to break a deadlock", seed, h.deadlocks)
	}
}

// budgetHarness counts, from outside the budget, what its callers hold.
type budgetHarness struct {
	t        *testing.T
	seed     uint64
	b        *actors.DecodeBudget
	capacity int64

	mu        sync.Mutex
	held      int64                        // bytes granted and not yet released, as the callers count them
	firsts    int                          // works holding their first part
	watchers  map[*partWatch]bool          // works running, which see how many first parts are held meanwhile
	endable   map[*context.CancelFunc]bool // contexts of calls that another caller may end
	deadlocks int                          // parts refused busy while their context lived
}

// partWatch is one work: the most works holding a first part at once while it ran.
type partWatch struct{ mostFirsts int }

func (h *budgetHarness) fail(format string, args ...any) {
	h.t.Errorf("seed %d: "+format, append([]any{h.seed}, args...)...)
}

func (h *budgetHarness) heldNow() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

// granted counts n bytes as held from now (after the budget granted them, so never more than the budget holds).
func (h *budgetHarness) granted(what string, n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held += max(n, 1)
	if h.held > h.capacity {
		h.fail("%s of %d granted while %d bytes are held, over the capacity of %d", what, n, h.held-max(n, 1), h.capacity)
	}
}

// released stops counting n bytes (before they are given back to the budget).
func (h *budgetHarness) released(n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held -= max(n, 1)
}

// firstHeld counts a work's first part as held (d=1) or released (d=-1).
func (h *budgetHarness) firstHeld(d int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.firsts += d
	for w := range h.watchers {
		w.mostFirsts = max(w.mostFirsts, h.firsts)
	}
}

func (h *budgetHarness) watch() *partWatch {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := &partWatch{mostFirsts: h.firsts}
	h.watchers[w] = true
	return w
}

func (h *budgetHarness) most(w *partWatch) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return w.mostFirsts
}

func (h *budgetHarness) unwatch(w *partWatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.watchers, w)
}

// size picks a reservation's size: nothing, a byte, small, about half, large, the whole budget or (rarely)
// more.
func (h *budgetHarness) size(rng *rand.Rand) int64 {
	c := h.capacity
	switch rng.IntN(10) {
	case 0:
		return 0
	case 1:
		return 1
	case 2, 3, 4:
		return 1 + rng.Int64N(c/10)
	case 5, 6:
		return c/4 + rng.Int64N(c/4)
	case 7:
		return c/2 + rng.Int64N(c/2)
	case 8:
		return c
	default:
		return c + 1 + rng.Int64N(c)
	}
}

// ctx gives a call's context: one that never ends, one already ended, or one that ends after a random number
// of the scheduler's turns; stop ends it in any case.
func (h *budgetHarness) ctx(rng *rand.Rand) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	switch rng.IntN(7) {
	case 0:
		cancel()
	case 1, 2:
		turns := rng.IntN(50)
		go func() {
			for range turns {
				runtime.Gosched()
			}
			cancel()
		}()
	case 3:
		h.mu.Lock()
		h.endable[&cancel] = true
		h.mu.Unlock()
		return ctx, func() {
			h.mu.Lock()
			delete(h.endable, &cancel)
			h.mu.Unlock()
			cancel()
		}
	}
	return ctx, cancel
}

// endOne ends the context of a call that may be waiting (chosen by the map's order), just before the caller
// releases memory: the wait ends as the budget may grant it.
func (h *budgetHarness) endOne() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for cancel := range h.endable {
		(*cancel)()
		delete(h.endable, cancel)
		return
	}
}

// release gives back n bytes, sometimes just after ending another call's context.
func (h *budgetHarness) release(rng *rand.Rand, n int64, release func()) {
	h.released(n)
	if rng.IntN(3) == 0 {
		h.endOne()
	}
	release()
}

// hold keeps a reservation for a random number of the scheduler's turns.
func hold(rng *rand.Rand) {
	for range rng.IntN(20) {
		runtime.Gosched()
	}
}

// checkRefusal checks a refused call: too large only when n can never fit, busy only when ctx ended.
func (h *budgetHarness) checkRefusal(what string, n int64, ctx context.Context, err error) {
	switch {
	case n > h.capacity && !errors.Is(err, actors.ErrDecodeTooLarge):
		h.fail("%s of %d, over the capacity of %d: %v, want too large", what, n, h.capacity, err)
	case n > h.capacity:
	case errors.Is(err, actors.ErrDecodeBusy) && ctx.Err() == nil:
		h.fail("%s of %d refused busy while its context lives: %v", what, n, err)
	case !errors.Is(err, actors.ErrDecodeBusy):
		h.fail("%s of %d: %v, want granted or busy", what, n, err)
	}
}

// plain makes one plain reservation, holds it and releases it.
func (h *budgetHarness) plain(rng *rand.Rand) {
	n := h.size(rng)
	ctx, stop := h.ctx(rng)
	defer stop()
	release, err := h.b.Acquire(ctx, n)
	if err != nil {
		h.checkRefusal("a plain reservation", n, ctx, err)
		return
	}
	h.granted("a plain reservation", n)
	hold(rng)
	h.release(rng, n, release)
	if rng.IntN(4) == 0 {
		release() // again: nothing happens
	}
}

// work reserves a first part, then one to three later parts one after another or at once, each held a while,
// and releases the first part after its parts, or sometimes while they are still reserved or held.
func (h *budgetHarness) work(rng *rand.Rand) {
	first := h.size(rng)
	ctx, stop := h.ctx(rng)
	defer stop()
	w, err := h.b.AcquireWork(ctx, first)
	if err != nil {
		h.checkRefusal("a work's first part", first, ctx, err)
		return
	}
	h.granted("a work's first part", first)
	h.firstHeld(1)
	// A deadlock needs another work's first part held at once. It is seen at the part refused, or at an
	// earlier part of this work (those after it are refused at once, perhaps before that one's goroutine
	// counts it), so the whole work is watched.
	watch := h.watch()
	defer h.unwatch(watch)
	var firstReleased atomic.Bool
	releaseFirst := func() {
		h.release(rng, first, func() {
			firstReleased.Store(true)
			w.Release()
		})
		h.firstHeld(-1) // after: a part refused meanwhile may have seen this work's first part held
	}

	parts := 1 + rng.IntN(3)
	together := rng.IntN(2) == 0
	early := together && rng.IntN(5) == 0 // the first part is released while its parts are reserved
	var refusedBusy sync.Mutex
	broken := false // a part was refused to break a deadlock: later ones must be refused too
	var wg sync.WaitGroup
	for i := range parts {
		n := h.size(rng)
		partRng := rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
		part := func() {
			pctx, pstop := h.ctx(partRng)
			defer pstop()
			refusedBusy.Lock()
			wasBroken := broken
			refusedBusy.Unlock()
			release, err := w.Acquire(pctx, n)
			firsts := h.most(watch)
			if max(n, 1) > h.capacity-max(first, 1) {
				if !errors.Is(err, actors.ErrDecodeTooLarge) {
					h.fail("a part of %d beside a first part of %d, which can never fit in %d: %v, want too large",
						n, first, h.capacity, err)
					if err == nil {
						release()
					}
				}
				return
			}
			if err == nil {
				if wasBroken {
					h.fail("a part of %d granted after the work was refused to break a deadlock", n)
				}
				h.granted("a part", n)
				hold(partRng)
				h.release(partRng, n, release)
				return
			}
			switch {
			case errors.Is(err, actors.ErrDecodeTooLarge):
				h.fail("a part of %d beside a first part of %d, which can fit in %d: %v", n, first, h.capacity, err)
			case !errors.Is(err, actors.ErrDecodeBusy):
				h.fail("a part of %d: %v, want granted or busy", n, err)
			case pctx.Err() != nil || firstReleased.Load():
				// its context ended, or its work's first part was released (nothing more to reserve for)
			case firsts < 2:
				h.fail("a part of %d refused busy while its context lives and at most %d work held its first part while this work ran: %v",
					n, firsts, err)
			default:
				refusedBusy.Lock()
				broken = true
				refusedBusy.Unlock()
				h.mu.Lock()
				h.deadlocks++
				h.mu.Unlock()
			}
		}
		if together {
			wg.Go(part)
		} else {
			part()
		}
	}
	if early {
		// Give the parts a few turns to queue (Waiting is any caller's: this only makes it likelier that the
		// release races with a part of this work waiting).
		for i := 0; i < 20 && h.b.Waiting() == 0; i++ {
			runtime.Gosched()
		}
		releaseFirst()
		wg.Wait()
		return
	}
	wg.Wait()
	releaseFirst()
	w.Release() // again: nothing happens
}
