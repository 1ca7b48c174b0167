package actors

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// DecodeBudget is a node's memory for decoding and analysing images and for parsing and analysing PDFs, in
// bytes. Every decode or parse (a worker's job, a synchronous detection or a PDF's probe at the edge) reserves
// its estimated peak before reading the file and gives it back when done, so that concurrent large files queue
// (jobs) or are turned away with 503 (synchronous requests) instead of exhausting the node's memory.
//
// Work whose memory is known only as it goes (a PDF detection: the parse's part before, each page's part as the
// renderer delivers it) reserves the first part with AcquireWork and each later part under it (Work.Acquire),
// which is what lets a detection of small pages run beside other work instead of reserving every page at the
// largest size. Later parts come first: they are granted whenever they fit, in order, and plain reservations
// (Acquire) wait, first come first served, while any later part waits, so that started work finishes before
// new work starts. Holding the first part while waiting for a later one can deadlock (two detections whose
// parses fill the budget, each waiting for room for a page); the budget sees it (everything held is the first
// part of work that waits for a later one) and fails the newest such work's waits with ErrDecodeBusy, so that
// it gives its memory back and the others go on.
type DecodeBudget struct {
	capacity int64
	waiting  atomic.Int64 // reservations queued, not yet answered (Waiting)

	mu      sync.Mutex
	used    int64     // bytes reserved
	stalled int64     // bytes of the first parts of work with a later part waiting
	queue   []*waiter // waiting reservations, oldest first
}

// waiter is one reservation waiting in the budget; ready receives its answer once (nil: granted).
type waiter struct {
	ctx   context.Context // the caller's: once it ends, the waiter is answered busy instead of granted or counted
	n     int64
	work  *Work // nil: a plain reservation
	ready chan error
}

// Work is a reservation that reserves more as its work goes (AcquireWork): its first part is held until
// Release, its later parts each until their own release.
type Work struct {
	b       *DecodeBudget
	n       int64 // the first part
	waiting int   // later parts waiting (guarded by b.mu)
	broken  bool  // failed to break a deadlock: later parts are refused (guarded by b.mu)
	done    bool  // released (guarded by b.mu)
}

// Errors of DecodeBudget.Acquire.
var (
	// ErrDecodeTooLarge: the request needs more than the whole budget; it can never run on this node.
	ErrDecodeTooLarge = errors.New("decode needs more memory than the node's decode budget")
	// ErrDecodeBusy: the wait for memory ended (its context, or a deadlock the budget broke) before enough was
	// free.
	ErrDecodeBusy = errors.New("decode memory is in use")
)

// MinDecodeMemory is the smallest default budget: one 40-megapixel embed.
const MinDecodeMemory int64 = 1 << 30

// NewDecodeBudget returns a budget of capacity bytes; 0 or less takes DefaultDecodeMemory.
func NewDecodeBudget(capacity int64) *DecodeBudget {
	if capacity <= 0 {
		capacity = DefaultDecodeMemory()
	}
	return &DecodeBudget{capacity: capacity}
}

// Capacity is the budget's size in bytes.
func (b *DecodeBudget) Capacity() int64 { return b.capacity }

// Acquire reserves n bytes, waiting until ctx ends; call release when the decoded image is no longer used.
func (b *DecodeBudget) Acquire(ctx context.Context, n int64) (release func(), err error) {
	if n > b.capacity {
		return nil, fmt.Errorf("needs %d MB, the budget is %d MB: %w", mb(n), mb(b.capacity), ErrDecodeTooLarge)
	}
	n = max(n, 1)
	if err := b.wait(&waiter{ctx: ctx, n: n}); err != nil {
		return nil, err
	}
	return b.releaser(n), nil
}

// AcquireWork reserves n bytes as Acquire does, for work that reserves more under it as it goes (Work.Acquire);
// call Release when the work is done.
func (b *DecodeBudget) AcquireWork(ctx context.Context, n int64) (*Work, error) {
	if n > b.capacity {
		return nil, fmt.Errorf("needs %d MB, the budget is %d MB: %w", mb(n), mb(b.capacity), ErrDecodeTooLarge)
	}
	n = max(n, 1)
	if err := b.wait(&waiter{ctx: ctx, n: n}); err != nil {
		return nil, err
	}
	return &Work{b: b, n: n}, nil
}

// Acquire reserves n more bytes for w's work, beside its first part, waiting until ctx ends; call release when
// that part is no longer used. A part that cannot fit beside the first part even in an empty budget is refused
// at once with ErrDecodeTooLarge; a wait that ends first, or that the budget ends to break a deadlock, with
// ErrDecodeBusy.
func (w *Work) Acquire(ctx context.Context, n int64) (release func(), err error) {
	b := w.b
	n = max(n, 1) // before the check: a part of nothing still takes a byte, which may not fit beside the first
	if n > b.capacity-w.n {
		return nil, fmt.Errorf("needs %d MB beside the %d MB already reserved, the budget is %d MB: %w",
			mb(n), mb(w.n), mb(b.capacity), ErrDecodeTooLarge)
	}
	if err := b.wait(&waiter{ctx: ctx, n: n, work: w}); err != nil {
		return nil, err
	}
	return b.releaser(n), nil
}

// Release gives back w's first part; its later parts are released by their own release. Calling it again does
// nothing.
func (w *Work) Release() {
	b := w.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.done {
		return
	}
	w.done = true
	b.used -= w.n
	if w.waiting > 0 { // a later part still waits (its caller gave up on it): w's first part is no longer held
		b.stalled -= w.n
	}
	b.grant()
}

