// Package diskspace keeps a node's data directory from filling its filesystem: a Guard reads the free space of
// the directory's filesystem before each write and refuses writes below a reserve, while the filesystem itself
// would still take them. It owns that measurement and the two thresholds; what a refusal means to a client is
// the caller's (the HTTP layer answers 503 with Retry-After), and it must not delete or move anything.
//
// Why refuse early: Pebble treats a failed write of its log as fatal (its commit pipeline cannot continue) and
// the process panicked; restarted on a full disk, Pebble retried its flush in a loop of errors (measured: 77 MB
// of log in 30 s) and the start never finished. Files (uploads, inputs, results) are refused first, at the
// reserve, so records, which are small, go on being written (job outcomes, deletions that free space) until a
// quarter of it is left; then record writes are refused too, and the rest stays for Pebble's own flushes.
// Except the records of work already done (Outcome: a running job attempt's renewal and its report of how it
// ended), taken down to an eighth: refusing them lost the work for good (a stored result redone, a wait for
// disk space counted as a lost worker), since nothing else can be written at that point to remember them,
// while they are few (one per running attempt at a time) and small. Nothing is remembered: once space is
// freed, the next write is taken.
package diskspace

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"

	"filigrane/persistence"
)

// ErrLow is the error (wrapped, with the free and reserved bytes) of a write the Guard refused, and of a file
// write the filesystem refused for want of space (ENOSPC).
var ErrLow = errors.New("the data directory's filesystem is low on free space")

// Guard measures the free space of one directory's filesystem. A nil *Guard refuses nothing. It is safe for
// concurrent use.
type Guard struct {
	dir      string
	files    atomic.Uint64 // file writes need at least this much free
	records  atomic.Uint64 // record writes need at least this much free
	outcomes atomic.Uint64 // record writes marked Outcome need at least this much free
}

// New guards dir with reserve bytes for file writes, a quarter of it for record writes and an eighth for the
// records of work already done (Outcome); a reserve of 0 returns nil (no guard).
func New(dir string, reserve uint64) *Guard {
	if reserve == 0 {
		return nil
	}
	g := &Guard{dir: dir}
	g.SetReserve(reserve)
	return g
}

// SetReserve changes the reserve (at least 1 byte) from the next write on, with a quarter of it for records
// and an eighth for outcomes: how a test makes a real filesystem look low on space without filling it, and back.
func (g *Guard) SetReserve(reserve uint64) {
	reserve = max(reserve, 1)
	g.files.Store(reserve)
	g.records.Store(reserve / 4)
	g.outcomes.Store(reserve / 8)
}

// Free is the space unprivileged writes may still use on the directory's filesystem.
func (g *Guard) Free() (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(g.dir, &st); err != nil {
		return 0, fmt.Errorf("diskspace: free space of %s: %w", g.dir, err)
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil //nolint:gosec // sizes are never negative
}

// Files refuses a file write (ErrLow) when less than the reserve is free.
func (g *Guard) Files() error {
	if g == nil {
		return nil
	}
	return g.check(g.files.Load(), "file")
}

// Low reports whether file writes are refused now (less than the reserve free): what a node tells the cluster
// and its readiness probe. A nil guard is never low.
func (g *Guard) Low() bool { return g.Files() != nil }

// Near reports whether less than twice the reserve is free: the disk is getting close to refusing writes, and
// work that guards against a refused write (actors.OutcomeFiles) is worth its cost. A nil guard is never near.
func (g *Guard) Near() bool {
	if g == nil {
		return false
	}
	return g.check(2*g.files.Load(), "file") != nil
}

// Records refuses a record write (ErrLow) when less than a quarter of the reserve is free.
func (g *Guard) Records() error {
	if g == nil {
		return nil
	}
	return g.check(g.records.Load(), "record")
}

// Outcomes refuses a write of the record of work already done (ErrLow) when less than an eighth of the reserve
// is free.
func (g *Guard) Outcomes() error {
	if g == nil {
		return nil
	}
	return g.check(g.outcomes.Load(), "outcome record")
}

// outcomeKey marks a context whose record writes are outcomes (Outcome).
type outcomeKey struct{}

// Outcome marks the record writes made with ctx as the record of work already done: a running job attempt's
// renewal, or its report of how it ended. The guarded Store takes them down to an eighth of the reserve, where
// other record writes are refused below a quarter. Only writes whose number is bounded by the work running now
// may be marked: never one a client's request makes on its own.
func Outcome(ctx context.Context) context.Context { return context.WithValue(ctx, outcomeKey{}, true) }

func (g *Guard) check(need uint64, what string) error {
	free, err := g.Free()
	if err != nil {
		// Not knowing is no reason to refuse: the write itself reports a real failure.
		return nil
	}
	if free < need {
		return fmt.Errorf("diskspace: %s write refused: %w (%s: %d bytes free, %d reserved; free space there, or lower --min-free-disk)",
			what, ErrLow, g.dir, free, need)
	}
	return nil
}

// MarkFull wraps err as ErrLow when it is a write the filesystem refused for want of space (ENOSPC);
// other errors are returned as they are.
func MarkFull(err error) error {
	if err != nil && errors.Is(err, syscall.ENOSPC) && !errors.Is(err, ErrLow) {
		return fmt.Errorf("%w: %w", ErrLow, err)
	}
	return err
}

// Store wraps a record store so that its writes (CompareAndSet) are refused below the records' threshold, or
// the outcomes' for a context marked Outcome. Reads, scans and deletes pass: a delete is how space comes back.
// A nil guard returns s itself.
func Store(s persistence.Store, g *Guard) persistence.Store {
	if g == nil {
		return s
	}
	return &guarded{Store: s, g: g}
}

type guarded struct {
	persistence.Store
	g *Guard
}

func (s *guarded) CompareAndSet(ctx context.Context, key []byte, expect persistence.Version, value []byte) (persistence.Version, error) {
	check := s.g.Records
	if ctx.Value(outcomeKey{}) != nil {
		check = s.g.Outcomes
	}
	if err := check(); err != nil {
		return persistence.NoVersion, err
	}
	return s.Store.CompareAndSet(ctx, key, expect, value)
}
