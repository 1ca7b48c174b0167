package actors_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"sync/atomic"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/codec"
	"filigrane/persistence/fsblobs"
)

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{"4GiB": 4 << 30, "512MiB": 512 << 20, "2G": 2 << 30, "750M": 750 << 20,
		"1000000": 1_000_000, "3GB": 3_000_000_000, " 8 GiB ": 8 << 30, "1TiB": 1 << 40, "2TB": 2e12, "1T": 1 << 40} {
		if got, err := actors.ParseByteSize(in); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "GiB", "-1G", "4PB", "1.5G", "99999999999999999G", "9999999TiB"} {
		if _, err := actors.ParseByteSize(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDecodeBudgetAcquire(t *testing.T) {
	b := actors.NewDecodeBudget(100 << 20)
	if _, err := b.Acquire(context.Background(), 101<<20); !errors.Is(err, actors.ErrDecodeTooLarge) {
		t.Fatalf("more than the budget: %v", err)
	}
	r1, err := b.Acquire(context.Background(), 60<<20)
	if err != nil {
		t.Fatal(err)
	}
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	if _, err := b.Acquire(expired, 60<<20); !errors.Is(err, actors.ErrDecodeBusy) {
		t.Fatalf("while in use: %v", err)
	}
	r1()
	r2, err := b.Acquire(context.Background(), 100<<20)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	r2()
	if actors.DefaultDecodeMemory() < actors.MinDecodeMemory {
		t.Fatal("default budget below the minimum")
	}
}

// TestDecodeBudgetWork: work that reserves more as it goes (a PDF detection: its parse, then its pages) is
// refused at once a part that cannot fit beside its first even in an empty budget, gets one that fits at once,
// ahead of an older plain reservation, and waits for one that can fit later. Two such works whose first parts
// fill the budget, each waiting for a later part, would wait for ever: the newest is answered busy, and once it
// gives its memory back the other goes on, then the plain reservation.
func TestDecodeBudgetWork(t *testing.T) {
	ctx := context.Background()
	b := actors.NewDecodeBudget(100 << 20)
	w1, err := b.AcquireWork(ctx, 40<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w1.Acquire(ctx, 61<<20); !errors.Is(err, actors.ErrDecodeTooLarge) {
		t.Fatalf("a part that never fits beside the first: %v", err)
	}
	w2, err := b.AcquireWork(ctx, 40<<20)
	if err != nil {
		t.Fatal(err)
	}
	plain := make(chan error, 1)
	go func() {
		release, err := b.Acquire(ctx, 30<<20) // 20 MiB free: it waits
		if err == nil {
			release()
		}
		plain <- err
	}()
	waitReservations(t, b, 1)
	page, err := w1.Acquire(ctx, 15<<20)
	if err != nil {
		t.Fatal(err)
	}
	page()
	granted := make(chan error, 1)
	go func() {
		release, err := w1.Acquire(ctx, 30<<20)
		if err == nil {
			defer release()
		}
		granted <- err
	}()
	waitReservations(t, b, 2)
	if _, err := w2.Acquire(ctx, 30<<20); !errors.Is(err, actors.ErrDecodeBusy) {
		t.Fatalf("the work that closed the deadlock: %v", err)
	}
	select {
	case err := <-granted:
		t.Fatalf("the other work's part answered (%v) while the memory is held", err)
	case err := <-plain:
		t.Fatalf("the plain reservation answered (%v) while the memory is held", err)
	default:
	}
	w2.Release()
	if err := <-granted; err != nil {
		t.Fatalf("the other work's part once the memory is free: %v", err)
	}
	if err := <-plain; err != nil {
		t.Fatalf("the plain reservation: %v", err)
	}
	w1.Release()
	all, err := b.Acquire(ctx, b.Capacity())
	if err != nil {
		t.Fatal("budget not released:", err)
	}
	all()
}

// TestDecodeBudgetEmptyPart: a part of nothing still takes a byte, so beside a first part of the whole budget
// it can never fit and is refused as too large (413), not answered busy (503, which says to retry) by the
// deadlock rule; beside a smaller first part it is granted.
func TestDecodeBudgetEmptyPart(t *testing.T) {
	ctx := context.Background()
	b := actors.NewDecodeBudget(100 << 20)
	whole, err := b.AcquireWork(ctx, b.Capacity())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := whole.Acquire(ctx, 0); !errors.Is(err, actors.ErrDecodeTooLarge) {
		t.Fatalf("an empty part beside the whole budget: %v, want too large", err)
	}
	whole.Release()
	w, err := b.AcquireWork(ctx, 40<<20)
	if err != nil {
		t.Fatal(err)
	}
	release, err := w.Acquire(ctx, 0)
	if err != nil {
		t.Fatalf("an empty part beside 40 MB: %v", err)
	}
	release()
	w.Release()
}

// TestDecodeBudgetPartsFirst: while a later part of work waits, a plain reservation waits too, even one queued
// before it that the free memory would fit: the part gets the memory first, so started work finishes before
// new work starts.
func TestDecodeBudgetPartsFirst(t *testing.T) {
	ctx := context.Background()
	b := actors.NewDecodeBudget(100 << 20)
	w, err := b.AcquireWork(ctx, 40<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	h1, err := b.Acquire(ctx, 30<<20)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := b.Acquire(ctx, 20<<20)
	if err != nil {
		t.Fatal(err)
	}
	plainGranted, plainDone := make(chan error, 1), make(chan struct{})
	go func() {
		release, err := b.Acquire(ctx, 20<<20) // 10 MiB free: it waits
		plainGranted <- err
		if err == nil {
			<-plainDone
			release()
		}
	}()
	waitReservations(t, b, 1)
	partGranted, partDone := make(chan error, 1), make(chan struct{})
	go func() {
		release, err := w.Acquire(ctx, 50<<20) // fits beside the first part once the others are released
		partGranted <- err
		if err == nil {
			<-partDone
			release()
		}
	}()
	waitReservations(t, b, 2)
	h2() // 30 MiB free: the plain reservation would fit, the part would not
	h1() // 60 MiB free: the part fits
	select {
	case err := <-partGranted:
		if err != nil {
			t.Fatalf("the part: %v", err)
		}
	case err := <-plainGranted:
		t.Fatalf("the plain reservation was answered (%v) while a part waited", err)
	}
	close(partDone)
	if err := <-plainGranted; err != nil {
		t.Fatalf("the plain reservation after the part: %v", err)
	}
	close(plainDone)
}

// TestDecodeBudgetCallerGoneIsNotADeadlock: two works whose first parts fill the budget, the older waiting for
// a later part, its caller gone (a client that hung up) but its goroutine not yet run to leave the queue. The
// newer work's part must wait for the memory the older gives back, not be refused busy (503) by the deadlock
// rule as if the older were stuck for ever.
func TestDecodeBudgetCallerGoneIsNotADeadlock(t *testing.T) {
	ctx := context.Background()
	b := actors.NewDecodeBudget(100 << 20)
	older, err := b.AcquireWork(ctx, 50<<20)
	if err != nil {
		t.Fatal(err)
	}
	newer, err := b.AcquireWork(ctx, 50<<20)
	if err != nil {
		t.Fatal(err)
	}
	gone := &cancelledUnseen{Context: ctx}
	olderDone := make(chan error, 1)
	go func() {
		_, err := older.Acquire(gone, 10<<20)
		older.Release() // its caller gives the memory back once its wait ends
		olderDone <- err
	}()
	waitReservations(t, b, 1)
	gone.cancelled.Store(true)
	release, err := newer.Acquire(ctx, 10<<20)
	if err != nil {
		t.Fatalf("the newer work's part while the older's caller is gone: %v, want granted", err)
	}
	release()
	newer.Release()
	if err := <-olderDone; !errors.Is(err, actors.ErrDecodeBusy) || !errors.Is(err, context.Canceled) {
		t.Fatalf("the older work's part: %v, want busy, cancelled", err)
	}
	all, err := b.Acquire(ctx, b.Capacity())
	if err != nil {
		t.Fatal("budget not released:", err)
	}
	all()
}

// cancelledUnseen is a context cancelled (Err says so) whose Done never closes: the instant after a cancel when
// the waiting goroutine has not yet run to see it, held still so that a test can act in it.
type cancelledUnseen struct {
	context.Context
	cancelled atomic.Bool
}

func (c *cancelledUnseen) Err() error {
	if c.cancelled.Load() {
		return context.Canceled
	}
	return nil
}

// waitReservations polls b until n reservations wait in it, within a bounded time.
func waitReservations(t *testing.T, b *actors.DecodeBudget, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.Waiting() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d reservations wait in the decode budget, want %d", b.Waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDetectStoredWithinBudget runs the edge's synchronous detection on stored files with a small budget.
func TestDetectStoredWithinBudget(t *testing.T) {
	blobs, err := fsblobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cdc, err := codec.New([]byte(codec.DevelopmentKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store := func(img image.Image) string {
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		key := "inputs/test/" + time.Now().Format("150405.000000000")
		if _, err := blobs.Put(ctx, key, &b); err != nil {
			t.Fatal(err)
		}
		return key
	}
	budget := actors.NewDecodeBudget(64 << 20)
	m := actors.Media{Blobs: blobs, Codec: cdc, Budget: budget}

	// A 16000×256 strip (4 MP), whose uncropped detection would take about 180 MB, is detected within the
	// 64 MB budget because only its top-left 4:1 region is analysed. (The images are as small as shows this:
	// encoding and decoding them dominates the test's time under the race detector.)
	strip := store(image.NewGray(image.Rect(0, 0, 16000, 256)))
	if _, perr := m.DetectStored(ctx, "org", strip, time.Second); perr != nil {
		t.Fatalf("strip: %v", perr)
	}
	if codec.DetectMemory(16000, 256) < 2*budget.Capacity() {
		t.Fatal("the uncropped estimate should be far above the budget")
	}

	// A file needing more than the whole budget (a 3000×2000 image: about 120 MB) is refused as too large; one
	// arriving while the budget is in use waits, then gets decode_busy.
	big := store(image.NewGray(image.Rect(0, 0, 3000, 2000)))
	if _, perr := m.DetectStored(ctx, "org", big, time.Second); perr == nil || perr.Code != actors.CodeImageTooLarge {
		t.Fatalf("over the budget: %v", perr)
	}
	hold, err := budget.Acquire(ctx, budget.Capacity())
	if err != nil {
		t.Fatal(err)
	}
	small := store(image.NewGray(image.Rect(0, 0, 300, 300)))
	if _, perr := m.DetectStored(ctx, "org", small, 10*time.Millisecond); perr == nil || perr.Code != actors.CodeDecodeBusy || !perr.Retryable {
		t.Fatalf("budget in use: %v", perr)
	}
	hold()

	// A cancelled request stops before decoding.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, perr := m.DetectStored(cctx, "org", small, time.Second); perr == nil {
		t.Fatal("cancelled detection succeeded")
	}
	// Nothing stays reserved.
	all, err := budget.Acquire(ctx, budget.Capacity())
	if err != nil {
		t.Fatal("budget not released:", err)
	}
	all()
}
