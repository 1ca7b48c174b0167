package webhooks

import (
	"context"
	"errors"
	"sync"
	"time"

	"filigrane/actors/outbox"
)

// Pending wake-up bounds: a wake-up call waits for its accelerator.ready at most MaxWakeWait (a GPU that
// has not become ready by then failed to start; the caller wakes it again), and a node keeps at most
// MaxPendingWakes of them (the oldest go first).
const (
	MaxWakeWait     = 15 * time.Minute
	MaxPendingWakes = 10_000
)

// Wakeups holds this node's wake-up calls that named a webhook endpoint while the GPU was still starting,
// until it becomes ready: Ready then hands each call's accelerator.ready event to the outbox, which
// delivers it like any other (signed, retried, listed). They are kept in memory, as the GPU's own state is:
// a node that stops while its GPU starts loses both, and its GPU does not become ready on that start
// (docs/webhooks.md). Safe for concurrent use.
type Wakeups struct {
	Outbox outbox.Outbox

	mu      sync.Mutex
	pending []pendingWake // oldest first
}

type pendingWake struct {
	orgID, endpointID, wakeID string
	at                        time.Time
}

// Add records wake-up call wakeID of orgID, made at at, whose accelerator.ready goes to endpointID.
func (w *Wakeups) Add(orgID, endpointID, wakeID string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) >= MaxPendingWakes {
		w.pending = w.pending[len(w.pending)-MaxPendingWakes+1:]
	}
	w.pending = append(w.pending, pendingWake{orgID: orgID, endpointID: endpointID, wakeID: wakeID, at: at})
}

// Pending reports how many wake-up calls wait for the GPU.
func (w *Wakeups) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// Ready hands the accelerator.ready event of every waiting call made within MaxWakeWait of now to the
// outbox (the GPU became ready at readyAt and stays warm until warmUntil) and forgets them, and forgets the
// older ones. A call whose hand-over fails stays waiting for the next Ready; the error says why.
func (w *Wakeups) Ready(ctx context.Context, readyAt, warmUntil, now time.Time) error {
	w.mu.Lock()
	due := w.pending
	w.pending = nil
	w.mu.Unlock()
	ready, warm := readyAt.UTC().Format(time.RFC3339), warmUntil.UTC().Format(time.RFC3339)
	var failed []pendingWake
	var errs []error
	for _, p := range due {
		if now.Sub(p.at) > MaxWakeWait {
			continue
		}
		e, err := AcceleratorReadyEffect(p.orgID, p.endpointID, AcceleratorReady{ID: p.wakeID, Accelerator: "gpu",
			Status: "ready", ReadyAt: &ready, WarmUntil: &warm}, now)
		if err == nil {
			err = w.Outbox.Add(ctx, e)
		}
		if err != nil {
			failed, errs = append(failed, p), append(errs, err)
		}
	}
	if len(failed) > 0 {
		w.mu.Lock()
		w.pending = append(failed, w.pending...)
		w.mu.Unlock()
	}
	return errors.Join(errs...)
}
