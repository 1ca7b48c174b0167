package admin

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/internal/clock"
	"filigrane/persistence"
	"filigrane/persistence/pebblestore"
)

// failingKeyWrites is a real Pebble store whose writes under apikey/ fail, like a storage outage in the middle
// of a bootstrap.
type failingKeyWrites struct{ persistence.Store }

var errOutage = errors.New("storage outage")

func (f failingKeyWrites) CompareAndSet(ctx context.Context, key []byte, expect persistence.Version, value []byte) (persistence.Version, error) {
	if bytes.HasPrefix(key, []byte("apikey/")) {
		return "", errOutage
	}
	return f.Store.CompareAndSet(ctx, key, expect, value)
}

// TestBootstrapFailureReleasesClaim: a bootstrap that fails after claiming the marker gives the claim back, so
// the next start creates the development organization and prints a key; after that, bootstraps do nothing.
func TestBootstrapFailureReleasesClaim(t *testing.T) {
	store, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
	broken := Admin{Store: failingKeyWrites{store}, Clock: clk, Catalog: actors.DefaultCatalog()}
	if dev, err := broken.Bootstrap(ctx); !errors.Is(err, errOutage) || dev != nil {
		t.Fatalf("Bootstrap with failing key writes = %+v, %v; want the outage", dev, err)
	}
	if _, err := store.Get(ctx, []byte("node/bootstrapped")); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("bootstrap marker after a failed bootstrap: %v, want it released (ErrNotFound)", err)
	}

	a := Admin{Store: store, Clock: clk, Catalog: actors.DefaultCatalog()}
	dev, err := a.Bootstrap(ctx)
	if err != nil || dev == nil || dev.Secret == "" {
		t.Fatalf("Bootstrap after the outage = %+v, %v; want a development key", dev, err)
	}
	if _, err := (actors.Keys{Store: store, Clock: clk}).Authenticate(ctx, dev.Secret); err != nil {
		t.Fatalf("development key does not authenticate: %v", err)
	}
	if again, err := a.Bootstrap(ctx); err != nil || again != nil {
		t.Fatalf("second Bootstrap = %+v, %v; want nothing (already bootstrapped)", again, err)
	}
}
