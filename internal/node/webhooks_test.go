package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"filigrane/actors/webhooks"
	"filigrane/internal/node"
	"filigrane/internal/recordtest"
	"filigrane/internal/whsign"
)

// hookReceiver answers from a script: a status per request, 0 = never answer (the sender times out).
type hookReceiver struct {
	mu      sync.Mutex
	script  []int
	headers []http.Header
	bodies  [][]byte
	stop    chan struct{}
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.headers, h.bodies = append(h.headers, r.Header.Clone()), append(h.bodies, b)
	st := 200
	if len(h.script) > 0 {
		st, h.script = h.script[0], h.script[1:]
	}
	h.mu.Unlock()
	if st == 0 {
		select {
		case <-r.Context().Done():
		case <-h.stop:
		}
		return
	}
	w.WriteHeader(st)
}

func (h *hookReceiver) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.bodies)
}

func jsonCall(t *testing.T, method, url, key string, body any) response {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	return call(t, method, url, key, r)
}

// TestWebhookDeliveryRetriesUntilSuccess: an endpoint is created (secret shown once), an async embed names
// it, and its final event reaches a receiver that answers 500, then does not answer (the node's attempt
// timeout, set to 1 s as --webhook-timeout would), then 200, on the retry schedule (manual clock): the same
// event id and body every time, each attempt signed in
// both schemes, the delivery log shows the three attempts, a manual redelivery sends it once more, and the
// metrics count the outcomes. Unknown and disabled endpoints are refused before anything is created.
func TestWebhookDeliveryRetriesUntilSuccess(t *testing.T) {
	t.Parallel()
	const attemptTimeout = time.Second
	f := newFixture(t, func(c *node.Config) { c.AllowPrivateTargets, c.WebhookAttemptTimeout = true, attemptTimeout })
	rc := &hookReceiver{script: []int{500, 0, 200}, stop: make(chan struct{})}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	defer close(rc.stop)
	ctx := context.Background()

	if r := call(t, "GET", f.base+"/webhooks", f.keyB, nil); r.status != 403 {
		t.Fatalf("list without webhooks:read: %d", r.status)
	}
	r := jsonCall(t, "POST", f.base+"/webhooks", f.keyA, map[string]any{"url": srv.URL + "/hook"})
	var ep struct {
		ID, URL, SigningSecret string `json:"-"`
	}
	var created map[string]any
	_ = json.Unmarshal(r.body, &created)
	if r.status != 201 || created["enabled"] != true {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	ep.ID, _ = created["id"].(string)
	ep.SigningSecret, _ = created["signing_secret"].(string)
	if !strings.HasPrefix(ep.ID, "wh_") || len(ep.ID) != 35 || !strings.HasPrefix(ep.SigningSecret, "whsec_") {
		t.Fatalf("created %s", r.body)
	}
	list := call(t, "GET", f.base+"/webhooks", f.keyA, nil)
	if list.status != 200 || !bytes.HasPrefix(list.body, []byte("[{")) || bytes.Contains(list.body, []byte("whsec_")) {
		t.Fatalf("list: %d %s (a bare array without secrets)", list.status, list.body)
	}

	img := photo(t, 800, 600, 7)
	_, heldBefore := balance(t, f, f.orgA)
	if r := post(t, f.base+"/watermarks/images/async?webhook_id=wh_"+strings.Repeat("0", 32), f.keyA, "", img, `{"a":1}`); r.status != 404 || decodeProblem(t, r).Code != "webhook_not_found" {
		t.Fatalf("unknown webhook: %d %s", r.status, r.body)
	}
	if _, held := balance(t, f, f.orgA); held != heldBefore {
		t.Fatalf("a refused request held credits: %d -> %d", heldBefore, held)
	}
	r = post(t, f.base+"/watermarks/images/async?webhook_id="+ep.ID, f.keyA, "", img, `{"a":1}`)
	if r.status != 202 {
		t.Fatalf("async embed with webhook: %d %s", r.status, r.body)
	}
	rc0 := decodeReceipt(t, r)
	if res := waitResult(t, f, f.keyA, rc0.ResultURL); res.status != 200 {
		t.Fatalf("result %d", res.status)
	}
	// Attempt 1 (500): the job's announcement reaches the outbox on the sweep that ticks the job, or the next.
	for i := 0; i < 3 && rc.count() == 0; i++ {
		if _, _, err := f.n.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if rc.count() != 1 {
		t.Fatalf("first attempt: receiver saw %d requests", rc.count())
	}
	f.n.Sweep(ctx) // not due yet: nothing
	if rc.count() != 1 {
		t.Fatalf("retried before its wait: %d", rc.count())
	}
	f.clk.Advance(30 * time.Second) // attempt 2: no answer
	started := time.Now()
	f.n.Sweep(ctx)
	// The attempt waits the configured timeout, not the default one.
	if took := time.Since(started); rc.count() != 2 || took < attemptTimeout || took >= webhooks.AttemptTimeout {
		t.Fatalf("second attempt: %d requests after %s, want 2 after %s (the configured timeout)", rc.count(), took, attemptTimeout)
	}
	f.clk.Advance(2 * time.Minute) // attempt 3: 200
	f.n.Sweep(ctx)
	f.clk.Advance(10 * time.Minute)
	f.n.Sweep(ctx) // delivered: no fourth attempt
	if rc.count() != 3 {
		t.Fatalf("receiver saw %d requests, want 3", rc.count())
	}
	for i := range 3 {
		if !bytes.Equal(rc.bodies[i], rc.bodies[0]) {
			t.Fatalf("attempt %d sent another body", i+1)
		}
		get := rc.headers[i].Get
		at := time.Unix(0, 0)
		if ts := get("webhook-timestamp"); ts != "" {
			var sec int64
			json.Unmarshal([]byte(ts), &sec)
			at = time.Unix(sec, 0)
		}
		if whsign.VerifyStandard(ep.SigningSecret, get, rc.bodies[i], at) != nil || whsign.VerifyEtchv(ep.SigningSecret, get, rc.bodies[i], at) != nil {
			t.Fatalf("attempt %d does not verify: %v", i+1, rc.headers[i])
		}
		if get("X-Request-ID") != rc0.RequestID {
			t.Fatalf("X-Request-ID %q", get("X-Request-ID"))
		}
	}
	var raw map[string]any
	if err := json.Unmarshal(rc.bodies[0], &raw); err != nil {
		t.Fatal(err)
	}
	data, _ := raw["data"].(map[string]any)
	if raw["type"] != "watermark.embed.succeeded" || raw["api_version"] == nil || raw["created_at"] == nil ||
		raw["id"] != rc.headers[0].Get("X-Etchv-Event-ID") || data["request_id"] != rc0.RequestID || data["watermark_id"] == nil {
		t.Fatalf("event %s", rc.bodies[0])
	}
	evtID := raw["id"].(string)

	dl := call(t, "GET", f.base+"/webhooks/"+ep.ID+"/deliveries", f.keyA, nil)
	var page struct {
		Data []struct {
			ID, RequestID, Status string `json:"-"`
			Attempts              int    `json:"attempts"`
			History               []struct {
				StatusCode *int    `json:"status_code"`
				Error      *string `json:"error"`
			} `json:"history"`
		} `json:"data"`
		NextCursor *string `json:"next_cursor"`
	}
	var pageRaw struct {
		Data []map[string]any `json:"data"`
	}
	json.Unmarshal(dl.body, &page)
	json.Unmarshal(dl.body, &pageRaw)
	if dl.status != 200 || len(page.Data) != 1 || page.NextCursor != nil || pageRaw.Data[0]["id"] != evtID || pageRaw.Data[0]["status"] != "delivered" || page.Data[0].Attempts != 3 {
		t.Fatalf("deliveries: %d %s", dl.status, dl.body)
	}
	h := page.Data[0].History
	if len(h) != 3 || h[0].StatusCode == nil || *h[0].StatusCode != 500 || h[1].StatusCode != nil || h[1].Error == nil ||
		h[2].StatusCode == nil || *h[2].StatusCode != 200 || h[2].Error != nil {
		t.Fatalf("history %s", dl.body)
	}
	if r := call(t, "GET", f.base+"/webhooks/"+ep.ID+"/deliveries?after="+evtID, f.keyA, nil); r.status != 200 || !bytes.Contains(r.body, []byte(`"data":[]`)) {
		t.Fatalf("page after the last event: %d %s", r.status, r.body)
	}
	// A cursor that is no event id, or a limit out of range, is refused (the storage log's checks are the same).
	wantProblem(t, "deliveries after a delivery id", call(t, "GET", f.base+"/webhooks/"+ep.ID+"/deliveries?after=std_1", f.keyA, nil), 422, "invalid_cursor")
	wantProblem(t, "deliveries with limit 101", call(t, "GET", f.base+"/webhooks/"+ep.ID+"/deliveries?limit=101", f.keyA, nil), 422, "invalid_request")
	// Parameters sent empty are not sent (every list's rule): the first page.
	if r := call(t, "GET", f.base+"/webhooks/"+ep.ID+"/deliveries?limit=&after=", f.keyA, nil); r.status != 200 || !bytes.Contains(r.body, []byte(evtID)) {
		t.Fatalf("deliveries with empty limit and after: %d %s", r.status, r.body)
	}

	rd := call(t, "POST", f.base+"/webhooks/"+ep.ID+"/deliveries/"+evtID+"/redeliver", f.keyA, nil)
	if rd.status != 202 {
		t.Fatalf("redeliver: %d %s", rd.status, rd.body)
	}
	f.n.Sweep(ctx)
	if rc.count() != 4 || !bytes.Equal(rc.bodies[3], rc.bodies[0]) {
		t.Fatalf("redelivery: receiver saw %d requests", rc.count())
	}

	// Disabled: a request naming it is refused and creates nothing.
	if r := jsonCall(t, "PATCH", f.base+"/webhooks/"+ep.ID, f.keyA, map[string]any{"enabled": false}); r.status != 200 || !bytes.Contains(r.body, []byte(`"enabled":false`)) {
		t.Fatalf("disable: %d %s", r.status, r.body)
	}
	if r := post(t, f.base+"/watermarks/images/async?webhook_id="+ep.ID, f.keyA, "", img, `{"b":1}`); r.status != 404 {
		t.Fatalf("disabled webhook: %d %s", r.status, r.body)
	}
	m := call(t, "GET", f.base+"/metrics", "", nil)
	for _, want := range []string{`filigrane_webhook_deliveries_total{outcome="delivered"} 2`, `filigrane_webhook_deliveries_total{outcome="failed"} 2`, "filigrane_webhook_queue_age_seconds_count 4"} {
		if !bytes.Contains(m.body, []byte(want)) {
			t.Fatalf("metrics lack %q", want)
		}
	}
	if r := call(t, "DELETE", f.base+"/webhooks/"+ep.ID, f.keyA, nil); r.status != 204 {
		t.Fatalf("delete: %d", r.status)
	}
	if r := call(t, "GET", f.base+"/webhooks/"+ep.ID, f.keyA, nil); r.status != 404 {
		t.Fatalf("deleted endpoint: %d", r.status)
	}
}

// TestWebhookEndpointManagement: ten endpoints per organization, the secret shown only at creation and
// rotation, unknown fields and bad URLs refused, other organizations see nothing; a url or description with a
// hidden character refused naming it, and one described before that rule still shown and changed.
func TestWebhookEndpointManagement(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var first map[string]any
	for i := range 10 {
		r := jsonCall(t, "POST", f.base+"/webhooks", f.keyA, map[string]any{"url": "https://hooks.example.com/" + string(rune('a'+i))})
		if r.status != 201 {
			t.Fatalf("endpoint %d: %d %s", i+1, r.status, r.body)
		}
		if i == 0 {
			json.Unmarshal(r.body, &first)
		}
	}
	if r := jsonCall(t, "POST", f.base+"/webhooks", f.keyA, map[string]any{"url": "https://hooks.example.com/11"}); r.status != 422 {
		t.Fatalf("11th endpoint: %d %s", r.status, r.body)
	}
	for _, bad := range []map[string]any{{"url": "ftp://x.example/"}, {"url": "https://u:p@x.example/"}, {"url": "https://x.example/", "events": []string{"nope"}}} {
		if r := jsonCall(t, "POST", f.base+"/webhooks", f.keyA, bad); r.status != 422 {
			t.Fatalf("bad endpoint %v: %d %s", bad, r.status, r.body)
		}
	}
	id := first["id"].(string)
	if r := jsonCall(t, "PATCH", f.base+"/webhooks/"+id, f.keyA, map[string]any{"secret": "x"}); r.status != 422 || decodeProblem(t, r).Code != "invalid_request" {
		t.Fatalf("unknown field: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", f.base+"/webhooks/"+id, f.keyA, nil); r.status != 200 || bytes.Contains(r.body, []byte("whsec_")) {
		t.Fatalf("get shows the secret: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", f.base+"/webhooks/"+id, f.keyExpiring, nil); r.status != 404 {
		t.Fatalf("other organization reads the endpoint: %d", r.status)
	}
	rot := call(t, "POST", f.base+"/webhooks/"+id+"/rotate-secret", f.keyA, nil)
	var rotated map[string]any
	json.Unmarshal(rot.body, &rotated)
	if rot.status != 200 || rotated["signing_secret"] == first["signing_secret"] || rotated["previous_secret_expires_at"] != "2026-05-05T10:00:30Z" {
		t.Fatalf("rotate: %d %s", rot.status, rot.body)
	}
	f.clk.Advance(24 * time.Hour)
	if r := call(t, "GET", f.base+"/webhooks/"+id, f.keyA, nil); !bytes.Contains(r.body, []byte(`"previous_secret_expires_at":null`)) {
		t.Fatalf("overlap did not end after 24 h: %s", r.body)
	}

	// (A new minute of the trial plan's 20 requests.) A url or description that holds a character which shows nothing or reorders the text around it
	// (internal/hiddenchar) is refused naming it, on create and on change, and changes nothing.
	for _, bad := range []struct {
		method, path string
		body         map[string]any
		char         string
	}{
		{"POST", "/webhooks", map[string]any{"url": "https://x.example/", "description": "billing \u202egnp.exe"}, "U+202E"},
		{"POST", "/webhooks", map[string]any{"url": "https://x.example/?to=\u200bops"}, "U+200B"},
		{"PATCH", "/webhooks/" + id, map[string]any{"description": "line\u2028break"}, "U+2028"},
		{"PATCH", "/webhooks/" + id, map[string]any{"url": "https://hooks.example.com/\u2066a", "enabled": false}, "U+2066"},
	} {
		r := jsonCall(t, bad.method, f.base+bad.path, f.keyA, bad.body)
		if p := decodeProblem(t, r); r.status != 422 || p.Code != "invalid_request" || !strings.Contains(p.Detail, bad.char) {
			t.Fatalf("%s %s %+q: %d %s, want 422 invalid_request naming %s", bad.method, bad.path, bad.body, r.status, r.body, bad.char)
		}
	}
	if _, got := jsonObject(t, "GET", f.base+"/webhooks/"+id, f.keyA, nil); got["description"] != "" || got["enabled"] != true || got["url"] != first["url"] {
		t.Fatalf("a refused change changed the endpoint: %v", got)
	}
	// An endpoint described before that rule still loads, shows its description as stored, and takes changes
	// to its other fields.
	recordtest.Rewrite(t, f.n.Store(), "webhooks/"+f.orgA, func(rec *webhooks.OrgEndpoints) {
		eps := append([]webhooks.Endpoint(nil), rec.Endpoints...)
		eps[0].Description = "billing \u202egnp.exe"
		rec.Endpoints = eps
	})
	if r, got := jsonObject(t, "PATCH", f.base+"/webhooks/"+id, f.keyA, map[string]any{"enabled": false}); r.status != 200 ||
		got["description"] != "billing \u202egnp.exe" || got["enabled"] != false {
		t.Fatalf("changing an endpoint described before the rule: %d %s", r.status, r.body)
	}
}
