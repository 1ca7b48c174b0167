// Package accounts owns the people who sign in to the web console: users (an email and an argon2id password
// hash, each a member of one organization or more), their sessions (each working in one of the user's
// organizations), the sign-in lockout, invitations, and the rules of membership administration from the
// console (rules.go: who may change whose role or remove whom; an organization keeps an owner). Records live
// in the node's Store (Pebble, or object storage in a cluster) and are written with compare-and-set through
// actors/durable, so every node of a cluster sees the same users and sessions.
//
// It must not know about HTTP, cookies or pages (package http/console does). What a member's role lets their
// keys and sessions do with the API is decided by the organization record and the API, not here. Session
// secrets and passwords are never stored: a session is found by the SHA-256 of its secret (256 random bits),
// a password by its argon2id hash. What a random session cookie may cost in store reads is bounded here too:
// secrets found missing are remembered (an authlimit.Misses), others are looked up within the node's
// authlimit.Limiter, one read for the concurrent lookups of a secret (authlimit.Flights), and sessions seen
// live skip that limit (sessionmemory.go); a session is never taken as valid without reading it.
package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"

	"filigrane/actors/durable"
	"filigrane/internal/authlimit"
	"filigrane/internal/clock"
	"filigrane/internal/hiddenchar"
	"filigrane/persistence"
)

// Storage keys (docs/ARCHITECTURE.md lists them).
const (
	prefixUser      = "account/user/"    // account/user/<user_id> -> User
	prefixUserEmail = "account/email/"   // account/email/<normalised email> -> user id (create-only: emails are unique)
	prefixSession   = "account/session/" // account/session/<hex sha256 of the secret> -> Session
)

// Errors. Callers map them to what a person sees; ErrBadCredentials is one answer for an unknown email and a
// wrong password, so that a guesser learns nothing.
var (
	ErrBadCredentials = errors.New("accounts: wrong email or password")
	ErrLocked         = errors.New("accounts: sign-in locked after repeated failures")
	ErrNoSession      = errors.New("accounts: no such session, or it expired")
	ErrEmailTaken     = errors.New("accounts: a user with this email exists")
	ErrWeakPassword   = errors.New("accounts: password too short or too long")
	ErrBadEmail       = errors.New("accounts: not an email address")
	ErrNotFound       = errors.New("accounts: no such user")
)

// Limits of what a person can send: they bound the cost of a request before any hashing.
const (
	MinPasswordLen = 12  // characters
	MaxPasswordLen = 256 // bytes
	MaxEmailLen    = 254 // bytes (RFC 5321's path limit)
)

// Policy is the sign-in and session policy. Zero values take the defaults.
type Policy struct {
	// IdleTimeout ends a session that has not been used for this long (default 2 h); AbsoluteTimeout ends it
	// this long after sign-in, used or not (default 12 h).
	IdleTimeout, AbsoluteTimeout time.Duration
	// MaxFailures wrong passwords within FailureWindow lock the account for LockFor (defaults 5, 15 min,
	// 15 min). A locked account refuses even the right password, so a guesser cannot tell.
	MaxFailures   int
	FailureWindow time.Duration
	LockFor       time.Duration
}

func (p *Policy) defaults() {
	if p.IdleTimeout <= 0 {
		p.IdleTimeout = 2 * time.Hour
	}
	if p.AbsoluteTimeout <= 0 {
		p.AbsoluteTimeout = 12 * time.Hour
	}
	if p.MaxFailures <= 0 {
		p.MaxFailures = 5
	}
	if p.FailureWindow <= 0 {
		p.FailureWindow = 15 * time.Minute
	}
	if p.LockFor <= 0 {
		p.LockFor = 15 * time.Minute
	}
}

// Argon2 are argon2id parameters; stored with each hash so that they can be raised later without
// invalidating existing passwords.
type Argon2 struct {
	Time    uint32 `msgpack:"t"`
	MemKiB  uint32 `msgpack:"m"`
	Threads uint8  `msgpack:"p"`
}

