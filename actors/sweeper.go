package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors/jobstate"
	"filigrane/actors/sweep"
	"filigrane/internal/clock"
	"filigrane/persistence"
)

// prefixPurge indexes job files to delete once their result expired:
// jobs/purge/<unix seconds, 20 digits>/<request_id> -> newline-separated blob keys.
const prefixPurge = "jobs/purge/"

// purgeKey is the purge index entry of a job whose files may go at expires.
func purgeKey(expires time.Time, requestID string) []byte {
	return []byte(fmt.Sprintf("%s%020d/%s", prefixPurge, expires.Unix(), requestID))
}

// Sweeper holds the periodic work no message triggers, as passes of the node's leased sweeper
// (actors/sweep): it ticks every active job (so that expired leases, finished retry waits, deadlines and
// unsent announcements are acted on even after the job's node died or the actor passivated), deletes files of
// results whose 24 hours are over, deletes asset files whose retention ended (the asset records stay) and
// expires uploads. Time comes from the injected clock. Every pass is idempotent.
type Sweeper struct {
	Store  persistence.Store
	Blobs  persistence.Blobs
	Caller Caller
	Clock  clock.Clock
	Logger zerolog.Logger
}

// Register adds the sweeper's passes to the node's leased sweeper, in the order Sweep runs them.
func (s Sweeper) Register(sw *sweep.Sweeper) {
	sw.Register("jobs.tick", func(ctx context.Context) error { _, err := s.TickJobs(ctx); return err })
	sw.Register("batches.tick", s.TickBatches)
	sw.Register("jobs.purge", func(ctx context.Context) error { _, err := s.PurgeResults(ctx); return err })
	sw.Register("assets.expire", func(ctx context.Context) error {
		_, err := Assets{Store: s.Store, Blobs: s.Blobs}.ExpireFiles(ctx, s.Clock.Now())
		return err
	})
	sw.Register("uploads", func(ctx context.Context) error { _, err := s.SweepUploads(ctx); return err })
}

// Sweep runs every pass once, now, and reports how many jobs it ticked and how many results and expired
// asset files it purged (tests and manual sweeps).
func (s Sweeper) Sweep(ctx context.Context) (ticked, purged int, err error) {
	ticked, err = s.TickJobs(ctx)
	if err != nil {
		return ticked, purged, err
	}
	if err := s.TickBatches(ctx); err != nil {
		return ticked, purged, err
	}
	purged, err = s.PurgeResults(ctx)
	if err != nil {
		return ticked, purged, err
	}
	expired, err := Assets{Store: s.Store, Blobs: s.Blobs}.ExpireFiles(ctx, s.Clock.Now())
	purged += expired
	if err != nil {
		return ticked, purged, fmt.Errorf("expire asset files: %w", err)
	}
	if _, err := s.SweepUploads(ctx); err != nil { // uploads past their 24 hours (upload_sweep.go)
		return ticked, purged, fmt.Errorf("sweep uploads: %w", err)
	}
	return ticked, purged, nil
}

// TickJobs sends JobTick to every job in the active index.
func (s Sweeper) TickJobs(ctx context.Context) (ticked int, err error) {
	err = scanAll(ctx, s.Store, []byte(prefixActiveJob), func(it persistence.Item) error {
		id := strings.TrimPrefix(string(it.Key), prefixActiveJob)
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if _, err := s.Caller.Request(cctx, id, KindJob, &JobTick{RequestID: id}); err != nil {
			s.Logger.Warn().Err(err).Str("job", id).Msg("sweep: tick")
			return nil
		}
		ticked++
		return nil
	})
	return ticked, err
}

// PurgeResults deletes the files of results whose purge time passed, and their index entries.
func (s Sweeper) PurgeResults(ctx context.Context) (purged int, err error) {
	now := s.Clock.Now()
	end := []byte(fmt.Sprintf("%s%020d/", prefixPurge, now.Unix()+1))
	err = scanAll(ctx, s.Store, []byte(prefixPurge), func(it persistence.Item) error {
		if string(it.Key) >= string(end) {
			return errStopScan
		}
		keys, err := s.purgedKeys(ctx, it)
		if err != nil {
			return err
		}
		for _, key := range keys {
			if err := s.Blobs.Delete(ctx, key); err != nil {
				return fmt.Errorf("purge %s: %w", key, err)
			}
		}
		if err := s.Store.Delete(ctx, it.Key, it.Version); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
			return fmt.Errorf("drop purge entry: %w", err)
		}
		purged++
		return nil
	})
	if errors.Is(err, errStopScan) {
		err = nil
	}
	return purged, err
}

