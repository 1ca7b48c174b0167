package storetest

import (
	"context"
	"sync/atomic"

	"filigrane/persistence"
)

// Held is a real store whose reads of the keys Hold matches wait until Release is closed (or the read's
// context ends): a slow store, for tests of what waits on a read. Each held read is counted in Reads and
// announced on Entered (buffered by the caller, so that the reads do not block on the test) before it waits.
type Held struct {
	persistence.Store
	Hold    func(key []byte) bool
	Reads   atomic.Int64
	Entered chan struct{}
	Release chan struct{}
}

// NewHeld returns a Held around st holding the keys hold matches, announcing up to entered reads unread.
func NewHeld(st persistence.Store, hold func(key []byte) bool, entered int) *Held {
	return &Held{Store: st, Hold: hold, Entered: make(chan struct{}, entered), Release: make(chan struct{})}
}

// Get reads key, first waiting for Release when Hold matches it.
func (s *Held) Get(ctx context.Context, key []byte) (persistence.Item, error) {
	if s.Hold(key) {
		s.Reads.Add(1)
		s.Entered <- struct{}{}
		select {
		case <-s.Release:
		case <-ctx.Done():
			return persistence.Item{}, ctx.Err()
		}
	}
	return s.Store.Get(ctx, key)
}
