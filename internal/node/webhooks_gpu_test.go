package node_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"filigrane/gpu"
	"filigrane/internal/node"
)

// TestAcceleratorReadyAfterStart (spec 4.5/6): a wake call naming an endpoint while the GPU is starting
// answers `starting` and sends nothing yet; once the GPU is ready (30 s on the test's clock) the call's
// accelerator.ready arrives, with ready_at the moment it became ready. A wake call that finds it ready sends
// its own event at once. Both are listed in the endpoint's delivery log (request_id null).
func TestAcceleratorReadyAfterStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *node.Config) {
		c.AllowPrivateTargets = true
		c.GPUState = gpu.NewTracker(gpu.NewState(true, 30*time.Second))
	})
	rc := &hookReceiver{stop: make(chan struct{})}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	defer close(rc.stop)
	ctx := context.Background()
	key := f.dev.Secret // the development organization's plan includes the GPU

	r := jsonCall(t, "POST", f.base+"/webhooks", key, map[string]any{"url": srv.URL + "/hook"})
	if r.status != 201 {
		t.Fatalf("create endpoint: %d %s", r.status, r.body)
	}
	id := decodeJSONField(t, r.body, "id")
	woke := f.clk.Now()
	w := call(t, "POST", f.base+"/accelerators/gpu/wake", key, strings.NewReader(`{"webhook_id":"`+id+`"}`))
	if w.status != 200 || !strings.Contains(string(w.body), `"status":"starting"`) {
		t.Fatalf("wake: %d %s", w.status, w.body)
	}
	if _, _, err := f.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if rc.count() != 0 {
		t.Fatalf("an event while the GPU starts: %q", rc.bodies)
	}
	f.clk.Advance(30 * time.Second)
	if s := call(t, "GET", f.base+"/accelerators/gpu", key, nil); !strings.Contains(string(s.body), `"status":"ready"`) {
		t.Fatalf("status after 30 s: %s", s.body)
	}
	if _, _, err := f.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if rc.count() != 1 {
		t.Fatalf("receiver saw %d events once ready, want 1", rc.count())
	}
	if r := call(t, "POST", f.base+"/accelerators/gpu/wake", key, strings.NewReader(`{"webhook_id":"`+id+`"}`)); r.status != 200 ||
		!strings.Contains(string(r.body), `"status":"ready"`) {
		t.Fatalf("wake when ready: %d %s", r.status, r.body)
	}
	if _, _, err := f.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if rc.count() != 2 {
		t.Fatalf("receiver saw %d events, want 2", rc.count())
	}
	var evs [2]struct {
		ID, Type string
		Data     struct {
			ID      string  `json:"id"`
			Status  string  `json:"status"`
			ReadyAt *string `json:"ready_at"`
		}
	}
	for i := range evs {
		if err := json.Unmarshal(rc.bodies[i], &evs[i]); err != nil {
			t.Fatal(err)
		}
		if evs[i].Type != "accelerator.ready" || evs[i].Data.Status != "ready" || !strings.HasPrefix(evs[i].Data.ID, "wake_") || evs[i].Data.ReadyAt == nil {
			t.Fatalf("event %d: %s", i, rc.bodies[i])
		}
	}
	if want := woke.Add(30 * time.Second).UTC().Format(time.RFC3339); *evs[0].Data.ReadyAt != want || evs[0].ID == evs[1].ID {
		t.Fatalf("first event ready_at %s, want %s; ids %s %s", *evs[0].Data.ReadyAt, want, evs[0].ID, evs[1].ID)
	}
	dl := call(t, "GET", f.base+"/webhooks/"+id+"/deliveries", key, nil)
	if dl.status != 200 || strings.Count(string(dl.body), `"request_id":null`) != 2 || !strings.Contains(string(dl.body), evs[0].ID) ||
		!strings.Contains(string(dl.body), evs[1].ID) {
		t.Fatalf("delivery log: %d %s", dl.status, dl.body)
	}
}
