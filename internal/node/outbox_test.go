package node_test

import (
	"context"
	"testing"
	"time"

	"filigrane/actors/outbox"
	"filigrane/actors/sweep"
	"filigrane/internal/clock"
	"filigrane/internal/node"
)

// TestOutboxSurvivesRestartAndBackgroundSweepDelivers: an effect handed to the outbox of a node that stops
// before delivering it (no handler for its kind there) is delivered by the next start's background sweeper,
// which holds the sweeper lease while it runs and gives it back on Close.
func TestOutboxSurvivesRestartAndBackgroundSweepDelivers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	ctx := context.Background()
	e := outbox.Effect{ID: outbox.EffectID("evt_", "restart-test"), Kind: "test.node", Key: "k1", Payload: []byte("hello"), Created: clk.Now()}

	n := startNode(t, dir, clk)
	ob, _ := n.Outbox()
	if err := ob.Add(ctx, e); err != nil {
		t.Fatal(err)
	}
	stopNode(t, n)

	got := make(chan outbox.Effect, 4)
	n = startNode(t, dir, clk, func(c *node.Config) { c.SweepInterval = time.Millisecond })
	ob, reg := n.Outbox()
	reg.MustRegister("test.node", outbox.Handler{Deliver: func(_ context.Context, e outbox.Effect, _ int) error {
		got <- e
		return nil
	}})
	// The background sweeper may have tried the effect before the handler was registered ("no handler" on this
	// node, retried a minute later): a minute on, it is due either way.
	clk.Advance(time.Minute)
	select {
	case d := <-got:
		if d.ID != e.ID || string(d.Payload) != "hello" {
			t.Fatalf("delivered %+v", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the background sweeper did not deliver the effect")
	}
	if _, err := n.Store().Get(ctx, []byte(sweep.LeaseKey)); err != nil {
		t.Fatalf("no sweeper lease while sweeping: %v", err)
	}
	stopNode(t, n)

	n = startNode(t, dir, clk)
	defer stopNode(t, n)
	if _, err := n.Store().Get(ctx, []byte(sweep.LeaseKey)); err == nil {
		t.Fatal("the sweeper lease outlived Close")
	}
	ob, _ = n.Outbox()
	ent, err := ob.Get(ctx, e.ID)
	if err != nil || ent.Status != outbox.StatusDelivered || len(ent.Attempts) == 0 {
		t.Fatalf("entry after delivery: %v %+v", err, ent)
	}
}