// DefaultArgon2 follows the current OWASP recommendation for argon2id (19 MiB, 2 passes, 1 lane).
var DefaultArgon2 = Argon2{Time: 2, MemKiB: 19 * 1024, Threads: 1}

// User is a console user: one person, a member of one organization or more. OrgID and MemberID are the
// membership the user was created with (a session starts there); Memberships are those added since
// (organizations the user created in the console).
type User struct {
	ID          string       `msgpack:"id"`
	Email       string       `msgpack:"email"`
	OrgID       string       `msgpack:"org_id"`
	MemberID    string       `msgpack:"member_id"`
	Memberships []Membership `msgpack:"memberships,omitempty"`

	Hash   []byte `msgpack:"hash"`
	Salt   []byte `msgpack:"salt"`
	Params Argon2 `msgpack:"params"`
	// Epoch counts password changes; a session carries the epoch it was made in, so a change ends every
	// other session at once without listing them.
	Epoch uint64 `msgpack:"epoch"`

	CreatedAt         time.Time `msgpack:"created_at"`
	PasswordChangedAt time.Time `msgpack:"password_changed_at"`

	// Failures are the times of wrong passwords inside the failure window; LockedUntil is set when they
	// reach the policy's maximum.
	Failures    []time.Time `msgpack:"failures,omitempty"`
	LockedUntil time.Time   `msgpack:"locked_until,omitempty"`
}

// SchemaVersion is the layout version of stored users.
func (*User) SchemaVersion() uint16 { return 1 }

// Session is a signed-in browser. Its secret lives only in the browser's cookie.
type Session struct {
	UserID string `msgpack:"user_id"`
	Epoch  uint64 `msgpack:"epoch"`
	// OrgID and MemberID are the membership the session works in (switched with SwitchOrg); empty: the
	// user's first.
	OrgID    string `msgpack:"org_id,omitempty"`
	MemberID string `msgpack:"member_id,omitempty"`
	// CSRF is the token every state-changing form and call of this session must carry.
	CSRF      string    `msgpack:"csrf"`
	CreatedAt time.Time `msgpack:"created_at"`
	LastSeen  time.Time `msgpack:"last_seen"`
}

// SchemaVersion is the layout version of stored sessions.
func (*Session) SchemaVersion() uint16 { return 1 }

// Accounts creates users, signs them in and out, and checks sessions.
type Accounts struct {
	Store  persistence.Store
	Clock  clock.Clock
	Policy Policy
	// Argon2 is used for new hashes; zero means DefaultArgon2. Tests lower it.
	Argon2 Argon2
	// hashing bounds concurrent argon2 runs (each holds MemKiB of memory): a flood of sign-ins waits here
	// instead of exhausting memory. Nil: one at a time per Accounts value made with New.
	hashing chan struct{}
	// Limit, when set, bounds the store reads of session secrets this node knows nothing of (random cookies,
	// or a session's first request on this node): per client address for SessionFrom, and in flight. A
	// refused lookup is a *authlimit.Refusal. The node shares one Limiter between API keys and sessions: one
	// budget of failed credential lookups per address, one bound on such reads in flight.
	Limit *authlimit.Limiter
	// seen remembers sessions seen live and sessions found missing (sessionmemory.go); nil for Accounts not
	// made with New: every lookup is then an unknown one.
	seen *sessionMemory
	// lookups makes concurrent lookups of one unknown session key share one read (and one token of Limit).
	lookups authlimit.Flights[sessionRead]
}

// sessionRead is the answer of one read of a session, shared by the lookups that waited for it.
type sessionRead struct {
	s *Session
	u *User
}

// New returns Accounts with its defaults and a bound of maxHashing concurrent password hashes (at least 1).
func New(st persistence.Store, clk clock.Clock, policy Policy, maxHashing int) *Accounts {
	policy.defaults()
	return &Accounts{Store: st, Clock: clk, Policy: policy, Argon2: DefaultArgon2, hashing: make(chan struct{}, max(maxHashing, 1)),
		seen: newSessionMemory(policy.IdleTimeout)}
}

