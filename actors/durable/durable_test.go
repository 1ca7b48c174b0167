package durable_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors/durable"
	"filigrane/actors/outbox"
	"filigrane/internal/clock"
	"filigrane/persistence"
	"filigrane/persistence/pebblestore"
)

// counter is a small record with pending effects, shaped like an actor's record.
type counter struct {
	N       int             `msgpack:"n"`
	Pending []outbox.Effect `msgpack:"pending,omitempty"`
}

func (*counter) SchemaVersion() uint16 { return 1 }

func openStore(t *testing.T) persistence.Store {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

var key = []byte("test/counter")

// TestCellFencing: two activations hold the same record; the one that writes second is fenced, writes
// nothing, and stays fenced; a fresh activation sees the first one's write.
func TestCellFencing(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	a := &durable.Cell[counter, *counter]{Store: st, Key: key}
	b := &durable.Cell[counter, *counter]{Store: st, Key: key}
	for _, c := range []*durable.Cell[counter, *counter]{a, b} {
		if rec, err := c.Load(ctx); err != nil || rec != nil {
			t.Fatalf("load of a missing record: %v %v", rec, err)
		}
	}
	if err := a.Save(ctx, &counter{N: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(ctx, &counter{N: 2}); !errors.Is(err, durable.ErrFenced) || !durable.Fenced(err) || !b.IsFenced() {
		t.Fatalf("second creator: %v", err)
	}
	if err := a.Save(ctx, &counter{N: 3}); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(ctx, &counter{N: 4}); !errors.Is(err, durable.ErrFenced) {
		t.Fatalf("a fenced cell wrote again: %v", err)
	}
	c := &durable.Cell[counter, *counter]{Store: st, Key: key}
	if rec, err := c.Load(ctx); err != nil || rec.N != 3 {
		t.Fatalf("fresh activation: %+v %v", rec, err)
	}
}

// TestCellRereadsAMissingRecord: an activation that found no record (or only a record its Absent calls none)
// sees the record another activation creates afterwards, and can then write on it; one that found a record
// keeps it for its life.
func TestCellRereadsAMissingRecord(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	absent := func(c *counter) bool { return c.N < 0 } // N < 0: a tombstone
	a := &durable.Cell[counter, *counter]{Store: st, Key: key, Absent: absent}
	b := &durable.Cell[counter, *counter]{Store: st, Key: key, Absent: absent}
	if rec, err := b.Load(ctx); err != nil || rec != nil {
		t.Fatalf("load of a missing record: %v %v", rec, err)
	}
	if err := a.Save(ctx, &counter{N: -1}); err != nil {
		t.Fatal(err)
	}
	if rec, err := b.Load(ctx); err != nil || rec == nil || rec.N != -1 {
		t.Fatalf("load after another activation created the record: %+v %v", rec, err)
	}
	if err := a.Save(ctx, &counter{N: 5}); err != nil {
		t.Fatal(err)
	}
	if rec, err := b.Load(ctx); err != nil || rec == nil || rec.N != 5 {
		t.Fatalf("load after another activation replaced a tombstone: %+v %v", rec, err)
	}
	if err := b.Save(ctx, &counter{N: 6}); err != nil {
		t.Fatalf("save at the version read again: %v", err)
	}
	if rec, err := a.Load(ctx); err != nil || rec.N != 5 {
		t.Fatalf("a present record is read once per activation: %+v %v", rec, err)
	}
	if err := a.Save(ctx, &counter{N: 7}); !errors.Is(err, durable.ErrFenced) {
		t.Fatalf("save over another activation's write: %v, want fenced", err)
	}
}

// TestUpdateRetriesOnConflict: concurrent writers each apply their increment exactly once.
func TestUpdateRetriesOnConflict(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := durable.Update(ctx, st, key, 100, func(cur *counter) (*counter, error) {
				next := &counter{}
				if cur != nil {
					*next = *cur
				}
				next.N++
				return next, nil
			})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rec, _, err := durable.Read[counter](ctx, st, key)
	if err != nil || rec.N != writers {
		t.Fatalf("after %d writers: %+v %v", writers, rec, err)
	}
	// fn's error comes back as is, with the current record, and nothing is written.
	boom := errors.New("refused")
	cur, err := durable.Update(ctx, st, key, 0, func(cur *counter) (*counter, error) { return nil, boom })
	if !errors.Is(err, boom) || cur == nil || cur.N != writers {
		t.Fatalf("refusal: %+v %v", cur, err)
	}
}

// outboxDown fails every write under outbox/ while down is set: the node dies between committing the
// state and handing its effects over.
type outboxDown struct {
	persistence.Store
	mu   sync.Mutex
	down bool
}

func (s *outboxDown) set(v bool) { s.mu.Lock(); s.down = v; s.mu.Unlock() }

func (s *outboxDown) CompareAndSet(ctx context.Context, k []byte, expect persistence.Version, v []byte) (persistence.Version, error) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down && strings.HasPrefix(string(k), "outbox/") {
		return "", errors.New("injected: node died before the hand-over")
	}
	return s.Store.CompareAndSet(ctx, k, expect, v)
}

// TestCrashBetweenCommitAndHandOverLosesNothing: the effect is written with the state change; the hand-over
// dies; a later activation hands it over, the outbox pass delivers it once, and further activations and
// passes do not deliver it again.
func TestCrashBetweenCommitAndHandOverLosesNothing(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	faulty := &outboxDown{Store: st}
	ob := outbox.Outbox{Store: faulty, Clock: clk}
	cell := func() *durable.Cell[counter, *counter] {
		return &durable.Cell[counter, *counter]{Store: faulty, Key: key, Outbox: ob,
			Pending: func(c *counter) *[]outbox.Effect { return &c.Pending }}
	}
	var mu sync.Mutex
	var delivered []string
	reg := outbox.NewRegistry()
	reg.MustRegister("counter.changed", outbox.Handler{Deliver: func(_ context.Context, e outbox.Effect, _ int) error {
		mu.Lock()
		defer mu.Unlock()
		delivered = append(delivered, string(e.Payload))
		return nil
	}})
	pass := func() {
		if _, err := (outbox.Deliverer{Outbox: ob, Registry: reg, Logger: zerolog.Nop()}).Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}

	first := cell()
	if _, err := first.Load(ctx); err != nil {
		t.Fatal(err)
	}
	faulty.set(true)
	var handOverErr error
	first.OnHandOverError = func(err error) { handOverErr = err }
	next := &counter{N: 1, Pending: []outbox.Effect{{ID: outbox.EffectID("evt_", "counter", "1"), Kind: "counter.changed",
		Payload: []byte("n=1"), Created: clk.Now()}}}
	if err := first.Save(ctx, next); err != nil {
		t.Fatalf("the state change must commit even when the hand-over fails: %v", err)
	}
	if handOverErr == nil {
		t.Fatal("the failed hand-over was not reported")
	}
	// The node is gone now; what is stored is what counts.
	rec, _, err := durable.Read[counter](ctx, st, key)
	if err != nil || rec.N != 1 || len(rec.Pending) != 1 {
		t.Fatalf("stored after the crash: %+v %v", rec, err)
	}
	pass()
	if len(delivered) != 0 {
		t.Fatal("delivered before any hand-over")
	}

	faulty.set(false)
	second := cell()
	if rec, err := second.Load(ctx); err != nil || rec.N != 1 || len(rec.Pending) != 0 {
		t.Fatalf("next activation: %+v %v", rec, err)
	}
	pass()
	if len(delivered) != 1 || delivered[0] != "n=1" {
		t.Fatalf("delivered %v", delivered)
	}
	rec, _, _ = durable.Read[counter](ctx, st, key)
	if len(rec.Pending) != 0 {
		t.Fatalf("pending left in the record: %+v", rec)
	}
	third := cell()
	if _, err := third.Load(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	pass()
	if len(delivered) != 1 {
		t.Fatalf("delivered again: %v", delivered)
	}
	// A save with a new effect hands it over at once.
	if err := third.Save(ctx, &counter{N: 2, Pending: []outbox.Effect{{ID: outbox.EffectID("evt_", "counter", "2"),
		Kind: "counter.changed", Payload: []byte("n=2"), Created: clk.Now()}}}); err != nil {
		t.Fatal(err)
	}
	if len(third.Held().Pending) != 0 {
		t.Fatalf("held record keeps handed-over effects: %+v", third.Held())
	}
	pass()
	if len(delivered) != 2 || delivered[1] != "n=2" {
		t.Fatalf("delivered %v", delivered)
	}
}
