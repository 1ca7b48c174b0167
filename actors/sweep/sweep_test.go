package sweep_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors/sweep"
	"filigrane/internal/clock"
	"filigrane/persistence"
	"filigrane/persistence/pebblestore"
)

type node struct {
	s     *sweep.Sweeper
	ticks atomic.Int32
}

func newNode(store persistence.Store, clk clock.Clock, name string) *node {
	n := &node{s: sweep.New(sweep.Config{Store: store, Clock: clk, Node: name, Lease: 30 * time.Second, Logger: zerolog.Nop()})}
	n.s.Register("count", func(context.Context) error { n.ticks.Add(1); return nil })
	return n
}

func (n *node) round(t *testing.T) bool {
	t.Helper()
	ran, err := n.s.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ran
}

func openStore(t *testing.T) persistence.Store {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestLeaseTakeover: of two sweepers on one store only the lease holder runs passes; when it stops renewing
// (its node died) the other takes over once the lease expired, not before; the old holder then runs nothing;
// a released lease is taken at once.
func TestLeaseTakeover(t *testing.T) {
	store := openStore(t)
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	a, b := newNode(store, clk, "a"), newNode(store, clk, "b")
	if !a.round(t) || b.round(t) {
		t.Fatal("want a to take the free lease and b to be refused")
	}
	clk.Advance(20 * time.Second)
	if !a.round(t) || b.round(t) {
		t.Fatal("a renews; b still refused")
	}
	// a dies: it renews no more. Its lease runs 30 s from the last renewal.
	clk.Advance(29 * time.Second)
	if b.round(t) {
		t.Fatal("b took the lease before it expired")
	}
	clk.Advance(time.Second)
	if !b.round(t) {
		t.Fatal("b did not take over the expired lease")
	}
	if a.round(t) {
		t.Fatal("the old holder still runs passes")
	}
	if a.ticks.Load() != 2 || b.ticks.Load() != 1 {
		t.Fatalf("passes run: a %d, b %d", a.ticks.Load(), b.ticks.Load())
	}
	if err := b.s.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !a.round(t) {
		t.Fatal("a released lease was not taken at once")
	}
}

// TestLostLeaseStopsTheRound: when the holder cannot renew between passes (another node took the lease
// while the first pass ran past its expiry), the rest of the round does not run.
func TestLostLeaseStopsTheRound(t *testing.T) {
	store := openStore(t)
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	a := sweep.New(sweep.Config{Store: store, Clock: clk, Node: "a", Lease: 30 * time.Second, Logger: zerolog.Nop()})
	b := newNode(store, clk, "b")
	second := false
	a.Register("slow", func(ctx context.Context) error {
		clk.Advance(31 * time.Second) // the pass outlives the lease...
		if !b.round(t) {              // ...and b takes over meanwhile
			t.Error("b could not take the expired lease")
		}
		return nil
	})
	a.Register("second", func(context.Context) error { second = true; return nil })
	ran, err := a.RunOnce(context.Background())
	if !ran || err == nil || second {
		t.Fatalf("ran %v, err %v, second pass ran %v", ran, err, second)
	}
}

// TestRunReleasesOnShutdown: Run returns when its context ends and gives the lease back.
func TestRunReleasesOnShutdown(t *testing.T) {
	store := openStore(t)
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	a := sweep.New(sweep.Config{Store: store, Clock: clk, Node: "a", Logger: zerolog.Nop()})
	cancel, done := runUntilFirstRound(a)
	if _, err := store.Get(context.Background(), []byte(sweep.LeaseKey)); err != nil {
		t.Fatalf("lease while running: %v", err)
	}
	cancel()
	<-done
	if _, err := store.Get(context.Background(), []byte(sweep.LeaseKey)); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("lease after shutdown: %v", err)
	}
}

// leaseWrites counts the writes of the lease record on a real store.
type leaseWrites struct {
	persistence.Store
	n atomic.Int32
}

func (s *leaseWrites) CompareAndSet(ctx context.Context, key []byte, expect persistence.Version, value []byte) (persistence.Version, error) {
	if string(key) == sweep.LeaseKey {
		s.n.Add(1)
	}
	return s.Store.CompareAndSet(ctx, key, expect, value)
}