func (a *Accounts) params() Argon2 {
	if a.Argon2.Time == 0 {
		return DefaultArgon2
	}
	return a.Argon2
}

// hash runs argon2id inside the concurrency bound; ctx ends the wait for a turn.
func (a *Accounts) hash(ctx context.Context, password string, salt []byte, p Argon2) ([]byte, error) {
	if a.hashing != nil {
		select {
		case a.hashing <- struct{}{}:
			defer func() { <-a.hashing }()
		case <-ctx.Done():
			return nil, fmt.Errorf("wait to hash a password: %w", ctx.Err())
		}
	}
	return argon2.IDKey([]byte(password), salt, p.Time, p.MemKiB, p.Threads, 32), nil
}

// NormaliseEmail trims and lower-cases a new email address and checks its shape: an address that holds a
// character which shows nothing or reorders text (a zero-width space, a bidirectional control) is refused
// with a *hiddenchar.Error wrapping ErrBadEmail.
func NormaliseEmail(email string) (string, error) {
	e, err := lookupEmail(email)
	if err != nil {
		return "", err
	}
	if err := hiddenchar.Address(ErrBadEmail, e); err != nil {
		return "", err
	}
	return e, nil
}

// lookupEmail is the form of an email a stored user is found by: trimmed and lower-cased, of an address's
// shape. It does not refuse hidden characters, so that an account stored before NormaliseEmail did can still
// sign in.
func lookupEmail(email string) (string, error) {
	e := strings.ToLower(strings.TrimSpace(email))
	if len(e) == 0 || len(e) > MaxEmailLen || !utf8.ValidString(e) {
		return "", ErrBadEmail
	}
	local, domain, ok := strings.Cut(e, "@")
	if !ok || local == "" || domain == "" || strings.ContainsAny(e, " \t\r\n/<>\"") || strings.Contains(domain, "@") {
		return "", ErrBadEmail
	}
	return e, nil
}

// CheckPassword applies the length policy (counted in characters, bounded in bytes).
func CheckPassword(pw string) error {
	if len(pw) > MaxPasswordLen || utf8.RuneCountInString(pw) < MinPasswordLen || !utf8.ValidString(pw) {
		return fmt.Errorf("%w: use %d to %d characters", ErrWeakPassword, MinPasswordLen, MaxPasswordLen)
	}
	return nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return b
}

func userKey(id string) []byte { return []byte(prefixUser + id) }

// CreateUser stores a user for an organization member. The email must be free; the password must pass the
// policy. The caller checks that the member exists.
func (a *Accounts) CreateUser(ctx context.Context, email, password, orgID, memberID string) (*User, error) {
	e, err := NormaliseEmail(email)
	if err != nil {
		return nil, err
	}
	if err := CheckPassword(password); err != nil {
		return nil, err
	}
	if orgID == "" || memberID == "" {
		return nil, errors.New("accounts: a user needs an organization and a member")
	}
	now := a.Clock.Now()
	u := &User{ID: "usr_" + hex.EncodeToString(randomBytes(8)), Email: e, OrgID: orgID, MemberID: memberID,
		Salt: randomBytes(16), Params: a.params(), CreatedAt: now, PasswordChangedAt: now}
	if u.Hash, err = a.hash(ctx, password, u.Salt, u.Params); err != nil {
		return nil, err
	}
	// The user record first, then the email claim: a crash between them leaves an unreachable record,
	// never an email that points nowhere.
	if _, err := durable.Write(ctx, a.Store, userKey(u.ID), persistence.NoVersion, u); err != nil {
		return nil, fmt.Errorf("store user: %w", err)
	}
	if _, err := a.Store.CompareAndSet(ctx, []byte(prefixUserEmail+e), persistence.NoVersion, []byte(u.ID)); err != nil {
		_ = a.Store.Delete(ctx, userKey(u.ID), "")
		if errors.Is(err, persistence.ErrVersionMismatch) {
			return nil, ErrEmailTaken
		}
		return nil, fmt.Errorf("claim email: %w", err)
	}
	return u, nil
}

