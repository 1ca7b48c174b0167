// Package sweep runs the cluster's periodic work: one sweeper per node, of which only the holder of a lease
// in the Store runs passes at a time.
//
// It owns the lease record and the loop: registered passes (ticking active jobs, purging expired results,
// expiring asset files and uploads, delivering the outbox) run one after another, every interval, on the
// node that holds the lease. It does not know what a pass does, and it is not what makes passes safe: every
// pass is idempotent and correct when two nodes run it at once (a node whose lease lapsed mid-pass); the
// lease only keeps the cluster from doing the same work N times over.
//
// The lease (Store key sweeper/lease) names its holder and an expiry read from the injected clock. The holder
// renews it before every round, between passes once a third of its length has passed since the last renewal
// (so that an idle round of quick passes costs one write, not one per pass: on an object store each write is
// a billed request), and every third of its length while a pass runs; a holder that cannot renew stops its
// pass. A node that dies keeps the lease until it expires, then the next node whose round comes takes it
// over, or sooner: the lease names the holder's cluster member, and a node that knows that member's process
// gone (Config.HolderGone) takes it at once. A node that shuts down releases it at once.
package sweep

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"filigrane/internal/clock"
	"filigrane/persistence"
)

// LeaseKey is the Store key of the lease.
const LeaseKey = "sweeper/lease"

// Lease is the stored lease record.
type Lease struct {
	Holder string    `msgpack:"holder"`
	Until  time.Time `msgpack:"until"`
	// Since is when this holder took the lease over (renewals keep it).
	Since time.Time `msgpack:"since"`
	// Member is the holder's cluster member id ("" in leases written before it was recorded, or by a
	// sweeper not in a cluster).
	Member string `msgpack:"member,omitempty"`
}

// SchemaVersion implements persistence.Record.
func (*Lease) SchemaVersion() uint16 { return 1 }

// Pass is one kind of periodic work. Run must be idempotent and return when ctx ends.
type Pass struct {
	Name string
	Run  func(ctx context.Context) error
}

// Sweeper is one node's sweeper. Build it with New, Register passes before Run.
type Sweeper struct {
	store    persistence.Store
	clock    clock.Clock
	holder   string
	leaseFor time.Duration
	logger   zerolog.Logger
	// member and holderGone: Config's Member and HolderGone.
	member     string
	holderGone func(node, member string) bool
	shutdown   func() context.Context

	mu     sync.Mutex
	passes []Pass
}

// Config configures a Sweeper.
type Config struct {
	Store persistence.Store
	Clock clock.Clock
	// Node names the node in the lease; a random suffix makes each start a distinct holder.
	Node string
	// Lease is how long a lease lasts after its last renewal; 0 means 30 s.
	Lease  time.Duration
	Logger zerolog.Logger
	// Member is this node's cluster member id, recorded in the lease it holds.
	Member string
	// HolderGone reports whether the process that was this cluster member of the named node is gone
	// (cluster.Node.Gone): its lease is then taken over at once instead of when it expires. Nil: leases
	// only expire.
	HolderGone func(node, member string) bool
	// Shutdown returns the context of the shutdown that ended Run's context (nil: none known). The lease
	// release at the end of Run ends with it too, so that a release stalled on a frozen store does not hold
	// the process past its shutdown grace; a lease not released expires after Lease. Nil: the release has
	// its own 5 s.
	Shutdown func() context.Context
}

// New returns a sweeper with no passes.
func New(cfg Config) *Sweeper {
	lease := cfg.Lease
	if lease <= 0 {
		lease = 30 * time.Second
	}
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // the OS has no randomness left: nothing is safe
	}
	return &Sweeper{store: cfg.Store, clock: cfg.Clock, holder: cfg.Node + "/" + hex.EncodeToString(b),
		leaseFor: lease, logger: cfg.Logger, member: cfg.Member, holderGone: cfg.HolderGone,
		shutdown: cfg.Shutdown}
}

// Holder is this sweeper's name in the lease.
func (s *Sweeper) Holder() string { return s.holder }

// Register adds a pass; passes run in registration order.
func (s *Sweeper) Register(name string, run func(ctx context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.passes = append(s.passes, Pass{Name: name, Run: run})
}

func (s *Sweeper) registered() []Pass {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Pass(nil), s.passes...)
}

// Acquire takes the lease when it is free or expired, or renews it when this sweeper holds it. It reports
// whether this sweeper holds the lease now.
func (s *Sweeper) Acquire(ctx context.Context) (bool, error) {
	now := s.clock.Now()
	next := &Lease{Holder: s.holder, Until: now.Add(s.leaseFor), Since: now, Member: s.member}
	expect := persistence.NoVersion
	it, err := s.store.Get(ctx, []byte(LeaseKey))
	switch {
	case errors.Is(err, persistence.ErrNotFound):
	case err != nil:
		return false, fmt.Errorf("sweeper lease: %w", err)
	default:
		var cur Lease
		if err := persistence.Unmarshal(it.Value, &cur); err != nil {
			return false, fmt.Errorf("sweeper lease: %w", err)
		}
		if cur.Holder != s.holder && now.Before(cur.Until) && !s.gone(cur) {
			return false, nil
		}
		if cur.Holder == s.holder {
			next.Since = cur.Since
		}
		expect = it.Version
	}
	b, err := persistence.Marshal(next)
	if err != nil {
		return false, fmt.Errorf("sweeper lease: %w", err)
	}
	if _, err := s.store.CompareAndSet(ctx, []byte(LeaseKey), expect, b); err != nil {
		if errors.Is(err, persistence.ErrVersionMismatch) {
			return false, nil // another node took or renewed it first
		}
		return false, fmt.Errorf("sweeper lease: %w", err)
	}
	return true, nil
}

