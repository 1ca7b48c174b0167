package actors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"filigrane/actors/batchstate"
	"filigrane/persistence"
)

// Storage keys of batches (docs/ARCHITECTURE.md).
const (
	prefixBatch = "batch/" // batch/<batch_id> -> batchstate.Record
	// prefixBatchIndex lists an organization's batches newest first:
	// batchidx/<org_id>/<inverted created ns, 20 digits>/<batch_id> -> empty.
	prefixBatchIndex = "batchidx/"
	// prefixActiveBatch holds the started batches the sweeper ticks: batches/active/<batch_id> -> org id.
	prefixActiveBatch = "batches/active/"
	// prefixBatchDue indexes batches by the end of their 30 days: batches/due/<unix seconds, 20 digits>/<batch_id>
	// -> empty. The sweeper ticks those due; the actor reduces the record to its tombstone and drops the entry.
	prefixBatchDue = "batches/due/"
)

func batchDueKey(r *batchstate.Record) []byte {
	return []byte(fmt.Sprintf("%s%020d/%s", prefixBatchDue, r.RetainUntil().Unix(), r.BatchID))
}

func batchKey(id string) []byte { return []byte(prefixBatch + id) }

func batchIndexKey(r *batchstate.Record) []byte {
	return []byte(fmt.Sprintf("%s%s/%020d/%s", prefixBatchIndex, r.OrgID, math.MaxInt64-r.CreatedAt.UnixNano(), r.BatchID))
}

// Batches reads batch records for listings; the batch actor is their only writer.
type Batches struct {
	Store persistence.Store
}

// Load reads a batch record; persistence.ErrNotFound when there is none.
func (b Batches) Load(ctx context.Context, id string) (*batchstate.Record, persistence.Version, error) {
	it, err := b.Store.Get(ctx, batchKey(id))
	if err != nil {
		return nil, "", err
	}
	var rec batchstate.Record
	if err := persistence.Unmarshal(it.Value, &rec); err != nil {
		return nil, "", fmt.Errorf("decode batch %s: %w", id, err)
	}
	return &rec, it.Version, nil
}

// ErrBatchCursor: the cursor names no batch of the organization.
var ErrBatchCursor = errors.New("cursor names no batch of this organization")

// List returns up to limit batches of orgID, newest first, starting after the batch named by after (a
// batch id; empty for the first page), and whether more follow. Removed records and index entries without a
// record are skipped.
func (b Batches) List(ctx context.Context, orgID, after string, limit int) ([]*batchstate.Record, bool, error) {
	prefix := []byte(prefixBatchIndex + orgID + "/")
	start := prefix
	if after != "" {
		rec, _, err := b.Load(ctx, after)
		if errors.Is(err, persistence.ErrNotFound) || (err == nil && rec.OrgID != orgID) {
			return nil, false, ErrBatchCursor
		}
		if err != nil {
			return nil, false, err
		}
		start = persistence.KeyAfter(batchIndexKey(rec))
	}
	var out []*batchstate.Record
	for {
		items, err := b.Store.Scan(ctx, prefix, start, limit+1)
		if err != nil {
			return nil, false, fmt.Errorf("list batches of %s: %w", orgID, err)
		}
		for _, it := range items {
			id := string(it.Key[strings.LastIndexByte(string(it.Key), '/')+1:])
			rec, _, err := b.Load(ctx, id)
			if errors.Is(err, persistence.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, false, err
			}
			if rec.Removed || rec.OrgID != orgID {
				continue
			}
			if len(out) == limit {
				return out, true, nil
			}
			out = append(out, rec)
		}
		if len(items) < limit+1 {
			return out, false, nil
		}
		start = persistence.KeyAfter(items[len(items)-1].Key)
	}
}