// User returns the user with id.
func (a *Accounts) User(ctx context.Context, id string) (*User, error) {
	u, _, err := durable.Read[User](ctx, a.Store, userKey(id))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, ErrNotFound
	}
	return u, err
}

// ByEmail returns the user with email.
func (a *Accounts) ByEmail(ctx context.Context, email string) (*User, error) {
	e, err := lookupEmail(email)
	if err != nil {
		return nil, ErrNotFound
	}
	it, err := a.Store.Get(ctx, []byte(prefixUserEmail+e))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("look up email: %w", err)
	}
	return a.User(ctx, string(it.Value))
}

// dummySalt is hashed against when the email is unknown, so that a sign-in takes as long either way.
var dummySalt = make([]byte, 16)

// LockedError says until when an account is locked.
type LockedError struct{ Until time.Time }

func (e *LockedError) Error() string {
	return fmt.Sprintf("%v until %s", ErrLocked, e.Until.Format(time.RFC3339))
}
func (e *LockedError) Unwrap() error { return ErrLocked }

// SignIn checks an email and password and starts a session. It returns the session's secret (for the cookie
// only) and the session. A wrong password counts towards the lockout; a locked account answers a
// *LockedError whatever the password.
func (a *Accounts) SignIn(ctx context.Context, email, password string) (string, *Session, *User, error) {
	if len(password) > MaxPasswordLen || len(email) > MaxEmailLen {
		return "", nil, nil, ErrBadCredentials
	}
	u, err := a.ByEmail(ctx, email)
	if errors.Is(err, ErrNotFound) {
		_, _ = a.hash(ctx, password, dummySalt, a.params())
		return "", nil, nil, ErrBadCredentials
	}
	if err != nil {
		return "", nil, nil, err
	}
	now := a.Clock.Now()
	if now.Before(u.LockedUntil) {
		return "", nil, nil, &LockedError{Until: u.LockedUntil}
	}
	got, err := a.hash(ctx, password, u.Salt, u.Params)
	if err != nil {
		return "", nil, nil, err
	}
	if subtle.ConstantTimeCompare(got, u.Hash) != 1 {
		locked, err := a.recordFailure(ctx, u.ID)
		if err != nil {
			return "", nil, nil, err
		}
		if !locked.IsZero() {
			return "", nil, nil, &LockedError{Until: locked}
		}
		return "", nil, nil, ErrBadCredentials
	}
	if len(u.Failures) > 0 {
		if u, err = a.update(ctx, u.ID, func(c *User) { c.Failures = nil }); err != nil {
			return "", nil, nil, err
		}
	}
	secret, s, err := a.newSession(ctx, u)
	return secret, s, u, err
}

// recordFailure notes a wrong password and returns the lock's end when this failure locked the account.
func (a *Accounts) recordFailure(ctx context.Context, userID string) (time.Time, error) {
	now := a.Clock.Now()
	var locked time.Time
	_, err := a.update(ctx, userID, func(u *User) {
		kept := u.Failures[:0]
		for _, t := range u.Failures {
			if now.Sub(t) < a.Policy.FailureWindow {
				kept = append(kept, t)
			}
		}
		u.Failures = append(kept, now)
		if len(u.Failures) >= a.Policy.MaxFailures {
			u.LockedUntil = now.Add(a.Policy.LockFor)
			u.Failures = nil
			locked = u.LockedUntil
		}
	})
	return locked, err
}

// update applies fn to a fresh copy of the user and writes it with compare-and-set, retrying on conflict.
func (a *Accounts) update(ctx context.Context, userID string, fn func(*User)) (*User, error) {
	u, err := durable.Update(ctx, a.Store, userKey(userID), 0, func(cur *User) (*User, error) {
		if cur == nil {
			return nil, ErrNotFound
		}
		next := *cur
		next.Failures = append([]time.Time(nil), cur.Failures...)
		fn(&next)
		return &next, nil
	})
	if err != nil {
		return nil, fmt.Errorf("update user %s: %w", userID, err)
	}
	return u, nil
}

