package outbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors/outbox"
	"filigrane/internal/clock"
	"filigrane/persistence"
	"filigrane/persistence/pebblestore"
)

var t0 = time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC)

// recorder is a handler that records deliveries and fails while fail says so.
type recorder struct {
	mu   sync.Mutex
	got  []string // effect ids in delivery order
	fail func(e outbox.Effect, attempt int) error
}

func (r *recorder) deliver(ctx context.Context, e outbox.Effect, attempt int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		if err := r.fail(e, attempt); err != nil {
			outbox.Note(ctx, "HTTP 503")
			return err
		}
	}
	outbox.Note(ctx, "HTTP 200")
	r.got = append(r.got, e.ID)
	return nil
}

func (r *recorder) delivered() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

type fixture struct {
	store persistence.Store
	clk   *clock.Manual
	ob    outbox.Outbox
	reg   *outbox.Registry
	d     outbox.Deliverer
	rec   *recorder
}

func newFixture(t *testing.T, schedule ...time.Duration) *fixture {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewManual(t0)
	f := &fixture{store: st, clk: clk, ob: outbox.Outbox{Store: st, Clock: clk}, reg: outbox.NewRegistry(), rec: &recorder{}}
	f.reg.MustRegister("test.kind", outbox.Handler{Deliver: f.rec.deliver, Schedule: schedule})
	f.d = outbox.Deliverer{Outbox: f.ob, Registry: f.reg, Logger: zerolog.Nop()}
	return f
}