// releaser returns the release of n granted bytes; calling it again does nothing.
func (b *DecodeBudget) releaser(n int64) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.used -= n
			b.grant()
		})
	}
}

// wait queues w and waits for its answer or for its context to end.
func (b *DecodeBudget) wait(w *waiter) error {
	ctx := w.ctx
	if err := ctx.Err(); err != nil { // the caller is gone: nothing to reserve for
		return fmt.Errorf("waiting for %d MB of decode memory: %w (%w)", mb(w.n), ErrDecodeBusy, err)
	}
	w.ready = make(chan error, 1)
	b.mu.Lock()
	if w.work != nil && (w.work.broken || w.work.done) {
		b.mu.Unlock()
		return fmt.Errorf("waiting for %d MB of decode memory: %w (other work waits for the memory this work holds)", mb(w.n), ErrDecodeBusy)
	}
	b.queue = append(b.queue, w)
	b.waiting.Add(1) // once queued: a caller that reads it sees the order of the queue
	defer b.waiting.Add(-1)
	if w.work != nil {
		if w.work.waiting++; w.work.waiting == 1 && !w.work.done {
			b.stalled += w.work.n
		}
	}
	b.grant()
	b.mu.Unlock()
	select {
	case err := <-w.ready:
		return err
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case err := <-w.ready: // answered meanwhile
		if err == nil {
			b.used -= w.n // granted, but nobody will use it
			b.grant()
		}
	default:
		b.dequeue(w)
		b.grant()
	}
	return fmt.Errorf("waiting for %d MB of decode memory: %w (%w)", mb(w.n), ErrDecodeBusy, ctx.Err())
}

// dequeue removes w from the queue (b.mu held).
func (b *DecodeBudget) dequeue(w *waiter) {
	for i, q := range b.queue {
		if q == w {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			break
		}
	}
	if w.work != nil {
		if w.work.waiting--; w.work.waiting == 0 && !w.work.done {
			b.stalled -= w.work.n
		}
	}
}

// answer removes w from the queue and sends it err (b.mu held); nil grants it.
func (b *DecodeBudget) answer(w *waiter, err error) {
	b.dequeue(w)
	if err == nil {
		b.used += w.n
	}
	w.ready <- err
}

// grant answers what the free memory allows (b.mu held): the later parts of work that fit, oldest first, then,
// when none waits, plain reservations in order until one does not fit. Then, if everything held is the first
// part of work waiting for a later part (none of it can be given back), it breaks the deadlock: the newest such
// work's waits fail.
func (b *DecodeBudget) grant() {
	// A waiter whose caller is gone is answered first, before its goroutine gets round to leaving the queue:
	// granted, its memory would wait for that goroutine to give it back, and counted as a stalled part, its
	// work's first part would look held for ever and the deadlock rule would refuse other work busy (503) just
	// before that caller gives the memory back.
	for i := 0; i < len(b.queue); {
		if w := b.queue[i]; w.ctx.Err() != nil {
			b.answer(w, fmt.Errorf("waiting for %d MB of decode memory: %w (%w)", mb(w.n), ErrDecodeBusy, w.ctx.Err()))
			continue
		}
		i++
	}
	parts := false
	for i := 0; i < len(b.queue); {
		w := b.queue[i]
		switch {
		case w.work == nil:
			i++
		case w.n <= b.capacity-b.used:
			b.answer(w, nil)
		default:
			parts = true
			i++
		}
	}
	for !parts && len(b.queue) > 0 && b.queue[0].n <= b.capacity-b.used {
		b.answer(b.queue[0], nil)
	}
	if !parts || b.used > b.stalled {
		return
	}
	var newest *Work
	for _, w := range b.queue {
		if w.work != nil {
			newest = w.work
		}
	}
	newest.broken = true
	for i := len(b.queue) - 1; i >= 0; i-- {
		if w := b.queue[i]; w.work == newest {
			b.answer(w, fmt.Errorf("waiting for %d MB of decode memory: %w (other work waits for the memory this work holds)", mb(w.n), ErrDecodeBusy))
		}
	}
	b.grant() // the queue changed: what waited behind a part may fit now, or the deadlock may remain
}

// Waiting is how many reservations are in Acquire or Work.Acquire at this moment, queued (waiting for memory,
// or about to be answered): what a test or an operator reads to see work queued behind the budget.
func (b *DecodeBudget) Waiting() int64 { return b.waiting.Load() }

func mb(n int64) int64 { return (n + 1<<20 - 1) >> 20 }

// DefaultDecodeMemory is the budget a node takes when none is configured: half the memory available to the
// process (the cgroup limit when there is one, else MemAvailable of /proc/meminfo), at least MinDecodeMemory;
// 4 GiB where neither can be read.
func DefaultDecodeMemory() int64 {
	avail := memoryAvailable()
	if avail <= 0 {
		return 4 << 30
	}
	return max(avail/2, MinDecodeMemory)
}

// memoryAvailable returns the memory this process may use, or 0 when unknown.
func memoryAvailable() int64 {
	var avail int64
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					avail = kb << 10
				}
			}
		}
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if limit, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && (avail == 0 || limit < avail) {
			avail = limit
		}
	}
	return avail
}

// ParseByteSize reads a size such as "4GiB", "512MiB", "2G", "750M", "1TiB" or a plain number of bytes (the
// --decode-memory and --min-free-disk flags).
func ParseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3},
		{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit (TiB, GiB, MiB, T, G, M)", s)
	}
	return n * mult, nil
}