func sessionKey(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return []byte(prefixSession + hex.EncodeToString(sum[:]))
}

func (a *Accounts) newSession(ctx context.Context, u *User) (string, *Session, error) {
	secret := base64.RawURLEncoding.EncodeToString(randomBytes(32))
	now := a.Clock.Now()
	s := &Session{UserID: u.ID, Epoch: u.Epoch, CSRF: base64.RawURLEncoding.EncodeToString(randomBytes(32)),
		CreatedAt: now, LastSeen: now}
	key := sessionKey(secret)
	if _, err := durable.Write(ctx, a.Store, key, persistence.NoVersion, s); err != nil {
		return "", nil, fmt.Errorf("store session: %w", err)
	}
	// The browser's next request is read without limit, even from an address someone else spends.
	a.seen.putLive(string(key), now)
	return secret, s, nil
}

// touchEvery is how stale LastSeen may get before a request writes it again: one write a minute per session
// at most, not one per page.
const touchEvery = time.Minute

// Session returns the live session of secret and its user; ErrNoSession when it is unknown, idle too long,
// past its absolute lifetime, or from before a password change (an expired one is deleted). It is SessionFrom
// for a caller with no client address: Limit's in-flight bound applies, its per-address buckets do not.
func (a *Accounts) Session(ctx context.Context, secret string) (*Session, *User, error) {
	return a.SessionFrom(ctx, secret, nil)
}

// SessionFrom is Session for a request from the client address from. A session this node saw live lately
// is read from the store as always (so an ending anywhere counts at once) without limit; one found missing
// lately is ErrNoSession without a read; any other takes, with Limit set, a token of from's bucket, kept only
// when the store has no such session, and a lookup slot, or is refused with a *authlimit.Refusal. Concurrent
// lookups of one such session (a browser's tabs and parallel loads with a stale cookie) share one read, and
// so one token.
func (a *Accounts) SessionFrom(ctx context.Context, secret string, from net.IP) (*Session, *User, error) {
	if secret == "" || len(secret) > 128 {
		return nil, nil, ErrNoSession
	}
	key := sessionKey(secret)
	for attempt := 0; ; attempt++ {
		s, u, err := a.lookupSession(ctx, key, from)
		if !errors.Is(err, authlimit.ErrLookAgain) || attempt == 2 {
			return s, u, err
		}
	}
}

// lookupSession is one try of SessionFrom: a session seen live is read by each request; any other is read
// once for all the lookups of key under way, each getting its own copy of the answer.
func (a *Accounts) lookupSession(ctx context.Context, key []byte, from net.IP) (*Session, *User, error) {
	switch a.seen.look(string(key), a.Clock.Now()) {
	case sessionMissing:
		return nil, nil, ErrNoSession
	case sessionLive:
		return a.readRemembered(ctx, key, from)
	}
	r, err := a.lookups.Do(ctx, string(key), func() (sessionRead, error) {
		s, u, err := a.readRemembered(ctx, key, from)
		return sessionRead{s, u}, err
	})
	if err != nil {
		return nil, nil, err
	}
	s, u := *r.s, *r.u
	return &s, &u, nil
}

// readRemembered reads the session at key as the memory says (a lookup that waited for another one may
// find its answer remembered now): none when found missing lately, without limit when seen live lately,
// within Limit otherwise; and remembers what it found.
func (a *Accounts) readRemembered(ctx context.Context, key []byte, from net.IP) (*Session, *User, error) {
	now := a.Clock.Now()
	seen := a.seen.look(string(key), now)
	if seen == sessionMissing {
		return nil, nil, ErrNoSession
	}
	found := false
	if seen == sessionUnknown && a.Limit != nil {
		client := authlimit.Client(from)
		if err := a.Limit.Begin(client); err != nil {
			return nil, nil, err
		}
		// Only a session the store does not have keeps the token: one that existed (even expired) was no
		// guess, and a store that failed says nothing about the client.
		defer func() { a.Limit.End(client, found) }()
	}
	s, u, err := a.readSession(ctx, key, now, &found)
	return a.remember(key, now, s, u, err)
}