// TestQuickRoundWritesTheLeaseOnce: a round of quick passes writes the lease once (each write is a billed
// request on an object store); a pass that runs past a third of the lease makes the next boundary renew it.
func TestQuickRoundWritesTheLeaseOnce(t *testing.T) {
	store := &leaseWrites{Store: openStore(t)}
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	s := sweep.New(sweep.Config{Store: store, Clock: clk, Node: "a", Lease: 30 * time.Second, Logger: zerolog.Nop()})
	ran := 0
	for i := 0; i < 6; i++ {
		s.Register("quick", func(context.Context) error { ran++; return nil })
	}
	if ok, err := s.RunOnce(context.Background()); !ok || err != nil || ran != 6 {
		t.Fatalf("round: %v %v, %d passes ran", ok, err, ran)
	}
	if n := store.n.Load(); n != 1 {
		t.Fatalf("a round of 6 quick passes wrote the lease %d times", n)
	}
	s.Register("slow", func(context.Context) error { clk.Advance(10 * time.Second); return nil })
	s.Register("after", func(context.Context) error { return nil })
	store.n.Store(0)
	if ok, err := s.RunOnce(context.Background()); !ok || err != nil {
		t.Fatalf("round: %v %v", ok, err)
	}
	if n := store.n.Load(); n != 2 {
		t.Fatalf("a round with a pass of a third of the lease wrote the lease %d times, want 2", n)
	}
}

// TestLeaseOfADepartedMemberIsTakenAtOnce: the lease names its holder's cluster member; a node that saw that
// member leave the cluster takes the lease over at once, long before it expires, while a node that did not
// (or a lease that names no member) waits for the expiry.
func TestLeaseOfADepartedMemberIsTakenAtOnce(t *testing.T) {
	store := openStore(t)
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	left := map[string]bool{}
	mk := func(name, member string, sees bool) *sweep.Sweeper {
		cfg := sweep.Config{Store: store, Clock: clk, Node: name, Lease: 30 * time.Second, Logger: zerolog.Nop(), Member: member}
		if sees {
			cfg.HolderGone = func(node, m string) bool {
				if node != strings.TrimPrefix(m, "member-") {
					t.Errorf("HolderGone asked about node %q for member %q", node, m)
				}
				return left[m]
			}
		}
		return sweep.New(cfg)
	}
	acquire := func(s *sweep.Sweeper) bool {
		t.Helper()
		ok, err := s.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	a, blind, b := mk("a", "member-a", true), mk("blind", "member-blind", false), mk("b", "member-b", true)
	if !acquire(a) || acquire(b) || acquire(blind) {
		t.Fatal("a takes the free lease; b and blind are refused while a is a member")
	}
	clk.Advance(2 * time.Second)
	left["member-a"] = true // a's node was killed and the cluster dropped its member
	if acquire(blind) {
		t.Fatal("a node without a membership view took a live lease")
	}
	if !acquire(b) {
		t.Fatal("b did not take over the lease of a member that left")
	}
	if acquire(a) {
		t.Fatal("the departed holder took the lease back")
	}
	// A lease without a member (one written before members were recorded) waits for its expiry.
	noMember := mk("old", "", true)
	clk.Advance(31 * time.Second)
	if !acquire(noMember) {
		t.Fatal("the expired lease was not taken")
	}
	left[""] = true
	clk.Advance(time.Second)
	if acquire(b) {
		t.Fatal("a lease naming no member was taken before it expired")
	}
}

// stallingStore is a real store whose reads stall until their context ends once frozen is set (an object
// store frozen mid-shutdown).
type stallingStore struct {
	persistence.Store
	frozen atomic.Bool
}

func (s *stallingStore) Get(ctx context.Context, key []byte) (persistence.Item, error) {
	if s.frozen.Load() {
		<-ctx.Done()
		return persistence.Item{}, ctx.Err()
	}
	return s.Store.Get(ctx, key)
}

// TestRunReleaseEndsWithTheShutdown: with the store stalled, the lease release at the end of Run gives up
// when Config.Shutdown's context ends, not after its own 5 s (a SIGTERMed node stayed past its grace).
func TestRunReleaseEndsWithTheShutdown(t *testing.T) {
	store := &stallingStore{Store: openStore(t)}
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	shutdown, endShutdown := context.WithCancel(context.Background())
	a := sweep.New(sweep.Config{Store: store, Clock: clk, Node: "a", Logger: zerolog.Nop(),
		Shutdown: func() context.Context { return shutdown }})
	cancel, done := runUntilFirstRound(a)
	store.frozen.Store(true)
	cancel()
	endShutdown()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("Run still releasing 3 s after the shutdown's context ended (the release's own limit is 5 s)")
	}
}

// runUntilFirstRound starts a.Run every millisecond and returns once a round ran a pass: cancel ends Run, done
// closes when it returned.
func runUntilFirstRound(a *sweep.Sweeper) (cancel context.CancelFunc, done chan struct{}) {
	ran := make(chan struct{}, 1)
	a.Register("signal", func(context.Context) error {
		select {
		case ran <- struct{}{}:
		default:
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() { a.Run(ctx, time.Millisecond); close(done) }()
	<-ran
	return cancel, done
}
