package authlimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Flights makes concurrent lookups of one credential share one read: the first lookup of an id leads (it
// reads, within the Limiter, and hands the answer on), and the lookups of that id that start before it ends
// wait for its answer instead of taking a token and a lookup slot each. A browser with many tabs or parallel
// asset loads with one stale cookie, or a client retrying one wrong key at once, costs one token. The zero
// value is ready; safe for concurrent use.
type Flights[T any] struct {
	mu    sync.Mutex
	under map[string]*flight[T] // id -> its read under way
}

// flight is one read; done closes once val and err are set.
type flight[T any] struct {
	done chan struct{}
	val  T
	err  error
}

// ErrLookAgain is the answer of a lookup that waited for another one which ended without an answer for
// others: the Limiter refused it (the other client's address, or the moment, not this one's), its request
// ended (its context), or its read panicked. The caller looks again (a few times; past that it is an error
// of the moment, answered 503).
var ErrLookAgain = errors.New("the credential lookup this one waited for ended without an answer; look again")

// Do returns the answer of the read of id under way, waiting for it or for ctx, whichever ends first; with
// none under way, it runs read and hands read's answer to the lookups of id that start meanwhile. A
// *Refusal from read, or any error once ctx has ended, is the caller's own: the waiters get ErrLookAgain
// instead. The waiters get an answer however read ends, a panic included.
func (fs *Flights[T]) Do(ctx context.Context, id string, read func() (T, error)) (T, error) {
	f, lead := fs.join(id)
	if !lead {
		select {
		case <-f.done:
			return f.val, f.err
		case <-ctx.Done():
			var zero T
			return zero, fmt.Errorf("wait for the lookup under way: %w", ctx.Err())
		}
	}
	var val T
	err := ErrLookAgain // the answer if read panics: nothing known
	defer func() {
		shared, serr := val, err
		var refused *Refusal
		if err != nil && (errors.As(err, &refused) || ctx.Err() != nil) {
			var zero T
			shared, serr = zero, ErrLookAgain
		}
		fs.land(id, f, shared, serr)
	}()
	val, err = read()
	return val, err
}

// join returns the flight of id under way, or starts one (true: the caller leads it).
func (fs *Flights[T]) join(id string) (*flight[T], bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f, ok := fs.under[id]; ok {
		return f, false
	}
	if fs.under == nil {
		fs.under = map[string]*flight[T]{}
	}
	f := &flight[T]{done: make(chan struct{})}
	fs.under[id] = f
	return f, true
}

// land ends the flight of id and hands its answer to the lookups waiting for it.
func (fs *Flights[T]) land(id string, f *flight[T], val T, err error) {
	fs.mu.Lock()
	delete(fs.under, id)
	fs.mu.Unlock()
	f.val, f.err = val, err
	close(f.done)
}