// remember notes what a read of key found, and passes its answer on.
func (a *Accounts) remember(key []byte, now time.Time, s *Session, u *User, err error) (*Session, *User, error) {
	switch {
	case err == nil:
		a.seen.putLive(string(key), now)
	case errors.Is(err, ErrNoSession):
		a.seen.putMissing(string(key), now) // missing, or ended for good (expiry and epochs do not go back)
	}
	return s, u, err
}

// readSession reads the session at key and its user. found is set unless the store had no session there
// (an error of the store counts as found: it says nothing about the secret).
func (a *Accounts) readSession(ctx context.Context, key []byte, now time.Time, found *bool) (*Session, *User, error) {
	s, ver, err := durable.Read[Session](ctx, a.Store, key)
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, nil, ErrNoSession
	}
	*found = true
	if err != nil {
		return nil, nil, err
	}
	u, err := a.User(ctx, s.UserID)
	if errors.Is(err, ErrNotFound) || (err == nil && u.Epoch != s.Epoch) ||
		now.Sub(s.LastSeen) >= a.Policy.IdleTimeout || now.Sub(s.CreatedAt) >= a.Policy.AbsoluteTimeout {
		_ = a.Store.Delete(ctx, key, ver)
		return nil, nil, ErrNoSession
	}
	if err != nil {
		return nil, nil, err
	}
	if now.Sub(s.LastSeen) >= touchEvery {
		next := *s
		next.LastSeen = now
		// A lost race means another request touched it just now: either way it is fresh.
		if _, err := durable.Write(ctx, a.Store, key, ver, &next); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
			return nil, nil, err
		}
		s = &next
	}
	return s, u, nil
}

// SignOut ends the session of secret; ending an unknown session is harmless. Every node sees the end at once:
// the session's record is gone, and nodes read it on every request.
func (a *Accounts) SignOut(ctx context.Context, secret string) error {
	if secret == "" || len(secret) > 128 {
		return nil
	}
	key := sessionKey(secret)
	now := a.Clock.Now()
	if a.seen.look(string(key), now) == sessionMissing {
		return nil
	}
	// A request of the session may touch it (LastSeen) between the read and the delete: the delete then
	// misses its version and is tried again on the new one, or the session would outlive its sign-out.
	for attempt := 0; attempt < 5; attempt++ {
		it, err := a.Store.Get(ctx, key)
		if errors.Is(err, persistence.ErrNotFound) {
			a.seen.putMissing(string(key), now)
			return nil
		}
		if err != nil {
			return fmt.Errorf("sign out: %w", err)
		}
		err = a.Store.Delete(ctx, key, it.Version)
		if err == nil {
			a.seen.putMissing(string(key), now)
			return nil
		}
		if !errors.Is(err, persistence.ErrVersionMismatch) {
			return fmt.Errorf("sign out: %w", err)
		}
	}
	return errors.New("sign out: the session kept changing; try again")
}