// gone reports whether the holder of l is known to be gone (its node name is the holder up to its last '/').
func (s *Sweeper) gone(l Lease) bool {
	if l.Member == "" || s.holderGone == nil {
		return false
	}
	node := l.Holder
	if i := strings.LastIndexByte(node, '/'); i >= 0 {
		node = node[:i]
	}
	return s.holderGone(node, l.Member)
}

// Release gives the lease up if this sweeper holds it, so that another node takes over without waiting.
func (s *Sweeper) Release(ctx context.Context) error {
	it, err := s.store.Get(ctx, []byte(LeaseKey))
	if errors.Is(err, persistence.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sweeper lease: %w", err)
	}
	var cur Lease
	if err := persistence.Unmarshal(it.Value, &cur); err != nil {
		return fmt.Errorf("sweeper lease: %w", err)
	}
	if cur.Holder != s.holder {
		return nil
	}
	if err := s.store.Delete(ctx, []byte(LeaseKey), it.Version); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
		return fmt.Errorf("sweeper lease: %w", err)
	}
	return nil
}

// RunOnce runs one round when this sweeper holds (or can take) the lease: every pass in order, the lease
// renewed between passes (once a third of it has passed) and while they run. It reports whether it ran; a pass that fails is logged and the
// round goes on with the next; the errors are joined. A lost lease stops the round.
func (s *Sweeper) RunOnce(ctx context.Context) (bool, error) {
	held, err := s.Acquire(ctx)
	if err != nil || !held {
		return false, err
	}
	// renewed is when the lease was last renewed (injected clock, Unix ns), by the round or by the renewer.
	var renewed atomic.Int64
	renewed.Store(s.clock.Now().UnixNano())
	renew := func(ctx context.Context) (bool, error) {
		now := s.clock.Now()
		held, err := s.Acquire(ctx)
		if held && err == nil {
			renewed.Store(now.UnixNano())
		}
		return held, err
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Renew while passes run, at a third of the lease, on the wall clock's cadence (the expiry itself is read
	// from the injected clock).
	var renewer sync.WaitGroup
	renewer.Add(1)
	go func() {
		defer renewer.Done()
		t := time.NewTicker(s.leaseFor / 3)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
				if held, err := renew(rctx); err != nil || !held {
					cancel(fmt.Errorf("sweeper lease lost (%v)", err))
					return
				}
			}
		}
	}()
	defer renewer.Wait()
	defer cancel(nil)
	var errs []error
	for i, p := range s.registered() {
		// A renewal between passes also checks that the lease is still ours; within a third of the lease
		// since the last one nobody else can have taken it (it runs until then at least).
		if i > 0 && s.clock.Now().Sub(time.Unix(0, renewed.Load())) >= s.leaseFor/3 {
			if held, err := renew(rctx); err != nil || !held {
				return true, errors.Join(append(errs, fmt.Errorf("sweeper lease lost before pass %s (%v)", p.Name, err))...)
			}
		}
		if err := rctx.Err(); err != nil {
			return true, errors.Join(append(errs, context.Cause(rctx))...)
		}
		if err := p.Run(rctx); err != nil {
			if rctx.Err() != nil {
				return true, errors.Join(append(errs, fmt.Errorf("pass %s: %w", p.Name, context.Cause(rctx)))...)
			}
			s.logger.Warn().Err(err).Str("pass", p.Name).Msg("sweep pass failed; it runs again next round")
			errs = append(errs, fmt.Errorf("pass %s: %w", p.Name, err))
		}
	}
	return true, errors.Join(errs...)
}

// RunAll runs every pass now without the lease (tests and manual sweeps: passes are safe to run twice).
func (s *Sweeper) RunAll(ctx context.Context) error {
	var errs []error
	for _, p := range s.registered() {
		if err := p.Run(ctx); err != nil {
			errs = append(errs, fmt.Errorf("pass %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Run runs a round every interval until ctx ends, then releases the lease (for up to 5 s, and no longer than
// Config.Shutdown's context lasts). The caller joins it (the node's Close waits for Run to return).
func (s *Sweeper) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if s.shutdown != nil {
			if sctx := s.shutdown(); sctx != nil {
				stop := context.AfterFunc(sctx, cancel)
				defer stop()
			}
		}
		if err := s.Release(rctx); err != nil {
			s.logger.Warn().Err(err).Msg("release the sweeper lease")
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.RunOnce(ctx); err != nil && ctx.Err() == nil {
				s.logger.Warn().Err(err).Msg("sweep")
			}
		}
	}
}