// purgedKeys lists the blob keys that purge entry it deletes: those it lists and, for an entry that lists a
// failed job's input alone, every key an attempt of the job could have stored its result under (OutputKeys),
// read from the job's record. Entries written before failed jobs listed them name the input only, and a
// result stored by an attempt whose success was never recorded would otherwise stay for ever; deriving them
// here needs no migration of stored entries. Entries written since list them, and so cost no read.
func (s Sweeper) purgedKeys(ctx context.Context, it persistence.Item) ([]string, error) {
	var keys []string
	for _, key := range strings.Split(string(it.Value), "\n") {
		if key != "" {
			keys = append(keys, key)
		}
	}
	id := string(it.Key[strings.LastIndexByte(string(it.Key), '/')+1:])
	if len(keys) != 1 || !jobstate.ValidRequestID(id) {
		return keys, nil // a batch's entry (its id is the batch's and a suffix), or one listing outputs already
	}
	rec, err := ReadJob(ctx, s.Store, id)
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		return keys, nil
	case err != nil:
		return nil, fmt.Errorf("purge entry %s: %w", it.Key, err)
	}
	// Only a failed job: a succeeded embed's output is its watermarked asset, kept by file retention.
	if rec.Status != jobstate.StatusFailed || rec.Input.BlobKey != keys[0] {
		return keys, nil
	}
	for _, key := range OutputKeys(rec) {
		if !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return keys, nil
}

// TickBatches ticks started batches (a batch whose node died carries on from its record), then batches past
// their 30 days (the actor reduces each to its tombstone).
func (s Sweeper) TickBatches(ctx context.Context) error {
	if err := s.tickBatches(ctx, prefixActiveBatch, nil); err != nil {
		return err
	}
	return s.tickBatches(ctx, prefixBatchDue, []byte(fmt.Sprintf("%s%020d/", prefixBatchDue, s.Clock.Now().Unix()+1)))
}

// tickBatches sends BatchTick to every batch named under prefix (keys before end, when set); an entry that
// names no live batch is dropped.
func (s Sweeper) tickBatches(ctx context.Context, prefix string, end []byte) error {
	err := scanAll(ctx, s.Store, []byte(prefix), func(it persistence.Item) error {
		if end != nil && string(it.Key) >= string(end) {
			return errStopScan
		}
		id := string(it.Key[strings.LastIndexByte(string(it.Key), '/')+1:])
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		r, err := s.Caller.Request(cctx, id, KindBatch, &BatchTick{BatchID: id})
		if err != nil {
			s.Logger.Warn().Err(err).Str("batch", id).Msg("sweep: tick batch")
			return nil
		}
		if rep, ok := r.(*BatchReply); ok && rep.Code == ReplyNotFound {
			if err := s.Store.Delete(ctx, it.Key, it.Version); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
				s.Logger.Warn().Err(err).Str("batch", id).Msg("sweep: drop batch entry")
			}
		}
		return nil
	})
	if errors.Is(err, errStopScan) {
		return nil
	}
	return err
}

var errStopScan = errors.New("stop scan")

// scanAll calls fn for every item under prefix, in key order, a page at a time.
func scanAll(ctx context.Context, st persistence.Store, prefix []byte, fn func(persistence.Item) error) error {
	start := prefix
	for {
		items, err := st.Scan(ctx, prefix, start, 256)
		if err != nil {
			return fmt.Errorf("scan %s: %w", prefix, err)
		}
		for _, it := range items {
			if err := fn(it); err != nil {
				return err
			}
		}
		if len(items) < 256 {
			return nil
		}
		start = persistence.KeyAfter(items[len(items)-1].Key)
	}
}
