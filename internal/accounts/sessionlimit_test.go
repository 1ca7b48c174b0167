package accounts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"filigrane/actors/durable"
	"filigrane/internal/authlimit"
	"filigrane/internal/parkedctx"
	"filigrane/persistence"
	"filigrane/persistence/storetest"
)

// sessionReads is the node's real store, counting the reads of session records.
type sessionReads struct {
	persistence.Store
	n atomic.Int64
}

func (s *sessionReads) Get(ctx context.Context, key []byte) (persistence.Item, error) {
	if bytes.HasPrefix(key, []byte(prefixSession)) {
		s.n.Add(1)
	}
	return s.Store.Get(ctx, key)
}

// TestUnknownSessionsCostBoundedReads: random session cookies cost a read each only while the client's
// address has tokens (and the same one again costs nothing for authlimit.MissTTL); a session seen live keeps
// working from that address, and is still read every time, so an end on another node counts at once.
func TestUnknownSessionsCostBoundedReads(t *testing.T) {
	ctx := context.Background()
	a, clk := newTestAccounts(t)
	st := &sessionReads{Store: a.Store}
	a.Store = st
	const burst = 3
	a.Limit = authlimit.New(authlimit.Config{Burst: burst, Every: time.Second}, clk)
	if _, err := a.CreateUser(ctx, "owner@example.com", pw, "org_1", "mem_1"); err != nil {
		t.Fatal(err)
	}
	live, _, _, err := a.SignIn(ctx, "owner@example.com", pw)
	if err != nil {
		t.Fatal(err)
	}
	from := net.ParseIP("192.0.2.7")
	random := func(i int) string { return fmt.Sprintf("not-a-session-%d", i) }
	check := func(what, secret string, want error, reads int64) {
		t.Helper()
		_, _, err := a.SessionFrom(ctx, secret, from)
		if !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", what, err, want)
		}
		if n := st.n.Load(); n != reads {
			t.Fatalf("%s: %d session reads so far, want %d", what, n, reads)
		}
	}
	for i := range 3 {
		check(fmt.Sprintf("the same random cookie, try %d", i), random(0), ErrNoSession, 1)
	}
	check("random cookie 1", random(1), ErrNoSession, 2)
	check("random cookie 2", random(2), ErrNoSession, 3)
	_, _, err = a.SessionFrom(ctx, random(3), from)
	var refused *authlimit.Refusal
	if !errors.As(err, &refused) || refused.Reason != authlimit.AddressSpent || refused.RetryAfter != time.Second {
		t.Fatalf("a random cookie past the bucket: %v, want a refusal for the address, retry after 1 s", err)
	}
	if n := st.n.Load(); n != burst {
		t.Fatalf("the refused lookup read the store (%d reads)", n)
	}
	// The signed-in session works from the spent address, read each time.
	check("the live session", live, nil, burst+1)
	check("the live session again", live, nil, burst+2)
	// Another address has its own bucket.
	if _, _, err := a.SessionFrom(ctx, random(4), net.ParseIP("198.51.100.1")); !errors.Is(err, ErrNoSession) {
		t.Fatalf("a random cookie from another address: %v", err)
	}

	// Another node (its own memory, the same store) signs the session out: the end counts here at once.
	other := New(st, clk, Policy{}, 1)
	if err := other.SignOut(ctx, live); err != nil {
		t.Fatal(err)
	}
	reads := st.n.Load()
	check("the session signed out on another node", live, ErrNoSession, reads+1)
	check("it again: remembered missing", live, ErrNoSession, reads+1)

	// A token a second; the cookie found missing is read again once MissTTL has passed.
	clk.Advance(time.Second)
	check("a random cookie after a token came back", random(5), ErrNoSession, reads+2)
	clk.Advance(authlimit.MissTTL)
	check("the first random cookie past MissTTL", random(0), ErrNoSession, reads+3)
}

// touchedBeforeDelete is the real store in which another request of a session touches it (writes LastSeen)
// just before the first delete of a session record lands.
type touchedBeforeDelete struct {
	persistence.Store
	once sync.Once
}

func (s *touchedBeforeDelete) Delete(ctx context.Context, key []byte, expect persistence.Version) error {
	if bytes.HasPrefix(key, []byte(prefixSession)) {
		s.once.Do(func() {
			if _, err := durable.Update(ctx, s.Store, key, 0, func(cur *Session) (*Session, error) {
				next := *cur
				next.LastSeen = next.LastSeen.Add(time.Minute)
				return &next, nil
			}); err != nil {
				panic(err)
			}
		})
	}
	return s.Store.Delete(ctx, key, expect)
}

// TestSignOutRacingATouchEndsTheSession: a sign-out whose delete meets a session just touched by another of
// its requests still ends it (it used to report success and leave the session live).
func TestSignOutRacingATouchEndsTheSession(t *testing.T) {
	ctx := context.Background()
	a, _ := newTestAccounts(t)
	if _, err := a.CreateUser(ctx, "owner@example.com", pw, "org_1", "mem_1"); err != nil {
		t.Fatal(err)
	}
	secret, _, _, err := a.SignIn(ctx, "owner@example.com", pw)
	if err != nil {
		t.Fatal(err)
	}
	a.Store = &touchedBeforeDelete{Store: a.Store}
	if err := a.SignOut(ctx, secret); err != nil {
		t.Fatal(err)
	}
	// Asked of a node that never saw the session: only the store answers.
	if _, _, err := New(a.Store, a.Clock, Policy{}, 1).Session(ctx, secret); !errors.Is(err, ErrNoSession) {
		t.Fatalf("the signed-out session: %v, want ErrNoSession", err)
	}
}

