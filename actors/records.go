package actors

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"filigrane/actors/durable"
	"filigrane/internal/clock"
	"filigrane/persistence"
)

// Storage keys. Every durable record lives under one of these prefixes; docs/ARCHITECTURE.md lists them.
const (
	prefixOrg       = "org/"    // org/<org_id> -> OrgState
	prefixLedger    = "ledger/" // ledger/<org_id>/<seq, 20 digits> -> LedgerEntry
	prefixAPIKey    = "apikey/" // apikey/<key_id> -> APIKey
	prefixOrgKeys   = "orgkey/" // orgkey/<org_id>/<key_id> -> empty (index)
	keyBootstrapped = "node/bootstrapped"
)

// newID returns prefix + 2n random hex characters.
func newID(prefix string, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // the OS has no randomness left: nothing is safe
	}
	return prefix + hex.EncodeToString(b)
}

// NewOrgID returns a fresh organization id.
func NewOrgID() string { return newID("org_", 8) }

// NewMemberID returns a fresh member id.
func NewMemberID() string { return newID("mem_", 8) }

// Orgs reads and writes organization records with compare-and-set. The org actor uses it while it owns an
// organization; the admin command uses it on a stopped node.
type Orgs struct {
	Store persistence.Store
	Clock clock.Clock
}

func orgKey(id string) []byte { return []byte(prefixOrg + id) }

// Load returns the organization and the version it was read at. Journal entries left by a crash between the
// record write and the ledger write are copied to the ledger now (idempotent).
func (r Orgs) Load(ctx context.Context, id string) (*OrgState, persistence.Version, error) {
	st, v, err := durable.Read[OrgState](ctx, r.Store, orgKey(id))
	if err != nil {
		return nil, "", fmt.Errorf("organization %s: %w", id, err)
	}
	if err := r.afterLoad(ctx, st); err != nil {
		return nil, "", err
	}
	return st, v, nil
}

func (r Orgs) afterLoad(ctx context.Context, st *OrgState) error {
	st.ensureMaps()
	return r.flushJournal(ctx, st)
}

// Save writes st if the stored version is still expect, then copies its journal to ledger keys. On
// persistence.ErrVersionMismatch another writer owns the organization and nothing was written.
func (r Orgs) Save(ctx context.Context, st *OrgState, expect persistence.Version) (persistence.Version, error) {
	st.Prune(r.Clock.Now())
	v, err := durable.Write(ctx, r.Store, orgKey(st.ID), expect, st)
	if err != nil {
		return "", fmt.Errorf("organization %s: %w", st.ID, err)
	}
	if err := r.flushJournal(ctx, st); err != nil {
		return v, err
	}
	return v, nil
}

// Cell is the org actor's hold on organization id: loaded once per activation, written with compare-and-set,
// the journal copied to the ledger after each load and write.
func (r Orgs) Cell(id string, timeout time.Duration) *durable.Cell[OrgState, *OrgState] {
	return &durable.Cell[OrgState, *OrgState]{Store: r.Store, Key: orgKey(id), Timeout: timeout,
		AfterLoad:  r.afterLoad,
		BeforeSave: func(st *OrgState) { st.Prune(r.Clock.Now()) },
		AfterSave:  r.flushJournal,
	}
}

// flushJournal writes each journal entry to its own ledger key (create-only, so a repeat is harmless) and
// empties the journal in memory; the next Save persists the empty journal.
func (r Orgs) flushJournal(ctx context.Context, st *OrgState) error {
	for _, e := range st.Journal {
		b, err := persistence.Marshal(&e)
		if err != nil {
			return fmt.Errorf("encode ledger entry: %w", err)
		}
		key := []byte(fmt.Sprintf("%s%s/%020d", prefixLedger, st.ID, e.Seq))
		if _, err := r.Store.CompareAndSet(ctx, key, persistence.NoVersion, b); err != nil && !errors.Is(err, persistence.ErrVersionMismatch) {
			return fmt.Errorf("write ledger entry %d of %s: %w", e.Seq, st.ID, err)
		}
	}
	st.Journal = nil
	return nil
}

// Update loads the organization, applies fn and saves, retrying when another writer got there first. It is
// for offline administration; actors hold their state in a Cell.
func (r Orgs) Update(ctx context.Context, id string, fn func(*OrgState) error) (*OrgState, error) {
	st, err := durable.Update(ctx, r.Store, orgKey(id), 5, func(cur *OrgState) (*OrgState, error) {
		if cur == nil {
			return nil, fmt.Errorf("organization %s: %w", id, persistence.ErrNotFound)
		}
		// cur is this attempt's own fresh copy, so it is changed in place.
		if err := r.afterLoad(ctx, cur); err != nil {
			return nil, err
		}
		if err := fn(cur); err != nil {
			return nil, err
		}
		cur.Prune(r.Clock.Now())
		return cur, nil
	})
	if err != nil {
		if errors.Is(err, persistence.ErrVersionMismatch) {
			return nil, fmt.Errorf("update organization %s: too much contention", id)
		}
		return nil, err
	}
	if err := r.flushJournal(ctx, st); err != nil {
		return nil, err
	}
	return st, nil
}

// Create writes a new organization; it fails if the id exists.
func (r Orgs) Create(ctx context.Context, st *OrgState) error {
	_, err := r.Save(ctx, st, persistence.NoVersion)
	return err
}

// List returns every organization id, in key order.
func (r Orgs) List(ctx context.Context) ([]string, error) {
	var ids []string
	start := []byte(prefixOrg)
	for {
		items, err := r.Store.Scan(ctx, []byte(prefixOrg), start, 100)
		if err != nil {
			return nil, fmt.Errorf("list organizations: %w", err)
		}
		for _, it := range items {
			ids = append(ids, strings.TrimPrefix(string(it.Key), prefixOrg))
		}
		if len(items) < 100 {
			return ids, nil
		}
		start = persistence.KeyAfter(items[len(items)-1].Key)
	}
}

// Ledger returns up to limit ledger entries of the organization starting at sequence number from.
func (r Orgs) Ledger(ctx context.Context, id string, from uint64, limit int) ([]LedgerEntry, error) {
	prefix := []byte(prefixLedger + id + "/")
	start := []byte(fmt.Sprintf("%s%s/%020d", prefixLedger, id, from))
	items, err := r.Store.Scan(ctx, prefix, start, limit)
	if err != nil {
		return nil, fmt.Errorf("read ledger of %s: %w", id, err)
	}
	out := make([]LedgerEntry, 0, len(items))
	for _, it := range items {
		var e LedgerEntry
		if err := persistence.Unmarshal(it.Value, &e); err != nil {
			return nil, fmt.Errorf("decode ledger entry %s: %w", it.Key, err)
		}
		out = append(out, e)
	}
	return out, nil
}