// ChangePassword checks the current password and sets a new one. Every session of the user ends; a fresh
// session is returned for the browser that made the change.
func (a *Accounts) ChangePassword(ctx context.Context, userID, current, next string) (string, *Session, error) {
	if err := CheckPassword(next); err != nil {
		return "", nil, err
	}
	u, err := a.User(ctx, userID)
	if err != nil {
		return "", nil, err
	}
	if len(current) > MaxPasswordLen {
		return "", nil, ErrBadCredentials
	}
	got, err := a.hash(ctx, current, u.Salt, u.Params)
	if err != nil {
		return "", nil, err
	}
	if subtle.ConstantTimeCompare(got, u.Hash) != 1 {
		if _, err := a.recordFailure(ctx, userID); err != nil {
			return "", nil, err
		}
		return "", nil, ErrBadCredentials
	}
	salt, params := randomBytes(16), a.params()
	hash, err := a.hash(ctx, next, salt, params)
	if err != nil {
		return "", nil, err
	}
	u, err = a.update(ctx, userID, func(c *User) {
		c.Salt, c.Hash, c.Params = salt, hash, params
		c.Epoch++
		c.PasswordChangedAt = a.Clock.Now()
		c.Failures = nil
	})
	if err != nil {
		return "", nil, err
	}
	secret, s, err := a.newSession(ctx, u)
	return secret, s, err
}

// List returns up to limit users, for the operator's command line.
func (a *Accounts) List(ctx context.Context, limit int) ([]*User, error) {
	items, err := a.Store.Scan(ctx, []byte(prefixUser), nil, max(limit, 1))
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	out := make([]*User, 0, len(items))
	for _, it := range items {
		var u User
		if err := persistence.Unmarshal(it.Value, &u); err != nil {
			return nil, fmt.Errorf("decode %s: %w", it.Key, err)
		}
		out = append(out, &u)
	}
	return out, nil
}

// NewPassword returns a random password that passes the policy (for a first owner printed at start).
func NewPassword() string {
	return base64.RawURLEncoding.EncodeToString(randomBytes(18))
}

// PurgeSessions deletes expired sessions (idle or past their absolute lifetime) among up to limit sessions
// from start on (nil: the first), so that sessions abandoned without signing out do not pile up. It returns
// where the next call should resume (nil after the last session) and how many it deleted. A session that is
// written meanwhile (touched) is left alone: the delete is a compare-and-set on the version read.
func (a *Accounts) PurgeSessions(ctx context.Context, start []byte, limit int) ([]byte, int, error) {
	items, err := a.Store.Scan(ctx, []byte(prefixSession), start, max(limit, 1))
	if err != nil {
		return nil, 0, fmt.Errorf("scan sessions: %w", err)
	}
	now := a.Clock.Now()
	deleted := 0
	for _, it := range items {
		var s Session
		if err := persistence.Unmarshal(it.Value, &s); err != nil {
			return nil, deleted, fmt.Errorf("decode %s: %w", it.Key, err)
		}
		if now.Sub(s.LastSeen) < a.Policy.IdleTimeout && now.Sub(s.CreatedAt) < a.Policy.AbsoluteTimeout {
			continue
		}
		if err := a.Store.Delete(ctx, it.Key, it.Version); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
			return nil, deleted, fmt.Errorf("delete %s: %w", it.Key, err)
		}
		deleted++
	}
	if len(items) < max(limit, 1) {
		return nil, deleted, nil
	}
	return persistence.KeyAfter(items[len(items)-1].Key), deleted, nil
}

// prefixInvite keys invitations by the SHA-256 of their one-time token.
const prefixInvite = "account/invite/" // account/invite/<hex sha256 of the token> -> Invite

// ErrNoInvite is returned for an invitation token that is unknown, used or expired.
var ErrNoInvite = errors.New("accounts: no such invitation, or it was used or expired")

// InviteTTL is how long an invitation link works.
const InviteTTL = 7 * 24 * time.Hour

// Invite is an invitation to join an organization with a role; the link's token is shown once, to the person
// who invited, and works once.
type Invite struct {
	OrgID     string    `msgpack:"org_id"`
	Email     string    `msgpack:"email"`
	Role      string    `msgpack:"role"`
	InvitedBy string    `msgpack:"invited_by"` // user id
	CreatedAt time.Time `msgpack:"created_at"`
	ExpiresAt time.Time `msgpack:"expires_at"`
}

// SchemaVersion is the layout version of stored invitations.
func (*Invite) SchemaVersion() uint16 { return 1 }

func inviteKey(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return []byte(prefixInvite + hex.EncodeToString(sum[:]))
}