// TestUnknownSessionLookupsInFlightAreBounded: with the node's lookups of unknown credentials all held in a
// slow store, another random cookie is refused at once (InFlightFull) without a read, while a session seen
// live is read and answered.
func TestUnknownSessionLookupsInFlightAreBounded(t *testing.T) {
	ctx := context.Background()
	a, clk := newTestAccounts(t)
	if _, err := a.CreateUser(ctx, "owner@example.com", pw, "org_1", "mem_1"); err != nil {
		t.Fatal(err)
	}
	live, _, _, err := a.SignIn(ctx, "owner@example.com", pw)
	if err != nil {
		t.Fatal(err)
	}
	// The real store in which the read of one session key waits until released: a slow object store.
	held := storetest.NewHeld(a.Store, holdKey(sessionKey("held")), 1)
	a.Store = held
	a.Limit = authlimit.New(authlimit.Config{MaxInFlight: 1}, clk)
	done := make(chan error, 1)
	go func() {
		_, _, err := a.SessionFrom(ctx, "held", net.ParseIP("192.0.2.1"))
		done <- err
	}()
	<-held.Entered
	_, _, err = a.SessionFrom(ctx, "another random cookie", net.ParseIP("198.51.100.1"))
	var refused *authlimit.Refusal
	if !errors.As(err, &refused) || refused.Reason != authlimit.InFlightFull {
		t.Errorf("a lookup past the in-flight bound: %v, want a refusal (in flight)", err)
	}
	if _, _, err := a.SessionFrom(ctx, live, net.ParseIP("198.51.100.1")); err != nil {
		t.Errorf("the live session while the bound is full: %v", err)
	}
	close(held.Release)
	if err := <-done; !errors.Is(err, ErrNoSession) {
		t.Fatalf("the held lookup: %v", err)
	}
	if _, _, err := a.SessionFrom(ctx, "another random cookie", net.ParseIP("198.51.100.1")); !errors.Is(err, ErrNoSession) {
		t.Fatalf("the refused cookie once the slot is free: %v", err)
	}
}

// TestConcurrentLookupsOfOneStaleCookieSpendOneToken: a browser's parallel requests with one stale cookie (a
// session signed out on another node), all under way while the store is slow, share one read and spend one
// token of the address's bucket: with a bucket of 2, all of them are answered "no session" (the sign-in page
// or 401), none is refused (429), and the address keeps its other token.
func TestConcurrentLookupsOfOneStaleCookieSpendOneToken(t *testing.T) {
	ctx := context.Background()
	a, clk := newTestAccounts(t)
	if _, err := a.CreateUser(ctx, "owner@example.com", pw, "org_1", "mem_1"); err != nil {
		t.Fatal(err)
	}
	other := New(a.Store, clk, Policy{}, 1)
	other.Argon2 = a.Argon2
	stale, _, _, err := other.SignIn(ctx, "owner@example.com", pw)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.SignOut(ctx, stale); err != nil {
		t.Fatal(err)
	}
	const requests = 5
	held := storetest.NewHeld(a.Store, holdKey(sessionKey(stale)), requests)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(held.Release) }) }
	defer release()
	a.Store = held
	a.Limit = authlimit.New(authlimit.Config{Burst: 2, Every: time.Minute}, clk)
	from := net.ParseIP("192.0.2.7")

	ctxs := make([]*parkedctx.Context, requests)
	answers := make([]chan error, requests)
	for i := range requests {
		ctxs[i] = parkedctx.New(ctx)
		answers[i] = make(chan error, 1)
		go func() {
			_, _, err := a.SessionFrom(ctxs[i], stale, from)
			answers[i] <- err
		}()
	}
	// Every request is under way (waiting on its context) or answered before the store answers.
	for i := range requests {
		select {
		case <-ctxs[i].Parked():
		case err := <-answers[i]:
			answers[i] <- err
		}
	}
	release()
	for i := range requests {
		if err := <-answers[i]; !errors.Is(err, ErrNoSession) {
			t.Errorf("request %d with the stale cookie: %v, want ErrNoSession", i, err)
		}
	}
	if n := held.Reads.Load(); n != 1 {
		t.Errorf("%d reads of the stale session, want 1", n)
	}
	// One token spent: the address has one more lookup, then none.
	if _, _, err := a.SessionFrom(ctx, "another stale cookie", from); !errors.Is(err, ErrNoSession) {
		t.Fatalf("another unknown cookie with the token left: %v, want ErrNoSession", err)
	}
	_, _, err = a.SessionFrom(ctx, "a third unknown cookie", from)
	var refused *authlimit.Refusal
	if !errors.As(err, &refused) || refused.Reason != authlimit.AddressSpent {
		t.Fatalf("a third unknown cookie: %v, want a refusal for the address", err)
	}
}

// holdKey matches key alone.
func holdKey(key []byte) func([]byte) bool { return func(k []byte) bool { return bytes.Equal(k, key) } }
