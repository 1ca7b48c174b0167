package accounts

import (
	"sync"
	"time"

	"filigrane/internal/authlimit"
)

// sessionMemory remembers, by session key (the hash of the secret), which sessions this node saw live lately
// and which it found missing. It decides only what a lookup may cost, never whether a session is valid:
//
//   - A session seen live is still read from the store on every request (a sign-out, a password change or an
//     expiry on any node ends it at once, as docs/console.md promises); being remembered only exempts its
//     read from Accounts.Limit, so a person signed in keeps working while someone at the same address sends
//     random cookies.
//   - A session found missing (never existed, signed out, expired) is answered ErrNoSession without a read
//     for authlimit.MissTTL. Only a guesser can be wrong here: secrets are 256 random bits made at sign-in,
//     so no one can present a secret before the session exists unless they guessed it, and a session that
//     ended never comes back. A store restored from a backup is seen within MissTTL.
type sessionMemory struct {
	liveTTL time.Duration
	missing *authlimit.Misses // session keys found missing; bounded by authlimit.DefaultMaxMisses

	// mu makes a look or a put see live and missing together (taken before missing's own lock).
	mu   sync.Mutex
	live map[string]time.Time // session key -> when it was last seen live
}

// maxLiveSessions bounds live; past it the map starts over rather than tracking recency. Filling it takes
// that many sessions, each a sign-in (limited per address); starting over only costs reads again, within
// the limits.
const maxLiveSessions = 100_000

func newSessionMemory(liveTTL time.Duration) *sessionMemory {
	return &sessionMemory{liveTTL: liveTTL, live: map[string]time.Time{},
		missing: authlimit.NewMisses(authlimit.DefaultMaxMisses)}
}

// sessionKnowledge is what the memory knows of a session key.
type sessionKnowledge int

const (
	sessionUnknown sessionKnowledge = iota
	sessionLive                     // seen live less than liveTTL ago: read without limit
	sessionMissing                  // found missing less than authlimit.MissTTL ago: no read
)

// look returns what the memory knows of key at now. A clock that went back knows nothing.
func (m *sessionMemory) look(key string, now time.Time) sessionKnowledge {
	if m == nil {
		return sessionUnknown
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.missing.Has(key, now) {
		return sessionMissing
	}
	if at, ok := m.live[key]; ok && now.Sub(at) < m.liveTTL && !now.Before(at) {
		return sessionLive
	}
	return sessionUnknown
}

// putLive remembers that key was live at now.
func (m *sessionMemory) putLive(key string, now time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.live) >= maxLiveSessions {
		m.live = map[string]time.Time{}
	}
	m.live[key] = now
	m.missing.Forget(key)
}

// putMissing remembers that key had no live session at now.
func (m *sessionMemory) putMissing(key string, now time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.live, key)
	m.missing.Put(key, now)
}
