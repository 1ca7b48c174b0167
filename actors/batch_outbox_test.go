package actors_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/actors/batchstate"
	"filigrane/actors/jobstate"
	"filigrane/actors/outbox"
	"filigrane/internal/clock"
	"filigrane/persistence"
)

// batchCaller adds batch actors to localCaller, spawned with env (nil: an hourly pulse, default slots).
type batchCaller struct {
	*localCaller
	env *actors.BatchEnv
}

func (c batchCaller) Request(ctx context.Context, identity, kind string, msg any) (any, error) {
	if kind != actors.KindBatch {
		return c.localCaller.Request(ctx, identity, kind, msg)
	}
	env := c.env
	if env == nil {
		env = &actors.BatchEnv{Pulse: time.Hour}
	}
	pid, err := c.system.Root.SpawnNamed(actors.BatchProps(c.deps, env), kind+"_"+identity)
	if err != nil && !errors.Is(err, actor.ErrNameExists) {
		return nil, err
	}
	return c.system.Root.RequestFuture(pid, msg, 5*time.Second).Result()
}

func (c batchCaller) batch(t *testing.T, id string, msg any) *actors.BatchReply {
	t.Helper()
	return askBatch(t, c, id, msg)
}

// askBatch sends msg to batch id through c and fails the test unless the reply is an ok BatchReply.
func askBatch(t *testing.T, c actors.Caller, id string, msg any) *actors.BatchReply {
	t.Helper()
	v, err := c.Request(context.Background(), id, actors.KindBatch, msg)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := v.(*actors.BatchReply)
	if !ok || r.Code != "" && r.Code != actors.ReplyOK {
		t.Fatalf("reply %T %+v", v, v)
	}
	return r
}

// endBatch creates an uploads batch of two files naming webhook (none when empty) and starts it before any
// file arrived: both items are rejected and the batch ends failed with its event, in the drive after the
// start. The Get queued behind the start answers once that drive is over.
func endBatch(t *testing.T, c batchCaller, orgID, idem, webhook string) *batchstate.Record {
	t.Helper()
	id := batchstate.BatchIDFor(orgID, idem)
	item := batchstate.ItemSpec{Filename: "a.png", Size: 100, Media: jobstate.MediaImage, WatermarkID: strings.Repeat("c", 64)}
	item2 := item
	item2.Filename = "b.png"
	spec := batchstate.Spec{BatchID: id, OrgID: orgID, Source: batchstate.SourceUploads, Accelerator: jobstate.AcceleratorCPU,
		WebhookID: webhook, IdempotencyKey: idem, Items: []batchstate.ItemSpec{item, item2}}
	c.batch(t, id, &actors.BatchCreate{Spec: spec})
	c.batch(t, id, &actors.BatchStart{BatchID: id, OrgID: orgID})
	rec := c.batch(t, id, &actors.BatchGet{BatchID: id, OrgID: orgID}).Record
	if rec.Status != batchstate.StatusFailed || len(rec.Events) != 1 || rec.Events[0].Type != batchstate.EventFailed {
		t.Fatalf("batch after start: %s %+v", rec.Status, rec.Events)
	}
	return rec
}

// TestBatchEventSurvivesCrash: a batch that names a webhook ends; its node dies after the record with the
// event was committed and before the event reached the outbox. The batch stays in the active index, the
// sweeper's tick on another node hands the event over, the outbox pass delivers it once, and further ticks
// and passes deliver nothing again. A batch without webhook settles its event without any effect.
func TestBatchEventSurvivesCrash(t *testing.T) {
	ctx := context.Background()
	store := tempStore(t)
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	orgID := "org_" + strings.Repeat("1", 32)
	webhookID := "wh_" + strings.Repeat("e", 32)

	// Node 1: the outbox is unreachable from the moment the batch starts.
	sys1, lc1 := startSystem(t, store, outboxDown(store), clk)
	c1 := batchCaller{localCaller: lc1}
	lc1.deps.Caller.Set(c1)
	rec := endBatch(t, c1, orgID, "crash-key-1", webhookID)
	if rec.Events[0].Delivered {
		t.Fatalf("event marked handed over through a dead outbox: %+v", rec.Events)
	}
	sys1.Shutdown() // the node dies
	if _, err := store.Get(ctx, []byte("batches/active/"+rec.BatchID)); err != nil {
		t.Fatalf("the batch left the active index with its event unsent: %v", err)
	}
	ob := outbox.Outbox{Store: store, Clock: clk}
	if _, err := ob.Get(ctx, rec.Events[0].ID); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("the event reached the outbox through a dead store? %v", err)
	}

	// Node 2 takes over: the sweeper ticks the batch, the outbox pass delivers.
	sys2, lc2 := startSystem(t, store, store, clk)
	t.Cleanup(sys2.Shutdown)
	c2 := batchCaller{localCaller: lc2}
	lc2.deps.Caller.Set(c2)
	var mu sync.Mutex
	var got []outbox.Effect
	reg := outbox.NewRegistry()
	reg.MustRegister(actors.OutboxBatchWebhook, outbox.Handler{Deliver: func(_ context.Context, e outbox.Effect, _ int) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e)
		return nil
	}})
	sweeper := actors.Sweeper{Store: store, Caller: c2, Clock: clk, Logger: zerolog.Nop()}
	deliver := outbox.Deliverer{Outbox: ob, Registry: reg, Logger: zerolog.Nop()}
	for range 2 {
		if err := sweeper.TickBatches(ctx); err != nil {
			t.Fatal(err)
		}
		// The tick's reply comes before the hand-over; a read queued behind it waits for it.
		c2.batch(t, rec.BatchID, &actors.BatchGet{BatchID: rec.BatchID, OrgID: orgID})
		if _, err := deliver.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Hour)
	}
	after := c2.batch(t, rec.BatchID, &actors.BatchGet{BatchID: rec.BatchID, OrgID: orgID}).Record
	if len(after.Events) != 1 || !after.Events[0].Delivered {
		t.Fatalf("record after the hand-over: %+v", after.Events)
	}
	if _, err := store.Get(ctx, []byte("batches/active/"+rec.BatchID)); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("active index after the hand-over: %v", err)
	}

	// Without webhook: settled at once, nothing in the outbox, not kept in the active index.
	plain := endBatch(t, c2, orgID, "plain-key-1", "")
	if !plain.Events[0].Delivered {
		t.Fatalf("event of a batch without webhook left pending: %+v", plain.Events)
	}
	if _, err := ob.Get(ctx, plain.Events[0].ID); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("a batch without webhook made an effect: %v", err)
	}
	if _, err := store.Get(ctx, []byte("batches/active/"+plain.BatchID)); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("active index of a settled batch: %v", err)
	}
	if _, err := deliver.Pass(ctx); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].ID != rec.Events[0].ID || string(got[0].Payload) != rec.BatchID || got[0].Key != webhookID ||
		got[0].Kind != actors.OutboxBatchWebhook {
		t.Fatalf("delivered %+v", got)
	}
}