func (f *fixture) pass(t *testing.T) outbox.PassResult {
	t.Helper()
	res, err := f.d.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func effect(cause, key string) outbox.Effect {
	return outbox.Effect{ID: outbox.EffectID("evt_", cause), Kind: "test.kind", Key: key, Payload: []byte(cause), Created: t0}
}

func TestEffectIDDeterministicAndUnambiguous(t *testing.T) {
	a, b := outbox.EffectID("evt_", "req_1", "job.completed"), outbox.EffectID("evt_", "req_1", "job.completed")
	if a != b || !strings.HasPrefix(a, "evt_") || len(a) != 4+32 {
		t.Fatalf("ids %q %q", a, b)
	}
	if outbox.EffectID("evt_", "ab", "c") == outbox.EffectID("evt_", "a", "bc") {
		t.Fatal("part boundaries are not part of the id")
	}
}

// TestAddTwiceDeliversOnce: handing the same effect over twice (a replayed commit) delivers it once, and
// handing it over again after delivery does not deliver it again.
func TestAddTwiceDeliversOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	e := effect("req_1", "whk_1")
	for range 2 {
		if err := f.ob.Add(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if res := f.pass(t); res.Delivered != 1 {
		t.Fatalf("pass: %+v", res)
	}
	if err := f.ob.Add(ctx, e); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(time.Hour)
	f.pass(t)
	if got := f.rec.delivered(); len(got) != 1 || got[0] != e.ID {
		t.Fatalf("delivered %v", got)
	}
	ent, err := f.ob.Get(ctx, e.ID)
	if err != nil || ent.Status != outbox.StatusDelivered || len(ent.Attempts) != 1 || ent.Attempts[0].Detail != "HTTP 200" || ent.Attempts[0].Error != "" {
		t.Fatalf("entry %v %+v", err, ent)
	}
}

// TestScheduleThenDeadThenRedeliver: a failing effect is attempted at once and after each wait of its
// schedule, not before; after the last wait it is dead with every attempt logged; Redeliver revives it and
// the next pass delivers it.
func TestScheduleThenDeadThenRedeliver(t *testing.T) {
	f := newFixture(t, time.Minute, 10*time.Minute)
	ctx := context.Background()
	failing := true
	f.rec.fail = func(outbox.Effect, int) error {
		if failing {
			return errors.New("endpoint answered 503")
		}
		return nil
	}
	e := effect("req_2", "whk_1")
	if err := f.ob.Add(ctx, e); err != nil {
		t.Fatal(err)
	}
	if res := f.pass(t); res.Failed != 1 {
		t.Fatalf("first attempt: %+v", res)
	}
	f.clk.Advance(59 * time.Second)
	if res := f.pass(t); res != (outbox.PassResult{}) {
		t.Fatalf("attempted before its wait: %+v", res)
	}
	f.clk.Advance(time.Second)
	if res := f.pass(t); res.Failed != 1 {
		t.Fatalf("second attempt: %+v", res)
	}
	f.clk.Advance(10 * time.Minute)
	if res := f.pass(t); res.Dead != 1 {
		t.Fatalf("third attempt should end it: %+v", res)
	}
	ent, err := f.ob.Get(ctx, e.ID)
	if err != nil || ent.Status != outbox.StatusDead || len(ent.Attempts) != 3 {
		t.Fatalf("dead entry %v %+v", err, ent)
	}
	for i, a := range ent.Attempts {
		if a.N != i+1 || a.Error != "endpoint answered 503" || a.Detail != "HTTP 503" {
			t.Fatalf("attempt %d: %+v", i, a)
		}
	}
	f.clk.Advance(24 * time.Hour)
	if res := f.pass(t); res != (outbox.PassResult{}) {
		t.Fatalf("a dead effect was attempted: %+v", res)
	}
	failing = false
	if _, err := f.ob.Redeliver(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	if res := f.pass(t); res.Delivered != 1 {
		t.Fatalf("after redeliver: %+v", res)
	}
	ent, _ = f.ob.Get(ctx, e.ID)
	if ent.Status != outbox.StatusDelivered || len(ent.Attempts) != 4 || ent.Attempts[3].N != 4 {
		t.Fatalf("redelivered entry %+v", ent)
	}
	// Redelivering a delivered effect delivers it again (a manual re-send).
	if _, err := f.ob.Redeliver(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	f.pass(t)
	if got := f.rec.delivered(); len(got) != 2 {
		t.Fatalf("delivered %v", got)
	}
}

func TestPermanentErrorGoesDeadAtOnce(t *testing.T) {
	f := newFixture(t, time.Minute)
	f.rec.fail = func(outbox.Effect, int) error { return outbox.Permanent(errors.New("endpoint deleted")) }
	e := effect("req_3", "")
	if err := f.ob.Add(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if res := f.pass(t); res.Dead != 1 {
		t.Fatalf("pass %+v", res)
	}
	ent, _ := f.ob.Get(context.Background(), e.ID)
	if ent.Status != outbox.StatusDead || !ent.Attempts[0].Permanent {
		t.Fatalf("entry %+v", ent)
	}
}

// TestFailureHoldsBackItsKey: when the first effect of a key fails, the later effect of the same key is not
// attempted in that pass; another key's effect is. (Across passes the later one may overtake the retried one:
// the order is kept where possible, not guaranteed.)
func TestFailureHoldsBackItsKey(t *testing.T) {
	f := newFixture(t, time.Minute)
	first, second, other := effect("a", "whk_1"), effect("b", "whk_1"), effect("c", "whk_2")
	second.Created, other.Created = t0.Add(time.Millisecond), t0.Add(2*time.Millisecond)
	f.rec.fail = func(e outbox.Effect, _ int) error {
		if e.ID == first.ID {
			return errors.New("down")
		}
		return nil
	}
	if err := f.ob.Add(context.Background(), second, first, other); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(time.Second)
	f.pass(t)
	if got := f.rec.delivered(); len(got) != 1 || got[0] != other.ID {
		t.Fatalf("delivered %v, want only the other key's effect", got)
	}
	f.rec.fail = nil
	f.clk.Advance(time.Minute)
	f.pass(t)
	if got := f.rec.delivered(); len(got) != 3 {
		t.Fatalf("delivered %v", got)
	}
}

// TestListAndRetention: entries list newest first per kind and key; after the retention the pass deletes
// delivered entries and their index keys.
func TestListAndRetention(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, b := effect("a", "whk_1"), effect("b", "whk_1")
	b.Created = t0.Add(time.Second)
	if err := f.ob.Add(ctx, a, b, effect("c", "whk_2")); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(time.Second)
	f.pass(t)
	list, next, err := f.ob.List(ctx, "test.kind", "whk_1", "", 1)
	if err != nil || len(list) != 1 || list[0].Effect.ID != b.ID || next == "" {
		t.Fatalf("page 1: %v %v %q", err, list, next)
	}
	list, _, err = f.ob.List(ctx, "test.kind", "whk_1", next, 10)
	if err != nil || len(list) != 1 || list[0].Effect.ID != a.ID {
		t.Fatalf("page 2: %v %v", err, list)
	}
	f.clk.Advance(outbox.DefaultRetention + time.Second)
	if res := f.pass(t); res.Deleted != 3 {
		t.Fatalf("retention pass: %+v", res)
	}
	if _, err := f.ob.Get(ctx, a.ID); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("get after retention: %v", err)
	}
	items, err := f.store.Scan(ctx, []byte("outbox/"), nil, 100)
	if err != nil || len(items) != 0 {
		t.Fatalf("left in the store: %v %d", err, len(items))
	}
}

// failingStore fails writes to keys with a prefix while armed: a crash between two writes, on a real store.
type failingStore struct {
	persistence.Store
	mu     sync.Mutex
	prefix string
}

func (s *failingStore) arm(prefix string) { s.mu.Lock(); s.prefix = prefix; s.mu.Unlock() }

func (s *failingStore) CompareAndSet(ctx context.Context, key []byte, expect persistence.Version, value []byte) (persistence.Version, error) {
	s.mu.Lock()
	p := s.prefix
	s.mu.Unlock()
	if p != "" && strings.HasPrefix(string(key), p) {
		return "", errors.New("injected: node died here")
	}
	return s.Store.CompareAndSet(ctx, key, expect, value)
}

// TestCutHandOverIsRepaired: a hand-over that stored the entry but died before its due key is completed by
// the repeat hand-over (the actor's record still holds the effect), and the effect is delivered once.
func TestCutHandOverIsRepaired(t *testing.T) {
	f := newFixture(t)
	fs := &failingStore{Store: f.store}
	ob := outbox.Outbox{Store: fs, Clock: f.clk}
	e := effect("req_4", "whk_1")
	fs.arm("outbox/due/")
	if err := ob.Add(context.Background(), e); err == nil {
		t.Fatal("the cut hand-over reported success")
	}
	f.pass(t)
	if len(f.rec.delivered()) != 0 {
		t.Fatal("delivered without a due key?")
	}
	fs.arm("")
	if err := ob.Add(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	f.pass(t)
	if got := f.rec.delivered(); len(got) != 1 {
		t.Fatalf("delivered %v", got)
	}
}

func TestUnknownKindUsesDefaultScheduleThenDies(t *testing.T) {
	f := newFixture(t)
	e := outbox.Effect{ID: "evt_x", Kind: "nobody.handles", Created: t0}
	if err := f.ob.Add(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	for range len(outbox.DefaultSchedule) + 1 {
		f.pass(t)
		f.clk.Advance(24 * time.Hour)
	}
	ent, _ := f.ob.Get(context.Background(), e.ID)
	if ent.Status != outbox.StatusDead || len(ent.Attempts) != len(outbox.DefaultSchedule)+1 || !strings.Contains(ent.Attempts[0].Error, "no handler") {
		t.Fatalf("entry %+v", ent)
	}
}

func TestValidate(t *testing.T) {
	bad := []outbox.Effect{
		{ID: "", Kind: "k", Created: t0},
		{ID: "a/b", Kind: "k", Created: t0},
		{ID: "a", Kind: "", Created: t0},
		{ID: "a", Kind: "k", Key: "x/y", Created: t0},
		{ID: "a", Kind: "k"},
		{ID: "a", Kind: "k", Created: t0, Payload: make([]byte, outbox.MaxPayload+1)},
	}
	for _, e := range bad {
		if e.Validate() == nil {
			t.Errorf("accepted %+v", e.ID)
		}
	}
	reg := outbox.NewRegistry()
	reg.MustRegister("k", outbox.Handler{Deliver: func(context.Context, outbox.Effect, int) error { return nil }})
	if reg.Register("k", outbox.Handler{Deliver: func(context.Context, outbox.Effect, int) error { return nil }}) == nil {
		t.Error("kind registered twice")
	}
}

// BenchmarkHandOverAndDeliver measures the outbox on Pebble: b.N effects handed over, then delivered by as
// many passes as it takes (a no-op handler), so the figure is the storage cost per effect.
func BenchmarkHandOverAndDeliver(b *testing.B) {
	st, err := pebblestore.Open(b.TempDir(), zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	clk := clock.NewManual(t0)
	ob := outbox.Outbox{Store: st, Clock: clk}
	reg := outbox.NewRegistry()
	var n int
	reg.MustRegister("bench", outbox.Handler{Deliver: func(context.Context, outbox.Effect, int) error { n++; return nil }})
	d := outbox.Deliverer{Outbox: ob, Registry: reg, Logger: zerolog.Nop()}
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		e := outbox.Effect{ID: outbox.EffectID("evt_", "bench", string(rune(i)), time.Duration(i).String()), Kind: "bench",
			Key: "k" + string(rune('a'+i%8)), Payload: make([]byte, 512), Created: t0}
		if err := ob.Add(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
	for n < b.N {
		if _, err := d.Pass(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// TestListKindsMerges: entries of several kinds with one key list as one sequence, newest first, paged with
// the positions ListKinds returns; every entry comes exactly once and other keys stay out.
func TestListKindsMerges(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var want []string // newest first
	for i := range 7 {
		e := effect(string(rune('a'+i)), "whk_1")
		e.Kind = []string{"test.kind", "other.kind", "third.kind"}[i%3]
		e.Created = t0.Add(time.Duration(i) * time.Second)
		if err := f.ob.Add(ctx, e); err != nil {
			t.Fatal(err)
		}
		want = append([]string{e.ID}, want...)
	}
	stranger := effect("z", "whk_2")
	stranger.Created = t0.Add(time.Hour)
	if err := f.ob.Add(ctx, stranger); err != nil {
		t.Fatal(err)
	}
	kinds := []string{"test.kind", "other.kind", "third.kind"}
	var got []string
	pos := ""
	for page := 0; ; page++ {
		list, next, err := f.ob.ListKinds(ctx, kinds, "whk_1", pos, 3)
		if err != nil || len(list) > 3 || page > 5 {
			t.Fatalf("page %d: %v %d entries", page, err, len(list))
		}
		for _, e := range list {
			got = append(got, e.Effect.ID)
		}
		if next == "" {
			break
		}
		pos = next
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("merged listing %v, want %v", got, want)
	}
}
