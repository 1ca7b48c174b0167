package authlimit

import (
	"sync"
	"time"
)

// MissTTL is how long a credential found missing is answered without a read. Short, although a miss only
// ever hides a credential from a guesser: the credentials remembered (API-key ids of 64 random bits, session
// secrets of 256) are made before anyone can send them, so only a guesser can have sent one before it
// existed. A store restored from a backup, or written on another node, is seen within it.
const MissTTL = 30 * time.Second

// DefaultMaxMisses bounds a Misses: filling it takes that many distinct credentials, each found missing by a
// read within the Limiter.
const DefaultMaxMisses = 10_000

// Misses remembers, for MissTTL, the credentials a lookup found missing (by whatever id the caller gives:
// an API-key id, the hash of a session secret), so that the same one again costs no read and no token. It
// decides nothing about a credential that exists. The times come from the caller's injected clock; a clock
// that went back remembers nothing. Safe for concurrent use.
//
// Bounded: a Put into a full memory first drops the ids past MissTTL; when that leaves it more than half
// full (a flood of distinct ids within MissTTL), it forgets them all and starts over. Forgetting only costs
// reads again, each within the Limiter, and either way the next sweep is at least max/2 Puts away, so a Put
// costs O(1) on average.
type Misses struct {
	max int

	mu sync.Mutex
	at map[string]time.Time // id -> when it was found missing
}

// NewMisses returns an empty memory of at most limit ids (DefaultMaxMisses when limit <= 0).
func NewMisses(limit int) *Misses {
	if limit <= 0 {
		limit = DefaultMaxMisses
	}
	return &Misses{max: limit, at: map[string]time.Time{}}
}

// Has reports whether id was found missing less than MissTTL before now.
func (m *Misses) Has(id string, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.at[id]
	return ok && fresh(at, now)
}

// Put remembers that id was found missing at now.
func (m *Misses) Put(id string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.at[id]; !ok && len(m.at) >= m.max {
		for k, at := range m.at {
			if !fresh(at, now) {
				delete(m.at, k)
			}
		}
		if len(m.at) > m.max/2 {
			m.at = map[string]time.Time{}
		}
	}
	m.at[id] = now
}

// Forget drops id: it exists now (written through this node, or found live).
func (m *Misses) Forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.at, id)
}

// Len returns the number of ids held, expired ones not yet dropped included.
func (m *Misses) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.at)
}

// fresh reports whether a miss found at at still holds at now.
func fresh(at, now time.Time) bool {
	return now.Sub(at) < MissTTL && !now.Before(at)
}