// CreateInvite stores an invitation for email to join orgID as role and returns its one-time token. The
// caller checks that the inviter may grant role, and that a person who already has an account is not an active
// member of orgID (CheckInviteExisting); such a person accepts it by signing in (CheckJoin).
func (a *Accounts) CreateInvite(ctx context.Context, orgID, email, role, invitedBy string) (string, *Invite, error) {
	e, err := NormaliseEmail(email)
	if err != nil {
		return "", nil, err
	}
	now := a.Clock.Now()
	inv := &Invite{OrgID: orgID, Email: e, Role: role, InvitedBy: invitedBy, CreatedAt: now, ExpiresAt: now.Add(InviteTTL)}
	token := base64.RawURLEncoding.EncodeToString(randomBytes(32))
	if _, err := durable.Write(ctx, a.Store, inviteKey(token), persistence.NoVersion, inv); err != nil {
		return "", nil, fmt.Errorf("store invitation: %w", err)
	}
	return token, inv, nil
}

// LookupInvite returns the live invitation of token.
func (a *Accounts) LookupInvite(ctx context.Context, token string) (*Invite, persistence.Version, error) {
	if token == "" || len(token) > 128 {
		return nil, "", ErrNoInvite
	}
	inv, ver, err := durable.Read[Invite](ctx, a.Store, inviteKey(token))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil, "", ErrNoInvite
	}
	if err != nil {
		return nil, "", err
	}
	if !a.Clock.Now().Before(inv.ExpiresAt) {
		_ = a.Store.Delete(ctx, inviteKey(token), ver)
		return nil, "", ErrNoInvite
	}
	return inv, ver, nil
}

// LookupInviteFrom is LookupInvite for a request from the client address from: with Limit set, the read takes
// a token of from's bucket, kept only when there is no live invitation of token, and a lookup slot, or is
// refused with a *authlimit.Refusal. An invitation link is a secret like a session's (256 random bits), so
// random links spend the same budget as random cookies.
func (a *Accounts) LookupInviteFrom(ctx context.Context, token string, from net.IP) (*Invite, persistence.Version, error) {
	if token == "" || len(token) > 128 || a.Limit == nil {
		return a.LookupInvite(ctx, token)
	}
	client := authlimit.Client(from)
	if err := a.Limit.Begin(client); err != nil {
		return nil, "", err
	}
	inv, ver, err := a.LookupInvite(ctx, token)
	a.Limit.End(client, !errors.Is(err, ErrNoInvite))
	return inv, ver, err
}

// ClaimInvite uses up the invitation of token: of two people presenting it at once, exactly one gets it (a
// compare-and-set delete); the other gets ErrNoInvite.
func (a *Accounts) ClaimInvite(ctx context.Context, token string) (*Invite, error) {
	inv, ver, err := a.LookupInvite(ctx, token)
	if err != nil {
		return nil, err
	}
	if err := a.Store.Delete(ctx, inviteKey(token), ver); err != nil {
		if errors.Is(err, persistence.ErrVersionMismatch) {
			return nil, ErrNoInvite
		}
		return nil, fmt.Errorf("claim invitation: %w", err)
	}
	return inv, nil
}

// ResetPassword sets a new password without the current one (the operator's recovery), clears any lock and
// ends every session of the user.
func (a *Accounts) ResetPassword(ctx context.Context, email, password string) (*User, error) {
	if err := CheckPassword(password); err != nil {
		return nil, err
	}
	u, err := a.ByEmail(ctx, email)
	if err != nil {
		return nil, err
	}
	salt, params := randomBytes(16), a.params()
	hash, err := a.hash(ctx, password, salt, params)
	if err != nil {
		return nil, err
	}
	return a.update(ctx, u.ID, func(c *User) {
		c.Salt, c.Hash, c.Params = salt, hash, params
		c.Epoch++
		c.PasswordChangedAt = a.Clock.Now()
		c.Failures, c.LockedUntil = nil, time.Time{}
	})
}
