package webhooks

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"filigrane/actors/outbox"
	"filigrane/internal/clock"
	"filigrane/internal/egress"
	"filigrane/internal/whsign"
)

// TestAcceleratorReadyDelivery: the accelerator.ready effect of a wake-up call, delivered by the envelope
// handler, posts one signed accelerator.ready event carrying the wake-up id and the accelerator's times; the
// effect id is derived from the wake-up id (a repeated hand-over is one effect), and a payload that is no
// envelope is a permanent failure.
func TestAcceleratorReadyDelivery(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	rc := &receiver{release: make(chan struct{})}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	defer close(rc.release)
	eps := Endpoints{Store: openStore(t), Clock: clk}
	ep, err := eps.Create(ctx, "org_a", Spec{URL: srv.URL + "/in"})
	if err != nil {
		t.Fatal(err)
	}
	d := &Deliverer{Endpoints: eps, Sender: NewSender(&egress.Guard{AllowPrivate: true}, time.Second), Clock: clk}
	ready, warm := "2026-06-01T10:00:00Z", "2026-06-01T10:15:00Z"
	data := AcceleratorReady{ID: "wake_1", Accelerator: "gpu", Status: "ready", ReadyAt: &ready, WarmUntil: &warm}
	e, err := AcceleratorReadyEffect("org_a", ep.ID, data, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	again, _ := AcceleratorReadyEffect("org_a", ep.ID, data, clk.Now())
	if e.ID != again.ID || e.Kind != EffectKind || e.Key != ep.ID || e.Validate() != nil {
		t.Fatalf("effect %+v / %+v", e, again)
	}
	h := Handler(openStore(t), d)
	if err := h.Deliver(ctx, e, 1); err != nil {
		t.Fatal(err)
	}
	if rc.count() != 1 {
		t.Fatalf("receiver got %d requests", rc.count())
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
	if ev.Type != EventAcceleratorReady || ev.ID != EventID("wake_1", EventAcceleratorReady) || ev.Data.ID != "wake_1" ||
		ev.Data.Status != "ready" || ev.Data.WarmUntil == nil || *ev.Data.WarmUntil != warm || hdr.Get("X-Etchv-Event-ID") != ev.ID {
		t.Fatalf("event %s", body)
	}
	bad := e
	bad.Payload = []byte("{}")
	if err := h.Deliver(ctx, bad, 1); !outbox.IsPermanent(err) {
		t.Fatalf("bad payload: %v", err)
	}
}
