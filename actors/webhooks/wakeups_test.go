package webhooks

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors/outbox"
	"filigrane/gpu"
	"filigrane/internal/clock"
	"filigrane/internal/egress"
	"filigrane/internal/whsign"
)

type openedContext struct{}

func (openedContext) Destroy() error { return nil }

// TestAcceleratorReadyWhenDeviceOpens: a wake-up call that named an endpoint while the GPU was starting gets
// its accelerator.ready event when the device's context opens (gpu.Fleet.OnReady, as the node wires it),
// not before: ready_at is the moment it opened. The event goes through the outbox (delivered, signed,
// listed with the endpoint's deliveries); a call older than MaxWakeWait gets none.
func TestAcceleratorReadyWhenDeviceOpens(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	store := openStore(t)
	rc := &receiver{release: make(chan struct{})}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	defer close(rc.release)
	eps := Endpoints{Store: store, Clock: clk}
	ep, err := eps.Create(ctx, "org_a", Spec{URL: srv.URL + "/in"})
	if err != nil {
		t.Fatal(err)
	}
	ob := outbox.Outbox{Store: store, Clock: clk}
	reg := outbox.NewRegistry()
	RegisterHandlers(reg, store, &Deliverer{Endpoints: eps, Sender: NewSender(&egress.Guard{AllowPrivate: true}, time.Second), Clock: clk})
	pass := func() outbox.PassResult {
		t.Helper()
		res, err := outbox.Deliverer{Outbox: ob, Registry: reg, Logger: zerolog.Nop()}.Pass(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	gate := make(chan struct{})
	fleet := gpu.NewFleet(1, 2*time.Second, clk, func(ctx context.Context, _ int) (gpu.DeviceContext, error) {
		select {
		case <-gate:
			return openedContext{}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	defer fleet.Close()
	wakeups := &Wakeups{Outbox: ob}
	handed := make(chan error, 1)
	fleet.OnReady(func(st gpu.State) { handed <- wakeups.Ready(ctx, st.ReadyAt, st.WarmUntil, clk.Now()) })

	wakeups.Add("org_a", ep.ID, "wake_old", clk.Now().Add(-MaxWakeWait-time.Minute))
	if st := fleet.Wake(clk.Now()); st.Status != gpu.StatusStarting {
		t.Fatalf("wake: %s", st.Status)
	}
	wakeups.Add("org_a", ep.ID, "wake_1", clk.Now())
	clk.Advance(5 * time.Second)
	if res := pass(); res.Delivered != 0 || rc.count() != 0 {
		t.Fatalf("an event before the GPU was ready: %+v, %d requests", res, rc.count())
	}
	opened := clk.Now()
	gate <- struct{}{}
	if err := <-handed; err != nil {
		t.Fatal(err)
	}
	if wakeups.Pending() != 0 {
		t.Fatalf("%d calls still wait", wakeups.Pending())
	}
	if res := pass(); res.Delivered != 1 || rc.count() != 1 {
		t.Fatalf("after the open: %+v, %d requests (want one event: the old call gets none)", res, rc.count())
	}
	hdr, body := rc.at(0)
	if whsign.VerifyStandard(ep.Secret, hdr.Get, body, clk.Now()) != nil || whsign.VerifyEtchv(ep.Secret, hdr.Get, body, clk.Now()) != nil {
		t.Fatalf("not signed: %v", hdr)
	}
	var ev struct {
		ID, Type string
		Data     AcceleratorReady
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatal(err)
	}
	want := opened.UTC().Format(time.RFC3339)
	warm := opened.Add(gpu.WarmFor).UTC().Format(time.RFC3339)
	if ev.Type != EventAcceleratorReady || ev.ID != EventID("wake_1", EventAcceleratorReady) || ev.Data.ID != "wake_1" ||
		ev.Data.Status != "ready" || ev.Data.ReadyAt == nil || *ev.Data.ReadyAt != want || ev.Data.WarmUntil == nil || *ev.Data.WarmUntil != warm {
		t.Fatalf("event %s (ready at %s, warm until %s)", body, want, warm)
	}
	ents, _, err := ob.ListKinds(ctx, Kinds(), ep.ID, "", 10)
	if err != nil || len(ents) != 1 || ents[0].Status != outbox.StatusDelivered {
		t.Fatalf("delivery log: %v %+v", err, ents)
	}
	if b, err := Build(ctx, store, ents[0].Effect); err != nil || b.EventID != ev.ID || string(b.Envelope.Event) != string(body) {
		t.Fatalf("the log's event differs from the one sent: %v", err)
	}
}
