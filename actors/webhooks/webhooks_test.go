package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"filigrane/actors/jobstate"
	"filigrane/internal/clock"
	"filigrane/internal/egress"
	"filigrane/internal/whsign"
	"filigrane/persistence"
	"filigrane/persistence/pebblestore"
)

var t0 = time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)

func openStore(t *testing.T) persistence.Store {
	t.Helper()
	store, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// TestEndpointLifecycle: create (enabled, whsec_ secret, wh_ id), at most ten per organization, update,
// disable (no longer usable), delete; other organizations see nothing.
func TestEndpointLifecycle(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(t0)
	eps := Endpoints{Store: openStore(t), Clock: clk}
	first, err := eps.Create(ctx, "org_a", Spec{URL: "https://hooks.example.com/a", Description: "main", Events: []string{EventEmbedSucceeded, EventEmbedSucceeded}})
	if err != nil {
		t.Fatal(err)
	}
	if !ValidID(first.ID) || !first.Enabled || !strings.HasPrefix(first.Secret, "whsec_") || len(first.Events) != 1 {
		t.Fatalf("created %+v", first)
	}
	for _, bad := range []Spec{{URL: "ftp://x.example/"}, {URL: "https://u:p@x.example/"}, {URL: "https://x.example/", Events: []string{"nope"}},
		{URL: "https://x.example/", Description: strings.Repeat("d", MaxDescription+1)}} {
		if _, err := eps.Create(ctx, "org_a", bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("Create(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	for i := 1; i < MaxEndpoints; i++ {
		if _, err := eps.Create(ctx, "org_a", Spec{URL: "https://hooks.example.com/n"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := eps.Create(ctx, "org_a", Spec{URL: "https://hooks.example.com/11"}); !errors.Is(err, ErrLimit) {
		t.Fatalf("11th endpoint: %v, want ErrLimit", err)
	}
	if _, err := eps.Create(ctx, "org_b", Spec{URL: "https://hooks.example.com/b"}); err != nil {
		t.Fatalf("another organization's first endpoint: %v", err)
	}
	if _, err := eps.Get(ctx, "org_b", first.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other organization reads the endpoint: %v", err)
	}
	if _, err := eps.Usable(ctx, "org_a", first.ID); err != nil {
		t.Fatal(err)
	}
	off, url := false, "https://hooks.example.com/moved"
	clk.Advance(time.Minute)
	up, err := eps.Update(ctx, "org_a", first.ID, Patch{Enabled: &off, URL: &url})
	if err != nil || up.Enabled || up.URL != url || !up.UpdatedAt.Equal(t0.Add(time.Minute)) || up.Secret != first.Secret {
		t.Fatalf("update: %+v %v", up, err)
	}
	if _, err := eps.Usable(ctx, "org_a", first.ID); !errors.Is(err, ErrDisabled) {
		t.Fatalf("disabled endpoint usable: %v", err)
	}
	if _, err := eps.Usable(ctx, "org_a", "wh_nothex"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("malformed id usable: %v", err)
	}
	if err := eps.Delete(ctx, "org_a", first.ID); err != nil {
		t.Fatal(err)
	}
	if err := eps.Delete(ctx, "org_a", first.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := eps.Create(ctx, "org_a", Spec{URL: "https://hooks.example.com/10"}); err != nil {
		t.Fatalf("a deleted endpoint frees its place: %v", err)
	}
}

// TestRotationOverlap: after a rotation both secrets sign for 24 hours, then only the new one.
func TestRotationOverlap(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(t0)
	eps := Endpoints{Store: openStore(t), Clock: clk}
	ep, err := eps.Create(ctx, "org_a", Spec{URL: "https://hooks.example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	rot, err := eps.Rotate(ctx, "org_a", ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rot.Secret == ep.Secret || !strings.HasPrefix(rot.Secret, "whsec_") {
		t.Fatalf("rotation kept the secret: %+v", rot)
	}
	got, _ := eps.Get(ctx, "org_a", ep.ID)
	if s := got.Secrets(clk.Now().Add(RotationOverlap - time.Second)); len(s) != 2 || s[0] != rot.Secret || s[1] != ep.Secret {
		t.Fatalf("within the overlap: %v", s)
	}
	if s := got.Secrets(clk.Now().Add(RotationOverlap)); len(s) != 1 || s[0] != rot.Secret {
		t.Fatalf("after the overlap: %v", s)
	}
}

func succeededEmbed() *jobstate.Record {
	return &jobstate.Record{RequestID: "req_" + strings.Repeat("1", 64), OrgID: "org_a", Status: jobstate.StatusSucceeded,
		Operation: jobstate.OperationEmbed, Media: "image", Format: "PNG", AcceleratorRequested: "cpu",
		WebhookID: "wh_" + strings.Repeat("2", 32), WatermarkID: strings.Repeat("ab", 32), CompletedAt: t0,
		ResultExpiresAt: t0.Add(24 * time.Hour), Attempts: 1,
		Output: &jobstate.Output{AssetID: "ast_1", SourceAssetID: "ast_0", Charge: 1, Accelerator: "cpu", WatermarkID: strings.Repeat("ab", 32)}}
}

// TestEventShapes: ids derive from the cause (a rebuild gives the same id and bytes), every event carries id,
// type, api_version and created_at; job events carry the receipt and watermark id, detection events the result.
func TestEventShapes(t *testing.T) {
	rec := succeededEmbed()
	ev, err := JobEvent(rec)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := JobEvent(rec)
	b1, _ := json.Marshal(ev)
	b2, _ := json.Marshal(again)
	if string(b1) != string(b2) || !ValidEventID(ev.ID) || ev.Type != EventEmbedSucceeded {
		t.Fatalf("event %s not stable or malformed", b1)
	}
	var body map[string]any
	_ = json.Unmarshal(b1, &body)
	data := body["data"].(map[string]any)
	if body["api_version"] != APIVersion || body["created_at"] != "2026-11-25T08:00:00Z" || data["request_id"] != rec.RequestID ||
		data["watermark_id"] != rec.WatermarkID || data["status"] != "succeeded" || data["asset_id"] != "ast_1" || data["webhook_id"] != rec.WebhookID {
		t.Fatalf("embed event body %s", b1)
	}
	failed := *rec
	failed.Status, failed.Output, failed.ErrorCode = jobstate.StatusFailed, nil, "invalid_image"
	fev, _ := JobEvent(&failed)
	if fev.Type != EventEmbedFailed || fev.ID == ev.ID || !strings.Contains(string(fev.Data), `"error_code":"invalid_image"`) {
		t.Fatalf("failed embed event %+v %s", fev, fev.Data)
	}
	det := *rec
	det.Operation, det.WatermarkID = jobstate.OperationDetect, ""
	det.Output = &jobstate.Output{Accelerator: "cpu", Charge: 1,
		Detection: `{"watermarked":true,"confidence":0.97,"watermark_id":"` + strings.Repeat("cd", 32) + `","units":[],"units_total":0}`}
	dev, err := JobEvent(&det)
	if err != nil || dev.Type != EventDetectSucceeded || !strings.Contains(string(dev.Data), `"result":{"watermarked":true`) ||
		!strings.Contains(string(dev.Data), `"watermark_id":"`+strings.Repeat("cd", 32)) {
		t.Fatalf("detect event %s %v", dev.Data, err)
	}
	running := *rec
	running.Status = jobstate.StatusRunning
	if _, err := JobEvent(&running); err == nil {
		t.Fatal("an active job has no final event")
	}
	bev, err := BatchEvent("bat_1", "completed", t0, map[string]any{"batch_id": "bat_1", "counts": map[string]int{"succeeded": 2}})
	if err != nil || bev.Type != EventBatchCompleted || bev.ID != EventID("bat_1", EventBatchCompleted) {
		t.Fatalf("batch event %+v %v", bev, err)
	}
	if _, err := BatchEvent("bat_1", "processing", t0, nil); err == nil {
		t.Fatal("a batch event for a non-final status")
	}
	r := "2026-11-25T08:00:00Z"
	aev, _ := AcceleratorReadyEvent(AcceleratorReady{ID: "gpw_1", Accelerator: "gpu", Status: "ready", ReadyAt: &r, WarmUntil: &r}, t0)
	if aev.Type != EventAcceleratorReady || !strings.Contains(string(aev.Data), `"status":"ready"`) {
		t.Fatalf("accelerator event %s", aev.Data)
	}
}

// receiver is a test webhook receiver that answers from a script, one status per request (0: hang until the
// client gives up), and records what it got.
type receiver struct {
	mu      sync.Mutex
	script  []int
	got     []http.Header
	bodies  [][]byte
	release chan struct{}
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.got = append(r.got, req.Header.Clone())
	r.bodies = append(r.bodies, body)
	status := 200
	if len(r.script) > 0 {
		status, r.script = r.script[0], r.script[1:]
	}
	r.mu.Unlock()
	switch status {
	case 0:
		select {
		case <-req.Context().Done():
		case <-r.release:
		}
		return
	case 302:
		w.Header().Set("Location", "http://169.254.169.254/latest/meta-data/")
	}
	w.WriteHeader(status)
	// A long answer: the sender reads at most 64 KB of it.
	_, _ = w.Write([]byte(strings.Repeat("x", 1<<20)))
}

// TestSenderOutcomes: 2xx succeeds with verifiable signatures and the job's request id; 500 and a redirect
// fail (the redirect is not followed); a receiver that does not answer fails at the timeout; a target in a
// refused range is refused before any connection.
func TestSenderOutcomes(t *testing.T) {
	rc := &receiver{script: []int{204, 500, 302, 0}, release: make(chan struct{})}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	defer close(rc.release)
	// Answering receivers get a generous timeout (the machine may be loaded); the hanging one a short one.
	s := NewSender(&egress.Guard{AllowPrivate: true}, 10*time.Second)
	short := NewSender(&egress.Guard{AllowPrivate: true}, 300*time.Millisecond)
	secret, _ := whsign.NewSecret()
	body := []byte(`{"id":"evt_x","type":"watermark.embed.succeeded"}`)
	now := time.Now()
	ctx := context.Background()
	att, err := s.Post(ctx, srv.URL+"/hook", []string{secret}, "evt_x", "req_1", body, now)
	if err != nil || att.StatusCode != 204 {
		t.Fatalf("204: %+v %v", att, err)
	}
	h, first := rc.at(0)
	if whsign.VerifyEtchv(secret, h.Get, first, now) != nil || whsign.VerifyStandard(secret, h.Get, first, now) != nil ||
		h.Get("X-Request-ID") != "req_1" || h.Get("Content-Type") != "application/json" || h.Get("X-Etchv-Event-ID") != "evt_x" {
		t.Fatalf("headers %v", h)
	}
	if att, err := s.Post(ctx, srv.URL, []string{secret}, "evt_x", "", body, now); !errors.Is(err, ErrStatus) || att.StatusCode != 500 {
		t.Fatalf("500: %+v %v", att, err)
	}
	if att, err := s.Post(ctx, srv.URL, []string{secret}, "evt_x", "", body, now); !errors.Is(err, ErrStatus) || att.StatusCode != 302 {
		t.Fatalf("302: %+v %v", att, err)
	}
	started := time.Now()
	if att, err := short.Post(ctx, srv.URL, []string{secret}, "evt_x", "", body, now); err == nil || att.StatusCode != 0 || time.Since(started) > 5*time.Second {
		t.Fatalf("hanging receiver: %+v %v after %s", att, err, time.Since(started))
	}
	if n := rc.count(); n != 4 {
		t.Fatalf("receiver saw %d requests, want 4 (the redirect must not be followed)", n)
	}
	strict := NewSender(&egress.Guard{}, time.Second)
	if _, err := strict.Post(ctx, srv.URL, []string{secret}, "evt_x", "", body, now); !errors.Is(err, egress.ErrRefused) {
		t.Fatalf("loopback receiver without the operator option: %v", err)
	}
	if rc.count() != 4 {
		t.Fatal("a refused target was connected to")
	}
}

// TestDelivererEndpointState: a disabled or deleted endpoint cancels the delivery; metrics count outcomes.
func TestDelivererEndpointState(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewManual(time.Now())
	rc := &receiver{release: make(chan struct{})}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	defer close(rc.release)
	eps := Endpoints{Store: openStore(t), Clock: clk}
	ep, err := eps.Create(ctx, "org_a", Spec{URL: srv.URL + "/in"})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	d := &Deliverer{Endpoints: eps, Sender: NewSender(&egress.Guard{AllowPrivate: true}, time.Second), Clock: clk, Metrics: NewMetrics(reg)}
	ev, _ := JobEvent(succeededEmbed())
	env, payload, err := NewEnvelope("org_a", ep.ID, "req_1", ev)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := DecodeEnvelope(payload); err != nil || string(back.Event) != string(env.Event) {
		t.Fatalf("envelope round trip: %v", err)
	}
	if _, err := d.Deliver(ctx, env, ev.ID, clk.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	off := false
	_, _ = eps.Update(ctx, "org_a", ep.ID, Patch{Enabled: &off})
	if _, err := d.Deliver(ctx, env, ev.ID, clk.Now()); !errors.Is(err, ErrCancelled) {
		t.Fatalf("disabled: %v", err)
	}
	_ = eps.Delete(ctx, "org_a", ep.ID)
	if _, err := d.Deliver(ctx, env, ev.ID, clk.Now()); !errors.Is(err, ErrCancelled) {
		t.Fatalf("deleted: %v", err)
	}
	if got := counter(t, d.Metrics.deliveries.WithLabelValues("delivered")); got != 1 {
		t.Fatalf("delivered count %v", got)
	}
	if got := counter(t, d.Metrics.deliveries.WithLabelValues("cancelled")); got != 2 {
		t.Fatalf("cancelled count %v", got)
	}
	if rc.count() != 1 {
		t.Fatalf("receiver got %d requests, want 1", rc.count())
	}
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func (r *receiver) at(i int) (http.Header, []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[i], r.bodies[i]
}
